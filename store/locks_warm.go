package store

// This file warms the CPU's caches for a run of restores: a follower applies a raft entry
// of a few hundred records, each of a key anywhere among many, and restoring one is mostly
// waiting for memory (the key's map slot, the key, its holder, its value), one load after
// another. Looking the keys up first, all of them, then touching their holders and values,
// lets the CPU fetch many at once; the restores then find them in the cache.

// KeyName names a key of a database.
type KeyName struct {
	DB  uint8
	Key [16]byte
}

// Warm loads into the CPU's caches what restoring the keys named would read. It changes
// nothing (its result is a sum the Locks keep, so that the compiler keeps the loads).
func (l *Locks) Warm(names []KeyName) {
	keys := l.warmKeys[:0]
	for i := range names {
		n := &names[i]
		if n.DB > MaxLockDB || l.dbs[n.DB] == nil {
			continue
		}
		if k := l.dbs[n.DB].keys[n.Key]; k != nil {
			keys = append(keys, k)
		}
	}
	var sum uint64
	items := l.warmItems[:0]
	for _, k := range keys { // a lockKey spans several cache lines: one load in each
		sum += uint64(k.levels) + uint64(k.vbytes) + k.fence
		if k.hold.head != nil {
			items = append(items, k.hold.head)
		}
		if len(k.value) > 0 {
			sum += uint64(k.value[0])
		}
	}
	for _, h := range items { // so does a lockItem
		sum += uint64(h.dl.i) + uint64(h.cmd.Count) + uint64(h.cmd.Client) + uint64(h.start) + uint64(h.pdl.i) + h.token
	}
	l.warmSum += sum
	clear(keys)
	clear(items)
	if cap(keys) > lockFreeKeys {
		keys, items = nil, nil
	}
	l.warmKeys, l.warmItems = keys, items
}
