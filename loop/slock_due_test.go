package loop

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// A hold's deadline is staged in the store while its turn runs (store/deadlines.go): a
// Lock that stays held past the read is still published to the ticker (publishDue) at its
// expiry, and the tick at that time delivers the EXPRIED; a Lock and its Unlock in one
// read leave the next deadline where it was.
func TestSlockHoldStagedExpiresOnTime(t *testing.T) {
	s, fc := newSlockPathServer(t, "")
	frame := func(typ slock.Type, req uint32, expriedMs uint16) []byte {
		f := slock.Frame{Type: typ, Timeout: 5, Expried: expriedMs, ExpriedFlag: 0x0400}
		binary.BigEndian.PutUint32(f.RequestID[12:], req)
		f.LockID[15], f.Key[15] = 'a', 'k'
		return slock.AppendLockRequest(nil, &f)
	}
	read := func(b []byte) {
		fc.in = b
		s.OnTraffic(fc)
		if len(fc.in) != 0 {
			t.Fatalf("%d bytes left unread", len(fc.in))
		}
	}
	s.publishDue()
	before := s.run.nextDue.Load() // the collections
	read(append(frame(slock.TypeLock, 1, 200), frame(slock.TypeUnlock, 2, 200)...))
	if got := s.run.nextDue.Load(); got != before || fc.written != 2*frameBytes {
		t.Fatalf("lock and unlock in one read: next due %d (was %d), %d bytes written", got, before, fc.written)
	}
	t0 := time.Now().UnixNano()
	read(frame(slock.TypeLock, 3, 200))
	t1 := time.Now().UnixNano()
	due := s.run.nextDue.Load()
	if ms := int64(200 * time.Millisecond); due < t0+ms || due > t1+ms {
		t.Fatalf("a held lock's expiry published at %d, want 200 ms after the read (%d..%d)", due, t0+ms, t1+ms)
	}
	written := fc.written
	s.advance(due - 1)
	s.flush()
	if fc.written != written {
		t.Fatalf("%d bytes written before the expiry", fc.written-written)
	}
	s.advance(due)
	s.flush()
	if fc.written != written+frameBytes {
		t.Fatalf("at the expiry %d bytes written, want one reply (%d)", fc.written-written, frameBytes)
	}
}

// frameBytes is the size of a binary slock request or reply.
const frameBytes = 64

// stampLock gives a Lock (and a WILL's) the connection's client id, which its holder keeps
// (fence.go), and leaves an Unlock, whose client id nothing keeps, as it came.
func TestStampLockOnlyLocks(t *testing.T) {
	s, _ := newSlockPathServer(t, "")
	cs := s.ct.conns[1]
	for _, kind := range []store.LockKind{store.KindLock, store.KindWillLock, store.KindUnlock, store.KindWillUnlock} {
		cmd := store.LockCommand{Kind: kind}
		s.stampLock(cs, &cmd)
		locks := kind == store.KindLock || kind == store.KindWillLock
		if got := cmd.Client; locks && (got == 0 || got != cs.slock.client) || !locks && got != 0 {
			t.Fatalf("kind %d: client %x, connection's %x", kind, got, cs.slock.client)
		}
	}
}

// appendLockFrame writes the bytes slock.AppendLockReply writes for the same reply: every
// result, with and without a value, after what the buffer held, over old bytes.
func TestAppendLockFrame(t *testing.T) {
	r := store.LockReply{Kind: store.KindUnlock, DB: 3, Lcount: 0x1234, Count: 0xfffe, Lrcount: 7, Rcount: 9, Token: 5}
	for i := range 16 {
		r.RequestID[i], r.LockID[i], r.Key[i] = byte(i+1), byte(0x40+i), byte(0x80+i)
	}
	for res := range store.NumLockResults {
		for _, v := range [][]byte{nil, {}, []byte("value")} {
			r.Result, r.Value = store.LockResult(res), v
			rep := slock.LockReply{Type: slock.Type(r.Kind), RequestID: r.RequestID, Result: slockResults[r.Result],
				DB: r.DB, LockID: r.LockID, Key: r.Key, Lcount: r.Lcount, Count: r.Count, Lrcount: r.Lrcount,
				Rcount: r.Rcount, Value: r.Value, Token: r.Token}
			want := slock.AppendLockReply([]byte("before"), &rep)
			dirty := []byte(strings.Repeat("before", 40))[:6] // what follows must all be written
			if got := appendLockFrame(dirty, &r); string(got) != string(want) {
				t.Fatalf("result %d, value %q:\n got %x\nwant %x", res, v, got, want)
			}
		}
	}
}
