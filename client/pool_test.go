package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
)

var one = client.Limits{Workers: 1, MaxQueue: 10, Timeout: 30 * time.Second}

func TestPoolAcquireRelease(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	p := c.Pool()

	h, err := p.Acquire(ctx, "page", one)
	if err != nil {
		t.Fatal(err)
	}
	if h.Addr() != s.Pool || h.Key() != "page" {
		t.Errorf("lock is %q at %s, want \"page\" at %s", h.Key(), h.Addr(), s.Pool)
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 1 {
		t.Errorf("processing_workers = %d, want 1", n)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); !errors.Is(err, client.ErrReleased) {
		t.Errorf("second Release: %v, want ErrReleased", err)
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 0 {
		t.Errorf("processing_workers = %d after release, want 0", n)
	}
	if n := poolStat(t, c, 0, "total_releases"); n != 1 {
		t.Errorf("total_releases = %d, want 1", n)
	}
}

func TestPoolStatusErrors(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	p := c.Pool()

	check := func(what string, err error, want error, reply string) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, want) || !errors.As(err, &e) || e.Reply != reply || e.Addr != s.Pool {
			t.Errorf("%s: %v, want an *Error %q from %s wrapping %v", what, err, reply, s.Pool, want)
		}
	}
	h, err := p.Acquire(ctx, "k", client.Limits{Workers: 1, MaxQueue: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Acquire(ctx, "k", client.Limits{Workers: 1, MaxQueue: 2})
	check("ACQ4ME with timeout 0 on a held key", err, client.ErrTimeout, "TIMEOUT")
	_, err = p.Acquire(ctx, "k", client.Limits{Workers: 1, MaxQueue: 1, Timeout: time.Second})
	check("ACQ4ME on a full queue", err, client.ErrQueueFull, "QUEUE_FULL")
	_, err = p.Acquire(ctx, "k", client.Limits{Workers: 0, MaxQueue: 1})
	check("ACQ4ME with 0 workers", err, client.ErrInvalid, "ERROR BAD_SYNTAX")
	_, err = p.Stats(ctx, 0, "nosuch")
	check("STATS nosuch", err, client.ErrWrongStat, "ERROR WRONG_STAT")
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, "", one); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("empty key: %v, want ErrInvalid", err)
	}
	full, err := p.Stats(ctx, 0, "FULL")
	if err != nil || len(full) < 20 || full[0].Name != "uptime" || full[len(full)-1].Name != "processed_count" {
		t.Fatalf("STATS FULL = %+v, %v", full, err)
	}
	for _, st := range full {
		if st.Name == "total_acquired" && st.Value != "1" {
			t.Errorf("total_acquired = %s, want 1", st.Value)
		}
	}
}

// A lock released, by Release or by Do however fn ends, goes to the next
// waiter in turn.
func TestPoolWaitAndHandOver(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	p := c.Pool()
	boom := errors.New("boom")

	h, err := p.Acquire(ctx, "render", one)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	errs := make(chan error, 2)
	go func() { // first waiter: fn panics
		defer func() {
			if r := recover(); r != "in fn" {
				errs <- errors.New("recovered something else")
				return
			}
			errs <- nil
		}()
		_ = p.Do(ctx, "render", one, func(context.Context) error { note("panics"); panic("in fn") })
	}()
	eventually(t, "the first waiter waits", func() bool { return poolStat(t, c, 0, "waiting_workers") == 1 })
	go func() { // second waiter: fn fails
		errs <- p.Do(ctx, "render", one, func(context.Context) error { note("fails"); return boom })
	}()
	eventually(t, "the second waiter waits", func() bool { return poolStat(t, c, 0, "waiting_workers") == 2 })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	if len(order) != 2 || order[0] != "panics" || order[1] != "fails" {
		t.Errorf("fns ran in the order %v, want [panics fails]", order)
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 0 {
		t.Errorf("processing_workers = %d after both Do calls, want 0", n)
	}
	if n := poolStat(t, c, 0, "total_releases"); n != 3 {
		t.Errorf("total_releases = %d, want 3", n)
	}
}

func TestPoolAcquireAnyDone(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	p := c.Pool()

	h, err := p.Acquire(ctx, "thumb", one)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { _, err := p.AcquireAny(ctx, "thumb", one); errs <- err }()
	go func() {
		errs <- p.DoAny(ctx, "thumb", one, func(context.Context) error { t.Error("DoAny ran fn after DONE"); return nil })
	}()
	eventually(t, "both ACQ4ANY wait", func() bool { return poolStat(t, c, 0, "waiting_workers") == 2 })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		var e *client.Error
		if err := <-errs; !errors.Is(err, client.ErrDone) || !errors.As(err, &e) || e.Reply != "DONE" || e.Op != "ACQ4ANY" {
			t.Errorf("ACQ4ANY woken by a release: %v, want an *Error DONE wrapping ErrDone", err)
		}
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 0 {
		t.Errorf("processing_workers = %d, want 0", n)
	}
	// The connections of DONE waiters hold nothing and are reused.
	h, err = p.AcquireAny(ctx, "thumb", one)
	if err != nil {
		t.Fatalf("ACQ4ANY on a free key: %v", err)
	}
	_ = h.Release(ctx)
}

// Cancelling the context of a waiting ACQ4ME ends the wait at once and the
// server drops the queue entry.
func TestPoolCancelWait(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	p := c.Pool()

	h, err := p.Acquire(ctx, "slow", one)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	errs := make(chan error, 1)
	go func() { _, err := p.Acquire(wctx, "slow", one); errs <- err }()
	eventually(t, "the ACQ4ME waits", func() bool { return poolStat(t, c, 0, "waiting_workers") == 1 })
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v, want context.Canceled", err)
	}
	eventually(t, "the server drops the queue entry", func() bool { return poolStat(t, c, 0, "waiting_workers") == 0 })
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 0 {
		t.Errorf("processing_workers = %d: the release went to the cancelled waiter", n)
	}

	// A deadline ends a wait the same way, well before the server's timeout.
	h, err = p.Acquire(ctx, "slow", one)
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	if _, err := p.Acquire(dctx, "slow", one); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v, want context.DeadlineExceeded", err)
	}
	eventually(t, "the server drops the queue entry", func() bool { return poolStat(t, c, 0, "waiting_workers") == 0 })
	_ = h.Release(ctx)
}

// The server's own timeout ends a wait with ErrTimeout.
func TestPoolServerTimeout(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	p := newClient(t, nil, s).Pool()
	h, err := p.Acquire(ctx, "k", one)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	_, err = p.Acquire(ctx, "k", client.Limits{Workers: 1, MaxQueue: 5, Timeout: time.Millisecond}) // one second
	if !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("wait: %v, want ErrTimeout", err)
	}
}

// Keys are percent-encoded on the wire, so spaces and newlines are fine
// and the server sees them as MediaWiki's client would send them.
func TestPoolKeyEncoding(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	p := newClient(t, nil, s).Pool()
	keys := []string{"a b", "a%20b", "line\nbreak", "ü/x"}
	var holds []*client.Hold
	for _, k := range keys {
		h, err := p.Acquire(ctx, k, client.Limits{Workers: 1, MaxQueue: 1})
		if err != nil {
			t.Fatalf("%q: %v (distinct keys must not collide)", k, err)
		}
		holds = append(holds, h)
	}
	if _, err := p.Acquire(ctx, "a b", client.Limits{Workers: 1, MaxQueue: 1}); !errors.Is(err, client.ErrQueueFull) {
		t.Errorf("second lock of \"a b\": %v, want ErrQueueFull", err)
	}
	for _, h := range holds {
		if err := h.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Each lock has its own connection; released ones go back to the idle
// pool, up to MaxIdle.
func TestPoolConnections(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, &client.Options{MaxIdle: 2}, s)
	p := c.Pool()
	other := newClient(t, nil, s)
	var holds []*client.Hold
	for range 4 {
		h, err := p.Acquire(ctx, "multi", client.Limits{Workers: 4, MaxQueue: 4})
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	if n := poolStat(t, other, 0, "processing_workers"); n != 4 {
		t.Fatalf("processing_workers = %d, want 4: each lock needs its own connection", n)
	}
	for _, h := range holds {
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if err := p.Do(ctx, "multi", one, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n := poolStat(t, other, 0, "total_acquired"); n != 14 {
		t.Errorf("total_acquired = %d, want 14", n)
	}
}
