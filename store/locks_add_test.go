package store_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// kvSet is the Lock of a Redis SET of key to value: LockId = key, Update, a SET record
// with the key as its KEY property, never expiring.
func kvSet(req uint16, key string, value []byte) store.LockCommand {
	return wc{LockCommand: store.LockCommand{Kind: 1, RequestID: rid(req), LockID: id16(key), Key: id16(key), Data: recp(0, 0, keyProp(key), value)}, Flag: 0x02 | 0x20, Expried: 0x7FFF, ExpriedFlag: 0x4000 | 0x0100 | 0x2000}.cmd()
}

// kvIncr is INCRBY key delta as the text side builds it: a SET of a NUMBER 0 with Add.
func kvIncr(req uint16, key string, delta int64) store.LockCommand {
	c := kvSet(req, key, i64(0))
	c.Data = recp(0, 0x01, keyProp(key), i64(0))
	c = with(c, func(c *wc) { c.Expried = 0xFFFF })
	c.Add, c.Delta = true, delta
	return c
}

func keyProp(key string) []byte {
	return append([]byte{1}, append(binary.LittleEndian.AppendUint16(nil, uint16(len(key))), key...)...)
}

// number reads a reply's value record as a NUMBER.
func number(t *testing.T, r store.LockReply) int64 {
	t.Helper()
	v := r.Value
	if len(v) < 6 || v[5]&0x01 == 0 {
		t.Fatalf("reply value %x is not a NUMBER record", v)
	}
	return int64(binary.LittleEndian.Uint64(v[len(v)-8:]))
}

// TestLocksAdd: an Add runs Redis's INCRBY on the key's value in one call: no value is 0,
// numbers and decimal strings add, anything else and overflows are refused unchanged, and
// the reply carries the new value.
func TestLocksAdd(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	one := func(c store.LockCommand, result store.LockResult) store.LockReply {
		t.Helper()
		rs := h.do(1, c)
		if len(rs) != 1 || rs[0].Result != result {
			t.Fatalf("%s: replies %v, want one with result %d", show(c), rs, result)
		}
		return rs[0]
	}
	if n := number(t, one(kvIncr(1, "c", 1), store.LockOK)); n != 1 {
		t.Fatalf("INCR of nothing: %d", n)
	}
	if n := number(t, one(kvIncr(2, "c", 41), store.LockLockedError)); n != 42 {
		t.Fatalf("INCRBY 41: %d", n)
	}
	if n := number(t, one(kvIncr(3, "c", -50), store.LockLockedError)); n != -8 {
		t.Fatalf("DECRBY 50: %d", n)
	}
	one(kvSet(4, "s", []byte("100")), store.LockOK)
	if n := number(t, one(kvIncr(5, "s", 1), store.LockLockedError)); n != 101 {
		t.Fatalf("INCR of \"100\": %d", n)
	}
	for i, v := range []string{"abc", "", "01", "+1", " 1", "-0", "1.5", "9223372036854775808"} {
		if rs := h.do(1, kvSet(uint16(10+i), "bad", []byte(v))); len(rs) != 1 || rs[0].Result > store.LockLockedError {
			t.Fatalf("SET bad %q: %v", v, rs)
		}
		one(kvIncr(uint16(30+i), "bad", 1), store.LockNotInteger)
		if got := h.l.Value(0, id16("bad")); string(got[len(got)-len(v):]) != v {
			t.Fatalf("%q changed by a refused INCR: %x", v, got)
		}
	}
	one(kvSet(50, "big", []byte("9223372036854775806")), store.LockOK)
	if n := number(t, one(kvIncr(51, "big", 1), store.LockLockedError)); n != 1<<63-1 {
		t.Fatalf("INCR to max: %d", n)
	}
	one(kvIncr(52, "big", 1), store.LockOverflow)
	one(kvIncr(53, "c", -1<<63), store.LockOverflow)
	// A key held by another LockId: the Lock itself times out at once (an Add never waits).
	one(with(lockc(60, "other", "held"), func(c *wc) { c.Expried = 60 }), store.LockOK)
	one(kvIncr(61, "held", 1), store.LockTimeout)
	if h.l.Value(0, id16("held")) != nil {
		t.Fatal("a refused INCR left a value")
	}
}

// TestLocksWatch: a watched key's version changes when its value is set, incremented,
// deleted, expired or flushed, and stays while only other keys change.
func TestLocksWatch(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	k := id16("w")
	v := h.l.Watch(0, k)
	same := func(what string) {
		t.Helper()
		if got := h.l.WatchVersion(0, k); got != v {
			t.Fatalf("%s changed the version", what)
		}
	}
	changed := func(what string) {
		t.Helper()
		got := h.l.WatchVersion(0, k)
		if got == v {
			t.Fatalf("%s left the version as it was", what)
		}
		v = got
	}
	h.do(1, kvSet(1, "other", []byte("x")))
	same("SET of another key")
	h.do(1, kvSet(2, "w", []byte("x")))
	changed("SET")
	h.do(1, kvSet(3, "w", []byte("x")))
	changed("SET of the same value")
	h.do(1, kvIncr(4, "w", 1))
	same("a refused INCR")
	h.do(1, kvSet(5, "w", []byte("1")))
	changed("SET")
	h.do(1, kvIncr(6, "w", 1))
	changed("INCR")
	h.do(1, with(unlockc(7, "w", "w"), func(c *wc) { c.Flag = 0x01 }))
	changed("DEL")
	h.do(1, with(kvSet(8, "w", []byte("e")), func(c *wc) { c.Expried, c.ExpriedFlag = 100, 0x0400 }))
	changed("SET PX 100")
	h.advance(200 * time.Millisecond)
	changed("expiry")
	h.do(1, kvSet(9, "w", []byte("f")))
	changed("SET")
	rs, _, _ := h.l.Flush(0, h.now, nil, nil)
	_ = rs
	changed("FLUSHDB")
	h.l.Flush(0, h.now, nil, nil)
	same("FLUSHDB of nothing")
	if h.l.Watched() != 1 {
		t.Fatalf("%d keys watched", h.l.Watched())
	}
	v2 := h.l.Watch(0, k)
	h.l.Unwatch(0, k)
	if h.l.Watched() != 1 || v2 != v {
		t.Fatal("a second watch")
	}
	h.l.Unwatch(0, k)
	if h.l.Watched() != 0 {
		t.Fatal("watch not dropped")
	}
}
