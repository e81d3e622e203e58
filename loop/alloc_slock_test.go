package loop

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// slockStream is what slock's own benchmark (mode stream) sends in one read: n Lock+Unlock
// pairs, each pair on a key and LockId of its own, Timeout and Expried 5 s.
func slockStream(n int) []byte {
	var b []byte
	f := slock.Frame{DB: 0, Timeout: 5, Expried: 5}
	for i := range n {
		binary.BigEndian.PutUint32(f.RequestID[12:], uint32(2*i))
		binary.BigEndian.PutUint32(f.LockID[12:], uint32(i))
		binary.BigEndian.PutUint32(f.Key[12:], uint32(i))
		f.Type = slock.TypeLock
		b = slock.AppendLockRequest(b, &f)
		binary.BigEndian.PutUint32(f.RequestID[12:], uint32(2*i+1))
		f.Type = slock.TypeUnlock
		b = slock.AppendLockRequest(b, &f)
	}
	return b
}

// newSlockPathServer is newKVPathServer for a binary slock connection: its first turn
// (warm) hands it from the sniffer to the binary handler.
func newSlockPathServer(tb testing.TB, dir string) (*Server, *fakeConn) {
	tb.Helper()
	return newKVPathServer(tb, dir)
}

// A full read of slock's stream benchmark (64 KiB: 512 Lock+Unlock pairs, the most one
// OnTraffic gets) is served without allocating once warm, with and without the log: the
// connection's output buffer, which holds a whole turn's replies, is kept from one turn
// to the next instead of being grown again from a small one (issue 25: growing it cost a
// third of the loop's time in this mode).
func TestSlockStreamPathDoesNotAllocate(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s, fc := newSlockPathServer(t, dir)
		batch := slockStream(512)
		serve := func() {
			fc.in = batch
			if s.OnTraffic(fc) != gnet.None {
				t.Fatal("connection closed")
			}
			s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq})
		}
		for range 3 {
			serve()
		}
		fc.written = 0
		allocs := testing.AllocsPerRun(100, serve)
		if allocs != 0 {
			t.Fatalf("log %v: %v allocations per read of 1024 frames", dir != "", allocs)
		}
		if len(fc.in) != 0 || fc.written != 101*len(batch) {
			t.Fatalf("batch not consumed (%d left) or not every reply written (%d bytes, want %d)",
				len(fc.in), fc.written, 101*len(batch))
		}
	}
}

// BenchmarkSlockStream is one frame (a Lock or an Unlock) of slock's stream benchmark
// through the loop's request path, 1024 frames a read, without and with the log (tallyd's
// default).
func BenchmarkSlockStream(b *testing.B) { benchSlockFrames(b, 512) }

// BenchmarkSlockPairs is one frame of 16 Lock+Unlock pairs a read, as make bench's slock
// pairs cases with 16 in flight send them.
func BenchmarkSlockPairs(b *testing.B) { benchSlockFrames(b, 16) }

// benchSlockFrames serves reads of pairs Lock+Unlock pairs, without and with the log.
func benchSlockFrames(b *testing.B, pairs int) {
	for _, log := range []bool{false, true} {
		name, dir := "memory", ""
		if log {
			name, dir = "aof", b.TempDir()
		}
		b.Run(name, func(b *testing.B) {
			s, fc := newSlockPathServer(b, dir)
			// No slice of the turn: a read is served whole however slow the run (callgrind),
			// as a real one of 64 KiB is within --conn-slice.
			s.fair.slice = 0
			// A budget, as the binary's default (--max-memory auto) sets one: each Lock is
			// checked against it.
			s.cfg.MaxMemory = 1 << 30
			batch := slockStream(pairs)
			b.ReportAllocs()
			b.SetBytes(64)
			b.ResetTimer()
			for i := 0; i < b.N; i += 2 * pairs {
				fc.in = batch
				s.OnTraffic(fc)
				s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq})
			}
		})
	}
}

// TestSetFrameCommandSetsEveryField: the binary path reuses one command for every frame,
// so filling it in place must leave nothing of the one before: from a command with every
// field set, it comes out as frameCommand makes it from zero.
func TestSetFrameCommandSetsEveryField(t *testing.T) {
	var dirty store.LockCommand
	v := reflect.ValueOf(&dirty).Elem()
	for i := range v.NumField() {
		fv := v.Field(i)
		switch fv.Kind() {
		case reflect.Bool:
			fv.SetBool(true)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			fv.SetUint(7)
		case reflect.Int64:
			fv.SetInt(7)
		case reflect.Array:
			fv.Index(0).SetUint(7)
		case reflect.Slice:
			fv.SetBytes([]byte{7})
		case reflect.Struct:
			fv.Field(0).SetUint(7)
		default:
			t.Fatalf("field %s of kind %v: teach this test to set it", v.Type().Field(i).Name, fv.Kind())
		}
		if fv.IsZero() {
			t.Fatalf("field %s was not set", v.Type().Field(i).Name)
		}
	}
	for _, f := range []slock.Frame{
		{Type: slock.TypeLock, Timeout: 5, Expried: 5},
		{Type: slock.TypeUnlock, Flag: 0x01, DB: 3, Count: 2, Rcount: 1, TimeoutFlag: 0x0400, ExpriedFlag: 0x8040},
		{Type: slock.TypeWillLock, Data: []byte{2, 0, 0, 0, 'o', 'k'}},
	} {
		c := dirty
		setFrameCommand(&c, &f)
		if want := frameCommand(&f); !reflect.DeepEqual(c, want) {
			t.Fatalf("frame %+v: in place %+v, from zero %+v", f, c, want)
		}
	}
}
