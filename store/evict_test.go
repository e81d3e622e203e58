package store_test

import (
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// Under memory pressure, released counters give way, those released longest ago first;
// held ones, and their figures, stay.
func TestCountersEvictOldestReleased(t *testing.T) {
	c := store.NewCounters(store.CountersConfig{})
	l := c.NewLedger(1)
	for i := range 10 {
		name := []byte("c" + strconv.Itoa(i))
		if r := c.Acquire(l, name, 1, 5, at(int64(i))); r != store.OK {
			t.Fatalf("acquire %s: %v", name, r)
		}
	}
	// Released in the order 3, 1, 4, 5, 9; the others stay held.
	for _, i := range []int{3, 1, 4, 5, 9} {
		if r := c.Release(l, []byte("c"+strconv.Itoa(i)), 1, at(20+int64(i))); r != store.OK {
			t.Fatalf("release %d: %v", i, r)
		}
	}
	before := c.Bytes()
	freed, n := c.Evict(2*int64(store.NameCost(2)) - 1)
	if n != 2 || freed != 2*int64(store.NameCost(2)) || c.Bytes() != before-freed {
		t.Fatalf("Evict: freed %d bytes of %d counters, Bytes %d -> %d; want 2 counters", freed, n, before, c.Bytes())
	}
	for i := range 10 {
		_, ok := c.Get([]byte("c" + strconv.Itoa(i)))
		if want := i != 3 && i != 1; ok != want {
			t.Errorf("counter c%d exists %v after evicting the two released first, want %v", i, ok, want)
		}
	}
	if freed, n := c.Evict(1 << 40); n != 3 || freed != 3*int64(store.NameCost(2)) || c.Len() != 5 {
		t.Fatalf("Evict of everything: freed %d bytes of %d counters, %d left", freed, n, c.Len())
	}
	if freed, n := c.Evict(1 << 40); n != 0 || freed != 0 {
		t.Fatalf("Evict with none released: freed %d bytes of %d", freed, n)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	// An evicted counter acquired again starts afresh.
	if r := c.Acquire(l, []byte("c3"), 2, 5, at(40)); r != store.OK {
		t.Fatalf("acquire of an evicted counter: %v", r)
	}
	if v, _ := c.Get([]byte("c3")); v != 2 {
		t.Fatalf("evicted counter acquired again: consumption %d, want 2", v)
	}
}

// Requests queued by connections that have closed time out under memory pressure, oldest
// first, as at their Timeout; those of open connections stay queued.
func TestLocksEvictOrphans(t *testing.T) {
	s := store.New(store.Config{})
	l := s.Locks
	var rs []store.LockReply
	var ex []store.Exec
	do := func(o store.Owner, c store.LockCommand, now int64) []store.LockReply {
		rs, ex = l.Do(o, &c, now, rs[:0], ex[:0])
		return rs
	}
	data := rec(store.DataSet, 0, make([]byte, 1000))
	do(1, with(lockc(1, "h", "k"), func(c *wc) { c.Expried = 0xFFFF; c.ExpriedFlag = 0x4000 }), at(0))
	// Owner 2 queues three requests with data, owner 3 one, owner 4 (which stays open) one.
	for i, o := range []store.Owner{2, 3, 2, 4, 2} {
		c := with(lockc(uint16(10+i), "w"+strconv.Itoa(i), "k"), func(c *wc) { c.Timeout = 600; c.Data = data })
		if r := do(o, c, at(int64(1+i))); len(r) != 0 {
			t.Fatalf("request %d: %+v, want it queued", i, r)
		}
	}
	if l.Orphans() != 0 {
		t.Fatalf("%d orphans before any connection closed", l.Orphans())
	}
	l.Disconnected(3, at(10))
	l.Disconnected(2, at(11))
	if l.Orphans() != 4 {
		t.Fatalf("%d orphans, want 4", l.Orphans())
	}
	before := s.Bytes()
	// Two requests' worth: the oldest two of closed connections (w0 of 2, w1 of 3).
	rs, ex, freed, n := l.EvictOrphans(1500, at(12), rs[:0], ex[:0])
	if n != 2 || len(rs) != 2 || rs[0].Owner != 2 || rs[0].LockID != id16("w0") || rs[1].Owner != 3 ||
		rs[1].LockID != id16("w1") || rs[0].Result != store.LockTimeout || rs[1].Result != store.LockTimeout {
		t.Fatalf("EvictOrphans: %d timed out, replies %+v", n, rs)
	}
	if freed < 2000 || s.Bytes() > before-freed {
		t.Fatalf("EvictOrphans freed %d bytes, Bytes %d -> %d", freed, before, s.Bytes())
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	rs, ex, _, n = l.EvictOrphans(1<<40, at(13), rs[:0], ex[:0])
	if n != 2 || l.Orphans() != 0 {
		t.Fatalf("EvictOrphans of everything: %d timed out, %d orphans left", n, l.Orphans())
	}
	if st, _ := l.State(0); st.WaitCount != 1 {
		t.Fatalf("%d requests still queued, want owner 4's", st.WaitCount)
	}
	if _, _, _, n = l.EvictOrphans(1<<40, at(14), rs[:0], ex[:0]); n != 0 {
		t.Fatalf("EvictOrphans without orphans timed out %d", n)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// A database's map of keys is rebuilt once it has lost three quarters of its keys, and the
// budget counts its room until then; Trim lets go of the pieces kept for reuse.
func TestLocksBytesGiveBack(t *testing.T) {
	s := store.New(store.Config{})
	l := s.Locks
	empty := s.Bytes()
	var rs []store.LockReply
	var ex []store.Exec
	const n = 5000
	data := rec(store.DataSet, 0, make([]byte, 100))
	key := func(i int) store.LockCommand {
		return with(lockc(1, "h"+strconv.Itoa(i), strconv.Itoa(i)), func(c *wc) {
			c.Expried = 0xFFFF
			c.ExpriedFlag = 0x4000
			c.Data = data
		})
	}
	for i := range n {
		c := key(i)
		rs, ex = l.Do(1, &c, at(0), rs[:0], ex[:0])
	}
	full := s.Bytes()
	if per := (full - empty) / n; per < 600 || per > 1000 {
		t.Fatalf("%d keys with 100-byte values counted %d bytes each", n, per)
	}
	for i := range n {
		c := key(i)
		c.Kind, c.Data = 2, nil
		rs, ex = l.Do(1, &c, at(1), rs[:0], ex[:0])
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	l.Trim()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if left := s.Bytes() - empty; left > 16<<10 {
		t.Fatalf("every key unlocked and Trim: %d bytes still counted", left)
	}
}
