package store_test

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// TestShowUpdate: flag 0x01|0x02 on a held key updates the oldest holder
// under its LockId (§5.3).
func TestShowUpdate(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	holdV(h, func(c *wc) { c.Count = 1 })
	h.one(2, with(lockc(2, "b", "k"), func(c *wc) { c.Count = 1 }), rp{o: 2, req: 2, id: "b", key: "k", lc: 2, c: 1, lr: 1, v: setV})
	c := with(lockc(3, "x", "k"), func(c *wc) { c.Flag = 0x03; c.Data = setW; c.Expried = 100; c.Count = 4 })
	h.one(3, c, rp{o: 3, req: 3, res: store.LockLockedError, id: "a", key: "k", lc: 2, c: 4, lr: 1, v: setV})
	// a now expires after 100 s, not 10; b after 10.
	expect(t, "b expires", h.advance(11*time.Second), rp{o: 2, req: 2, res: store.LockExpried, id: "b", key: "k", lc: 1, c: 1, v: setW})
	expect(t, "a expires", h.advance(90*time.Second), rp{o: 3, req: 3, res: store.LockExpried, id: "a", key: "k", c: 4})
}

// TestUpdate: an Update replaces the holder's parameters and restarts its
// expiry, except with Expried 0xFFFF and ExpriedFlag 0x4000, which keeps it;
// 0x7FFF with 0x4000 makes it unlimited (§5.4, §8.2).
func TestUpdate(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, lockc(1, "a", "k"), rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != 11000 {
		t.Fatalf("TTL = %d, want 11000", ttl)
	}
	h.advance(5 * time.Second)
	keep := with(lockc(2, "a", "k"), func(c *wc) {
		c.Flag = 0x02
		c.Expried, c.ExpriedFlag = 0xFFFF, 0x4000|0x0100|0x2000
		c.Data = setV
	})
	h.one(2, keep, rp{o: 2, req: 2, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != 6000 {
		t.Fatalf("TTL after a keeping update = %d, want 6000", ttl)
	}
	// The holder's RequestId and owner are the update's: the push goes to 2.
	expect(t, "expiry kept", h.advance(6*time.Second), rp{o: 2, req: 2, res: store.LockExpried, id: "a", key: "k"})

	h.one(1, lockc(3, "a", "k"), rp{o: 1, req: 3, id: "a", key: "k", lc: 1, lr: 1})
	h.advance(5 * time.Second)
	h.one(1, with(lockc(4, "a", "k"), func(c *wc) { c.Flag = 0x02; c.Expried = 20 }),
		rp{o: 1, req: 4, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != 21000 {
		t.Fatalf("TTL after an update = %d, want 21000", ttl)
	}
	h.one(1, with(lockc(5, "a", "k"), func(c *wc) { c.Flag = 0x02; c.Expried, c.ExpriedFlag = 0x7FFF, 0x4000 }),
		rp{o: 1, req: 5, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != -1 {
		t.Fatalf("TTL after an unlimited update = %d, want -1", ttl)
	}
	// An Update by a LockId that does not hold is an ordinary Lock.
	h.one(2, with(lockc(6, "b", "k"), func(c *wc) { c.Flag = 0x02; c.Timeout = 0 }),
		rp{o: 2, req: 6, res: store.LockTimeout, id: "b", key: "k", lc: 1})
	h.one(2, with(lockc(6, "b", "k2"), func(c *wc) { c.Flag = 0x02 }),
		rp{o: 2, req: 6, id: "b", key: "k2", lc: 1, lr: 1})
}

// TestUnlockHead: flag 0x01 unlocks the oldest holder for a LockId that
// holds nothing, with that holder's parameters (§5.5), as Semaphore
// releases do.
func TestUnlockHead(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	sem := func(req uint16, id string) store.LockCommand {
		return with(lockc(req, id, "sem"), func(c *wc) { c.Count = 2 })
	}
	h.one(1, with(sem(1, "a"), func(c *wc) { c.Rcount = 1 }), rp{o: 1, req: 1, id: "a", key: "sem", lc: 1, c: 2, lr: 1, rc: 1})
	h.one(1, with(sem(2, "a"), func(c *wc) { c.Rcount = 1 }), rp{o: 1, req: 2, id: "a", key: "sem", lc: 2, c: 2, lr: 2, rc: 1})
	h.one(2, sem(3, "b"), rp{o: 2, req: 3, id: "b", key: "sem", lc: 3, c: 2, lr: 1})
	h.one(3, with(sem(4, "c"), func(c *wc) { c.Timeout = 0 }), rp{o: 3, req: 4, res: store.LockTimeout, id: "c", key: "sem", lc: 3, c: 2})
	release := with(unlockc(5, "r", "sem"), func(c *wc) { c.Flag = 0x01 })
	// a is reentrant (Rcount 1): it loses one level, then the other.
	h.one(3, release, rp{o: 3, t: 2, req: 5, id: "a", key: "sem", lc: 2, c: 2, lr: 1, rc: 1})
	h.one(3, release, rp{o: 3, t: 2, req: 5, id: "a", key: "sem", lc: 1, c: 2, rc: 1})
	h.one(3, release, rp{o: 3, t: 2, req: 5, id: "b", key: "sem", c: 2})
	h.one(3, release, rp{o: 3, t: 2, req: 5, res: store.LockUnlockError, id: "r", key: "sem"})
}

// TestCancelWait: flag 0x02 removes a queued request: the canceller gets 5,
// the request 6 (§5.5); a holder's own LockId just unlocks.
func TestCancelWait(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.one(1, lockc(1, "a", "k"), rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	h.one(2, lockc(2, "b", "k"))
	h.one(3, lockc(3, "c", "k"))
	h.one(1, with(unlockc(4, "c", "k"), func(c *wc) { c.Flag = 0x02 }),
		rp{o: 1, t: 2, req: 4, res: store.LockLockedError, id: "c", key: "k", lc: 1},
		rp{o: 3, req: 3, res: store.LockUnlockError, id: "c", key: "k", lc: 1})
	h.state(0, store.LockState{LockCount: 1, UnLockCount: 1, LockedCount: 1, WaitCount: 1, KeyCount: 1})
	h.one(1, with(unlockc(5, "a", "k"), func(c *wc) { c.Flag = 0x02 }),
		rp{o: 1, t: 2, req: 5, id: "a", key: "k"},
		rp{o: 2, req: 2, id: "b", key: "k", lc: 1, lr: 1})
	// c's wait was cancelled: nothing times out.
	expect(t, "after the cancel", h.advance(6*time.Second))
}

// TestRequeue: unlock flag 0x08 releases a one-level holder and queues its
// Lock again with the Unlock's parameters; with TimeoutFlag 0x4000 its
// version goes up by one (§5.6).
func TestRequeue(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	v5 := [16]byte{5, 0, 0, 0, 0, 0, 0, 0, 'g'}
	v6 := [16]byte{6, 0, 0, 0, 0, 0, 0, 0, 'g'}
	l := with(lockc(1, "", "k"), func(c *wc) { c.LockID = v5; c.TimeoutFlag = 0x4000 })
	h.one(1, l, rp{o: 1, req: 1, rawID: &v5, key: "k", lc: 1, lr: 1})
	// The requeued Lock takes the Unlock's Timeout, TimeoutFlag, Expried...:
	// keep 0x4000 there for the version to go up again next time.
	u := with(unlockc(2, "", "k"), func(c *wc) {
		c.LockID = v5
		c.Flag = 0x08
		c.Timeout, c.TimeoutFlag, c.Expried = 3, 0x4000, 7
	})
	// Nobody waits: the second reply to RequestId 1 comes at once.
	h.one(1, u, rp{o: 1, t: 2, req: 2, rawID: &v6, key: "k"}, rp{o: 1, req: 1, rawID: &v6, key: "k", lc: 1, lr: 1})
	if ttl := h.l.TTL(0, id16("k"), h.now); ttl != 8000 {
		t.Fatalf("TTL of the requeued lock = %d, want the Unlock's 8000", ttl)
	}
	// With a waiter, it goes first; the requeued lock waits behind it.
	h.one(2, lockc(3, "b", "k"))
	u.LockID = v6
	h.one(1, u, rp{o: 1, t: 2, req: 2, rawID: &[16]byte{7, 0, 0, 0, 0, 0, 0, 0, 'g'}, key: "k"},
		rp{o: 2, req: 3, id: "b", key: "k", lc: 1, lr: 1})
	// Its wait is the Unlock's Timeout, 3 s.
	expect(t, "requeued wait", h.advance(4*time.Second), rp{o: 1, req: 1, rawID: &[16]byte{7, 0, 0, 0, 0, 0, 0, 0, 'g'}, key: "k", res: store.LockTimeout, lc: 1})
	// Timeout 0: nothing requeued; several levels: no requeue.
	h.one(2, with(unlockc(4, "b", "k"), func(c *wc) { c.Flag = 0x08; c.Timeout = 0 }), rp{o: 2, t: 2, req: 4, id: "b", key: "k"})
	h.state(0, store.LockState{LockCount: 3, UnLockCount: 3, TimeoutedCount: 1})
}

// TestReverseKey: TimeoutFlag 0x0080 and ExpriedFlag 0x0080 lock the
// reversed key after a queued timeout or an expiry (§5.7).
func TestReverseKey(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	rev := [16]byte{'5', '4', '3', '2', '1', 'v', 'e', 'r'}
	h.one(1, lockc(1, "x", "rev12345"), rp{o: 1, req: 1, id: "x", key: "rev12345", lc: 1, lr: 1})
	// An immediate TIMEOUT is not reversed.
	try := with(lockc(2, "a", "rev12345"), func(c *wc) { c.Timeout = 0; c.TimeoutFlag = 0x0080 })
	h.one(2, try, rp{o: 2, req: 2, res: store.LockTimeout, id: "a", key: "rev12345", lc: 1})
	q := with(lockc(3, "a", "rev12345"), func(c *wc) {
		c.Timeout, c.TimeoutFlag = 1, 0x0080
		c.Expried = 4
		c.Data = setV
	})
	h.one(2, q)
	expect(t, "timeout reversed", h.advance(2*time.Second),
		rp{o: 2, req: 3, res: store.LockTimeout, id: "a", key: "rev12345", lc: 1},
		rp{o: 2, req: 3, id: "a", rawKey: &rev, lc: 1, lr: 1})
	// The data travelled: the reversed key has value "v".
	h.one(3, with(lockc(4, "s", ""), func(c *wc) { c.Key = rev; c.Flag = 0x01 }),
		rp{o: 3, req: 4, res: store.LockUnownError, id: "a", rawKey: &rev, lc: 1, lr: 1, v: setV})
	// It holds 4 s with TimeoutFlag 0: its expiry is not reversed.
	expect(t, "expiry", h.advance(5*time.Second), rp{o: 2, req: 3, res: store.LockExpried, id: "a", rawKey: &rev})

	// Expiry reversal: Expried becomes the Timeout, in seconds.
	e := with(lockc(5, "e", "rev12345"), func(c *wc) {
		c.Key = id16("rev12345")
		c.Timeout, c.TimeoutFlag = 3, 0
		c.Expried, c.ExpriedFlag = 1500, 0x0400|0x0080
	})
	h.one(1, unlockc(6, "x", "rev12345"), rp{o: 1, t: 2, req: 6, id: "x", key: "rev12345"})
	h.one(4, e, rp{o: 4, req: 5, id: "e", key: "rev12345", lc: 1, lr: 1})
	expect(t, "expiry reversed", h.advance(1500*time.Millisecond),
		rp{o: 4, req: 5, res: store.LockExpried, id: "e", key: "rev12345"},
		rp{o: 4, req: 5, id: "e", rawKey: &rev, lc: 1, lr: 1})
	if ttl := h.l.TTL(0, rev, h.now); ttl != 3500 {
		t.Fatalf("TTL of the reversed lock = %d, want 3500", ttl)
	}
	expect(t, "no second reversal", h.advance(4*time.Second), rp{o: 4, req: 5, res: store.LockExpried, id: "e", rawKey: &rev})
}

// TestWaitWhileUnlocked: TimeoutFlag 0x0200 waits on a free key until
// someone takes it with a Count that admits the waiter (§5.8): a
// default-clear Event.
func TestWaitWhileUnlocked(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	wait := func(req uint16, id string) store.LockCommand {
		return with(lockc(req, id, "ev"), func(c *wc) {
			c.TimeoutFlag, c.Timeout = 0x0200, 10
			c.Count, c.Expried = 1, 0
		})
	}
	h.one(2, with(wait(1, "w1"), func(c *wc) { c.Timeout = 0 }), rp{o: 2, req: 1, res: store.LockTimeout, id: "w1", key: "ev", c: 1})
	h.one(2, wait(1, "w1"))
	h.one(3, wait(2, "w2"))
	set := with(lockc(3, "ev", "ev"), func(c *wc) { c.Count = 1; c.Expried = 100 })
	h.one(1, set, rp{o: 1, req: 3, id: "ev", key: "ev", lc: 1, c: 1, lr: 1},
		rp{o: 2, req: 1, id: "w1", key: "ev", lc: 1, c: 1},
		rp{o: 3, req: 2, id: "w2", key: "ev", lc: 1, c: 1})
	// While set, a waiter passes at once (the flag only matters on a free key).
	h.one(2, wait(4, "w3"), rp{o: 2, req: 4, id: "w3", key: "ev", lc: 1, c: 1})
	h.one(1, unlockc(5, "ev", "ev"), rp{o: 1, t: 2, req: 5, id: "ev", key: "ev"})
	h.one(2, wait(6, "w4"))
	expect(t, "times out", h.advance(11*time.Second), rp{o: 2, req: 6, res: store.LockTimeout, id: "w4", key: "ev", c: 1})
	h.state(0, store.LockState{LockCount: 4, UnLockCount: 1, TimeoutedCount: 1})

	// Less-version on a key with waiters and no holder (the reference
	// crashes): the ordinary queue.
	h.one(2, wait(7, "w5"))
	lv := with(wait(8, "\x01"), func(c *wc) { c.TimeoutFlag |= 0x4000 })
	h.one(3, lv)
	h.state(0, store.LockState{LockCount: 4, UnLockCount: 1, TimeoutedCount: 1, WaitCount: 2, KeyCount: 1})
}

// TestPriority: TimeoutFlag 0x0010 makes Rcount a priority: waiters are
// served highest first, FIFO among equals, and a request of a higher
// priority than any waiter skips the queue (§5.9).
func TestPriority(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	p := func(req uint16, id string, prio uint8) store.LockCommand {
		return with(lockc(req, id, "k"), func(c *wc) { c.TimeoutFlag, c.Rcount = 0x0010, prio })
	}
	h.one(1, p(1, "h", 3), rp{o: 1, req: 1, id: "h", key: "k", lc: 1, lr: 1, rc: 3})
	// Reentry is refused.
	h.one(1, p(1, "h", 3), rp{o: 1, req: 1, res: store.LockLockedError, id: "h", key: "k", lc: 1, lr: 1, rc: 3})
	h.one(2, p(2, "p5a", 5))
	h.one(3, lockc(3, "n", "k"))
	h.one(4, p(4, "p9", 9))
	h.one(5, p(5, "p5b", 5))
	h.one(6, p(6, "p0", 0))
	// Not admissible (exclusive): a higher priority still queues.
	h.one(7, p(7, "p10", 10))
	_, ws, _ := h.l.ListWait(0, id16("k"), nil)
	var order []string
	for _, w := range ws {
		order = append(order, name(w.LockID))
	}
	want := []string{"p10", "p9", "p5a", "p5b", "n", "p0"}
	if len(order) != len(want) {
		t.Fatalf("queue %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("queue %v, want %v", order, want)
		}
	}
	serve := func(id string, o store.Owner, req int, prio uint8, next string, no store.Owner, nreq int, nprio uint8) {
		t.Helper()
		h.one(o, with(unlockc(99, id, "k"), func(c *wc) { c.TimeoutFlag, c.Rcount = 0x0010, 1 }),
			rp{o: o, t: 2, req: 99, id: id, key: "k", rc: 1},
			rp{o: no, req: nreq, id: next, key: "k", lc: 1, lr: 1, rc: nprio})
	}
	serve("h", 1, 1, 3, "p10", 7, 7, 10)
	serve("p10", 7, 7, 10, "p9", 4, 4, 9)
	serve("p9", 4, 4, 9, "p5a", 2, 2, 5)

	// A shared key: a priority above every waiter's skips the queue.
	s := func(req uint16, id string, prio uint8) store.LockCommand {
		return with(p(req, id, prio), func(c *wc) { c.Key = id16("s"); c.Count = 1 })
	}
	h.one(1, s(10, "x", 0), rp{o: 1, req: 10, id: "x", key: "s", lc: 1, c: 1, lr: 1})
	h.one(2, with(s(11, "y", 4), func(c *wc) { c.Count = 0 }))
	h.one(3, with(s(12, "z", 4), func(c *wc) { c.Timeout = 0 }), rp{o: 3, req: 12, res: store.LockTimeout, id: "z", key: "s", lc: 1, c: 1, rc: 4})
	h.one(3, s(13, "z", 5), rp{o: 3, req: 13, id: "z", key: "s", lc: 2, c: 1, lr: 1, rc: 5})
	// Without the flag, the same request queues behind y.
	h.one(4, with(s(14, "u", 0), func(c *wc) { c.TimeoutFlag = 0; c.Count = 0xFFFF }))
	h.state(0, store.LockState{LockCount: 6, UnLockCount: 3, LockedCount: 3, WaitCount: 5, KeyCount: 2})
}
