package loop

import (
	"testing"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// fakeSubscribers adds n fake connections to s, each subscribed to ch.
func fakeSubscribers(s *Server, n int, ch string) []*fakeConn {
	var out []*fakeConn
	for i := range n {
		fc := &fakeConn{}
		cs := &conn{c: fc, owner: store.Owner(100 + i), proto: ProtoSlock, ln: &listenerState{}}
		cs.h = s.handlerFor(cs)
		fc.ctx = cs
		s.ct.conns[cs.owner] = cs
		fc.in = resp.AppendCommand(nil, "SUBSCRIBE", ch)
		s.OnTraffic(fc)
		out = append(out, fc)
	}
	return out
}

// TestNotifyWaitsForTheLog: a keyspace notification reports a change, so it goes out only
// once the log has that change, as the writer's reply does; a PUBLISH, which changes
// nothing, is not held.
func TestNotifyWaitsForTheLog(t *testing.T) {
	s, fc := newKVPathServer(t, t.TempDir())
	s.ps.notify = nKeyspace | nAll
	sub := fakeSubscribers(s, 1, "__keyspace@0__:k")[0]
	base := sub.written
	fc.in = resp.AppendCommand(nil, "SET", "k", "v")
	s.OnTraffic(fc)
	seq := s.persist.seq
	if seq == 0 || fc.written != 0 || sub.written != base {
		t.Fatalf("SET logged %d bytes; %d reply bytes and %d notification bytes went out before the log had it",
			seq, fc.written, sub.written-base)
	}
	s.logged(aof.Progress{Written: seq, Synced: seq})
	want := len(appendMessage(nil, []byte("__keyspace@0__:k"), []byte("set")))
	if fc.written == 0 || sub.written-base != want {
		t.Fatalf("after the log: reply %d bytes, notification %d bytes (want %d)", fc.written, sub.written-base, want)
	}
}

// BenchmarkPublishFanout is one PUBLISH through the text path to 1,000 channel subscribers
// (fake connections: the loop's work, not the sockets'), the messages written.
func BenchmarkPublishFanout(b *testing.B) {
	s, fc := newKVPathServer(b, "")
	subs := fakeSubscribers(s, 1000, "news")
	cmd := resp.AppendCommand(nil, "PUBLISH", "news", "a message of about forty bytes, typical")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fc.in = cmd
		s.OnTraffic(fc)
	}
	b.StopTimer()
	if subs[999].written == 0 {
		b.Fatal("the last subscriber got nothing")
	}
}

// TestPublishAllocsMany: a PUBLISH through the text path to 1,000 subscribers, more than
// the loop keeps free output buffers for, allocates nothing in steady state: each subscriber
// keeps a small buffer of its own (release).
func TestPublishAllocsMany(t *testing.T) {
	s, fc := newKVPathServer(t, "")
	subs := fakeSubscribers(s, 1000, "news")
	cmd := resp.AppendCommand(nil, "PUBLISH", "news", "a message")
	allocs := testing.AllocsPerRun(100, func() {
		fc.in = cmd
		s.OnTraffic(fc)
	})
	if allocs != 0 {
		t.Fatalf("PUBLISH to 1,000 subscribers: %.1f allocations, want 0", allocs)
	}
	if subs[999].written == 0 {
		t.Fatal("the last subscriber got nothing")
	}
}
