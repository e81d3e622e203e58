package loop

import (
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/counter"
)

// fakeConn is the part of gnet.Conn the request path uses, over in-memory buffers, so the
// path from inbound bytes to the written reply can be measured without sockets.
type fakeConn struct {
	gnet.Conn // nil: any method not defined here panics
	in        []byte
	written   int
	ctx       any
}

func (f *fakeConn) Context() any                { return f.ctx }
func (f *fakeConn) Peek(n int) ([]byte, error)  { return f.in, nil }
func (f *fakeConn) Discard(n int) (int, error)  { f.in = f.in[n:]; return n, nil }
func (f *fakeConn) Write(b []byte) (int, error) { f.written += len(b); return len(b), nil }
func (f *fakeConn) OutboundBuffered() int       { return 0 }
func (f *fakeConn) InboundBuffered() int        { return len(f.in) }

func newPathServer(tb testing.TB) (*Server, *fakeConn) {
	tb.Helper()
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoCounter, Addr: "127.0.0.1:0"}}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	fc := &fakeConn{}
	cs := &conn{c: fc, owner: 1, proto: ProtoCounter, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	fc.ctx = cs
	return s, fc
}

// pairs builds n pipelined acquire+release pairs on one counter.
func pairs(n int, name string) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = counter.AppendAcquire(b, uint32(2*i), 1, 1000, []byte(name))
		b = counter.AppendRelease(b, uint32(2*i+1), 1, []byte(name))
	}
	return b
}

// The whole request path — parse, store, reply, write — allocates nothing once warm.
func TestRequestPathDoesNotAllocate(t *testing.T) {
	s, fc := newPathServer(t)
	batch := pairs(16, "hot")
	batch = counter.AppendGet(batch, 99, []byte("hot"))
	batch = counter.AppendRequest(batch, counter.OpNoop, 100, nil)
	batch = counter.AppendRequest(batch, counter.OpStats, 101, nil)
	batch = counter.AppendRelease(batch, 102, 1, []byte("absent"))
	fc.in = batch
	s.OnTraffic(fc) // warm up: creates the counter
	allocs := testing.AllocsPerRun(200, func() {
		fc.in = batch
		if s.OnTraffic(fc) != gnet.None {
			t.Fatal("connection closed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch of %d requests", allocs, 36)
	}
	if len(fc.in) != 0 || fc.written == 0 {
		t.Fatalf("batch not consumed (%d left) or nothing written", len(fc.in))
	}
	if err := s.st.counters.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRequestPath is one acquire+release pair through the loop's request path, 16
// pairs pipelined per wake-up as the load generator sends them.
func BenchmarkRequestPath(b *testing.B) {
	s, fc := newPathServer(b)
	batch := pairs(16, "hot")
	fc.in = batch
	s.OnTraffic(fc)
	b.ReportAllocs()
	b.SetBytes(int64(len(batch) / 16))
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		fc.in = batch
		s.OnTraffic(fc)
	}
}

// newPoolPathServer is newPathServer for a PoolCounter connection.
func newPoolPathServer(tb testing.TB) (*Server, *fakeConn) {
	tb.Helper()
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoPool, Addr: "127.0.0.1:0"}}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	fc := &fakeConn{}
	cs := &conn{c: fc, owner: 1, proto: ProtoPool, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	fc.ctx = cs
	s.ct.conns[cs.owner] = cs
	return s, fc
}

// poolPairs is n pipelined ACQ4ME+RELEASE pairs on one key.
func poolPairs(n int) []byte {
	var b []byte
	for range n {
		b = append(b, "ACQ4ME hot 1 5 5\nRELEASE\n"...)
	}
	return b
}

// The PoolCounter request path allocates nothing once warm either.
func TestPoolPathDoesNotAllocate(t *testing.T) {
	s, fc := newPoolPathServer(t)
	batch := poolPairs(16)
	fc.in = batch
	s.OnTraffic(fc)
	allocs := testing.AllocsPerRun(200, func() {
		fc.in = batch
		s.OnTraffic(fc)
	})
	if allocs != 0 || len(fc.in) != 0 || fc.written == 0 {
		t.Fatalf("%v allocations per batch, %d bytes left, %d written", allocs, len(fc.in), fc.written)
	}
}

// BenchmarkPoolPath is one ACQ4ME+RELEASE pair through the loop, 16 pipelined per wake-up.
func BenchmarkPoolPath(b *testing.B) {
	s, fc := newPoolPathServer(b)
	batch := poolPairs(16)
	fc.in = batch
	s.OnTraffic(fc)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		fc.in = batch
		s.OnTraffic(fc)
	}
}
