package loop

import (
	"encoding/binary"
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/slock"
)

// recConn is fakeConn keeping what is written.
type recConn struct {
	fakeConn
	out []byte
}

func (r *recConn) Write(b []byte) (int, error) { r.out = append(r.out, b...); return len(b), nil }

// lockResults serves frames on a fresh slock connection under a budget budget bytes above
// what the server holds once warm: in one read, or one frame a read (every Lock then reads
// the budget), and returns the result byte of each reply.
func lockResults(t *testing.T, frames [][]byte, budget int64, oneRead bool) []slock.Result {
	s, _ := newSlockPathServer(t, "")
	cs := s.ct.conns[1]
	rc := &recConn{}
	rc.ctx, cs.c = cs, rc
	serve := func(b []byte) {
		rc.in = b
		if s.OnTraffic(rc) != gnet.None || len(rc.in) != 0 {
			t.Fatal("read not served whole")
		}
	}
	var pings []byte
	for i := range len(frames) {
		pings = slock.AppendRequest(pings, slock.TypePing, [16]byte{15: byte(i)})
	}
	serve(pings) // the output buffer grows to a read's replies: both ways count it alike
	rc.out = rc.out[:0]
	s.cfg.MaxMemory = s.memUsed() + budget
	if oneRead {
		var all []byte
		for _, f := range frames {
			all = append(all, f...)
		}
		serve(all)
	} else {
		for _, f := range frames {
			serve(f)
		}
	}
	if len(rc.out) != 64*len(frames) {
		t.Fatalf("%d bytes of replies to %d frames", len(rc.out), len(frames))
	}
	res := make([]slock.Result, len(frames))
	for i := range res {
		res[i] = slock.Result(rc.out[64*i+19])
	}
	return res
}

// The budget is read once per run of Locks and Unlocks without data, each counted at more
// than it adds (lockOOM's headroom): a read of plain Locks that fills the budget gets the
// same answers, Lock for Lock, as when each Lock reads the budget at its arrival (one frame
// a read), so no Lock gets in that memory over --max-memory would refuse; and a Lock
// carrying data in the middle of the run is checked on its own.
func TestSlockLockRoomKeepsTheBudget(t *testing.T) {
	var frames [][]byte
	for i := range 600 {
		f := slock.Frame{Type: slock.TypeLock, Timeout: 5, Expried: 10}
		binary.BigEndian.PutUint32(f.RequestID[12:], uint32(i))
		binary.BigEndian.PutUint32(f.Key[12:], uint32(i))
		binary.BigEndian.PutUint32(f.LockID[12:], uint32(i))
		frames = append(frames, slock.AppendLockRequest(nil, &f))
	}
	for _, budget := range []int64{40 << 10, 100 << 10, 200 << 10} {
		exact := lockResults(t, frames, budget, false)
		batched := lockResults(t, frames, budget, true)
		ok := 0
		for i := range exact {
			if exact[i] != batched[i] {
				t.Fatalf("budget +%d: Lock %d answered %d in one read, %d alone", budget, i, batched[i], exact[i])
			}
			if exact[i] == slock.ResultOK {
				ok++
			}
		}
		if ok == 0 || ok == len(frames) {
			t.Fatalf("budget +%d: %d of %d Locks granted: want the budget to refuse some", budget, ok, len(frames))
		}
		t.Logf("budget +%d KiB: %d Locks granted of %d", budget>>10, ok, len(frames))
	}
}
