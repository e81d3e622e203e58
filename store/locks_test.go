package store_test

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// Values used by the outcome tables: the record SET "v" and what a holder
// that set it leaves on the key.
var (
	setV = rec(store.DataSet, 0, []byte("v"))
	setW = rec(store.DataSet, 0, []byte("w"))
)

// holdV makes owner 1 hold key k as "a" with value "v".
func holdV(h *lkh, c func(*wc)) {
	h.t.Helper()
	l := with(lockc(100, "a", "k"), func(c *wc) { c.Data = setV })
	if c != nil {
		l = with(l, c)
	}
	expect(h.t, "holdV", h.do(1, l), rp{o: 1, req: 100, rawID: &l.LockID, key: "k", lc: 1, c: l.Count, lr: 1, rc: l.Rcount})
}

// TestLockOutcomes covers every row of the Lock outcome table (§5.1).
func TestLockOutcomes(t *testing.T) {
	t.Run("unknown db", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		c := with(lockc(1, "a", "k"), func(c *wc) { c.DB = 255; c.Data = setV; c.Count = 3; c.Rcount = 4 })
		h.one(1, c, rp{o: 1, req: 1, res: store.LockUnknownDB, db: 255, id: "a", key: "k", c: 3, rc: 4})
		if _, ok := h.l.State(255); ok {
			t.Fatal("State(255) exists")
		}
	})
	t.Run("concurrent check over count", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Count = 2 })
		h.one(2, with(lockc(1, "b", "k"), func(c *wc) { c.Count = 2 }),
			rp{o: 2, req: 1, id: "b", key: "k", lc: 2, c: 2, lr: 1, v: setV})
		c := with(lockc(2, "c", "k"), func(c *wc) { c.Flag = 0x08; c.Timeout = 0; c.Count = 1 })
		h.one(3, c, rp{o: 3, req: 2, res: store.LockTimeout, id: "c", key: "k", lc: 2, c: 1, v: setV})
		// At or under the count, the check passes and the Lock goes on.
		c.Count = 2
		h.one(3, c, rp{o: 3, req: 2, id: "c", key: "k", lc: 3, c: 2, lr: 1, v: setV})
	})
	t.Run("concurrent check wait-while-unlocked on a free key", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		c := with(lockc(1, "a", "k"), func(c *wc) { c.Flag = 0x08; c.Timeout = 0; c.TimeoutFlag = 0x0200; c.Count = 1 })
		h.one(1, c, rp{o: 1, req: 1, res: store.LockTimeout, id: "a", key: "k", c: 1})
	})
	t.Run("show", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Count = 2; c.Rcount = 3 })
		h.one(1, with(lockc(2, "a", "k"), func(c *wc) { c.Count = 2; c.Rcount = 3 }),
			rp{o: 1, req: 2, id: "a", key: "k", lc: 2, c: 2, lr: 2, rc: 3, v: setV})
		h.one(2, with(lockc(3, "b", "k"), func(c *wc) { c.Count = 5; c.Rcount = 1; c.Data = setW }),
			rp{o: 2, req: 3, id: "b", key: "k", lc: 3, c: 5, lr: 1, rc: 1, v: setV})
		// The oldest holder is described; nothing changes, data is ignored.
		c := with(lockc(4, "x", "k"), func(c *wc) { c.Flag = 0x01; c.Expried = 0; c.Timeout = 0; c.Data = setV })
		h.one(3, c, rp{o: 3, req: 4, res: store.LockUnownError, id: "a", key: "k", lc: 3, c: 2, lr: 2, rc: 3, v: setW})
		h.one(3, c, rp{o: 3, req: 4, res: store.LockUnownError, id: "a", key: "k", lc: 3, c: 2, lr: 2, rc: 3, v: setW})
	})
	t.Run("show on a free key locks", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.one(1, with(lockc(1, "a", "k"), func(c *wc) { c.Flag = 0x01 }),
			rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	})
	t.Run("update", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Rcount = 1 })
		h.one(1, with(lockc(2, "a", "k"), func(c *wc) { c.Rcount = 1 }),
			rp{o: 1, req: 2, id: "a", key: "k", lc: 2, lr: 2, rc: 1, v: setV})
		c := with(lockc(3, "a", "k"), func(c *wc) { c.Flag = 0x02; c.Data = setW; c.Count = 7; c.Rcount = 9 })
		h.one(2, c, rp{o: 2, req: 3, res: store.LockLockedError, id: "a", key: "k", lc: 2, c: 7, lr: 2, rc: 9, v: setV})
		// The new value shows; the holder now has the update's Count.
		h.one(3, with(lockc(4, "b", "k"), func(c *wc) { c.Flag = 0x01 }),
			rp{o: 3, req: 4, res: store.LockUnownError, id: "a", key: "k", lc: 2, c: 7, lr: 2, rc: 9, v: setW})
	})
	t.Run("reentry", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Rcount = 2 })
		re := with(lockc(2, "a", "k"), func(c *wc) { c.Rcount = 2; c.Data = setW })
		h.one(1, re, rp{o: 1, req: 2, id: "a", key: "k", lc: 2, lr: 2, rc: 2, v: setV})
		// Expried 0: accepted, nothing added, data not applied.
		probe := with(re, func(c *wc) { c.Expried = 0; c.Data = setV })
		h.one(1, probe, rp{o: 1, req: 2, id: "a", key: "k", lc: 2, lr: 2, rc: 2, v: setW})
		h.one(1, re, rp{o: 1, req: 2, id: "a", key: "k", lc: 3, lr: 3, rc: 2, v: setW})
		// levels 3 > Rcount 2: refused, data not applied.
		h.one(1, with(re, func(c *wc) { c.Data = setV }),
			rp{o: 1, req: 2, res: store.LockLockedError, id: "a", key: "k", lc: 3, lr: 3, rc: 2, v: setW})
		// Rcount 0: refused.
		h.one(1, lockc(3, "a", "k"), rp{o: 1, req: 3, res: store.LockLockedError, id: "a", key: "k", lc: 3, lr: 3, v: setW})
	})
	t.Run("reentry stops at 255 levels", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		re := with(lockc(1, "a", "k"), func(c *wc) { c.Rcount = 0xFF })
		for i := 1; i <= 255; i++ {
			h.one(1, re, rp{o: 1, req: 1, id: "a", key: "k", lc: uint16(i), lr: uint8(i), rc: 0xFF})
		}
		h.one(1, re, rp{o: 1, req: 1, res: store.LockLockedError, id: "a", key: "k", lc: 255, lr: 255, rc: 0xFF})
	})
	t.Run("wait while unlocked with waiters and count 0", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		w := with(lockc(1, "w", "k"), func(c *wc) { c.TimeoutFlag = 0x0200; c.Count = 1; c.Expried = 0; c.Data = setV })
		h.one(1, w)
		h.one(2, with(lockc(2, "b", "k"), func(c *wc) { c.TimeoutFlag = 0x0200 }),
			rp{o: 2, req: 2, res: store.LockUnownError, id: "b", key: "k"})
	})
	t.Run("admitted", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Count = 1 })
		h.one(2, with(lockc(2, "b", "k"), func(c *wc) { c.Count = 3; c.Rcount = 4; c.Data = setW }),
			rp{o: 2, req: 2, id: "b", key: "k", lc: 2, c: 3, lr: 1, rc: 4, v: setV})
	})
	t.Run("admitted probe", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Count = 1 })
		probe := with(lockc(2, "b", "k"), func(c *wc) { c.Count = 1; c.Expried = 0; c.Data = setW })
		h.one(2, probe, rp{o: 2, req: 2, id: "b", key: "k", lc: 1, c: 1, v: setV})
		h.one(2, probe, rp{o: 2, req: 2, id: "b", key: "k", lc: 1, c: 1, v: setW})
		// On a free key the probe's value vanishes with the key.
		h.one(3, with(probe, func(c *wc) { c.Key = id16("free") }), rp{o: 3, req: 2, id: "b", key: "free", c: 1})
		h.one(3, with(probe, func(c *wc) { c.Key = id16("free") }), rp{o: 3, req: 2, id: "b", key: "free", c: 1})
		h.state(0, store.LockState{LockCount: 5, LockedCount: 1, KeyCount: 1})
	})
	t.Run("less version", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		v5 := "\x05\x00\x00\x00\x00\x00\x00\x00grp"
		holdV(h, func(c *wc) { c.LockID = id16(v5) })
		less := with(lockc(2, "\x04\x00\x00\x00\x00\x00\x00\x00grp", "k"), func(c *wc) {
			c.TimeoutFlag = 0x4000
			c.Data = setW
		})
		h.one(2, less, rp{o: 2, req: 2, id: v5, key: "k", lc: 1, v: setV})
		h.one(2, less, rp{o: 2, req: 2, id: v5, key: "k", lc: 1, v: setW})
		// Equal or greater versions wait, or time out with Timeout 0.
		same := with(less, func(c *wc) { c.LockID = id16("\x05\x00\x00\x00\x00\x00\x00\x00grq"); c.Timeout = 0 })
		h.one(2, same, rp{o: 2, req: 2, res: store.LockTimeout, rawID: &same.LockID, key: "k", lc: 1, v: setW})
	})
	t.Run("queued, granted, timed out", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, func(c *wc) { c.Expried = 3 })
		h.one(2, with(lockc(2, "b", "k"), func(c *wc) { c.Data = setW }))
		h.one(3, with(lockc(3, "c", "k"), func(c *wc) { c.Timeout = 10 }))
		h.one(4, with(lockc(4, "d", "k"), func(c *wc) { c.Timeout = 0 }),
			rp{o: 4, req: 4, res: store.LockTimeout, id: "d", key: "k", lc: 1, v: setV})
		// a expires at +4 s: b gets it, with the value before its SET.
		expect(t, "expire a", h.advance(4*time.Second),
			rp{o: 1, req: 100, res: store.LockExpried, id: "a", key: "k", lc: 0, v: setV},
			rp{o: 2, req: 2, id: "b", key: "k", lc: 1, lr: 1, v: setV})
		// b times out at +6 s of waiting... no: b holds. c's wait of 10 s ends at +11.
		expect(t, "c waits", h.advance(6*time.Second))
		expect(t, "c times out", h.advance(time.Second), rp{o: 3, req: 3, res: store.LockTimeout, id: "c", key: "k", lc: 1, v: setW})
	})
	t.Run("queued probe granted", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, nil)
		h.one(2, with(lockc(2, "b", "k"), func(c *wc) { c.Expried = 0 }))
		// The waiter keeps the key, and its value, alive until it is served.
		h.one(1, unlockc(3, "a", "k"), rp{o: 1, t: 2, req: 3, id: "a", key: "k", v: setV},
			rp{o: 2, req: 2, id: "b", key: "k", v: setV})
		if ttl := h.l.TTL(0, id16("k"), h.now); ttl != -2 {
			t.Fatalf("TTL of the served key = %d, want -2", ttl)
		}
		h.state(0, store.LockState{LockCount: 2, UnLockCount: 1})
	})
	t.Run("queued, cancelled", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		holdV(h, nil)
		h.one(2, lockc(2, "b", "k"))
		h.one(3, with(unlockc(3, "b", "k"), func(c *wc) { c.Flag = 0x02; c.Count = 1; c.Rcount = 2 }),
			rp{o: 3, t: 2, req: 3, res: store.LockLockedError, id: "b", key: "k", lc: 1, c: 1, rc: 2, v: setV},
			rp{o: 2, req: 2, res: store.LockUnlockError, id: "b", key: "k", lc: 1, v: setV})
		// Nothing left to cancel: UNLOCK_ERROR (not UNOWN_ERROR as without the flag).
		h.one(3, with(unlockc(3, "b", "k"), func(c *wc) { c.Flag = 0x02 }),
			rp{o: 3, t: 2, req: 3, res: store.LockUnlockError, id: "b", key: "k", lc: 1, v: setV})
		h.one(3, unlockc(3, "b", "k"), rp{o: 3, t: 2, req: 3, res: store.LockUnownError, id: "b", key: "k", lc: 1, v: setV})
		h.state(0, store.LockState{LockCount: 1, UnLockCount: 1, LockedCount: 1, KeyCount: 1, UnlockErrorCount: 2})
	})
}

// TestUnlockOutcomes covers every row of the Unlock outcome table (§5.2).
func TestUnlockOutcomes(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, with(unlockc(1, "a", "k"), func(c *wc) { c.Count = 2; c.Rcount = 3 }),
		rp{o: 1, t: 2, req: 1, res: store.LockUnknownDB, id: "a", key: "k", c: 2, rc: 3})
	h.one(1, with(unlockc(1, "a", "k"), func(c *wc) { c.DB = 255 }),
		rp{o: 1, t: 2, req: 1, res: store.LockUnknownDB, db: 255, id: "a", key: "k"})
	if _, ok := h.l.State(0); ok {
		t.Fatal("an Unlock created db 0")
	}
	holdV(h, func(c *wc) { c.Rcount = 1 })
	h.one(1, with(unlockc(2, "a", "nokey"), func(c *wc) { c.Data = setW }),
		rp{o: 1, t: 2, req: 2, res: store.LockUnlockError, id: "a", key: "nokey"})
	h.one(2, unlockc(3, "b", "k"), rp{o: 2, t: 2, req: 3, res: store.LockUnownError, id: "b", key: "k", lc: 1, v: setV})
	h.one(1, with(lockc(4, "a", "k"), func(c *wc) { c.Rcount = 1 }),
		rp{o: 1, req: 4, id: "a", key: "k", lc: 2, lr: 2, rc: 1, v: setV})
	// Rcount > 0 releases one level, with its data applied.
	h.one(1, with(unlockc(5, "a", "k"), func(c *wc) { c.Rcount = 1; c.Data = setW }),
		rp{o: 1, t: 2, req: 5, id: "a", key: "k", lc: 1, lr: 1, rc: 1, v: setV})
	h.one(1, unlockc(6, "a", "k"), rp{o: 1, t: 2, req: 6, id: "a", key: "k", v: setW})
	h.state(0, store.LockState{LockCount: 2, UnLockCount: 2, UnlockErrorCount: 2})
	h.one(1, unlockc(7, "a", "k"), rp{o: 1, t: 2, req: 7, res: store.LockUnlockError, id: "a", key: "k"})

	// A key with waiters but no holder (wait-while-unlocked).
	w := with(lockc(8, "w", "e"), func(c *wc) { c.TimeoutFlag = 0x0200; c.Count = 1; c.Expried = 0; c.Data = setV })
	h.one(2, w)
	h.one(1, unlockc(9, "a", "e"), rp{o: 1, t: 2, req: 9, res: store.LockUnlockError, id: "a", key: "e"})
	h.one(1, with(unlockc(9, "a", "e"), func(c *wc) { c.Flag = 0x01 }), rp{o: 1, t: 2, req: 9, res: store.LockUnlockError, id: "a", key: "e"})
	h.one(1, with(unlockc(10, "w", "e"), func(c *wc) { c.Flag = 0x02 }),
		rp{o: 1, t: 2, req: 10, res: store.LockLockedError, id: "w", key: "e"},
		rp{o: 2, req: 8, res: store.LockUnlockError, id: "w", key: "e", c: 1})
	h.state(0, store.LockState{LockCount: 2, UnLockCount: 3, UnlockErrorCount: 5})
}

// A holder's expiry is staged in its call (deadlines.add) and joins the heap only when
// the next deadline is asked for: one that stays held past the call is still due at its
// time, and a Lock released in the same turn leaves nothing scheduled.
func TestStagedHoldExpiresOnTime(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, lockc(1, "a", "k"), rp{o: 1, req: 1, res: store.LockOK, id: "a", key: "k", lc: 1, lr: 1})
	h.one(1, unlockc(2, "a", "k"), rp{o: 1, t: 2, req: 2, res: store.LockOK, id: "a", key: "k"})
	if at, ok := h.l.NextDeadline(); ok {
		t.Fatalf("a lock released in its turn left a deadline at %d", at)
	}
	h.one(1, with(lockc(3, "b", "k"), func(c *wc) { c.Expried = 1 }),
		rp{o: 1, req: 3, res: store.LockOK, id: "b", key: "k", lc: 1, lr: 1})
	due, ok := h.l.NextDeadline()
	if !ok || due < h.now+1e9 || due > h.now+2e9 {
		t.Fatalf("next deadline %d, %v; want the hold's, 1 to 2 s after %d", due, ok, h.now)
	}
	expect(t, "just before the expiry", h.advance(time.Duration(due-h.now-1)))
	expect(t, "at the expiry", h.advance(1),
		rp{o: 1, req: 3, res: store.LockExpried, id: "b", key: "k"})
}
