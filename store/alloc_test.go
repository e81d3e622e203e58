package store_test

import (
	"fmt"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// noAllocs fails if f allocates: on average over many runs (AllocsPerRun), and
// at all over one long run of loops calls, so that a rare allocation (a map
// rehash, a slice growing) cannot hide in the average.
func noAllocs(t *testing.T, what string, loops int, f func(i int)) {
	t.Helper()
	i := 0
	if n := testing.AllocsPerRun(1000, func() { f(i); i++ }); n != 0 {
		t.Errorf("%s: %v allocations per run", what, n)
	}
	long := func() float64 {
		return testing.AllocsPerRun(1, func() {
			for range loops {
				f(i)
				i++
			}
		})
	}
	// The count is the whole process's: under the race detector on a busy machine the
	// runtime now and then allocates once on its own during the run, so a long run with
	// allocations is repeated once, and must be clean then. An allocation per call, or one
	// every few thousand calls, shows up in both.
	if n := long(); n != 0 {
		if n2 := long(); n2 != 0 {
			t.Errorf("%s: %v, then %v allocations in %d runs", what, n, n2, loops)
		}
	}
}

// keys returns n distinct names.
func keys(n int) [][]byte {
	k := make([][]byte, n)
	for i := range k {
		k[i] = []byte(fmt.Sprintf("key-%06d", i))
	}
	return k
}

func mustOK(t *testing.T, what string, r store.Result) {
	t.Helper()
	if r != store.OK {
		t.Fatalf("%s = %v", what, r)
	}
}

func TestCountersNoAllocs(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	a, b := c.NewLedger(1), c.NewLedger(2)
	name := []byte("steady")
	now := at(0)
	mustOK(t, "Acquire", c.Acquire(b, name, 1, maxU32, now))

	noAllocs(t, "Acquire of a held counter", 10000, func(int) {
		mustOK(t, "Acquire", c.Acquire(b, name, 1, maxU32, now))
	})
	noAllocs(t, "Release of a held counter", 10000, func(int) {
		mustOK(t, "Release", c.Release(b, name, 1, now))
	})
	// The entry appears and disappears in a's ledger every time; the
	// counter crosses interval boundaries now and then.
	noAllocs(t, "Acquire+Release pair", 10000, func(i int) {
		now := at(int64(i))
		mustOK(t, "Acquire", c.Acquire(a, name, 3, maxU32, now))
		mustOK(t, "Release", c.Release(a, name, 3, now))
	})
	noAllocs(t, "Get", 10000, func(int) {
		if _, ok := c.Get(name); !ok {
			t.Fatal("Get: not found")
		}
	})
	noAllocs(t, "Get of a missing counter", 10000, func(int) {
		if _, ok := c.Get([]byte("missing")); ok {
			t.Fatal("Get: found")
		}
	})
	noAllocs(t, "failed Acquire and Release", 10000, func(int) {
		if r := c.Acquire(a, name, maxU32, maxU32, now); r != store.NotAvailable {
			t.Fatalf("Acquire = %v", r)
		}
		if r := c.Release(a, name, 1, now); r != store.NotAcquired {
			t.Fatalf("Release = %v", r)
		}
	})
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCountersNoAllocsLargeLedger has one connection hold 10,000 counters and
// acquire and release others, so entries come and go in its index map.
func TestCountersNoAllocsLargeLedger(t *testing.T) {
	const held, extra = 10000, 1000
	c := store.NewCounters(store.CountersConfig{})
	l := c.NewLedger(1)
	k := keys(held + extra)
	for _, name := range k {
		mustOK(t, "Acquire", c.Acquire(l, name, 1, 10, at(0)))
	}
	for _, name := range k[held:] {
		mustOK(t, "Release", c.Release(l, name, 1, at(0)))
	}
	noAllocs(t, "Acquire+Release of held counters", 100000, func(i int) {
		name := k[i%held]
		mustOK(t, "Acquire", c.Acquire(l, name, 1, 10, at(0)))
		mustOK(t, "Release", c.Release(l, name, 1, at(0)))
	})
	noAllocs(t, "Acquire+Release of other counters", 200000, func(i int) {
		name := k[held+i%extra]
		mustOK(t, "Acquire", c.Acquire(l, name, 1, 10, at(0)))
		mustOK(t, "Release", c.Release(l, name, 1, at(0)))
	})
	if l.Len() != held {
		t.Fatalf("ledger Len %d, want %d", l.Len(), held)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoresNoAllocs(t *testing.T) {
	s := store.NewSemaphores(store.SemaphoresConfig{})
	a, b := s.NewLedger(1), s.NewLedger(2)
	name := []byte("steady")
	mustOK(t, "Acquire", s.Acquire(b, name, 1, maxU32, 0))
	noAllocs(t, "Acquire of a held semaphore", 10000, func(int) {
		mustOK(t, "Acquire", s.Acquire(b, name, 1, maxU32, 0))
	})
	noAllocs(t, "Release of a held semaphore", 10000, func(int) {
		mustOK(t, "Release", s.Release(b, name, 1, 0))
	})
	noAllocs(t, "Acquire+Release pair", 10000, func(int) {
		mustOK(t, "Acquire", s.Acquire(a, name, 3, maxU32, 0))
		mustOK(t, "Release", s.Release(a, name, 3, 0))
	})
	noAllocs(t, "Get", 10000, func(int) {
		if _, ok := s.Get(name); !ok {
			t.Fatal("Get: not found")
		}
	})
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestSemaphoresNoAllocsLargeLedger(t *testing.T) {
	const held, extra = 10000, 1000
	s := store.NewSemaphores(store.SemaphoresConfig{})
	l := s.NewLedger(1)
	k := keys(held + extra)
	for _, name := range k {
		mustOK(t, "Acquire", s.Acquire(l, name, 1, 10, 0))
	}
	for _, name := range k[held:] {
		mustOK(t, "Release", s.Release(l, name, 1, 0))
	}
	noAllocs(t, "Acquire+Release of other semaphores", 200000, func(i int) {
		name := k[held+i%extra]
		mustOK(t, "Acquire", s.Acquire(l, name, 1, 10, 0))
		mustOK(t, "Release", s.Release(l, name, 1, 0))
	})
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestDropNoAllocs: a connection that holds a few counters and drops them,
// over and over, reuses its ledger without allocating.
func TestDropNoAllocs(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	l := c.NewLedger(1)
	k := keys(8)
	noAllocs(t, "Acquire 8 + Drop", 1000, func(i int) {
		for _, name := range k {
			mustOK(t, "Acquire", c.Acquire(l, name, 1, 10, at(int64(i))))
		}
		c.Drop(l, at(int64(i)))
	})
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestDumpNextNoAllocs(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	l := c.NewLedger(1)
	for _, name := range keys(1000) {
		mustOK(t, "Acquire", c.Acquire(l, name, 1, 10, at(0)))
	}
	// AllocsPerRun calls f twice, once to warm up: give each call a cursor.
	curs := []*store.DumpCursor{c.DumpStart(), c.DumpStart()}
	out := make([]store.DumpEntry, 0, 16)
	calls, n := 0, 0
	if a := testing.AllocsPerRun(1, func() {
		cur := curs[calls]
		calls++
		n = 0
		for done := false; !done; {
			out, done = c.DumpNext(cur, at(1), out[:0])
			n += len(out)
		}
	}); a != 0 {
		t.Fatalf("DumpNext: %v allocations", a)
	}
	if n != 1000 {
		t.Fatalf("dumped %d counters, want 1000", n)
	}
}
