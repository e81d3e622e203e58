package client_test

import (
	"context"
	"encoding/hex"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
)

// lockCounts reads the Locks section of INFO: levels held and requests waiting in db 0.
func lockCounts(t *testing.T, c *client.Client) (locked, waiting int) {
	t.Helper()
	r, err := c.Values().Raw(testCtx(t), "info", "INFO")
	if err != nil {
		t.Fatalf("INFO: %v", err)
	}
	m := regexp.MustCompile(`(?m)^db0:.*\blocked=(\d+),waiting=(\d+)`).FindStringSubmatch(string(r.Str))
	if m == nil {
		return 0, 0 // no lock was ever taken in db 0
	}
	locked, _ = strconv.Atoi(m[1])
	waiting, _ = strconv.Atoi(m[2])
	return locked, waiting
}

// A lock is held once: a second TryLock is ErrTimeout until Unlock, and an
// Unlock of a lock already unlocked sends nothing and says ErrNotHeld.
func TestLockTryLockUnlock(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	l := c.Locks()

	k, err := l.Lock(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if k.Name() != "job" || k.Addr() != s.Slock {
		t.Errorf("lock is %q at %s, want \"job\" at %s", k.Name(), k.Addr(), s.Slock)
	}
	if id, err := hex.DecodeString(k.LockID()); err != nil || len(id) != 16 {
		t.Errorf("LockID %q is not 16 bytes in hex", k.LockID())
	}
	if locked, _ := lockCounts(t, c); locked != 1 {
		t.Errorf("the server holds %d levels, want 1", locked)
	}
	_, err = l.TryLock(ctx, "job", time.Minute)
	var e *client.Error
	if !errors.Is(err, client.ErrTimeout) || !errors.As(err, &e) || e.Op != "LOCK" || e.Key != "job" ||
		e.Reply != "TIMEOUT" || e.Addr != s.Slock {
		t.Fatalf("second TryLock: %v, want an *Error of LOCK wrapping ErrTimeout", err)
	}
	k2, err := l.Lock(ctx, "other", time.Minute)
	if err != nil || k2.LockID() == k.LockID() {
		t.Fatalf("a lock of another name: %v, LockId %s (the first: %s)", err, k2.LockID(), k.LockID())
	}
	if err := k.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := k.Refresh(ctx, time.Minute); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("Refresh after Unlock: %v, want ErrNotHeld", err)
	}
	if locked, _ := lockCounts(t, c); locked != 1 {
		t.Errorf("the server holds %d levels after Unlock, want 1 (\"other\")", locked)
	}
	k3, err := l.TryLock(ctx, "job", time.Minute)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = k3.Unlock(ctx)
	_ = k2.Unlock(ctx)
}

// Arguments the server could not take are refused before anything is sent.
func TestLockInvalid(t *testing.T) {
	ctx := testCtx(t)
	l := newClient(t, nil, startTallyd(t, "a", nil)).Locks()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		opts []client.LockOption
	}{
		{"", time.Second, nil},
		{"k", 0, nil},
		{"k", -time.Second, nil},
		{"k", 70000 * time.Minute, nil},
		{"k", time.Second, []client.LockOption{client.MaxHolders(0)}},
		{"k", time.Second, []client.LockOption{client.MaxHolders(70000)}},
	} {
		if _, err := l.Lock(ctx, tc.name, tc.ttl, tc.opts...); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("Lock(%q, %v): %v, want ErrInvalid", tc.name, tc.ttl, err)
		}
	}
	k, err := l.Lock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Unlock(ctx)
	if err := k.Refresh(ctx, 0); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("Refresh(0): %v, want ErrInvalid", err)
	}
}

// Lock waits for a held lock: it is granted once the holder unlocks, never
// before.
func TestLockWaitsForUnlock(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	l := c.Locks()
	a, err := l.Lock(ctx, "mutex", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		k   *client.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		k, err := l.Lock(ctx, "mutex", time.Minute)
		got <- result{k, err}
	}()
	eventually(t, "the second Lock waits on the server", func() bool { _, w := lockCounts(t, c); return w == 1 })
	// Values share the pipelined connection: a waiting Lock must not block them.
	if _, err := c.Values().Incr(ctx, "meanwhile"); err != nil {
		t.Fatalf("Incr while a Lock waits: %v", err)
	}
	select {
	case r := <-got:
		t.Fatalf("the second Lock returned while the first held it: %v %v", r.k, r.err)
	default:
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting Lock: %v", r.err)
	}
	if r.k.LockID() == a.LockID() {
		t.Errorf("both grants have LockId %s", a.LockID())
	}
	if err := r.k.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Lock that waits past ctx's deadline fails with ErrTimeout and
// context.DeadlineExceeded, and leaves nothing queued or held on the server;
// a cancelled one fails with context.Canceled, and the same holds.
func TestLockWaitEndsWithContext(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	l := c.Locks()
	a, err := l.Lock(ctx, "busy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	_, err = l.Lock(dctx, "busy", time.Minute)
	if !errors.Is(err, client.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	eventually(t, "no wait left after the deadline", func() bool { _, w := lockCounts(t, c); return w == 0 })

	cctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() { _, err := l.Lock(cctx, "busy", time.Minute); errs <- err }()
	eventually(t, "the Lock waits", func() bool { _, w := lockCounts(t, c); return w == 1 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Lock: %v, want context.Canceled", err)
	}
	eventually(t, "the cancelled wait is gone from the server", func() bool { _, w := lockCounts(t, c); return w == 0 })
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if locked, waiting := lockCounts(t, c); locked != 0 || waiting != 0 {
		t.Fatalf("after the holder's Unlock: %d held, %d waiting; the abandoned waits took it", locked, waiting)
	}
	k, err := l.TryLock(ctx, "busy", time.Minute)
	if err != nil {
		t.Fatalf("TryLock once free: %v", err)
	}
	_ = k.Unlock(ctx)
}

// Refresh pushes the expiry back; a lock that expired cannot be refreshed
// (ErrLockLost: its Lost closed at the deadline, so nothing is sent) and
// Refresh does not take it anew; Unlock of an expired lock says
// ErrLockLost.
func TestLockRefreshAndExpiry(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, startTallyd(t, "a", nil))
	l := c.Locks()

	k, err := l.Lock(ctx, "lease", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // past the first ttl
	if _, err := l.TryLock(ctx, "lease", time.Minute); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("TryLock after the first ttl of a refreshed lock: %v, want ErrTimeout", err)
	}
	if err := k.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	k, err = l.Lock(ctx, "lease", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock expires", func() bool { locked, _ := lockCounts(t, c); return locked == 0 })
	if err := k.Refresh(ctx, time.Minute); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Refresh of an expired lock: %v, want ErrLockLost", err)
	}
	if locked, _ := lockCounts(t, c); locked != 0 {
		t.Fatalf("Refresh of an expired lock took it again (%d held)", locked)
	}
	select {
	case <-k.Lost():
	default:
		t.Fatal("Lost is open after the ttl ran out")
	}
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrLockLost) {
		t.Fatalf("Unlock after the lease ran out: %v, want ErrLockLost (the server no longer had it)", err)
	}
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}

	k, err = l.Lock(ctx, "lease", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lock expires", func() bool { locked, _ := lockCounts(t, c); return locked == 0 })
	var e *client.Error
	if err := k.Unlock(ctx); !errors.Is(err, client.ErrLockLost) || !errors.As(err, &e) || e.Op != "UNLOCK" {
		t.Fatalf("Unlock of an expired lock: %v, want an *Error of UNLOCK wrapping ErrLockLost", err)
	}
}

// MaxHolders lets n share a name; a Refresh keeps the share open to others.
func TestLockMaxHolders(t *testing.T) {
	ctx := testCtx(t)
	l := newClient(t, nil, startTallyd(t, "a", nil)).Locks()
	two := client.MaxHolders(2)
	a, err := l.TryLock(ctx, "pair", time.Minute, two)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryLock(ctx, "pair", time.Minute, two)
	if err != nil {
		t.Fatalf("second of two: %v", err)
	}
	if _, err := l.TryLock(ctx, "pair", time.Minute, two); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("third of two: %v, want ErrTimeout", err)
	}
	if err := a.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := l.TryLock(ctx, "pair", time.Minute, two)
	if err != nil {
		t.Fatalf("second of two after a Refresh of the first: %v", err)
	}
	_ = c.Unlock(ctx)
	_ = a.Unlock(ctx)
}

// Do runs fn under the lock and unlocks it however fn ends.
func TestLockDo(t *testing.T) {
	ctx := testCtx(t)
	l := newClient(t, nil, startTallyd(t, "a", nil)).Locks()
	boom := errors.New("boom")
	var held bool
	err := l.Do(ctx, "do", time.Minute, func(ctx context.Context, k *client.Lock) error {
		_, err := l.TryLock(ctx, "do", time.Minute)
		held = errors.Is(err, client.ErrTimeout)
		return boom
	})
	if !errors.Is(err, boom) || !held {
		t.Fatalf("Do: %v (held during fn: %v), want fn's error", err, held)
	}
	k, err := l.TryLock(ctx, "do", time.Minute)
	if err != nil {
		t.Fatalf("TryLock after Do: %v", err)
	}
	_ = k.Unlock(ctx)
}

// Every grant carries a fencing token; tokens grow from grant to grant, and
// TOKEN tells the holder's.
func TestLockTokens(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, startTallyd(t, "a", nil))
	l := c.Locks()
	var last uint64
	for i := range 3 {
		k, err := l.Lock(ctx, "tok", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if k.Token() <= last {
			t.Fatalf("grant %d has token %d after %d", i, k.Token(), last)
		}
		last = k.Token()
		if tok, held, err := l.Token(ctx, "tok"); err != nil || !held || tok != k.Token() {
			t.Fatalf("Token while held: %d %v %v, want %d", tok, held, err, k.Token())
		}
		if err := k.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if tok, held, err := l.Token(ctx, "tok"); err != nil || held || tok != 0 {
		t.Fatalf("Token once free: %d %v %v, want not held", tok, held, err)
	}
	other, err := l.Lock(ctx, "tok2", time.Minute)
	if err != nil || other.Token() <= last {
		t.Fatalf("a grant of another name: token %d after %d (%v): tokens are server-wide", other.Token(), last, err)
	}
	_ = other.Unlock(ctx)
}

// Kleppmann's scenario: a holder whose lease ran out writes after the next
// holder did; its fenced write is refused with ErrFenced.
func TestLockFencedWrite(t *testing.T) {
	ctx := testCtx(t)
	c := newClient(t, nil, startTallyd(t, "a", nil))
	l, v := c.Locks(), c.Values()
	one, err := l.Lock(ctx, "storage", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first lease runs out", func() bool { _, held, _ := l.Token(ctx, "storage"); return !held })
	two, err := l.Lock(ctx, "storage", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if two.Token() <= one.Token() {
		t.Fatalf("tokens %d then %d", one.Token(), two.Token())
	}
	if err := two.SetFenced(ctx, "file", 2); err != nil {
		t.Fatalf("the second holder's write: %v", err)
	}
	err = one.SetFenced(ctx, "file", 1)
	var e *client.Error
	if !errors.Is(err, client.ErrFenced) || !errors.As(err, &e) || !strings.HasPrefix(e.Reply, "FENCED") {
		t.Fatalf("the first holder's late write: %v, want an *Error wrapping ErrFenced", err)
	}
	if n, err := v.Get(ctx, "file"); err != nil || n != 2 {
		t.Fatalf("file = %d, %v; want 2", n, err)
	}
	if f, err := v.GetFence(ctx, "file"); err != nil || f != two.Token() {
		t.Fatalf("GetFence = %d, %v; want %d", f, err, two.Token())
	}
	if f, err := v.GetFence(ctx, "unfenced"); err != nil || f != 0 {
		t.Fatalf("GetFence of a key never fenced = %d, %v; want 0", f, err)
	}
	if err := one.Unlock(ctx); !errors.Is(err, client.ErrLockLost) {
		t.Errorf("Unlock of the expired lock: %v, want ErrLockLost", err)
	}
	_ = two.Unlock(ctx)
}
