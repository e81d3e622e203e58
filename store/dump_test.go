package store_test

import (
	"fmt"
	"testing"

	"github.com/tallyd/tallyd/store"
)

func TestDumpChunks(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	want := map[string]uint32{}
	for i := range 10 {
		name := fmt.Sprint("c", i)
		h.acq(1, name, uint32(i+1), 100, at(0), store.OK)
		want[name] = uint32(i + 1)
	}
	for _, size := range []int{1, 3, 10, 11} {
		cur := h.c.DumpStart()
		got := map[string]uint32{}
		for calls := 1; ; calls++ {
			out, done := h.c.DumpNext(cur, at(1), make([]store.DumpEntry, 0, size))
			if len(out) > size || len(out) == 0 {
				t.Fatalf("chunk %d: DumpNext returned %d entries, room for %d", size, len(out), size)
			}
			for _, e := range out {
				if _, dup := got[e.Name]; dup {
					t.Fatalf("chunk %d: %q listed twice", size, e.Name)
				}
				if e.Max != e.Current {
					t.Fatalf("%+v: max differs from current", e)
				}
				got[e.Name] = e.Current
			}
			if done {
				if want := (10 + size - 1) / size; calls != want {
					t.Fatalf("chunk %d: done after %d calls, want %d", size, calls, want)
				}
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunk %d: dumped %v, want %v", size, got, want)
		}
	}
}

func TestDumpAppends(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 1, 1, at(0), store.OK)
	h.acq(1, "b", 2, 2, at(0), store.OK)
	cur := h.c.DumpStart()
	// A full buffer still gets one entry; existing entries are kept.
	out := []store.DumpEntry{{Name: "prefix"}}
	out, done := h.c.DumpNext(cur, at(0), out[:1:1])
	if len(out) != 2 || out[0].Name != "prefix" || done {
		t.Fatalf("DumpNext on a full buffer = %+v, done %v; want prefix + 1, not done", out, done)
	}
	out, done = h.c.DumpNext(cur, at(0), out)
	if len(out) != 3 || !done {
		t.Fatalf("second DumpNext = %+v, done %v; want 3 entries, done", out, done)
	}
	out, done = h.c.DumpNext(cur, at(0), out[:0])
	if len(out) != 0 || !done {
		t.Fatalf("DumpNext after done = %+v, %v", out, done)
	}
}

func TestDumpEmpty(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	out, done := c.DumpNext(c.DumpStart(), at(0), make([]store.DumpEntry, 0, 4))
	if len(out) != 0 || !done {
		t.Fatalf("dump of no counters = %+v, done %v", out, done)
	}
}

func TestDumpDuringGC(t *testing.T) {
	const d = 86400
	h := newCounters(t, store.CountersConfig{})
	for i := range 20 {
		h.acq(1, fmt.Sprint("z", i), 1, 1, at(0), store.OK)
		h.acq(2, fmt.Sprint("h", i), 1, 1, at(0), store.OK)
	}
	h.drop(1, at(0)) // the z counters are at 0
	cur := h.c.DumpStart()
	got := map[string]bool{}
	out, _ := h.c.DumpNext(cur, at(d), make([]store.DumpEntry, 0, 5))
	for _, e := range out {
		got[e.Name] = true
	}
	h.gc(at(d), 20)
	// New counters, one reusing a deleted name, are not in the snapshot.
	h.acq(3, "z0", 1, 1, at(d), store.OK)
	h.acq(3, "new", 1, 1, at(d), store.OK)
	for done := false; !done; {
		out, done = h.c.DumpNext(cur, at(d), out[:0])
		for _, e := range out {
			if got[e.Name] {
				t.Fatalf("%q listed twice", e.Name)
			}
			if e.Name[0] != 'h' {
				t.Fatalf("%q listed after GC deleted it or after DumpStart", e.Name)
			}
			got[e.Name] = true
		}
	}
	for i := range 20 {
		if !got[fmt.Sprint("h", i)] {
			t.Fatalf("h%d not listed", i)
		}
	}
	// A fresh dump lists exactly the live counters.
	all := h.dump(at(d))
	if len(all) != 22 || all["z0"].Current != 1 {
		t.Fatalf("fresh dump has %d counters, z0 = %+v; want 22 and z0 at 1", len(all), all["z0"])
	}
}

func TestDumpCounterAtZero(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	h.acq(1, "a", 4, 4, at(0), store.OK)
	h.rel(1, "a", 4, at(1), store.OK)
	h.max("a", at(2), 0, 4)
}

// Dump counts each counter's granted Acquires, so a client can tell its traffic from two
// dumps even when acquire+release pairs leave its consumption where it was.
func TestDumpCountsAcquires(t *testing.T) {
	h := newCounters(t, store.CountersConfig{})
	for range 5 {
		h.acq(1, "busy", 1, 1, at(0), store.OK)
		h.rel(1, "busy", 1, at(0), store.OK)
	}
	h.acq(1, "busy", 1, 1, at(0), store.OK)
	h.acq(2, "busy", 1, 1, at(0), store.NotAvailable) // refused: not counted
	h.acq(1, "calm", 3, 10, at(0), store.OK)
	h.rel(1, "busy", 1, at(0), store.OK)
	d := h.dump(at(1))
	if e := d["busy"]; e.Acquired != 6 || e.Current != 0 {
		t.Errorf("busy after 6 granted and 1 refused acquires: %+v", e)
	}
	if e := d["calm"]; e.Acquired != 1 || e.Current != 3 {
		t.Errorf("calm after one acquire of 3: %+v", e)
	}
}
