package store

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// LockInfo is a key as the CALL listings show it.
type LockInfo struct {
	Key    [16]byte
	Levels uint32   // levels held on the key
	Data   LockData // its value; Record nil for none
}

// HolderInfo is one holder of a key as LIST_LOCKED shows it. Times are Unix
// seconds.
type HolderInfo struct {
	LockID   [16]byte
	Start    int64 // when it was granted
	Timeout  int64 // when the wait of the request that took it would have timed out
	Expires  int64 // when it expires; math.MaxInt64 if it never does or its open connection keeps it alive
	Levels   uint8
	LongTime bool        // it is held for more than a minute
	Command  LockCommand // the latest Lock or Update on it, Data nil
}

// WaiterInfo is one queued request as LIST_WAIT shows it. Times are Unix
// seconds.
type WaiterInfo struct {
	LockID   [16]byte
	Start    int64 // when it arrived
	Timeout  int64 // when it times out; math.MaxInt64 while its open connection keeps it waiting
	LongTime bool  // its wait is longer than a minute
	Command  LockCommand
}

// ListStatus tells why a listing is empty.
type ListStatus uint8

// The listing outcomes.
const (
	ListOK     ListStatus = iota
	ListNoDB              // no database with that DbId
	ListNoLock            // the key has no holder
)

// longTime is the hold or wait beyond which a listing marks it long.
const longTime = 60 * 1e9

// ListLocks appends every key of database db that has a holder to out, in
// key order, and reports whether the database exists. Data records are
// valid until the next call on the Locks.
func (l *Locks) ListLocks(db uint8, out []LockInfo) ([]LockInfo, bool) {
	l.begin(nil, nil)
	if db > MaxLockDB || l.dbs[db] == nil {
		return out, false
	}
	start := len(out)
	for _, k := range l.dbs[db].keys {
		if k.hold.n > 0 {
			out = append(out, l.info(k))
		}
	}
	slices.SortFunc(out[start:], func(a, b LockInfo) int { return bytes.Compare(a.Key[:], b.Key[:]) })
	return out, true
}

// ListLocked returns key of database db and appends its holders, oldest
// first, to out.
func (l *Locks) ListLocked(db uint8, key [16]byte, out []HolderInfo) (LockInfo, []HolderInfo, ListStatus) {
	l.begin(nil, nil)
	k, st := l.listed(db, key)
	if st != ListOK {
		return LockInfo{}, out, st
	}
	for h := k.hold.head; h != nil; h = h.next {
		hi := HolderInfo{
			LockID: h.cmd.LockID, Start: h.start / 1e9, Levels: h.levels, Command: h.cmd,
			Timeout: dueAt(h.arrived, h.cmd.waitSpan()) / 1e9, Expires: math.MaxInt64,
		}
		if h.dl.scheduled() {
			hi.Expires = h.dl.at / 1e9
			hi.LongTime = h.dl.at-h.start > longTime
		} else {
			hi.LongTime = true
		}
		out = append(out, hi)
	}
	return l.info(k), out, ListOK
}

// ListWait returns key of database db and appends its queued requests, in
// queue order, to out.
func (l *Locks) ListWait(db uint8, key [16]byte, out []WaiterInfo) (LockInfo, []WaiterInfo, ListStatus) {
	l.begin(nil, nil)
	k, st := l.listed(db, key)
	if st != ListOK {
		return LockInfo{}, out, st
	}
	for w := k.wait.head; w != nil; w = w.next {
		wi := WaiterInfo{LockID: w.cmd.LockID, Start: w.arrived / 1e9, Timeout: math.MaxInt64, LongTime: true, Command: w.cmd}
		if w.dl.scheduled() {
			wi.Timeout = w.dl.at / 1e9
			wi.LongTime = w.dl.at-w.arrived > longTime
		}
		out = append(out, wi)
	}
	return l.info(k), out, ListOK
}

// listed returns key of database db for a listing of its holders or waiters.
func (l *Locks) listed(db uint8, key [16]byte) (*lockKey, ListStatus) {
	if db > MaxLockDB || l.dbs[db] == nil {
		return nil, ListNoDB
	}
	k := l.dbs[db].keys[key]
	if k == nil || k.hold.n == 0 {
		return nil, ListNoLock
	}
	return k, ListOK
}

// info describes k, its value copied to the arena.
func (l *Locks) info(k *lockKey) LockInfo {
	li := LockInfo{Key: k.key, Levels: k.levels}
	if k.has {
		li.Data.Record = l.save(k.value)
		r, _ := parseRecord(li.Data.Record)
		li.Data.Value, li.Data.Flag, li.Data.Command = r.value, r.flag, k.valueCmd
	}
	return li
}

// Check verifies the invariants of the namespace: every key has a holder or
// a waiter and sits in its database's map under its name; its levels are
// the sum of its holders' levels and no two holders share a LockId; its
// queue is in priority order; every holder and waiter is either in the
// deadline heap or on its owner's keep-alive list (or, for a holder that
// never expires, neither), and nothing else is in either; owners' waiter
// counts are right; each database's gauges are the actual numbers; the
// value parses. It scans everything; it is meant for tests.
func (l *Locks) Check() error {
	for ref, w := range l.watches {
		if w.n <= 0 || w.ver > l.wseq || ref.db > MaxLockDB {
			return fmt.Errorf("store: watch of key %x of db %d: %d watchers, version %d of %d", ref.key, ref.db, w.n, w.ver, l.wseq)
		}
	}
	scheduled, aging, kept, keys, items, indexed, orphans, dirty := 0, 0, 0, 0, 0, 0, 0, 0
	var vbytes, ibytes, vals, maps int64
	waits := map[Owner]int{}
	for id, d := range l.dbs {
		if d == nil {
			continue
		}
		if int(d.id) != id {
			return fmt.Errorf("store: lock db %d filed as %d", d.id, id)
		}
		if err := l.checkValues(d); err != nil {
			return err
		}
		if err := checkNamedDB(d); err != nil {
			return err
		}
		if d.peak < len(d.keys) {
			return fmt.Errorf("store: lock db %d: %d keys, largest %d", id, len(d.keys), d.peak)
		}
		vals += int64(cap(d.vals)) * valueSlot
		maps += int64(d.peak) * lockKeyEntry
		for _, o := range d.olds {
			maps += int64(o.peak) * lockKeyEntry
		}
		var levels, waiting uint32
		nold, nwaited := 0, 0
		for mi, m := range d.keyMaps() {
			for name, k := range m {
				if err := checkGeneration(d, k, mi > 0); err != nil {
					return err
				}
				if mi > 0 {
					nold++
				}
				if k.wait.n > 0 {
					nwaited++
				}
				keys++
				if k.dirty {
					dirty++
				}
				vbytes += int64(k.vbytes)
				switch {
				case k.key != name || k.db != d:
					return fmt.Errorf("store: lock key %x of db %d filed as %x of db %d", k.key, k.db.id, name, id)
				case k.hold.n == 0 && k.wait.n == 0:
					return fmt.Errorf("store: lock key %x of db %d has no holder and no waiter", name, id)
				}
				if err := checkNamed(d, k, mi > 0); err != nil {
					return err
				}
				if k.has {
					if r, ok := parseRecord(k.value); !ok || len(r.raw) != len(k.value) || k.value[4] != 0 {
						return fmt.Errorf("store: lock key %x of db %d: bad value record %x", name, id, k.value)
					}
				}
				var sum uint32
				n := 0
				ids := map[[16]byte]bool{}
				var prev *lockItem
				for h := k.hold.head; h != nil; h = h.next {
					if n++; n > k.hold.n {
						return fmt.Errorf("store: lock key %x: holder list longer than its count %d", name, k.hold.n)
					}
					switch {
					case h.prev != prev || h.k != k || h.waiting:
						return fmt.Errorf("store: lock key %x: holder %d: bad link %v, key %v, waiting %v", name, n, h.prev != prev, h.k == k, h.waiting)
					case h.levels == 0:
						return fmt.Errorf("store: lock key %x: holder %x holds no level", name, h.cmd.LockID)
					case ids[h.cmd.LockID]:
						return fmt.Errorf("store: lock key %x: two holders with LockId %x", name, h.cmd.LockID)
					case k.byID != nil && k.byID[h.cmd.LockID] != h:
						return fmt.Errorf("store: lock key %x: holder %x missing from the index", name, h.cmd.LockID)
					}
					if err := l.checkTimed(h, h.cmd.holdKept(), h.cmd.neverExpires()); err != nil {
						return fmt.Errorf("store: lock key %x: holder %x: %v", name, h.cmd.LockID, err)
					}
					if h.dl.scheduled() {
						scheduled++
						if h.cmd.ExpireAt != 0 && h.dl.at != msDeadline(h.cmd.ExpireAt) {
							return fmt.Errorf("store: lock key %x: holder %x due at %d, its exact expiry is %d ms", name, h.cmd.LockID, h.dl.at, h.cmd.ExpireAt)
						}
					}
					if h.pdl.scheduled() {
						aging++
						switch {
						case l.aging.h[h.pdl.i-1].d != &h.pdl:
							return fmt.Errorf("store: lock key %x: holder %x: aging handle points at another item", name, h.cmd.LockID)
						case h.pdl.at != h.start+l.cfg.PersistAfter:
							return fmt.Errorf("store: lock key %x: holder %x granted at %d ages at %d, not %d later",
								name, h.cmd.LockID, h.start, h.pdl.at, l.cfg.PersistAfter)
						}
					}
					if h.ko != nil {
						kept++
					}
					if k.byID != nil {
						indexed++
					}
					items++
					ibytes += h.bufs()
					ids[h.cmd.LockID] = true
					sum += uint32(h.levels)
					prev = h
				}
				switch {
				case n != k.hold.n || k.hold.tail != prev:
					return fmt.Errorf("store: lock key %x: %d holders counted %d", name, n, k.hold.n)
				case sum != k.levels:
					return fmt.Errorf("store: lock key %x: levels %d, holders hold %d", name, k.levels, sum)
				case k.byID != nil && len(k.byID) != n:
					return fmt.Errorf("store: lock key %x: %d holders, %d indexed", name, n, len(k.byID))
				}
				n, prev = 0, nil
				for w := k.wait.head; w != nil; w = w.next {
					if n++; n > k.wait.n {
						return fmt.Errorf("store: lock key %x: queue longer than its count %d", name, k.wait.n)
					}
					switch {
					case w.prev != prev || w.k != k || !w.waiting || !w.waitsCounted:
						return fmt.Errorf("store: lock key %x: waiter %d: bad link %v, key %v, waiting %v, counted %v",
							name, n, w.prev != prev, w.k == k, w.waiting, w.waitsCounted)
					case prev != nil && prev.prio < w.prio:
						return fmt.Errorf("store: lock key %x: waiter %d of priority %d behind one of %d", name, n, w.prio, prev.prio)
					case w.cmd.Wait.N == 0:
						return fmt.Errorf("store: lock key %x: waiter %x has Timeout 0", name, w.cmd.LockID)
					case len(w.execs) != 0:
						return fmt.Errorf("store: lock key %x: waiter %x has EXECUTEs attached", name, w.cmd.LockID)
					}
					if err := l.checkTimed(w, w.cmd.waitKept(), false); err != nil {
						return fmt.Errorf("store: lock key %x: waiter %x: %v", name, w.cmd.LockID, err)
					}
					if w.dl.scheduled() {
						scheduled++
					}
					if w.ko != nil {
						kept++
					}
					if l.closed(w.owner) {
						orphans++
					}
					items++
					ibytes += w.bufs()
					waits[w.owner]++
					prev = w
				}
				if n != k.wait.n || k.wait.tail != prev {
					return fmt.Errorf("store: lock key %x: %d waiters counted %d", name, n, k.wait.n)
				}
				levels += k.levels
				waiting += uint32(n)
			}
		}
		if d.waited.n != nwaited {
			return fmt.Errorf("store: lock db %d: %d keys on the waited list, %d have waiters", id, d.waited.n, nwaited)
		}
		if d.st.LockedCount != levels || d.st.WaitCount != waiting || d.st.KeyCount != uint32(len(d.keys)+nold) {
			return fmt.Errorf("store: lock db %d: gauges %d locked, %d waiting, %d keys; have %d, %d, %d",
				id, d.st.LockedCount, d.st.WaitCount, d.st.KeyCount, levels, waiting, len(d.keys)+nold)
		}
	}
	n := 0
	for k := l.freeKeys; k != nil; k = k.next {
		if n++; n > l.nfreeKeys {
			return fmt.Errorf("store: more free lock keys than the %d counted", l.nfreeKeys)
		}
		if k.vbytes != int(allocSize(cap(k.value))) {
			return fmt.Errorf("store: free lock key counts %d value bytes, its buffer takes %d", k.vbytes, allocSize(cap(k.value)))
		}
		vbytes += int64(k.vbytes)
	}
	if n != l.nfreeKeys {
		return fmt.Errorf("store: %d free lock keys, counted %d", n, l.nfreeKeys)
	}
	n = 0
	for it := l.freeItems; it != nil; it = it.next {
		if n++; n > l.nfreeItems {
			return fmt.Errorf("store: more free lock items than the %d counted", l.nfreeItems)
		}
		ibytes += it.bufs()
	}
	if n != l.nfreeItems {
		return fmt.Errorf("store: %d free lock items, counted %d", n, l.nfreeItems)
	}
	switch {
	case items != l.nitems || indexed != l.nindexed || orphans != l.orphans:
		return fmt.Errorf("store: %d lock items, %d indexed, %d of closed connections; counted %d, %d, %d",
			items, indexed, orphans, l.nitems, l.nindexed, l.orphans)
	case ibytes != l.itemBytes || vals != l.valsBytes || maps != l.mapBytes:
		return fmt.Errorf("store: lock items' buffers, value tables, key maps take %d, %d, %d bytes; counted %d, %d, %d",
			ibytes, vals, maps, l.itemBytes, l.valsBytes, l.mapBytes)
	case dirty != l.ndirty:
		return fmt.Errorf("store: %d lock keys in the journal, counted %d", dirty, l.ndirty)
	case keys != l.nkeys:
		return fmt.Errorf("store: %d lock keys, counted %d", keys, l.nkeys)
	case vbytes != l.valueBytes:
		return fmt.Errorf("store: lock values hold %d bytes, counted %d", vbytes, l.valueBytes)
	case l.cfg.MaxKeys > 0 && keys > l.cfg.MaxKeys:
		return fmt.Errorf("store: %d lock keys, limit %d", keys, l.cfg.MaxKeys)
	case scheduled != countIn[*lockItem](l.dl):
		return fmt.Errorf("store: %d lock items in the deadline heap, %d scheduled", countIn[*lockItem](l.dl), scheduled)
	case aging != countIn[*agedItem](l.aging):
		return fmt.Errorf("store: %d holders in the aging heap, %d aging", countIn[*agedItem](l.aging), aging)
	}
	if err := l.dl.check(); err != nil {
		return err
	}
	if l.aging != l.dl {
		if err := l.aging.check(); err != nil {
			return err
		}
	}
	nkept, ring := 0, 0
	for id, r := range l.owners {
		switch {
		case r.id != id:
			return fmt.Errorf("store: lock owner %d filed as %d", r.id, id)
		case r.waiters != waits[id]:
			return fmt.Errorf("store: lock owner %d: %d waiters counted, %d queued", id, r.waiters, waits[id])
		case r.gone && r.keep.n != 0:
			return fmt.Errorf("store: lock owner %d: closed, %d items kept alive", id, r.keep.n)
		case r.waiters == 0 && r.keep.n == 0 && !r.inRing:
			return fmt.Errorf("store: lock owner %d: kept for nothing", id)
		case r.inRing && !r.gone:
			return fmt.Errorf("store: lock owner %d: remembered as closed but open", id)
		}
		if r.inRing {
			ring++
		}
		n := 0
		var prev *keptItem
		for it := r.keep.head; it != nil; it = it.kl.next {
			if n++; n > r.keep.n {
				return fmt.Errorf("store: lock owner %d: keep list longer than its count %d", id, r.keep.n)
			}
			if it.kl.prev != prev || it.ko != r || it.owner != id {
				return fmt.Errorf("store: lock owner %d: bad keep-alive item %x", id, it.cmd.LockID)
			}
			prev = it
		}
		if n != r.keep.n || r.keep.tail != prev {
			return fmt.Errorf("store: lock owner %d: %d kept counted %d", id, n, r.keep.n)
		}
		nkept += n
		delete(waits, id)
	}
	for id, n := range waits {
		if n != 0 {
			return fmt.Errorf("store: lock owner %d: %d queued requests, no record", id, n)
		}
	}
	switch {
	case nkept != kept:
		return fmt.Errorf("store: %d lock items on keep-alive lists, %d on owners' lists", kept, nkept)
	case ring != len(l.gone):
		return fmt.Errorf("store: %d closed lock owners remembered, ring of %d", ring, len(l.gone))
	}
	return nil
}

// checkTimed checks that it is scheduled xor kept alive by its open
// connection (which it may be if kept), unless never is set, in which case
// it must be neither.
func (l *Locks) checkTimed(it *lockItem, kept, never bool) error {
	s, k := it.dl.scheduled(), it.ko != nil
	switch {
	case s && l.dl.h[it.dl.i-1].d != &it.dl:
		return fmt.Errorf("deadline handle points at another item")
	case never && (s || k):
		return fmt.Errorf("never due, but scheduled %v, kept alive %v", s, k)
	case never:
		return nil
	case s == k:
		return fmt.Errorf("scheduled %v, kept alive %v", s, k)
	case k && !kept:
		return fmt.Errorf("kept alive without the keep-alive flag")
	case k && (it.ko.gone || it.ko.id != it.owner):
		return fmt.Errorf("kept alive by a closed connection or another owner")
	}
	if r := l.owners[it.owner]; s && kept && r != nil && !r.gone {
		return fmt.Errorf("scheduled, but kept alive by its open connection")
	}
	return nil
}

// checkGeneration checks that k is of d's current generation, or of a flushed one (old)
// without waiters.
func checkGeneration(d *lockDB, k *lockKey, old bool) error {
	switch {
	case k.flushed() != old:
		return fmt.Errorf("store: lock key %x of db %d: generation %d, the database's %d, set aside %v", k.key, d.id, k.gen, d.gen, old)
	case old && k.wait.n > 0:
		return fmt.Errorf("store: lock key %x of db %d: flushed with %d waiters", k.key, d.id, k.wait.n)
	}
	return nil
}
