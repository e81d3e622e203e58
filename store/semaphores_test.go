package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// semaphores drives a Semaphores through a script, checking the invariant
// after every step.
type semaphores struct {
	t  *testing.T
	s  *store.Semaphores
	ls map[int]*store.Ledger
}

func newSemaphores(t *testing.T, cfg store.SemaphoresConfig) *semaphores {
	return &semaphores{t: t, s: store.NewSemaphores(cfg), ls: map[int]*store.Ledger{}}
}

func (h *semaphores) ledger(conn int) *store.Ledger {
	l := h.ls[conn]
	if l == nil {
		l = h.s.NewLedger(store.Owner(conn))
		h.ls[conn] = l
	}
	return l
}

func (h *semaphores) check(what string) {
	h.t.Helper()
	if err := h.s.Check(); err != nil {
		h.t.Fatalf("after %s: %v", what, err)
	}
}

func (h *semaphores) acq(conn int, name string, r, initial uint32, want store.Result) {
	h.t.Helper()
	if got := h.s.Acquire(h.ledger(conn), []byte(name), r, initial, 0); got != want {
		h.t.Fatalf("conn %d: Acquire(%q, %d, initial %d) = %v, want %v", conn, name, r, initial, got, want)
	}
	h.check("Acquire")
}

func (h *semaphores) rel(conn int, name string, r uint32, want store.Result) {
	h.t.Helper()
	if got := h.s.Release(h.ledger(conn), []byte(name), r, 0); got != want {
		h.t.Fatalf("conn %d: Release(%q, %d) = %v, want %v", conn, name, r, got, want)
	}
	h.check("Release")
}

func (h *semaphores) get(name string, want uint32) {
	h.t.Helper()
	got, ok := h.s.Get([]byte(name))
	if !ok || got != want {
		h.t.Fatalf("Get(%q) = %d, %v; want %d, true", name, got, ok, want)
	}
}

func (h *semaphores) gone(name string) {
	h.t.Helper()
	if got, ok := h.s.Get([]byte(name)); ok {
		h.t.Fatalf("Get(%q) = %d, true; want not found", name, got)
	}
}

func (h *semaphores) gc(want int) {
	h.t.Helper()
	if got := h.s.GC(); got != want {
		h.t.Fatalf("GC deleted %d, want %d", got, want)
	}
	h.check("GC")
}

func TestSemaphoreAcquire(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         uint32
		initial   uint32
		want      store.Result
		wantValue uint32
	}{
		{"fits", 3, 10, store.OK, 3},
		{"takes the rest", 6, 10, store.OK, 0},
		{"one over", 7, 10, store.NotAvailable, 6},
		{"initial of an existing semaphore is ignored", 7, 100, store.NotAvailable, 6},
		{"smaller initial ignored too", 2, 1, store.OK, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newSemaphores(t, store.SemaphoresConfig{})
			h.acq(1, "s", 4, 10, store.OK)
			h.get("s", 6)
			h.acq(2, "s", tc.r, tc.initial, tc.want)
			h.get("s", tc.wantValue)
		})
	}
}

func TestSemaphoreNew(t *testing.T) {
	h := newSemaphores(t, store.SemaphoresConfig{})
	h.acq(1, "a", 5, 5, store.OK)
	h.get("a", 0)
	h.acq(2, "a", 1, 5, store.NotAvailable)
	h.acq(1, "b", maxU32, maxU32, store.OK)
	h.get("b", 0)
	h.acq(1, "c", 2, 1, store.NotAvailable) // initial < r: nothing created
	h.gone("c")
	if got, want := h.s.Info(), (store.Info{Objects: 2, TotalObjects: 2, UsedMemory: 2 * store.NameCost(1)}); got != want {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
}

func TestSemaphoreRelease(t *testing.T) {
	h := newSemaphores(t, store.SemaphoresConfig{})
	h.rel(1, "a", 1, store.NotFound)
	h.acq(1, "a", 3, 10, store.OK)
	h.acq(2, "a", 2, 10, store.OK)
	h.rel(3, "a", 1, store.NotAcquired)
	h.rel(3, "a", 0, store.NotAcquired)
	h.rel(2, "a", 3, store.NotAcquired)
	h.get("a", 5)
	h.rel(1, "a", 0, store.OK)
	h.rel(1, "a", 2, store.OK)
	h.get("a", 7)
	h.rel(1, "a", 1, store.OK)
	if h.ls[1].Len() != 0 || h.ledger(1).Held([]byte("a")) != 0 {
		t.Fatalf("entry not removed at 0")
	}
	h.rel(1, "a", 1, store.NotAcquired)
	h.rel(2, "a", 2, store.OK)
	h.get("a", 10)
}

func TestSemaphoreDropAndGC(t *testing.T) {
	h := newSemaphores(t, store.SemaphoresConfig{})
	h.acq(1, "a", 3, 10, store.OK)
	h.acq(1, "b", 1, 1, store.OK)
	h.acq(2, "a", 2, 10, store.OK)
	h.gc(0)
	h.s.Drop(h.ledger(1), 0)
	h.check("Drop")
	if h.ls[1].Len() != 0 {
		t.Fatalf("ledger Len after Drop = %d", h.ls[1].Len())
	}
	h.get("a", 8)
	h.get("b", 1)
	h.gc(1) // "b": nobody holds it; "a": conn 2 does
	h.gone("b")
	h.get("a", 8)
	h.s.Drop(h.ledger(2), 0)
	h.check("Drop")
	h.gc(1)
	h.gc(0)
	if h.s.Len() != 0 || h.s.Info().Objects != 0 || h.s.Info().TotalObjects != 2 {
		t.Fatalf("after GC of everything: Len %d, Info %+v", h.s.Len(), h.s.Info())
	}
	// Recreated with a new initial value.
	h.acq(1, "a", 1, 3, store.OK)
	h.get("a", 2)
}

func TestSemaphoreMaxObjects(t *testing.T) {
	h := newSemaphores(t, store.SemaphoresConfig{MaxObjects: 1})
	h.acq(1, "a", 1, 2, store.OK)
	h.acq(1, "b", 1, 2, store.OutOfMemory)
	h.gone("b")
	h.acq(2, "a", 1, 2, store.OK)
	h.rel(1, "a", 1, store.OK)
	h.rel(2, "a", 1, store.OK)
	h.acq(1, "b", 1, 2, store.OutOfMemory)
	h.gc(1)
	h.acq(1, "b", 1, 2, store.OK)
}
