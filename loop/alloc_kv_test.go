package loop

import (
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/resp"
)

// newKVPathServer is newPathServer for a Redis-text slock connection, with the append-only
// log on when dir is not empty.
func newKVPathServer(tb testing.TB, dir string) (*Server, *fakeConn) {
	tb.Helper()
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}}
	cfg.DataDir = dir
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.openLog(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.closeLog)
	fc := &fakeConn{}
	cs := &conn{c: fc, owner: 1, proto: ProtoSlock, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	fc.ctx = cs
	s.ct.conns[cs.owner] = cs
	return s, fc
}

// kvBatch is 16 pipelined SET, GET, INCR triples over a few keys.
func kvBatch() []byte {
	var b []byte
	for i := range 16 {
		k := string(rune('a' + i%4))
		b = resp.AppendCommand(b, "SET", "key:"+k, "value")
		b = resp.AppendCommand(b, "GET", "key:"+k)
		b = resp.AppendCommand(b, "INCR", "counter:"+k)
	}
	return b
}

// The key/value request path allocates nothing once warm, with the log on: records are
// encoded into a kept buffer and copied to the writer's.
func TestKVPathDoesNotAllocate(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s, fc := newKVPathServer(t, dir)
		batch := kvBatch()
		serve := func() {
			fc.in = batch
			if s.OnTraffic(fc) != gnet.None {
				t.Fatal("connection closed")
			}
			// What the writer's progress report does on the loop.
			s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq})
		}
		for range 3 {
			serve()
		}
		fc.written = 0
		allocs := testing.AllocsPerRun(200, serve)
		if allocs != 0 {
			t.Fatalf("log %v: %v allocations per batch of 48 commands", dir != "", allocs)
		}
		if len(fc.in) != 0 || fc.written == 0 {
			t.Fatalf("batch not consumed (%d left) or nothing written", len(fc.in))
		}
		if dir != "" && s.persist.seq == 0 {
			t.Fatal("nothing was logged")
		}
	}
}

// BenchmarkKVPath is one command (SET, GET or INCR) through the text path, 48 pipelined
// per wake-up; with the log on, its records are handed to a real writer.
func BenchmarkKVPath(b *testing.B) {
	for _, log := range []bool{false, true} {
		name := "memory"
		dir := ""
		if log {
			name, dir = "aof", b.TempDir()
		}
		b.Run(name, func(b *testing.B) {
			s, fc := newKVPathServer(b, dir)
			batch := kvBatch()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 48 {
				fc.in = batch
				s.OnTraffic(fc)
				s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq})
			}
		})
	}
}

// TestRepliesWaitForTheLog: a reply whose change is not yet written (fsynced, with always)
// is held back, and so is any later reply, to that connection or another, until the
// writer's progress covers it.
func TestRepliesWaitForTheLog(t *testing.T) {
	for _, policy := range []aof.Policy{aof.EverySec, aof.Always} {
		s, fc := newKVPathServer(t, t.TempDir())
		s.cfg.AppendFsync = policy
		other := &fakeConn{}
		cs2 := &conn{c: other, owner: 2, proto: ProtoSlock, ln: &listenerState{}}
		cs2.h = s.handlerFor(cs2)
		other.ctx = cs2
		s.ct.conns[cs2.owner] = cs2

		fc.in = resp.AppendCommand(nil, "SET", "k", "v")
		s.OnTraffic(fc)
		seq := s.persist.seq
		if seq == 0 || fc.written != 0 {
			t.Fatalf("%v: SET logged %d bytes and wrote %d reply bytes before the log had them", policy, seq, fc.written)
		}
		other.in = resp.AppendCommand(nil, "GET", "k") // reads what is not on disk yet: waits too
		s.OnTraffic(other)
		if other.written != 0 {
			t.Fatalf("%v: GET answered before the SET it reads was logged", policy)
		}
		s.logged(aof.Progress{Written: seq - 1, Synced: seq - 1})
		if fc.written != 0 || other.written != 0 {
			t.Fatalf("%v: replies released before their record was written", policy)
		}
		if policy == aof.Always {
			s.logged(aof.Progress{Written: seq, Synced: seq - 1})
			if fc.written != 0 {
				t.Fatal("always: the reply went out before its record was fsynced")
			}
		}
		s.logged(aof.Progress{Written: seq, Synced: seq})
		if fc.written != len("+OK\r\n") || other.written != len("$1\r\nv\r\n") {
			t.Fatalf("%v: after the log caught up, %d and %d reply bytes were written", policy, fc.written, other.written)
		}
		// Nothing new to log: a read is answered at once.
		other.in = resp.AppendCommand(nil, "GET", "k")
		s.OnTraffic(other)
		if other.written != 2*len("$1\r\nv\r\n") {
			t.Fatalf("%v: a GET with nothing to log waited", policy)
		}
	}
}

// MGET, which may go on across turns (textcont.go), allocates nothing once warm when it
// answers at once.
func TestMGetPathDoesNotAllocate(t *testing.T) {
	s, fc := newKVPathServer(t, "")
	var batch []byte
	for i := range 4 {
		batch = resp.AppendCommand(batch, "SET", "key:"+string(rune('a'+i)), "value")
	}
	batch = resp.AppendCommand(batch, "MGET", "key:a", "key:b", "key:c", "key:d", "key:e")
	serve := func() {
		fc.in = batch
		if s.OnTraffic(fc) != gnet.None {
			t.Fatal("connection closed")
		}
	}
	for range 3 {
		serve()
	}
	if allocs := testing.AllocsPerRun(200, serve); allocs != 0 {
		t.Fatalf("%v allocations per batch with an MGET", allocs)
	}
}
