package store

// FLUSHDB and FLUSHALL without stalling (issue 21, item 8: FLUSHALL of 1M keys held the loop
// 2.2 s), as Redis's FLUSHALL ASYNC: the database is empty at once for every reader, and its
// keys are freed a slice at a time (FreeFlushed), between other work.
//
// A flush starts a new generation of the database: its key table is set aside whole as an
// old generation, and an empty one takes its place, as does an empty value table (DBSIZE,
// KEYS and SCAN see nothing). A key of an old generation is gone for every reader (Value,
// TTL, Holds...: key looks in the current table only) and is freed, never found again:
//
//   - by FreeFlushed, a slice at a time;
//   - at once when a command would use its name (live): it is freed first, then the command
//     finds no key, as after a flush that freed everything;
//   - at once when one of its holders falls due (due), instead of expiring.
//
// Freeing a flushed key releases its holders and drops its value, as an Unlock of every
// holder would, without a reply and without running EXECUTEs (as the flush did before). Keys
// with waiters are not set aside: the flush handles them at once, as before (their holders
// go, their waiters are granted in their order, with their replies), so that no reply ever
// comes from a key that readers no longer see. The waited list of each database finds them
// without a walk.
//
// The journal gets one record for the flush (KeyState.Flush), ahead of everything the
// database changes after it; what it changed before the flush is dropped from the journal.
// Replayed, the record drops the database's keys restored so far. So a restart never brings
// back a flushed key, however far the freeing had gone, and the flush costs the log one
// record instead of one a key.

// AllDBs is the database number that names every database, for Flush (FLUSHALL) and
// KeyState.Flush.
const AllDBs = 255

// oldGen is a flushed generation of a database's keys, and the most keys its map held: a
// Go map keeps that room until it is dropped (the memory budget counts it till then).
type oldGen struct {
	keys map[[16]byte]*lockKey
	peak int
}

// keyMaps returns d's key maps: the current generation's, then the flushed ones'.
func (d *lockDB) keyMaps() []map[[16]byte]*lockKey {
	ms := []map[[16]byte]*lockKey{d.keys}
	for _, o := range d.olds {
		ms = append(ms, o.keys)
	}
	return ms
}

// waitedKey is a key as its database's waited list sees it.
type waitedKey lockKey

func (k *waitedKey) link() *links[waitedKey] { return &k.wl }

// Flush empties db, or every database with AllDBs, as if every holder of every key had been
// unlocked at once, and drops the values: readers see the database empty from now on. The
// waiters of its keys are granted in their order at once (their replies and EXECUTEs are
// appended as Do does); the other keys are freed later, by FreeFlushed or when a command
// uses their name. Expiry pushes are not sent. It returns the number of keys it set aside.
func (l *Locks) Flush(db uint8, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec, int) {
	l.begin(replies, execs)
	n := l.flush(db, now, true)
	r, e := l.end()
	return r, e, n
}

// flush runs a Flush inside a call; journal says whether the journal records it (a Restore
// of a flush record does not).
func (l *Locks) flush(db uint8, now int64, journal bool) int {
	if db != AllDBs && db > MaxLockDB {
		return 0
	}
	if journal && l.cfg.Persist {
		l.journalFlush(db)
	}
	n := 0
	for id := range l.dbs {
		if d := l.dbs[id]; d != nil && (db == AllDBs || int(db) == id) {
			n += l.flushDB(d, now)
		}
	}
	return n
}

// flushDB sets d's keys aside as an old generation, once those with waiters are handled.
func (l *Locks) flushDB(d *lockDB, now int64) int {
	// Watches see a change of every key that has a value (its freeing will not tell them).
	for ref, w := range l.watches {
		if ref.db == d.id {
			if k := d.keys[ref.key]; k != nil && k.has {
				l.wseq++
				w.ver = l.wseq
			}
		}
	}
	var waited []*lockKey
	for k := d.waited.head; k != nil; k = k.wl.next {
		waited = append(waited, (*lockKey)(k))
	}
	for _, k := range waited {
		l.cow(k) // before its generation changes (saveKey)
	}
	n := len(d.keys) - len(waited)
	if n > 0 {
		old := d.keys
		for _, k := range waited {
			delete(old, k.key)
		}
		d.olds = append(d.olds, oldGen{keys: old, peak: d.peak}) // its room stays counted until it goes
		d.keys = make(map[[16]byte]*lockKey, len(waited))
		d.peak = len(waited)
		l.mapBytes += int64(len(waited)) * lockKeyEntry
		for _, k := range waited {
			d.keys[k.key] = k
		}
		d.gen++
		for _, k := range waited {
			k.gen = d.gen
		}
		l.renamed(d, waited) // the "Locks and DEL" link: the keys set aside go from it
		// The value table goes with the generation: a key set aside keeps a slot in it
		// that freeOld ignores; those handled at once find their place in the new one.
		l.valsBytes -= int64(cap(d.vals)) * valueSlot
		d.vals = nil
		for _, k := range waited {
			k.vslot = 0
			if k.has {
				l.syncValue(k)
			}
		}
	}
	for _, k := range waited {
		l.flushKey(k, now)
	}
	return n
}

// flushKey releases every holder of k and drops its value, as Unlocks would; its waiters
// are then granted in their order. A key with waiters only (waiting while it is unlocked)
// is left as it is.
func (l *Locks) flushKey(k *lockKey, now int64) {
	if k.hold.n == 0 {
		return
	}
	for h := k.hold.head; h != nil; h = k.hold.head {
		l.removeHolder(h)
		l.freeItem(h)
	}
	if k.has {
		k.has = false
		l.syncValue(k)
		l.changed(k)
		l.modified(k)
	}
	l.wake(k, now)
	l.settle(k)
}

// journalFlush drops from the journal what the flush of db supersedes, and records the
// flush in its place.
func (l *Locks) journalFlush(db uint8) {
	in := func(r keyRef) bool { return db == AllDBs || r.db == db }
	kept := l.dirty[:0]
	for _, k := range l.dirty {
		switch {
		case !k.dirty: // freed since, or listed again after a reuse
		case in(keyRef{db: k.db.id}):
			k.dirty = false
			l.ndirty--
		default:
			kept = append(kept, k)
		}
	}
	clear(l.dirty[len(kept):])
	l.dirty = kept
	gone := l.goneKeys[:0]
	for _, r := range l.goneKeys {
		if !in(r) {
			gone = append(gone, r)
		}
	}
	l.goneKeys = gone
	if db == AllDBs {
		l.flushes = l.flushes[:0]
	}
	l.flushes = append(l.flushes, db)
	l.changes++
}

// live returns key in d for a command that uses it: a key of d's current generation, or nil;
// a key of a flushed generation with that name is freed first.
func (l *Locks) live(d *lockDB, key [16]byte) *lockKey {
	k := d.keys[key]
	if k != nil || len(d.olds) == 0 {
		return k
	}
	for _, o := range d.olds {
		if k := o.keys[key]; k != nil {
			delete(o.keys, key)
			l.freeOld(k)
			break
		}
	}
	return nil
}

// freeOld frees k, a key of a flushed generation already taken out of its table: its
// holders go and its value (it has no waiters), without replies, as the flush would have.
func (l *Locks) freeOld(k *lockKey) {
	l.cow(k)              // a backup that began before the flush has it
	l.setLogged(k, false) // the flush's record says it is gone
	for h := k.hold.head; h != nil; h = k.hold.head {
		l.removeHolder(h)
		l.freeItem(h)
	}
	if k.dirty {
		k.dirty = false
		l.ndirty--
	}
	if k.has {
		l.modified(k)
		k.has = false
	}
	k.vslot = 0 // its slot was in the value table the flush dropped
	l.settle(k)
}

// flushedDue frees k, a key of a flushed generation one of whose holders fell due (due).
func (l *Locks) flushedDue(k *lockKey) {
	for _, o := range k.db.olds {
		if o.keys[k.key] == k {
			delete(o.keys, k.key)
			break
		}
	}
	l.freeOld(k)
}

// FreeFlushed frees up to max keys of the generations that flushes set aside, and reports
// whether some are left. It makes no reply. The caller runs it a slice at a time, between
// other work, while Flushing reports true.
func (l *Locks) FreeFlushed(max int) (more bool) {
	for _, d := range l.dbs {
		if d == nil || len(d.olds) == 0 {
			continue
		}
		for len(d.olds) > 0 && max > 0 {
			m := d.olds[0].keys
			for key, k := range m {
				if max <= 0 {
					break
				}
				delete(m, key)
				l.freeOld(k)
				max--
			}
			if len(m) == 0 { // the generation's map goes, and its room with it
				l.mapBytes -= int64(d.olds[0].peak) * lockKeyEntry
				d.olds[0] = oldGen{}
				d.olds = d.olds[1:]
			}
		}
		if len(d.olds) > 0 {
			return true
		}
	}
	return false
}

// Flushing reports whether keys that flushes set aside remain to be freed.
func (l *Locks) Flushing() bool {
	for _, d := range l.dbs {
		if d != nil && len(d.olds) > 0 {
			return true
		}
	}
	return false
}

// flushed reports whether k belongs to a flushed generation.
func (k *lockKey) flushed() bool { return k.gen != k.db.gen }
