package store_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/store"
)

const maxU32 = 1<<32 - 1

func TestCounterAcquireCreates(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.gone("a")
	h.acq(1, "a", 3, 10, at(5), store.OK)
	h.get("a", 3)
	h.held(1, "a", 3)
	h.held(2, "a", 0)
	h.max("a", at(5), 3, 3)
	if got, want := h.c.Info(), (store.Info{Objects: 1, TotalObjects: 1, UsedMemory: store.NameCost(1)}); got != want {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
	if h.c.Len() != 1 || h.ls[1].Len() != 1 || h.ls[1].Owner() != 1 {
		t.Fatalf("Len %d, ledger Len %d, Owner %d; want 1, 1, 1", h.c.Len(), h.ls[1].Len(), h.ls[1].Owner())
	}
}

func TestCounterAcquireLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		have      uint32 // consumption before, acquired by conn 1 (0: counter at 0)
		r, max    uint32
		want      store.Result
		wantAfter uint32
	}{
		{"fits", 5, 3, 10, store.OK, 8},
		{"exactly max", 5, 5, 10, store.OK, 10},
		{"one over", 5, 6, 10, store.NotAvailable, 5},
		{"max below consumption", 5, 1, 4, store.NotAvailable, 5},
		{"at zero", 0, 7, 7, store.OK, 7},
		{"64-bit sum over max", 4294967290, 10, maxU32, store.NotAvailable, 4294967290},
		{"64-bit sum at max", 4294967290, 5, maxU32, store.OK, maxU32},
		{"full, would wrap to 0", maxU32, 1, maxU32, store.NotAvailable, maxU32},
		{"full, would wrap to small", maxU32, maxU32, maxU32, store.NotAvailable, maxU32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCounters(t, store.CountersConfig{})
			if tc.have == 0 {
				h.acq(1, "c", 1, 1, at(0), store.OK)
				h.rel(1, "c", 1, at(0), store.OK)
			} else {
				h.acq(1, "c", tc.have, tc.have, at(0), store.OK)
			}
			h.acq(2, "c", tc.r, tc.max, at(1), tc.want)
			h.get("c", tc.wantAfter)
			if tc.want == store.OK {
				h.held(2, "c", tc.r)
			} else {
				h.held(2, "c", 0)
				if h.ls[2].Len() != 0 {
					t.Fatalf("failed Acquire left a ledger entry")
				}
			}
		})
	}
}

func TestCounterAcquireAddsToEntry(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 2, 10, at(0), store.OK)
	h.acq(1, "a", 3, 10, at(0), store.OK)
	h.acq(2, "a", 4, 10, at(0), store.OK)
	h.held(1, "a", 5)
	h.held(2, "a", 4)
	h.get("a", 9)
	if h.ls[1].Len() != 1 {
		t.Fatalf("ledger Len = %d after two acquires of one counter, want 1", h.ls[1].Len())
	}
}

func TestCounterRelease(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.rel(1, "a", 1, at(0), store.NotFound)
	h.rel(1, "a", 0, at(0), store.NotFound)
	h.acq(1, "a", 5, 10, at(0), store.OK)
	h.acq(2, "a", 2, 10, at(0), store.OK)
	h.rel(3, "a", 1, at(0), store.NotAcquired) // holds nothing at all
	h.rel(3, "a", 0, at(0), store.NotAcquired) // r == 0 needs an entry too
	h.rel(2, "a", 3, at(0), store.NotAcquired) // more than it holds, though the counter has 7
	h.get("a", 7)
	h.rel(1, "a", 0, at(0), store.OK)
	h.held(1, "a", 5)
	h.rel(1, "a", 4, at(0), store.OK)
	h.get("a", 3)
	h.held(1, "a", 1)
	h.rel(1, "a", 1, at(0), store.OK)
	h.held(1, "a", 0)
	if h.ls[1].Len() != 0 {
		t.Fatalf("entry not removed at 0: ledger Len %d", h.ls[1].Len())
	}
	h.rel(1, "a", 0, at(0), store.NotAcquired)
	h.rel(2, "a", 2, at(0), store.OK)
	h.get("a", 0) // exists at 0 until GC
	h.rel(2, "a", 1, at(0), store.NotAcquired)
}

func TestCounterDrop(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 5, 10, at(0), store.OK)
	h.acq(1, "b", 1, 10, at(0), store.OK)
	h.acq(2, "a", 2, 10, at(0), store.OK)
	h.drop(1, at(1))
	h.get("a", 2)
	h.get("b", 0)
	h.held(2, "a", 2)
	h.drop(1, at(1)) // dropping an empty ledger is harmless
	// The ledger is reusable after Drop.
	h.acq(1, "b", 3, 10, at(2), store.OK)
	h.held(1, "b", 3)
	h.rel(1, "a", 1, at(2), store.NotAcquired)
	h.drop(2, at(3))
	h.drop(1, at(3))
	h.get("a", 0)
	h.get("b", 0)
}

func TestCounterDropManyEntries(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	for i := range 1000 {
		h.c.Acquire(h.ledger(1), []byte{byte(i), byte(i >> 8)}, 2, 10, at(0))
		if i%3 == 0 {
			h.c.Acquire(h.ledger(2), []byte{byte(i), byte(i >> 8)}, 1, 10, at(0))
		}
	}
	h.check("acquires")
	if h.ls[1].Len() != 1000 || h.ls[2].Len() != 334 {
		t.Fatalf("ledger Lens %d, %d; want 1000, 334", h.ls[1].Len(), h.ls[2].Len())
	}
	h.drop(1, at(1))
	for i := range 1000 {
		want := uint32(0)
		if i%3 == 0 {
			want = 1
		}
		h.get(string([]byte{byte(i), byte(i >> 8)}), want)
	}
}

// TestCounterMaxInInterval follows one counter's interval maximum through
// acquires, releases, failed acquires, gets and drops across boundaries, with
// the default one-day interval (boundaries at day0 + k*86400 s).
func TestCounterMaxInInterval(t *testing.T) {
	const d = 86400
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 5, 100, at(0), store.OK)
	h.acq(1, "a", 3, 100, at(10), store.OK)
	h.max("a", at(20), 8, 8)
	h.rel(1, "a", 3, at(30), store.OK) // same interval: max stays
	h.max("a", at(40), 5, 8)
	// Next interval, before any update: Dump reports the consumption.
	h.max("a", at(d), 5, 5)
	// Failed acquires and gets do not start the new interval.
	h.acq(2, "a", 96, 100, at(d+1), store.NotAvailable)
	h.get("a", 5)
	h.max("a", at(d+2), 5, 5)
	// The first acquire after a boundary starts from consumption + r, even
	// below the old maximum.
	h.acq(2, "a", 1, 100, at(d+3), store.OK)
	h.max("a", at(d+4), 6, 6)
	h.acq(2, "a", 4, 100, at(d+5), store.OK)
	h.rel(2, "a", 5, at(d+6), store.OK)
	h.max("a", at(d+7), 5, 10)
	// The first release after a boundary starts from the consumption before it.
	h.rel(1, "a", 2, at(2*d), store.OK)
	h.max("a", at(2*d+1), 3, 5)
	// A zero release touches only the time.
	h.rel(1, "a", 0, at(3*d), store.OK)
	h.max("a", at(3*d+1), 3, 3)
	h.acq(1, "a", 4, 100, at(3*d+2), store.OK)
	h.rel(1, "a", 4, at(3*d+3), store.OK)
	h.max("a", at(3*d+4), 3, 7)
	// Drop releases as Release does: after a boundary, max is the
	// consumption before it.
	h.drop(1, at(4*d+5))
	h.max("a", at(4*d+6), 0, 3)
	h.max("a", at(5*d), 0, 0)
}

// TestCounterBoundaries checks where boundaries fall for a short interval and
// that they are read from nanoseconds.
func TestCounterBoundaries(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first, then int64 // nanoseconds
		interval    int64
		crossed     bool
	}{
		{"same interval", 11 * sec, 19*sec + sec - 1, 10, false},
		{"next interval", 19 * sec, 20 * sec, 10, true},
		{"one nanosecond before", 20*sec - 1, 20 * sec, 10, true},
		{"aligned to the epoch, not to the first update", 15 * sec, 24 * sec, 10, true},
		{"several intervals", 10 * sec, 1000 * sec, 10, true},
		{"zero interval means a day", 100 * sec, 86399 * sec, 0, false},
		{"zero interval means a day, crossed", 100 * sec, 86400 * sec, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newCounters(t, store.CountersConfig{Interval: tc.interval})
			base := int64(day0) * sec
			h.acq(1, "a", 5, 10, base+tc.first, store.OK)
			h.rel(1, "a", 5, base+tc.first, store.OK)
			want := uint32(5)
			if tc.crossed {
				want = 0
			}
			h.max("a", base+tc.then, 0, want)
			n := 0
			if tc.crossed {
				n = 1
			}
			h.gc(base+tc.then, n)
		})
	}
}

func TestCounterGC(t *testing.T) {
	const d = 86400
	h := newCounters(t, store.CountersConfig{})
	if !h.c.GCDue(at(0)) {
		t.Fatalf("GCDue before any GC = false")
	}
	h.gc(at(0), 0)
	if h.c.GCDue(at(d - 1)) {
		t.Fatalf("GCDue later in the interval of the last GC = true")
	}
	h.acq(1, "held", 1, 10, at(1), store.OK)
	h.acq(1, "zeroed", 1, 10, at(1), store.OK)
	h.rel(1, "zeroed", 1, at(2), store.OK)
	h.gc(at(3), 0) // zeroed in the current interval: kept
	h.get("zeroed", 0)
	if !h.c.GCDue(at(d)) {
		t.Fatalf("GCDue after the boundary = false")
	}
	h.acq(2, "late", 1, 10, at(d+1), store.OK)
	h.rel(2, "late", 1, at(d+2), store.OK) // zeroed after the boundary
	h.gc(at(d+3), 1)
	h.gone("zeroed")
	h.get("late", 0)
	h.get("held", 1)
	if h.c.GCDue(at(d + 4)) {
		t.Fatalf("GCDue right after GC = true")
	}
	h.gc(at(2*d), 1)
	h.gone("late")
	h.get("held", 1)
	// A counter held for days is never collected; released, it lasts until
	// the next boundary.
	h.rel(1, "held", 1, at(5*d), store.OK)
	h.gc(at(6*d-1), 0)
	h.gc(at(6*d), 1)
	if h.c.Len() != 0 || h.c.Info().Objects != 0 || h.c.Info().TotalObjects != 3 || h.c.Info().UsedMemory != 0 {
		t.Fatalf("after GC of everything: Len %d, Info %+v", h.c.Len(), h.c.Info())
	}
	// A collected name can be created again.
	h.acq(1, "zeroed", 4, 10, at(6*d), store.OK)
	h.get("zeroed", 4)
}

func TestCounterMaxObjects(t *testing.T) {
	const d = 86400
	h := newCounters(t, store.CountersConfig{MaxObjects: 2})
	h.acq(1, "a", 1, 10, at(0), store.OK)
	h.acq(1, "b", 1, 10, at(0), store.OK)
	h.acq(1, "c", 1, 10, at(0), store.OutOfMemory)
	h.gone("c")
	h.held(1, "c", 0)
	if info := h.c.Info(); info.Objects != 2 || info.TotalObjects != 2 {
		t.Fatalf("Info after OutOfMemory = %+v", info)
	}
	h.acq(2, "a", 1, 10, at(0), store.OK) // existing counters still work
	h.rel(1, "a", 1, at(0), store.OK)
	h.rel(2, "a", 1, at(0), store.OK)
	h.acq(1, "c", 1, 10, at(1), store.OutOfMemory) // "a" is at 0 but not collected
	h.gc(at(d), 1)
	h.acq(1, "c", 1, 10, at(d), store.OK)
	h.acq(1, "d", 1, 10, at(d), store.OutOfMemory)
}

func TestCounterNames(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	long := strings.Repeat("x\x00", 65535/2) + "y"
	names := []string{"a", "a\x00", "\x00", "\x00a", "A", long, long[:65534]}
	for i, n := range names {
		h.acq(1, n, uint32(i+1), 100, at(0), store.OK)
	}
	for i, n := range names {
		h.get(n, uint32(i+1))
		h.held(1, n, uint32(i+1))
	}
	mem := uint64(0)
	for _, n := range names {
		mem += store.NameCost(len(n))
	}
	if info := h.c.Info(); info.UsedMemory != mem {
		t.Fatalf("UsedMemory = %d, want %d", info.UsedMemory, mem)
	}
	// The store keeps its own copy of the name.
	b := []byte("mutable")
	h.c.Acquire(h.ledger(1), b, 1, 1, at(0))
	copy(b, "MUTABLE")
	h.get("mutable", 1)
	h.gone("MUTABLE")
}

func TestCounterZeroAcquire(t *testing.T) {
	// The codec rejects Resources == 0; the store still keeps its invariant.
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 0, 0, at(0), store.OK)
	h.get("a", 0)
	if h.ls[1].Len() != 0 {
		t.Fatalf("Acquire of 0 made a ledger entry")
	}
	h.acq(1, "a", 0, 0, at(0), store.OK)
	h.acq(1, "b", 2, 1, at(0), store.NotAvailable) // r > max, new counter
	h.gone("b")
}

func TestForeignLedgerPanics(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	s := store.NewSemaphores(store.SemaphoresConfig{})
	other := store.NewCounters(store.CountersConfig{})
	for name, f := range map[string]func(){
		"semaphore ledger to counters": func() { c.Acquire(s.NewLedger(1), []byte("a"), 1, 1, 0) },
		"counter ledger to semaphores": func() { s.Acquire(c.NewLedger(1), []byte("a"), 1, 1, 0) },
		"other counters' ledger":       func() { c.Release(other.NewLedger(1), []byte("a"), 1, 0) },
		"other counters' ledger, Drop": func() { c.Drop(other.NewLedger(1), 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// Released counters keep their name (Dump lists them until the interval ends) and it stays
// counted in UsedMemory; collected, they give everything back, the map's room included.
func TestCounterReleasedMemory(t *testing.T) {
	const d = 86400
	c := store.NewCounters(store.CountersConfig{})
	l := c.NewLedger(1)
	name := func(i int) []byte { return []byte(strings.Repeat("n", 1000) + strconv.Itoa(i)) }
	const n = 10_000
	var names uint64
	for i := range n {
		if r := c.Acquire(l, name(i), 1, 1, at(1)); r != store.OK {
			t.Fatalf("acquire %d: %v", i, r)
		}
		names += store.NameCost(len(name(i)))
		if r := c.Release(l, name(i), 1, at(2)); r != store.OK {
			t.Fatalf("release %d: %v", i, r)
		}
	}
	if info := c.Info(); info.UsedMemory != names || info.Objects != n {
		t.Fatalf("released in the interval: Info %+v, want %d bytes of %d counters", info, names, n)
	}
	var dumped int
	for cur, done := c.DumpStart(), false; !done; {
		var out []store.DumpEntry
		out, done = c.DumpNext(cur, at(3), make([]store.DumpEntry, 0, 512))
		for _, e := range out {
			if e.Current != 0 || e.Max != 1 {
				t.Fatalf("dump of a released counter: %+v", e)
			}
		}
		dumped += len(out)
	}
	if dumped != n {
		t.Fatalf("dump lists %d released counters, want %d", dumped, n)
	}
	if c.GC(at(d)) != n || c.Len() != 0 || c.Info().UsedMemory != 0 {
		t.Fatalf("GC at the boundary: Len %d, Info %+v", c.Len(), c.Info())
	}
	if c.MapPeak() != 0 {
		t.Fatalf("the map of 0 counters keeps the room of %d", c.MapPeak())
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}
