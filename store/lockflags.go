package store

// This file defines a LockCommand's options, wait and hold, and is the only
// file that reads them: the rest of the store asks for the behaviours by name.

// Opts are the options of a Lock or an Unlock.
type Opts uint8

// A Lock's options.
const (
	OptShow   Opts = 1 << iota // a refused Lock answers with the holder's fields
	OptUpdate                  // updates its own hold in place
	OptCheck                   // a concurrent check
	OptTree                    // a tree lock, which a tree Unlock chains from
)

// An Unlock's options.
const (
	OptHead       Opts = 1 << (iota + 4) // unlocks the oldest holder, whatever its LockId
	OptCancel                            // cancels a queued request with the LockId
	OptRequeue                           // locks again after the unlock, with its own parameters
	OptTreeUnlock                        // unlocks a tree lock's chain
)

// Unit is the unit of a wait or a hold.
type Unit uint8

// The units.
const (
	Seconds Unit = iota
	Minutes
	Millis
)

// WaitOpts are the options of a wait.
type WaitOpts uint8

// The wait's options.
const (
	WaitFailsOnValue  WaitOpts = 1 << iota // times out at once when the key has a value
	WaitByPriority                         // Rcount is its priority in the queue
	WaitFromArrival                        // the hold counts from the request's arrival
	WaitWhileUnlocked                      // waits while the key is unlocked
	WaitLessVersion                        // less-lock-version
	WaitKept                               // does not time out while its connection is open
	WaitReverses                           // on timeout, runs again on the reversed key
)

// HoldOpts are the options of a hold.
type HoldOpts uint8

// The hold's options.
const (
	HoldNever        HoldOpts = 1 << iota // never expires
	HoldKept                              // does not expire while its connection is open
	HoldReverses                          // on expiry, runs again on the reversed key
	HoldPersistNow                        // persists as soon as granted
	HoldPersistNever                      // never persists
)

// Wait is how long a Lock waits in the queue: N of Unit.
type Wait struct {
	N    uint16
	Unit Unit
	Opts WaitOpts
}

// Hold is how long a granted Lock holds: N of Unit.
type Hold struct {
	N    uint16
	Unit Unit
	Opts HoldOpts
}

// Echo is what a command's client sent that the store does not read: it
// keeps and returns it as it came, for listings and the log.
type Echo struct {
	Opts       uint8
	Wait, Hold uint16
}

// A Lock's behaviours.

func (c *LockCommand) shows() bool     { return c.Opts&OptShow != 0 }
func (c *LockCommand) updates() bool   { return c.Opts&OptUpdate != 0 }
func (c *LockCommand) checks() bool    { return c.Opts&OptCheck != 0 }
func (c *LockCommand) locksTree() bool { return c.Opts&OptTree != 0 }

// An Unlock's behaviours.

func (c *LockCommand) unlocksHead() bool { return c.Opts&OptHead != 0 }
func (c *LockCommand) cancels() bool     { return c.Opts&OptCancel != 0 }
func (c *LockCommand) requeues() bool    { return c.Opts&OptRequeue != 0 }
func (c *LockCommand) unlocksTree() bool { return c.Opts&OptTreeUnlock != 0 }

// The wait's behaviours.

func (c *LockCommand) failsOnValue() bool  { return c.Wait.Opts&WaitFailsOnValue != 0 }
func (c *LockCommand) byPriority() bool    { return c.Wait.Opts&WaitByPriority != 0 }
func (c *LockCommand) fromArrival() bool   { return c.Wait.Opts&WaitFromArrival != 0 }
func (c *LockCommand) whileUnlocked() bool { return c.Wait.Opts&WaitWhileUnlocked != 0 }
func (c *LockCommand) lessVersion() bool   { return c.Wait.Opts&WaitLessVersion != 0 }
func (c *LockCommand) waitKept() bool      { return c.Wait.Opts&WaitKept != 0 }
func (c *LockCommand) waitReverses() bool  { return c.Wait.Opts&WaitReverses != 0 }

// The hold's behaviours.

func (c *LockCommand) neverExpires() bool  { return c.Hold.Opts&HoldNever != 0 }
func (c *LockCommand) holdKept() bool      { return c.Hold.Opts&HoldKept != 0 }
func (c *LockCommand) holdReverses() bool  { return c.Hold.Opts&HoldReverses != 0 }
func (c *LockCommand) persistsNow() bool   { return c.Hold.Opts&HoldPersistNow != 0 }
func (c *LockCommand) persistsNever() bool { return c.Hold.Opts&HoldPersistNever != 0 }

// probes reports whether c is a probe: a Lock that asks for no hold, and
// keeps none.
func (c *LockCommand) probes() bool { return c.Hold.N == 0 }

// keepsHold reports whether c, an Update, keeps the holder's expiry as it is.
func (c *LockCommand) keepsHold() bool { return c.neverExpires() && c.Hold.N == 0xFFFF }

// hold is the hold a command asks for, as it gave it.
type hold struct {
	h    Hold
	echo uint16
}

func (c *LockCommand) holdOf() hold   { return hold{c.Hold, c.Echo.Hold} }
func (c *LockCommand) setHold(h hold) { c.Hold, c.Echo.Hold = h.h, h.echo }
func (c *LockCommand) clearFlags()    { c.Opts, c.Echo.Opts = 0, 0 }

// plainWait makes c's wait the same count in seconds, with no behaviours.
func (c *LockCommand) plainWait() { c.Wait, c.Echo.Wait = Wait{N: c.Wait.N}, 0 }

// holdAsWait makes c's hold as long as its wait, in seconds, with no behaviours.
func (c *LockCommand) holdAsWait() { c.Hold, c.Echo.Hold = Hold{N: c.Wait.N}, 0 }

// copyTimes gives c the wait and the hold of from.
func (c *LockCommand) copyTimes(from *LockCommand) {
	c.Wait, c.Hold, c.Echo.Wait, c.Echo.Hold = from.Wait, from.Hold, from.Echo.Wait, from.Echo.Hold
}

// PersistAtOnce makes the hold c asks for persist as soon as it is granted,
// even if c asked that it never persist.
func (c *LockCommand) PersistAtOnce() { c.Hold.Opts = c.Hold.Opts&^HoldPersistNever | HoldPersistNow }

// span is a length of time as a Lock gives it: n of unit.
type span struct {
	n    uint16
	unit Unit
}

func (c *LockCommand) waitSpan() span { return span{c.Wait.N, c.Wait.Unit} }
func (c *LockCommand) holdSpan() span { return span{c.Hold.N, c.Hold.Unit} }

// millis returns s in milliseconds.
func (s span) millis() int64 {
	switch s.unit {
	case Millis:
		return int64(s.n)
	case Minutes:
		return int64(s.n) * 60_000
	}
	return int64(s.n) * 1000
}

// dueAt returns when a wait or hold of s, counted from base, is due: a span
// in milliseconds exactly, one in seconds or minutes at the start of the
// second after base + s.
func dueAt(base int64, s span) int64 {
	if s.unit == Millis {
		return base + int64(s.n)*1e6
	}
	n := int64(s.n)
	if s.unit == Minutes {
		n *= 60
	}
	sec := base / 1e9
	if base%1e9 < 0 {
		sec--
	}
	return (sec + n + 1) * 1e9
}
