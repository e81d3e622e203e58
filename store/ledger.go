package store

// Ledger is what one owner (connection) holds in one family: an amount, never
// zero, per object. A family creates it with NewLedger; the event loop keeps it
// in its per-connection state and passes it to every operation, and must Drop
// it when the connection goes away.
//
// An idle ledger is a few words: no map and no preallocated slice. Entries are
// found by a linear scan while there are at most linearMax of them and through
// an index map beyond that, so a connection holding 100,000 objects still finds
// an entry in O(1). Capacity is kept while entries come and go, so steady-state
// acquire/release pairs do not allocate; it is given back when the ledger
// shrinks to a quarter of it, and the index and any slice larger than
// linearMax when it empties.
type Ledger struct {
	t     *table
	owner Owner
	slot  int // 1 + index in t.ledgers while the ledger holds anything, else 0
	ents  []entry
	idx   map[*object]int32 // index into ents, kept once len(ents) > linearMax
}

// entry is an amount a ledger holds of one object.
type entry struct {
	o *object
	n uint32
}

const (
	linearMax = 8  // most entries found by a linear scan, without an index
	shrinkMin = 32 // smallest capacity given back when the ledger shrinks
)

// Owner returns the owner the ledger was created for.
func (l *Ledger) Owner() Owner { return l.owner }

// Len returns the number of objects the ledger holds something of.
func (l *Ledger) Len() int { return len(l.ents) }

// Held returns how much of the named object the ledger holds (0 for none).
func (l *Ledger) Held(name []byte) uint32 {
	o := l.t.objs[string(name)]
	if o == nil {
		return 0
	}
	if i := l.find(o); i >= 0 {
		return l.ents[i].n
	}
	return 0
}

// find returns the index of o's entry, or -1.
func (l *Ledger) find(o *object) int {
	if l.idx != nil {
		if i, ok := l.idx[o]; ok {
			return int(i)
		}
		return -1
	}
	for i := range l.ents {
		if l.ents[i].o == o {
			return i
		}
	}
	return -1
}

// add appends an entry for o, which the ledger must not hold yet.
func (l *Ledger) add(o *object, n uint32) {
	l.ents = append(l.ents, entry{o, n})
	switch {
	case l.idx != nil:
		l.idx[o] = int32(len(l.ents) - 1)
	case len(l.ents) > linearMax:
		l.index()
	}
}

// remove deletes entry i, moving the last entry into its place.
func (l *Ledger) remove(i int) {
	last := len(l.ents) - 1
	if l.idx != nil {
		delete(l.idx, l.ents[i].o)
		if i != last {
			l.idx[l.ents[last].o] = int32(i)
		}
	}
	l.ents[i] = l.ents[last]
	l.ents[last] = entry{}
	l.ents = l.ents[:last]
	if cap(l.ents) >= shrinkMin && len(l.ents) <= cap(l.ents)/4 {
		l.shrink()
	}
}

// shrink moves the entries to a slice twice their number and rebuilds or
// drops the index, giving back what a once-large ledger no longer needs.
func (l *Ledger) shrink() {
	l.ents = append(make([]entry, 0, 2*len(l.ents)), l.ents...)
	l.idx = nil
	if len(l.ents) > linearMax {
		l.index()
	}
}

// index builds the index map from scratch.
func (l *Ledger) index() {
	l.idx = make(map[*object]int32, 2*len(l.ents))
	for i, e := range l.ents {
		l.idx[e.o] = int32(i)
	}
}

// reset empties the ledger, keeping a small slice for reuse and giving back a
// large one and the index.
func (l *Ledger) reset() {
	if cap(l.ents) > linearMax {
		l.ents = nil
	} else {
		clear(l.ents)
		l.ents = l.ents[:0]
	}
	l.idx = nil
}
