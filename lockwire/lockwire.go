// Package lockwire translates an slock frame's flag byte and time words to
// the store's lock options, wait and hold, and back. It is the only place
// that knows both: the store never sees the words.
package lockwire

import "github.com/tallyd/tallyd/store"

// Words are an slock Lock or Unlock's flag byte and time words, as on the wire.
type Words struct {
	Flag                                       uint8
	Timeout, TimeoutFlag, Expried, ExpriedFlag uint16
}

// Fields are the store's reading of Words.
type Fields struct {
	Opts store.Opts
	Wait store.Wait
	Hold store.Hold
	Echo store.Echo
}

// bit is a bit of a flag byte or word and the option it says.
type bit[O ~uint8] struct {
	bit uint16
	opt O
}

// The flag byte's bits: a Lock's, and at the same places an Unlock's.
var (
	lockBits   = []bit[store.Opts]{{0x01, store.OptShow}, {0x02, store.OptUpdate}, {0x08, store.OptCheck}, {0x10, store.OptTree}}
	unlockBits = []bit[store.Opts]{{0x01, store.OptHead}, {0x02, store.OptCancel}, {0x08, store.OptRequeue}, {0x10, store.OptTreeUnlock}}
)

// TimeoutFlag bits.
var waitBits = []bit[store.WaitOpts]{
	{0x0008, store.WaitFailsOnValue}, {0x0010, store.WaitByPriority}, {0x0080, store.WaitReverses},
	{0x0100, store.WaitFromArrival}, {0x0200, store.WaitWhileUnlocked}, {0x4000, store.WaitLessVersion},
	{0x8000, store.WaitKept},
}

// ExpriedFlag bits.
var holdBits = []bit[store.HoldOpts]{
	{0x0080, store.HoldReverses}, {0x0100, store.HoldPersistNow}, {0x0200, store.HoldPersistNever},
	{0x4000, store.HoldNever}, {0x8000, store.HoldKept},
}

// The time words' unit bits.
const (
	minutes = 0x0040
	millis  = 0x0400 // wins over minutes when a word has both
)

// flagBits returns the flag byte's table for a command of kind k: nil for a
// kind the store does not run, whose byte it keeps whole.
func flagBits(k store.LockKind) *table[store.Opts] {
	switch k {
	case store.KindLock, store.KindWillLock:
		return lockTable
	case store.KindUnlock, store.KindWillUnlock:
		return unlockTable
	}
	return nil
}

// table is a list of bits precomputed for every byte, so that a translation on the lock path
// costs two loads rather than a loop over the bits.
type table[O ~uint8] struct {
	lo, hi [256]O      // the options said by a word's low and high byte
	words  [256]uint16 // the bits that say each set of options
	mask   uint16      // every bit of the list
}

func newTable[O ~uint8](bits []bit[O]) *table[O] {
	t := new(table[O])
	for _, b := range bits {
		t.mask |= b.bit
	}
	for i := range 256 {
		for _, b := range bits {
			if uint16(i)&b.bit != 0 {
				t.lo[i] |= b.opt
			}
			if uint16(i)<<8&b.bit != 0 {
				t.hi[i] |= b.opt
			}
			if O(i)&b.opt != 0 {
				t.words[i] |= b.bit
			}
		}
	}
	return t
}

var (
	lockTable, unlockTable = newTable(lockBits), newTable(unlockBits)
	waitTable, holdTable   = newTable(waitBits), newTable(holdBits)
)

// readBits returns the options w says by t's bits, and w without them; with no table,
// none and w whole.
func readBits[O ~uint8](w uint16, t *table[O]) (O, uint16) {
	if t == nil {
		return 0, w
	}
	return t.lo[w&0xff] | t.hi[w>>8], w &^ t.mask
}

// writeBits returns the bits of t that say o; with no table, none.
func writeBits[O ~uint8](o O, t *table[O]) uint16 {
	if t == nil {
		return 0
	}
	return t.words[o]
}

// unitOf returns the unit a flag word says and the word without its bits.
func unitOf(w uint16) (store.Unit, uint16) {
	switch {
	case w&millis != 0:
		return store.Millis, w &^ millis
	case w&minutes != 0:
		return store.Minutes, w &^ minutes
	}
	return store.Seconds, w
}

// plainUnit returns the unit a time word says when that is all it says (no bit, or one unit
// bit alone), and false otherwise.
func plainUnit(w uint16) (store.Unit, bool) {
	switch w {
	case 0:
		return store.Seconds, true
	case millis:
		return store.Millis, true
	case minutes:
		return store.Minutes, true
	}
	return store.Seconds, false
}

// unitBit is the bit that says u.
func unitBit(u store.Unit) uint16 {
	switch u {
	case store.Millis:
		return millis
	case store.Minutes:
		return minutes
	}
	return 0
}

// Read returns the store's reading of w for a command of kind k.
func Read(k store.LockKind, w Words) Fields {
	var f Fields
	read(k, &w, &f.Opts, &f.Wait, &f.Hold, &f.Echo)
	return f
}

// read gives o, wt, hd and e the store's reading of w for a command of kind k, in place
// (Set runs on every binary lock command: no Fields built and copied there).
func read(k store.LockKind, w *Words, o *store.Opts, wt *store.Wait, hd *store.Hold, e *store.Echo) {
	wt.N, hd.N = w.Timeout, w.Expried
	if w.Flag == 0 {
		// Most commands have no flag and at most a unit bit in each time word: nothing to
		// look up but the units.
		tu, tok := plainUnit(w.TimeoutFlag)
		hu, hok := plainUnit(w.ExpriedFlag)
		if tok && hok {
			*o, *e = 0, store.Echo{}
			wt.Unit, wt.Opts, hd.Unit, hd.Opts = tu, 0, hu, 0
			return
		}
	}
	readTables(k, w, o, wt, hd, e)
}

// readTables is read through the tables, for any words.
func readTables(k store.LockKind, w *Words, o *store.Opts, wt *store.Wait, hd *store.Hold, e *store.Echo) {
	wt.N, hd.N = w.Timeout, w.Expried
	var rest uint16
	*o, rest = readBits(uint16(w.Flag), flagBits(k))
	e.Opts = uint8(rest)
	wt.Unit, rest = unitOf(w.TimeoutFlag)
	wt.Opts, e.Wait = readBits(rest, waitTable)
	hd.Unit, rest = unitOf(w.ExpriedFlag)
	hd.Opts, e.Hold = readBits(rest, holdTable)
}

// Words returns the words f reads as for a command of kind k.
func (f Fields) Words(k store.LockKind) Words {
	return Words{
		Flag:        f.Echo.Opts | uint8(writeBits(f.Opts, flagBits(k))),
		Timeout:     f.Wait.N,
		TimeoutFlag: f.Echo.Wait | unitBit(f.Wait.Unit) | writeBits(f.Wait.Opts, waitTable),
		Expried:     f.Hold.N,
		ExpriedFlag: f.Echo.Hold | unitBit(f.Hold.Unit) | writeBits(f.Hold.Opts, holdTable),
	}
}

// Set gives c the fields w reads as, for c's kind.
func Set(c *store.LockCommand, w Words) {
	read(c.Kind, &w, &c.Opts, &c.Wait, &c.Hold, &c.Echo)
}

// Of returns c's words.
func Of(c *store.LockCommand) Words {
	return Fields{c.Opts, c.Wait, c.Hold, c.Echo}.Words(c.Kind)
}

// SetHolder gives h the fields w reads as (a holder is a Lock's).
func SetHolder(h *store.HolderState, w Words) {
	read(store.KindLock, &w, &h.Opts, &h.Wait, &h.Hold, &h.Echo)
}

// OfHolder returns h's words.
func OfHolder(h *store.HolderState) Words {
	return Fields{h.Opts, h.Wait, h.Hold, h.Echo}.Words(store.KindLock)
}
