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
//
// A log restored from an old backup holds an old ceiling, below tokens granted
// after the backup was taken. So the counter also starts, in every process, at
// a floor derived from the wall clock (TimeFloor): TokensPerMs tokens a
// millisecond since 2024-01-01. A counter that starts at the floor of its start
// and grants fewer than TokensPerMs tokens a millisecond on average stays below
// the floor of every later moment (a ceiling runs at most one block, about one
// millisecond's worth, ahead of it), so a process started later, from any backup,
// starts above every token granted before, as long as its clock is not behind the
// clocks of those that granted them. Within a process the counter never goes back,
// whatever the clock does: the floor is read once, at start (Server.Run), and only
// ever raises it.

// fenceBlock is how many tokens one reservation covers: one millisecond's
// worth of the time floor, so that a ceiling is never more than that ahead of
// the clock of the process that reserved it.
const fenceBlock = TokensPerMs

// TokensPerMs is how fast the time floor grows: 8192 tokens a millisecond
// (8.2M/s, several times what one loop grants), so tokens stay below 2^53
// (exact in a double, as JavaScript and Lua clients read integers) until 2058.
const TokensPerMs = 1 << tokenMsShift

const (
	tokenMsShift = 13
	tokenEpochMs = 1_704_067_200_000 // 2024-01-01T00:00:00Z, in Unix milliseconds
	tokenMaxMs   = 1 << 49           // past this the floor would leave less than 2^62 tokens: no floor
)

// TimeFloor returns the token floor at Unix time unixMs (milliseconds): the
// milliseconds since 2024-01-01 times TokensPerMs; 0 for a clock before 2024 or
// absurdly far ahead (more than 17,000 years), which then gives no floor.
func TimeFloor(unixMs int64) uint64 {
	ms := unixMs - tokenEpochMs
	if ms <= 0 || ms >= tokenMaxMs {
		return 0
	}
	return uint64(ms) << tokenMsShift
}

// FloorTime returns the Unix time in milliseconds whose floor is token: when a
// clock-floored counter would have reached it (for messages).
func FloorTime(token uint64) int64 {
	return int64(min(token>>tokenMsShift, tokenMaxMs)) + tokenEpochMs
}

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
	if Mutant == "forget-ceiling" {
		return // the mutant: a restart or a new leader forgets the tokens reserved
	}
	l.fenceCeil = max(l.fenceCeil, c)
	l.fence = max(l.fence, c)
}

// RaiseTokens makes every later token above floor (a time floor, TimeFloor).
// The counter only ever goes up; the next grant reserves a block above it.
func (l *Locks) RaiseTokens(floor uint64) { l.fence = max(l.fence, floor) }

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
