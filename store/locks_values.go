package store

import "fmt"

// This file keeps, for each database, a table of its keys that have a value,
// so that SCAN can walk them with a stable cursor and DBSIZE can count them
// without a walk.
//
// The table is a slice with swap-remove: a key that gets a value is appended,
// one that loses it is replaced by the last key. A scan walks the slice from
// the end down, and its cursor is the number of slots still to visit. A key
// only ever moves to a lower slot (the last key into a hole), so a key not yet
// visited stays below the cursor: a key that has a value for the whole scan is
// returned at least once, whatever is added and removed meanwhile. A key moved
// from above the cursor to below it is returned twice, as Redis allows.

// syncValue puts k in its database's value table or takes it out, as k.has
// says, and counts its value's buffer. Every change of a key's value ends with
// it.
func (l *Locks) syncValue(k *lockKey) {
	n := int(allocSize(cap(k.value)))
	l.valueBytes += int64(n - k.vbytes)
	k.vbytes = n
	d := k.db
	was := cap(d.vals)
	switch {
	case k.has && k.vslot == 0:
		d.vals = append(d.vals, k)
		k.vslot = int32(len(d.vals))
	case !k.has && k.vslot != 0:
		l.valueMoves++
		i, n := int(k.vslot-1), len(d.vals)-1
		last := d.vals[n]
		d.vals[i] = last
		last.vslot = int32(i + 1)
		d.vals[n] = nil
		d.vals = d.vals[:n]
		k.vslot = 0
		if c := cap(d.vals); c > 1024 && n < c/4 {
			d.vals = append([]*lockKey(nil), d.vals...)
		}
	}
	l.valsBytes += int64(cap(d.vals)-was) * valueSlot
}

// Bytes estimates the memory the slock state takes (memcost.go): keys, holders and
// waiters, live and kept for reuse, with their values, data records and EXECUTEs, the
// maps and tables that find them, the connections the Locks knows of, watched keys,
// and the buffers of the call. It is kept as the state changes; reading it never scans.
func (l *Locks) Bytes() int64 {
	n := int64(l.nkeys+l.nfreeKeys)*lockKeyObj + int64(l.nitems+l.nfreeItems)*lockItemObj +
		l.valueBytes + l.itemBytes + l.valsBytes + l.mapBytes + int64(l.nindexed)*lockIndexEntry +
		int64(len(l.owners))*lockOwnerCost + int64(len(l.watches))*watchCost +
		int64(cap(l.arena)+cap(l.tmp)+cap(l.htmp)+cap(l.addBuf))
	if !l.shared {
		n += int64(cap(l.dl.h)+cap(l.aging.h)) * heapSlot
	}
	return n
}

// ValueRemovals counts the keys that lost their value, in any database, since the Locks
// were made. A walk of ScanValues over which it did not change passed each key once.
func (l *Locks) ValueRemovals() uint64 { return l.valueMoves }

// ValueCount returns the number of keys of db that have a value.
func (l *Locks) ValueCount(db uint8) int {
	if db > MaxLockDB || l.dbs[db] == nil {
		return 0
	}
	return len(l.dbs[db].vals)
}

// ScanValues calls fn with up to count keys of db that have a value and
// their value records (views, valid until the next call that changes the
// Locks; fn must not change the Locks), and returns the cursor to pass next.
// A scan starts with cursor 0 and is complete when ScanValues returns 0. A
// key that has a value from the first call of a scan to its last is passed
// to fn at least once; keys added or removed meanwhile may or may not be.
// Any cursor is safe: one that no call returned just walks from some point.
func (l *Locks) ScanValues(db uint8, cursor uint64, count int, fn func(key [16]byte, value []byte)) (next uint64) {
	if db > MaxLockDB || l.dbs[db] == nil {
		return 0
	}
	vals := l.dbs[db].vals
	c := uint64(len(vals))
	if cursor != 0 && cursor < c {
		c = cursor
	}
	for ; count > 0 && c > 0; count-- {
		c--
		k := vals[c]
		fn(k.key, k.value)
	}
	return c
}

// checkValues verifies d's value table: exactly the keys of d with a value,
// each knowing its slot.
func (l *Locks) checkValues(d *lockDB) error {
	n := 0
	for _, k := range d.keys {
		if k.has {
			n++
		}
		if want := int(allocSize(cap(k.value))); k.vbytes != want {
			return fmt.Errorf("store: lock db %d: key %x counts %d value bytes, its buffer takes %d", d.id, k.key, k.vbytes, want)
		}
	}
	if n != len(d.vals) {
		return fmt.Errorf("store: lock db %d: %d keys have a value, its value table has %d", d.id, n, len(d.vals))
	}
	for i, k := range d.vals {
		if k.db != d || !k.has || int(k.vslot) != i+1 || d.keys[k.key] != k {
			return fmt.Errorf("store: lock db %d: value table slot %d holds key %x (slot %d, value %v)", d.id, i, k.key, k.vslot, k.has)
		}
	}
	return nil
}
