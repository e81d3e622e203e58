package store

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// DefaultPoolEntries is the default number of entries, held or waiting, one
// PoolCounter connection may have.
const DefaultPoolEntries = 4

// PoolsConfig configures a Pools.
type PoolsConfig struct {
	MaxEntries int // most entries per connection, held or waiting; <= 0 means DefaultPoolEntries
	MaxKeys    int // most live keys; <= 0 means no limit
}

// Keys and entries that are no longer in use are kept for reuse, up to these
// numbers, so that lock/release pairs on the same keys allocate nothing.
const (
	poolIdleKeys    = 4096 // deleted keys kept in the map, oldest evicted first
	poolFreeEntries = 4096 // entries on the free list
)

// Mode is the kind of an acquire: ACQ4ME or ACQ4ANY.
type Mode uint8

// The acquire modes.
const (
	AcqMe  Mode = iota // the caller needs the lock itself: a release wakes one such waiter, with LOCKED
	AcqAny             // the caller can use another's work: a release wakes every such waiter, with DONE
)

func (m Mode) String() string {
	switch m {
	case AcqMe:
		return "AcqMe"
	case AcqAny:
		return "AcqAny"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Outcome is the answer to a PoolCounter request, or to a waiting one later.
type Outcome uint8

// The outcomes. Each but Waiting is one reply line.
const (
	Locked          Outcome = iota // the lock is held
	Done                           // an ACQ4ANY waiter's key was released: it holds nothing
	QueueFull                      // the key has maxqueue entries already (or MaxKeys keys are live)
	Timeout                        // not lockable and timeout 0, or the wait timed out
	LockHeld                       // the connection has MaxEntries entries already
	NotLocked                      // RELEASE with no entry
	Released                       // RELEASE popped an entry
	WaitForResponse                // the connection's newest entry is still waiting
	BadSyntax                      // empty key, workers 0 or maxqueue 0
	Waiting                        // the request waits; its reply comes later as a Wake
)

var outcomeNames = [...]string{
	Locked:          "Locked",
	Done:            "Done",
	QueueFull:       "QueueFull",
	Timeout:         "Timeout",
	LockHeld:        "LockHeld",
	NotLocked:       "NotLocked",
	Released:        "Released",
	WaitForResponse: "WaitForResponse",
	BadSyntax:       "BadSyntax",
	Waiting:         "Waiting",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Wake is a reply owed to a waiting connection: Locked, Done or Timeout. A
// release, a disconnect or a timeout produces them; the caller writes them in
// the order given (for a RELEASE, before the releaser's own reply).
type Wake struct {
	Owner   Owner
	Outcome Outcome
}

// Pools is the PoolCounter namespace: named keys, each with a number of
// entries holding a slot ("processing") and entries waiting for one in two
// FIFO queues, ACQ4ME and ACQ4ANY. Limits come with each request: a key keeps
// only its counts, and each acquire is judged against its own workers and
// maxqueue. A key exists while it has entries.
//
// Each connection has a PoolClient: its entries, held or waiting, newest
// last. Only the newest can be waiting, since a connection cannot acquire
// while it waits. Waits time out through a deadline heap: the Pools' own,
// which the caller drives with Expire from a periodic tick, or in a Store
// the Store's, driven by Store.Advance.
type Pools struct {
	keys       map[string]*poolKey // live keys and idle ones kept for reuse
	idle       keyList             // keys with no entries, oldest first
	live       uint64              // keys with entries
	processing uint64              // held entries
	waiting    uint64              // waiting entries
	dl         *deadlines          // waits, by when they time out
	shared     bool                // dl is a Store's
	clients    []*PoolClient       // clients with entries; PoolClient.slot is index+1
	free       *poolEntry          // unused entries, linked by next
	nfree      int
	maxEntries int
	maxKeys    int
	st         PoolStats
	keyBytes   int64 // what the keys in the map cost (poolKeyBytes)
}

// PoolClient is one connection's state in a Pools. The event loop keeps it
// with the connection and passes it to every operation, and must Drop it
// when the connection goes away.
type PoolClient struct {
	p     *Pools
	owner Owner
	slot  int          // 1 + index in p.clients while it has entries, else 0
	ents  []*poolEntry // newest last
}

// poolEntry is one acquire that is held or waiting. While waiting it is in
// its key's queue for its mode and in the deadline heap.
type poolEntry struct {
	dl               deadline
	key              *poolKey
	c                *PoolClient
	since            int64 // when it got the lock, or started waiting
	links[poolEntry]       // in the key's queue while waiting; next links the free list
	mode             Mode
	waiting          bool
}

func (e *poolEntry) deadline() *deadline { return &e.dl }

func (e *poolEntry) link() *links[poolEntry] { return &e.links }

// poolKey is one key: its counts and wait queues.
type poolKey struct {
	name           string
	count          uint32 // entries, held or waiting
	processing     uint32 // held entries
	workers        uint32 // of the latest acquire: what the key is measured against in Busiest
	maxqueue       uint32
	me, any        queue
	links[poolKey] // on the idle list while count == 0
	idle           bool
}

func (k *poolKey) link() *links[poolKey] { return &k.links }

// queue is a FIFO of waiting entries, linked through the entries.
type queue = list[poolEntry, *poolEntry]

// keyList is the list of idle keys, oldest first.
type keyList = list[poolKey, *poolKey]

// NewPools returns an empty PoolCounter namespace.
func NewPools(cfg PoolsConfig) *Pools {
	p := &Pools{keys: make(map[string]*poolKey), dl: new(deadlines), maxEntries: cfg.MaxEntries, maxKeys: cfg.MaxKeys}
	if p.maxEntries <= 0 {
		p.maxEntries = DefaultPoolEntries
	}
	return p
}

// NewClient returns the state of a new connection of owner o.
func (p *Pools) NewClient(o Owner) *PoolClient { return &PoolClient{p: p, owner: o} }

// Owner returns the owner the client was created for.
func (c *PoolClient) Owner() Owner { return c.owner }

// Len returns the number of the client's entries, held or waiting.
func (c *PoolClient) Len() int { return len(c.ents) }

// Waiting reports whether the client's newest entry is waiting, that is
// whether a Wake for it is still to come.
func (c *PoolClient) Waiting() bool {
	return len(c.ents) > 0 && c.ents[len(c.ents)-1].waiting
}

// own panics if c belongs to another Pools.
func (p *Pools) own(c *PoolClient) {
	if c.p != p {
		panic("store: pool client used with a Pools that did not create it")
	}
}

// Acquire is ACQ4ME (mode AcqMe) or ACQ4ANY (AcqAny) of key by c, with the
// request's own limits: at most workers holders and maxqueue entries on the
// key, and a wait of at most timeout seconds. The checks, in order:
//
//  1. c has MaxEntries entries: LockHeld.
//  2. c's newest entry is waiting: WaitForResponse.
//  3. key empty, workers or maxqueue 0 (or mode unknown): BadSyntax.
//  4. the key has maxqueue entries or more: QueueFull; also when the key
//     does not exist and MaxKeys keys do.
//  5. fewer than workers hold the key: Locked, even if others wait.
//  6. timeout is 0: Timeout.
//  7. otherwise c waits at the back of the key's queue for mode: Waiting. The
//     reply comes later as a Wake from Release, Drop or Expire.
//
// key is not retained.
func (p *Pools) Acquire(c *PoolClient, mode Mode, key []byte, workers, maxqueue, timeout uint32, now int64) Outcome {
	p.own(c)
	n := len(c.ents)
	switch {
	case n >= p.maxEntries:
		p.st.LockMismatch++
		return LockHeld
	case n > 0 && c.ents[n-1].waiting:
		p.st.LockWhileWaiting++
		return WaitForResponse
	case len(key) == 0 || workers == 0 || maxqueue == 0 || mode > AcqAny:
		return BadSyntax
	}
	k := p.keys[string(key)]
	var count, processing uint32
	if k != nil {
		count, processing = k.count, k.processing
	}
	switch {
	case count >= maxqueue:
		p.st.FullQueues++
		return QueueFull
	case processing >= workers && timeout == 0:
		return Timeout
	}
	if k == nil || k.idle {
		if p.maxKeys > 0 && p.live >= uint64(p.maxKeys) {
			p.st.FullQueues++
			return QueueFull
		}
		k = p.revive(k, key)
	}
	e := p.newEntry(c, k, mode, now)
	k.workers, k.maxqueue = workers, maxqueue
	k.count++
	if processing < workers {
		k.processing++
		p.processing++
		p.st.TotalAcquired++
		return Locked
	}
	e.waiting = true
	if mode == AcqMe {
		k.me.push(e)
	} else {
		k.any.push(e)
	}
	p.waiting++
	p.dl.add(e, after(now, timeout))
	return Waiting
}

// after returns now plus timeout seconds, saturated.
func after(now int64, timeout uint32) int64 {
	d := int64(timeout) * 1e9
	if now > math.MaxInt64-d {
		return math.MaxInt64
	}
	return now + d
}

// Release is RELEASE by c: it pops c's newest entry, whatever its key, and
// returns Released, or NotLocked if c has none. If the entry was waiting, the
// wait is cancelled and nobody is woken. If it was held, every ACQ4ANY
// waiter on its key gets Done and loses its entry, then the oldest ACQ4ME
// waiter gets Locked and takes over the slot (with none, the slot is
// freed); these wakes are appended to wakes in that order.
func (p *Pools) Release(c *PoolClient, now int64, wakes []Wake) (Outcome, []Wake) {
	p.own(c)
	if len(c.ents) == 0 {
		p.st.ReleaseMismatch++
		return NotLocked, wakes
	}
	e := c.pop()
	k := e.key
	if e.waiting {
		p.unwait(e)
	} else {
		held := now - e.since
		p.ended(held)
		for w := k.any.head; w != nil; w = k.any.head {
			if w.c.pop() != w {
				panic("store: waiting pool entry is not its client's newest")
			}
			p.unwait(w)
			p.st.GainedTime += seconds64(held)
			p.st.WaitingTimeForGood += seconds64(now - w.since)
			wakes = append(wakes, Wake{w.c.owner, Done})
			p.freeEntry(w)
		}
		wakes = p.handOver(k, k.me.head, now, wakes)
		k.count--
	}
	p.st.TotalReleases++
	p.settle(k)
	p.freeEntry(e)
	return Released, wakes
}

// Drop removes every entry of c, for a connection that went away, and
// appends the wakes that causes. A waiting entry is removed silently. Each
// held one, newest first, goes to the oldest ACQ4ME waiter on its key, or
// else to the oldest ACQ4ANY waiter, which gets Locked; nobody gets Done. c
// is left empty, to be reused or discarded.
func (p *Pools) Drop(c *PoolClient, now int64, wakes []Wake) []Wake {
	p.own(c)
	for len(c.ents) > 0 {
		e := c.pop()
		k := e.key
		if e.waiting {
			p.unwait(e)
		} else {
			p.ended(now - e.since)
			w := k.me.head
			if w == nil {
				w = k.any.head
			}
			wakes = p.handOver(k, w, now, wakes)
			k.count--
		}
		p.settle(k)
		p.freeEntry(e)
	}
	return wakes
}

// Expire times out every wait due at now (started at least its timeout
// before now): each gets Timeout and loses its entry. The wakes are appended
// in deadline order. It panics on the Pools of a Store (see Store.Advance).
func (p *Pools) Expire(now int64, wakes []Wake) []Wake {
	alone(p.shared, "Pools.Expire")
	for {
		e, ok := p.dl.pop(now)
		if !ok {
			return wakes
		}
		wakes = p.timeout(e.(*poolEntry), now, wakes)
	}
}

// timeout ends waiting entry e, just taken off the deadline heap, with a
// Timeout wake appended to wakes.
func (p *Pools) timeout(e *poolEntry, now int64, wakes []Wake) []Wake {
	if e.c.pop() != e {
		panic("store: waiting pool entry is not its client's newest")
	}
	p.unwait(e)
	p.st.WastedTimeoutTime += seconds64(now - e.since)
	wakes = append(wakes, Wake{e.c.owner, Timeout})
	p.settle(e.key)
	p.freeEntry(e)
	return wakes
}

// NextDeadline returns when the earliest wait times out, and false if nothing
// waits. It panics on the Pools of a Store (see Store.NextDeadline).
func (p *Pools) NextDeadline() (at int64, ok bool) {
	alone(p.shared, "Pools.NextDeadline")
	return p.dl.next()
}

// PoolKeyInfo is one live key as Busiest reports it.
type PoolKeyInfo struct {
	Name                string
	Processing, Waiting uint32
	Workers, MaxQueue   uint32 // as its latest acquire asked
}

// Busiest appends to out the n live keys with the most waiting entries, then the most
// held, then by name. It walks every live key: a tallyd extension for operators
// (STATS KEYS), not for the request path.
func (p *Pools) Busiest(out []PoolKeyInfo, n int) []PoolKeyInfo {
	start := len(out)
	for name, k := range p.keys {
		if k.count == 0 {
			continue
		}
		out = append(out, PoolKeyInfo{Name: name, Processing: k.processing, Waiting: k.count - k.processing,
			Workers: k.workers, MaxQueue: k.maxqueue})
	}
	keys := out[start:]
	sort.Slice(keys, func(i, j int) bool {
		a, b := &keys[i], &keys[j]
		if a.Waiting != b.Waiting {
			return a.Waiting > b.Waiting
		}
		if a.Processing != b.Processing {
			return a.Processing > b.Processing
		}
		return a.Name < b.Name
	})
	if len(keys) > n {
		out = out[:start+n]
	}
	return out
}

// PoolStats are the PoolCounter statistics (NOTES §3 "STATS"). Times are
// seconds, accumulated in float64 (the reference keeps them in float32, whose
// rounding shows in its output: that is not copied).
type PoolStats struct {
	TotalAcquired    uint64 // every LOCKED sent
	TotalReleases    uint64 // every RELEASED sent
	ConnectErrors    uint64 // the caller's: connections refused at accept
	FailedSends      uint64 // the caller's: wake-ups that could not be written
	FullQueues       uint64 // QUEUE_FULL replies
	LockMismatch     uint64 // LOCK_HELD replies
	LockWhileWaiting uint64 // ERROR WAIT_FOR_RESPONSE replies
	ReleaseMismatch  uint64 // NOT_LOCKED replies
	ProcessedCount   uint64 // held locks that ended, by release or disconnect

	TotalProcessingTime  float64 // hold time of every held lock that ended
	GainedTime           float64 // a releaser's hold time, once per DONE it caused
	WaitingTime          float64 // wait of every waiter that inherited a slot
	WaitingTimeForMe     float64 // the part of WaitingTime spent in ACQ4ME queues
	WaitingTimeForAnyone float64 // the part of WaitingTime spent in ACQ4ANY queues
	WaitingTimeForGood   float64 // wait of every DONE waiter
	WastedTimeoutTime    float64 // wait of every TIMEOUT waiter
}

// Stats returns the PoolCounter statistics. The counters the store cannot
// see (ConnectErrors, FailedSends) are the caller's to bump through the
// pointer.
func (p *Pools) Stats() *PoolStats { return &p.st }

// Gauges returns the live numbers for STATS: keys with entries, held entries
// and waiting entries.
func (p *Pools) Gauges() (hashtableEntries, processingWorkers, waitingWorkers uint64) {
	return p.live, p.processing, p.waiting
}

// handOver gives the slot of an entry of k that just ended to w, a waiter on
// k, or frees it if w is nil.
func (p *Pools) handOver(k *poolKey, w *poolEntry, now int64, wakes []Wake) []Wake {
	if w == nil {
		k.processing--
		p.processing--
		return wakes
	}
	p.unqueue(w)
	w.waiting = false
	wait := seconds64(now - w.since)
	w.since = now
	p.st.TotalAcquired++
	p.st.WaitingTime += wait
	if w.mode == AcqMe {
		p.st.WaitingTimeForMe += wait
	} else {
		p.st.WaitingTimeForAnyone += wait
	}
	return append(wakes, Wake{w.c.owner, Locked})
}

// ended records a held lock that ended after held nanoseconds.
func (p *Pools) ended(held int64) {
	p.st.ProcessedCount++
	p.st.TotalProcessingTime += seconds64(held)
}

// unwait removes waiting entry e from its key: from its queue, the deadline
// heap and the key's count. The caller has popped it from its client.
func (p *Pools) unwait(e *poolEntry) {
	p.unqueue(e)
	e.key.count--
}

// unqueue takes waiting entry e out of its queue and the deadline heap.
func (p *Pools) unqueue(e *poolEntry) {
	if e.mode == AcqMe {
		e.key.me.remove(e)
	} else {
		e.key.any.remove(e)
	}
	p.dl.remove(e)
	p.waiting--
}

// revive makes a live key named name out of k, an idle key of that name, or
// a new one if k is nil.
func (p *Pools) revive(k *poolKey, name []byte) *poolKey {
	if k == nil {
		k = &poolKey{name: string(name)}
		p.keys[k.name] = k
		p.keyBytes += poolKeyBytes(k)
	} else {
		p.idle.remove(k)
		k.idle = false
	}
	p.live++
	return k
}

// settle deletes k if it has no entries left: it goes on the idle list, and
// the oldest idle key beyond poolIdleKeys leaves the map.
func (p *Pools) settle(k *poolKey) {
	if k.count != 0 {
		return
	}
	p.live--
	p.idle.push(k)
	k.idle = true
	if p.idle.n > poolIdleKeys {
		old := p.idle.head
		p.idle.remove(old)
		old.idle = false
		delete(p.keys, old.name)
		p.keyBytes -= poolKeyBytes(old)
	}
}

// poolKeyBytes is what key k costs in the map (memcost.go).
func poolKeyBytes(k *poolKey) int64 { return poolKeyCost + allocSize(len(k.name)) }

// Bytes estimates the memory the PoolCounter state takes (memcost.go): the keys, live
// and idle ones kept for reuse, and the entries, held, waiting and kept for reuse. It is
// kept as they change; reading it never scans.
func (p *Pools) Bytes() int64 {
	return p.keyBytes + int64(p.processing+p.waiting+uint64(p.nfree))*poolEntryCost
}

// Trim lets go of the idle keys and the entries kept for reuse, and returns the bytes
// that frees.
func (p *Pools) Trim() int64 {
	was := p.Bytes()
	for k := p.idle.head; k != nil; k = p.idle.head {
		p.idle.remove(k)
		k.idle = false
		delete(p.keys, k.name)
		p.keyBytes -= poolKeyBytes(k)
	}
	p.free, p.nfree = nil, 0
	return was - p.Bytes()
}

// newEntry returns a held entry of c on k, since now, as c's newest.
func (p *Pools) newEntry(c *PoolClient, k *poolKey, mode Mode, now int64) *poolEntry {
	e := p.free
	if e != nil {
		p.free = e.next
		e.next = nil
		p.nfree--
	} else {
		e = new(poolEntry)
	}
	e.key, e.c, e.mode, e.since = k, c, mode, now
	if len(c.ents) == 0 {
		p.clients = append(p.clients, c)
		c.slot = len(p.clients)
	}
	c.ents = append(c.ents, e)
	return e
}

// freeEntry clears e, no longer anywhere, and keeps it for reuse.
func (p *Pools) freeEntry(e *poolEntry) {
	*e = poolEntry{}
	if p.nfree < poolFreeEntries {
		e.next = p.free
		p.free = e
		p.nfree++
	}
}

// pop removes and returns c's newest entry, forgetting c in its Pools when it
// has no entries left.
func (c *PoolClient) pop() *poolEntry {
	last := len(c.ents) - 1
	e := c.ents[last]
	c.ents[last] = nil
	c.ents = c.ents[:last]
	if last == 0 {
		p := c.p
		i, end := c.slot-1, len(p.clients)-1
		p.clients[i] = p.clients[end]
		p.clients[i].slot = i + 1
		p.clients[end] = nil
		p.clients = p.clients[:end]
		c.slot = 0
	}
	return e
}

// seconds64 converts nanoseconds to seconds for the time sums; a clock that
// went backwards counts as 0.
func seconds64(ns int64) float64 {
	if ns < 0 {
		return 0
	}
	return float64(ns) / 1e9
}

// Check verifies the invariants of the pools, the clients with entries and
// the deadline heap: each key's count is its holders plus waiters and its
// processing its holders; a key with waiters has a holder; every waiting
// entry is its client's newest, in exactly the queue for its key and mode and
// in the heap, and nothing else is in either; no client has more than
// MaxEntries entries; exactly the keys without entries are idle; and the
// gauges are the sums. It scans everything; it is meant for tests.
func (p *Pools) Check() error {
	type tally struct{ held, waiting uint32 }
	per := make(map[*poolKey]*tally, len(p.keys))
	var held, waiting int
	for i, c := range p.clients {
		switch {
		case c.p != p || c.slot != i+1:
			return fmt.Errorf("store: pool client of owner %d: tracked at %d, slot %d", c.owner, i, c.slot)
		case len(c.ents) == 0:
			return fmt.Errorf("store: pool client of owner %d: tracked but empty", c.owner)
		case len(c.ents) > p.maxEntries:
			return fmt.Errorf("store: pool client of owner %d: %d entries, limit %d", c.owner, len(c.ents), p.maxEntries)
		}
		for j, e := range c.ents {
			k := e.key
			switch {
			case e.c != c:
				return fmt.Errorf("store: pool client of owner %d: entry %d belongs to another client", c.owner, j)
			case k == nil || k.idle || p.keys[k.name] != k:
				return fmt.Errorf("store: pool client of owner %d: entry %d is on a deleted key", c.owner, j)
			case e.mode > AcqAny:
				return fmt.Errorf("store: pool client of owner %d: entry %d has mode %v", c.owner, j, e.mode)
			case e.waiting && j != len(c.ents)-1:
				return fmt.Errorf("store: pool client of owner %d: entry %d of %d waits", c.owner, j, len(c.ents))
			case e.waiting != e.dl.scheduled():
				return fmt.Errorf("store: pool client of owner %d: entry %d on key %s waiting %v, in the deadline heap %v",
					c.owner, j, quote(k.name), e.waiting, e.dl.scheduled())
			case e.waiting && p.dl.h[e.dl.i-1].d != &e.dl:
				return fmt.Errorf("store: pool client of owner %d: entry %d on key %s: its deadline handle points at another entry",
					c.owner, j, quote(k.name))
			case e.waiting && e.dl.at < e.since:
				return fmt.Errorf("store: pool client of owner %d: entry %d on key %s due at %d, before its wait began at %d",
					c.owner, j, quote(k.name), e.dl.at, e.since)
			}
			t := per[k]
			if t == nil {
				t = &tally{}
				per[k] = t
			}
			if e.waiting {
				t.waiting++
				waiting++
			} else {
				t.held++
				held++
			}
		}
	}
	var live, idle int
	var kbytes int64
	for name, k := range p.keys {
		kbytes += poolKeyBytes(k)
		t := per[k]
		if t == nil {
			t = &tally{}
		}
		switch {
		case k.name != name:
			return fmt.Errorf("store: pool key %s filed under %s", quote(k.name), quote(name))
		case k.count != t.held+t.waiting || k.processing != t.held:
			return fmt.Errorf("store: pool key %s: count %d, processing %d; entries: %d held, %d waiting",
				quote(name), k.count, k.processing, t.held, t.waiting)
		case k.idle != (k.count == 0):
			return fmt.Errorf("store: pool key %s: count %d, idle %v", quote(name), k.count, k.idle)
		case t.waiting > 0 && t.held == 0:
			return fmt.Errorf("store: pool key %s: %d waiting, none held", quote(name), t.waiting)
		}
		if k.idle {
			idle++
		} else {
			live++
		}
		var inQueues uint32
		for _, q := range []struct {
			q    *queue
			mode Mode
		}{{&k.me, AcqMe}, {&k.any, AcqAny}} {
			n := 0
			var prev *poolEntry
			for e := q.q.head; e != nil; e = e.next {
				if n++; n > q.q.n || n > int(k.count) {
					return fmt.Errorf("store: pool key %s: %v queue longer than its %d entries", quote(name), q.mode, q.q.n)
				}
				if e.prev != prev || e.key != k || e.mode != q.mode || !e.waiting || e.c == nil || e.c.slot == 0 || e.c.ents[len(e.c.ents)-1] != e {
					return fmt.Errorf("store: pool key %s: bad entry in the %v queue: key %v, mode %v, waiting %v, link %v",
						quote(name), q.mode, e.key == k, e.mode, e.waiting, e.prev == prev)
				}
				prev = e
			}
			if n != q.q.n || q.q.tail != prev {
				return fmt.Errorf("store: pool key %s: %v queue of %d entries counted %d", quote(name), q.mode, n, q.q.n)
			}
			inQueues += uint32(n)
		}
		if inQueues != t.waiting {
			return fmt.Errorf("store: pool key %s: %d entries queued, %d waiting", quote(name), inQueues, t.waiting)
		}
	}
	if len(per) != live {
		return fmt.Errorf("store: pool entries on %d keys, %d keys live", len(per), live)
	}
	n := 0
	var prev *poolKey
	for k := p.idle.head; k != nil; k = k.next {
		if n++; n > idle {
			return fmt.Errorf("store: pool idle list longer than the %d idle keys", idle)
		}
		if k.prev != prev || !k.idle || p.keys[k.name] != k {
			return fmt.Errorf("store: pool idle key %s: bad link %v, idle %v, in the map %v", quote(k.name), k.prev != prev, k.idle, p.keys[k.name] == k)
		}
		prev = k
	}
	switch {
	case n != idle || n != p.idle.n || p.idle.tail != prev:
		return fmt.Errorf("store: %d idle pool keys, %d on the idle list, counted %d", idle, n, p.idle.n)
	case idle > poolIdleKeys:
		return fmt.Errorf("store: %d idle pool keys kept, limit %d", idle, poolIdleKeys)
	case kbytes != p.keyBytes:
		return fmt.Errorf("store: pool keys take %d bytes, counted %d", kbytes, p.keyBytes)
	case p.maxKeys > 0 && live > p.maxKeys:
		return fmt.Errorf("store: %d live pool keys, limit %d", live, p.maxKeys)
	case p.live != uint64(live) || p.processing != uint64(held) || p.waiting != uint64(waiting):
		return fmt.Errorf("store: pool gauges %d keys, %d processing, %d waiting; have %d, %d, %d",
			p.live, p.processing, p.waiting, live, held, waiting)
	case countIn[*poolEntry](p.dl) != waiting:
		return fmt.Errorf("store: %d pool entries in the deadline heap, %d waiting", countIn[*poolEntry](p.dl), waiting)
	}
	if err := p.dl.check(); err != nil {
		return err
	}
	n = 0
	for e := p.free; e != nil; e = e.next {
		if n++; n > p.nfree {
			return fmt.Errorf("store: pool free list longer than its count %d", p.nfree)
		}
		if e.key != nil || e.c != nil || e.waiting || e.dl.scheduled() || e.prev != nil {
			return fmt.Errorf("store: pool free list: entry %d still in use", n)
		}
	}
	if n != p.nfree || n > poolFreeEntries {
		return fmt.Errorf("store: pool free list of %d entries, counted %d, limit %d", n, p.nfree, poolFreeEntries)
	}
	return nil
}

// Key reports the live key name (held or waiting entries) as Busiest would list it, without
// walking the others; Name is the key's own string (no copy). False if it has no entries.
func (p *Pools) Key(name []byte) (PoolKeyInfo, bool) {
	k := p.keys[string(name)]
	if k == nil || k.count == 0 {
		return PoolKeyInfo{}, false
	}
	return PoolKeyInfo{Name: k.name, Processing: k.processing, Waiting: k.count - k.processing,
		Workers: k.workers, MaxQueue: k.maxqueue}, true
}
