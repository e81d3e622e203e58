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
	"github.com/tallyd/tallyd/store"
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

// budgetMemory is the memory figures /metrics would show now.
func budgetMemory(t *testing.T, ts *testServer) (mem stats.Memory) {
	t.Helper()
	ts.onLoop(t, func() { mem = ts.snapshot(time.Now()).Memory })
	return mem
}

// answered returns o's reply if it has come, else nil.
func answered(o op) *slockReply {
	select {
	case r := <-o.ch:
		return r
	default:
		return nil
	}
}

// Issue 21 item 2: requests queued with a data record count against the budget, with the
// request itself; beyond it a new one is refused (UNKNOWN_ERROR, -OOM) and so are other
// clients' writes. Once their connection has closed, they give way to the next write,
// oldest first, with a TIMEOUT, before anyone is refused.
func TestMemoryCountsQueuedData(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxMemory = 16 << 20 })
	h := dialSlock(t, ts.slockAddr)
	k := key16("held")
	newLock(h, k, 0, 0xFFFF|tfVersion).Lock().want(slock.ResultOK)
	base := budgetMemory(t, ts).Store

	w := dialSlock(t, ts.slockAddr)
	data := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, make([]byte, 1<<20-64))
	var ops []op
	for range 40 {
		ops = append(ops, newLock(w, k, 3600, 10).send(slock.TypeLock, 0, data))
	}
	w.ping() // every Lock before it has been served
	queued, refused := 0, 0
	for _, o := range ops {
		switch r := answered(o); {
		case r == nil:
			queued++
		case r.Result == slock.ResultUnknownError:
			refused++
		default:
			t.Fatalf("a Lock queued behind a holder: %v", r)
		}
	}
	counted := int64(budgetMemory(t, ts).Store - base)
	t.Logf("40 Locks with 1 MiB of data on a held key: %d queued, %d refused; %d bytes counted", queued, refused, counted)
	if queued < 10 || queued > 17 || refused != 40-queued {
		t.Fatalf("16 MiB budget, 40 queued Locks of 1 MiB: %d queued, %d refused", queued, refused)
	}
	if counted < int64(queued)<<20 {
		t.Fatalf("%d requests of 1 MiB queued, %d bytes counted", queued, counted)
	}
	// Another client's writes meet the budget the queued data fills: within what is left.
	r := dialResp(t, ts.slockAddr)
	v := strings.Repeat("v", 100_000)
	sets := 0
	for ; sets < 40; sets++ {
		rep := r.cmd("SET", "other"+strconv.Itoa(sets), v)
		if rep.Kind == '-' {
			expectSimple(t, rep, '-', oomText)
			break
		}
	}
	if sets > 20 {
		t.Fatalf("with %d MiB queued under a 16 MiB budget, %d SETs of 100 kB were stored", queued, sets)
	}

	// The requests outlive their connection; the next writes make them give way.
	conns := func() (n int) { ts.onLoop(t, func() { n = len(ts.ct.conns) }); return n }
	open := conns()
	_ = w.c.Close()
	deadline := time.Now().Add(replyWait)
	for conns() == open {
		if time.Now().After(deadline) {
			t.Fatal("the waiters' connection is not seen closed")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 5 {
		expectSimple(t, r.cmd("SET", "after"+strconv.Itoa(i), strings.Repeat("a", 1_000_000)), '+', "OK")
	}
	var st store.LockState
	ts.onLoop(t, func() { st, _ = ts.st.locks.State(0) })
	t.Logf("%d SETs of 100 kB stored before -OOM; once the waiters' connection closed, 5 SETs of 1 MB made %d give way",
		sets, queued-int(st.WaitCount))
	if st.WaitCount == 0 || int(st.WaitCount) >= queued-3 {
		t.Fatalf("%d requests still queued of %d: want the oldest gone, as many as the writes needed", st.WaitCount, queued)
	}
	ts.healthy(t)
}

// Issue 21 item 2: beyond the budget, an Unlock carrying a data record that may add data
// is refused (UNKNOWN_ERROR, -OOM): each could add a 1 MiB value to a key another holder
// keeps, or attach an EXECUTE to a holder that keeps a level. A plain Unlock, or one whose
// record only shrinks the value, still works.
func TestMemoryUnlockDataRefused(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxMemory = 16 << 20 })
	b := dialSlock(t, ts.slockAddr)
	big := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, make([]byte, 1<<20-64))
	// Keys held twice (Count 1 admits a second holder): unlocking one with a SET keeps it.
	type pair struct{ a, b *sLock }
	var pairs []pair
	for i := range 40 {
		k := key16("u" + strconv.Itoa(i))
		p := pair{newLock(b, k, 0, 0xFFFF|tfVersion), newLock(b, k, 0, 0xFFFF|tfVersion)}
		p.a.count, p.b.count = 1, 1
		p.a.Lock().want(slock.ResultOK)
		p.b.Lock().want(slock.ResultOK)
		pairs = append(pairs, p)
	}
	set, refused := 0, 0
	for _, p := range pairs {
		switch r := p.a.send(slock.TypeUnlock, 0, big).reply(); r.Result {
		case slock.ResultOK:
			set++
		case slock.ResultUnknownError:
			refused++
		default:
			t.Fatalf("unlock with a SET: %v", r)
		}
	}
	t.Logf("40 Unlocks with a 1 MiB SET on keys held twice: %d set, %d refused", set, refused)
	if set < 10 || set > 17 {
		t.Fatalf("16 MiB budget: %d Unlocks with 1 MiB of data applied, %d refused", set, refused)
	}
	// A reentrant holder with two levels: an Unlock of one level attaching a 1 MiB EXECUTE.
	re := newRLock(b, key16("re"), 0, 0xFFFF|tfVersion)
	exec := slock.AppendDataRecord(nil, slock.DataExecute, slock.StageUnlock, 0, nil, make([]byte, 1<<20-64))
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 1 << 40 })
	re.Lock().want(slock.ResultOK)
	re.Lock().want(slock.ResultOK)
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 16 << 20 })
	re.send(slock.TypeUnlock, 0, exec).want(slock.ResultUnknownError)

	// What gives memory back still works: a plain Unlock, and one whose record unsets.
	pairs[set].a.Unlock().want(slock.ResultOK)
	unset := slock.AppendDataRecord(nil, slock.DataUnset, slock.StageCurrent, 0, nil, nil)
	pairs[0].b.send(slock.TypeUnlock, 0, unset).want(slock.ResultOK)
	re.Unlock().want(slock.ResultOK)

	// Text: UNLOCK with a SET answers -OOM and keeps the lock; without data it unlocks.
	r := dialResp(t, ts.slockAddr)
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 1 << 40 })
	for _, id := range []string{"t1", "t2"} {
		if got := r.cmd("LOCK", "tk", "LOCK_ID", id, "COUNT", "2", "EXPRIED", "100"); got.Kind != '*' || string(got.Elems[1].Str) != "OK" {
			t.Fatalf("LOCK tk LOCK_ID %s: %s", id, showResp(got))
		}
	}
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 1 << 20 }) // the store alone is over it
	expectSimple(t, r.cmd("UNLOCK", "tk", "LOCK_ID", "t1", "SET", strings.Repeat("v", 1000)), '-', oomText)
	if got := r.cmd("UNLOCK", "tk", "LOCK_ID", "t1"); got.Kind != '*' || string(got.Elems[1].Str) != "OK" {
		t.Fatalf("plain UNLOCK over the budget: %s", showResp(got))
	}
	ts.healthy(t)
}

// Issue 21 item 3: released counters keep their name and interval maximum for Dump, but
// under pressure they give way, oldest first, before anyone is refused: one client filling
// the budget with counters and leaving does not lock the others out until the interval
// ends. Held counters are never evicted.
func TestMemoryReleasedCountersGiveWay(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxMemory = 16 << 20 })
	cl := dial(t, ts.counterAddr)
	name := func(i int) string { return strconv.Itoa(i) + strings.Repeat("n", 65000) }
	held := 0
	for ; held < 400; held++ {
		f := cl.acquire(name(held), 1, 1)
		if f.Status == counter.StatusOutOfMemory {
			break
		}
		expectStatus(t, f, counter.StatusOK)
	}
	if held < 200 || held == 400 {
		t.Fatalf("16 MiB budget: %d counters of 65 kB names acquired before Out of memory", held)
	}
	other := dial(t, ts.counterAddr)
	expectStatus(t, other.acquire("fresh", 1, 1), counter.StatusOutOfMemory) // held ones stay
	// A first share of an existing counter adds to the ledger: refused too. The holder
	// adding to its own share is served.
	expectStatus(t, other.acquire(name(0), 1, 5), counter.StatusOutOfMemory)
	expectStatus(t, cl.acquire(name(0), 1, 5), counter.StatusOK)
	expectStatus(t, cl.release(name(0), 1), counter.StatusOK)
	r := dialResp(t, ts.slockAddr)
	expectSimple(t, r.cmd("SET", "k", "v"), '-', oomText)

	_ = cl.c.Close() // its counters are released, their records kept for the interval
	deadline := time.Now().Add(replyWait)
	for {
		f := other.acquire("fresh", 1, 1)
		if f.Status == counter.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another client's new counter after the first one left: status %v", f.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectSimple(t, r.cmd("SET", "k", "v"), '+', "OK")
	// The oldest released went first, as few as needed; the newest are still there with
	// their consumption 0.
	expectStatus(t, other.get(name(0)), counter.StatusNotFound)
	expectStatus(t, other.get(name(held/2)), counter.StatusOK)
	expectStatus(t, other.get(name(held-1)), counter.StatusOK)
}
