package loop

import (
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/store"
)

// addPoolConn adds another fake PoolCounter connection of owner o to a path server.
func addPoolConn(s *Server, o uint64) *fakeConn {
	fc := &fakeConn{}
	cs := &conn{c: fc, owner: store.Owner(o), proto: ProtoPool, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	fc.ctx = cs
	s.ct.conns[cs.owner] = cs
	return fc
}

// The stampede's steady path (issue 25) allocates nothing once warm: an ACQ4ME that waits,
// the holder's RELEASE handing the slot over (the waiter's LOCKED written in the same turn),
// and an ACQ4ME refused with QUEUE_FULL.
func TestPoolHandOverDoesNotAllocate(t *testing.T) {
	s, round := handOverRound(t)
	for range 4 {
		round()
	}
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 {
		t.Fatalf("%v allocations per hand-over round", allocs)
	}
	if err := s.st.pools.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPoolHandOver is one round of the stampede's steady path through the loop: an
// ACQ4ME that waits, one refused with QUEUE_FULL, and the RELEASE that hands the slot over.
func BenchmarkPoolHandOver(b *testing.B) {
	_, round := handOverRound(b)
	b.ReportAllocs()
	for b.Loop() {
		round()
	}
}

// handOverRound returns a path server with a held key and a func that runs one round of the
// stampede's steady path on it, checking the waiter's LOCKED went out in the RELEASE's turn.
func handOverRound(t testing.TB) (*Server, func()) {
	s, a := newPoolPathServer(t)
	b, c := addPoolConn(s, 2), addPoolConn(s, 3)
	acq := []byte("ACQ4ME hot 1 2 5\n")
	rel := []byte("RELEASE\n")
	traffic := func(fc *fakeConn, in []byte) {
		fc.in = in
		if s.OnTraffic(fc) != gnet.None || len(fc.in) != 0 {
			t.Fatal("request not served")
		}
	}
	traffic(a, acq) // a holds the key
	holder, waiter := a, b
	round := func() {
		traffic(waiter, acq) // waits: nothing written yet
		traffic(c, acq)      // QUEUE_FULL: 1 holder + 1 waiter = maxqueue 2
		was := waiter.written
		traffic(holder, rel) // RELEASED, and LOCKED to the waiter
		if waiter.written != was+len("LOCKED\n") {
			t.Fatalf("the waiter got %d bytes in the RELEASE's turn, want LOCKED", waiter.written-was)
		}
		holder, waiter = waiter, holder
	}
	return s, round
}
