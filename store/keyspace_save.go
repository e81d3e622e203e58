package store

// A backup of the keyspace, encoded a slice at a time as one instant (as locks_save.go
// does for the locks): BeginSave fixes the instant and the databases as they are;
// SaveNext walks each database's keys from the last slot down, a few at a time, and emits
// each one's records (RecSet, or RecHSet with RecExpire, and RecFence). A key about to
// change or go before the walk has reached it is emitted first, as it was (cow): the
// copy-on-write Redis's fork gives a BGSAVE, per key. A key made since is marked emitted
// at once, so it is in none of it. A database flushed meanwhile is walked as it was: the
// flush gave the database new arrays and left the old ones, untouched, to the backup.
//
// Which keys are emitted is one bit per entry (fSaved) against the backup's mark, which
// flips with every backup: after a complete walk every key has the old mark, which is
// "not emitted" for the next one. A backup dropped before its end (a later BeginSave, or
// EndSave) leaves the bits mixed; the next BeginSave then sets them all once, O(keys).

// ksSave is a backup being encoded.
type ksSave struct {
	on      bool
	partial bool  // the last backup ended before its walk did: the bits are mixed
	mark    uint8 // 0 or fSaved: an entry whose fSaved bit equals it is emitted, or made since
	now     int64
	dbs     [MaxLockDB + 1]*ksDB // the databases as they were at the instant
	db      int                  // the database being walked
	cur     int                  // its slots still to walk; -1: from its end
	emit    func(*Record)
	rec     Record
	buf     []byte
	keys    uint64
	epoch   uint32 // this backup's number (SaveEpoch)
	bytes   int    // about what the records emitted in this SaveNext take (saveStepBytes)
}

// BeginSave starts a backup of the keyspace as it is at now: emit is called with each key's
// records, by SaveNext and by any change to a key not yet emitted (before the change),
// until SaveNext reports the end or EndSave stops it. The Record is valid during the call
// only; emit must not change the keyspace. A backup in progress is dropped.
func (ks *Keyspace) BeginSave(now int64, emit func(*Record)) {
	sv := &ks.sv
	if sv.on || sv.partial {
		// Every key back to "not emitted" by the mark about to be set.
		for _, n := range ks.live {
			d := ks.dbs[n]
			for i := range d.n {
				d.ent(i).flags = d.ent(i).flags&^fSaved | sv.mark
			}
		}
	}
	sv.mark ^= fSaved
	sv.epoch++
	sv.on, sv.partial, sv.now, sv.emit, sv.keys = true, true, now, emit, 0
	sv.dbs = ks.dbs
	sv.db, sv.cur = 0, -1
}

// SaveNext emits the records of up to n more keys, fewer once the records emitted take
// about saveStepBytes (a key's are emitted whole whatever their size), and reports whether
// the backup is over (then every key there was at its instant has been emitted).
func (ks *Keyspace) SaveNext(n int) bool {
	sv := &ks.sv
	if !sv.on {
		return true
	}
	sv.bytes = 0
	for {
		if sv.db > MaxLockDB {
			sv.partial = false
			ks.EndSave()
			return true
		}
		d := sv.dbs[sv.db]
		if sv.cur < 0 || d != nil && sv.cur > d.n {
			sv.cur = 0
			if d != nil {
				sv.cur = d.n
			}
		}
		if sv.cur == 0 {
			sv.db++
			sv.cur = -1
			continue
		}
		if n == 0 || sv.bytes >= saveStepBytes {
			return false
		}
		sv.cur--
		ks.saveEntry(d, sv.cur)
		n--
	}
}

// EndSave ends the backup in progress, if any: changes emit nothing more.
func (ks *Keyspace) EndSave() {
	sv := &ks.sv
	sv.on, sv.emit = false, nil
	sv.dbs = [MaxLockDB + 1]*ksDB{}
	if cap(sv.buf) > lockKeepBuf {
		sv.buf = nil
	}
}

// Saving reports whether a backup is in progress, and the keys it has emitted.
func (ks *Keyspace) Saving() (bool, uint64) { return ks.sv.on, ks.sv.keys }

// SaveEpoch is the number of the backup in progress, 0 if none: a caller that began one
// tells by it whether it is still its own (a later BeginSave drops it; so does a swap or
// a reset of the keyspace, SwapKeyspace).
func (ks *Keyspace) SaveEpoch() uint32 {
	if !ks.sv.on {
		return 0
	}
	return ks.sv.epoch
}

// cow emits the key at slot s of d to the backup in progress before it changes, unless
// the backup has it.
func (ks *Keyspace) cow(d *ksDB, s int) {
	if sv := &ks.sv; sv.on && sv.dbs[d.id] == d && d.ent(s).flags&fSaved != sv.mark {
		ks.saveEntry(d, s)
	}
}

// saveEntry emits the key at slot s of d as it is, unless emitted already or past its
// expiry at the backup's instant.
func (ks *Keyspace) saveEntry(d *ksDB, s int) {
	sv := &ks.sv
	e := d.ent(s)
	if e.flags&fSaved == sv.mark {
		return
	}
	e.flags = e.flags&^fSaved | sv.mark
	at := d.expiryOf(s)
	if at != 0 && at <= sv.now {
		return
	}
	sv.keys++
	sv.bytes += ks.emitKey(d, s, at, &sv.rec, &sv.buf, sv.emit)
}

// emitKey calls emit with the records that make the key at slot s of d as it is, with
// expiry at (0: none), in r (the large hash's pairs packed in *buf), and returns about
// how many bytes they take encoded.
func (ks *Keyspace) emitKey(d *ksDB, s int, at int64, r *Record, buf *[]byte, emit func(*Record)) int {
	e := d.ent(s)
	*r = Record{DB: d.id, Key: e.key(), At: at}
	switch e.kind {
	case KindString:
		r.Op, r.Kind, r.Value = RecSet, KindString, e.val()
	case KindInt:
		r.Op, r.Kind, r.Int = RecSet, KindInt, e.int()
	case KindHash:
		r.Op, r.Value = RecHSet, e.val()
	case kindBig:
		*buf = (*buf)[:0]
		for f, v := range d.bigs[e.vlen].m {
			*buf = packedAppend(*buf, unsafeBytes(f), unsafeBytes(v))
		}
		r.Op, r.Value = RecHSet, *buf
	}
	n := 24 + len(r.Key) + len(r.Value)
	emit(r)
	if r.Op == RecHSet && at != 0 {
		*r = Record{Op: RecExpire, DB: d.id, Key: e.key(), At: at}
		emit(r)
		n += 16 + len(r.Key)
	}
	if e.flags&fFenced != 0 {
		*r = Record{Op: RecFence, DB: d.id, Key: e.key(), Int: int64(d.fences[string(e.key())])}
		emit(r)
		n += 16 + len(r.Key)
	}
	return n
}

// Restore applies encoded records a backup emitted (or a log holds), in order: Apply,
// record by record.
func (ks *Keyspace) Restore(b []byte) error {
	for len(b) > 0 {
		r, n, err := ReadRecord(b)
		if err != nil {
			return err
		}
		if err := ks.Apply(&r); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
