package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// kvFlags are the ExpriedFlag bits of a Redis key/value lock: never expires, persist at
// once, keep the holder's counters on Update.
const kvFlags = 0x4000 | 0x0100 | 0x2000

// hashc is the Lock a hash write runs as: the Update APPEND uses, its record the
// template of a new hash (KV flag, the key's name as property).
func hashc(req uint16, key string) store.LockCommand {
	return wc{LockCommand: store.LockCommand{Kind: 1, RequestID: rid(req), LockID: id16(key), Key: id16(key), Data: recp(0, 0x04, keyProp(key))}, Flag: 0x02 | 0x20, Expried: 0xFFFF, ExpriedFlag: kvFlags}.cmd()
}

// setc is SET key value as the text side runs it.
func setc(req uint16, key, value string) store.LockCommand {
	return wc{LockCommand: store.LockCommand{Kind: 1, RequestID: rid(req), LockID: id16(key), Key: id16(key), Data: recp(0, 0, keyProp(key), []byte(value))}, Flag: 0x02 | 0x20, Expried: 0x7FFF, ExpriedFlag: kvFlags}.cmd()
}

// pairs is a hash value: field, value, field, value, ...
func pairs(fv ...string) []byte {
	var b []byte
	for _, s := range fv {
		b = append(u32At(b, uint32(len(s))), s...)
	}
	return b
}

// hashRec is the record a hash of key with the pairs fv is stored as.
func hashRec(key string, fv ...string) []byte { return recp(0, 0x04, keyProp(key), pairs(fv...)) }

func hset(args ...string) *store.HashOp { return &store.HashOp{Kind: store.HashSet, Args: bargs(args)} }
func hdel(args ...string) *store.HashOp { return &store.HashOp{Kind: store.HashDel, Args: bargs(args)} }
func hincr(f string, d int64) *store.HashOp {
	return &store.HashOp{Kind: store.HashIncr, Args: bargs([]string{f}), Delta: d}
}

func bargs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// hash runs op on key from owner 1 and fails unless it returns want and err, and
// (without an error) answers the sender with result res and nothing else.
func (h *lkh) hash(req uint16, key string, op *store.HashOp, want int64, wantErr error, res store.LockResult) {
	h.t.Helper()
	c := hashc(req, key)
	rs, ex, n, err := h.l.Hash(1, &c, op, h.now, nil, nil)
	h.check(fmt.Sprintf("Hash(%s, %+v)", key, op))
	what := fmt.Sprintf("Hash %s %d %q", key, op.Kind, op.Args)
	switch {
	case wantErr != nil:
		if !errors.Is(err, wantErr) || len(rs) != 0 || len(ex) != 0 {
			h.t.Fatalf("%s: err %v, %d replies; want %v and none", what, err, len(rs), wantErr)
		}
		return
	case err != nil:
		h.t.Fatalf("%s: %v", what, err)
	case n != want:
		h.t.Fatalf("%s: result %d, want %d", what, n, want)
	}
	if len(rs) != 1 || rs[0].Owner != 1 || rs[0].RequestID != rid(req) || rs[0].Result != res {
		var b strings.Builder
		for _, r := range rs {
			b.WriteString(showReply(r) + "\n")
		}
		h.t.Fatalf("%s: replies\n%swant one with result %d", what, b.String(), res)
	}
}

// value fails unless key's value record in db 0 is want (nil: none).
func (h *lkh) value(key string, want []byte) {
	h.t.Helper()
	got := h.l.Value(0, id16(key))
	if !bytes.Equal(got, want) || (got == nil) != (want == nil) {
		h.t.Fatalf("value of %s = %x, want %x", key, got, want)
	}
}

func TestHashWrites(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.hash(1, "g", hset("a", "1", "b", "2"), 2, nil, store.LockOK)
	h.value("g", hashRec("g", "a", "1", "b", "2"))
	// Existing fields change in place; a field named twice counts once and keeps its last
	// value, in the place of its first mention.
	h.hash(2, "g", hset("a", "3", "c", "4", "a", "5", "d", "6", "c", "7"), 2, nil, store.LockLockedError)
	h.value("g", hashRec("g", "a", "5", "b", "2", "c", "7", "d", "6"))
	h.hash(3, "g", hincr("b", 10), 12, nil, store.LockLockedError)
	h.hash(4, "g", hincr("z", -3), -3, nil, store.LockLockedError)
	h.value("g", hashRec("g", "a", "5", "b", "12", "c", "7", "d", "6", "z", "-3"))
	h.hash(5, "g", hdel("c", "nope", "c"), 1, nil, store.LockLockedError)
	h.value("g", hashRec("g", "a", "5", "b", "12", "d", "6", "z", "-3"))
	// A delete of nothing runs nothing but is answered.
	h.hash(6, "g", hdel("nope"), 0, nil, store.LockOK)
	h.hash(7, "none", hdel("a"), 0, nil, store.LockOK)
	h.value("none", nil)
	if n := h.l.ValueCount(0); n != 1 {
		t.Fatalf("ValueCount = %d, want 1", n)
	}
	// Empty fields and values are fields and values.
	h.hash(8, "g", hset("", ""), 1, nil, store.LockLockedError)
	h.hash(9, "g", hincr("", 7), 0, store.ErrHashNotInteger, 0)
	// The last field deleted deletes the key.
	h.hash(10, "g", hdel("a", "b", "d", "z", ""), 5, nil, store.LockOK)
	h.value("g", nil)
	if n, ttl := h.l.ValueCount(0), h.l.TTL(0, id16("g"), h.now); n != 0 || ttl != -2 {
		t.Fatalf("after the last HDEL: ValueCount %d, TTL %d; want 0, -2 (no key)", n, ttl)
	}
	// Malformed writes are refused.
	h.hash(11, "g", hset("a"), 0, store.ErrHashOp, 0)
	h.hash(12, "g", &store.HashOp{Kind: store.HashDel}, 0, store.ErrHashOp, 0)
	h.hash(13, "g", &store.HashOp{Kind: store.HashIncr, Args: bargs([]string{"a", "b"})}, 0, store.ErrHashOp, 0)
	h.hash(14, "g", &store.HashOp{Kind: 9, Args: bargs([]string{"a"})}, 0, store.ErrHashOp, 0)
	h.value("g", nil)
}

func TestHashIncrErrors(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.hash(1, "g", hset("max", "9223372036854775807", "min", "-9223372036854775808", "s", "abc",
		"z", "007", "m0", "-0", "sp", " 1", "plus", "+1", "big", "99999999999999999999", "e", ""), 9, nil, store.LockOK)
	before := bytes.Clone(h.l.Value(0, id16("g")))
	h.hash(2, "g", hincr("max", 1), 0, store.ErrHashOverflow, 0)
	h.hash(3, "g", hincr("min", -1), 0, store.ErrHashOverflow, 0)
	for _, f := range []string{"s", "z", "m0", "sp", "plus", "big", "e"} {
		h.hash(4, "g", hincr(f, 1), 0, store.ErrHashNotInteger, 0)
	}
	h.value("g", before)
	h.hash(5, "g", hincr("max", -1), 9223372036854775806, nil, store.LockLockedError)
	h.hash(6, "g", hincr("min", 1), -9223372036854775807, nil, store.LockLockedError)
	h.hash(7, "g", hincr("min", -9223372036854775807+0), 0, store.ErrHashOverflow, 0)
	h.hash(8, "g", hincr("max", 1<<63-1), 0, store.ErrHashOverflow, 0)
	h.hash(9, "g", hincr("new", -1<<63), -1<<63, nil, store.LockLockedError)
}

func TestHashWrongType(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.do(1, setc(1, "s", "hello"))
	number := setc(2, "n", "")
	number.Data = recp(0, 0x01|0x04, keyProp("n"), i64(5)) // NUMBER wins over KV
	h.do(1, number)
	for _, key := range []string{"s", "n"} {
		before := bytes.Clone(h.l.Value(0, id16(key)))
		h.hash(3, key, hset("a", "1"), 0, store.ErrWrongType, 0)
		h.hash(4, key, hdel("a"), 0, store.ErrWrongType, 0)
		h.hash(5, key, hincr("a", 1), 0, store.ErrWrongType, 0)
		h.value(key, before)
	}
	// A SET replaces a hash, as in Redis.
	h.hash(6, "g", hset("a", "1"), 1, nil, store.LockOK)
	h.do(1, setc(7, "g", "x"))
	h.value("g", recp(0, 0, keyProp("g"), []byte("x")))
}

func TestHashTooLong(t *testing.T) {
	h := newLkh(t, store.LocksConfig{MaxValue: 40})
	// N = 2 (command, flag) + 6 (u16 P, then code, u16 length, "g") + the pairs.
	h.hash(1, "g", hset("f", strings.Repeat("v", 40-2-6-4-1-4)), 1, nil, store.LockOK)
	before := bytes.Clone(h.l.Value(0, id16("g")))
	if n := len(before) - 4; n != 40 {
		t.Fatalf("record N = %d, want 40", n)
	}
	var tl *store.ValueTooLongError
	c := hashc(2, "g")
	rs, _, _, err := h.l.Hash(1, &c, hset("x", ""), h.now, nil, nil)
	if !errors.As(err, &tl) || tl.Size != 49 || tl.Limit != 40 || len(rs) != 0 {
		t.Fatalf("over the limit: err %v, %d replies; want a ValueTooLongError of 49 bytes, limit 40", err, len(rs))
	}
	h.value("g", before)
	// A change that shrinks the record is fine.
	h.hash(3, "g", hset("f", "v"), 0, nil, store.LockLockedError)
}

func TestHashOnAKeyHeldByAnother(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	c := lockc(1, "other", "g")
	c = with(c, func(c *wc) { c.Flag, c.Data = 0x20, hashRec("g", "a", "1") })
	h.do(2, c)
	// The hash write is refused the way an APPEND is: TIMEOUT, nothing changed.
	h.hash(2, "g", hset("b", "2"), 1, nil, store.LockTimeout)
	h.hash(3, "g", hincr("a", 1), 2, nil, store.LockTimeout)
	h.hash(4, "g", hdel("a"), 1, nil, store.LockUnownError)
	h.value("g", hashRec("g", "a", "1"))
}

func TestHashKeepsTheExpiry(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	h.hash(1, "g", hset("a", "1"), 1, nil, store.LockOK)
	if ttl := h.l.TTL(0, id16("g"), h.now); ttl != -1 {
		t.Fatalf("TTL of a new hash = %d, want -1 (never expires)", ttl)
	}
	// EXPIRE g 10 as the text side runs it.
	exp := hashc(2, "g")
	exp = with(exp, func(c *wc) { c.Flag, c.Data, c.Expried, c.ExpriedFlag = 0x02, nil, 10, 0x0100|0x2000 })
	h.do(1, exp)
	ttl := h.l.TTL(0, id16("g"), h.now)
	h.hash(3, "g", hincr("a", 1), 2, nil, store.LockLockedError)
	if got := h.l.TTL(0, id16("g"), h.now); got != ttl || ttl <= 0 {
		t.Fatalf("TTL after HINCRBY = %d, before %d; want it kept", got, ttl)
	}
	h.advance(11e9)
	h.value("g", nil)
}

// TestHashJournalRoundTrip: hash writes are journaled like any value and a replay of the
// journal gives the same hashes; the HDEL that empties a hash journals the key gone.
func TestHashJournalRoundTrip(t *testing.T) {
	cfg := store.LocksConfig{Persist: true, PersistAfter: 1e9}
	a, b := newLkh(t, cfg), store.NewLocks(cfg)
	replay := func() int {
		n := 0
		a.l.Journal(a.now, func(s *store.KeyState) {
			if s.Ceil == 0 {
				n++ // not the fencing-token reservation
			}
			cp := *s
			cp.Value = bytes.Clone(s.Value)
			cp.Holders = append([]store.HolderState(nil), s.Holders...)
			b.Restore(&cp, a.now)
		})
		if err := b.Check(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a.hash(1, "g", hset("a", "1", "b", "2"), 2, nil, store.LockOK)
	a.hash(2, "g", hincr("a", 41), 42, nil, store.LockLockedError)
	a.hash(3, "h", hincr("n", 1), 1, nil, store.LockOK)
	if n := replay(); n != 2 {
		t.Fatalf("%d journal records, want 2 (one per key)", n)
	}
	for _, key := range []string{"g", "h"} {
		if got, want := b.Value(0, id16(key)), a.l.Value(0, id16(key)); !bytes.Equal(got, want) || want == nil {
			t.Fatalf("replayed %s = %x, want %x", key, got, want)
		}
	}
	if got, want := persistView(b, a.now), persistView(a.l, a.now); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replayed state\n%q\nlive\n%q", got, want)
	}
	// The replica goes on from the replayed hash.
	c := hashc(4, "g")
	if _, _, n, err := b.Hash(1, &c, hincr("a", 1), a.now, nil, nil); err != nil || n != 43 {
		t.Fatalf("HINCRBY on the replayed hash = %d, %v; want 43", n, err)
	}
	a.hash(5, "g", hdel("a", "b"), 2, nil, store.LockOK)
	if n := replay(); n != 1 {
		t.Fatalf("%d journal records for the HDEL, want 1", n)
	}
	if v := b.Value(0, id16("g")); v != nil {
		t.Fatalf("replayed emptied hash = %x, want no value", v)
	}
	if b.ValueCount(0) != 1 || a.l.ValueCount(0) != 1 {
		t.Fatalf("ValueCount: replayed %d, live %d; want 1 (h)", b.ValueCount(0), a.l.ValueCount(0))
	}
}

func TestHashAllocs(t *testing.T) {
	l := store.NewLocks(store.LocksConfig{})
	c := hashc(1, "g")
	var rs []store.LockReply
	var ex []store.Exec
	var args []string
	for i := range 10 {
		args = append(args, fmt.Sprintf("field%d", i), "1")
	}
	rs, ex, _, _ = l.Hash(1, &c, hset(args...), 0, rs, ex)
	op := hincr("field5", 1)
	allocs := testing.AllocsPerRun(1000, func() {
		rs, ex, _, _ = l.Hash(1, &c, op, 0, rs[:0], ex[:0])
	})
	if allocs != 0 {
		t.Fatalf("HINCRBY on a 10-field hash allocates %v times", allocs)
	}
	if v := l.Value(0, id16("g")); !bytes.Contains(v, []byte("field5\x04\x00\x00\x001002")) {
		t.Fatalf("after 1001 increments of 1: %q", v)
	}
}

// BenchmarkHashIncr: HINCRBY on one field of a 10-field hash, through Locks.Hash (the
// lock command included), and ApplyHash alone.
func BenchmarkHashIncr(b *testing.B) {
	l := store.NewLocks(store.LocksConfig{})
	c := hashc(1, "counters:u12345")
	var args []string
	for i := range 10 {
		args = append(args, fmt.Sprintf("field%d", i), "100")
	}
	var rs []store.LockReply
	var ex []store.Exec
	rs, ex, _, _ = l.Hash(1, &c, hset(args...), 0, rs, ex)
	op := hincr("field5", 1)
	b.Run("Locks.Hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rs, ex, _, _ = l.Hash(1, &c, op, 0, rs[:0], ex[:0])
		}
	})
	b.Run("ApplyHash", func(b *testing.B) {
		rec := bytes.Clone(l.Value(0, c.Key))
		var dst []byte
		b.ReportAllocs()
		for b.Loop() {
			dst, _, _, _ = store.ApplyHash(dst[:0], rec, c.Data, op)
		}
	})
}
