package store_test

import (
	"encoding/binary"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestFIFOTenThousand: 10,000 waiters on one key are served in arrival
// order, each grant going to its own connection with its own RequestId.
func TestFIFOTenThousand(t *testing.T) {
	const n = 10000
	l := store.NewLocks(store.LocksConfig{})
	now := at(0)
	idOf := func(i int) (id [16]byte) {
		binary.BigEndian.PutUint32(id[12:], uint32(i))
		return id
	}
	c := with(lockc(0, "", "hot"), func(c *wc) { c.LockID = idOf(0); c.Timeout = 600; c.Expried = 600 })
	rs, _ := l.Do(0, &c, now, nil, nil)
	if len(rs) != 1 || rs[0].Result != store.LockOK {
		t.Fatalf("first lock: %+v", rs)
	}
	for i := 1; i <= n; i++ {
		c.LockID, c.RequestID = idOf(i), rid(uint16(i))
		if rs, _ := l.Do(store.Owner(i), &c, now, rs[:0], nil); len(rs) != 0 {
			t.Fatalf("waiter %d: %+v", i, rs)
		}
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.State(0); st.WaitCount != n {
		t.Fatalf("WaitCount %d", st.WaitCount)
	}
	u := unlockc(0, "", "hot")
	for i := 0; i < n; i++ {
		u.LockID = idOf(i)
		rs, _ = l.Do(store.Owner(i), &u, now, rs[:0], nil)
		next := i + 1
		if len(rs) != 2 || rs[0].Result != store.LockOK || rs[0].Owner != store.Owner(i) ||
			rs[1].Result != store.LockOK || rs[1].Owner != store.Owner(next) || rs[1].LockID != idOf(next) || rs[1].RequestID != rid(uint16(next)) || rs[1].Lcount != 1 {
			t.Fatalf("unlock %d: %+v", i, rs)
		}
		if i == n/2 {
			if err := l.Check(); err != nil {
				t.Fatal(err)
			}
		}
	}
	u.LockID = idOf(n)
	if rs, _ = l.Do(store.Owner(n), &u, now, rs[:0], nil); len(rs) != 1 || rs[0].Result != store.LockOK {
		t.Fatalf("last unlock: %+v", rs)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.State(0); st != (store.LockState{LockCount: n + 1, UnLockCount: n + 1}) {
		t.Fatalf("State %+v", st)
	}
}

// TestManyHolders: a key with many holders (a read lock) finds each by its
// LockId, through the index it builds past a few holders.
func TestManyHolders(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	r := func(i int) store.LockCommand {
		return with(lockc(uint16(i), "", "rw"), func(c *wc) {
			binary.BigEndian.PutUint32(c.LockID[12:], uint32(i))
			c.Count = 0xFFFF
			c.Rcount = 1
		})
	}
	for i := 0; i < 40; i++ {
		if rs := h.do(1, r(i)); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lcount != uint16(i+1) {
			t.Fatalf("reader %d: %+v", i, rs)
		}
	}
	for i := 0; i < 40; i += 3 {
		if rs := h.do(1, r(i)); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lrcount != 2 {
			t.Fatalf("reentry %d: %+v", i, rs)
		}
	}
	for i := 39; i >= 0; i-- {
		u := r(i)
		u.Kind, u.Rcount = 2, 0
		if rs := h.do(1, u); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lrcount != 0 {
			t.Fatalf("unlock %d: %+v", i, rs)
		}
	}
	h.state(0, store.LockState{LockCount: 54, UnLockCount: 54})
}
