package loop

import (
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
)

// fillKeys sets n keys k:0 ... k:n-1 through rc.
func fillKeys(t *testing.T, rc *respClient, n int) {
	t.Helper()
	var batch []byte
	sent := 0
	for i := range n {
		batch = resp.AppendCommand(batch, "SET", "k:"+strconv.Itoa(i), "v")
		if len(batch) > 64<<10 || i == n-1 {
			rc.write(batch)
			batch = batch[:0]
			for ; sent <= i; sent++ {
				if r := rc.reply(); r.Kind != '+' {
					t.Fatalf("SET %d: %s", sent, showResp(r))
				}
			}
		}
	}
}

// Issue 21, item 1: one write of 2,000 pipelined KEYS over 100,000 keys froze every port for
// 16.7 s. A connection now gets a slice of each turn: while one client's burst of expensive
// commands (one write) is being served, other clients, on any port, are answered. The
// burst ends with SET done; the others look at done, and must see it unset: they were served
// while the burst was still going on. (Order, not time: on the old code the first reply of
// the burst comes out only after all of it has run.)
func TestFairnessBurstOfExpensiveCommands(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	fillKeys(t, rc, 20_000)
	const burst = 1000 // each KEYS examines 20,000 keys
	var b []byte
	for range burst {
		b = resp.AppendCommand(b, "KEYS", "zzz*")
	}
	b = resp.AppendCommand(b, "SET", "done", "1")
	attacker := dialResp(t, ts.slockAddr)
	attacker.write(b)
	if r := attacker.reply(); r.Kind != '*' || len(r.Elems) != 0 {
		t.Fatalf("first KEYS: %s", showResp(r))
	}
	// The burst has begun (its first reply is out). Another Redis-text client, and a
	// yrmcds client on the counter port, are answered before it is over.
	other := dialResp(t, ts.slockAddr)
	if r := other.cmd("GET", "done"); !r.Null {
		t.Fatalf("GET done answered only after the burst: %s", showResp(r))
	}
	yc := dial(t, ts.counterAddr)
	expectStatus(t, yc.simple(counter.OpNoop), counter.StatusOK)
	if r := other.cmd("GET", "done"); !r.Null {
		t.Fatalf("a yrmcds Noop was answered only after the burst: GET done %s", showResp(r))
	}
	// The burst's own replies keep their order, and all come.
	for i := 1; i < burst; i++ {
		if r := attacker.reply(); r.Kind != '*' || len(r.Elems) != 0 {
			t.Fatalf("KEYS %d: %s", i, showResp(r))
		}
	}
	expectSimple(t, attacker.reply(), '+', "OK")
	if r := other.cmd("GET", "done"); string(r.Str) != "1" {
		t.Fatalf("GET done after the burst: %s", showResp(r))
	}
}
