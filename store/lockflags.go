package store

// This file is the only one that reads a LockCommand's flag byte and flag
// words: the rest of the store asks for the behaviours by name.

// Lock flags (the flag byte of a Lock).
const (
	lockShow   = 0x01
	lockUpdate = 0x02
	lockCheck  = 0x08 // concurrent check
	lockTree   = 0x10
)

// Unlock flags (the flag byte of an Unlock).
const (
	unlockHead    = 0x01
	unlockCancel  = 0x02
	unlockRequeue = 0x08
	unlockTree    = 0x10
)

// TimeoutFlag and ExpriedFlag bits.
const (
	timeData     = 0x0008 // TimeoutFlag: time out at once rather than queue when the key has a value
	timePriority = 0x0010 // TimeoutFlag: Rcount is a priority
	timeMinutes  = 0x0040
	timeReverse  = 0x0080 // lock the reversed key on a queued timeout / on expiry
	timeArrival  = 0x0100 // TimeoutFlag: the hold time counts from the arrival of the request
	timeUnlocked = 0x0200 // TimeoutFlag: wait while the key is unlocked
	timeMillis   = 0x0400
	timeVersion  = 0x4000 // TimeoutFlag: less-lock-version; ExpriedFlag: never expires
	timeKeep     = 0x8000 // keep alive while the owning connection lives
)

// ExpriedFlag bits that decide persistence.
const (
	persistNow   = 0x0100
	persistNever = 0x0200
)

// A Lock's behaviours.

func (c *LockCommand) shows() bool     { return c.Flag&lockShow != 0 }   // a refused Lock answers with the holder's fields
func (c *LockCommand) updates() bool   { return c.Flag&lockUpdate != 0 } // updates its own hold in place
func (c *LockCommand) checks() bool    { return c.Flag&lockCheck != 0 }  // a concurrent check
func (c *LockCommand) locksTree() bool { return c.Flag&lockTree != 0 }   // a tree lock, which a tree Unlock chains from

// An Unlock's behaviours.

func (c *LockCommand) unlocksHead() bool { return c.Flag&unlockHead != 0 }    // unlocks the oldest holder, whatever its LockId
func (c *LockCommand) cancels() bool     { return c.Flag&unlockCancel != 0 }  // cancels a queued request with the LockId
func (c *LockCommand) requeues() bool    { return c.Flag&unlockRequeue != 0 } // locks again after the unlock, with its own parameters
func (c *LockCommand) unlocksTree() bool { return c.Flag&unlockTree != 0 }    // unlocks a tree lock's chain

// The wait's behaviours.

func (c *LockCommand) failsOnValue() bool  { return c.TimeoutFlag&timeData != 0 }     // times out at once when the key has a value
func (c *LockCommand) byPriority() bool    { return c.TimeoutFlag&timePriority != 0 } // Rcount is its priority in the queue
func (c *LockCommand) fromArrival() bool   { return c.TimeoutFlag&timeArrival != 0 }  // the hold counts from the request's arrival
func (c *LockCommand) whileUnlocked() bool { return c.TimeoutFlag&timeUnlocked != 0 } // waits while the key is unlocked
func (c *LockCommand) lessVersion() bool   { return c.TimeoutFlag&timeVersion != 0 }  // less-lock-version
func (c *LockCommand) waitKept() bool      { return c.TimeoutFlag&timeKeep != 0 }     // does not time out while its connection is open
func (c *LockCommand) waitReverses() bool  { return c.TimeoutFlag&timeReverse != 0 }  // on timeout, runs again on the reversed key

// The hold's behaviours.

func (c *LockCommand) neverExpires() bool  { return c.ExpriedFlag&timeVersion != 0 }  // the hold never expires
func (c *LockCommand) holdKept() bool      { return c.ExpriedFlag&timeKeep != 0 }     // does not expire while its connection is open
func (c *LockCommand) holdReverses() bool  { return c.ExpriedFlag&timeReverse != 0 }  // on expiry, runs again on the reversed key
func (c *LockCommand) persistsNow() bool   { return c.ExpriedFlag&persistNow != 0 }   // persists as soon as granted
func (c *LockCommand) persistsNever() bool { return c.ExpriedFlag&persistNever != 0 } // never persists

// probes reports whether c is a probe: a Lock that asks for no hold, and
// keeps none.
func (c *LockCommand) probes() bool { return c.Expried == 0 }

// keepsHold reports whether c, an Update, keeps the holder's expiry as it is.
func (c *LockCommand) keepsHold() bool { return c.neverExpires() && c.Expried == 0xFFFF }

// hold is the hold a command asks for, as it gave it.
type hold struct{ n, flag uint16 }

func (c *LockCommand) holdOf() hold   { return hold{c.Expried, c.ExpriedFlag} }
func (c *LockCommand) setHold(h hold) { c.Expried, c.ExpriedFlag = h.n, h.flag }
func (c *LockCommand) clearFlags()    { c.Flag = 0 }
func (c *LockCommand) plainWait()     { c.TimeoutFlag = 0 }                       // the same wait, in seconds, with no behaviours
func (c *LockCommand) holdAsWait()    { c.Expried, c.ExpriedFlag = c.Timeout, 0 } // a hold as long as the wait, in seconds, with no behaviours

// copyTimes gives c the wait and the hold of from.
func (c *LockCommand) copyTimes(from *LockCommand) {
	c.Timeout, c.TimeoutFlag, c.Expried, c.ExpriedFlag = from.Timeout, from.TimeoutFlag, from.Expried, from.ExpriedFlag
}

// PersistAtOnce makes the hold c asks for persist as soon as it is granted,
// even if c asked that it never persist.
func (c *LockCommand) PersistAtOnce() { c.ExpriedFlag = c.ExpriedFlag&^persistNever | persistNow }

// span is a length of time as a Lock gives it: n of unit.
type span struct {
	n    uint16
	unit timeUnit
}

// timeUnit is the unit of a span.
type timeUnit uint8

const (
	inSeconds timeUnit = iota
	inMinutes
	inMillis // wins over minutes when a word has both
)

func (c *LockCommand) waitSpan() span { return spanOf(c.Timeout, c.TimeoutFlag) }
func (c *LockCommand) holdSpan() span { return spanOf(c.Expried, c.ExpriedFlag) }

// spanOf is the span of a time word and its flag word.
func spanOf(n, flag uint16) span {
	switch {
	case flag&timeMillis != 0:
		return span{n, inMillis}
	case flag&timeMinutes != 0:
		return span{n, inMinutes}
	}
	return span{n, inSeconds}
}

// millis returns s in milliseconds.
func (s span) millis() int64 {
	switch s.unit {
	case inMillis:
		return int64(s.n)
	case inMinutes:
		return int64(s.n) * 60_000
	}
	return int64(s.n) * 1000
}

// dueAt returns when a wait or hold of s, counted from base, is due: a span
// in milliseconds exactly, one in seconds or minutes at the start of the
// second after base + s.
func dueAt(base int64, s span) int64 {
	if s.unit == inMillis {
		return base + int64(s.n)*1e6
	}
	n := int64(s.n)
	if s.unit == inMinutes {
		n *= 60
	}
	sec := base / 1e9
	if base%1e9 < 0 {
		sec--
	}
	return (sec + n + 1) * 1e9
}
