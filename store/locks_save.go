package store

// A backup (SNAPSHOT) of a large store encoded a slice at a time, as one instant: the state
// every key had when the backup began (issue 30, item 7: encoded in one turn, a SNAPSHOT of
// 1M keys held the loop up to 845 ms).
//
// BeginSave fixes the instant; SaveNext walks the keys the log has (loggedKeys, as
// SnapshotNext does for a log rewrite) a few at a time and emits each one's state as of
// then. A key that is about to change before the walk has reached it is emitted first, its
// old state (cow, called before each change of a key's persistent state: a holder added,
// removed, re-entered, re-armed or given new parameters, a value set or unset, a fence
// raised, a flushed key freed, a record restored): the copy-on-write Redis's fork gives a
// BGSAVE for free, done per key. Each key is emitted once (lockKey.saved says which
// backup has it), so what is emitted is at most one record per key that existed when the
// backup began, whatever is written meanwhile; a key made since is in none of it.
//
// The state of a key is computed as of the instant the backup began (persistence depends on
// how long a holder has been held), and a key counts only if the log had it then (logged)
// and a flush had not taken it (its generation then): the file is the log's view at that
// instant.

// saveState is a backup being encoded.
type saveState struct {
	on    bool
	epoch uint32          // this backup's number: lockKey.saved equals it once a key is emitted (or made since)
	now   int64           // the instant it encodes
	cur   *lockKey        // the next key of loggedKeys SaveNext looks at; nil at the end
	emit  func(*KeyState) // where the states go
	snap  KeyState        // the state being emitted
	keys  uint64          // key states emitted so far
	bytes int             // about what the states emitted in this SaveNext take (saveStepBytes)
}

// saveStepBytes bounds what one SaveNext emits, beside its count of keys: a value (up to
// LocksConfig.MaxValue) and a holder list (up to 65,535 holders in a record) make a key's
// state large, and a step of 1,024 keys of 1 MiB values would copy a GiB in one turn. A
// step stops once the states it emitted take about this much (a key of a short value and
// one holder: ~120 bytes, so 1,024 of them stay under it); a single key's state is emitted
// whole whatever its size.
const saveStepBytes = 256 << 10

// About what a key state record takes without its value, and per holder (aof.AppendState).
const (
	saveKeyBytes    = 48
	saveHolderBytes = 64
)

// BeginSave starts encoding a backup of the keys' persistent state at now, the ceiling of
// fencing tokens first: emit is called with each key's state, by SaveNext and by any change
// to a key not yet emitted (before the change), until SaveNext reports the end or EndSave
// stops it. The KeyState is valid during the call only; emit must not change the Locks.
// A backup already in progress is dropped.
func (l *Locks) BeginSave(now int64, emit func(*KeyState)) {
	l.bk.epoch++
	l.bk = saveState{on: true, epoch: l.bk.epoch, now: now, cur: l.loggedKeys.head, emit: emit,
		snap: KeyState{Holders: l.bk.snap.Holders[:0]}}
	for _, d := range l.dbs {
		if d != nil {
			d.saved = d.gen
		}
	}
	if l.fenceCeil != 0 {
		l.bk.snap = KeyState{Ceil: l.fenceCeil, Holders: l.bk.snap.Holders[:0]}
		emit(&l.bk.snap)
	}
}

// SaveNext emits the state of up to n more keys of the backup in progress, fewer once the
// states emitted take saveStepBytes, and reports whether it is over (then every key the log
// had when it began is emitted).
func (l *Locks) SaveNext(n int) bool {
	if !l.bk.on {
		return true
	}
	l.bk.bytes = 0
	for ; n > 0 && l.bk.cur != nil && l.bk.bytes < saveStepBytes; n-- {
		k := l.bk.cur
		l.bk.cur = k.ll.next
		if k.saved != l.bk.epoch {
			l.saveKey(k)
		}
	}
	if l.bk.cur == nil {
		l.EndSave()
		return true
	}
	return false
}

// EndSave ends the backup in progress, if any: changes emit nothing more.
func (l *Locks) EndSave() {
	l.bk.on, l.bk.cur, l.bk.emit = false, nil, nil
	if cap(l.bk.snap.Holders) > lockFreeItems {
		l.bk.snap.Holders = nil
	}
}

// SaveEpoch is the number of the backup in progress, 0 if none: a caller that began one
// tells by it whether it is still its own (a later BeginSave drops it).
func (l *Locks) SaveEpoch() uint32 {
	if !l.bk.on {
		return 0
	}
	return l.bk.epoch
}

// Saving reports whether a backup is in progress, and the key states it has emitted.
func (l *Locks) Saving() (bool, uint64) { return l.bk.on, l.bk.keys }

// cow emits k's state to the backup in progress before k changes, unless it has it already.
func (l *Locks) cow(k *lockKey) {
	if l.bk.on && k != nil && k.saved != l.bk.epoch {
		l.saveKey(k)
	}
}

// saveKey emits k's state as of the backup's instant, if the log had the key then.
func (l *Locks) saveKey(k *lockKey) {
	sv := &l.bk
	k.saved = sv.epoch
	if k.logged && k.gen == k.db.saved && l.stateInto(&sv.snap, k, sv.now) {
		sv.keys++
		sv.bytes += saveKeyBytes + len(sv.snap.Value) + saveHolderBytes*len(sv.snap.Holders)
		sv.emit(&sv.snap)
	}
}
