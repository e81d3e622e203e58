package store

import "slices"

// ResetLocks empties the slock family as New makes it: every key, holder,
// waiter and value goes, with their waits, holds and agings in the deadline
// heap and the journal not yet taken, so that the family can be rebuilt from
// a log (Restore). Nothing is replied to the waiters and holders dropped:
// that is the caller's to do. Counters, semaphores and pools, and their
// deadlines, are untouched.
//
// The Locks keeps its address (s.Locks, and any copy of it, stays valid) and
// its configuration. What is not the family's state carries over: the
// generator of server-made ids, so none made before is made again, the
// fencing-token counter, so no token issued before is issued again, and the
// keys watched (WATCH), each of which sees a new version, as a change of
// its key would give it.
func (s *Store) ResetLocks() {
	s.q.drop(func(t timer) bool {
		switch t.(type) {
		case *lockItem, *agedItem:
			return true
		}
		return false
	})
	l := s.Locks
	n := NewLocks(l.cfg)
	n.ids, n.seq = l.ids, l.seq
	n.watches, n.wseq = l.watches, l.wseq
	if len(n.watches) > 0 {
		n.wseq++
		for _, w := range n.watches {
			w.ver = n.wseq
		}
	}
	n.fence = l.fence // a process never issues a token twice, whatever the log it rebuilds from says
	// A save begun before is over; a later one has a number no earlier one had.
	n.bk = saveState{epoch: l.bk.epoch + 1}
	n.KeepGone = l.KeepGone
	n.dl, n.aging, n.shared = &s.q, &s.q, true
	*l = *n
}

// drop unschedules every item for which gone is true, in one pass over the
// heap and a rebuild, keeping the order of the others (ties included).
func (q *deadlines) drop(gone func(timer) bool) {
	h := q.h[:0]
	for _, s := range q.h {
		if gone(s.d.it) {
			s.d.i = 0
			continue
		}
		h = append(h, s)
	}
	clear(q.h[len(h):])
	if cap(h) >= shrinkSlots && len(h) <= cap(h)/4 {
		h = append(make([]slot, 0, 2*len(h)), h...)
	}
	q.h, q.n = h, len(h) // the staged ones join the heap
	for i := range h {
		h[i].d.i = int32(i + 1)
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// SnapshotAll calls emit with the persistent state at now of every key whose
// latest log record has holders: what BeginSnapshot and SnapshotNext write,
// in one call. It leaves a snapshot in progress through them where it was.
// The KeyState is valid during the call only; emit must not change the
// Locks.
func (l *Locks) SnapshotAll(now int64, emit func(*KeyState)) {
	l.emitCeil(emit)
	for k := l.loggedKeys.head; k != nil; k = k.ll.next {
		if !k.flushed() && l.state(k, now) {
			emit(&l.snap)
		}
	}
}

// Staging: a slock family rebuilt beside the one serving, then swapped in (issue 30, item 7:
// a follower that installed a raft snapshot of 1M keys rebuilt its store in one loop turn,
// ResetLocks and a Restore of every key, holding every client for most of a second).
//
// StagingLocks returns an empty slock family for s, as ResetLocks would leave it but apart
// from s.Locks, which goes on serving meanwhile: the caller Restores into it a slice at a
// time, then puts it in s.Locks's place with SwapLocks, in one step that costs O(PoolCounter
// waits), not O(keys). Its waits, holds and agings go to a deadline heap of its own, which
// nothing drives until the swap (a holder past its deadline then expires at the next
// Advance); its Expire panics, as a Store's family's does.
func (s *Store) StagingLocks() *Locks {
	n := NewLocks(s.Locks.cfg)
	q := new(deadlines)
	n.dl, n.aging, n.shared = q, q, true
	return n
}

// StagedBytes is what staging (StagingLocks) takes so far, its deadline heap included: the
// memory budget counts it while it is built.
func StagedBytes(n *Locks) int64 {
	if n == nil {
		return 0
	}
	return n.Bytes() + int64(cap(n.dl.h))*heapSlot
}

// SwapLocks makes n, from s's StagingLocks and restored since, the slock family, in place
// of the one serving, whose keys, holders, waiters and values go with their deadlines,
// nothing replied (as ResetLocks). s.Locks keeps its address; n must not be used after.
// What ResetLocks carries over carries over (the id generator, the fencing-token counter,
// the keys watched, each seeing a new version), and so does the number of the last backup
// (a save begun on the old family is over: Saving is false, SaveEpoch 0, and a later one
// has a number no earlier one had).
//
// The store's deadline heap becomes n's: n's items keep their places in it, and the few
// items of the other families (the two collections, the PoolCounter waits) move over, in
// the order they had among themselves (after n's items due at the same instant), so the
// step costs O(PoolCounter waits) whatever the number of keys.
func (s *Store) SwapLocks(n *Locks) {
	l := s.Locks
	old := s.q
	s.q = *n.dl // its items' handles index its slice, which s.q now holds
	// The other families' items, in their order in the old heap.
	var moved []slot
	take := func(t timer) {
		if d := t.deadline(); d.i != 0 {
			moved = append(moved, old.h[d.i-1])
		}
	}
	take(&s.Counters.gc)
	take(&s.semGC)
	for _, c := range s.Pools.clients {
		for _, e := range c.ents {
			take(e)
		}
	}
	slices.SortFunc(moved, func(a, b slot) int {
		if a.before(&b) {
			return -1
		}
		if b.before(&a) {
			return 1
		}
		return 0
	})
	for _, m := range moved {
		m.d.i = 0
		s.q.add(m.d.it, m.at)
	}
	n.ids, n.seq = l.ids, l.seq
	n.watches, n.wseq = l.watches, max(l.wseq, n.wseq)
	if len(n.watches) > 0 {
		n.wseq++
		for _, w := range n.watches {
			w.ver = n.wseq
		}
	}
	n.fence = max(n.fence, l.fence) // a process never issues a token twice, whatever the log it rebuilds from says
	n.bk = saveState{epoch: l.bk.epoch + 1}
	n.KeepGone = l.KeepGone
	n.dl, n.aging, n.shared = &s.q, &s.q, true
	*l = *n
	*n = Locks{}
}
