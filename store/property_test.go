package store_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/tallyd/tallyd/store"
)

// The property tests run seeded random operations against a store and against
// a model written straight from the rules with plain maps, comparing every
// result and the whole visible state after every operation.

// conn is one simulated connection: its store ledger and the model's idea of
// what it holds.
type conn struct {
	id   int
	l    *store.Ledger
	held map[string]uint64
}

// mcounter is the model of one counter.
type mcounter struct {
	cons, top uint64
	last      int64 // Unix seconds
}

// counterModel is the obviously-correct model of Counters.
type counterModel struct {
	interval int64
	limit    int
	objs     map[string]*mcounter
	total    int
	gcAt     int64
	gcDone   bool
}

func (m *counterModel) boundary(now int64) int64 {
	s := now / sec // now is positive in these tests
	return s / m.interval * m.interval
}

func (m *counterModel) acquire(c *conn, name string, r, max uint32, now int64) store.Result {
	o := m.objs[name]
	if o == nil {
		if m.limit > 0 && len(m.objs) >= m.limit {
			return store.OutOfMemory
		}
		m.objs[name] = &mcounter{cons: uint64(r), top: uint64(r), last: now / sec}
		m.total++
		c.held[name] += uint64(r)
		return store.OK
	}
	if o.cons+uint64(r) > uint64(max) {
		return store.NotAvailable
	}
	if o.last < m.boundary(now) {
		o.top = o.cons + uint64(r)
	} else if o.cons+uint64(r) > o.top {
		o.top = o.cons + uint64(r)
	}
	o.last = now / sec
	o.cons += uint64(r)
	c.held[name] += uint64(r)
	return store.OK
}

func (m *counterModel) release(c *conn, name string, r uint32, now int64) store.Result {
	o := m.objs[name]
	if o == nil {
		return store.NotFound
	}
	h, ok := c.held[name]
	if !ok || uint64(r) > h {
		return store.NotAcquired
	}
	if o.last < m.boundary(now) {
		o.top = o.cons
	}
	o.last = now / sec
	o.cons -= uint64(r)
	if h == uint64(r) {
		delete(c.held, name)
	} else {
		c.held[name] = h - uint64(r)
	}
	return store.OK
}

func (m *counterModel) drop(c *conn, now int64) {
	for name, h := range c.held {
		if r := m.release(c, name, uint32(h), now); r != store.OK {
			panic("model: drop: " + r.String())
		}
	}
}

func (m *counterModel) gc(now int64) int {
	b := m.boundary(now)
	m.gcAt, m.gcDone = b, true
	n := 0
	for name, o := range m.objs {
		if o.cons == 0 && o.last < b {
			delete(m.objs, name)
			n++
		}
	}
	return n
}

func (m *counterModel) dumpMax(o *mcounter, now int64) uint64 {
	if o.last < m.boundary(now) {
		return o.cons
	}
	return o.top
}

// names returns k distinct names, some with NUL bytes and one long.
func names(k int) []string {
	base := []string{"a", "b", "a\x00", "\x00", string(make([]byte, 300))}
	for i := len(base); i < k; i++ {
		base = append(base, fmt.Sprint("n", i))
	}
	return base[:k]
}

type propConfig struct {
	seed     uint64
	ops      int
	names    int
	conns    int
	limit    int
	interval int64
	rareDrop bool // drop connections 1/100th as often, so ledgers grow large
}

func (p propConfig) String() string {
	return fmt.Sprintf("seed %d, %d names, %d conns, limit %d, interval %d", p.seed, p.names, p.conns, p.limit, p.interval)
}

// amount returns a random acquire (r, max) with 1 <= r <= max: mostly small,
// sometimes near the top of the 32-bit range to exercise 64-bit sums.
func amount(rng *rand.Rand) (r, max uint32) {
	switch rng.IntN(10) {
	case 0:
		max = maxU32 - uint32(rng.IntN(3))
		r = uint32(1 + rng.IntN(10))
		if rng.IntN(2) == 0 {
			r = max - uint32(rng.IntN(10))
		}
		return r, max
	default:
		r = uint32(1 + rng.IntN(5))
		return r, r + uint32(rng.IntN(12))
	}
}

// releaseAmount returns a random release amount, often exactly what c holds.
func releaseAmount(rng *rand.Rand, c *conn, name string) uint32 {
	if h, ok := c.held[name]; ok && rng.IntN(3) == 0 {
		return uint32(h) + uint32(rng.IntN(2)) // all of it, or one more
	}
	return uint32(rng.IntN(6))
}

func runCounters(p propConfig, seen *outcomes) error {
	rng := rand.New(rand.NewPCG(p.seed, 1))
	c := store.NewCounters(store.CountersConfig{Interval: p.interval, MaxObjects: p.limit})
	m := &counterModel{interval: p.interval, limit: p.limit, objs: map[string]*mcounter{}}
	ns := names(p.names)
	nextID := 0
	newConn := func() *conn {
		nextID++
		return &conn{id: nextID, l: c.NewLedger(store.Owner(nextID)), held: map[string]uint64{}}
	}
	conns := make([]*conn, p.conns)
	for i := range conns {
		conns[i] = newConn()
	}
	now := int64(1_700_000_000)*sec + rng.Int64N(1000*sec)
	buf := make([]store.DumpEntry, 0, 4)
	for op := range p.ops {
		ci := rng.IntN(len(conns))
		cn := conns[ci]
		name := ns[rng.IntN(len(ns))]
		var what string
		k, all := rng.IntN(100), false
		if p.rareDrop && op/1500%2 == 1 && k < 35 && rng.IntN(4) != 0 {
			// A phase of mostly releases of what the connection holds,
			// so large ledgers shrink.
			k, all = 50, true
			for i, off := 0, rng.IntN(len(ns)); i < len(ns); i++ {
				if n := ns[(off+i)%len(ns)]; cn.held[n] != 0 {
					name = n
					break
				}
			}
		}
		switch {
		case k < 35:
			r, max := amount(rng)
			what = fmt.Sprintf("conn %d: Acquire(%q, %d, %d)", cn.id, name, r, max)
			got, want := c.Acquire(cn.l, []byte(name), r, max, now), m.acquire(cn, name, r, max, now)
			if got != want {
				return fmt.Errorf("op %d: %s = %v, model %v", op, what, got, want)
			}
			seen.results[got]++
		case k < 65:
			r := releaseAmount(rng, cn, name)
			if all {
				r = uint32(cn.held[name])
			}
			what = fmt.Sprintf("conn %d: Release(%q, %d)", cn.id, name, r)
			got, want := c.Release(cn.l, []byte(name), r, now), m.release(cn, name, r, now)
			if got != want {
				return fmt.Errorf("op %d: %s = %v, model %v", op, what, got, want)
			}
			seen.results[got]++
		case k < 70 && p.rareDrop && rng.IntN(100) != 0:
			what = "nothing"
		case k < 70:
			what = fmt.Sprintf("conn %d: Drop", cn.id)
			c.Drop(cn.l, now)
			m.drop(cn, now)
			if len(cn.held) != 0 {
				return fmt.Errorf("op %d: model: conn %d holds %v after Drop", op, cn.id, cn.held)
			}
			if rng.IntN(2) == 0 {
				conns[ci] = newConn() // the connection is gone; a new one comes
			} // else the ledger is reused
		case k < 85:
			d := rng.Int64N(3 * sec)
			switch rng.IntN(10) {
			case 0:
				d = rng.Int64N(5 * p.interval * sec)
			case 1:
				d = (m.boundary(now)+p.interval)*sec - now // exactly to the next boundary
			case 2:
				d = -rng.Int64N(5 * sec) // the wall clock steps back
			}
			now += d
			what = fmt.Sprintf("time %+d ns", d)
		case k < 92:
			what = "GC"
			if got, want := c.GCDue(now), !m.gcDone || m.boundary(now) > m.gcAt; got != want {
				return fmt.Errorf("op %d: GCDue = %v, model %v", op, got, want)
			}
			got, want := c.GC(now), m.gc(now)
			if got != want {
				return fmt.Errorf("op %d: GC deleted %d, model %d", op, got, want)
			}
			seen.deleted += got
		default:
			what = fmt.Sprintf("Get(%q)", name)
			got, ok := c.Get([]byte(name))
			o := m.objs[name]
			if ok != (o != nil) || ok && uint64(got) != o.cons {
				return fmt.Errorf("op %d: %s = %d, %v; model %+v", op, what, got, ok, o)
			}
		}
		if err := c.Check(); err != nil {
			return fmt.Errorf("op %d: after %s: %v", op, what, err)
		}

		if err := compareCounters(c, m, conns, ns, now, buf[:0:1+rng.IntN(4)]); err != nil {
			return fmt.Errorf("op %d: after %s: %v", op, what, err)
		}
	}
	return nil
}

// compareCounters compares everything visible in c with the model.
func compareCounters(c *store.Counters, m *counterModel, conns []*conn, ns []string, now int64, buf []store.DumpEntry) error {
	for _, name := range ns {
		got, ok := c.Get([]byte(name))
		o := m.objs[name]
		if ok != (o != nil) || ok && uint64(got) != o.cons {
			return fmt.Errorf("Get(%q) = %d, %v; model %+v", name, got, ok, o)
		}
	}
	for _, cn := range conns {
		if cn.l.Len() != len(cn.held) {
			return fmt.Errorf("conn %d: ledger Len %d, model %d", cn.id, cn.l.Len(), len(cn.held))
		}
		for _, name := range ns {
			if got, want := cn.l.Held([]byte(name)), cn.held[name]; uint64(got) != want {
				return fmt.Errorf("conn %d holds %d of %q, model %d", cn.id, got, name, want)
			}
		}
	}
	if c.Len() != len(m.objs) || c.Info().Objects != uint64(len(m.objs)) || c.Info().TotalObjects != uint64(m.total) {
		return fmt.Errorf("Len %d, Info %+v; model %d objects, %d created", c.Len(), c.Info(), len(m.objs), m.total)
	}
	cur := c.DumpStart()
	seen := 0
	for done := false; !done; {
		buf, done = c.DumpNext(cur, now, buf[:0])
		for _, e := range buf {
			o := m.objs[e.Name]
			if o == nil || uint64(e.Current) != o.cons || uint64(e.Max) != m.dumpMax(o, now) {
				return fmt.Errorf("Dump: %+v, model %+v (max %d)", e, o, m.dumpMax(o, now))
			}
			seen++
		}
	}
	if seen != len(m.objs) {
		return fmt.Errorf("Dump listed %d counters, model has %d", seen, len(m.objs))
	}
	return nil
}

// outcomes counts what a run exercised, so a test can fail if the generator
// stops reaching some rule.
type outcomes struct {
	results [store.OutOfMemory + 1]int
	deleted int
}

func (o *outcomes) missing() []string {
	var m []string
	for r, n := range o.results {
		if n == 0 {
			m = append(m, store.Result(r).String())
		}
	}
	if o.deleted == 0 {
		m = append(m, "GC deletions")
	}
	return m
}

var propConfigs = []propConfig{
	{seed: 1, ops: 5000, names: 5, conns: 3, interval: 10},
	{seed: 2, ops: 5000, names: 6, conns: 4, interval: 10, limit: 4},
	{seed: 3, ops: 5000, names: 3, conns: 2, interval: 86400},
	{seed: 4, ops: 5000, names: 40, conns: 2, interval: 10},
	{seed: 5, ops: 5000, names: 40, conns: 3, interval: 30, limit: 25},
	{seed: 6, ops: 8000, names: 150, conns: 2, interval: 10, rareDrop: true},
}

func TestCountersModel(t *testing.T) {
	var seen outcomes
	for _, p := range propConfigs {
		if err := runCounters(p, &seen); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
	if m := seen.missing(); len(m) != 0 {
		t.Errorf("the runs never produced %v", m)
	}
}

func TestCountersQuick(t *testing.T) {
	f := func(seed uint64, names, conns, limit uint8) bool {
		p := propConfig{seed: seed, ops: 300, names: 1 + int(names%12), conns: 1 + int(conns%4), limit: int(limit % 8), interval: 10}
		if err := runCounters(p, new(outcomes)); err != nil {
			t.Logf("%v: %v", p, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
}

// semModel is the obviously-correct model of Semaphores.
type semModel struct {
	limit int
	objs  map[string]*msem
	total int
}

type msem struct{ initial, value uint64 }

func (m *semModel) acquire(c *conn, name string, r, initial uint32) store.Result {
	o := m.objs[name]
	if o == nil {
		if m.limit > 0 && len(m.objs) >= m.limit {
			return store.OutOfMemory
		}
		m.objs[name] = &msem{initial: uint64(initial), value: uint64(initial) - uint64(r)}
		m.total++
		c.held[name] += uint64(r)
		return store.OK
	}
	if uint64(r) > o.value {
		return store.NotAvailable
	}
	o.value -= uint64(r)
	c.held[name] += uint64(r)
	return store.OK
}

func (m *semModel) release(c *conn, name string, r uint32) store.Result {
	o := m.objs[name]
	if o == nil {
		return store.NotFound
	}
	h, ok := c.held[name]
	if !ok || uint64(r) > h {
		return store.NotAcquired
	}
	o.value += uint64(r)
	if h == uint64(r) {
		delete(c.held, name)
	} else {
		c.held[name] = h - uint64(r)
	}
	return store.OK
}

func (m *semModel) gc() int {
	n := 0
	for name, o := range m.objs {
		if o.value == o.initial {
			delete(m.objs, name)
			n++
		}
	}
	return n
}

func runSemaphores(p propConfig, seen *outcomes) error {
	rng := rand.New(rand.NewPCG(p.seed, 2))
	s := store.NewSemaphores(store.SemaphoresConfig{MaxObjects: p.limit})
	m := &semModel{limit: p.limit, objs: map[string]*msem{}}
	ns := names(p.names)
	nextID := 0
	newConn := func() *conn {
		nextID++
		return &conn{id: nextID, l: s.NewLedger(store.Owner(nextID)), held: map[string]uint64{}}
	}
	conns := make([]*conn, p.conns)
	for i := range conns {
		conns[i] = newConn()
	}
	for op := range p.ops {
		ci := rng.IntN(len(conns))
		cn := conns[ci]
		name := ns[rng.IntN(len(ns))]
		var what string
		switch k := rng.IntN(100); {
		case k < 40:
			r, initial := amount(rng)
			what = fmt.Sprintf("conn %d: Acquire(%q, %d, %d)", cn.id, name, r, initial)
			got, want := s.Acquire(cn.l, []byte(name), r, initial, 0), m.acquire(cn, name, r, initial)
			if got != want {
				return fmt.Errorf("op %d: %s = %v, model %v", op, what, got, want)
			}
			seen.results[got]++
		case k < 75:
			r := releaseAmount(rng, cn, name)
			what = fmt.Sprintf("conn %d: Release(%q, %d)", cn.id, name, r)
			got, want := s.Release(cn.l, []byte(name), r, 0), m.release(cn, name, r)
			if got != want {
				return fmt.Errorf("op %d: %s = %v, model %v", op, what, got, want)
			}
			seen.results[got]++
		case k < 82:
			what = fmt.Sprintf("conn %d: Drop", cn.id)
			s.Drop(cn.l, 0)
			for name, h := range cn.held {
				m.release(cn, name, uint32(h))
			}
			conns[ci] = newConn()
		case k < 90:
			what = "GC"
			got, want := s.GC(), m.gc()
			if got != want {
				return fmt.Errorf("op %d: GC deleted %d, model %d", op, got, want)
			}
			seen.deleted += got
		default:
			what = fmt.Sprintf("Get(%q)", name)
		}
		if err := s.Check(); err != nil {
			return fmt.Errorf("op %d: after %s: %v", op, what, err)
		}
		for _, name := range ns {
			got, ok := s.Get([]byte(name))
			o := m.objs[name]
			if ok != (o != nil) || ok && uint64(got) != o.value {
				return fmt.Errorf("op %d: after %s: Get(%q) = %d, %v; model %+v", op, what, name, got, ok, o)
			}
			for _, cn := range conns {
				if got, want := cn.l.Held([]byte(name)), cn.held[name]; uint64(got) != want {
					return fmt.Errorf("op %d: after %s: conn %d holds %d of %q, model %d", op, what, cn.id, got, name, want)
				}
			}
		}
		if s.Len() != len(m.objs) || s.Info().TotalObjects != uint64(m.total) {
			return fmt.Errorf("op %d: after %s: Len %d, Info %+v; model %d, %d created", op, what, s.Len(), s.Info(), len(m.objs), m.total)
		}
	}
	return nil
}

func TestSemaphoresModel(t *testing.T) {
	var seen outcomes
	for _, p := range propConfigs {
		if err := runSemaphores(p, &seen); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
	if m := seen.missing(); len(m) != 0 {
		t.Errorf("the runs never produced %v", m)
	}
}

func TestSemaphoresQuick(t *testing.T) {
	f := func(seed uint64, names, conns, limit uint8) bool {
		p := propConfig{seed: seed, ops: 300, names: 1 + int(names%12), conns: 1 + int(conns%4), limit: int(limit % 8)}
		if err := runSemaphores(p, new(outcomes)); err != nil {
			t.Logf("%v: %v", p, err)
			return false
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 50}); err != nil {
		t.Fatal(err)
	}
}
