package store

// This file keeps the journal an append-only log is written from: which keys'
// persistent state changed, and the state itself. The store does no I/O; the
// caller turns each KeyState into a log record.
//
// What persists of a key is its value and its persisting holders (see
// LocksConfig.Persist). A key's record is always its whole state, so the last
// record of a key in a log is its state, and replaying a log is applying its
// records in order (Restore).

// keyRef names a key.
type keyRef struct {
	db  uint8
	key [16]byte
}

// KeyState is a key's persistent state: its value record (nil for none) and its
// persisting holders, oldest first. No holders means the key is gone.
type KeyState struct {
	DB      uint8
	Key     [16]byte
	Value   []byte
	Holders []HolderState
}

// HolderState is one persisting holder.
type HolderState struct {
	LockID                                     [16]byte
	Flag                                       uint8
	Levels                                     uint8
	Rcount                                     uint8
	Count                                      uint16
	Timeout, TimeoutFlag, Expried, ExpriedFlag uint16
	Start                                      int64 // Unix ns it was granted
	Deadline                                   int64 // Unix ns it expires; 0: never
}

// ExpriedFlag bits that decide persistence.
const (
	persistNow   = 0x0100
	persistNever = 0x0200
)

func (it *lockItem) link() *links[lockItem] { return &it.yl }

// changed notes that k's persistent state may have changed.
func (l *Locks) changed(k *lockKey) {
	if !l.cfg.Persist || k.dirty {
		return
	}
	k.dirty = true
	l.dirty = append(l.dirty, keyRef{k.db.id, k.key})
}

// touch notes a change of holder h's parameters or expiry.
func (l *Locks) touch(h *lockItem) {
	if l.cfg.Persist && h.k != nil && h.k.logged && !h.waiting {
		l.changed(h.k)
	}
}

// held notes h's grant: it persists now, or once held PersistAfter.
func (l *Locks) held(h *lockItem) {
	if !l.cfg.Persist {
		return
	}
	ef := h.cmd.ExpriedFlag
	switch {
	case ef&persistNever != 0 || ef&timeKeep != 0:
	case h.k.logged || ef&persistNow != 0 || h.k.has:
		l.changed(h.k)
	default:
		l.young.push(h)
		h.isYoung = true
	}
}

// released notes that h no longer holds its key.
func (l *Locks) released(h *lockItem) {
	if h.isYoung {
		l.young.remove(h)
		h.isYoung = false
	}
	if l.cfg.Persist && h.k.logged {
		l.changed(h.k)
	}
}

// persists reports whether holder h of k is in k's persistent state at now.
func (l *Locks) persists(k *lockKey, h *lockItem, now int64) bool {
	ef := h.cmd.ExpriedFlag
	if ef&persistNever != 0 || ef&timeKeep != 0 {
		return false
	}
	return k.has || ef&persistNow != 0 || now-h.start >= l.cfg.PersistAfter
}

// PersistDue marks the keys whose holders have now been held PersistAfter, for
// the next Journal. The caller runs it from ticks.
func (l *Locks) PersistDue(now int64) {
	for h := l.young.head; h != nil && now-h.start >= l.cfg.PersistAfter; h = l.young.head {
		l.young.remove(h)
		h.isYoung = false
		l.changed(h.k)
	}
}

// NextPersist returns when PersistDue next has work, false if never.
func (l *Locks) NextPersist() (int64, bool) {
	if h := l.young.head; h != nil {
		return h.start + l.cfg.PersistAfter, true
	}
	return 0, false
}

// Journal calls emit with the state of each key whose persistent state changed
// since the last Journal, at now, in the order the changes happened (a gone key
// first). A key that never persisted and still does not is skipped. The
// KeyState and its slices are valid during the call only; emit must not change
// the Locks.
func (l *Locks) Journal(now int64, emit func(*KeyState)) {
	for _, r := range l.goneKeys {
		l.snap = KeyState{DB: r.db, Key: r.key, Holders: l.snap.Holders[:0]}
		emit(&l.snap)
	}
	l.goneKeys = l.goneKeys[:0]
	for _, r := range l.dirty {
		k := l.key(r.db, r.key)
		if k == nil || !k.dirty {
			continue // gone (a record above says so if it ever persisted), or done
		}
		k.dirty = false
		if l.state(k, now) || k.logged {
			k.logged = len(l.snap.Holders) > 0
			emit(&l.snap)
		}
	}
	l.dirty = l.dirty[:0]
	if cap(l.dirty) > lockFreeKeys {
		l.dirty = nil
	}
}

// Journaled reports whether Journal has anything to emit.
func (l *Locks) Journaled() bool { return len(l.dirty) > 0 || len(l.goneKeys) > 0 }

// state fills l.snap with k's persistent state at now and reports whether it
// has any holder.
func (l *Locks) state(k *lockKey, now int64) bool {
	s := &l.snap
	*s = KeyState{DB: k.db.id, Key: k.key, Holders: s.Holders[:0]}
	for h := k.hold.head; h != nil; h = h.next {
		if !l.persists(k, h, now) {
			continue
		}
		c := &h.cmd
		var at int64
		if h.dl.scheduled() {
			at = h.dl.at
		}
		s.Holders = append(s.Holders, HolderState{LockID: c.LockID, Flag: c.Flag, Levels: h.levels,
			Rcount: c.Rcount, Count: c.Count, Timeout: c.Timeout, TimeoutFlag: c.TimeoutFlag,
			Expried: c.Expried, ExpriedFlag: c.ExpriedFlag, Start: h.start, Deadline: at})
	}
	if len(s.Holders) > 0 && k.has {
		s.Value = k.value
	}
	return len(s.Holders) > 0
}

// Logged appends to out every key whose latest log record has holders: what a
// compacted log must hold. Pass them to Snapshot, a few at a time.
func (l *Locks) Logged(out []LoggedKey) []LoggedKey {
	for _, d := range l.dbs {
		if d == nil {
			continue
		}
		for id, k := range d.keys {
			if k.logged {
				out = append(out, LoggedKey{keyRef{d.id, id}})
			}
		}
	}
	return out
}

// LoggedKey names a key Logged found.
type LoggedKey struct{ r keyRef }

// Snapshot calls emit with key's persistent state at now if its latest log
// record still has holders; otherwise it does nothing (the journal has recorded
// its end).
func (l *Locks) Snapshot(key LoggedKey, now int64, emit func(*KeyState)) {
	k := l.key(key.r.db, key.r.key)
	if k == nil || !k.logged || !l.state(k, now) {
		return
	}
	emit(&l.snap)
}

// Restore replaces the state of a key by s, read back from a log at now: its
// holders (owned by no connection) with the time they have left, and its value
// while it has one. Holders past their deadline are dropped, and with them a
// key that has none left. Replies its changes would cause are not made.
func (l *Locks) Restore(s *KeyState, now int64) {
	if s.DB > MaxLockDB {
		return
	}
	d := l.db(s.DB)
	k := d.keys[s.Key]
	if k != nil {
		for h := k.hold.head; h != nil; h = k.hold.head {
			l.removeHolder(h)
			l.freeItem(h)
		}
		k.has = false
	}
	for i := range s.Holders {
		hs := &s.Holders[i]
		if hs.Deadline != 0 && hs.Deadline <= now || hs.Levels == 0 {
			continue
		}
		if k == nil {
			k = l.getKey(d, s.Key)
		}
		k.logged = true
		c := LockCommand{Type: 1, Flag: hs.Flag, DB: s.DB, LockID: hs.LockID, Key: s.Key,
			Timeout: hs.Timeout, TimeoutFlag: hs.TimeoutFlag, Expried: hs.Expried, ExpriedFlag: hs.ExpriedFlag,
			Count: hs.Count, Rcount: hs.Rcount}
		h := l.newItem(k, 0, &c, hs.Start)
		h.start = hs.Start
		l.addHolder(k, h)
		extra := uint32(hs.Levels) - 1
		h.levels += uint8(extra)
		k.levels += extra
		d.st.LockedCount += extra
		if hs.Deadline != 0 {
			l.dl.add(h, hs.Deadline)
		}
	}
	if k == nil {
		return
	}
	if k.hold.n > 0 && s.Value != nil {
		k.value = append(k.value[:0], s.Value...)
		k.has = true
	}
	if k.hold.n == 0 {
		k.logged = false
		l.settle(k)
	}
}

// ForgetJournal drops the journal kept so far: after a replay, whose changes
// are in the log already.
func (l *Locks) ForgetJournal() {
	for _, r := range l.dirty {
		if k := l.key(r.db, r.key); k != nil {
			k.dirty = false
		}
	}
	l.dirty, l.goneKeys = l.dirty[:0], l.goneKeys[:0]
}
