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
	Fence   uint64 // the highest fencing token a fenced write presented to the key

	// Ceil, when not 0, makes this the record of a fencing-token reservation
	// (locks_fence.go), not a key's: every other field is zero.
	Ceil uint64

	// Flush makes this the record of a flush of database DB (AllDBs: of every
	// database), not a key's: every key of it restored so far is gone
	// (locks_flush.go). Every other field is zero.
	Flush bool
}

// HolderState is one persisting holder.
type HolderState struct {
	LockID   [16]byte
	Opts     Opts
	Levels   uint8
	Rcount   uint8
	Count    uint16
	Wait     Wait
	Hold     Hold
	Echo     Echo
	Start    int64  // Unix ns it was granted
	Deadline int64  // Unix ns it expires; 0: never
	ExpireAt int64  // Unix ms it expires, exactly (LockCommand.ExpireAt); 0: by Deadline
	Token    uint64 // its fencing token
	Client   uint64 // the client id that made it (LockCommand.Client)
}

// agedItem is a holder as Locks.aging sees it: by when it persists.
type agedItem lockItem

func (a *agedItem) deadline() *deadline { return &a.pdl }

// changed notes that k's persistent state may have changed.
func (l *Locks) changed(k *lockKey) {
	if !l.cfg.Persist {
		return
	}
	l.changes++
	if k.dirty {
		return
	}
	k.dirty = true
	l.ndirty++
	if len(l.dirty) >= 2*l.ndirty+lockFreeKeys {
		l.compactDirty()
	}
	l.dirty = append(l.dirty, k)
}

// compactDirty drops from the journal's list the keys freed since they were listed and
// the second listings of keys reused since: a run of keys made and deleted again between
// two Journals (a lock granted and released in one turn) must not grow it without end.
func (l *Locks) compactDirty() {
	kept := l.dirty[:0]
	for _, k := range l.dirty {
		if k.dirty {
			k.dirty = false // seen: a later listing of it is dropped
			kept = append(kept, k)
		}
	}
	for _, k := range kept {
		k.dirty = true
	}
	clear(l.dirty[len(kept):])
	l.dirty = kept
}

// touch notes a change of holder h's parameters or expiry.
func (l *Locks) touch(h *lockItem) {
	if !l.cfg.Persist || h.k == nil || h.waiting {
		return
	}
	if h.k.logged || h.cmd.persistsNow() {
		l.changed(h.k)
	}
	l.age(h)
}

// held notes h's grant: it persists now, or once held PersistAfter.
func (l *Locks) held(h *lockItem) {
	if !l.cfg.Persist {
		return
	}
	if h.k.logged || h.k.has || h.cmd.persistsNow() {
		l.changed(h.k)
	}
	l.age(h)
}

// age schedules h, whose persistence depends on how long it has been held, to be
// looked at again when it has been held PersistAfter.
func (l *Locks) age(h *lockItem) {
	if c := &h.cmd; c.persistsNever() || c.persistsNow() || c.holdKept() || h.pdl.scheduled() {
		return
	}
	l.aging.add((*agedItem)(h), h.start+l.cfg.PersistAfter)
}

// released notes that h no longer holds its key.
func (l *Locks) released(h *lockItem) {
	l.aging.remove((*agedItem)(h))
	if l.cfg.Persist && h.k.logged {
		l.changed(h.k)
	}
}

// persists reports whether holder h of k is in k's persistent state at now.
func (l *Locks) persists(k *lockKey, h *lockItem, now int64) bool {
	switch c := &h.cmd; {
	case c.persistsNever():
		return false
	case l.all || c.persistsNow():
		return true // asked for (a replicated grant), or a graceful stop (PersistAll)
	case c.holdKept():
		return false
	}
	return k.has || now-h.start >= l.cfg.PersistAfter
}

// PersistAll makes every holder persist from now on, but those that asked never
// to (HoldPersistNever), and marks their keys for the next Journal: a
// graceful stop writes every held lock to the log before it closes it.
func (l *Locks) PersistAll(now int64) {
	if !l.cfg.Persist {
		return
	}
	for _, d := range l.dbs {
		if d == nil {
			continue
		}
		for _, k := range d.keys {
			for h := k.hold.head; h != nil; h = h.next {
				if !h.cmd.persistsNever() && !l.persists(k, h, now) {
					l.cow(k)
					l.changed(k) // a holder the log does not have yet: only such keys are written again
					break
				}
			}
		}
	}
	l.all = true
}

// PersistDue marks the keys whose holders have now been held PersistAfter, for
// the next Journal. The caller runs it from ticks. It panics on the Locks of
// a Store (see Store.Advance).
func (l *Locks) PersistDue(now int64) {
	alone(l.shared, "Locks.PersistDue")
	for {
		a, ok := l.aging.pop(now)
		if !ok {
			return
		}
		l.aged(a.(*agedItem))
	}
}

// aged marks the key of a, just taken off the aging heap, for the journal.
func (l *Locks) aged(a *agedItem) {
	if h := (*lockItem)(a); !h.k.has && !h.k.flushed() { // with a value it has persisted since its grant
		l.cow(h.k) // a backup has the key as the log had it
		l.changed(h.k)
	}
}

// NextPersist returns when PersistDue next has work, false if never. It
// panics on the Locks of a Store (see Store.NextDeadline).
func (l *Locks) NextPersist() (int64, bool) {
	alone(l.shared, "Locks.NextPersist")
	return l.aging.next()
}

// Journal calls emit with the state of each key whose persistent state changed
// since the last Journal, at now, in the order the changes happened (a gone key
// first). A key that never persisted and still does not is skipped. The
// KeyState and its slices are valid during the call only; emit must not change
// the Locks.
func (l *Locks) Journal(now int64, emit func(*KeyState)) {
	if l.ceilDirty {
		l.ceilDirty = false
		l.snap = KeyState{Ceil: l.fenceCeil, Holders: l.snap.Holders[:0]}
		emit(&l.snap)
	}
	for _, db := range l.flushes { // before the rest: what the journal holds of db came after it
		l.snap = KeyState{DB: db, Flush: true, Holders: l.snap.Holders[:0]}
		emit(&l.snap)
	}
	l.flushes = l.flushes[:0]
	for _, r := range l.goneKeys {
		l.snap = KeyState{DB: r.db, Key: r.key, Holders: l.snap.Holders[:0]}
		emit(&l.snap)
	}
	l.goneKeys = l.goneKeys[:0]
	for i, k := range l.dirty {
		l.dirty[i] = nil
		if !k.dirty {
			continue // gone (a record above says so if it ever persisted), or done
		}
		k.dirty = false
		l.ndirty--
		if k.flushed() {
			continue // the flush's record says it is gone
		}
		if l.state(k, now) || k.logged {
			l.setLogged(k, len(l.snap.Holders) > 0)
			emit(&l.snap)
		}
	}
	l.dirty = l.dirty[:0]
	if cap(l.dirty) > lockFreeKeys {
		l.dirty = nil
	}
}

// Changes counts the changes to persistent state the journal took since the Locks were
// made: a caller that reads it before and after an operation learns whether the operation
// gave the next Journal something to emit.
func (l *Locks) Changes() uint64 { return l.changes }

// Journaled reports whether Journal has anything to emit.
func (l *Locks) Journaled() bool {
	return l.ndirty > 0 || len(l.goneKeys) > 0 || l.ceilDirty || len(l.flushes) > 0
}

// state fills l.snap with k's persistent state at now and reports whether it
// has any holder.
func (l *Locks) state(k *lockKey, now int64) bool { return l.stateInto(&l.snap, k, now) }

// stateInto is state into s.
func (l *Locks) stateInto(s *KeyState, k *lockKey, now int64) bool {
	*s = KeyState{DB: k.db.id, Key: k.key, Holders: s.Holders[:0], Fence: k.fence}
	for h := k.hold.head; h != nil; h = h.next {
		if !l.persists(k, h, now) {
			continue
		}
		c := &h.cmd
		var at int64
		if h.dl.scheduled() {
			at = h.dl.at
		}
		s.Holders = append(s.Holders, HolderState{LockID: c.LockID, Opts: c.Opts, Levels: h.levels,
			Rcount: c.Rcount, Count: c.Count, Wait: c.Wait, Hold: c.Hold, Echo: c.Echo, Start: h.start, Deadline: at, ExpireAt: c.ExpireAt,
			Token: h.token, Client: c.Client})
	}
	if len(s.Holders) > 0 && k.has {
		s.Value = k.value
	}
	return len(s.Holders) > 0
}

func (k *lockKey) link() *links[lockKey] { return &k.ll }

// setLogged records whether k's latest log record has holders.
func (l *Locks) setLogged(k *lockKey, on bool) {
	switch {
	case on && !k.logged:
		l.loggedKeys.push(k)
	case !on && k.logged:
		if l.cursor == k {
			l.cursor = k.ll.next
		}
		if l.bk.cur == k {
			l.bk.cur = k.ll.next
		}
		l.loggedKeys.remove(k)
	}
	k.logged = on
}

// BeginSnapshot starts writing the state a compacted log must hold: every key
// whose latest log record has holders, through SnapshotNext. Keys logged after
// this may or may not be included; the journal has them either way.
func (l *Locks) BeginSnapshot() {
	l.cursor = l.loggedKeys.head
	l.snapCeil = true
}

// emitCeil calls emit with the fencing-token ceiling, for a snapshot.
func (l *Locks) emitCeil(emit func(*KeyState)) {
	if l.fenceCeil == 0 {
		return
	}
	l.snap = KeyState{Ceil: l.fenceCeil, Holders: l.snap.Holders[:0]}
	emit(&l.snap)
}

// SnapshotNext calls emit with the persistent state at now of up to n more
// keys, and reports whether every key has been written.
func (l *Locks) SnapshotNext(n int, now int64, emit func(*KeyState)) bool {
	if l.snapCeil {
		l.snapCeil = false
		l.emitCeil(emit)
	}
	for ; n > 0 && l.cursor != nil; n-- {
		k := l.cursor
		l.cursor = k.ll.next
		if !k.flushed() && l.state(k, now) { // a flushed key is gone, however long its freeing takes
			emit(&l.snap)
		}
	}
	return l.cursor == nil
}

// LoggedKeys returns the number of keys whose latest log record has holders.
func (l *Locks) LoggedKeys() int { return l.loggedKeys.n }

// Restore replaces the state of a key by s, read back from a log at now: its
// holders (owned by no connection) with the time they have left, and its value
// while it has one. Holders past their deadline are dropped, and with them a
// key that has none left. Replies its changes would cause are not made.
func (l *Locks) Restore(s *KeyState, now int64) {
	if l.bk.on && s.Ceil == 0 && !s.Flush && s.DB <= MaxLockDB {
		if d := l.dbs[s.DB]; d != nil {
			l.cow(d.keys[s.Key])
		}
	}
	if s.Ceil == 0 && !s.Flush && s.DB <= MaxLockDB && l.restoreInPlace(s, now) {
		return
	}
	l.restoreSlow(s, now)
}

// restoreInPlace is Restore of the commonest record a follower applies, a key with one
// holder whose new state has one live holder (a replicated SET, INCR or lock grant): it
// updates the key's holder in place, where restoreSlow frees it and makes it again. The
// state it leaves is restoreSlow's (TestRestoreInPlaceIsRestore). It reports false, having
// changed nothing, for any other shape.
func (l *Locks) restoreInPlace(s *KeyState, now int64) bool {
	if len(s.Holders) != 1 || l.nfreeItems >= lockFreeItems {
		return false // with the free list full, restoreSlow would trade the holder for a free one
	}
	hs := &s.Holders[0]
	due := hs.Deadline
	if hs.ExpireAt != 0 {
		due = msDeadline(hs.ExpireAt)
	}
	if due != 0 && due <= now || hs.Levels == 0 {
		return false
	}
	d := l.dbs[s.DB]
	if d == nil {
		return false
	}
	k := l.live(d, s.Key)
	if k == nil || k.hold.n != 1 || k.byID != nil {
		return false
	}
	h := k.hold.head
	if h.ko != nil || cap(h.data) != 0 || cap(h.execs) != 0 {
		return false
	}
	// What removeHolder and addHolder would do to the key's counts and the journal.
	levels := uint32(hs.Levels)
	k.levels += levels - uint32(h.levels)
	d.st.LockedCount += levels - uint32(h.levels)
	logged := k.logged
	l.setLogged(k, true)
	if l.cfg.Persist {
		if logged {
			l.changed(k) // released
		}
		l.changed(k) // held
	}
	// The holder as newItem makes it from a cleared item.
	h.cmd = LockCommand{Kind: KindLock, Opts: hs.Opts, DB: s.DB, LockID: hs.LockID, Key: s.Key,
		Wait: hs.Wait, Hold: hs.Hold, Echo: hs.Echo, Count: hs.Count, Rcount: hs.Rcount, ExpireAt: hs.ExpireAt, Client: hs.Client}
	h.owner, h.arrived, h.start, h.token, h.levels = 0, hs.Start, hs.Start, hs.Token, hs.Levels
	h.prio, h.waiting, h.hasData, h.dataFrame, h.waitsCounted = 0, false, false, false, false
	l.fence = max(l.fence, hs.Token)
	// Its places in the heaps: a move counts as a new addition, as removing and adding it would.
	if c := &h.cmd; l.cfg.Persist && !c.persistsNever() && !c.persistsNow() && !c.holdKept() && hs.Start+l.cfg.PersistAfter > now {
		l.aging.move((*agedItem)(h), hs.Start+l.cfg.PersistAfter)
	} else {
		l.aging.remove((*agedItem)(h))
	}
	if due != 0 {
		l.dl.move(h, due)
	} else {
		l.dl.remove(h)
	}
	k.fence = s.Fence
	k.has = s.Value != nil
	if k.has {
		k.value = append(k.value[:0], s.Value...)
	}
	l.syncValue(k)
	return true
}

// restoreSlow is Restore of any record.
func (l *Locks) restoreSlow(s *KeyState, now int64) {
	if s.Ceil != 0 {
		l.restoreCeil(s.Ceil)
		return
	}
	if s.Flush {
		l.begin(nil, nil)
		l.flush(s.DB, now, false)
		l.end()
		return
	}
	if s.DB > MaxLockDB {
		return
	}
	d := l.db(s.DB)
	k := l.live(d, s.Key)
	if k != nil {
		for h := k.hold.head; h != nil; h = k.hold.head {
			l.removeHolder(h)
			l.freeItem(h)
		}
		k.has = false
	}
	for i := range s.Holders {
		hs := &s.Holders[i]
		due := hs.Deadline
		if hs.ExpireAt != 0 {
			due = msDeadline(hs.ExpireAt)
		}
		if due != 0 && due <= now || hs.Levels == 0 {
			continue
		}
		if k == nil {
			k = l.getKey(d, s.Key)
		}
		l.setLogged(k, true)
		c := LockCommand{Kind: KindLock, Opts: hs.Opts, DB: s.DB, LockID: hs.LockID, Key: s.Key,
			Wait: hs.Wait, Hold: hs.Hold, Echo: hs.Echo, Count: hs.Count, Rcount: hs.Rcount, ExpireAt: hs.ExpireAt, Client: hs.Client}
		h := l.newItem(k, 0, &c, hs.Start)
		h.start = hs.Start
		h.token = hs.Token
		l.fence = max(l.fence, hs.Token)
		l.addHolder(k, h)
		if hs.Start+l.cfg.PersistAfter <= now {
			l.aging.remove((*agedItem)(h)) // it is in the log already
		}
		extra := uint32(hs.Levels) - 1
		h.levels += uint8(extra)
		k.levels += extra
		d.st.LockedCount += extra
		if due != 0 {
			l.dl.add(h, due)
		}
	}
	if k == nil {
		return
	}
	k.fence = s.Fence
	if k.hold.n > 0 && s.Value != nil {
		k.value = append(k.value[:0], s.Value...)
		k.has = true
	}
	l.syncValue(k) // only now: a key that keeps its value keeps its place for SCAN
	if k.hold.n == 0 {
		l.setLogged(k, false)
		l.settle(k)
	}
}

// ForgetJournal drops the journal kept so far: after a replay, whose changes
// are in the log already.
func (l *Locks) ForgetJournal() {
	for i, k := range l.dirty {
		k.dirty = false
		l.dirty[i] = nil
	}
	l.ndirty = 0
	l.dirty, l.goneKeys, l.flushes = l.dirty[:0], l.goneKeys[:0], l.flushes[:0]
}
