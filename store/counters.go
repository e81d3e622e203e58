package store

import (
	"fmt"
	"math"
)

// DefaultInterval is the default length of a counter's max-consumption
// interval, in seconds: one day, so boundaries fall at 00:00 UTC.
const DefaultInterval = 86400

// CountersConfig configures a Counters.
type CountersConfig struct {
	Interval   int64 // seconds between max-consumption boundaries; <= 0 means DefaultInterval
	MaxObjects int   // most live counters; <= 0 means no limit
	SizeHint   int   // expected number of counters, to size the table
}

// Counters is the namespace of the yrmcds counter protocol: name (1..65535
// arbitrary bytes) -> consumption, with each connection's share in its Ledger.
//
// Each counter also tracks its maximum consumption in the current interval.
// Intervals are wall-clock aligned: boundary(t) = floor(t/Interval)*Interval in
// Unix seconds. A counter whose consumption is 0 and that was last updated
// before the current boundary is deleted by GC.
type Counters struct {
	t        table
	interval int64      // seconds
	gcAt     int64      // boundary of the last GC, in seconds
	gcDone   bool       // GC has run at least once
	q        *deadlines // the Store's deadline heap, nil alone
	gc       counterGC  // when the next GC is due, in q
}

// NewCounters returns an empty counter namespace.
func NewCounters(cfg CountersConfig) *Counters {
	c := &Counters{interval: cfg.Interval}
	if c.interval <= 0 {
		c.interval = DefaultInterval
	}
	c.t.init(cfg.MaxObjects, cfg.SizeHint)
	return c
}

// NewLedger returns an empty ledger for a connection of owner o.
func (c *Counters) NewLedger(o Owner) *Ledger { return c.t.newLedger(o) }

// Acquire adds r to the named counter's consumption and to l's share of it if
// consumption+r <= max (in 64 bits), creating the counter at r if it does not
// exist. It returns NotAvailable, changing nothing, if the resources are not
// there, and OutOfMemory if creating the counter would exceed MaxObjects. The
// codec has checked that r >= 1 and max >= r.
func (c *Counters) Acquire(l *Ledger, name []byte, r, max uint32, now int64) Result {
	c.t.own(l)
	sec := seconds(now)
	o := c.t.objs[string(name)]
	if o == nil {
		if r > max {
			return NotAvailable
		}
		if o = c.t.create(name); o == nil {
			return OutOfMemory
		}
		o.top, o.last, o.acquired = r, sec, 1
		c.t.hold(l, o, r)
		return OK
	}
	v := uint64(o.held) + uint64(r)
	if v > uint64(max) {
		return NotAvailable
	}
	if o.last < c.boundary(sec) || uint32(v) > o.top {
		o.top = uint32(v)
	}
	o.last = sec
	o.acquired++
	c.t.hold(l, o, r)
	return OK
}

// Release gives back r of what l holds of the named counter. It returns
// NotFound if the counter does not exist and NotAcquired if l holds less than
// r of it (or none at all, even for r == 0).
func (c *Counters) Release(l *Ledger, name []byte, r uint32, now int64) Result {
	c.t.own(l)
	o := c.t.objs[string(name)]
	if o == nil {
		return NotFound
	}
	i := l.find(o)
	if i < 0 || r > l.ents[i].n {
		return NotAcquired
	}
	c.touch(o, seconds(now))
	c.t.take(l, i, r)
	return OK
}

// touch applies a release's rule for the interval maximum to o: the first
// update after a boundary starts the new interval at the consumption before
// the release.
func (c *Counters) touch(o *object, sec int64) {
	if o.last < c.boundary(sec) {
		o.top = o.held
	}
	o.last = sec
}

// Get returns the named counter's consumption and whether it exists.
func (c *Counters) Get(name []byte) (consumption uint32, ok bool) {
	o := c.t.objs[string(name)]
	if o == nil {
		return 0, false
	}
	return o.held, true
}

// Drop releases everything l holds, as a Release of each entry would, for a
// connection that went away. l is left empty, to be reused or discarded.
func (c *Counters) Drop(l *Ledger, now int64) {
	c.t.own(l)
	sec := seconds(now)
	for _, e := range l.ents {
		c.touch(e.o, sec)
	}
	c.t.drop(l)
}

// GCDue reports whether a boundary has passed since the last GC, or GC has
// never run.
func (c *Counters) GCDue(now int64) bool {
	return !c.gcDone || c.boundary(seconds(now)) > c.gcAt
}

// GC deletes every counter at consumption 0 last updated before the current
// boundary, and returns how many it deleted. It costs O(counters at 0).
func (c *Counters) GC(now int64) int {
	b := c.boundary(seconds(now))
	c.gcAt, c.gcDone = b, true
	if c.q != nil {
		c.q.move(&c.gc, c.gcNext())
	}
	n := 0
	for o := c.t.idle; o != nil; {
		next := o.next
		if o.last < b {
			c.t.delete(o)
			n++
		}
		o = next
	}
	c.t.shrink()
	return n
}

// gcNext returns when GC is next due (Unix ns): at once if it has never
// run, else at the boundary after that of the last GC.
func (c *Counters) gcNext() int64 {
	if !c.gcDone {
		return math.MinInt64
	}
	return boundaryNanos(addSat(c.gcAt, c.interval))
}

// gcAfter returns when GC would next be due if it ran at now.
func (c *Counters) gcAfter(now int64) int64 {
	return boundaryNanos(addSat(c.boundary(seconds(now)), c.interval))
}

// boundaryNanos returns sec seconds in nanoseconds, at most math.MaxInt64.
func boundaryNanos(sec int64) int64 {
	if sec > math.MaxInt64/int64(1e9) {
		return math.MaxInt64
	}
	return sec * 1e9
}

// Evict deletes released counters (consumption 0), those released longest ago first,
// until what they cost adds up to need bytes or none is left, and returns the bytes and
// the number of counters. Their interval maximum is lost: an evicted counter is no
// longer listed by Dump, and one acquired again starts a new maximum.
func (c *Counters) Evict(need int64) (freed int64, n int) { return c.t.evict(need) }

// Bytes estimates the memory the counters take (memcost.go).
func (c *Counters) Bytes() int64 { return c.t.bytes() }

// Len returns the number of live counters.
func (c *Counters) Len() int { return len(c.t.objs) }

// Info returns the numbers for STATS.
func (c *Counters) Info() Info { return c.t.info }

// Check verifies the invariants between the counters and every ledger holding
// any of them: each counter's consumption is the sum of the ledgers' shares,
// no share is 0 or of a deleted counter, and no counter's interval maximum is
// below its consumption. It scans everything; it is meant for tests.
func (c *Counters) Check() error {
	return c.t.check("counter", func(o *object) error {
		if o.top < o.held {
			return fmt.Errorf("store: counter %s: max %d below consumption %d", quote(o.name), o.top, o.held)
		}
		return nil
	})
}

// boundary returns the start of the interval holding sec, in Unix seconds.
func (c *Counters) boundary(sec int64) int64 { return floorDiv(sec, c.interval) * c.interval }

// seconds converts Unix nanoseconds to Unix seconds, rounding down.
func seconds(now int64) int64 { return floorDiv(now, 1e9) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// DumpEntry is one counter as Dump reports it.
type DumpEntry struct {
	Name     string
	Current  uint32 // consumption
	Max      uint32 // max consumption in the current interval
	Acquired uint64 // Acquires granted since the counter was created: its rate is the counter's traffic
}

// DumpCursor walks a snapshot of the counters, so a dump of millions of them
// can be sent in chunks across loop wake-ups.
type DumpCursor struct {
	objs []*object
	i    int
}

// DumpStart takes a snapshot of the live counters for DumpNext. Counters
// created after it are not listed.
func (c *Counters) DumpStart() *DumpCursor {
	objs := make([]*object, 0, len(c.t.objs))
	for _, o := range c.t.objs {
		objs = append(objs, o)
	}
	return &DumpCursor{objs: objs}
}

// DumpNext appends to out the next counters of cur's snapshot, up to
// cap(out)-len(out) of them but at least one while any remain, and reports
// whether the snapshot is exhausted. Counters deleted since DumpStart are
// skipped. Max is read as of now: the current consumption if the counter has
// not been updated since the current interval began. The order is unspecified.
func (c *Counters) DumpNext(cur *DumpCursor, now int64, out []DumpEntry) ([]DumpEntry, bool) {
	b := c.boundary(seconds(now))
	room := max(cap(out)-len(out), 1)
	for ; cur.i < len(cur.objs) && room > 0; cur.i++ {
		o := cur.objs[cur.i]
		if o.dead {
			continue
		}
		m := o.top
		if o.last < b {
			m = o.held
		}
		out = append(out, DumpEntry{Name: o.name, Current: o.held, Max: m, Acquired: o.acquired})
		room--
	}
	for cur.i < len(cur.objs) && cur.objs[cur.i].dead {
		cur.i++
	}
	if cur.i == len(cur.objs) {
		cur.objs, cur.i = nil, 0
		return out, true
	}
	return out, false
}
