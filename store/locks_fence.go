package store

// This file is fencing tokens (Kleppmann, "How to do distributed locking"):
// every grant of a holder gets a 64-bit token that only grows, and a fenced
// write presents one, refused when its key has seen a higher one.
//
// Tokens come from a counter whose ceiling is reserved in the log: a grant
// past the ceiling reserves the next block, and that reservation is a record
// of the journal (KeyState.Ceil), so it reaches the log (or the raft log) in
// the same batch as the grant. Restoring a ceiling moves the counter up to it:
// after a restart, or on a new leader that has applied every committed
// entry, the next token is above every token any acknowledged grant carried,
// even those of holders long gone (their records are compacted away, the
// ceiling is not).

// fenceBlock is how many tokens one reservation covers.
const fenceBlock = 1 << 20

// nextToken issues a token, reserving the next block when the counter
// reaches the ceiling.
func (l *Locks) nextToken() uint64 {
	l.fence++
	if l.fence > l.fenceCeil {
		l.fenceCeil = l.fence + fenceBlock - 1
		l.ceilDirty = l.cfg.Persist
	}
	return l.fence
}

// restoreCeil takes a ceiling read back from a log: no later token is at or
// below it.
func (l *Locks) restoreCeil(c uint64) {
	l.fenceCeil = max(l.fenceCeil, c)
	l.fence = max(l.fence, c)
}

// FenceCeil returns the last token issued and the reserved ceiling.
func (l *Locks) FenceCeil() (last, ceil uint64) { return l.fence, l.fenceCeil }

// Token returns the fencing token of key's holder with LockId lockID, or, if
// any is false, of its oldest holder; false when there is none.
func (l *Locks) Token(db uint8, key, lockID [16]byte, any bool) (uint64, bool) {
	k := l.key(db, key)
	if k == nil || k.hold.head == nil {
		return 0, false
	}
	h := k.hold.head
	if !any {
		if h = k.find(lockID); h == nil {
			return 0, false
		}
	}
	return h.token, true
}

// KeyFence returns the highest token a fenced write presented to key (0 for
// none, or no such key).
func (l *Locks) KeyFence(db uint8, key [16]byte) uint64 {
	if k := l.key(db, key); k != nil {
		return k.fence
	}
	return 0
}

// RaiseFence records that a fenced write presenting token succeeded on key
// (which exists: the write just made it): later writes presenting a lower
// token are refused by the caller (KeyFence). The key's state is journaled.
func (l *Locks) RaiseFence(db uint8, key [16]byte, token uint64) {
	k := l.key(db, key)
	if k == nil || token <= k.fence {
		return
	}
	l.cow(k)
	k.fence = token
	l.changed(k)
}
