package store_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// TestTimeoutWhenData: TimeoutFlag 0x0008 times out at once instead of
// queueing when the key has a value (§5.11).
func TestTimeoutWhenData(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, lockc(1, "a", "k"), rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	td := with(lockc(2, "b", "k"), func(c *wc) { c.TimeoutFlag = 0x0008 })
	h.one(2, td) // no value: it queues
	h.one(1, with(lockc(3, "a", "k"), func(c *wc) { c.Flag = 0x02; c.Data = setV }),
		rp{o: 1, req: 3, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1})
	h.one(3, with(td, func(c *wc) { c.LockID = id16("c") }), rp{o: 3, req: 2, res: store.LockTimeout, id: "c", key: "k", lc: 1, v: setV})
}

// TestRequireAcked: TimeoutFlag 0x1000 on a standalone server is a plain
// grant, even with ExpriedFlag 0x0200 (never persist), which makes the
// reference answer 12 to every Unlock (§5.12).
func TestRequireAcked(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	l := with(lockc(1, "a", "k"), func(c *wc) { c.TimeoutFlag = 0x1000; c.ExpriedFlag = 0x0200; c.Data = setV })
	h.one(1, l, rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	h.one(1, unlockc(2, "a", "k"), rp{o: 1, t: 2, req: 2, id: "a", key: "k", v: setV})
}

// TestTreeUnlock: unlock flag 0x10 walks up a tree of markers and links
// with server-generated RequestIds, ending with UNLOCK_ERROR (§5.13).
func TestTreeUnlock(t *testing.T) {
	h := newLkh(t, store.LocksConfig{IDSeed: 7})
	h.now += 123 * int64(time.Millisecond)
	n := uint16(0)
	hold := func(key, id string, tree bool) {
		t.Helper()
		n++
		c := with(lockc(n, id, key), func(c *wc) { c.Count = 0xFFFF; c.Expried = 100 })
		if tree {
			c = with(c, func(c *wc) { c.Flag = 0x10 })
		}
		if r := h.do(1, c); len(r) != 1 || r[0].Result != store.LockOK {
			t.Fatalf("hold %s on %s: %v", id, key, r)
		}
	}
	// Tree R -> C -> G: for child K of P, a marker on K with LockId P
	// (flag 0x10) and a link on P with LockId K.
	hold("C", "R", true)
	hold("R", "C", false)
	hold("G", "C", true)
	hold("C", "G", false)
	u := with(unlockc(50, "C", "G"), func(c *wc) { c.Flag = 0x10; c.Count = 0xFFFF })
	got := h.do(1, u)
	expect(t, "tree unlock", got,
		rp{o: 1, t: 2, req: 50, id: "G", key: "C", c: 0xFFFF},                             // G empty: LockKey and LockId swapped
		rp{o: 1, t: 2, req: -1, id: "R", key: "C", lc: 1, c: 0xFFFF},                      // link G released; the marker R remains
		rp{o: 1, t: 2, req: -1, id: "C", key: "R", c: 0xFFFF},                             // marker released: C empty
		rp{o: 1, t: 2, req: -1, id: "R", key: "C", c: 0xFFFF},                             // link C on R released: R empty
		rp{o: 1, t: 2, req: -1, res: store.LockUnlockError, id: "R", key: "C", c: 0xFFFF}) // C is gone: the end
	seen := map[[16]byte]bool{u.RequestID: true}
	for i, r := range got[1:] {
		ms := binary.BigEndian.Uint64(r.RequestID[:8]) >> 16
		if seen[r.RequestID] || int64(ms) != h.now/1e6 || binary.BigEndian.Uint32(r.RequestID[12:]) != uint32(i+1) {
			t.Fatalf("step %d: server RequestId %x: repeated %v, ms %d (now %d)", i+1, r.RequestID, seen[r.RequestID], ms, h.now/1e6)
		}
		seen[r.RequestID] = true
	}
	h.state(0, store.LockState{LockCount: 4, UnLockCount: 4, UnlockErrorCount: 1})

	// Without the flag on the remaining holder, or with levels left, the
	// chain stops after the normal reply.
	hold("A", "x", false)
	hold("A", "y", false)
	h.one(1, with(unlockc(51, "y", "A"), func(c *wc) { c.Flag = 0x10 }), rp{o: 1, t: 2, req: 51, id: "y", key: "A", lc: 1})
	// With 0x08 too, no tree step.
	h.one(1, with(unlockc(52, "x", "A"), func(c *wc) { c.Flag = 0x18; c.Timeout = 0 }), rp{o: 1, t: 2, req: 52, id: "x", key: "A"})
}

// TestKeepAlive: with 0x8000 a holder (ExpriedFlag) or a wait (TimeoutFlag)
// does not run out while its connection is open, and counts down from
// Disconnected. Locks without it outlive their connection.
func TestKeepAlive(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	ka := with(lockc(1, "a", "k"), func(c *wc) { c.Expried, c.ExpriedFlag = 2, 0x8000 })
	h.one(1, ka, rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	h.one(1, lockc(2, "b", "plain"), rp{o: 1, req: 2, id: "b", key: "plain", lc: 1, lr: 1})
	wka := with(lockc(3, "w", "k"), func(c *wc) { c.Timeout, c.TimeoutFlag = 1, 0x8000 })
	h.one(2, wka)
	h.one(2, with(lockc(4, "v", "k"), func(c *wc) { c.Timeout = 200 }))
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != -1 {
		t.Fatalf("TTL of a kept-alive lock = %d, want -1", ttl)
	}
	expect(t, "plain expires", h.advance(100*time.Second), rp{o: 1, req: 2, res: store.LockExpried, id: "b", key: "plain"})
	if next, ok := h.l.NextDeadline(); !ok || next != at(201) {
		t.Fatalf("NextDeadline = %d, %v; want only v's wait", next, ok)
	}
	h.advance(500 * time.Millisecond)
	h.l.Disconnected(1, h.now)
	h.check("Disconnected(1)")
	h.l.Disconnected(1, h.now+5*sec) // once is enough
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != 2500 {
		t.Fatalf("TTL after the close = %d, want 2500", ttl)
	}
	// w still waits, kept by its open connection 2; it gets k at 103 s.
	expect(t, "a expires", h.advance(2500*time.Millisecond),
		rp{o: 1, req: 1, res: store.LockExpried, id: "a", key: "k"},
		rp{o: 2, req: 3, id: "w", key: "k", lc: 1, lr: 1})
	// w holds without keep-alive: 10 s. Then v, also of 2, gets k.
	expect(t, "w expires", h.advance(11*time.Second),
		rp{o: 2, req: 3, res: store.LockExpried, id: "w", key: "k"},
		rp{o: 2, req: 4, id: "v", key: "k", lc: 1, lr: 1})
	h.l.Disconnected(2, h.now)
	h.check("Disconnected(2)")
	// A keep-alive wait of a closed connection (a WILL command) is armed at
	// once; replies still name owner 2, the caller decides where they go.
	h.one(2, with(wka, func(c *wc) { c.RequestID, c.LockID = rid(5), id16("x") }))
	expect(t, "x times out", h.advance(2*time.Second), rp{o: 2, req: 5, res: store.LockTimeout, id: "x", key: "k", lc: 1})
	expect(t, "v expires", h.advance(9*time.Second), rp{o: 2, req: 4, res: store.LockExpried, id: "v", key: "k"})
	// Likewise a keep-alive holder.
	h.one(1, with(ka, func(c *wc) { c.Key = id16("will") }), rp{o: 1, req: 1, id: "a", key: "will", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("will"), h.now); ttl != 3000 {
		t.Fatalf("TTL of a keep-alive lock of a closed connection = %d, want 3000", ttl)
	}
}

// TestKeepAliveOwnerChange: a reentry by another connection moves a
// kept-alive holder to that connection.
func TestKeepAliveOwnerChange(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	ka := with(lockc(1, "a", "k"), func(c *wc) { c.Expried, c.ExpriedFlag, c.Rcount = 2, 0x8000, 5 })
	h.one(1, ka, rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1, rc: 5})
	h.one(2, ka, rp{o: 2, req: 1, id: "a", key: "k", lc: 2, lr: 2, rc: 5})
	h.l.Disconnected(1, h.now)
	h.check("Disconnected(1)")
	expect(t, "still kept by 2", h.advance(time.Hour))
	h.l.Disconnected(2, h.now)
	h.check("Disconnected(2)")
	expect(t, "released 2-3 s after 2 closed", h.advance(3*time.Second), rp{o: 2, req: 1, res: store.LockExpried, id: "a", key: "k", rc: 5})
}

// TestTimes: seconds run to the start of the second after base + value,
// minutes likewise, milliseconds exactly; TimeoutFlag 0x0100 counts the
// hold from the request's arrival.
func TestTimes(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.now += 300 * int64(time.Millisecond) // grants at x.3 s
	h.one(1, with(lockc(1, "s", "s"), func(c *wc) { c.Expried = 5 }), rp{o: 1, req: 1, id: "s", key: "s", lc: 1, lr: 1})
	h.one(1, with(lockc(2, "m", "m"), func(c *wc) { c.Expried, c.ExpriedFlag = 2, 0x0040 }), rp{o: 1, req: 2, id: "m", key: "m", lc: 1, lr: 1})
	h.one(1, with(lockc(3, "ms", "ms"), func(c *wc) { c.Expried, c.ExpriedFlag = 1500, 0x0400 }), rp{o: 1, req: 3, id: "ms", key: "ms", lc: 1, lr: 1})
	h.one(2, with(lockc(4, "w", "s"), func(c *wc) { c.Timeout, c.TimeoutFlag = 20, 0x0400 }))
	h.one(3, with(lockc(5, "x", "s"), func(c *wc) { c.Timeout = 1; c.Expried = 100 }))
	if at, ok := h.l.NextDeadline(); !ok || at != h.now+20*int64(time.Millisecond) {
		t.Fatalf("NextDeadline = %d, %v; want in 20 ms", at, ok)
	}
	expect(t, "19 ms", h.advance(19*time.Millisecond))
	expect(t, "20 ms", h.advance(time.Millisecond), rp{o: 2, req: 4, res: store.LockTimeout, id: "w", key: "s", lc: 1})
	expect(t, "x.999", h.advance(1480*time.Millisecond-1)) // x's 1 s wait ends at (0 + 1 + 1) s, 1.7 s after it began
	expect(t, "x.8", h.advance(1), rp{o: 1, req: 3, res: store.LockExpried, id: "ms", key: "ms"})
	expect(t, "2 s", h.advance(200*time.Millisecond), rp{o: 3, req: 5, res: store.LockTimeout, id: "x", key: "s", lc: 1})
	expect(t, "5.999 s", h.advance(4*time.Second-1))
	expect(t, "6 s", h.advance(1), rp{o: 1, req: 1, res: store.LockExpried, id: "s", key: "s"})
	expect(t, "120.999 s", h.advance(115*time.Second-1))
	expect(t, "121 s", h.advance(1), rp{o: 1, req: 2, res: store.LockExpried, id: "m", key: "m"})

	// TTL right after a lock of 100 s at a whole second reads 101 s.
	h.now = at(1000)
	h.one(1, with(lockc(6, "t", "t"), func(c *wc) { c.Expried = 100 }), rp{o: 1, req: 6, id: "t", key: "t", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("t"), h.now); ttl != 101000 {
		t.Fatalf("TTL = %d, want 101000", ttl)
	}
	if ttl := h.l.TTL(0, id16("none"), h.now); ttl != -2 {
		t.Fatalf("TTL of a free key = %d, want -2", ttl)
	}
	if ttl := h.l.TTL(9, id16("t"), h.now); ttl != -2 {
		t.Fatalf("TTL in a missing db = %d, want -2", ttl)
	}

	// 0x0100: b waits from 1000.5 s and is granted at 1101 s, but its
	// 5 s hold counts from its arrival: it is due at 1006 s, so at once.
	h.now += 500 * int64(time.Millisecond)
	b := with(lockc(7, "b", "t"), func(c *wc) { c.Timeout, c.TimeoutFlag, c.Expried = 200, 0x0100, 5 })
	h.one(2, b)
	expect(t, "t expires, b granted and expired", h.advance(101*time.Second),
		rp{o: 1, req: 6, res: store.LockExpried, id: "t", key: "t"},
		rp{o: 2, req: 7, id: "b", key: "t", lc: 1, lr: 1},
		rp{o: 2, req: 7, res: store.LockExpried, id: "b", key: "t"})
	// Without it the hold counts from the grant.
	h.one(1, with(lockc(8, "t", "t"), func(c *wc) { c.Expried = 1 }), rp{o: 1, req: 8, id: "t", key: "t", lc: 1, lr: 1})
	h.one(2, with(b, func(c *wc) { c.TimeoutFlag = 0 }))
	expect(t, "t expires, b granted", h.advance(2*time.Second),
		rp{o: 1, req: 8, res: store.LockExpried, id: "t", key: "t"},
		rp{o: 2, req: 7, id: "b", key: "t", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("t"), h.now); ttl != 5500 {
		t.Fatalf("TTL of b = %d, want 5500", ttl)
	}
}

// TestLimits: waiters per key and per connection beyond the limits time
// out at once; a Lock that would add a key beyond MaxKeys gets
// UNKNOWN_ERROR, probes excepted.
func TestLimits(t *testing.T) {
	h := newLkh(t, store.LocksConfig{MaxWaitersPerKey: 2, MaxWaitersPerOwner: 3, MaxKeys: 3})
	h.one(1, lockc(1, "a", "k1"), rp{o: 1, req: 1, id: "a", key: "k1", lc: 1, lr: 1})
	h.one(2, lockc(2, "b", "k1"))
	h.one(3, lockc(3, "c", "k1"))
	h.one(4, lockc(4, "d", "k1"), rp{o: 4, req: 4, res: store.LockTimeout, id: "d", key: "k1", lc: 1})
	h.one(1, lockc(5, "a", "k2"), rp{o: 1, req: 5, id: "a", key: "k2", lc: 1, lr: 1})
	h.one(1, lockc(6, "a", "k3"), rp{o: 1, req: 6, id: "a", key: "k3", lc: 1, lr: 1})
	h.one(1, lockc(7, "a", "k4"), rp{o: 1, req: 7, res: store.LockUnknownError, id: "a", key: "k4"})
	h.one(1, with(lockc(7, "a", "k4"), func(c *wc) { c.Expried = 0 }), rp{o: 1, req: 7, id: "a", key: "k4"})
	h.one(5, lockc(8, "e", "k2"))
	h.one(5, lockc(9, "e", "k3"))
	h.one(5, with(lockc(10, "e", "k3"), func(c *wc) { c.LockID = id16("f") }))
	h.one(5, with(lockc(11, "g", "k2"), func(c *wc) { c.Timeout = 9 }), rp{o: 5, req: 11, res: store.LockTimeout, id: "g", key: "k2", lc: 1})
	h.state(0, store.LockState{LockCount: 4, LockedCount: 3, WaitCount: 5, KeyCount: 3})
}

// TestStateCounters follows STATE through a script (§7.3).
func TestStateCounters(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	if _, ok := h.l.State(3); ok {
		t.Fatal("db 3 exists before any Lock")
	}
	re := with(lockc(1, "a", "k"), func(c *wc) { c.DB = 3; c.Rcount = 2; c.Expried = 2 })
	h.do(1, re)
	h.do(1, re)
	h.do(2, with(re, func(c *wc) { c.LockID = id16("b") }))
	h.do(3, with(re, func(c *wc) { c.LockID = id16("c"); c.Key = id16("k2") }))
	h.do(3, with(re, func(c *wc) { c.LockID = id16("c"); c.Key = id16("k3"); c.Expried = 0 }))
	h.state(3, store.LockState{LockCount: 4, LockedCount: 3, WaitCount: 1, KeyCount: 2})
	h.do(4, with(unlockc(2, "z", "k"), func(c *wc) { c.DB = 3 }))
	h.do(4, with(unlockc(2, "z", "nokey"), func(c *wc) { c.DB = 3 }))
	h.do(1, with(unlockc(3, "a", "k"), func(c *wc) { c.DB = 3; c.Rcount = 1 }))
	h.state(3, store.LockState{LockCount: 4, UnLockCount: 1, LockedCount: 2, WaitCount: 1, KeyCount: 2, UnlockErrorCount: 2})
	h.advance(3 * time.Second) // a and c expire; b is granted and, waiting since 0, has 2 s more
	h.state(3, store.LockState{LockCount: 5, UnLockCount: 1, LockedCount: 1, KeyCount: 1, ExpiredCount: 2, UnlockErrorCount: 2})
	h.do(5, with(re, func(c *wc) { c.LockID = id16("d"); c.Timeout = 1 }))
	h.advance(2 * time.Second)
	h.state(3, store.LockState{LockCount: 5, UnLockCount: 1, LockedCount: 1, KeyCount: 1, TimeoutedCount: 1, ExpiredCount: 2, UnlockErrorCount: 2})
	if st, ok := h.l.State(0); ok || st != (store.LockState{}) {
		t.Fatalf("State(0) = %+v, %v; want nothing", st, ok)
	}
}

// TestListings: LIST_LOCK, LIST_LOCKED and LIST_WAIT (§8.3).
func TestListings(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	if _, ok := h.l.ListLocks(0, nil); ok {
		t.Fatal("ListLocks of a missing db")
	}
	if _, _, st := h.l.ListLocked(0, id16("k"), nil); st != store.ListNoDB {
		t.Fatalf("ListLocked of a missing db: %v", st)
	}
	h.do(1, with(lockc(1, "a", "k"), func(c *wc) { c.Count = 3; c.Rcount = 1; c.Data = rec(store.DataIncr, 0, i64(7)) }))
	h.do(1, with(lockc(2, "a", "k"), func(c *wc) { c.Count = 3; c.Rcount = 1 }))
	h.now += 2 * sec
	h.do(2, with(lockc(3, "b", "k"), func(c *wc) { c.Count = 3; c.Expried, c.ExpriedFlag = 0xFFFF, 0x4000 }))
	h.do(3, lockc(4, "c", "k"))
	h.do(4, with(lockc(5, "d", "k"), func(c *wc) { c.Timeout, c.TimeoutFlag = 5, 0x8000 }))
	h.do(1, lockc(6, "a", "j"))
	h.do(1, with(lockc(7, "e", "ev"), func(c *wc) { c.TimeoutFlag = 0x0200; c.Count = 1; c.Expried = 0 }))

	ls, ok := h.l.ListLocks(0, nil)
	if !ok || len(ls) != 2 || name(ls[0].Key) != "j" || name(ls[1].Key) != "k" {
		t.Fatalf("ListLocks = %+v, %v", ls, ok)
	}
	if ls[0].Levels != 1 || ls[0].Data.Record != nil || ls[1].Levels != 3 ||
		string(ls[1].Data.Value) != string(i64(7)) || ls[1].Data.Command != store.DataIncr || ls[1].Data.Flag != 0x01 ||
		string(ls[1].Data.Record) != string(rec(0, 0x01, i64(7))) {
		t.Fatalf("ListLocks = %+v", ls)
	}
	li, hs, st := h.l.ListLocked(0, id16("k"), nil)
	if st != store.ListOK || li.Levels != 3 || len(hs) != 2 {
		t.Fatalf("ListLocked = %+v, %+v, %v", li, hs, st)
	}
	t0 := at(0) / sec
	a, b := hs[0], hs[1]
	if name(a.LockID) != "a" || a.Levels != 2 || a.Start != t0 || a.Timeout != t0+6 || a.Expires != t0+11 || a.LongTime ||
		a.Command.RequestID != rid(2) || a.Command.Count != 3 || a.Command.Rcount != 1 || a.Command.Key != id16("k") {
		t.Fatalf("holder a = %+v", a)
	}
	if name(b.LockID) != "b" || b.Levels != 1 || b.Start != t0+2 || b.Expires != math.MaxInt64 || !b.LongTime || b.Command.Count != 3 {
		t.Fatalf("holder b = %+v", b)
	}
	_, ws, st := h.l.ListWait(0, id16("k"), nil)
	if st != store.ListOK || len(ws) != 2 || name(ws[0].LockID) != "c" || ws[0].Start != t0+2 || ws[0].Timeout != t0+8 || ws[0].LongTime ||
		name(ws[1].LockID) != "d" || ws[1].Timeout != math.MaxInt64 || wire(ws[1].Command).TimeoutFlag != 0x8000 {
		t.Fatalf("ListWait = %+v, %v", ws, st)
	}
	if _, _, st := h.l.ListWait(0, id16("ev"), nil); st != store.ListNoLock {
		t.Fatalf("ListWait of a key without holders: %v", st)
	}
	if _, _, st := h.l.ListLocked(0, id16("none"), nil); st != store.ListNoLock {
		t.Fatalf("ListLocked of a missing key: %v", st)
	}
	// c times out: no longer listed.
	h.advance(7 * time.Second)
	if _, ws, _ := h.l.ListWait(0, id16("k"), nil); len(ws) != 1 || name(ws[0].LockID) != "d" {
		t.Fatalf("ListWait after c's timeout = %+v", ws)
	}
}

// TestOtherTypes: WILL_LOCK and WILL_UNLOCK (8, 9) run as Lock and
// Unlock; other types are UNKNOWN_COMMAND.
func TestOtherTypes(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, with(lockc(1, "a", "k"), func(c *wc) { c.Kind = 8 }), rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	h.one(1, with(unlockc(2, "a", "k"), func(c *wc) { c.Kind = 9 }), rp{o: 1, t: 2, req: 2, id: "a", key: "k"})
	for _, typ := range []store.LockKind{0, 3, 7, 10, 200} {
		c := with(lockc(3, "a", "k"), func(c *wc) { c.Kind = typ })
		got := h.do(1, c)
		if len(got) != 1 || got[0].Kind != typ || got[0].Result != store.LockUnknownCommand || got[0].RequestID != rid(3) || got[0].Owner != 1 {
			t.Fatalf("type %d: %+v", typ, got)
		}
	}
	h.state(0, store.LockState{LockCount: 1, UnLockCount: 1})
}

// TestMaxValue: a data command whose result would be longer than MaxValue
// leaves the value alone.
func TestMaxValue(t *testing.T) {
	h := newLkh(t, store.LocksConfig{MaxValue: 11})
	l := with(lockc(1, "a", "k"), func(c *wc) { c.Data = rec(store.DataSet, 0, []byte("12345678")) })
	h.one(1, l, rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	up := func(r []byte, want []byte) {
		t.Helper()
		h.one(1, with(l, func(c *wc) { c.Flag = 0x02; c.Data = r }), rp{o: 1, req: 1, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1, v: want})
	}
	up(rec(store.DataAppend, 0, []byte("9")), rec(0, 0, []byte("12345678")))
	up(rec(store.DataAppend, 0, []byte("0")), rec(0, 0, []byte("123456789")))
	up(rec(store.DataSet, 0, []byte("too long!!")), rec(0, 0, []byte("123456789")))
	up(nil, rec(0, 0, []byte("123456789")))
}

// TestClosedOwnersForgotten: the store remembers the last 4096 closed
// connections that own nothing (for WILL commands and EXECUTEs run after
// Disconnected); a connection closed longer ago counts as open again.
func TestClosedOwnersForgotten(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	// Owner 2 closes with a wait pending: it is remembered while it waits.
	h.one(1, lockc(1, "a", "busy"), rp{o: 1, req: 1, id: "a", key: "busy", lc: 1, lr: 1})
	h.one(2, with(lockc(2, "b", "busy"), func(c *wc) { c.Timeout = 60 }))
	for o := store.Owner(2); o < 2+4098; o++ {
		h.l.Disconnected(o, h.now)
	}
	h.check("4098 Disconnected")
	ka := with(lockc(3, "k", ""), func(c *wc) { c.Expried, c.ExpriedFlag = 1, 0x8000 })
	for _, c := range []struct {
		o   store.Owner
		ttl int64
	}{{2, 2000}, {3, -1}, {4, 2000}, {4098, 2000}} {
		kc := with(ka, func(x *wc) { x.Key = id16(string(rune('A' + c.o%26))) })
		h.one(c.o, kc, rp{o: c.o, req: 3, id: "k", rawKey: &kc.Key, lc: 1, lr: 1})
		if ttl := h.l.TTL(0, kc.Key, h.now); ttl != c.ttl {
			t.Fatalf("owner %d: TTL of its keep-alive lock %d, want %d", c.o, ttl, c.ttl)
		}
	}
}
