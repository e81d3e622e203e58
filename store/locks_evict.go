package store

import (
	"cmp"
	"slices"
)

// Under the memory budget's pressure, what no client is owed gives way before a client is
// refused (the loop's makeRoom): the Locks' pieces kept for reuse, then the requests still
// queued by connections that have closed, oldest first.

// Trim lets go of the keys and items kept for reuse and their buffers, and returns the
// bytes that frees (as Bytes counts them).
func (l *Locks) Trim() int64 {
	was := l.Bytes()
	for k := l.freeKeys; k != nil; {
		next := k.next
		l.valueBytes -= int64(k.vbytes)
		*k = lockKey{}
		k = next
	}
	l.freeKeys, l.nfreeKeys = nil, 0
	for it := l.freeItems; it != nil; {
		next := it.next
		l.itemBytes -= it.bufs()
		*it = lockItem{}
		it = next
	}
	l.freeItems, l.nfreeItems = nil, 0
	l.arena, l.tmp, l.htmp, l.addBuf = nil, nil, nil, nil
	if len(l.shrinkDue) > 0 {
		l.shrinkKeys()
	}
	return was - l.Bytes()
}

// Orphans returns the number of queued requests whose connection has closed.
func (l *Locks) Orphans() int { return l.orphans }

// EvictOrphans times out queued requests whose connection has closed, oldest first, until
// what they cost adds up to need bytes or none is left, then lets go of what is kept for
// reuse (Trim), as if their wait had run out:
// each gets its TIMEOUT (delivered to a later connection with its ClientId, if one came)
// and, with WaitReverses, its request runs again on the reversed key, as at its
// timeout. The replies and EXECUTEs are appended as Do appends them. It returns the bytes
// freed (as Bytes counts them) and the number of requests timed out.
//
// It walks the deadline heap, once per call and only while such requests exist: a closed
// connection's waits are all in it.
func (l *Locks) EvictOrphans(need int64, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec, int64, int) {
	l.begin(replies, execs)
	var freed int64
	n := 0
	if l.orphans > 0 {
		cand := l.evictBuf[:0]
		for i := range l.dl.h {
			if it, ok := l.dl.h[i].d.it.(*lockItem); ok && it.waiting && l.closed(it.owner) {
				cand = append(cand, it)
			}
		}
		slices.SortStableFunc(cand, func(a, b *lockItem) int { return cmp.Compare(a.arrived, b.arrived) })
		var cost int64
		for _, it := range cand {
			if cost >= need {
				break
			}
			// An earlier one's timeout may have granted or reused it.
			if !it.waiting || !l.closed(it.owner) || !it.dl.scheduled() {
				continue
			}
			cost += lockItemObj + it.bufs()
			l.timedOut(it, now)
			n++
		}
		clear(cand)
		l.evictBuf = cand[:0]
		if n > 0 {
			freed = l.Trim() // the items went to be reused: let them go
		}
	}
	r, e := l.end()
	return r, e, freed, n
}
