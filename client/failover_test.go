package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
)

// health records a client's OnHealth calls.
type health struct {
	mu     sync.Mutex
	events []string
}

func (h *health) on(addr string, up bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf("%s up=%v", addr, up))
}

func (h *health) saw(addr string, up bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := fmt.Sprintf("%s up=%v", addr, up)
	for _, e := range h.events {
		if e == want {
			return true
		}
	}
	return false
}

// Three servers under load from many goroutines; one is killed mid-run.
// Its keys move to the next server in their order, the others stay put,
// every error is typed, nothing hangs, and no goroutine outlives Close.
func TestFailoverUnderLoad(t *testing.T) {
	ctx := testCtx(t)
	servers := []*tallyd{startTallyd(t, "a", nil), startTallyd(t, "b", nil), startTallyd(t, "c", nil)}
	byName := map[string]*tallyd{}
	for _, s := range servers {
		byName[s.Name] = s
	}
	before := settledGoroutines(t, servers...)
	var hl health
	c := newClient(t, &client.Options{HealthInterval: 20 * time.Millisecond, OnHealth: hl.on}, servers...)
	k, sem, p := c.Counters(), c.Semaphores(), c.Pool()

	keys := make([]string, 30)
	onB := 0
	for i := range keys {
		keys[i] = fmt.Sprint("key", i)
		if c.Order(keys[i])[0] == "b" {
			onB++
		}
	}
	if onB == 0 {
		t.Fatal("no key lives on b: the test would prove nothing")
	}

	var ok, lost atomic.Int64
	var mu sync.Mutex
	unexpected := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			work := func(context.Context) error {
				time.Sleep(time.Duration(r.IntN(2000)) * time.Microsecond)
				return nil
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[r.IntN(len(keys))]
				var err error
				switch r.IntN(4) {
				case 0:
					err = k.Do(ctx, key, 1, 1000, work)
				case 1:
					err = p.Do(ctx, key, client.Limits{Workers: 2, MaxQueue: 100, Timeout: 10 * time.Second}, work)
				case 2:
					_, err = k.Get(ctx, key)
					if errors.Is(err, client.ErrNotFound) { // not acquired on this server yet
						err = nil
					}
				case 3:
					err = sem.Do(ctx, key, 1, 1000, work)
				}
				var ce *client.ConnError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, client.ErrHoldLost) && errors.As(err, &ce):
					lost.Add(1)
				default:
					mu.Lock()
					unexpected[err.Error()]++
					mu.Unlock()
				}
			}
		}()
	}
	eventually(t, "300 requests succeed", func() bool { return ok.Load() >= 300 })
	servers[1].stop(t) // kill b
	killedAt := ok.Load()
	eventually(t, "300 more requests succeed after b is killed", func() bool { return ok.Load() >= killedAt+300 })
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("workers hang")
	}
	t.Logf("%d requests succeeded, %d holds lost with b, %d keys of %d lived on b", ok.Load(), lost.Load(), onB, len(keys))
	for msg, n := range unexpected {
		t.Errorf("%d× unexpected error: %s", n, msg)
	}
	for _, addr := range []string{servers[1].Counter, servers[1].Pool, servers[1].Semaphore} {
		if !hl.saw(addr, false) {
			t.Errorf("b's listener %s was never marked down", addr)
		}
	}

	// Every key is now on the first server of its order that is not b.
	for _, key := range keys {
		order := c.Order(key)
		want := order[0]
		if want == "b" {
			want = order[1]
		}
		h, err := k.Acquire(ctx, key, 1, 1000)
		if err != nil {
			t.Fatalf("acquire %q after the kill: %v", key, err)
		}
		if h.Addr() != byName[want].Counter {
			t.Errorf("key %q (order %v) is held at %s, want %s's %s", key, order, h.Addr(), want, byName[want].Counter)
		}
		lh, err := p.Acquire(ctx, key, client.Limits{Workers: 100, MaxQueue: 100})
		if err != nil {
			t.Fatalf("lock %q after the kill: %v", key, err)
		}
		if lh.Addr() != byName[want].Pool {
			t.Errorf("pool key %q (order %v) is locked at %s, want %s's %s", key, order, lh.Addr(), want, byName[want].Pool)
		}
		if err := h.Release(ctx); err != nil {
			t.Error(err)
		}
		if err := lh.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	_ = c.Close()
	checkGoroutines(t, before)
}

// A server that comes back is marked up by the health checker and gets
// its keys back.
func TestFailbackAfterRestart(t *testing.T) {
	ctx := testCtx(t)
	a, b := startTallyd(t, "a", nil), startTallyd(t, "b", nil)
	var hl health
	c := newClient(t, &client.Options{HealthInterval: 20 * time.Millisecond, OnHealth: hl.on}, a, b)
	k := c.Counters()
	key := ""
	for i := 0; key == ""; i++ {
		if c.Order(fmt.Sprint("k", i))[0] == "b" {
			key = fmt.Sprint("k", i)
		}
	}
	h, err := k.Acquire(ctx, key, 1, 1)
	if err != nil || h.Addr() != b.Counter {
		t.Fatalf("acquire = %v at %v, want b", err, h)
	}
	b.stop(t)
	if err := h.Release(ctx); !errors.Is(err, client.ErrHoldLost) {
		t.Fatalf("Release on the killed server: %v, want ErrHoldLost", err)
	}
	h, err = k.Acquire(ctx, key, 1, 1)
	if err != nil || h.Addr() != a.Counter {
		t.Fatalf("acquire with b down = %v at %v, want a", err, h)
	}
	_ = h.Release(ctx)

	b2 := restartTallyd(t, b)
	eventually(t, "b is marked up again", func() bool { return hl.saw(b2.Counter, true) })
	h, err = k.Acquire(ctx, key, 1, 1)
	if err != nil || h.Addr() != b2.Counter {
		t.Fatalf("acquire after b is back = %v at %v, want b", err, h)
	}
	_ = h.Release(ctx)
}

// Holds on a server that dies are lost: Release says so, and so does Do.
func TestHoldLost(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, &client.Options{HealthInterval: time.Hour}, s)
	ch, err := c.Counters().Acquire(ctx, "x", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ph, err := c.Pool().Acquire(ctx, "x", one)
	if err != nil {
		t.Fatal(err)
	}
	inDo := make(chan struct{})
	kill := make(chan struct{})
	doErr := make(chan error, 1)
	go func() {
		doErr <- c.Pool().Do(ctx, "y", one, func(context.Context) error {
			close(inDo)
			<-kill
			return nil
		})
	}()
	<-inDo
	s.stop(t)
	close(kill)
	for what, h := range map[string]*client.Hold{"counter": ch, "pool": ph} {
		err := h.Release(ctx)
		var ce *client.ConnError
		if !errors.Is(err, client.ErrHoldLost) || !errors.As(err, &ce) {
			t.Errorf("%s Release after the server died: %v, want ErrHoldLost and a *ConnError", what, err)
		}
	}
	if err := <-doErr; !errors.Is(err, client.ErrHoldLost) {
		t.Errorf("Do whose server died: %v, want ErrHoldLost", err)
	}
}

// With every server down a request fails at once with ErrUnavailable; a
// server that is back serves at once, even before the health checker
// notices, because servers that are down are still tried last.
func TestAllServersDown(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	c := newClient(t, &client.Options{HealthInterval: time.Hour}, s)
	if _, err := c.Counters().Get(ctx, "k"); !errors.Is(err, client.ErrNotFound) {
		t.Fatal(err)
	}
	s.stop(t)
	for what, err := range map[string]error{
		"counter": func() error { _, err := c.Counters().Acquire(ctx, "k", 1, 1); return err }(),
		"pool":    func() error { _, err := c.Pool().Acquire(ctx, "k", one); return err }(),
		"get":     func() error { _, err := c.Counters().Get(ctx, "k"); return err }(),
	} {
		var ce *client.ConnError
		if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ce) {
			t.Errorf("%s with the only server down: %v, want ErrUnavailable and a *ConnError", what, err)
		}
	}
	s2 := restartTallyd(t, s)
	h, err := c.Pool().Acquire(ctx, "k", one)
	if err != nil || h.Addr() != s2.Pool {
		t.Fatalf("acquire once the server is back: %v", err)
	}
	_ = h.Release(ctx)
}

// A server that accepts but never answers breaks the connection after
// IOTimeout: the request fails over (here: to nothing) instead of hanging.
func TestSilentServer(t *testing.T) {
	ctx := testCtx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			_ = nc.Close()
		}
	}()
	addr := ln.Addr().String()
	c, err := client.New([]client.Server{{Name: "silent", Counter: addr, Pool: addr}},
		&client.Options{IOTimeout: 100 * time.Millisecond, HealthInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Counters().Get(ctx, "k")
	var ce *client.ConnError
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ce) || ce.Op != "read" {
		t.Errorf("Get from a silent server: %v, want ErrUnavailable with a read *ConnError", err)
	}
	_, err = c.Pool().Acquire(ctx, "k", client.Limits{Workers: 1, MaxQueue: 1})
	if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &ce) || ce.Op != "read" {
		t.Errorf("ACQ4ME to a silent server: %v, want ErrUnavailable with a read *ConnError", err)
	}
}

// Goroutines: none outlives Close, whatever was in flight: holds not
// released, waits cancelled, acquires abandoned.
func TestNoGoroutineLeak(t *testing.T) {
	ctx := testCtx(t)
	s := startTallyd(t, "a", nil)
	before := settledGoroutines(t, s)
	c, err := client.New([]client.Server{s.Server}, &client.Options{HealthInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	k, p, v := c.Counters(), c.Pool(), c.Values()
	if _, err := k.Acquire(ctx, "kept", 1, 1); err != nil { // never released
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx, "kept", one); err != nil { // never released
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := p.Acquire(wctx, "kept", one); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait: %v", err)
	}
	cancel()
	for range 50 {
		actx, cancel := context.WithCancel(ctx)
		go cancel()
		_, _ = k.Acquire(actx, "abandoned", 1, 100)
	}
	_, _ = v.Incr(ctx, "n")
	waiting := make(chan error, 1)
	go func() { _, err := p.Acquire(ctx, "kept", one); waiting <- err }()
	eventually(t, "a third lock waits", func() bool { return poolStat(t, c, 0, "waiting_workers") == 1 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; !errors.Is(err, client.ErrClosed) {
		t.Errorf("a wait cut short by Close: %v, want ErrClosed", err)
	}
	checkGoroutines(t, before)
	if _, err := k.Get(ctx, "kept"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
}
