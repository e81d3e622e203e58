package loop

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// Reload before any connection is applied before the first is served; later ones at once:
// the connection limits, per listener and overall, and the idle timeout, both ways.
func TestReloadLimits(t *testing.T) {
	ts := startServer(t, nil)
	cfg := ts.cfg // not yet touched by the loop: no connection so far
	cfg.Listeners = []Listener{{Proto: ProtoCounter, MaxConnections: 1}}
	ts.Reload(cfg)

	a := dial(t, ts.counterAddr)
	expectStatus(t, a.simple(counter.OpNoop), counter.StatusOK)
	dial(t, ts.counterAddr).expectClosed() // the counter listener takes one
	b := dial(t, ts.semaphoreAddr)         // the semaphore listener has no limit
	expectStatus(t, b.simple(counter.OpNoop), counter.StatusOK)
	ts.log.waitFor(t, "counter max-connections")

	// Lifted on the counter listener, a total of 3 takes over.
	cfg.Listeners = []Listener{{Proto: ProtoCounter}}
	cfg.MaxConnections = 3
	ts.Reload(cfg)
	var ok bool
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); {
		ts.onLoop(t, func() { ok = ts.cfg.MaxConnections == 3 })
	}
	if !ok {
		t.Fatal("the reload was not applied")
	}
	c := dial(t, ts.counterAddr)
	expectStatus(t, c.simple(counter.OpNoop), counter.StatusOK)
	dial(t, ts.counterAddr).expectClosed()

	// An idle timeout turned on counts from the reload, for connections already open too.
	cfg.MaxConnections = 0
	cfg.IdleTimeout = 300 * time.Millisecond
	start := time.Now()
	ts.Reload(cfg)
	for _, cl := range []*client{a, b, c} {
		cl.expectClosed()
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("closed %s after the reload, before the timeout", d)
	}

	// And off again: a connection opened now stays.
	cfg.IdleTimeout = 0
	ts.Reload(cfg)
	d := dial(t, ts.counterAddr)
	expectStatus(t, d.simple(counter.OpNoop), counter.StatusOK)
	if _, err := d.tryRead(800 * time.Millisecond); err == nil {
		t.Fatal("unexpected bytes")
	}
	expectStatus(t, d.simple(counter.OpNoop), counter.StatusOK)
	ts.checkInvariants(t)
}

// A shorter idle timeout applies to connections already waiting out a longer one.
func TestReloadShortensIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.IdleTimeout = time.Hour })
	a := dial(t, ts.counterAddr)
	expectStatus(t, a.simple(counter.OpNoop), counter.StatusOK)
	cfg := ts.cfg
	cfg.IdleTimeout = 200 * time.Millisecond
	ts.Reload(cfg)
	a.expectClosed()
}
