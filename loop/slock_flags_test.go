package loop

// slock over real TCP: Lock and Unlock flags, TimeoutFlag and ExpriedFlag bits, result
// codes, STATE, CALL listings, lock data and EXECUTE.

import (
	"bytes"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// rec is a stage-0 data record without properties.
func rec(cmd, flag uint8, value []byte) []byte {
	return slock.AppendDataRecord(nil, cmd, slock.StageCurrent, flag, nil, value)
}

// expectValue checks the value record a reply carries: its flag and value bytes.
func expectValue(t *testing.T, r *slockReply, flag uint8, value string) {
	t.Helper()
	d, ok := r.data(t)
	if !ok {
		t.Fatalf("reply %v carries no value, want flag %#x value %q", r, flag, value)
	}
	if d.Flag != flag || string(d.Value) != value || d.Stage != 0 {
		t.Fatalf("reply %v carries stage %d command %d flag %#x value %q, want stage 0 flag %#x value %q",
			r, d.Stage, d.Cmd, d.Flag, d.Value, flag, value)
	}
}

// expectNoValue checks a reply carries no value.
func expectNoValue(t *testing.T, r *slockReply) {
	t.Helper()
	if r.Value != nil || r.Flag != 0 {
		t.Fatalf("reply %v carries a value, want none", r)
	}
}

// elems lists the elements of an ARRAY value.
func elems(v []byte) []string {
	var out []string
	for {
		e, rest, ok := slock.NextElem(v)
		if !ok {
			return out
		}
		out = append(out, string(e))
		v = rest
	}
}

func TestSlockLockFlags(t *testing.T) {
	ts := startSlock(t, nil)

	t.Run("0x01 show", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("flag-show")
		h := newRLock(a, key, 5, 60)
		h.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("v"))).want(slock.ResultOK)
		h.Lock().want(slock.ResultOK)
		show := newLock(b, key, 0, 0)
		show.count, show.rcount = 7, 3
		r := show.send(slock.TypeLock, 0x01, rec(slock.DataSet, 0, []byte("ignored"))).want(slock.ResultUnownError)
		// The oldest holder: its LockId, Count, Rcount, its levels; the key's levels; the value.
		expectLock(t, r, slock.TypeLock, h.id, key, 2, 2)
		eq(t, "Count", r.Count, 0)
		eq(t, "Rcount", r.Rcount, 0xff)
		expectValue(t, r, 0, "v")
		// On a free key Show proceeds as a Lock (Expried 0: a probe).
		free := newLock(b, key16("flag-show-free"), 0, 0)
		expectLock(t, free.LockShow().want(slock.ResultOK), slock.TypeLock, free.id, free.key, 0, 0)
	})

	t.Run("0x02 update", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("flag-update")
		h := newLock(a, key, 5, 60)
		h.Lock().want(slock.ResultOK)
		up := &sLock{c: a, key: key, id: h.id, timeout: 5, expried: ms(100)}
		start := time.Now()
		r := up.LockUpdate().want(slock.ResultLockedError)
		expectLock(t, r, slock.TypeLock, h.id, key, 1, 1)
		// The new Expried applies from now: the push names the Update's RequestId.
		p := a.push("expiry after the update")
		eq(t, "push result", p.Result, slock.ResultExpried)
		eq(t, "push RequestId", p.RequestID, r.RequestID)
		expectLock(t, p, slock.TypeLock, h.id, key, 0, 0)
		if d := since(start, p); d < 100*time.Millisecond || d > 3*time.Second {
			t.Fatalf("100 ms expiry after the update came after %v", d)
		}
		// An Update of a LockId that holds nothing is an ordinary Lock.
		fresh := newLock(b, key, 5, 60)
		eq(t, "update of a free key", fresh.LockUpdate().want(slock.ResultOK).Lcount, 1)
	})

	t.Run("0x03 show and update", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("flag-show-update")
		h := newLock(a, key, 5, 60)
		h.Lock().want(slock.ResultOK)
		su := newLock(b, key, 5, ms(100))
		r := su.send(slock.TypeLock, 0x03, nil).want(slock.ResultLockedError)
		expectLock(t, r, slock.TypeLock, h.id, key, 1, 1)
		// The oldest holder was updated and now belongs to b.
		p := b.push("expiry of the updated holder")
		eq(t, "push result", p.Result, slock.ResultExpried)
		eq(t, "push RequestId", p.RequestID, r.RequestID)
		eq(t, "push LockId", p.LockID, h.id)
		a.noPush(50 * time.Millisecond)
	})

	t.Run("0x08 concurrent check", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("flag-check")
		h := newLock(a, key, 5, 60)
		h.count = 1
		h.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("cur"))).want(slock.ResultOK)
		cc := newLock(b, key, 0, 60)
		r := cc.send(slock.TypeLock, 0x08, nil).want(slock.ResultTimeout)
		expectLock(t, r, slock.TypeLock, cc.id, key, 1, 0)
		expectValue(t, r, 0, "cur")
		// With Show too, the check answers first: TIMEOUT, not UNOWN_ERROR.
		cc.send(slock.TypeLock, 0x09, nil).want(slock.ResultTimeout)
		// Within the Count, the request proceeds.
		cc.count = 1
		eq(t, "levels", cc.send(slock.TypeLock, 0x08, nil).want(slock.ResultOK).Lcount, 2)
		// With TimeoutFlag 0x0200 on a free key: TIMEOUT.
		ev := newLock(b, key16("flag-check-free"), tfUnlocked, 0)
		ev.send(slock.TypeLock, 0x08, nil).want(slock.ResultTimeout)
	})
	ts.healthy(t)
}

func TestSlockUnlockFlags(t *testing.T) {
	ts := startSlock(t, nil)

	t.Run("0x01 unlock head", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("uflag-head")
		h := newRLock(a, key, 5, 60)
		h.Lock().want(slock.ResultOK)
		h.Lock().want(slock.ResultOK)
		other := newLock(b, key, 0, 0)
		other.count = 9
		// The request takes the holder's parameters (Rcount 0xff: one level goes).
		r := other.UnlockHead().want(slock.ResultOK)
		expectLock(t, r, slock.TypeUnlock, h.id, key, 1, 1)
		eq(t, "Count", r.Count, 0)
		eq(t, "Rcount", r.Rcount, 0xff)
		expectLock(t, other.UnlockHead().want(slock.ResultOK), slock.TypeUnlock, h.id, key, 0, 0)
		other.UnlockHead().want(slock.ResultUnlockError)
	})

	t.Run("0x02 cancel wait", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("uflag-cancel")
		newLock(a, key, 5, 60).Lock().want(slock.ResultOK)
		wl := newLock(b, key, 5, 60)
		w := wl.Lock()
		w.none(50 * time.Millisecond)
		canceller := &sLock{c: c, key: key, id: wl.id, timeout: 5, expried: 60}
		expectLock(t, canceller.CancelWait().want(slock.ResultLockedError), slock.TypeUnlock, wl.id, key, 1, 0)
		expectLock(t, w.want(slock.ResultUnlockError), slock.TypeLock, wl.id, key, 1, 0)
		eq(t, "waiting", c.state(0).WaitCount, 0)
		// Nothing queued under that LockId any more: UNLOCK_ERROR (§5.5).
		canceller.CancelWait().want(slock.ResultUnlockError)
	})

	t.Run("0x08 requeue", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("uflag-requeue")
		h := newLock(a, key, 5, 60)
		lr := h.Lock().want(slock.ResultOK)
		again := op{c: a, rid: lr.RequestID, ch: a.expect(lr.RequestID, 1), what: "requeued lock"}
		rq := &sLock{c: a, key: key, id: h.id, timeout: 5, expried: ms(150)}
		expectLock(t, rq.send(slock.TypeUnlock, 0x08, nil).want(slock.ResultOK), slock.TypeUnlock, h.id, key, 0, 0)
		// Nobody waits: re-granted at once, a second reply to the old RequestId, held with
		// the Unlock's Expried.
		expectLock(t, again.want(slock.ResultOK), slock.TypeLock, h.id, key, 1, 1)
		p := a.push("expiry of the requeued lock")
		eq(t, "push RequestId", p.RequestID, lr.RequestID)

		// Behind a waiter: the waiter goes first.
		k2 := key16("uflag-requeue-2")
		h2 := newLock(a, k2, 5, 60)
		lr2 := h2.Lock().want(slock.ResultOK)
		again2 := op{c: a, rid: lr2.RequestID, ch: a.expect(lr2.RequestID, 1), what: "requeued lock"}
		wl := newLock(b, k2, 5, 60)
		w := wl.Lock()
		w.none(30 * time.Millisecond)
		(&sLock{c: a, key: k2, id: h2.id, timeout: 5, expried: 60}).send(slock.TypeUnlock, 0x08, nil).want(slock.ResultOK)
		w.want(slock.ResultOK)
		again2.none(50 * time.Millisecond)
		wl.Unlock().want(slock.ResultOK)
		expectLock(t, again2.want(slock.ResultOK), slock.TypeLock, h2.id, k2, 1, 1)

		// With Timeout 0 in the Unlock nothing is requeued.
		k3 := key16("uflag-requeue-3")
		h3 := newLock(a, k3, 5, 60)
		h3.Lock().want(slock.ResultOK)
		(&sLock{c: a, key: k3, id: h3.id, expried: 60}).send(slock.TypeUnlock, 0x08, nil).want(slock.ResultOK)
		newLock(b, k3, 0, 60).Lock().want(slock.ResultOK)
	})
	ts.healthy(t)
}

func TestSlockTimeoutAndExpriedFlags(t *testing.T) {
	ts := startSlock(t, nil)

	t.Run("0x0008 timeout when the key has data", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("tf-data")
		newLock(a, key, 5, 60).send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("x"))).want(slock.ResultOK)
		r := newLock(b, key, 5|0x0008<<16, 60).Lock().within(time.Second)
		eq(t, "result", r.Result, slock.ResultTimeout)
		expectValue(t, r, 0, "x")
		// Without a value the request queues as usual.
		k2 := key16("tf-data-none")
		newLock(a, k2, 5, 60).Lock().want(slock.ResultOK)
		w := newLock(b, k2, ms(80)|0x0008<<16, 60).Lock()
		w.none(30 * time.Millisecond)
		w.want(slock.ResultTimeout)
	})

	t.Run("0x0040 minutes", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("tf-minutes")
		h := newLock(a, key, 5, 1|tfMinutes)
		h.Lock().want(slock.ResultOK)
		wl := newLock(b, key, 1|tfMinutes, 60)
		w := wl.Lock()
		w.none(20 * time.Millisecond)
		lw := listWait(t, c, 0, key)
		if len(lw.Waits) != 1 {
			t.Fatalf("LIST_WAIT: %d waiters", len(lw.Waits))
		}
		if d := lw.Waits[0].TimeoutTime - lw.Waits[0].StartTime; d < 60 || d > 61 {
			t.Fatalf("a 1-minute wait times out %d s after it started", d)
		}
		ll := listLocked(t, c, 0, key)
		if d := ll.Locks[0].ExpriedTime - ll.Locks[0].StartTime; d < 60 || d > 61 {
			t.Fatalf("a 1-minute hold expires %d s after it started", d)
		}
		wl.CancelWait().want(slock.ResultLockedError)
		w.want(slock.ResultUnlockError)
	})

	t.Run("0x0080 reverse key on timeout", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("rev12345")
		rev := [16]byte{'5', '4', '3', '2', '1', 'v', 'e', 'r'}
		newLock(a, key, 5, 60).Lock().want(slock.ResultOK)
		f := lockFrame(slock.TypeLock, 0, 0, key, b.id(), ms(50)|tfReverse, 60, 0, 0, nil)
		f.RequestID = b.id()
		ch := b.expect(f.RequestID, 2)
		b.write(slock.AppendLockRequest(nil, f))
		o := op{c: b, rid: f.RequestID, ch: ch, what: "reverse-key lock"}
		expectLock(t, o.want(slock.ResultTimeout), slock.TypeLock, f.LockID, key, 1, 0)
		// The same command again on the reversed key: a second reply to the same RequestId.
		expectLock(t, o.want(slock.ResultOK), slock.TypeLock, f.LockID, rev, 1, 1)
	})

	t.Run("0x0080 reverse key on expiry", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("revexp")
		rev := [16]byte{'p', 'x', 'e', 'v', 'e', 'r'}
		h := newLock(a, key, 1, ms(60)|0x0080<<16)
		lr := h.Lock().want(slock.ResultOK)
		p := a.push("expiry")
		eq(t, "push result", p.Result, slock.ResultExpried)
		eq(t, "push RequestId", p.RequestID, lr.RequestID)
		r := a.push("the lock on the reversed key")
		eq(t, "second reply RequestId", r.RequestID, lr.RequestID)
		expectLock(t, r, slock.TypeLock, h.id, rev, 1, 1)
		eq(t, "result", r.Result, slock.ResultOK)
	})

	t.Run("0x0100 hold counted from arrival", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		k1, k2 := key16("tf-arrival"), key16("tf-grant")
		newLock(a, k1, 5, ms(400)).Lock().want(slock.ResultOK)
		newLock(a, k2, 5, ms(400)).Lock().want(slock.ResultOK)
		arrival := newLock(b, k1, ms(5000)|tfArrival, ms(600)).Lock()
		grant := newLock(c, k2, ms(5000), ms(600)).Lock()
		ra, rg := arrival.want(slock.ResultOK), grant.want(slock.ResultOK)
		pa, pg := b.push("expiry counted from arrival"), c.push("expiry counted from grant")
		if d := pa.At.Sub(ra.At); d > 450*time.Millisecond {
			t.Fatalf("with 0x0100 the 600 ms hold ended %v after a grant 400 ms after arrival", d)
		}
		// Counted from the grant it lasts 600 ms; from arrival it would end ~200 ms after the
		// grant. Both times are when the client read the frames, so allow for the grant's
		// reply being read late on a busy machine (-race).
		if d := pg.At.Sub(rg.At); d < 520*time.Millisecond {
			t.Fatalf("without 0x0100 the 600 ms hold ended %v after its grant", d)
		}
	})

	t.Run("0x0200 wait while unlocked", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("tf-unlocked")
		wl := newLock(b, key, 5|tfUnlocked, 0)
		wl.count = 1
		w := wl.Lock() // a free key: waits
		w.none(50 * time.Millisecond)
		// A free key with waiters: Count 0 gets UNOWN_ERROR.
		excl := newLock(c, key, 5|tfUnlocked, 0)
		expectLock(t, excl.Lock().want(slock.ResultUnownError), slock.TypeLock, excl.id, key, 0, 0)
		wl.CancelWait().want(slock.ResultLockedError)
		w.want(slock.ResultUnlockError)
	})

	t.Run("0x1000 acked on a standalone server", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		l := newLock(a, key16("tf-ack"), 5|0x1000<<16, 60)
		l.Lock().want(slock.ResultOK)
		l.Unlock().want(slock.ResultOK)
	})

	t.Run("0x4000 less lock version", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("tf-version")
		h := &sLock{c: a, key: key, id: groupLockID(5, 1), timeout: 5 | tfVersion, expried: 60, count: 1}
		h.Lock().want(slock.ResultOK)
		// A greater version is not admitted even though the Count would allow it.
		newer := &sLock{c: b, key: key, id: groupLockID(7, 2), timeout: tfVersion, expried: 60, count: 1}
		newer.Lock().want(slock.ResultTimeout)
		// A smaller one is.
		older := &sLock{c: b, key: key, id: groupLockID(3, 2), timeout: tfVersion, expried: 60, count: 1}
		expectLock(t, older.Lock().want(slock.ResultOK), slock.TypeLock, older.id, key, 2, 1)

		// A less-version request on a key with a waiter and no holder (the reference
		// crashes here): an ordinary refusal.
		k2 := key16("tf-version-free")
		wl := newLock(b, k2, 5|tfUnlocked, 0)
		wl.count = 1
		w := wl.Lock()
		w.none(20 * time.Millisecond)
		lv := &sLock{c: c, key: k2, id: groupLockID(1, 3), timeout: tfVersion | tfUnlocked, count: 1}
		lv.Lock().want(slock.ResultTimeout)
		wl.CancelWait().want(slock.ResultLockedError)
		w.want(slock.ResultUnlockError)
	})

	t.Run("ExpriedFlag 0x4000 never expires", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		key := key16("ef-never")
		newLock(a, key, 5, 1|tfMillis|tfVersion).Lock().want(slock.ResultOK)
		time.Sleep(100 * time.Millisecond)
		newLock(b, key, 0, 60).Lock().want(slock.ResultTimeout)
		eq(t, "expried_time", listLocked(t, b, 0, key).Locks[0].ExpriedTime, math.MaxInt64)
		a.noPush(10 * time.Millisecond)
	})

	t.Run("flags with no effect here", func(t *testing.T) {
		a, b, c := dial3(t, ts)
		_, _, _ = a, b, c
		for i, fl := range []uint32{0x0020, 0x0800, 0x2000} {
			l := newLock(a, key16("tf-noop-"+string(rune('a'+i))), 5|fl<<16, 60|fl<<16)
			l.Lock().want(slock.ResultOK)
			l.Unlock().want(slock.ResultOK)
		}
		for i, fl := range []uint32{0x0100, 0x0200, 0x1000} {
			l := newLock(a, key16("ef-noop-"+string(rune('a'+i))), 5, 60|fl<<16)
			l.Lock().want(slock.ResultOK)
			l.Unlock().want(slock.ResultOK)
		}
	})
	ts.healthy(t)
}

func TestSlockMillisecondTimes(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("ms-times")
	newLock(a, key, 5, 60).Lock().want(slock.ResultOK)
	// A hold of 1 s (whole seconds) ends between 1 and 2 s later; checked at the end.
	secStart := time.Now()
	newLock(a, key16("sec-expiry"), 5, 1).Lock().want(slock.ResultOK)

	// Three waits of 30, 70 and 120 ms time out in that order, each not early and not
	// very late.
	start := time.Now()
	waits := []uint16{120, 30, 70}
	ops := make([]op, len(waits))
	for i, d := range waits {
		ops[i] = newLock(b, key, ms(d), 60).Lock()
	}
	var at [3]time.Time
	for i, d := range waits {
		r := ops[i].want(slock.ResultTimeout)
		el := since(start, r)
		if el < time.Duration(d)*time.Millisecond || el > time.Duration(d)*time.Millisecond+450*time.Millisecond {
			t.Fatalf("a %d ms wait timed out after %v", d, el)
		}
		at[i] = r.At
	}
	if !(at[1].Before(at[2]) && at[2].Before(at[0])) {
		t.Fatalf("timeouts out of order: 120 ms at %v, 30 ms at %v, 70 ms at %v", at[0], at[1], at[2])
	}

	// A 50 ms hold expires after 50 ms, well before 500.
	start = time.Now()
	newLock(b, key16("ms-expiry"), 5, ms(50)).Lock().want(slock.ResultOK)
	p := b.push("50 ms expiry")
	if el := since(start, p); el < 50*time.Millisecond || el > 500*time.Millisecond {
		t.Fatalf("a 50 ms hold expired after %v", el)
	}
	if el := since(secStart, a.push("1 s expiry")); el < time.Second || el > 2500*time.Millisecond {
		t.Fatalf("a 1 s hold expired after %v", el)
	}
	ts.healthy(t)
}

func TestSlockResultCodes(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxObjects = 3 })
	a := dialSlock(t, ts.slockAddr)

	// 3 UNKNOWN_DB: DbId 0xFF, even with a data record (which is read, so the stream
	// stays in step); and an Unlock in a database never created.
	l := newLock(a, key16("rc-db"), 5, 60)
	l.db = 0xff
	r := l.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("lost"))).want(slock.ResultUnknownDB)
	expectLock(t, r, slock.TypeLock, l.id, l.key, 0, 0)
	expectNoValue(t, r)
	a.ping()
	l.db = 7
	expectLock(t, l.Unlock().want(slock.ResultUnknownDB), slock.TypeUnlock, l.id, l.key, 0, 0)
	eq(t, "db 7 exists", a.state(7).DBState, 0)

	// 4 UNKNOWN_COMMAND: any other type, echoed, bytes 20-63 zero.
	rid := a.id()
	r = a.raw(rid, slock.AppendRequest(nil, slock.Type(42), rid), "type 42").want(slock.ResultUnknownCommand)
	eq(t, "type", r.Type, slock.Type(42))
	if !bytes.Equal(r.Raw[20:64], make([]byte, 44)) {
		t.Fatalf("UNKNOWN_COMMAND reply % x: bytes 20-63 are not zero", r.Raw[:64])
	}

	// 11 UNKNOWN_ERROR: the key limit is reached (MaxObjects 3).
	for i := range 3 {
		newLock(a, key16("rc-key-"+string(rune('a'+i))), 5, 60).Lock().want(slock.ResultOK)
	}
	over := newLock(a, key16("rc-key-d"), 5, 60)
	expectLock(t, over.Lock().want(slock.ResultUnknownError), slock.TypeLock, over.id, over.key, 0, 0)
	// 11 from CALL: a body that does not decode.
	cr := a.call(slock.MethodListLock, []byte{0xff, 0xff, 0xff})
	eq(t, "CALL result", cr.Result, slock.ResultUnknownError)
	eq(t, "CALL error type", string(cr.ErrType), slock.ErrTypeDecode)
	ts.healthy(t)
}

func TestSlockState(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	eq(t, "state of a database never used", a.state(3), slock.State{DB: 3})

	at5 := func(l *sLock) *sLock { l.db = 5; return l }
	k1, k2, k3 := key16("st-1"), key16("st-2"), key16("st-3")
	l1 := at5(newLock(a, k1, 5, 60))
	l1.Lock().want(slock.ResultOK)
	eq(t, "after one lock", a.state(5), slock.State{DBState: 1, DB: 5, LockCount: 1, LockedCount: 1, KeyCount: 1})

	w := at5(newLock(b, k1, ms(80), 60)).Lock()
	eq(t, "waiting", b.state(5).WaitCount, 1)
	w.want(slock.ResultTimeout)
	at5(newLock(b, k1, 0, 60)).Unlock().want(slock.ResultUnownError)
	at5(newLock(b, k3, 0, 60)).Unlock().want(slock.ResultUnlockError)
	at5(newLock(b, k3, 0, 0)).Lock().want(slock.ResultOK) // a probe counts as a grant
	at5(newLock(a, k2, 5, ms(40))).Lock().want(slock.ResultOK)
	a.push("expiry")
	l1.Unlock().want(slock.ResultOK)
	eq(t, "after the sequence", a.state(5), slock.State{DBState: 1, DB: 5, LockCount: 3, UnlockCount: 1,
		TimeoutedCount: 1, ExpriedCount: 1, UnlockErrorCount: 2})
	eq(t, "database 0 untouched", a.state(0), slock.State{})
	ts.healthy(t)
}

func TestSlockSimpleCommands(t *testing.T) {
	ts := startSlock(t, nil)
	c := dialSlock(t, ts.slockAddr)
	zero := make([]byte, 64)

	r := c.simple(slock.TypePing).want(slock.ResultOK)
	eq(t, "PING reply type", r.Type, slock.TypePing)
	if !bytes.Equal(r.Raw[20:64], zero[20:]) {
		t.Fatalf("PING reply % x: bytes 20-63 are not zero", r.Raw)
	}
	r = c.simple(slock.TypeLeader).want(slock.ResultOK)
	eq(t, "LEADER reply type", r.Type, slock.TypeLeader)
	eq(t, "leader", string(r.Host), ts.slockAddr)

	r = c.init(c.id())
	eq(t, "INIT type", r.Flag, slock.InitStandalone)
	if !bytes.Equal(r.Raw[21:64], zero[21:]) {
		t.Fatalf("INIT reply % x: bytes 21-63 are not zero", r.Raw)
	}

	r = c.simple(slock.TypeQuit).want(slock.ResultOK)
	eq(t, "QUIT reply type", r.Type, slock.TypeQuit)
	c.expectClosed()

	// ADMIN: the connection speaks Redis text from then on.
	conn, err := net.DialTimeout("tcp", ts.slockAddr, replyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rid := [16]byte{1, 2, 3}
	_ = conn.SetDeadline(time.Now().Add(replyWait))
	if _, err := conn.Write(slock.AppendRequest(nil, slock.TypeAdmin, rid)); err != nil {
		t.Fatal(err)
	}
	var buf [64]byte
	if _, err := io.ReadFull(conn, buf[:]); err != nil {
		t.Fatalf("ADMIN reply: %v", err)
	}
	if buf[2] != byte(slock.TypeAdmin) || buf[19] != 0 || [16]byte(buf[3:19]) != rid {
		t.Fatalf("ADMIN reply % x", buf)
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "+PONG\r\n" {
		t.Fatalf("PING after ADMIN: %q %v", got, err)
	}
	ts.healthy(t)
}

func TestSlockCall(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	at2 := func(l *sLock) *sLock { l.db = 2; return l }
	k1, k2 := key16("call-1"), key16("call-2")

	h1 := at2(newLock(a, k1, 5, 60))
	h1.count = 1
	r1 := h1.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("hello"))).want(slock.ResultOK)
	now := time.Now().Unix()
	h2 := at2(newLock(b, k1, 5, 60))
	h2.count = 1
	h2.Lock().want(slock.ResultOK)
	wl := at2(newLock(b, k1, 60, 60))
	w := wl.Lock()
	h3 := at2(newLock(a, k2, 5, 1|tfVersion))
	h3.Lock().want(slock.ResultOK)
	w.none(20 * time.Millisecond)

	// LIST_LOCK: every held key with its levels and value.
	r := a.call(slock.MethodListLock, slock.AppendListRequest(nil, 2, nil))
	if r.Result != slock.ResultOK || len(r.ErrType) != 0 || r.Encoding != 3 || r.Charset != 1 {
		t.Fatalf("LIST_LOCK: %v err %q encoding %d charset %d", r, r.ErrType, r.Encoding, r.Charset)
	}
	locks, err := slock.ParseListLockResponse(r.Body)
	if err != nil {
		t.Fatalf("LIST_LOCK body: %v", err)
	}
	if len(locks) != 2 {
		t.Fatalf("LIST_LOCK lists %d keys, want 2: %+v", len(locks), locks)
	}
	for _, l := range locks {
		switch l.Key {
		case k1:
			eq(t, "k1 levels", l.LockedCount, 2)
			if l.Data == nil || string(l.Data.Value) != "hello" || l.Data.Cmd != slock.DataSet || l.Data.Flag != 0 {
				t.Fatalf("k1 data %+v", l.Data)
			}
		case k2:
			eq(t, "k2 levels", l.LockedCount, 1)
			if l.Data != nil {
				t.Fatalf("k2 data %+v, want none", l.Data)
			}
		default:
			t.Fatalf("LIST_LOCK lists key %x", l.Key)
		}
	}

	// LIST_LOCKED: the holders, first first, with the command that took each.
	ll := listLocked(t, a, 2, k1)
	eq(t, "key", ll.Key, k1)
	eq(t, "levels", ll.LockedCount, 2)
	if len(ll.Locks) != 2 || ll.Locks[0].LockID != h1.id || ll.Locks[1].LockID != h2.id {
		t.Fatalf("LIST_LOCKED holders %+v", ll.Locks)
	}
	if ll.Data == nil || string(ll.Data.Value) != "hello" {
		t.Fatalf("LIST_LOCKED data %+v", ll.Data)
	}
	first := ll.Locks[0]
	eq(t, "holder levels", first.LockedCount, 1)
	eq(t, "command", first.Command, slock.Command{RequestID: r1.RequestID, Flag: slock.FlagData, LockID: h1.id,
		Key: k1, Timeout: 5, Expried: 60, Count: 1})
	if d := int64(first.StartTime) - now; d < -2 || d > 2 {
		t.Fatalf("start time %d, now %d", first.StartTime, now)
	}
	if d := first.ExpriedTime - first.StartTime; d < 60 || d > 61 {
		t.Fatalf("a 60 s hold expires %d s after it started", d)
	}
	eq(t, "never-expiring expried_time", listLocked(t, a, 2, k2).Locks[0].ExpriedTime, math.MaxInt64)

	// LIST_WAIT: the waiters in queue order.
	lw := listWait(t, a, 2, k1)
	if len(lw.Waits) != 1 || lw.Waits[0].LockID != wl.id || lw.Waits[0].Command.Timeout != 60 {
		t.Fatalf("LIST_WAIT %+v", lw.Waits)
	}
	if d := lw.Waits[0].TimeoutTime - lw.Waits[0].StartTime; d < 60 || d > 61 {
		t.Fatalf("a 60 s wait times out %d s after it started", d)
	}
	eq(t, "no waiters", len(listWait(t, a, 2, k2).Waits), 0)

	// Errors.
	r = a.call(slock.MethodListLock, slock.AppendListRequest(nil, 9, nil))
	eq(t, "LIST_LOCK unknown db", r.Result, slock.ResultUnknownDB)
	eq(t, "LIST_LOCK unknown db error", string(r.ErrType), slock.ErrTypeUnknownDB)
	for _, m := range []string{slock.MethodListLocked, slock.MethodListWait} {
		r = a.call(m, slock.AppendListRequest(nil, 2, []byte("nokey-nokey-noke")))
		eq(t, m+" of a key without holders", r.Result, slock.ResultUnknownDB)
		eq(t, m+" error", string(r.ErrType), slock.ErrTypeLockManager)
	}
	r = a.call("LIST_EVERYTHING", nil)
	eq(t, "unknown method", r.Result, slock.ResultUnknownCommand)
	if len(r.ErrType) != 0 || len(r.Body) != 0 {
		t.Fatalf("unknown method reply: error %q body % x", r.ErrType, r.Body)
	}
	wl.CancelWait().want(slock.ResultLockedError)
	w.want(slock.ResultUnlockError)
	ts.healthy(t)
}

func TestSlockLockData(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	key := key16("data")
	h := newLock(a, key, 5, 60)
	update := func(record []byte) *slockReply {
		t.Helper()
		r := h.send(slock.TypeLock, 0x02, record).want(slock.ResultLockedError)
		expectLock(t, r, slock.TypeLock, h.id, key, 1, 1)
		return r
	}
	show := func() *slockReply {
		t.Helper()
		return newLock(b, key, 0, 0).LockShow().want(slock.ResultUnownError)
	}

	expectNoValue(t, h.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("abc"))).want(slock.ResultOK))
	expectValue(t, show(), 0, "abc")
	expectValue(t, update(rec(slock.DataAppend, 0, []byte("de"))), 0, "abc")
	expectValue(t, update(rec(slock.DataShift, 0, le32(1))), 0, "abcde")
	expectValue(t, update(rec(slock.DataShift, 0, le32(100))), 0, "bcde") // clamped
	expectValue(t, show(), 0, "")                                         // an empty value is a value
	expectValue(t, update(rec(slock.DataUnset, 0, nil)), 0, "")
	expectNoValue(t, update(rec(slock.DataIncr, 0, le64(5)))) // UNSET counts as no value
	expectValue(t, update(rec(slock.DataIncr, 0, le64(-2))), slock.DataNumber, string(le64(5)))
	expectValue(t, update(rec(slock.DataPush, 0, []byte("x"))), slock.DataNumber, string(le64(3)))
	r := update(rec(slock.DataPush, 0, []byte("y")))
	d, _ := r.data(t)
	if d.Flag != slock.DataArray || !equalStrings(elems(d.Value), []string{"x"}) {
		t.Fatalf("before the second PUSH: flag %#x elements %q", d.Flag, elems(d.Value))
	}
	r = update(rec(slock.DataPop, 0, le32(1)))
	if d, _ = r.data(t); !equalStrings(elems(d.Value), []string{"x", "y"}) {
		t.Fatalf("before POP: elements %q", elems(d.Value))
	}
	if d, _ = show().data(t); !equalStrings(elems(d.Value), []string{"y"}) {
		t.Fatalf("after POP: elements %q", elems(d.Value))
	}
	// PIPELINE: each element applies to the value before it, the last one wins.
	expectValue(t, update(rec(slock.DataSet, 0, []byte("0"))), slock.DataArray, string(le32(1))+"y")
	pipe := append(rec(slock.DataAppend, 0, []byte("a")), rec(slock.DataAppend, 0, []byte("b"))...)
	expectValue(t, update(rec(slock.DataPipeline, 0, pipe)), 0, "0")
	expectValue(t, show(), 0, "0b")

	// An Unlock applies its record; the reply carries the value before it. The last holder
	// gone, the value goes with the key.
	expectValue(t, h.send(slock.TypeUnlock, 0, rec(slock.DataSet, 0, []byte("z"))).want(slock.ResultOK), 0, "0b")
	hb := newLock(b, key, 5, 60)
	expectNoValue(t, hb.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("5"))).want(slock.ResultOK))
	// INCR reads the first 8 value bytes whatever the type: "5" is 53.
	expectValue(t, hb.send(slock.TypeLock, 0x02, rec(slock.DataIncr, 0, le64(1))).want(slock.ResultLockedError), 0, "5")
	expectValue(t, newLock(c, key, 0, 0).LockShow().want(slock.ResultUnownError), slock.DataNumber, string(le64(54)))
	hb.send(slock.TypeLock, 0x02, rec(slock.DataSet, 0, []byte("q"))).want(slock.ResultLockedError)

	// PROCESS_FIRST_OR_LAST: a second holder's record does not apply.
	second := newLock(c, key, 0, 60)
	second.count, hb.count = 1, 1
	hb.LockUpdate().want(slock.ResultLockedError)
	expectValue(t, second.send(slock.TypeLock, 0, rec(slock.DataSet, slock.DataFirstOrLast, []byte("skipped"))).want(slock.ResultOK), 0, "q")
	expectValue(t, newLock(b, key, 0, 0).LockShow().want(slock.ResultUnownError), 0, "q")
	second.Unlock().want(slock.ResultOK)
	hb.count = 0
	hb.LockUpdate().want(slock.ResultLockedError)

	// A failed command's record is not applied; the reply carries the current value.
	expectValue(t, newLock(c, key, 0, 60).send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("no"))).want(slock.ResultTimeout), 0, "q")
	// A queued request's record applies at its grant, whose reply shows the value just
	// before it.
	wq := newLock(c, key, 5, 60).send(slock.TypeLock, 0, rec(slock.DataAppend, 0, []byte("!")))
	wq.none(30 * time.Millisecond)
	expectValue(t, hb.Unlock().want(slock.ResultOK), 0, "q")
	expectValue(t, wq.want(slock.ResultOK), 0, "q")
	expectValue(t, newLock(b, key, 0, 0).LockShow().want(slock.ResultUnownError), 0, "q!")

	// A SET by a probe on a free key goes with the key at once.
	k2 := key16("data-probe")
	newLock(a, k2, 0, 0).send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("gone"))).want(slock.ResultOK)
	expectNoValue(t, newLock(a, k2, 0, 0).Lock().want(slock.ResultOK))

	// An EXPRIED push carries the value while the key lives on, none for the last holder.
	k3 := key16("data-expiry")
	first := newLock(a, k3, 5, ms(50))
	first.count = 1
	first.send(slock.TypeLock, 0, rec(slock.DataSet, 0, []byte("kept"))).want(slock.ResultOK)
	last := newLock(b, k3, 5, ms(150))
	last.count = 1
	last.Lock().want(slock.ResultOK)
	expectValue(t, a.push("expiry of the first holder"), 0, "kept")
	expectNoValue(t, b.push("expiry of the last holder"))
	ts.healthy(t)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSlockExecute(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	inner := func(typ slock.Type, db uint8, key, lockID, rid [16]byte, expried uint32) []byte {
		f := lockFrame(typ, 0, db, key, lockID, 5, expried, 0, 0, nil)
		f.RequestID = rid
		return slock.AppendLockRequest(nil, f)
	}
	exec := func(stage uint8, frame []byte) []byte {
		return slock.AppendDataRecord(nil, slock.DataExecute, stage, 0, nil, frame)
	}
	k1, k2, k3, k4, k5 := key16("ex-1"), key16("ex-2"), key16("ex-3"), key16("ex-4"), key16("ex-5")

	// Stage 0: the inner Lock runs at once; its reply has the inner RequestId.
	x, i1 := a.id(), a.id()
	io1 := op{c: a, rid: i1, ch: a.expect(i1, 1), what: "inner lock"}
	newLock(a, k1, 5, 60).send(slock.TypeLock, 0, exec(slock.StageCurrent, inner(slock.TypeLock, 0, k2, x, i1, 60))).want(slock.ResultOK)
	expectLock(t, io1.want(slock.ResultOK), slock.TypeLock, x, k2, 1, 1)
	newLock(b, k2, 0, 60).Lock().want(slock.ResultTimeout)
	// EXECUTE does not change the carrying key's value.
	expectNoValue(t, newLock(b, k1, 0, 0).LockShow().want(slock.ResultUnownError))
	// The store hands EXECUTE values back as they came; the loop runs only a Lock or Unlock
	// frame of the carrying command's DbId, and ignores anything else (no reply, no lock).
	kb := key16("ex-bad")
	for i, bad := range [][]byte{
		inner(slock.TypeLock, 3, kb, a.id(), a.id(), 60),                       // another DbId
		inner(slock.TypeLock, 0, kb, a.id(), a.id(), 60)[:63],                  // short
		append([]byte{0x56, 0x01, byte(slock.TypeState)}, make([]byte, 61)...), // not a lock
	} {
		newLock(a, key16("ex-carrier"+string(rune('a'+i))), 5, 60).send(slock.TypeLock, 0, exec(slock.StageCurrent, bad)).want(slock.ResultOK)
	}
	a.noPush(100 * time.Millisecond)
	newLock(b, kb, 0, 60).Lock().want(slock.ResultOK)

	// Stage 1: runs when the carrying holder is released, on the connection that owns it,
	// even when someone else's Unlock releases it.
	i2 := a.id()
	io2 := op{c: a, rid: i2, ch: a.expect(i2, 1), what: "inner unlock at release"}
	newLock(a, k3, 5, 60).send(slock.TypeLock, 0, exec(slock.StageUnlock, inner(slock.TypeUnlock, 0, k2, x, i2, 60))).want(slock.ResultOK)
	io2.none(50 * time.Millisecond)
	(&sLock{c: b, key: k3, timeout: 5, expried: 60}).UnlockHead().want(slock.ResultOK)
	expectLock(t, io2.want(slock.ResultOK), slock.TypeUnlock, x, k2, 0, 0)
	newLock(b, k2, 0, 60).Lock().want(slock.ResultOK)

	// Stage 3: runs when the carrying holder expires; a stage-3 EXECUTE of a holder that is
	// unlocked is dropped.
	y, i3, i4 := a.id(), a.id(), a.id()
	io3 := op{c: a, rid: i3, ch: a.expect(i3, 1), what: "inner lock at expiry"}
	io4 := op{c: a, rid: i4, ch: a.expect(i4, 1), what: "dropped inner lock"}
	newLock(a, k4, 5, ms(80)).send(slock.TypeLock, 0, exec(slock.StageExpried, inner(slock.TypeLock, 0, k5, y, i3, 60))).want(slock.ResultOK)
	dropped := newLock(a, key16("ex-6"), 5, 60)
	dropped.send(slock.TypeLock, 0, exec(slock.StageExpried, inner(slock.TypeLock, 0, k5, a.id(), i4, 60))).want(slock.ResultOK)
	dropped.Unlock().want(slock.ResultOK)
	eq(t, "push", a.push("expiry of the carrier").Result, slock.ResultExpried)
	expectLock(t, io3.want(slock.ResultOK), slock.TypeLock, y, k5, 1, 1)
	io4.none(50 * time.Millisecond)

	// An inner command for another DbId is dropped.
	i5 := a.id()
	io5 := op{c: a, rid: i5, ch: a.expect(i5, 1), what: "inner lock in another db"}
	newLock(a, key16("ex-7"), 5, 60).send(slock.TypeLock, 0, exec(slock.StageCurrent, inner(slock.TypeLock, 1, k5, a.id(), i5, 60))).want(slock.ResultOK)
	io5.none(100 * time.Millisecond)
	eq(t, "db 1 exists", a.state(1).DBState, 0)
	ts.healthy(t)
}
