package store_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// effectOf returns the value key "k" has after holder "a", which set it to
// start (nil: no value), updates it with record r; it checks that the
// update's reply carries start as the value before.
func effectOf(t *testing.T, start, r []byte) []byte {
	t.Helper()
	h := newLkh(t, store.LocksConfig{})
	l := with(lockc(1, "a", "k"), func(c *wc) { c.Expried = 100; c.Data = start })
	h.one(1, l, rp{o: 1, req: 1, id: "a", key: "k", lc: 1, lr: 1})
	before := start
	if start != nil && start[4]&0x3f == store.DataUnset {
		before = nil
	}
	h.one(1, with(l, func(c *wc) { c.Flag = 0x02; c.Data = r }), rp{o: 1, req: 1, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1, v: before})
	rs := h.do(2, with(lockc(2, "b", "k"), func(c *wc) { c.Flag = 0x01 }))
	if len(rs) != 1 || rs[0].Result != store.LockUnownError {
		t.Fatalf("show: %v", rs)
	}
	return rs[0].Value
}

// TestDataEffects checks the stored record after each data command, byte
// by byte (§3.4).
func TestDataEffects(t *testing.T) {
	props := []byte{1, 3, 0, 'k', 'e', 'y', 9, 0, 0} // KEY "key", and an unknown empty property
	str := rec(store.DataSet, 0, []byte("5"))
	arr := rec(store.DataSet, 0x02|0x08, elems("a", "", "bc"))
	withProps := recp(store.DataSet, 0x80, props, []byte("xy"))
	for _, c := range []struct {
		name            string
		start, cmd, out []byte
	}{
		{"set", nil, withProps, withProps},
		{"set replaces", str, rec(store.DataSet, 0x44, []byte("new")), rec(0, 0x44, []byte("new"))},
		{"set empty", str, rec(store.DataSet, 0), rec(0, 0)},
		{"unset no value", nil, rec(store.DataUnset, 0), nil},
		{"unset", str, rec(store.DataUnset, 0), nil},
		{"unset then incr", rec(store.DataUnset, 0), rec(store.DataIncr, 0, i64(4)), rec(0, 0x01, i64(4))},
		{"incr no value", nil, recp(store.DataIncr, 0, props, i64(-3)), recp(0, 0x01, props, i64(-3))},
		{"incr a string", str, rec(store.DataIncr, 0x04, i64(2)), rec(0, 0x05, i64(55))},
		{"incr keeps the request's properties", withProps, rec(store.DataIncr, 0, i64(1)), rec(0, 0x01, i64('x'|'y'<<8+1))},
		{"incr wraps", rec(0, 0x01, i64(math.MaxInt64)), rec(store.DataIncr, 0, i64(1)), rec(0, 0x01, i64(math.MinInt64))},
		{"incr of a short delta is ignored", str, rec(store.DataIncr, 0, []byte{1, 0, 0, 0}), str},
		{"incr of a long delta is ignored", str, rec(store.DataIncr, 0, append(i64(1), 0)), str},
		{"append no value", nil, recp(store.DataAppend, 0x02, props, []byte("ab")), recp(0, 0x02, props, []byte("ab"))},
		{"append", withProps, rec(store.DataAppend, 0x01, []byte("z")), recp(0, 0x80, props, []byte("xyz"))},
		{"append keeps the type bits", rec(0, 0x01, i64(1)), rec(store.DataAppend, 0, []byte("!")), rec(0, 0x01, i64(1), []byte("!"))},
		{"shift", withProps, rec(store.DataShift, 0, u32(1)), recp(0, 0x80, props, []byte("y"))},
		{"shift of a 1-byte count", str, rec(store.DataShift, 0, []byte{1}), rec(0, 0)},
		{"shift everything", str, rec(store.DataShift, 0, u32(1)), rec(0, 0)},
		{"shift past the end clamps", withProps, rec(store.DataShift, 0, u32(1000)), recp(0, 0x80, props)},
		{"shift 0", str, rec(store.DataShift, 0, u32(0)), str},
		{"shift no value", nil, rec(store.DataShift, 0, u32(1)), nil},
		{"push no value", nil, recp(store.DataPush, 0xFF&^0x10, props, []byte("e")), recp(0, 0xFA, props, elems("e"))},
		{"push on a string replaces it", withProps, rec(store.DataPush, 0x01, []byte("e")), rec(0, 0x02, elems("e"))},
		{"push", arr, rec(store.DataPush, 0x01, []byte("de")), rec(0, 0x0A, elems("a", "", "bc", "de"))},
		{"push empty", arr, rec(store.DataPush, 0, nil), rec(0, 0x0A, elems("a", "", "bc", ""))},
		{"pop", arr, rec(store.DataPop, 0, u32(1)), rec(0, 0x0A, elems("bc"))},
		{"pop skips empty elements", rec(0, 0x02, elems("", "a", "", "b", "c", "")), rec(store.DataPop, 0, u32(2)), rec(0, 0x02, elems("c"))},
		{"pop all", arr, rec(store.DataPop, 0, u32(2)), rec(0, 0x0A)},
		{"pop more than all", arr, rec(store.DataPop, 0, u32(9)), rec(0, 0x0A)},
		{"pop 0", arr, rec(store.DataPop, 0, u32(0)), arr},
		{"pop a string", str, rec(store.DataPop, 0, u32(1)), str},
		{"pop no value", nil, rec(store.DataPop, 0, u32(1)), nil},
		{"pop a truncated array", rec(0, 0x02, elems("a", "b"), []byte{9, 0}), rec(store.DataPop, 0, u32(1)), rec(0, 0x02, elems("b"))},
		{"stage 1 SET is ignored", str, rec(store.DataSet|0x40, 0, []byte("no")), str},
		{"stage 3 INCR is ignored", str, rec(store.DataIncr|0xC0, 0, i64(1)), str},
		{"unknown command", str, rec(9, 0, []byte("no")), str},
		{"bad property area", str, []byte{6, 0, 0, 0, 0, 0x10, 9, 0, 'a', 'b'}, str},
		{"execute does not change the value", str, rec(store.DataExecute, 0, frame(lockc(9, "i", "k"))), str},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := effectOf(t, c.start, c.cmd); !bytes.Equal(got, c.out) || (got == nil) != (c.out == nil) {
				t.Fatalf("value after\n  %x\n  %x\nis %x, want %x", c.start, c.cmd, got, c.out)
			}
		})
	}
}

// TestPushPopQueue: PUSH and POP form a FIFO queue.
func TestPushPopQueue(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	l := with(lockc(1, "q", "q"), func(c *wc) { c.Expried, c.ExpriedFlag = 0xFFFF, 0x4000 })
	h.do(1, l)
	up := func(r []byte) []byte {
		t.Helper()
		rs := h.do(1, with(l, func(c *wc) { c.Flag = 0x02; c.Data = r }))
		return rs[0].Value
	}
	for _, e := range []string{"1", "22", "", "333"} {
		up(rec(store.DataPush, 0, []byte(e)))
	}
	if got := up(rec(store.DataPop, 0, u32(1))); !bytes.Equal(got, rec(0, 0x02, elems("1", "22", "", "333"))) {
		t.Fatalf("before the first POP: %x", got)
	}
	if got := up(rec(store.DataPop, 0, u32(1))); !bytes.Equal(got, rec(0, 0x02, elems("22", "333"))) {
		t.Fatalf("before the second POP: %x", got)
	}
	if got := up(rec(store.DataPush, 0, []byte("4"))); !bytes.Equal(got, rec(0, 0x02, elems("333"))) {
		t.Fatalf("before the PUSH: %x", got)
	}
	if got := up(rec(store.DataPop, 0, u32(5))); !bytes.Equal(got, rec(0, 0x02, elems("333", "4"))) {
		t.Fatalf("before the last POP: %x", got)
	}
	if got := up(nil); !bytes.Equal(got, rec(0, 0x02)) {
		t.Fatalf("after the last POP: %x", got)
	}
}

// TestPipeline: every non-EXECUTE element applies to the value before the
// PIPELINE, so only the last one that changes it counts; EXECUTE elements
// run; parsing stops at an overrunning element (§3.7).
func TestPipeline(t *testing.T) {
	zero := rec(store.DataSet, 0, []byte("0"))
	pipe := func(flag byte, els ...[]byte) []byte { return rec(store.DataPipeline, flag, els...) }
	appA, appB := rec(store.DataAppend, 0, []byte("a")), rec(store.DataAppend, 0, []byte("b"))
	cases := []struct {
		name       string
		start, cmd []byte
		out        []byte
	}{
		{"last wins", zero, pipe(0, appA, appB), rec(0, 0, []byte("0b"))},
		{"no-op elements do not count", zero, pipe(0, appA, rec(store.DataShift, 0, u32(0)), rec(store.DataUnset|0x40, 0)), rec(0, 0, []byte("0a"))},
		{"unset last", zero, pipe(0, appA, rec(store.DataUnset, 0)), nil},
		{"nested", zero, pipe(0, appB, pipe(0, appA)), rec(0, 0, []byte("0a"))},
		{"overrun stops", zero, pipe(0, appA, []byte{200, 0, 0, 0, 3, 0}, appB), rec(0, 0, []byte("0a"))},
		{"malformed element skipped", zero, pipe(0, appA, []byte{1, 0, 0, 0, 3}), rec(0, 0, []byte("0a"))},
		{"stage 1 pipeline ignored", zero, rec(store.DataPipeline|0x40, 0, appA), zero},
		{"first-or-last element", zero, pipe(0, appA, rec(store.DataAppend, 0x20, []byte("b"))), rec(0, 0, []byte("0b"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := effectOf(t, c.start, c.cmd); !bytes.Equal(got, c.out) {
				t.Fatalf("value after %x: %x, want %x", c.cmd, got, c.out)
			}
		})
	}
	t.Run("execute elements", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		inner1, inner2 := frame(lockc(7, "i", "x")), frame(with(lockc(8, "j", "y"), func(c *wc) { c.Data = setV }))
		p := pipe(0, rec(store.DataExecute, 0, inner1), appA, rec(store.DataExecute, 0, inner2, []byte("trailing")),
			rec(store.DataExecute, 0, frame(with(lockc(9, "k", "z"), func(c *wc) { c.DB = 1 }))))
		h.one(3, with(lockc(1, "a", "k"), func(c *wc) { c.Data = p }), rp{o: 3, req: 1, id: "a", key: "k", lc: 1, lr: 1})
		// Each EXECUTE's value comes back as it was sent: opaque to the store (the loop
		// decodes it and ignores what is not a Lock or Unlock of the key's DbId).
		if len(h.execs) != 3 || h.execs[0].Owner != 3 || !bytes.Equal(h.execs[0].Frame, inner1) ||
			!bytes.Equal(h.execs[1].Frame, append(bytes.Clone(inner2), "trailing"...)) || h.execs[2].DB != 0 {
			t.Fatalf("execs %+v", h.execs)
		}
	})
}

// TestFirstOrLast: data flag 0x20 applies a Lock's record only when the key
// has exactly one level, an Unlock's only when it is left with none and no
// waiters (§3.5).
func TestFirstOrLast(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	fol := func(r []byte) []byte { r = bytes.Clone(r); r[5] |= 0x20; return r }
	first := fol(rec(store.DataSet, 0, []byte("1")))
	second := fol(rec(store.DataSet, 0, []byte("2")))
	sh := func(l store.LockCommand) store.LockCommand {
		return with(l, func(c *wc) { c.Count = 3; c.Rcount = 3 })
	}
	h.one(1, sh(with(lockc(1, "a", "k"), func(c *wc) { c.Data = first })), rp{o: 1, req: 1, id: "a", key: "k", lc: 1, c: 3, lr: 1, rc: 3})
	h.one(2, sh(with(lockc(2, "b", "k"), func(c *wc) { c.Data = second })), rp{o: 2, req: 2, id: "b", key: "k", lc: 2, c: 3, lr: 1, rc: 3, v: first})
	// A reentry never applies one.
	h.one(1, sh(with(lockc(3, "a", "k"), func(c *wc) { c.Data = second })), rp{o: 1, req: 3, id: "a", key: "k", lc: 3, c: 3, lr: 2, rc: 3, v: first})
	// A probe on a free key never does either.
	h.one(3, with(lockc(4, "p", "free"), func(c *wc) { c.Expried = 0; c.Data = first }), rp{o: 3, req: 4, id: "p", key: "free"})

	// On Unlock: an EXECUTE (visible, unlike a value the key then loses)
	// runs only on the release that leaves the key empty.
	inner := frame(lockc(9, "i", "other"))
	ex := fol(rec(store.DataExecute, 0, inner))
	un := func(req uint16, id string, o store.Owner, lc uint16, lr uint8) {
		t.Helper()
		h.one(o, with(unlockc(req, id, "k"), func(c *wc) { c.Data = ex; c.Rcount = 1 }),
			rp{o: o, t: 2, req: int(req), id: id, key: "k", lc: lc, lr: lr, rc: 1, v: first})
	}
	un(5, "a", 1, 2, 1)
	un(6, "b", 2, 1, 0)
	if len(h.execs) != 0 {
		t.Fatalf("EXECUTE ran with levels left: %+v", h.execs)
	}
	un(7, "a", 1, 0, 0)
	if len(h.execs) != 1 || !bytes.Equal(h.execs[0].Frame, inner) || h.execs[0].Owner != 1 {
		t.Fatalf("execs %+v", h.execs)
	}
}

// TestExecute: EXECUTE stage 0 runs at once, stage 1 on a full release by
// an Unlock, stage 3 on expiry, stage 2 never (§3.6). The EXECUTE value is
// handed back as sent, with the DbId of the command that carried it: the
// caller drops what is malformed or of another DbId.
func TestExecute(t *testing.T) {
	inner := frame(with(lockc(9, "i", "other"), func(c *wc) { c.DB = 2 }))
	innerData := frame(with(lockc(10, "j", "other"), func(c *wc) { c.DB = 2; c.Data = setV }))
	ex := func(stage byte, f []byte, more ...[]byte) []byte {
		return rec(store.DataExecute|stage<<6, 0, append([][]byte{f}, more...)...)
	}
	lk := func(req uint16, data []byte) store.LockCommand {
		return with(lockc(req, "a", "k"), func(c *wc) { c.DB = 2; c.Rcount = 5; c.Expried = 3; c.Data = data })
	}
	execs := func(h *lkh, want ...[]byte) {
		t := h.t
		t.Helper()
		if len(h.execs) != len(want) {
			t.Fatalf("%d execs, want %d: %+v", len(h.execs), len(want), h.execs)
		}
		for i, w := range want {
			if e := h.execs[i]; e.Owner != 1 || e.DB != 2 || !bytes.Equal(e.Frame, w) {
				t.Fatalf("exec %d: %+v, want frame %x", i, e, w)
			}

		}
	}
	t.Run("stage 0", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, ex(0, innerData, []byte("extra"))))
		execs(h, append(bytes.Clone(innerData), "extra"...))
		for _, bad := range [][]byte{
			frame(lockc(9, "i", "other")), // db 0
			inner[:63],                    // short
			innerData[:len(innerData)-1],  // truncated record
			func() []byte { b := bytes.Clone(inner); b[2] = 3; return b }(), // type STATE
		} {
			h.do(1, lk(2, ex(0, bad)))
			execs(h, bad) // opaque: the caller's decoder refuses it
		}
	})
	t.Run("stage 1 on unlock", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, ex(1, inner)))
		h.do(1, lk(2, ex(1, innerData))) // a reentry adds its own
		h.do(1, lk(3, ex(2, inner)))     // stage 2 never fires
		h.do(1, with(unlockc(4, "a", "k"), func(c *wc) { c.DB = 2; c.Rcount = 1 }))
		execs(h)
		h.do(1, with(unlockc(5, "a", "k"), func(c *wc) { c.DB = 2; c.Rcount = 1 }))
		execs(h)
		h.do(1, with(unlockc(6, "a", "k"), func(c *wc) { c.DB = 2; c.Rcount = 1 }))
		execs(h, inner, innerData)
	})
	t.Run("stage 3 on expiry", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, ex(3, inner)))
		h.do(1, lk(2, ex(1, innerData)))
		h.advance(5 * time.Second)
		execs(h, inner)
	})
	t.Run("update discards", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, ex(1, inner)))
		h.do(1, with(lk(2, ex(1, innerData)), func(c *wc) { c.Flag = 0x02 }))
		h.do(1, with(unlockc(3, "a", "k"), func(c *wc) { c.DB = 2 }))
		execs(h, innerData)
	})
	t.Run("dropped when the latest frame had no data", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, ex(3, inner)))
		h.do(1, lk(2, nil))
		h.advance(5 * time.Second)
		execs(h)
	})
	t.Run("unlock attaches and runs", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(1, lk(1, nil))
		h.do(1, with(unlockc(2, "a", "k"), func(c *wc) { c.DB = 2; c.Data = ex(1, inner) }))
		execs(h, inner)
	})
	t.Run("first-or-last stage 1 with waiters", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		r := ex(1, inner)
		r[5] = 0x20
		h.do(1, lk(1, r))
		h.do(2, with(lockc(2, "b", "k"), func(c *wc) { c.DB = 2 }))
		h.do(1, with(unlockc(3, "a", "k"), func(c *wc) { c.DB = 2 }))
		execs(h)
	})
	t.Run("queued request's stage 0 runs at grant, for its owner", func(t *testing.T) {
		h := newLkh(t, store.LocksConfig{})
		h.do(2, with(lockc(1, "b", "k"), func(c *wc) { c.DB = 2 }))
		h.do(1, lk(2, ex(0, inner)))
		execs(h)
		h.do(2, with(unlockc(3, "b", "k"), func(c *wc) { c.DB = 2 }))
		execs(h, inner)
	})
}

// TestDataOnFailure: a failed command leaves the value alone and carries
// it as it is (§3.2, §3.3).
func TestDataOnFailure(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	holdV(h, nil)
	h.one(2, with(lockc(1, "b", "k"), func(c *wc) { c.Timeout = 0; c.Data = setW }), rp{o: 2, req: 1, res: store.LockTimeout, id: "b", key: "k", lc: 1, v: setV})
	h.one(2, with(unlockc(2, "b", "k"), func(c *wc) { c.Data = setW }), rp{o: 2, t: 2, req: 2, res: store.LockUnownError, id: "b", key: "k", lc: 1, v: setV})
	h.one(2, with(lockc(3, "b", "k"), func(c *wc) { c.Data = setW }))
	expect(t, "b times out", h.advance(6*time.Second), rp{o: 2, req: 3, res: store.LockTimeout, id: "b", key: "k", lc: 1, v: setV})
	// INCR callers add the delta to the old value.
	h.one(1, with(lockc(4, "a", "k"), func(c *wc) { c.Flag = 0x02; c.Data = rec(store.DataIncr, 0, i64(5)) }),
		rp{o: 1, req: 4, res: store.LockLockedError, id: "a", key: "k", lc: 1, lr: 1, v: setV})
	got := h.do(1, with(lockc(5, "a", "k"), func(c *wc) { c.Flag = 0x02 }))
	if n := int64(binary.LittleEndian.Uint64(got[0].Value[6:])); n != 'v'+5 {
		t.Fatalf("INCR of \"v\" by 5 = %d", n)
	}
}
