package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/proto/counter"
)

func TestCounterAcquireGetRelease(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	k := newClient(t, nil, s).Counters()

	h1, err := k.Acquire(ctx, "printer", 1, 2)
	if err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if h1.Key() != "printer" || h1.Addr() != s.Counter {
		t.Errorf("hold is %q at %s, want \"printer\" at %s", h1.Key(), h1.Addr(), s.Counter)
	}
	h2, err := k.Acquire(ctx, "printer", 1, 2)
	if err != nil {
		t.Fatalf("second acquire: %v", err)
	}
	_, err = k.Acquire(ctx, "printer", 1, 2)
	var e *client.Error
	if !errors.Is(err, client.ErrNotAvailable) || !errors.As(err, &e) {
		t.Fatalf("third acquire: %v, want an *Error wrapping ErrNotAvailable", err)
	}
	if e.Status != counter.StatusNotAvailable || e.Op != "acquire" || e.Key != "printer" || e.Addr != s.Counter ||
		e.Reply != "Resource not available (status 0x21)" {
		t.Errorf("error fields: %+v", *e)
	}
	if n, err := k.Get(ctx, "printer"); err != nil || n != 2 {
		t.Fatalf("Get = %d, %v; want 2", n, err)
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := h1.Release(ctx); !errors.Is(err, client.ErrReleased) {
		t.Fatalf("second release of one hold: %v, want ErrReleased", err)
	}
	if n, err := k.Get(ctx, "printer"); err != nil || n != 1 {
		t.Fatalf("Get after a release = %d, %v; want 1 (a second Release must not release h2's share)", n, err)
	}
	if err := h2.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n, err := k.Get(ctx, "printer"); err != nil || n != 0 {
		t.Fatalf("Get = %d, %v; want 0", n, err)
	}
}

func TestCounterStatusErrors(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", func(c *loop.Config) { c.MaxObjects = 1 })
	k := newClient(t, nil, s).Counters()

	check := func(what string, err error, want error, status counter.Status) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, want) || !errors.As(err, &e) || e.Status != status {
			t.Errorf("%s: %v, want an *Error with status %#x wrapping %v", what, err, status, want)
		}
	}
	_, err := k.Get(ctx, "nosuch")
	check("Get of a missing counter", err, client.ErrNotFound, counter.StatusNotFound)
	_, err = k.Acquire(ctx, "x", 0, 5)
	check("acquire of 0", err, client.ErrInvalid, counter.StatusInvalid)
	_, err = k.Acquire(ctx, "x", 3, 2)
	check("acquire above the maximum", err, client.ErrInvalid, counter.StatusInvalid)
	if _, err = k.Acquire(ctx, "first", 1, 1); err != nil {
		t.Fatal(err)
	}
	_, err = k.Acquire(ctx, "second", 1, 1)
	check("acquire beyond --max-objects", err, client.ErrOutOfMemory, counter.StatusOutOfMemory)

	// Names the protocol cannot carry never reach the server: the error is
	// the client's own, not an *Error from a reply.
	for _, name := range []string{"", strings.Repeat("n", 65536)} {
		_, err := k.Acquire(ctx, name, 1, 1)
		var e *client.Error
		if !errors.Is(err, client.ErrInvalid) || errors.As(err, &e) {
			t.Errorf("acquire of a %d-byte name: %v, want the client's ErrInvalid", len(name), err)
		}
	}
}

func TestSemaphore(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	k := newClient(t, nil, s).Semaphores()

	h, err := k.Acquire(ctx, "slots", 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Addr() != s.Semaphore {
		t.Errorf("semaphore held at %s, want %s", h.Addr(), s.Semaphore)
	}
	if n, err := k.Get(ctx, "slots"); err != nil || n != 1 {
		t.Fatalf("Get = %d, %v; want 1 left", n, err)
	}
	if _, err := k.Acquire(ctx, "slots", 2, 3); !errors.Is(err, client.ErrNotAvailable) {
		t.Fatalf("acquire of 2 with 1 left: %v, want ErrNotAvailable", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := k.Get(ctx, "slots"); err != nil || n != 3 {
		t.Fatalf("Get = %d, %v; want 3", n, err)
	}
}

// Every hold of a client on one server shares one connection, and closing
// the client releases them all.
func TestCounterHoldsShareConnection(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	k := c.Counters()

	var wg sync.WaitGroup
	holds := make([]*client.Hold, 50)
	errs := make([]error, 50)
	for i := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			holds[i], errs[i] = k.Acquire(ctx, fmt.Sprint("c", i%5), 1, 100)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := counterStat(t, k, 0, "curr_connections"); n != "1" {
		t.Errorf("curr_connections = %s, want 1", n)
	}
	if n, _ := k.Get(ctx, "c3"); n != 10 {
		t.Errorf("c3 = %d, want 10", n)
	}

	other := newClient(t, nil, s).Counters()
	_ = c.Close()
	if err := holds[0].Release(ctx); err == nil {
		t.Error("Release after Close succeeded")
	}
	eventually(t, "the server releases a closed client's holds", func() bool {
		n, err := other.Get(ctx, "c3")
		return err == nil && n == 0
	})
}

// An Acquire abandoned by its context after the request went out is
// released when its reply arrives, so nothing stays held.
func TestCounterAbandonedAcquireIsReleased(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	k := newClient(t, nil, s).Counters()

	var wg sync.WaitGroup
	var mu sync.Mutex
	held, cancelled := 0, 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 100 {
				actx, cancel := context.WithCancel(ctx)
				time.AfterFunc(time.Duration(r.IntN(200))*time.Microsecond, cancel)
				h, err := k.Acquire(actx, "busy", 1, 1_000_000)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					held++
					if err := h.Release(ctx); err != nil {
						t.Error(err)
					}
				case errors.Is(err, context.Canceled):
					cancelled++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d acquires held and released, %d abandoned", held, cancelled)
	eventually(t, "every abandoned acquire is released", func() bool {
		n, err := k.Get(ctx, "busy")
		return err == nil && n == 0
	})
}

func TestCounterDoReleases(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	k := newClient(t, nil, s).Counters()
	boom := errors.New("boom")

	ran := false
	err := k.Do(ctx, "job", 1, 1, func(ctx context.Context) error {
		ran = true
		if n, err := k.Get(ctx, "job"); err != nil || n != 1 {
			t.Errorf("inside Do: Get = %d, %v; want 1", n, err)
		}
		return boom
	})
	if !ran || !errors.Is(err, boom) {
		t.Fatalf("Do = %v (ran %v), want fn's error", err, ran)
	}
	if n, err := k.Get(ctx, "job"); err != nil || n != 0 {
		t.Fatalf("after Do returned an error: Get = %d, %v; want 0", n, err)
	}

	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Errorf("recovered %v, want fn's panic", r)
			}
		}()
		_ = k.Do(ctx, "job", 1, 1, func(context.Context) error { panic("panic in fn") })
	}()
	if n, err := k.Get(ctx, "job"); err != nil || n != 0 {
		t.Fatalf("after Do panicked: Get = %d, %v; want 0", n, err)
	}

	h, err := k.Acquire(ctx, "job", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	err = k.Do(ctx, "job", 1, 1, func(context.Context) error { t.Error("fn ran without the resource"); return nil })
	if !errors.Is(err, client.ErrNotAvailable) {
		t.Errorf("Do on a full counter: %v, want ErrNotAvailable", err)
	}
	_ = h.Release(ctx)
}

// Release with a context that has ended still releases.
func TestCounterReleaseWithEndedContext(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	k := newClient(t, nil, s).Counters()
	h, err := k.Acquire(ctx, "r", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := h.Release(dead); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Release: %v", err)
	}
	eventually(t, "the release takes effect", func() bool {
		n, err := k.Get(ctx, "r")
		return err == nil && n == 0
	})
}

// Many goroutines through one client never take more than a limit allows.
func TestConcurrentLimits(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, nil, s)
	k, p := c.Counters(), c.Pool()
	var inCounter, inPool, maxCounter, maxPool atomic.Int32
	enter := func(in, most *atomic.Int32) func() {
		n := in.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return func() { in.Add(-1) }
	}
	var wg sync.WaitGroup
	var refused atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				var err error
				if (g+i)%2 == 0 {
					err = k.Do(ctx, "three", 1, 3, func(context.Context) error {
						defer enter(&inCounter, &maxCounter)()
						time.Sleep(100 * time.Microsecond)
						return nil
					})
				} else {
					err = p.Do(ctx, "two", client.Limits{Workers: 2, MaxQueue: 100, Timeout: 10 * time.Second},
						func(context.Context) error {
							defer enter(&inPool, &maxPool)()
							time.Sleep(100 * time.Microsecond)
							return nil
						})
				}
				if errors.Is(err, client.ErrNotAvailable) {
					refused.Add(1)
				} else if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("most at once: %d of counter \"three\" (%d refused), %d in pool \"two\"", maxCounter.Load(), refused.Load(), maxPool.Load())
	if maxCounter.Load() > 3 || maxPool.Load() > 2 {
		t.Errorf("limits exceeded: %d holders of a counter of 3, %d of a pool of 2", maxCounter.Load(), maxPool.Load())
	}
	if n, err := k.Get(ctx, "three"); err != nil || n != 0 {
		t.Errorf("counter left at %d, %v", n, err)
	}
	if n := poolStat(t, c, 0, "processing_workers"); n != 0 {
		t.Errorf("processing_workers = %d at the end", n)
	}
}
