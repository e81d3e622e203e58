package loop

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// fakeClock is a settable clock shared by the test and the loop.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) add(d time.Duration)  { c.ns.Add(int64(d)) }
func (c *fakeClock) unixSeconds() int64   { return c.ns.Load() / 1e9 }
func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }

// dumpAll returns name -> [current, max] from a Dump.
func dumpAll(cl *client) map[string][2]uint32 {
	out := map[string][2]uint32{}
	for f := cl.simple(counter.OpDump); len(f.Body) > 0; f = cl.readFrame() {
		cur, max, name, err := counter.ParseDumpBody(f.Body)
		if err != nil {
			cl.t.Fatalf("dump body: %v", err)
		}
		out[string(name)] = [2]uint32{cur, max}
	}
	return out
}

// Released counters stay until the wall-clock interval ends, then the first tick collects
// them; the maximum in the interval restarts at each boundary.
func TestCounterGCAndMaxAtIntervalBoundary(t *testing.T) {
	// 5 s into a 60 s interval (boundaries at whole minutes).
	clk := newFakeClock(time.Unix(1_700_000_040, 0).Add(5 * time.Second))
	if clk.unixSeconds()%60 != 5 {
		t.Fatal("bad start")
	}
	ts := startServer(t, func(c *Config) { c.StatInterval = 60; c.Now = clk.now })
	a := dial(t, ts.counterAddr)
	expectStatus(t, a.acquire("gone", 4, 10), counter.StatusOK)
	expectStatus(t, a.release("gone", 4), counter.StatusOK)
	expectStatus(t, a.acquire("kept", 6, 10), counter.StatusOK)
	expectStatus(t, a.release("kept", 5), counter.StatusOK)
	d := dumpAll(a)
	if d["gone"] != [2]uint32{0, 4} || d["kept"] != [2]uint32{1, 6} {
		t.Fatalf("dump before the boundary: %v", d)
	}
	_, m := a.stats()
	gcBefore := m["gc_count"]

	clk.add(60 * time.Second) // into the next interval
	deadline := time.Now().Add(5 * time.Second)
	for a.get("gone").Status != counter.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("the released counter was not collected after the boundary")
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, m = a.stats()
	if m["gc_count"] == gcBefore || m["objects"] != "1" {
		t.Fatalf("after gc: gc_count %s (was %s), objects %s", m["gc_count"], gcBefore, m["objects"])
	}
	// In the new interval max restarts from the current consumption.
	if d = dumpAll(a); d["kept"] != [2]uint32{1, 1} {
		t.Fatalf("dump after the boundary: %v", d)
	}
	expectStatus(t, a.acquire("kept", 2, 10), counter.StatusOK)
	if d = dumpAll(a); d["kept"] != [2]uint32{3, 3} {
		t.Fatalf("dump after an acquire in the new interval: %v", d)
	}
	ts.checkInvariants(t)
}

// Semaphores nobody holds are collected every gc interval.
func TestSemaphoreGC(t *testing.T) {
	clk := newFakeClock(time.Unix(1_700_000_000, 0))
	ts := startServer(t, func(c *Config) { c.SemaphoreGCInterval = 10 * time.Second; c.Now = clk.now })
	a := dial(t, ts.semaphoreAddr)
	expectStatus(t, a.acquire("s", 1, 3), counter.StatusOK)
	expectStatus(t, a.acquire("held", 1, 3), counter.StatusOK)
	expectStatus(t, a.release("s", 1), counter.StatusOK)
	time.Sleep(50 * time.Millisecond) // ticks run, but the interval has not passed
	if f := a.get("s"); f.Status != counter.StatusOK || u32(f.Body) != 3 {
		t.Fatalf("semaphore collected too early: % x", f.Raw)
	}
	clk.add(11 * time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for a.get("s").Status != counter.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("released semaphore not collected")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f := a.get("held"); f.Status != counter.StatusOK || u32(f.Body) != 2 {
		t.Fatalf("held semaphore: % x", f.Raw)
	}
}
