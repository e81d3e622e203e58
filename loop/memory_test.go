package loop

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/stats"
)

// Beyond --max-memory, what would add data is refused with each protocol's error, and what
// gives memory back still works.
func TestMemoryBudgetRefusesWrites(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxMemory = 16 << 20 })
	r := dialResp(t, ts.slockAddr)
	value := strings.Repeat("v", 1<<20-64)
	n := 0
	var refused resp.Reply
	for ; n < 64; n++ {
		rep := r.cmd("SET", "big"+strconv.Itoa(n), value)
		if rep.Kind != '+' {
			refused = rep
			break
		}
	}
	if n == 64 || n < 10 {
		t.Fatalf("16 MiB budget: %d SETs of 1 MiB stored before a refusal", n)
	}
	expectSimple(t, refused, '-', oomText)
	// The store alone over the budget (as after a restart with a smaller one): every kind of
	// write that adds data is refused.
	ts.onLoop(t, func() { ts.cfg.MaxMemory = int64(n) << 19 })
	expectSimple(t, r.cmd("INCR", "n"), '-', oomText)
	expectSimple(t, r.cmd("MSET", "a", "1", "b", "2"), '-', oomText)
	expectSimple(t, r.cmd("LOCK", "w", "WILL", "1", "SET", "x"), '-', oomText)
	if got := r.cmd("GET", "big0"); got.Kind != '$' || len(got.Str) != len(value) {
		t.Fatalf("GET over the budget: %s", showResp(got))
	}

	// Binary slock: a Lock answers UNKNOWN_ERROR, a WILL is answered UNKNOWN_ERROR.
	b := dialSlock(t, ts.slockAddr)
	newLock(b, key16("bk"), 0, 10).Lock().want(slock.ResultUnknownError)
	newLock(b, key16("bw"), 0, 10).send(slock.TypeWillLock, 0, nil).want(slock.ResultUnknownError)

	// yrmcds: a new counter is refused with Out of memory; an existing one still works.
	cl := dial(t, ts.counterAddr)
	expectStatus(t, cl.acquire("fresh", 1, 1), counter.StatusOutOfMemory)
	var mem stats.Memory
	ts.onLoop(t, func() { mem = ts.snapshot(time.Now()).Memory })
	if mem.Refused != 7 || mem.Store < uint64(n)<<20 || mem.Budget != uint64(n)<<19 {
		t.Errorf("metrics after 7 refusals with %d MiB stored: %+v", n, mem)
	}
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 16 << 20 })
	expectStatus(t, cl.acquire("old", 1, 5), counter.StatusOK)
	ts.onLoop(t, func() { ts.cfg.MaxMemory = int64(n) << 19 })
	expectStatus(t, cl.acquire("old", 1, 5), counter.StatusOK)
	expectStatus(t, cl.release("old", 2), counter.StatusOK)

	// Deleting gives memory back: writes work again.
	args := []string{"DEL"}
	for i := range n {
		args = append(args, "big"+strconv.Itoa(i))
	}
	if got := r.cmd(args...); got.Kind != ':' || got.Int != int64(n) {
		t.Fatalf("DEL: %s", showResp(got))
	}
	expectSimple(t, r.cmd("SET", "k", "v"), '+', "OK")
	expectStatus(t, cl.acquire("fresh", 1, 1), counter.StatusOK)
	newLock(b, key16("bk"), 0, 10).Lock().want(slock.ResultOK)
	ts.healthy(t)
}

// WILL commands are capped per connection, by count and by bytes, with an error.
func TestMemoryWillCaps(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.SlockMaxWills, c.SlockMaxWillBytes = 3, 2<<20 })
	r := dialResp(t, ts.slockAddr)
	for i := range 3 {
		expectSimple(t, r.cmd("LOCK", "w"+strconv.Itoa(i), "WILL", "1"), '+', "OK")
	}
	if got := r.cmd("LOCK", "w3", "WILL", "1"); got.Kind != '-' || !strings.Contains(string(got.Str), "slock-max-wills") {
		t.Fatalf("fourth WILL with --slock-max-wills 3: %s", showResp(got))
	}
	r2 := dialResp(t, ts.slockAddr)
	big := strings.Repeat("x", 900_000)
	expectSimple(t, r2.cmd("LOCK", "a", "WILL", "1", "SET", big), '+', "OK")
	expectSimple(t, r2.cmd("LOCK", "b", "WILL", "1", "SET", big), '+', "OK")
	if got := r2.cmd("LOCK", "c", "WILL", "1", "SET", big); got.Kind != '-' || !strings.Contains(string(got.Str), "slock-max-will-bytes") {
		t.Fatalf("third 900 kB WILL with --slock-max-will-bytes 2 MiB: %s", showResp(got))
	}
	b := dialSlock(t, ts.slockAddr)
	for i := range 3 {
		newLock(b, key16("bw"+strconv.Itoa(i)), 0, 10).send(slock.TypeWillLock, 0, nil).none(20e6)
	}
	newLock(b, key16("bw3"), 0, 10).send(slock.TypeWillLock, 0, nil).want(slock.ResultUnknownError)

	// The queued WILLs still run at close.
	_ = r.c.Close()
	b2 := dialSlock(t, ts.slockAddr)
	if rep := newLock(b2, key16("w2"), 0, 10).LockShow().reply(); rep.Result != slock.ResultUnownError {
		t.Fatalf("a queued WILL LOCK did not run at close: %v", rep.Result)
	}
	ts.healthy(t)
}

// A MULTI queue counts with the buffered input until EXEC or DISCARD.
func TestMemoryCountsMultiQueue(t *testing.T) {
	ts := startSlock(t, nil)
	r := dialResp(t, ts.slockAddr)
	input := func() uint64 {
		var mem stats.Memory
		ts.onLoop(t, func() { mem = ts.snapshot(time.Now()).Memory })
		return mem.Input
	}
	expectSimple(t, r.cmd("MULTI"), '+', "OK")
	v := strings.Repeat("q", 100_000)
	for i := range 3 {
		expectSimple(t, r.cmd("SET", "m"+strconv.Itoa(i), v), '+', "QUEUED")
	}
	if in := input(); in < 300_000 {
		t.Fatalf("three queued 100 kB SETs: input counted %d", in)
	}
	expectSimple(t, r.cmd("DISCARD"), '+', "OK")
	if in := input(); in != 0 {
		t.Fatalf("after DISCARD: input counted %d", in)
	}
	expectSimple(t, r.cmd("MULTI"), '+', "OK")
	expectSimple(t, r.cmd("SET", "m", v), '+', "QUEUED")
	_ = r.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for input() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the close: input counted %d", input())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
