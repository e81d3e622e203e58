package store

import (
	"fmt"
	"strconv"
)

// Info holds the numbers a family reports in STATS. Every operation keeps them
// current; reading them never scans.
type Info struct {
	Objects      uint64 // live objects
	TotalObjects uint64 // objects ever created
	UsedMemory   uint64 // bytes, estimated: each object with its name and map entry (nameCost)
}

// nameCost is what an object named name costs: the object, its entry in the map and
// the name's bytes (memcost.go).
func nameCost(name int) uint64 { return uint64(objectCost + allocSize(name)) }

// object is one named thing that ledgers hold amounts of. The table keeps held
// and the idle list; the family interprets top and last.
type object struct {
	name       string
	held       uint32  // sum of every ledger's entry for it
	top        uint32  // counter: max consumption in the interval; semaphore: initial value
	last       int64   // counter: last update, Unix seconds; unused by semaphores
	acquired   uint64  // counter: Acquires granted since it was created; unused by semaphores
	prev, next *object // links on the idle list while held == 0
	dead       bool    // removed from the table; a dump snapshot may still point at it
}

// table is the core every "amounts per owner" family shares: named objects,
// the ledgers that hold amounts of them, and the list of idle objects (held ==
// 0), so a family's garbage collection costs O(idle objects), not O(objects).
type table struct {
	objs    map[string]*object
	idle    *object   // head of the idle list: the newest idle object
	oldest  *object   // tail of the idle list
	nidle   int       // length of the idle list
	nents   int       // entries of every ledger, for Bytes
	ledgers []*Ledger // ledgers that hold something; Ledger.slot is index+1
	max     int       // object limit, <= 0 for none
	peak    int       // most objects since the map was last built
	info    Info
}

// shrinkMapMin is the fewest objects a map must have held to be rebuilt smaller.
const shrinkMapMin = 4096

func (t *table) init(maxObjects, sizeHint int) {
	t.objs = make(map[string]*object, max(sizeHint, 0))
	t.max = maxObjects
}

func (t *table) newLedger(o Owner) *Ledger { return &Ledger{t: t, owner: o} }

// own panics if l belongs to another table: passing a semaphore ledger to
// counters is a programming error that would corrupt both.
func (t *table) own(l *Ledger) {
	if l.t != t {
		panic("store: ledger used with a family that did not create it")
	}
}

// create adds an idle object named name, or returns nil at the object limit.
func (t *table) create(name []byte) *object {
	if t.max > 0 && len(t.objs) >= t.max {
		return nil
	}
	o := &object{name: string(name)}
	t.objs[o.name] = o
	t.peak = max(t.peak, len(t.objs))
	t.link(o)
	t.info.Objects++
	t.info.TotalObjects++
	t.info.UsedMemory += nameCost(len(name))
	return o
}

// delete removes idle object o.
func (t *table) delete(o *object) {
	delete(t.objs, o.name)
	t.unlink(o)
	o.dead = true
	t.info.Objects--
	t.info.UsedMemory -= nameCost(len(o.name))
}

// bytes is what the table's state costs (memcost.go): its objects and the ledgers'
// entries.
func (t *table) bytes() int64 {
	return int64(t.info.UsedMemory) + int64(t.nents)*ledgerEntryCost
}

// evict deletes idle objects, oldest first (the longest idle), until what they cost adds
// up to need bytes or none is left; it returns the bytes and the number of objects.
func (t *table) evict(need int64) (freed int64, n int) {
	for freed < need && t.oldest != nil {
		o := t.oldest
		freed += int64(nameCost(len(o.name)))
		t.delete(o)
		n++
	}
	if n > 0 {
		t.shrink()
	}
	return freed, n
}

// shrink rebuilds the map once it holds a quarter of what it held at its
// largest: a Go map never gives back its room, so without this the memory of
// collected objects would stay with the table. It costs O(objects left), once
// per collection that removed at least three quarters of them.
func (t *table) shrink() {
	if t.peak < shrinkMapMin || len(t.objs) > t.peak/4 {
		return
	}
	m := make(map[string]*object, len(t.objs))
	for name, o := range t.objs {
		m[name] = o
	}
	t.objs, t.peak = m, len(m)
}

// The idle list is linked by hand rather than with list (list.go): Drop and
// Acquire/Release link and unlink on every call, and the generic list's calls
// through its type dictionary made Drop twice as slow.

// link puts o at the head of the idle list.
func (t *table) link(o *object) {
	o.prev, o.next = nil, t.idle
	if t.idle != nil {
		t.idle.prev = o
	} else {
		t.oldest = o
	}
	t.idle = o
	t.nidle++
}

// unlink takes o off the idle list.
func (t *table) unlink(o *object) {
	if o.prev != nil {
		o.prev.next = o.next
	} else {
		t.idle = o.next
	}
	if o.next != nil {
		o.next.prev = o.prev
	} else {
		t.oldest = o.prev
	}
	o.prev, o.next = nil, nil
	t.nidle--
}

// hold adds n of o to l. The caller has checked that o.held+n fits.
func (t *table) hold(l *Ledger, o *object, n uint32) {
	if n == 0 {
		return
	}
	if o.held != 0 {
		if i := l.find(o); i >= 0 {
			o.held += n
			l.ents[i].n += n
			return
		}
	} else {
		t.unlink(o) // idle: no ledger has an entry for it
	}
	o.held += n
	l.add(o, n)
	t.nents++
	if l.slot == 0 {
		t.ledgers = append(t.ledgers, l)
		l.slot = len(t.ledgers)
	}
}

// take removes n of entry i of l; n must not exceed the entry.
func (t *table) take(l *Ledger, i int, n uint32) {
	o := l.ents[i].o
	l.ents[i].n -= n
	if l.ents[i].n == 0 {
		l.remove(i)
		t.nents--
		if len(l.ents) == 0 {
			l.reset()
			t.forget(l)
		}
	}
	t.release(o, n)
}

// release subtracts n from o.held, idling o at 0.
func (t *table) release(o *object, n uint32) {
	if n == 0 {
		return
	}
	o.held -= n
	if o.held == 0 {
		t.link(o)
	}
}

// drop releases every entry of l and empties it.
func (t *table) drop(l *Ledger) {
	for _, e := range l.ents {
		t.release(e.o, e.n)
	}
	t.nents -= len(l.ents)
	l.reset()
	if l.slot != 0 {
		t.forget(l)
	}
}

// forget takes l, now empty, off the list of holding ledgers.
func (t *table) forget(l *Ledger) {
	i, last := l.slot-1, len(t.ledgers)-1
	t.ledgers[i] = t.ledgers[last]
	t.ledgers[i].slot = i + 1
	t.ledgers[last] = nil
	t.ledgers = t.ledgers[:last]
	l.slot = 0
}

// check verifies the table's invariants: every holding ledger is tracked and
// well formed, every entry is non-zero and points at a live object, each
// object's held amount is the sum of the ledgers' entries, exactly the idle
// objects are on the idle list, and Info and the object limit agree with the
// objects. kind names the objects in errors; each calls the family's own
// per-object check.
func (t *table) check(kind string, each func(o *object) error) error {
	sums := make(map[*object]uint64, len(t.objs))
	for i, l := range t.ledgers {
		if l.t != t || l.slot != i+1 {
			return fmt.Errorf("store: ledger of owner %d: tracked at %d, slot %d", l.owner, i, l.slot)
		}
		if len(l.ents) == 0 {
			return fmt.Errorf("store: ledger of owner %d: tracked but empty", l.owner)
		}
		if l.idx == nil && len(l.ents) > linearMax {
			return fmt.Errorf("store: ledger of owner %d: %d entries without an index", l.owner, len(l.ents))
		}
		if l.idx != nil && len(l.idx) != len(l.ents) {
			return fmt.Errorf("store: ledger of owner %d: %d entries, %d indexed", l.owner, len(l.ents), len(l.idx))
		}
		seen := make(map[*object]bool, len(l.ents))
		for j, e := range l.ents {
			name := quote(e.o.name)
			switch {
			case e.n == 0:
				return fmt.Errorf("store: ledger of owner %d: holds 0 of %s %s", l.owner, kind, name)
			case e.o.dead || t.objs[e.o.name] != e.o:
				return fmt.Errorf("store: ledger of owner %d: holds %d of deleted %s %s", l.owner, e.n, kind, name)
			case seen[e.o]:
				return fmt.Errorf("store: ledger of owner %d: two entries for %s %s", l.owner, kind, name)
			}
			if l.idx != nil {
				if k, ok := l.idx[e.o]; !ok || int(k) != j {
					return fmt.Errorf("store: ledger of owner %d: %s %s at %d, indexed at %d", l.owner, kind, name, j, k)
				}
			}
			seen[e.o] = true
			sums[e.o] += uint64(e.n)
		}
	}
	var idle int
	var mem uint64
	for name, o := range t.objs {
		if o.name != name || o.dead {
			return fmt.Errorf("store: %s %s: filed under %s, dead %v", kind, quote(o.name), quote(name), o.dead)
		}
		if uint64(o.held) != sums[o] {
			return fmt.Errorf("store: %s %s: holds %d, ledgers hold %d", kind, quote(name), o.held, sums[o])
		}
		if o.held == 0 {
			idle++
		}
		mem += nameCost(len(name))
		if err := each(o); err != nil {
			return err
		}
	}
	n := 0
	var prev *object
	for o := t.idle; o != nil; o = o.next {
		if n++; n > len(t.objs) {
			return fmt.Errorf("store: idle list longer than the %d %ss", len(t.objs), kind)
		}
		if o.prev != prev || o.held != 0 || o.dead || t.objs[o.name] != o {
			return fmt.Errorf("store: idle %s %s: holds %d, dead %v, bad link %v", kind, quote(o.name), o.held, o.dead, o.prev != prev)
		}
		prev = o
	}
	if n != idle || n != t.nidle || t.oldest != prev {
		return fmt.Errorf("store: %d idle %ss, %d on the idle list, counted %d, tail right %v", idle, kind, n, t.nidle, t.oldest == prev)
	}
	ents := 0
	for _, l := range t.ledgers {
		ents += len(l.ents)
	}
	if ents != t.nents {
		return fmt.Errorf("store: ledgers hold %d entries, counted %d", ents, t.nents)
	}
	if t.max > 0 && len(t.objs) > t.max {
		return fmt.Errorf("store: %d %ss, limit %d", len(t.objs), kind, t.max)
	}
	if t.info.Objects != uint64(len(t.objs)) || t.info.UsedMemory != mem || t.info.TotalObjects < t.info.Objects {
		return fmt.Errorf("store: info %+v, have %d %ss using %d bytes", t.info, len(t.objs), kind, mem)
	}
	return nil
}

// quote quotes a name for an error, cutting long (up to 64 KiB) names short.
func quote(name string) string {
	const cut = 40
	if len(name) > cut {
		return strconv.Quote(name[:cut]) + "..."
	}
	return strconv.Quote(name)
}
