package loop

// slock over real TCP: every client lock type with two or more clients. The client and the
// lock types are in slockclient_test.go; flags, results and data in slock_flags_test.go;
// connection behaviour in slock_conn_test.go; the Redis text protocol in slock_text_test.go.

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// startSlock runs a server with a slock listener (and the default counter ones).
func startSlock(t *testing.T, mod func(*Config)) *testServer {
	t.Helper()
	return startServer(t, func(c *Config) {
		c.Listeners = append(c.Listeners, Listener{Proto: ProtoSlock, Addr: "127.0.0.1:0"})
		if mod != nil {
			mod(c)
		}
	})
}

// healthy checks the server still serves a new connection and the lock store's invariants
// hold.
func (ts *testServer) healthy(t *testing.T) {
	t.Helper()
	c := dialSlock(t, ts.slockAddr)
	c.ping()
	var err error
	ts.onLoop(t, func() { err = ts.st.locks.Check() })
	if err != nil {
		t.Fatalf("lock store invariant: %v", err)
	}
}

// dial3 opens three binary connections, closed when t ends.
func dial3(t *testing.T, ts *testServer) (a, b, c *slockClient) {
	t.Helper()
	return dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
}

func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// expectLock checks the fields of a Lock/Unlock reply that every case fixes.
func expectLock(t testing.TB, r *slockReply, typ slock.Type, lockID, key [16]byte, lcount uint16, lrcount uint8) {
	t.Helper()
	if r.Type != typ || r.LockID != lockID || r.Key != key || r.Lcount != lcount || r.Lrcount != lrcount {
		t.Fatalf("reply %v: want type %s lock %x key %x lcount %d lrcount %d", r, typ, lockID, key, lcount, lrcount)
	}
	if (r.Flag == slock.FlagData) != (r.Value != nil) || r.Flag&^slock.FlagData != 0 {
		t.Fatalf("reply %v: byte 20 must be 0x20 exactly when a value follows", r)
	}
	for i, b := range r.Raw[60:64] {
		if b != 0 {
			t.Fatalf("reply %v: byte %d is %#x, want 0", r, 60+i, b)
		}
	}
}

// since is the time from start to when r arrived.
func since(start time.Time, r *slockReply) time.Duration { return r.At.Sub(start) }

func TestSlockLockTwoClients(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("lock-basic")

	la := newLock(a, key, 5, 10)
	r := la.Lock().want(slock.ResultOK)
	expectLock(t, r, slock.TypeLock, la.id, key, 1, 1)
	eq(t, "count", r.Count, 0)
	eq(t, "value", len(r.Value), 0)

	// Try-lock (Timeout 0) by another client: TIMEOUT at once, with the levels held.
	lb := newLock(b, key, 0, 10)
	expectLock(t, lb.Lock().want(slock.ResultTimeout), slock.TypeLock, lb.id, key, 1, 0)
	// Lock is not reentrant: the holder locking again gets LOCKED_ERROR.
	expectLock(t, la.Lock().want(slock.ResultLockedError), slock.TypeLock, la.id, key, 1, 1)
	// Unlock by a LockId that holds nothing: UNOWN_ERROR.
	expectLock(t, lb.Unlock().want(slock.ResultUnownError), slock.TypeUnlock, lb.id, key, 1, 0)

	// B waits; A's unlock hands the lock over.
	lb.timeout = 5
	w := lb.Lock()
	w.none(100 * time.Millisecond)
	expectLock(t, la.Unlock().want(slock.ResultOK), slock.TypeUnlock, la.id, key, 0, 0)
	expectLock(t, w.want(slock.ResultOK), slock.TypeLock, lb.id, key, 1, 1)

	// A waits with a 100 ms timeout and gets TIMEOUT, not before.
	la.timeout = ms(100)
	start := time.Now()
	r = la.Lock().want(slock.ResultTimeout)
	expectLock(t, r, slock.TypeLock, la.id, key, 1, 0)
	if d := since(start, r); d < 100*time.Millisecond || d > 2*time.Second {
		t.Fatalf("100 ms wait timed out after %v", d)
	}

	expectLock(t, lb.Unlock().want(slock.ResultOK), slock.TypeUnlock, lb.id, key, 0, 0)
	// The key is gone: unlocking it again is UNLOCK_ERROR with nothing held.
	expectLock(t, lb.Unlock().want(slock.ResultUnlockError), slock.TypeUnlock, lb.id, key, 0, 0)
	ts.healthy(t)
}

func TestSlockRLock(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("rlock")

	ra := newRLock(a, key, 5, 10)
	for i := 1; i <= 3; i++ {
		r := ra.Lock().want(slock.ResultOK)
		expectLock(t, r, slock.TypeLock, ra.id, key, uint16(i), uint8(i))
		eq(t, "rcount", r.Rcount, 0xff)
	}
	// A reentry with Expried 0 succeeds without adding a level.
	probe := &sLock{c: a, key: key, id: ra.id, timeout: 5, rcount: 0xff}
	expectLock(t, probe.Lock().want(slock.ResultOK), slock.TypeLock, ra.id, key, 3, 3)
	// Another RLock (its own LockId) is excluded while any level is held.
	newRLock(b, key, 0, 10).Lock().want(slock.ResultTimeout)
	w := newRLock(b, key, 5, 10).Lock()
	for i := 2; i >= 1; i-- {
		expectLock(t, ra.Unlock().want(slock.ResultOK), slock.TypeUnlock, ra.id, key, uint16(i), uint8(i))
		w.none(50 * time.Millisecond)
	}
	expectLock(t, ra.Unlock().want(slock.ResultOK), slock.TypeUnlock, ra.id, key, 0, 0)
	w.want(slock.ResultOK)

	// The reentry limit: levels may grow while they are <= Rcount (and below 255).
	k2 := key16("rlock-limit")
	l := newLock(a, k2, 5, 10)
	l.rcount = 2 // three levels
	for i := 1; i <= 3; i++ {
		l.Lock().want(slock.ResultOK)
	}
	expectLock(t, l.Lock().want(slock.ResultLockedError), slock.TypeLock, l.id, k2, 3, 3)
	// Unlock with Rcount 0 releases every level at once.
	l.rcount = 0
	expectLock(t, l.Unlock().want(slock.ResultOK), slock.TypeUnlock, l.id, k2, 0, 0)

	k3 := key16("rlock-255")
	r255 := newRLock(a, k3, 5, 10)
	for i := 1; i <= 255; i++ {
		r255.Lock().want(slock.ResultOK)
	}
	expectLock(t, r255.Lock().want(slock.ResultLockedError), slock.TypeLock, r255.id, k3, 255, 255)
	ts.healthy(t)
}

func TestSlockEvent(t *testing.T) {
	ts := startSlock(t, nil)

	t.Run("default-set", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("event-set")
		ea, eb, ec := newEvent(a, key, 5, 60, true), newEvent(b, key, 5, 60, true), newEvent(c, key, 5, 60, true)
		if !eb.IsSet() {
			t.Fatal("a default-set event starts set")
		}
		ea.Clear()
		ea.Clear() // clearing twice is fine (an Update of the holder)
		if eb.IsSet() {
			t.Fatal("cleared event reads as set")
		}
		w1, w2 := eb.Wait(5), ec.Wait(5)
		// A wait with a short timeout, queued behind them, times out alone.
		start := time.Now()
		r := eb.Wait(ms(60)).want(slock.ResultTimeout)
		if since(start, r) < 60*time.Millisecond {
			t.Fatalf("60 ms event wait gave up after %v", since(start, r))
		}
		w1.none(20 * time.Millisecond)
		ea.Set()
		// Every waiter wakes: they hold nothing (Expried 0).
		for _, w := range []op{w1, w2} {
			r := w.want(slock.ResultOK)
			if r.Lcount != 0 || r.Lrcount != 0 || r.Key != key {
				t.Fatalf("event waiter woken with %v", r)
			}
		}
		if !ec.IsSet() {
			t.Fatal("set event reads as cleared")
		}
		ea.Set() // setting twice is fine
		eb.Wait(5).want(slock.ResultOK)
	})

	t.Run("default-clear", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("event-clear")
		ea, eb, ec := newEvent(a, key, 5, 60, false), newEvent(b, key, 5, 60, false), newEvent(c, key, 5, 60, false)
		if eb.IsSet() {
			t.Fatal("a default-clear event starts cleared")
		}
		w1, w2 := eb.Wait(5), ec.Wait(5)
		w1.none(100 * time.Millisecond)
		ea.Set()
		w1.want(slock.ResultOK)
		w2.want(slock.ResultOK)
		if !eb.IsSet() {
			t.Fatal("set event reads as cleared")
		}
		ec.Wait(5).want(slock.ResultOK) // set: returns at once
		ea.Set()                        // twice is fine
		ea.Clear()
		if ec.IsSet() {
			t.Fatal("cleared event reads as set")
		}
		ea.Clear() // twice is fine
		start := time.Now()
		r := eb.Wait(ms(60)).want(slock.ResultTimeout)
		if since(start, r) < 60*time.Millisecond {
			t.Fatalf("60 ms event wait gave up after %v", since(start, r))
		}
	})
	ts.healthy(t)
}

func TestSlockSemaphore(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("semaphore")
	sa, sb := newSemaphore(a, key, 3, 5, 60), newSemaphore(b, key, 3, 5, 60)

	eq(t, "count of a free semaphore", sb.Count(), 0)
	first := sa.Acquire().want(slock.ResultOK)
	eq(t, "Count on the wire", first.Count, 2)
	sa.Acquire().want(slock.ResultOK)
	r := sb.Acquire().want(slock.ResultOK)
	eq(t, "lcount after three acquires", r.Lcount, 3)
	eq(t, "count", sb.Count(), 3)

	w := sb.Acquire()
	w.none(100 * time.Millisecond)
	newSemaphore(b, key, 3, 0, 60).Acquire().want(slock.ResultTimeout)
	// Release unlocks the oldest holder, whose LockId the reply shows.
	rel := sa.Release().want(slock.ResultOK)
	eq(t, "released LockId", rel.LockID, first.LockID)
	eq(t, "lcount after release", rel.Lcount, 2)
	w.want(slock.ResultOK)
	eq(t, "count", sa.Count(), 3)
	for i := 2; i >= 0; i-- {
		eq(t, "lcount", sb.Release().want(slock.ResultOK).Lcount, uint16(i))
	}
	sb.Release().want(slock.ResultUnlockError)
	eq(t, "count", sa.Count(), 0)
	ts.healthy(t)
}

func TestSlockRWLock(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("rwlock")
	rwa, rwb, rwc := newRWLock(a, key, 5, 60), newRWLock(b, key, 5, 60), newRWLock(c, key, 5, 60)

	rwa.RLock().want(slock.ResultOK)
	eq(t, "two readers", rwb.RLock().want(slock.ResultOK).Lcount, 2)
	newRWLock(c, key, 0, 60).Lock().want(slock.ResultTimeout) // a writer cannot try-lock
	wl := rwc.Lock()
	wl.none(100 * time.Millisecond)
	r3 := rwa.RLock() // a reader behind a queued writer waits (FIFO)
	r3.none(50 * time.Millisecond)
	rwa.RUnlock().want(slock.ResultOK)
	wl.none(50 * time.Millisecond)
	rwb.RUnlock().want(slock.ResultOK)
	eq(t, "writer levels", wl.want(slock.ResultOK).Lcount, 1)
	r3.none(50 * time.Millisecond)
	newRWLock(b, key, 0, 60).RLock().want(slock.ResultTimeout)
	rwc.Unlock().want(slock.ResultOK)
	r3.want(slock.ResultOK)
	rwb.RLock().want(slock.ResultOK)
	rwa.RUnlock().want(slock.ResultOK)
	eq(t, "last reader out", rwb.RUnlock().want(slock.ResultOK).Lcount, 0)
	ts.healthy(t)
}

func TestSlockMaxConcurrentFlow(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("max-flow")
	f1, f2 := newMaxConcurrentFlow(a, key, 2, 5, 60), newMaxConcurrentFlow(a, key, 2, 5, 60)
	f3 := newMaxConcurrentFlow(b, key, 2, 5, 60)

	f1.Acquire().want(slock.ResultOK)
	eq(t, "levels", f3.Acquire().want(slock.ResultOK).Lcount, 2)
	w := f2.Acquire()
	w.none(100 * time.Millisecond)
	f1.Acquire().want(slock.ResultLockedError) // one LockId per flow object: not reentrant
	start := time.Now()
	r := newMaxConcurrentFlow(b, key, 2, ms(60), 60).Acquire().want(slock.ResultTimeout)
	if since(start, r) < 60*time.Millisecond {
		t.Fatalf("60 ms flow wait gave up after %v", since(start, r))
	}
	f3.Release().want(slock.ResultOK)
	w.want(slock.ResultOK)
	f1.Release().want(slock.ResultOK)
	f2.Release().want(slock.ResultOK)
	f2.Release().want(slock.ResultUnlockError)
	ts.healthy(t)
}

func TestSlockTokenBucketFlow(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("token-bucket")
	fa, fb := newTokenBucketFlow(a, key, 2, 5, 300*time.Millisecond), newTokenBucketFlow(b, key, 2, 5, 300*time.Millisecond)

	t1 := fa.Acquire().want(slock.ResultOK)
	granted := time.Now()
	fb.Acquire().want(slock.ResultOK)
	w := fb.Acquire()
	w.none(100 * time.Millisecond)
	// The first token expires after its period: an EXPRIED push to its holder, and the
	// waiter gets the freed place.
	p := a.push("expiry of the first token")
	eq(t, "push result", p.Result, slock.ResultExpried)
	eq(t, "push RequestId", p.RequestID, t1.RequestID)
	eq(t, "push LockId", p.LockID, t1.LockID)
	if d := p.At.Sub(granted); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("300 ms token expired after %v", d)
	}
	if r := w.want(slock.ResultOK); r.At.Sub(granted) < 250*time.Millisecond {
		t.Fatalf("the waiter was admitted %v after the first token, before it expired", r.At.Sub(granted))
	}
	// Tokens are never unlocked: all three expire.
	b.push("expiry of the second token")
	b.push("expiry of the third token")
	st := a.state(0)
	eq(t, "expired", st.ExpriedCount, 3)
	eq(t, "keys left", st.KeyCount, 0)

	// A period of 3 s or more is sent in whole seconds.
	long := newTokenBucketFlow(a, key16("token-long"), 2, 5, 4500*time.Millisecond)
	long.Acquire().want(slock.ResultOK)
	ll := listLocked(t, a, 0, key16("token-long"))
	eq(t, "Expried", ll.Locks[0].Command.Expried, 5)
	eq(t, "ExpriedFlag", ll.Locks[0].Command.ExpriedFlag, 0)
	eq(t, "Count", ll.Locks[0].Command.Count, 1)
	ts.healthy(t)
}

func TestSlockPriorityLock(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("priority")

	h := newPriorityLock(a, key, 0, 5, 60)
	h.Lock().want(slock.ResultOK)
	h.Lock().want(slock.ResultLockedError) // Rcount is a priority: no reentry
	plain := newLock(b, key, 5, 60)
	pw := plain.Lock() // priority 0, first in time
	p1 := newPriorityLock(b, key, 1, 5, 60)
	w1 := p1.Lock()
	p5 := newPriorityLock(c, key, 5, 5, 60)
	w5 := p5.Lock()
	p3 := newPriorityLock(b, key, 3, 5, 60)
	w3 := p3.Lock()
	p5b := newPriorityLock(c, key, 5, 5, 60)
	w5b := p5b.Lock()
	w5b.none(50 * time.Millisecond)

	// Highest priority first, FIFO among equals, plain waiters last.
	order := []struct {
		l *sLock
		w op
	}{{p5, w5}, {p5b, w5b}, {p3, w3}, {p1, w1}, {plain, pw}}
	prev := h
	for i, o := range order {
		prev.Unlock().want(slock.ResultOK)
		expectLock(t, o.w.want(slock.ResultOK), slock.TypeLock, o.l.id, key, 1, 1)
		for _, rest := range order[i+1:] {
			rest.w.none(10 * time.Millisecond)
		}
		prev = o.l
	}
	prev.Unlock().want(slock.ResultOK)

	// A priority request above every waiting priority skips the queue when the grant rule
	// admits it; without the priority it queues.
	k2 := key16("priority-skip")
	shared := newLock(a, k2, 5, 60)
	shared.count = 1
	shared.Lock().want(slock.ResultOK)
	excl := newLock(b, k2, 5, 60).Lock() // Count 0: waits
	excl.none(30 * time.Millisecond)
	queued := newLock(c, k2, 5, 60)
	queued.count = 1
	qw := queued.Lock()
	qw.none(30 * time.Millisecond)
	skip := newPriorityLock(c, k2, 9, 5, 60)
	skip.count = 1
	eq(t, "levels after skipping the queue", skip.Lock().want(slock.ResultOK).Lcount, 2)
	ts.healthy(t)
}

func TestSlockTreeLock(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	root := newTreeLock(a, key16("tree-root"), 5, 60)
	child := root.NewChild()
	child.Lock()
	leaf1 := child.NewLeaf()
	leaf2 := (&sTreeLock{c: b, key: child.key, parent: root.key, timeout: 5, expried: 60}).NewLeaf()
	leaf1.Lock().want(slock.ResultOK)
	eq(t, "levels on the child", leaf2.Lock().want(slock.ResultOK).Lcount, 3) // marker + two leaves

	cw := (&sTreeLock{c: c, key: root.key}).Wait(5)
	cw.none(100 * time.Millisecond)
	// A leaf that is not the last: a plain unlock.
	expectLock(t, leaf1.Unlock().want(slock.ResultOK), slock.TypeUnlock, leaf1.l.id, child.key, 2, 0)
	a.noPush(50 * time.Millisecond)
	cw.none(10 * time.Millisecond)

	// The last leaf: the reply names the marker that is left (LockId = the parent), then
	// the server unlocks the marker, then the link on the root, each step with a RequestId
	// of its own, and the chain ends with an error on the next step up.
	r := leaf2.Unlock().want(slock.ResultOK)
	expectLock(t, r, slock.TypeUnlock, root.key, child.key, 1, 0)
	s1 := b.push("tree step 1: the marker")
	eq(t, "step 1 result", s1.Result, slock.ResultOK)
	eq(t, "step 1 type", s1.Type, slock.TypeUnlock)
	eq(t, "step 1 key (swapped)", s1.Key, root.key)
	eq(t, "step 1 LockId (swapped)", s1.LockID, child.key)
	s2 := b.push("tree step 2: the link on the root")
	eq(t, "step 2 result", s2.Result, slock.ResultOK)
	eq(t, "step 2 key (swapped)", s2.Key, child.key)
	eq(t, "step 2 LockId (swapped)", s2.LockID, root.key)
	s3 := b.push("tree step 3: nothing left")
	eq(t, "step 3 result", s3.Result, slock.ResultUnlockError)
	if s1.RequestID == r.RequestID || s2.RequestID == s1.RequestID || s3.RequestID == s2.RequestID {
		t.Fatalf("tree steps reuse RequestIds: %x %x %x %x", r.RequestID, s1.RequestID, s2.RequestID, s3.RequestID)
	}
	b.noPush(50 * time.Millisecond)
	cw.want(slock.ResultOK) // nothing below the root is held any more
	eq(t, "keys left", c.state(0).KeyCount, 0)
	ts.healthy(t)
}

func TestSlockGroupEvent(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("group-event")
	ctl := newGroupEvent(a, key, 1, 1, 5, 60)
	g1, g2 := newGroupEvent(b, key, 2, 1, 5, 60), newGroupEvent(c, key, 3, 1, 5, 60)

	if !g1.IsSet() {
		t.Fatal("a group event starts set")
	}
	ctl.Clear()
	if g1.IsSet() {
		t.Fatal("cleared group event reads as set")
	}
	o1, o2 := g1.Wait(5), g2.Wait(5)
	o1.none(100 * time.Millisecond)

	// Wakeup: every waiter wakes, and the event stays cleared at the next version.
	ctl.Wakeup()
	eq(t, "version after wakeup", ctl.version, 2)
	o1.want(slock.ResultOK)
	o2.want(slock.ResultOK)
	eq(t, "waiter's version", g1.version, 2)
	again := a.push("the requeued holder's grant")
	eq(t, "requeue result", again.Result, slock.ResultOK)
	eq(t, "requeue LockId", again.LockID, groupLockID(2, 1))
	if g1.IsSet() {
		t.Fatal("group event reads as set after a wakeup")
	}
	// A client still at version 1 missed that wakeup: its wait succeeds at once and names
	// the holder's version.
	stale := newGroupEvent(c, key, 4, 1, 5, 60)
	r := stale.Wait(5).want(slock.ResultOK)
	eq(t, "stale wait's LockId", r.LockID, groupLockID(2, 1))
	eq(t, "stale client's version", stale.version, 2)

	o3 := g1.Wait(5)
	o3.none(100 * time.Millisecond)
	ctl.Set()
	o3.want(slock.ResultOK)
	if !g2.IsSet() {
		t.Fatal("set group event reads as cleared")
	}
	ts.healthy(t)
}

// listLocked runs LIST_LOCKED for key in db, which must succeed.
func listLocked(t *testing.T, c *slockClient, db uint32, key [16]byte) *slock.ListLocked {
	t.Helper()
	r := c.call(slock.MethodListLocked, slock.AppendListRequest(nil, db, key[:]))
	if r.Result != slock.ResultOK {
		t.Fatalf("LIST_LOCKED %x: %v err %q", key, r, r.ErrType)
	}
	ll, err := slock.ParseListLockedResponse(r.Body)
	if err != nil {
		t.Fatalf("LIST_LOCKED body: %v", err)
	}
	return ll
}

// listWait runs LIST_WAIT for key in db, which must succeed.
func listWait(t *testing.T, c *slockClient, db uint32, key [16]byte) *slock.ListWait {
	t.Helper()
	r := c.call(slock.MethodListWait, slock.AppendListRequest(nil, db, key[:]))
	if r.Result != slock.ResultOK {
		t.Fatalf("LIST_WAIT %x: %v err %q", key, r, r.ErrType)
	}
	lw, err := slock.ParseListWaitResponse(r.Body)
	if err != nil {
		t.Fatalf("LIST_WAIT body: %v", err)
	}
	return lw
}

// le64 is v as 8 little-endian bytes.
func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

// le32 is v as 4 little-endian bytes.
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
