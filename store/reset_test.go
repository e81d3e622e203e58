package store

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// resetScene is a store with every family busy at now: a counter and a
// semaphore held, a pool held and waited for, and, unless noLocks, slock
// keys with holders (expiring, aging, persisting at once, kept alive by
// their connection), waiters, a value, a watch and a journal not yet taken.
func resetScene(t *testing.T, now int64, noLocks bool) *Store {
	t.Helper()
	s := New(Config{Locks: LocksConfig{Persist: true, PersistAfter: 1e9}, SemaphoreGCInterval: 4e9, Start: now})
	s.Counters.GC(now)
	if r := s.Counters.Acquire(s.Counters.NewLedger(1), []byte("c"), 2, 5, now); r != OK {
		t.Fatalf("counter: %v", r)
	}
	if r := s.Semaphores.Acquire(s.Semaphores.NewLedger(1), []byte("s"), 1, 3, now); r != OK {
		t.Fatalf("semaphore: %v", r)
	}
	a, b, c := s.Pools.NewClient(1), s.Pools.NewClient(2), s.Pools.NewClient(3)
	if s.Pools.Acquire(a, AcqMe, []byte("p"), 1, 5, 0, now) != Locked ||
		s.Pools.Acquire(b, AcqMe, []byte("p"), 1, 5, 3, now) != Waiting ||
		s.Pools.Acquire(c, AcqMe, []byte("p"), 1, 5, 7, now) != Waiting {
		t.Fatal("pool setup")
	}
	if noLocks {
		return s
	}
	lock := func(o Owner, key, id byte, timeout, expried uint16, ho HoldOpts, replies int) {
		t.Helper()
		cmd := LockCommand{Kind: 1, Wait: Wait{N: timeout}, Hold: Hold{N: expried, Opts: ho}}
		cmd.Key[15], cmd.LockID[15] = key, id
		if rs, _ := s.Locks.Do(o, &cmd, now, nil, nil); len(rs) != replies {
			t.Fatalf("lock %d of key %d by %d: %+v", id, key, o, rs)
		}
	}
	lock(10, 'k', 1, 5, 10, 0, 1)             // expires in 10 s, ages in 1 s
	lock(11, 'k', 2, 5, 10, 0, 0)             // waits up to 5 s
	lock(12, 'k', 3, 2, 10, 0, 0)             // waits up to 2 s
	lock(13, 'n', 4, 5, 3, HoldPersistNow, 1) // persists now: journaled
	lock(14, 'a', 5, 5, 5, HoldKept, 1)       // kept alive by its connection
	lock(15, 'a', 6, 0x8000, 0, 0, 0)         // waits while its connection lives
	var v KeyState
	v.Key[15] = 'v'
	v.Value = []byte{3, 0, 0, 0, 0, 0, 'x'}
	v.Holders = []HolderState{{LockID: v.Key, Levels: 1, Hold: Hold{N: 0x7FFF, Opts: HoldPersistNow}, Start: now, Deadline: now + 6e9}}
	s.Locks.Restore(&v, now)
	s.Locks.Watch(0, v.Key)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if !s.Locks.Journaled() || s.Locks.Value(0, v.Key) == nil || countIn[*lockItem](&s.q) != 6 || countIn[*agedItem](&s.q) != 1 {
		t.Fatalf("lock setup: journaled %v, value %q, %d lock items and %d agings in the heap",
			s.Locks.Journaled(), s.Locks.Value(0, v.Key), countIn[*lockItem](&s.q), countIn[*agedItem](&s.q))
	}
	return s
}

// ResetLocks leaves the slock family as New makes it and every other family as
// it was: from then on the store runs exactly as one that never had locks.
func TestResetLocks(t *testing.T) {
	const now = int64(1_700_000_000e9)
	s, ref := resetScene(t, now, false), resetScene(t, now, true)
	l, ids, seq := s.Locks, s.Locks.ids, s.Locks.seq
	var vk [16]byte
	vk[15] = 'v'
	ver := l.WatchVersion(0, vk)

	s.ResetLocks()
	if err := s.Check(); err != nil {
		t.Fatalf("after ResetLocks: %v", err)
	}
	if s.Locks != l {
		t.Fatal("ResetLocks moved the Locks")
	}
	if n, m := countIn[*lockItem](&s.q), countIn[*agedItem](&s.q); n != 0 || m != 0 || s.q.len() != ref.q.len() {
		t.Fatalf("heap after ResetLocks: %d lock items, %d agings, %d items; want 0, 0, %d", n, m, s.q.len(), ref.q.len())
	}
	for db := range uint8(MaxLockDB + 1) {
		if st, ok := l.State(db); ok {
			t.Fatalf("db %d still there: %+v", db, st)
		}
	}
	if l.Journaled() || l.LoggedKeys() != 0 || l.Bytes() != int64(l.Watched())*watchCost || l.Value(0, vk) != nil || l.TTL(0, vk, now) != -2 {
		t.Fatalf("locks after ResetLocks: journaled %v, %d logged keys, %d bytes, value %q, TTL %d",
			l.Journaled(), l.LoggedKeys(), l.Bytes(), l.Value(0, vk), l.TTL(0, vk, now))
	}
	if l.ids != ids || l.seq != seq {
		t.Fatal("ResetLocks restarted the id generator: it would make the same ids again")
	}
	if got := l.WatchVersion(0, vk); got == ver || l.Watched() != 1 {
		t.Fatalf("watch version %d before, %d after (%d watched); want a new one", ver, got, l.Watched())
	}
	l.Unwatch(0, vk)
	// A connection tied to the family before is a stranger now.
	l.Disconnected(14, now)
	l.Disconnected(15, now)

	// The other families' deadlines come out as in a store that never had locks.
	var d, dref Due
	events := 0
	for _, at := range []int64{now + 1e9, now + 3e9, now + 4e9, now + 6e9, now + 8e9, now + 11e9, now + 61e9} {
		s.Advance(at, &d)
		ref.Advance(at, &dref)
		if err := s.Check(); err != nil {
			t.Fatalf("at +%d s: %v", (at-now)/1e9, err)
		}
		if !slices.Equal(d.Events, dref.Events) || !slices.Equal(d.Wakes, dref.Wakes) ||
			d.CounterGC != dref.CounterGC || d.SemaphoreGC != dref.SemaphoreGC || len(d.Replies) != 0 || len(d.Execs) != 0 {
			t.Fatalf("at +%d s: Advance gives\n%+v\nwant\n%+v", (at-now)/1e9, d, dref)
		}
		events += len(d.Events)
		d.Reset()
		dref.Reset()
	}
	if events != 5 { // two pool waits, two semaphore collections, one counter collection
		t.Fatalf("%d events, want 5: the scene is wrong", events)
	}
	if got, ok := s.Counters.Get([]byte("c")); !ok || got != 2 {
		t.Fatalf("counter after ResetLocks: %d, %v", got, ok)
	}
	if got, ok := s.Semaphores.Get([]byte("s")); !ok || got != 2 {
		t.Fatalf("semaphore after ResetLocks: %d, %v", got, ok)
	}
}

// After ResetLocks the family is rebuilt from records and works as before.
func TestResetLocksThenRestore(t *testing.T) {
	const now = int64(1_700_000_000e9)
	s := resetScene(t, now, false)
	var log []KeyState
	s.Locks.Journal(now, func(*KeyState) {}) // as written to the log: key 'n' is logged now
	s.Locks.SnapshotAll(now, func(ks *KeyState) {
		if ks.Ceil != 0 {
			return // the fencing-token reservation (TestFenceTokens)
		}
		c := *ks
		c.Value = slices.Clone(ks.Value)
		c.Holders = slices.Clone(ks.Holders)
		log = append(log, c)
	})
	if len(log) != 2 { // the persisting holder and the value
		t.Fatalf("snapshot of %d keys, want 2: %+v", len(log), log)
	}
	s.ResetLocks()
	for i := range log {
		s.Locks.Restore(&log[i], now+1)
	}
	s.Locks.ForgetJournal()
	if err := s.Check(); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	if s.Locks.LoggedKeys() != 2 || s.Locks.Value(0, log[1].Key) == nil && s.Locks.Value(0, log[0].Key) == nil {
		t.Fatalf("restored %d logged keys", s.Locks.LoggedKeys())
	}
	// A new lock waits behind the restored holder of key 'n', granted when it expires at +4 s (3 s after the second of its grant).
	cmd := LockCommand{Kind: 1, Wait: Wait{N: 10}, Hold: Hold{N: 10}}
	cmd.Key[15], cmd.LockID[15] = 'n', 9
	if rs, _ := s.Locks.Do(20, &cmd, now+1, nil, nil); len(rs) != 0 {
		t.Fatalf("lock of a restored held key: %+v", rs)
	}
	cmd.Key[15] = 'k' // held before the reset, free now
	if rs, _ := s.Locks.Do(21, &cmd, now+1, nil, nil); len(rs) != 1 || rs[0].Result != LockOK {
		t.Fatalf("lock of a key dropped by the reset: %+v", rs)
	}
	var d Due
	s.Advance(now+4e9, &d)
	var got []string
	for _, r := range d.Replies {
		got = append(got, fmt.Sprintf("%d:%v", r.Owner, r.Result))
	}
	if want := []string{"0:LockExpried", "20:LockOK"}; !slices.Equal(got, want) {
		t.Fatalf("at +4 s: replies %v, want %v (events %v)", got, want, d.Events)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// SnapshotAll writes what BeginSnapshot and SnapshotNext write, and leaves a
// snapshot in progress through them alone.
func TestSnapshotAll(t *testing.T) {
	const now = int64(1_700_000_000e9)
	s := resetScene(t, now, false)
	l := s.Locks
	show := func(ks *KeyState) string { return fmt.Sprintf("%x %x %+v", ks.Key, ks.Value, ks.Holders) }
	var all, steps []string
	l.SnapshotAll(now+2e9, func(ks *KeyState) { all = append(all, show(ks)) })
	l.BeginSnapshot()
	l.SnapshotNext(1, now+2e9, func(ks *KeyState) { steps = append(steps, show(ks)) })
	var again []string
	l.SnapshotAll(now+2e9, func(ks *KeyState) { again = append(again, show(ks)) })
	for !l.SnapshotNext(1, now+2e9, func(ks *KeyState) { steps = append(steps, show(ks)) }) {
	}
	if len(all) == 0 || !slices.Equal(all, steps) || !slices.Equal(all, again) {
		t.Fatalf("SnapshotAll %v\nthen %v\nSnapshotNext %v", all, again, steps)
	}
}

// drop takes exactly the items it is told to off the heap, and the others
// come out in the order they would have, ties first in, first out.
func TestDeadlinesDrop(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 3))
		var q deadlines
		its := items(1 + rnd.IntN(3000))
		at := map[int]int64{}
		for _, it := range its {
			at[it.id] = rnd.Int64N(50)
			q.add(it, at[it.id])
		}
		for range len(its) / 3 { // moves and removals, so the heap is not in insertion order
			it := its[rnd.IntN(len(its))]
			if rnd.IntN(2) == 0 {
				at[it.id] = rnd.Int64N(50)
				q.move(it, at[it.id])
			} else if q.remove(it) {
				delete(at, it.id)
			}
		}
		var want []int
		for _, it := range its {
			if _, ok := at[it.id]; ok && it.id%3 != 0 {
				want = append(want, it.id)
			}
		}
		// The order the survivors leave in: by deadline, then by when last added or moved.
		order := map[int]uint64{}
		for i := range q.h {
			order[q.h[i].d.it.(*item).id] = q.h[i].seq
		}
		slices.SortFunc(want, func(a, b int) int {
			if at[a] != at[b] {
				return int(at[a] - at[b])
			}
			return int(order[a]) - int(order[b])
		})
		big := cap(q.h)
		q.drop(func(t timer) bool { return t.(*item).id%3 == 0 })
		mustCheck(t, &q)
		for _, it := range its {
			if it.id%3 == 0 && it.dl.scheduled() {
				t.Fatalf("seed %d: dropped item %d still scheduled", seed, it.id)
			}
		}
		if q.len() != len(want) || cap(q.h) > big {
			t.Fatalf("seed %d: %d items (cap %d, was %d), want %d", seed, q.len(), cap(q.h), big, len(want))
		}
		if got := popAll(&q, 1<<62); !slices.Equal(got, want) {
			t.Fatalf("seed %d: popped %v\nwant %v", seed, got, want)
		}
	}
}

// A family staged beside the one serving (StagingLocks) and swapped in (SwapLocks) is the
// family ResetLocks and the same Restores leave: the same keys, and every deadline of every
// family comes out the same; the old family served until the swap.
func TestSwapLocksIsResetThenRestore(t *testing.T) {
	const now = int64(1_700_000_000e9)
	a, b := resetScene(t, now, false), resetScene(t, now, false)
	var log []KeyState
	a.Locks.Journal(now, func(*KeyState) {})
	b.Locks.Journal(now, func(*KeyState) {})
	a.Locks.SnapshotAll(now, func(ks *KeyState) {
		c := *ks
		c.Value = slices.Clone(ks.Value)
		c.Holders = slices.Clone(ks.Holders)
		log = append(log, c)
	})
	// More to restore than the scene has: keys with holders expiring at various times.
	for i := range 300 {
		var ks KeyState
		ks.Key[0], ks.Key[1] = 'x', byte(i)
		ks.Key[2] = byte(i >> 8)
		ks.Holders = []HolderState{{LockID: ks.Key, Levels: 1, Hold: Hold{N: uint16(1 + i%9)}, Start: now,
			Deadline: now + int64(1+i%9)*1e9 + 5e8}} // not at another family's deadline: ties may order otherwise
		log = append(log, ks)
	}
	fence, ids := b.Locks.fence, b.Locks.ids
	var vk [16]byte
	vk[15] = 'v'
	ver := b.Locks.WatchVersion(0, vk)
	b.Locks.KeepGone = true

	a.ResetLocks()
	a.Locks.KeepGone = true
	for i := range log {
		a.Locks.Restore(&log[i], now+1)
	}
	a.Locks.ForgetJournal()

	l := b.Locks
	n := b.StagingLocks()
	for i := range log {
		n.Restore(&log[i], now+1)
		if i%50 == 0 {
			n.ForgetJournal()
			if l.Value(0, vk) == nil { // the old family serves meanwhile
				t.Fatalf("the serving family lost its value during staging (%d restored)", i)
			}
		}
	}
	n.ForgetJournal()
	if err := b.Check(); err != nil {
		t.Fatalf("during staging: %v", err)
	}
	if StagedBytes(n) <= 0 {
		t.Fatal("staging takes no memory")
	}
	b.SwapLocks(n)
	if b.Locks != l {
		t.Fatal("SwapLocks moved the Locks")
	}
	if err := b.Check(); err != nil {
		t.Fatalf("after SwapLocks: %v", err)
	}
	if l.ids != ids || l.fence < fence || !l.KeepGone {
		t.Fatal("SwapLocks did not carry over the id generator, the fencing tokens or KeepGone")
	}
	if got := l.WatchVersion(0, vk); got == ver || l.Watched() != 1 {
		t.Fatalf("watch version %d before, %d after (%d watched); want a new one", ver, got, l.Watched())
	}
	if l.LoggedKeys() != a.Locks.LoggedKeys() || l.Journaled() || l.Bytes() != a.Locks.Bytes() {
		t.Fatalf("swapped: %d logged keys, %d bytes, journaled %v; reset and restored: %d, %d",
			l.LoggedKeys(), l.Bytes(), l.Journaled(), a.Locks.LoggedKeys(), a.Locks.Bytes())
	}
	a.Locks.Disconnected(14, now)
	a.Locks.Disconnected(15, now)
	l.Disconnected(14, now)
	l.Disconnected(15, now)
	var da, db Due
	events := 0
	for _, at := range []int64{now + 1e9, now + 3e9, now + 4e9, now + 6e9, now + 8e9, now + 9e9, now + 11e9, now + 61e9} {
		a.Advance(at, &da)
		b.Advance(at, &db)
		for _, s := range []*Store{a, b} {
			if err := s.Check(); err != nil {
				t.Fatalf("at +%d s: %v", (at-now)/1e9, err)
			}
		}
		show := func(d *Due) string {
			// Items of the other families come after the staged ones due at the same
			// instant (SwapLocks): events tied at one instant are compared as a set.
			ev := slices.Clone(d.Events)
			slices.SortStableFunc(ev, func(x, y DueEvent) int {
				if x.At != y.At {
					return cmp.Compare(x.At, y.At)
				}
				return cmp.Compare(x.Kind, y.Kind)
			})
			var rs []string
			for _, r := range d.Replies {
				rs = append(rs, fmt.Sprintf("%d:%v:%x", r.Owner, r.Result, r.Key))
			}
			return fmt.Sprintf("%v %v %v %v %v", ev, d.Wakes, rs, d.CounterGC, d.SemaphoreGC)
		}
		if show(&da) != show(&db) {
			t.Fatalf("at +%d s: swapped in, Advance gives\n%s\nreset and restored\n%s", (at-now)/1e9, show(&db), show(&da))
		}
		events += len(db.Events)
		da.Reset()
		db.Reset()
	}
	if events < 300 {
		t.Fatalf("%d events, want the 300 holders' expiries and more", events)
	}
	// A save begun on the old family is over, and a new one has a number no earlier one had.
	c := resetScene(t, now, false)
	c.Locks.BeginSave(now, func(*KeyState) {})
	e := c.Locks.SaveEpoch()
	c.SwapLocks(c.StagingLocks())
	if on, _ := c.Locks.Saving(); on || c.Locks.SaveEpoch() != 0 {
		t.Fatal("a save of the old family goes on after SwapLocks")
	}
	c.Locks.BeginSave(now, func(*KeyState) {})
	if c.Locks.SaveEpoch() <= e {
		t.Fatalf("a save after SwapLocks has number %d, one before had %d", c.Locks.SaveEpoch(), e)
	}
}
