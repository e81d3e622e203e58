package client_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
)

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitLost waits for k's Lost (a hang fails the test) and returns Err.
func waitLost(t *testing.T, k *client.Lock, what string) error {
	t.Helper()
	select {
	case <-k.Lost():
		return k.Err()
	case <-time.After(10 * time.Second):
		t.Fatalf("Lost never closed: %s", what)
		return nil
	}
}

// Lost closes at the deadline of a lock nobody refreshes: ttl after its
// LOCK was sent, less the drift margin, never before; by then the server
// still has it (its ttl counts from its grant), so no one else was
// granted it before Lost closed.
func TestLockLostAtDeadline(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, startTallyd(t, "a", nil))
	l := c.Locks()
	const ttl = 600 * time.Millisecond
	margin := ttl/100 + 2*time.Millisecond
	before := time.Now()
	k, err := l.Lock(ctx, "lease", ttl)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	dl := k.Deadline()
	if dl.Before(before.Add(ttl-margin)) || dl.After(after.Add(ttl-margin)) {
		t.Fatalf("Deadline %v after the call began, want %v to %v", dl.Sub(before), ttl-margin, after.Add(ttl-margin).Sub(before))
	}
	if err := k.Err(); err != nil {
		t.Fatalf("Err while held: %v", err)
	}
	err = waitLost(t, k, "the ttl ran out")
	if now := time.Now(); now.Before(dl) {
		t.Fatalf("Lost closed %v before the deadline", dl.Sub(now))
	}
	if !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Err after the ttl: %v, want ErrLockLost", err)
	}
	// Lost is final: Refresh sends nothing and says why.
	if err := k.Refresh(ctx, time.Minute); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Refresh after Lost: %v, want ErrLockLost", err)
	}
	eventually(t, "the server's lease runs out too", func() bool { locked, _ := lockCounts(t, c); return locked == 0 })
	k2, err := l.TryLock(ctx, "lease", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Unlock of the lapsed lock: %v, want ErrLockLost", err)
	}
	if _, held, _ := l.Token(ctx, "lease"); !held {
		t.Fatal("the lapsed holder's Unlock released the new holder's lock")
	}
	_ = k2.Unlock(ctx)
}

// A Refresh answered "not held" closes Lost: here the lock was released
// for its holder (UNLOCK by its LockId from another connection) and
// another client took it. Refresh does not take it back.
func TestLockLostOnRefusedRefresh(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c1, c2 := newClient(t, nil, s), newClient(t, nil, s)
	k, err := c1.Locks().Lock(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Values().Command(ctx, "job", "UNLOCK", "job", "LOCK_ID", k.LockID()); err != nil {
		t.Fatal(err)
	}
	other, err := c2.Locks().TryLock(ctx, "job", time.Minute)
	if err != nil {
		t.Fatalf("another client's TryLock: %v", err)
	}
	if isClosed(k.Lost()) {
		t.Fatal("Lost closed before anything told the client")
	}
	var e *client.Error
	if err := k.Refresh(ctx, time.Minute); !errors.Is(err, client.ErrLockLost) || !errors.As(err, &e) || e.Op != "LOCK" {
		t.Fatalf("Refresh after another took it: %v, want an *Error of LOCK wrapping ErrLockLost", err)
	}
	if err := waitLost(t, k, "a refused Refresh"); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Err: %v, want ErrLockLost", err)
	}
	if tok, held, err := c2.Locks().Token(ctx, "job"); err != nil || !held || tok != other.Token() {
		t.Fatalf("Token after the refused Refresh: %d %v %v, want the other client's %d", tok, held, err, other.Token())
	}
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Unlock after the server said it is lost: %v, want ErrNotHeld (nothing sent)", err)
	}
	_ = other.Unlock(ctx)
}

// Auto-refresh finds out the same way, without a call from the holder.
func TestLockAutoRefreshLost(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c1, c2 := newClient(t, nil, s), newClient(t, nil, s)
	k, err := c1.Locks().Lock(ctx, "job", 30*time.Second, client.AutoRefresh(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Values().Command(ctx, "job", "UNLOCK", "job", "LOCK_ID", k.LockID()); err != nil {
		t.Fatal(err)
	}
	other, err := c2.Locks().TryLock(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := waitLost(t, k, "auto-refresh refused"); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Err: %v, want ErrLockLost", err)
	}
	if tok, held, _ := c2.Locks().Token(ctx, "job"); !held || tok != other.Token() {
		t.Fatal("auto-refresh took the lock back from the other client")
	}
	_ = other.Unlock(ctx)
}

// Auto-refresh keeps a lock past many ttls: Lost stays open, others are
// refused, and the deadline moves on. Unlock stops it and closes Lost.
func TestLockAutoRefreshKeeps(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c1, c2 := newClient(t, nil, s), newClient(t, nil, s)
	const ttl = 600 * time.Millisecond
	k, err := c1.Locks().Lock(ctx, "kept", ttl, client.AutoRefresh(0)) // every ttl/3
	if err != nil {
		t.Fatal(err)
	}
	first := k.Deadline()
	time.Sleep(4 * ttl)
	if isClosed(k.Lost()) {
		t.Fatalf("Lost closed while auto-refresh ran: %v", k.Err())
	}
	if !k.Deadline().After(first.Add(2 * ttl)) {
		t.Fatalf("the deadline moved from %v to %v in 4 ttls", first, k.Deadline())
	}
	if _, err := c2.Locks().TryLock(ctx, "kept", time.Minute); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("another's TryLock while auto-refreshed: %v, want ErrTimeout", err)
	}
	if err := k.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitLost(t, k, "Unlock"); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Err after Unlock: %v, want ErrNotHeld", err)
	}
	k2, err := c2.Locks().TryLock(ctx, "kept", time.Minute)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	// No refresh of the first LockId may follow its Unlock: the lock keeps
	// the new holder's token, and its ttl runs as the new holder set it.
	time.Sleep(ttl)
	if tok, held, _ := c2.Locks().Token(ctx, "kept"); !held || tok != k2.Token() {
		t.Fatal("the new holder lost the lock")
	}
	_ = k2.Unlock(ctx)
}

// Unlock stops the auto-refresh goroutine (and Close stops those of
// locks never unlocked, closing their Lost with ErrClosed): no goroutine
// is left.
func TestLockAutoRefreshNoLeak(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c, err := client.New([]client.Server{s.Server}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Values().Incr(ctx, "warm"); err != nil { // the pipelined connection and its reader
		t.Fatal(err)
	}
	base := settledGoroutines(t, s)
	const n = 50
	locks := make([]*client.Lock, n)
	for i := range locks {
		k, err := c.Locks().Lock(ctx, "leak"+string(rune('A'+i)), time.Minute, client.AutoRefresh(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		locks[i] = k
	}
	if g := runtime.NumGoroutine(); g < base+n {
		t.Fatalf("%d goroutines with %d auto-refreshed locks, %d before: want one each", g, n, base)
	}
	time.Sleep(50 * time.Millisecond) // some refreshes in flight
	for _, k := range locks[:n-10] {
		if err := k.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkGoroutines(t, base+10)
	if g := runtime.NumGoroutine(); g < base+10 {
		t.Fatalf("%d goroutines, want %d: the locks still held stopped refreshing", g, base+10)
	}
	_ = c.Close()
	for _, k := range locks[n-10:] {
		if err := waitLost(t, k, "Close"); !errors.Is(err, client.ErrClosed) {
			t.Fatalf("Err after Close: %v, want ErrClosed", err)
		}
	}
	checkGoroutines(t, base-2) // the client's reader and health checker are gone too
}

// A lock taken at CONSISTENCY ONE loses Lost when the connection it was
// granted on closes (the server closing it is how a cluster tells its
// holder a failover may have forgotten it); one taken at QUORUM does not,
// for its grant is replicated. A grant after a wait is tied to the
// pipelined connection by a refresh.
func TestLockLostAtOneOnConnClose(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	l := c.Locks()
	one := client.WithConsistency(ctx, client.One)
	a, err := l.Lock(one, "one", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	q, err := l.Lock(ctx, "quorum", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := l.Lock(ctx, "waited", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *client.Lock, 1)
	go func() {
		k, err := l.Lock(one, "waited", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- k
	}()
	eventually(t, "the ONE Lock waits", func() bool { _, w := lockCounts(t, c); return w == 1 })
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	time.Sleep(50 * time.Millisecond)
	if isClosed(a.Lost()) || isClosed(w.Lost()) || isClosed(q.Lost()) {
		t.Fatal("Lost closed with every connection up")
	}
	s.stop(t) // closes every connection
	for _, k := range []*client.Lock{a, w} {
		if err := waitLost(t, k, "the connection of a lock taken at ONE closed"); !errors.Is(err, client.ErrLockLost) {
			t.Fatalf("Err of %s: %v, want ErrLockLost", k.Name(), err)
		}
	}
	if isClosed(q.Lost()) {
		t.Fatalf("the QUORUM lock's Lost closed with its connection: %v", q.Err())
	}
}

// A semaphore of n admits n holders, each with a lock of its own, and no
// more: a counter inside the critical section never passes n, and a
// waiting holder gets the place an Unlock frees.
func TestLockSemaphore(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	l := c.Locks()
	const n = 3
	var held []*client.Lock
	ids, tokens := map[string]bool{}, map[uint64]bool{}
	for range n {
		k, err := l.TrySemaphore(ctx, "sem", n, time.Minute)
		if err != nil {
			t.Fatalf("place %d of %d: %v", len(held)+1, n, err)
		}
		if ids[k.LockID()] || tokens[k.Token()] {
			t.Fatalf("holders share LockId %s or token %d", k.LockID(), k.Token())
		}
		ids[k.LockID()], tokens[k.Token()] = true, true
		held = append(held, k)
	}
	if _, err := l.TrySemaphore(ctx, "sem", n, time.Minute); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("place %d of %d: %v, want ErrTimeout", n+1, n, err)
	}
	if _, err := l.TrySemaphore(ctx, "sem", 0, time.Minute); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a semaphore of 0: %v, want ErrInvalid", err)
	}
	if err := held[1].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !isClosed(held[1].Lost()) || isClosed(held[0].Lost()) {
		t.Fatal("Unlock of one holder closed the wrong Lost")
	}
	k, err := l.TrySemaphore(ctx, "sem", n, time.Minute)
	if err != nil {
		t.Fatalf("the place an Unlock freed: %v", err)
	}
	for _, k := range append(held, k) {
		_ = k.Unlock(ctx)
	}

	// Under contention, from goroutines with clients of their own.
	var inside, most atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		gc := newClient(t, nil, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				k, err := gc.Locks().Semaphore(ctx, "busy", n, 10*time.Second, client.AutoRefresh(0))
				if err != nil {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				if err := k.Unlock(ctx); err != nil {
					t.Errorf("goroutine %d: Unlock: %v", g, err)
				}
			}
		}()
	}
	wg.Wait()
	if m := most.Load(); m > n {
		t.Fatalf("%d holders at once in a semaphore of %d", m, n)
	}
	if locked, waiting := lockCounts(t, c); locked != 0 || waiting != 0 {
		t.Fatalf("after every Unlock: %d held, %d waiting", locked, waiting)
	}
}

// AutoRefresh's period must be shorter than the ttl; nothing is sent
// otherwise.
func TestAutoRefreshInvalid(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, startTallyd(t, "a", nil))
	l := c.Locks()
	if _, err := l.Lock(ctx, "k", time.Second, client.AutoRefresh(time.Second)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("AutoRefresh(ttl): %v, want ErrInvalid", err)
	}
	if _, err := l.TryLock(ctx, "k", time.Second, client.AutoRefresh(2*time.Second)); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("AutoRefresh(2 s) with a 1 s ttl: %v, want ErrInvalid", err)
	}
	if locked, _ := lockCounts(t, c); locked != 0 {
		t.Fatalf("%d locks taken by calls refused", locked)
	}
}
