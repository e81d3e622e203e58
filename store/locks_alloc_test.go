package store_test

import (
	"encoding/binary"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// lockBench is a Locks with reply buffers, driven like the event loop does.
type lockBench struct {
	l   *store.Locks
	rs  []store.LockReply
	ex  []store.Exec
	now int64
}

func newLockBench() *lockBench {
	return &lockBench{l: store.NewLocks(store.LocksConfig{}), rs: make([]store.LockReply, 0, 16), ex: make([]store.Exec, 0, 4), now: at(0)}
}

func (b *lockBench) do(o store.Owner, c *store.LockCommand) []store.LockReply {
	b.rs, b.ex = b.l.Do(o, c, b.now, b.rs[:0], b.ex[:0])
	return b.rs
}

func (b *lockBench) expire() []store.LockReply {
	b.rs, b.ex = b.l.Expire(b.now, b.rs[:0], b.ex[:0])
	return b.rs
}

// pair runs a Lock and its Unlock on key i, which is free, failing unless
// both succeed.
func (b *lockBench) pair(tb testing.TB, lk, un *store.LockCommand, i int) {
	binary.LittleEndian.PutUint32(lk.Key[:], uint32(i))
	un.Key = lk.Key
	if rs := b.do(1, lk); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lcount != 1 {
		tb.Fatalf("lock: %+v", rs)
	}
	if rs := b.do(1, un); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lcount != 0 {
		tb.Fatalf("unlock: %+v", rs)
	}
}

// contended runs one round on a key held by a, with b waiting: a unlocks,
// b gets it, a queues again; then the same with a and b swapped.
func (b *lockBench) contended(tb testing.TB, la, lb, ua, ub *store.LockCommand) {
	for _, s := range []struct {
		un, lk   *store.LockCommand
		from, to store.Owner
	}{{ua, la, 1, 2}, {ub, lb, 2, 1}} {
		if rs := b.do(s.from, s.un); len(rs) != 2 || rs[0].Result != store.LockOK || rs[1].Result != store.LockOK || rs[1].Owner != s.to {
			tb.Fatalf("unlock by %d: %+v", s.from, rs)
		}
		if rs := b.do(s.from, s.lk); len(rs) != 0 {
			tb.Fatalf("lock by %d: %+v", s.from, rs)
		}
	}
}

func contendedSetup(tb testing.TB, b *lockBench) (la, lb, ua, ub store.LockCommand) {
	la, lb = lockc(1, "a", "hot"), lockc(2, "b", "hot")
	la.Wait.N, lb.Wait.N = 60, 60
	ua, ub = unlockc(3, "a", "hot"), unlockc(4, "b", "hot")
	if rs := b.do(1, &la); len(rs) != 1 || rs[0].Result != store.LockOK {
		tb.Fatalf("setup: %+v", rs)
	}
	if rs := b.do(2, &lb); len(rs) != 0 {
		tb.Fatalf("setup: %+v", rs)
	}
	return la, lb, ua, ub
}

func TestLocksNoAllocs(t *testing.T) {
	b := newLockBench()
	lk, un := lockc(1, "a", ""), unlockc(2, "a", "")
	b.pair(t, &lk, &un, 0)
	noAllocs(t, "Lock+Unlock pair, same key", 10000, func(int) { b.pair(t, &lk, &un, 0) })
	noAllocs(t, "Lock+Unlock pair, key per pair", 10000, func(i int) { b.pair(t, &lk, &un, i) })

	// Many keys held at once, then all released, over and over: the maps
	// and the heap have grown to their peak.
	many := func(int) {
		for i := 0; i < 500; i++ {
			binary.LittleEndian.PutUint32(lk.Key[:], uint32(i))
			b.do(1, &lk)
		}
		for i := 0; i < 500; i++ {
			binary.LittleEndian.PutUint32(un.Key[:], uint32(i))
			b.do(1, &un)
		}
	}
	many(0)
	noAllocs(t, "500 locks, 500 unlocks", 20, many)

	re := with(lockc(3, "r", "re"), func(c *wc) { c.Rcount = 0xFF })
	ure := with(unlockc(4, "r", "re"), func(c *wc) { c.Rcount = 1 })
	show := with(lockc(5, "s", "re"), func(c *wc) { c.Flag = 0x01; c.Timeout = 0 })
	try := with(lockc(6, "t", "re"), func(c *wc) { c.Timeout = 0 })
	b.do(1, &re)
	noAllocs(t, "reentry, show, try, unlock a level", 10000, func(int) {
		b.do(1, &re)
		b.do(2, &show)
		b.do(2, &try)
		b.do(1, &ure)
	})

	la, lb, ua, ub := contendedSetup(t, b)
	b.contended(t, &la, &lb, &ua, &ub)
	noAllocs(t, "contended hand-over", 10000, func(int) { b.contended(t, &la, &lb, &ua, &ub) })

	// A value of a few bytes: its buffers are kept with the key and items.
	// (h holds the key, so the value stays between the pairs.)
	set := with(lockc(7, "d", "data"), func(c *wc) { c.Count = 1; c.Data = rec(store.DataIncr, 0, i64(1)) })
	uset := with(unlockc(8, "d", "data"), func(c *wc) { c.Data = rec(store.DataSet, 0, []byte("xyz")) })
	hold := with(lockc(9, "h", "data"), func(c *wc) { c.Count = 1 })
	b.do(2, &hold)
	b.do(1, &set)
	b.do(1, &uset)
	noAllocs(t, "lock, unlock with data records", 10000, func(int) {
		if rs := b.do(1, &set); len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Lcount != 2 || rs[0].Value == nil {
			t.Fatalf("lock with data: %+v", rs)
		}
		if rs := b.do(1, &uset); len(rs) != 1 || rs[0].Result != store.LockOK || len(rs[0].Value) != 14 {
			t.Fatalf("unlock with data: %+v", rs)
		}
	})
}

func TestLocksExpireNoAllocs(t *testing.T) {
	b := newLockBench()
	lk := with(lockc(1, "a", ""), func(c *wc) { c.Expried, c.ExpriedFlag = 5, 0x0400 })
	w := with(lockc(2, "b", ""), func(c *wc) { c.Timeout, c.TimeoutFlag = 3, 0x0400 })
	round := func(i int) {
		binary.LittleEndian.PutUint32(lk.Key[:], uint32(i%64))
		w.Key = lk.Key
		if rs := b.do(1, &lk); len(rs) != 1 || rs[0].Result != store.LockOK {
			t.Fatalf("lock: %+v", rs)
		}
		b.do(2, &w)
		b.now += 3e6
		if rs := b.expire(); len(rs) != 1 || rs[0].Result != store.LockTimeout {
			t.Fatalf("timeout: %+v", rs)
		}
		b.now += 3e6
		if rs := b.expire(); len(rs) != 1 || rs[0].Result != store.LockExpried {
			t.Fatalf("expiry: %+v", rs)
		}
	}
	round(0)
	noAllocs(t, "expiry and timeout", 10000, round)
}

func BenchmarkLockUnlock(b *testing.B) {
	lb := newLockBench()
	lk, un := lockc(1, "a", "k"), unlockc(2, "a", "k")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lb.pair(b, &lk, &un, i&1023)
	}
}

func BenchmarkLockUnlockContended(b *testing.B) {
	lb := newLockBench()
	la, lbb, ua, ub := contendedSetup(b, lb)
	b.ReportAllocs()
	for b.Loop() {
		lb.contended(b, &la, &lbb, &ua, &ub)
	}
}

func BenchmarkLockExpire(b *testing.B) {
	lb := newLockBench()
	lk := with(lockc(1, "a", ""), func(c *wc) { c.Expried, c.ExpriedFlag = 1, 0x0400 })
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		binary.LittleEndian.PutUint32(lk.Key[:], uint32(i&1023))
		lb.do(1, &lk)
		lb.now += 1e6
		if rs := lb.expire(); len(rs) != 1 || rs[0].Result != store.LockExpried {
			b.Fatalf("expire: %+v", rs)
		}
	}
}
