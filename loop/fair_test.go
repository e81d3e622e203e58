package loop

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/stats"
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
	burst := 3000 // each KEYS examines 20,000 keys: seconds of loop time in all
	if raceEnabled {
		burst = 600 // as long in time under the detector, a fifth of the garbage
	}
	var b []byte
	for range burst {
		b = resp.AppendCommand(b, "KEYS", "zzz*")
	}
	b = resp.AppendCommand(b, "SET", "done", "1")
	attacker := dialResp(t, ts.slockAddr)
	// The others are connected (and served once) before the burst, so that nothing but the
	// loop's fairness stands between their next command and its answer.
	other := dialResp(t, ts.slockAddr)
	if r := other.cmd("GET", "done"); !r.Null {
		t.Fatalf("GET done before the burst: %s", showResp(r))
	}
	yc := dial(t, ts.counterAddr)
	expectStatus(t, yc.simple(counter.OpNoop), counter.StatusOK)
	attacker.write(b)
	if r := attacker.reply(); r.Kind != '*' || len(r.Elems) != 0 {
		t.Fatalf("first KEYS: %s", showResp(r))
	}
	// The burst has begun (its first reply is out). Another Redis-text client, and a
	// yrmcds client on the counter port, are answered before it is over.
	if r := other.cmd("GET", "done"); !r.Null {
		t.Fatalf("GET done answered only after the burst: %s", showResp(r))
	}
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

// infoLine returns field name of an INFO text, "" if absent.
func infoLine(info, name string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

// Issue 21, item 1: operators see a stall. INFO's Latency section and /metrics give the
// longest turn of the loop and how many passed 1 ms, 10 ms, 100 ms and 1 s, and how often a
// connection's slice ran out; here a transaction that walks 20,000 keys ten times holds the
// loop several milliseconds in one turn, and a burst of KEYS yields.
func TestLoopStallFigures(t *testing.T) {
	ms := startMetrics(t, stats.HTTPConfig{}, nil)
	rc := dialResp(t, ms.slockAddr)
	fillKeys(t, rc, 20_000)
	var cmds [][]string
	for range 10 {
		cmds = append(cmds, []string{"KEYS", "zzz*"})
	}
	if _, exec := multi(t, rc, cmds); exec.Kind != '*' || len(exec.Elems) != 10 {
		t.Fatalf("EXEC of 10 KEYS: %s", showResp(exec))
	}
	var b []byte
	for range 20 {
		b = resp.AppendCommand(b, "KEYS", "zzz*")
	}
	rc.write(b)
	for range 20 {
		rc.reply()
	}
	info := string(rc.cmd("INFO", "latency").Str)
	if !strings.HasPrefix(info, "# Latency\r\n") {
		t.Fatalf("INFO latency: %q", info)
	}
	atoi := func(name string) int64 {
		v, err := strconv.ParseInt(infoLine(info, name), 10, 64)
		if err != nil {
			t.Fatalf("INFO %s: %q", name, infoLine(info, name))
		}
		return v
	}
	if atoi("loop_turn_max_usec") < 1000 || atoi("loop_turns_over_1ms") < 1 || atoi("loop_turns") < 10 ||
		atoi("conn_slices_yielded") < 1 || atoi("conn_slice_usec") != 1000 {
		t.Fatalf("INFO latency after a long EXEC and a burst of KEYS:\n%s", info)
	}
	s := scrape(t, ms.base)
	if s["tallyd_loop_turn_max_seconds"] < 0.001 || s[`tallyd_loop_turn_seconds_bucket{le="0.001"}`] >= s["tallyd_loop_turn_seconds_count"] ||
		s["tallyd_loop_yields_total"] < 1 {
		t.Fatalf("/metrics: max turn %v s, turns %v (%v at most 1 ms), yields %v", s["tallyd_loop_turn_max_seconds"],
			s["tallyd_loop_turn_seconds_count"], s[`tallyd_loop_turn_seconds_bucket{le="0.001"}`], s["tallyd_loop_yields_total"])
	}
}

// KEYS over more keys than one step walks them across turns: every key with a value for the
// whole walk is listed once, even while another client deletes keys meanwhile (a deletion
// moves a key down the value table, where the walk may meet it again).
func TestKeysAcrossTurns(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	const n = 20_000
	fillKeys(t, rc, n)
	if r := rc.cmd("KEYS", "k:1*"); len(r.Elems) != 11_111 {
		t.Fatalf("KEYS k:1*: %d names, want 11,111", len(r.Elems))
	}
	other := dialResp(t, ts.slockAddr)
	var dels []byte
	for i := 0; i < n; i += 20 {
		dels = resp.AppendCommand(dels, "DEL", "k:"+strconv.Itoa(i))
	}
	for range 5 {
		rc.send("KEYS", "*")
		other.write(dels)
		for i := 0; i < n; i += 20 {
			other.reply()
		}
		r := rc.reply()
		seen := make(map[string]bool, len(r.Elems))
		for _, e := range r.Elems {
			if seen[string(e.Str)] {
				t.Fatalf("KEYS * listed %s twice", e.Str)
			}
			seen[string(e.Str)] = true
		}
		for i := range n {
			if k := "k:" + strconv.Itoa(i); i%20 != 0 && !seen[k] {
				t.Fatalf("KEYS * missed %s, which had a value all along", k)
			}
		}
		fillKeys(t, rc, n) // the deleted keys back, for the next round
	}
}
