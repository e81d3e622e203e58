package store

import "fmt"

// SemaphoresConfig configures a Semaphores.
type SemaphoresConfig struct {
	MaxObjects int // most live semaphores; <= 0 means no limit
	SizeHint   int // expected number of semaphores, to size the table
}

// Semaphores is the namespace of the older yrmcds semaphore protocol: name ->
// remaining value, with each connection's share in its Ledger. A semaphore
// is created by its first Acquire with an initial value, and deleted by GC
// once nobody holds any of it.
type Semaphores struct {
	t table
}

// NewSemaphores returns an empty semaphore namespace.
func NewSemaphores(cfg SemaphoresConfig) *Semaphores {
	s := &Semaphores{}
	s.t.init(cfg.MaxObjects, cfg.SizeHint)
	return s
}

// NewLedger returns an empty ledger for a connection of owner o.
func (s *Semaphores) NewLedger(o Owner) *Ledger { return s.t.newLedger(o) }

// Acquire takes r from the named semaphore's value and adds it to l's share if
// r <= value, creating the semaphore at initial-r if it does not exist (the
// initial value of an existing one is ignored). It returns NotAvailable,
// changing nothing, if the value is too low, and OutOfMemory if creating the
// semaphore would exceed MaxObjects. now is unused.
func (s *Semaphores) Acquire(l *Ledger, name []byte, r, initial uint32, now int64) Result {
	s.t.own(l)
	o := s.t.objs[string(name)]
	if o == nil {
		if r > initial {
			return NotAvailable
		}
		if o = s.t.create(name); o == nil {
			return OutOfMemory
		}
		o.top = initial
	} else if r > o.top-o.held {
		return NotAvailable
	}
	s.t.hold(l, o, r)
	return OK
}

// Release gives r back to the named semaphore from l's share. It returns
// NotFound if the semaphore does not exist and NotAcquired if l holds less
// than r of it (or none at all, even for r == 0). now is unused.
func (s *Semaphores) Release(l *Ledger, name []byte, r uint32, now int64) Result {
	s.t.own(l)
	o := s.t.objs[string(name)]
	if o == nil {
		return NotFound
	}
	i := l.find(o)
	if i < 0 || r > l.ents[i].n {
		return NotAcquired
	}
	s.t.take(l, i, r)
	return OK
}

// Get returns the named semaphore's remaining value and whether it exists.
func (s *Semaphores) Get(name []byte) (value uint32, ok bool) {
	o := s.t.objs[string(name)]
	if o == nil {
		return 0, false
	}
	return o.top - o.held, true
}

// Evict deletes semaphores nobody holds, those idle longest first, as their collection
// would, until what they cost adds up to need bytes or none is left, and returns the bytes
// and the number of semaphores.
func (s *Semaphores) Evict(need int64) (freed int64, n int) { return s.t.evict(need) }

// Bytes estimates the memory the semaphores take (memcost.go).
func (s *Semaphores) Bytes() int64 { return s.t.bytes() }

// Drop releases everything l holds, for a connection that went away. l is
// left empty, to be reused or discarded. now is unused.
func (s *Semaphores) Drop(l *Ledger, now int64) {
	s.t.own(l)
	s.t.drop(l)
}

// GC deletes every semaphore nobody holds any of and returns how many it
// deleted. It costs O(such semaphores).
func (s *Semaphores) GC() int {
	n := 0
	for o := s.t.idle; o != nil; {
		next := o.next
		s.t.delete(o)
		n++
		o = next
	}
	s.t.shrink()
	return n
}

// Len returns the number of live semaphores.
func (s *Semaphores) Len() int { return len(s.t.objs) }

// Info returns the numbers for STATS.
func (s *Semaphores) Info() Info { return s.t.info }

// Check verifies the invariants between the semaphores and every ledger
// holding any of them: each semaphore's initial value minus its value is the
// sum of the ledgers' shares, and no share is 0 or of a deleted semaphore. It
// scans everything; it is meant for tests.
func (s *Semaphores) Check() error {
	return s.t.check("semaphore", func(o *object) error {
		if o.held > o.top {
			return fmt.Errorf("store: semaphore %s: %d held of initial %d", quote(o.name), o.held, o.top)
		}
		return nil
	})
}
