package store

// This file serves the Redis key/value commands' reads over the lock store: a
// key's value, the keys with values, and FLUSHDB.

// Value returns the value record of key in db, nil if it has none. It is a view
// valid until the next call that changes the Locks.
func (l *Locks) Value(db uint8, key [16]byte) []byte {
	k := l.key(db, key)
	if k == nil || !k.has {
		return nil
	}
	return k.value
}

// Holds reports whether key in db has holders, and whether lockID is one of them.
func (l *Locks) Holds(db uint8, key, lockID [16]byte) (held, by bool) {
	k := l.key(db, key)
	if k == nil || k.hold.n == 0 {
		return false, false
	}
	return true, k.find(lockID) != nil
}

// LockedByOther reports whether key in db has a holder that owner may not
// break with a DEL: one under a LockId other than the key itself (a LOCK or a
// SETNX, not a plain SET) that another connection last locked. A connection
// closed since keeps its holders, so they stay another's.
func (l *Locks) LockedByOther(db uint8, key [16]byte, owner Owner, client uint64) bool {
	k := l.key(db, key)
	if k == nil {
		return false
	}
	for h := k.hold.head; h != nil; h = h.next {
		if h.cmd.LockID != key && h.owner != owner && (client == 0 || h.cmd.Client != client) {
			return true
		}
	}
	return false
}
