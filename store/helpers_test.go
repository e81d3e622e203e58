package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

const (
	sec = int64(1e9)
	// day0 is 00:00 UTC on a day (2023-11-14), a boundary for the default interval.
	day0 = 19675 * 86400
)

// at returns Unix nanoseconds for s seconds after day0.
func at(s int64) int64 { return (day0 + s) * sec }

// counters drives a Counters through a script, checking the invariant after
// every step.
type counters struct {
	t  *testing.T
	c  *store.Counters
	ls map[int]*store.Ledger
}

func newCounters(t *testing.T, cfg store.CountersConfig) *counters {
	return &counters{t: t, c: store.NewCounters(cfg), ls: map[int]*store.Ledger{}}
}

func (h *counters) ledger(conn int) *store.Ledger {
	l := h.ls[conn]
	if l == nil {
		l = h.c.NewLedger(store.Owner(conn))
		h.ls[conn] = l
	}
	return l
}

func (h *counters) check(what string) {
	h.t.Helper()
	if err := h.c.Check(); err != nil {
		h.t.Fatalf("after %s: %v", what, err)
	}
}

func (h *counters) acq(conn int, name string, r, max uint32, now int64, want store.Result) {
	h.t.Helper()
	if got := h.c.Acquire(h.ledger(conn), []byte(name), r, max, now); got != want {
		h.t.Fatalf("conn %d: Acquire(%q, %d, max %d) = %v, want %v", conn, name, r, max, got, want)
	}
	h.check("Acquire")
}

func (h *counters) rel(conn int, name string, r uint32, now int64, want store.Result) {
	h.t.Helper()
	if got := h.c.Release(h.ledger(conn), []byte(name), r, now); got != want {
		h.t.Fatalf("conn %d: Release(%q, %d) = %v, want %v", conn, name, r, got, want)
	}
	h.check("Release")
}

func (h *counters) drop(conn int, now int64) {
	h.t.Helper()
	h.c.Drop(h.ledger(conn), now)
	if n := h.ls[conn].Len(); n != 0 {
		h.t.Fatalf("conn %d: Len after Drop = %d", conn, n)
	}
	h.check("Drop")
}

// get fails unless the named counter exists at consumption want.
func (h *counters) get(name string, want uint32) {
	h.t.Helper()
	got, ok := h.c.Get([]byte(name))
	if !ok || got != want {
		h.t.Fatalf("Get(%q) = %d, %v; want %d, true", name, got, ok, want)
	}
}

func (h *counters) gone(name string) {
	h.t.Helper()
	if got, ok := h.c.Get([]byte(name)); ok {
		h.t.Fatalf("Get(%q) = %d, true; want not found", name, got)
	}
}

func (h *counters) held(conn int, name string, want uint32) {
	h.t.Helper()
	if got := h.ledger(conn).Held([]byte(name)); got != want {
		h.t.Fatalf("conn %d holds %d of %q, want %d", conn, got, name, want)
	}
}

func (h *counters) gc(now int64, want int) {
	h.t.Helper()
	if got := h.c.GC(now); got != want {
		h.t.Fatalf("GC at %d s deleted %d, want %d", now/sec-day0, got, want)
	}
	h.check("GC")
}

// dump returns every counter as Dump reports it at now, by name.
func (h *counters) dump(now int64) map[string]store.DumpEntry {
	h.t.Helper()
	m := map[string]store.DumpEntry{}
	cur := h.c.DumpStart()
	buf := make([]store.DumpEntry, 0, 4)
	for {
		var done bool
		buf, done = h.c.DumpNext(cur, now, buf[:0])
		for _, e := range buf {
			if _, dup := m[e.Name]; dup {
				h.t.Fatalf("Dump lists %q twice", e.Name)
			}
			m[e.Name] = e
		}
		if done {
			return m
		}
		if len(buf) == 0 {
			h.t.Fatalf("DumpNext returned nothing and not done")
		}
	}
}

// max fails unless Dump at now reports the named counter at current, max.
func (h *counters) max(name string, now int64, current, max uint32) {
	h.t.Helper()
	e, ok := h.dump(now)[name]
	if !ok || e.Current != current || e.Max != max {
		h.t.Fatalf("Dump at %d s: %q = %+v (listed %v), want current %d, max %d", now/sec-day0, name, e, ok, current, max)
	}
}
