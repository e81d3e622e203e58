package store

import (
	"fmt"
	"math"
)

// counterGC is the timer of the counters' next collection.
type counterGC struct{ dl deadline }

func (g *counterGC) deadline() *deadline { return &g.dl }

// semaphoreGC is the timer of the semaphores' next collection.
type semaphoreGC struct{ dl deadline }

func (g *semaphoreGC) deadline() *deadline { return &g.dl }

// DefaultSemaphoreGC is the default Config.SemaphoreGCInterval: 10 s.
const DefaultSemaphoreGC = 10e9

// Config configures a Store: each family's own configuration and when the
// collections run. Counters are collected at the boundaries of their
// interval (Counters.Interval, wall-clock aligned), semaphores every
// SemaphoreGCInterval.
type Config struct {
	Counters   CountersConfig
	Semaphores SemaphoresConfig
	Pools      PoolsConfig
	Locks      LocksConfig
	Keyspace   KeyspaceConfig

	SemaphoreGCInterval int64 // ns between semaphore collections; <= 0 means DefaultSemaphoreGC
	Start               int64 // Unix ns the store starts at: the first semaphore collection is an interval later
}

// Store is every resource family on one clock. The families are used
// through their own methods, as alone; what happens at a time (waits timing
// out, holds expiring, holders becoming persistent, collections) is
// scheduled in one deadline heap that NextDeadline and Advance drive, so
// the caller runs one timer for all of them.
//
// The families' own Expire, NextDeadline, PersistDue and NextPersist are for
// a family alone; on a family of a Store they panic.
type Store struct {
	Counters   *Counters
	Semaphores *Semaphores
	Pools      *Pools
	Locks      *Locks
	Keyspace   *Keyspace // Redis data (keyspace.go): its expiries are part of NextDeadline and Advance

	q        deadlines
	semGC    semaphoreGC
	semEvery int64
	mv       moveState // MoveValues' walk (keyspace_move.go)
}

// New returns an empty store.
func New(cfg Config) *Store {
	s := &Store{
		Counters:   NewCounters(cfg.Counters),
		Semaphores: NewSemaphores(cfg.Semaphores),
		Pools:      NewPools(cfg.Pools),
		Locks:      NewLocks(cfg.Locks),
		Keyspace:   NewKeyspace(cfg.Keyspace),
		semEvery:   cfg.SemaphoreGCInterval,
	}
	if s.semEvery <= 0 {
		s.semEvery = DefaultSemaphoreGC
	}
	s.Pools.dl, s.Pools.shared = &s.q, true
	s.Locks.dl, s.Locks.aging, s.Locks.shared = &s.q, &s.q, true
	s.Locks.cfg.keyspace = s.Keyspace // the "Locks and DEL" link (locks_named.go)
	s.Counters.q = &s.q
	s.q.add(&s.Counters.gc, s.Counters.gcNext())
	s.q.add(&s.semGC, addSat(cfg.Start, s.semEvery))
	return s
}

// Bytes estimates the memory the stored state takes (memcost.go): counters and
// semaphores with their names and the ledgers' entries, PoolCounter keys and entries,
// slock keys, holders and waiters with their values and data, and the deadline heap.
// Each family keeps its part as it changes; reading it never scans.
func (s *Store) Bytes() int64 {
	return s.Counters.t.bytes() + s.Semaphores.t.bytes() + s.Pools.Bytes() + s.Locks.Bytes() +
		s.Keyspace.Bytes() + int64(cap(s.q.h))*heapSlot
}

// DueKind names what fell due.
type DueKind uint8

// What can fall due.
const (
	DuePoolWait    DueKind = iota + 1 // a PoolCounter wait timed out: a Timeout wake
	DueLockWait                       // an slock wait timed out: a TIMEOUT reply
	DueLockHold                       // an slock holder expired: an EXPRIED push
	DuePersist                        // an slock holder has been held PersistAfter: its key is journaled
	DueCounterGC                      // the counters' interval ended: Counters.GC is due
	DueSemaphoreGC                    // the semaphore interval passed: Semaphores.GC is due
)

var dueNames = [...]string{
	DuePoolWait: "PoolWait", DueLockWait: "LockWait", DueLockHold: "LockHold",
	DuePersist: "Persist", DueCounterGC: "CounterGC", DueSemaphoreGC: "SemaphoreGC",
}

func (k DueKind) String() string {
	if int(k) < len(dueNames) && dueNames[k] != "" {
		return dueNames[k]
	}
	return fmt.Sprintf("DueKind(%d)", uint8(k))
}

// DueEvent is one deadline that fell due: when it was due, what it was, and
// the connection it was for (0 for a collection).
type DueEvent struct {
	At    int64
	Kind  DueKind
	Owner Owner
}

// Due is what an Advance found due. Advance appends to it; Reset empties it
// for reuse, keeping its buffers. Each family's part is in the order the
// family would have produced it alone, and Events lists every deadline in
// the order handled: by deadline, equal deadlines in the order they were
// set.
type Due struct {
	Wakes   []Wake      // PoolCounter: Timeout replies owed, to be written in order
	Replies []LockReply // slock: TIMEOUTs and EXPRIED pushes, and the grants they caused, in order
	Execs   []Exec      // slock: EXECUTE inner commands to run next, in order

	// The collections that fell due: the caller runs Counters.GC(now) or
	// Semaphores.GC(), which are its to time.
	CounterGC   bool
	SemaphoreGC bool

	// KeysExpired is how many keys of the Keyspace expired (their events and records
	// are in the Keyspace's); at most KeyspaceExpireBudget an Advance, the rest being
	// still due at NextDeadline.
	KeysExpired int

	Events []DueEvent
}

// Reset empties d, keeping its buffers.
func (d *Due) Reset() {
	d.Wakes, d.Replies, d.Execs, d.Events = d.Wakes[:0], d.Replies[:0], d.Execs[:0], d.Events[:0]
	d.CounterGC, d.SemaphoreGC, d.KeysExpired = false, false, 0
}

// KeyspaceExpireBudget is the most keys an Advance expires: a million keys due at once are
// expired over many turns, other work served in between.
const KeyspaceExpireBudget = 1000

// msToNs returns Unix ms as ns, saturated (expiries past 2262 are never reached).
func msToNs(ms int64) int64 {
	if ms > math.MaxInt64/1_000_000 {
		return math.MaxInt64
	}
	return ms * 1e6
}

// NextDeadline returns when the earliest wait, hold, persistence or
// collection is due, and false if nothing is scheduled.
func (s *Store) NextDeadline() (int64, bool) {
	at, ok := s.q.next()
	if k, kok := s.Keyspace.NextDeadline(); kok && (!ok || msToNs(k) < at) {
		return msToNs(k), true
	}
	return at, ok
}

// Advance handles everything due at now (deadline <= now), earliest first,
// and appends what it caused to d. Work that falls due at now while it runs
// (a persistence with PersistAfter 0, say) is handled too. The Value and
// Frame slices of d.Replies and d.Execs point into a buffer of the Locks that
// its next call reuses, as with Locks.Do.
func (s *Store) Advance(now int64, d *Due) {
	l := s.Locks
	l.begin(d.Replies, d.Execs)
	for {
		t, ok := s.q.pop(now)
		if !ok {
			break
		}
		at := t.deadline().at
		switch it := t.(type) {
		case *poolEntry:
			d.Events = append(d.Events, DueEvent{at, DuePoolWait, it.c.owner})
			d.Wakes = s.Pools.timeout(it, now, d.Wakes)
		case *lockItem:
			k := DueLockHold
			if it.waiting {
				k = DueLockWait
			}
			d.Events = append(d.Events, DueEvent{at, k, it.owner})
			l.due(it, now)
		case *agedItem:
			d.Events = append(d.Events, DueEvent{at, DuePersist, it.owner})
			l.aged(it)
		case *counterGC:
			d.Events = append(d.Events, DueEvent{At: at, Kind: DueCounterGC})
			d.CounterGC = true
			// Where Counters.GC(now) puts it, should the caller not collect.
			s.q.add(it, s.Counters.gcAfter(now))
		case *semaphoreGC:
			d.Events = append(d.Events, DueEvent{At: at, Kind: DueSemaphoreGC})
			d.SemaphoreGC = true
			s.q.add(it, addSat(now, s.semEvery))
		default:
			panic(fmt.Sprintf("store: %T in the deadline heap", t))
		}
	}
	d.Replies, d.Execs = l.end()
	n, _ := s.Keyspace.Advance(now/1e6, KeyspaceExpireBudget)
	d.KeysExpired += n
}

// Check verifies the invariants of every family and of the deadline heap
// they share: the heap's order and handles, each item in it a pool wait, an
// slock wait or hold, an aging holder or one of the two collections (both
// always scheduled, the counters' where their last GC says). It scans
// everything; it is meant for tests.
func (s *Store) Check() error {
	if err := s.q.check(); err != nil {
		return err
	}
	cgc, sgc := 0, 0
	for i := range s.q.h {
		switch it := s.q.h[i].d.it.(type) {
		case *poolEntry, *lockItem, *agedItem:
			// The families check their own.
		case *counterGC:
			cgc++
			if it != &s.Counters.gc {
				return fmt.Errorf("store: deadline heap: a counter collection of another store at %d", i)
			}
		case *semaphoreGC:
			sgc++
			if it != &s.semGC {
				return fmt.Errorf("store: deadline heap: a semaphore collection of another store at %d", i)
			}
		default:
			return fmt.Errorf("store: deadline heap: %T at %d", it, i)
		}
	}
	switch {
	case cgc != 1 || sgc != 1:
		return fmt.Errorf("store: deadline heap: %d counter and %d semaphore collections scheduled, want 1 each", cgc, sgc)
	case s.Counters.gcDone && s.Counters.gc.dl.at < s.Counters.gcNext():
		return fmt.Errorf("store: counter collection due at %d, before the interval after the last one (%d)",
			s.Counters.gc.dl.at, s.Counters.gcNext())
	}
	for _, f := range []func() error{s.Counters.Check, s.Semaphores.Check, s.Pools.Check, s.Locks.Check, s.Keyspace.Check} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// alone panics if a family is part of a Store, for the methods that drive
// its deadlines on its own.
func alone(shared bool, method string) {
	if shared {
		panic("store: " + method + " on a family of a Store; use Store.Advance and Store.NextDeadline")
	}
}

// countIn returns how many items of q are of type T.
func countIn[T timer](q *deadlines) int {
	n := 0
	for i := range q.h {
		if _, ok := q.h[i].d.it.(T); ok {
			n++
		}
	}
	return n
}

// addSat returns a+b for b >= 0, at most math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
