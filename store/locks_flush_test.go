package store_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// TestFlushSetsKeysAside: a flush empties the database at once for readers; its keys are
// freed a slice at a time, or at once when their name is used or a holder falls due, with
// no reply; keys with waiters are handled at once (the waiters granted); the journal gets
// one flush record ahead of what came after it, and none of what it superseded.
func TestFlushSetsKeysAside(t *testing.T) {
	h := newLkh(t, store.LocksConfig{Persist: true, PersistAfter: int64(time.Second)})
	const n = 5000
	for i := range n {
		h.l.Do(1, ptr(kvSet(uint16(i), "k"+strconv.Itoa(i), []byte("v"))), h.now, nil, nil)
	}
	h.one(2, lockc(1, "a", "held"), rp{o: 2, req: 1, res: store.LockOK, id: "a", key: "held", lc: 1, c: 0, lr: 1, rc: 0})
	h.do(3, lockc(2, "b", "held")) // waits
	h.one(2, with(lockc(3, "x", "soon"), func(c *wc) { c.Expried, c.ExpriedFlag = 50, 0x0400 }),
		rp{o: 2, req: 3, res: store.LockOK, id: "x", key: "soon", lc: 1, lr: 1})
	h.l.Journal(h.now, func(*store.KeyState) {})
	h.l.Do(1, ptr(kvSet(60000, "late", []byte("v"))), h.now, nil, nil) // journaled with the flush: superseded

	rs, _, set := h.l.Flush(0, h.now, nil, nil)
	h.check("Flush")
	if len(rs) != 1 || rs[0].Owner != 3 || rs[0].Result != store.LockOK {
		t.Fatalf("Flush replies %v: want the waiter's grant", rs)
	}
	if set != n+2 { // every key but "held", which had a waiter
		t.Fatalf("Flush set aside %d keys, want %d", set, n+2)
	}
	if h.l.ValueCount(0) != 0 || h.l.Value(0, id16("k1")) != nil || h.l.TTL(0, id16("k2"), h.now) != -2 || !h.l.Flushing() {
		t.Fatalf("after Flush: %d values, k1 %x, TTL k2 %d, flushing %v", h.l.ValueCount(0), h.l.Value(0, id16("k1")),
			h.l.TTL(0, id16("k2"), h.now), h.l.Flushing())
	}
	var recs []store.KeyState
	h.l.Journal(h.now, func(ks *store.KeyState) { recs = append(recs, *ks) })
	if len(recs) < 1 || !recs[0].Flush || recs[0].DB != 0 {
		t.Fatalf("journal after Flush: %+v, want the flush first", recs)
	}
	for _, r := range recs[1:] {
		if r.Key == id16("late") {
			t.Fatalf("journal has %+v, which the flush superseded", r)
		}
	}
	// "soon" falls due while set aside: freed, no EXPRIED.
	if rs := h.advance(100 * time.Millisecond); len(rs) != 0 {
		t.Fatalf("a flushed holder fell due: %v", rs)
	}
	// A flushed key's name used again: freed first, then a key of its own.
	h.one(4, lockc(5, "c", "k7"), rp{o: 4, req: 5, res: store.LockOK, id: "c", key: "k7", lc: 1, lr: 1})
	st, _ := h.l.State(0)
	if st.KeyCount < n {
		t.Fatalf("%d keys before the freeing", st.KeyCount)
	}
	for h.l.FreeFlushed(700) {
		h.check("FreeFlushed")
	}
	h.check("FreeFlushed")
	st, _ = h.l.State(0)
	if st.KeyCount != 2 || st.LockedCount != 2 || h.l.Flushing() { // "held" (by b) and "k7" (by c)
		t.Fatalf("after the freeing: %+v, flushing %v", st, h.l.Flushing())
	}
	if recs = recs[:0]; true {
		h.l.Journal(h.now, func(ks *store.KeyState) { recs = append(recs, *ks) })
	}
	for _, r := range recs {
		if len(r.Holders) == 0 && r.Key != id16("held") {
			t.Fatalf("the freeing journaled %x gone: the flush record says so", r.Key)
		}
	}

	// Restored, a flush record drops what the records before it left.
	l := store.NewLocks(store.LocksConfig{Persist: true})
	for _, k := range []string{"a", "b"} {
		l.Restore(&store.KeyState{DB: 2, Key: id16(k), Value: []byte{1, 0, 0, 0, 0},
			Holders: []store.HolderState{{LockID: id16(k), Levels: 1, Start: h.now, Hold: store.Hold{Opts: store.HoldNever}}}}, h.now)
	}
	l.Restore(&store.KeyState{DB: store.AllDBs, Flush: true}, h.now)
	l.Restore(&store.KeyState{DB: 2, Key: id16("c"), Holders: []store.HolderState{{LockID: id16("c"), Levels: 1, Start: h.now, Hold: store.Hold{Opts: store.HoldNever}}}}, h.now)
	for l.FreeFlushed(1) {
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.State(2); st.KeyCount != 1 || l.ValueCount(2) != 0 {
		t.Fatalf("restored across a flush record: %+v, %d values", st, l.ValueCount(2))
	}
}

func ptr(c store.LockCommand) *store.LockCommand { return &c }
