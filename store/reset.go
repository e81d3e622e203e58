package store

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
