package store

import "encoding/binary"

// This file holds the Redis side's operations on values that the store
// runs whole: INCRBY (a Lock with Add) and the versions WATCH compares.

// add runs Lock c with Add from o at now: it reads the key's value as an
// integer, as Redis's INCRBY does (no value is 0, a NUMBER its i64, a string
// its decimal text), adds c.Delta and runs c with its SET record's value
// replaced by the sum, as a NUMBER. A value that is not an integer answers
// LockNotInteger and a sum that overflows LockOverflow, changing nothing. An
// Add never waits (its Timeout is taken as 0), and its reply carries the
// value it made.
func (l *Locks) add(o Owner, c *LockCommand, now int64) {
	if c.DB > MaxLockDB {
		l.reply(o, c, LockUnknownDB, c.LockID, 0, 0, nil)
		return
	}
	k := l.key(c.DB, c.Key)
	r, ok := parseRecord(c.Data)
	if !ok || r.cmd != dataSet || r.stage != stageCurrent {
		l.reply(o, c, LockUnknownCommand, c.LockID, k.levelsOf(), 0, nil)
		return
	}
	var base int64
	if k != nil && k.has {
		v, _ := parseRecord(k.value)
		if base, ok = recordInt(&v); !ok {
			l.reply(o, c, LockNotInteger, c.LockID, k.levels, 0, nil)
			return
		}
	}
	sum := base + c.Delta
	if (sum > base) != (c.Delta > 0) {
		l.reply(o, c, LockOverflow, c.LockID, k.levelsOf(), 0, nil)
		return
	}
	var num [8]byte
	binary.LittleEndian.PutUint64(num[:], uint64(sum))
	l.addBuf = appendRecord(l.addBuf[:0], r.flag&^dataArray|dataNumber, r.props, num[:])
	c.Wait.N = 0
	i := len(l.out)
	l.lock(o, c, l.addBuf, now)
	if i < len(l.out) && (l.out[i].Result == LockOK || l.out[i].Result == LockLockedError) {
		l.out[i].Value = l.current(l.key(c.DB, c.Key))
	}
	if cap(l.addBuf) > lockKeepBytes {
		l.addBuf = nil
	}
}

// recordInt reads value record v as an integer: a NUMBER's i64, a string's
// decimal text in Redis's one form (see parseDecimal); false for an array, a
// KV value or other text.
func recordInt(v *record) (int64, bool) {
	switch {
	case v.cmd == dataUnset:
		return 0, true
	case v.flag&dataNumber != 0:
		return int64(leUint(v.value, 8)), true
	case v.flag&(dataArray|dataKV) != 0:
		return 0, false
	}
	return parseDecimal(v.value)
}

// dataKV is the data flag of a value of key, value pairs.
const dataKV = 0x04

// parseDecimal parses b as Redis's string2ll does: an optional '-' and
// decimal digits, no leading zeros ("0" alone is zero), no '+', no spaces,
// no "-0", and a value that fits an int64.
func parseDecimal(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || d[0] < '0' || d[0] > '9' || d[0] == '0' && (len(d) > 1 || neg) {
		return 0, false
	}
	var v uint64
	for _, c := range d {
		if c < '0' || c > '9' || v > (1<<63)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
		if v > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(v), true // 1<<63 wraps to MinInt64, as intended
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// watch is the version of a watched key.
type watch struct {
	n   int    // connections watching it
	ver uint64 // changes with each modification of the key while watched
}

// Watch starts one watch of key in db (Redis's WATCH) and returns its version:
// WatchVersion returns another once the key's value has been set, deleted,
// expired or flushed, or its expiry changed. Each Watch needs an Unwatch.
func (l *Locks) Watch(db uint8, key [16]byte) uint64 {
	if l.watches == nil {
		l.watches = make(map[keyRef]*watch)
	}
	ref := keyRef{db, key}
	w := l.watches[ref]
	if w == nil {
		w = &watch{ver: l.wseq}
		l.watches[ref] = w
	}
	w.n++
	return w.ver
}

// Unwatch ends one Watch of key in db.
func (l *Locks) Unwatch(db uint8, key [16]byte) {
	ref := keyRef{db, key}
	if w := l.watches[ref]; w != nil {
		if w.n--; w.n <= 0 {
			delete(l.watches, ref)
		}
	}
}

// WatchVersion returns the version of key in db, which must be watched.
func (l *Locks) WatchVersion(db uint8, key [16]byte) uint64 {
	if w := l.watches[keyRef{db, key}]; w != nil {
		return w.ver
	}
	return ^uint64(0)
}

// Watched returns the number of keys watched.
func (l *Locks) Watched() int { return len(l.watches) }

// modified notes that k's value or expiry changed: a watch of it sees a new
// version. It costs a length test while nothing is watched.
func (l *Locks) modified(k *lockKey) {
	if len(l.watches) == 0 {
		return
	}
	if w := l.watches[keyRef{k.db.id, k.key}]; w != nil {
		l.wseq++
		w.ver = l.wseq
	}
}
