package client_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
	"github.com/tallyd/tallyd/loop"
)

// tallyd is a server running in the test process with every protocol on
// an ephemeral port of 127.0.0.1.
type tallyd struct {
	srv     *loop.Server
	errc    chan error
	stopped bool
	client.Server
}

// startTallyd starts a server named name; mod may change its config. It
// is stopped when the test ends, if it is still running.
func startTallyd(t testing.TB, name string, mod func(*loop.Config)) *tallyd {
	t.Helper()
	cfg := loop.Defaults()
	cfg.Listeners = []loop.Listener{
		{Proto: loop.ProtoCounter, Addr: "127.0.0.1:0"},
		{Proto: loop.ProtoSemaphore, Addr: "127.0.0.1:0"},
		{Proto: loop.ProtoPool, Addr: "127.0.0.1:0"},
		{Proto: loop.ProtoSlock, Addr: "127.0.0.1:0"},
	}
	if mod != nil {
		mod(&cfg)
	}
	return runTallyd(t, name, cfg)
}

// restartTallyd starts a new server on the addresses of a stopped one.
func restartTallyd(t *testing.T, old *tallyd) *tallyd {
	t.Helper()
	cfg := loop.Defaults()
	cfg.Listeners = []loop.Listener{
		{Proto: loop.ProtoCounter, Addr: old.Counter},
		{Proto: loop.ProtoSemaphore, Addr: old.Semaphore},
		{Proto: loop.ProtoPool, Addr: old.Pool},
		{Proto: loop.ProtoSlock, Addr: old.Slock},
	}
	return runTallyd(t, old.Name, cfg)
}

func runTallyd(t testing.TB, name string, cfg loop.Config) *tallyd {
	t.Helper()
	s, err := loop.New(cfg)
	if err != nil {
		t.Fatalf("loop.New: %v", err)
	}
	ts := &tallyd{srv: s, errc: make(chan error, 1)}
	go func() { ts.errc <- s.Run() }()
	<-s.Ready()
	select {
	case err := <-ts.errc:
		t.Fatalf("Run: %v", err)
	default:
	}
	ts.Name = name
	for i, l := range cfg.Listeners {
		addr := s.Addr(i).String()
		switch l.Proto {
		case loop.ProtoCounter:
			ts.Counter = addr
		case loop.ProtoSemaphore:
			ts.Semaphore = addr
		case loop.ProtoPool:
			ts.Pool = addr
		case loop.ProtoSlock:
			ts.Slock = addr
		}
	}
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

// stop stops the server, closing every connection (releasing what each holds).
func (ts *tallyd) stop(t testing.TB) {
	t.Helper()
	if ts.stopped {
		return
	}
	ts.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := <-ts.errc; err != nil {
		t.Errorf("Run returned %v after Stop", err)
	}
}

// newClient returns a client of servers, closed when the test ends.
func newClient(t *testing.T, opts *client.Options, servers ...*tallyd) *client.Client {
	t.Helper()
	list := make([]client.Server, len(servers))
	for i, s := range servers {
		list[i] = s.Server
	}
	c, err := client.New(list, opts)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testCtx bounds a test: nothing it waits for may hang.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after a generous
// while (this bounds a hang; it is no performance assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never came true: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// poolStat reads one PoolCounter counter of server i.
func poolStat(t *testing.T, c *client.Client, i int, name string) int64 {
	t.Helper()
	st, err := c.Pool().Stats(testCtx(t), i, name)
	if err != nil {
		t.Fatalf("STATS %s: %v", name, err)
	}
	if len(st) != 1 || st[0].Name != name {
		t.Fatalf("STATS %s: %+v", name, st)
	}
	v, err := strconv.ParseInt(st[0].Value, 10, 64)
	if err != nil {
		t.Fatalf("STATS %s: %v", name, err)
	}
	return v
}

// counterStat reads one yrmcds statistic of server i.
func counterStat(t *testing.T, k *client.Counters, i int, name string) string {
	t.Helper()
	st, err := k.Stats(testCtx(t), i)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range st {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("Stats has no %q: %+v", name, st)
	return ""
}

// settledGoroutines returns the goroutine count once the servers have
// started everything they start (gnet starts some after Ready): a client
// has used each one and closed.
func settledGoroutines(t *testing.T, servers ...*tallyd) int {
	t.Helper()
	for _, s := range servers {
		c := newClient(t, nil, s)
		if _, err := c.Pool().Stats(testCtx(t), 0, "UPTIME"); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	return runtime.NumGoroutine()
}

// checkGoroutines fails if more goroutines run than before (allowing a
// while for ones that are ending).
func checkGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
