package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/store"
)

// ms flags an slock time in milliseconds.
const ms = 0x0400

// clockScene is a Store with, from start, work of every kind falling due in
// an interleaved order; want is the order.
type clockScene struct {
	s     *store.Store
	start int64
	want  []store.DueEvent
}

// newClockScene schedules, at start (a counter interval boundary):
//
//	+300 ms  holders 10, 12, 13 have been held PersistAfter
//	+500 ms  slock wait of 11 times out
//	+1 s     pool wait of 21 times out
//	+1.5 s   holder 10 expires
//	+2 s     pool wait of 22 times out, then holder 12 expires (scheduled in that order)
//	+2.5 s   semaphore collection
//	+3 s     holder 13 expires, then pool wait of 23 (scheduled in that order)
//	+60 s    counter collection
func newClockScene(t testing.TB) *clockScene {
	start := at(0)
	s := store.New(store.Config{
		Counters:            store.CountersConfig{Interval: 60},
		Locks:               store.LocksConfig{Persist: true, PersistAfter: 300 * msec, IDSeed: 1},
		SemaphoreGCInterval: 2500 * msec,
		Start:               start,
	})
	s.Counters.GC(start)
	lock := func(o store.Owner, key string, expried, timeout uint16, wantReplies int) {
		c := with(lockc(uint16(o), fmt.Sprint(o), key), func(c *wc) {
			c.Expried, c.ExpriedFlag, c.Timeout, c.TimeoutFlag = expried, ms, timeout, ms
		})
		if rs, _ := s.Locks.Do(o, &c, start, nil, nil); len(rs) != wantReplies {
			t.Fatalf("lock by %d: %+v", o, rs)
		}
	}
	pool := func(o store.Owner, timeout uint32, want store.Outcome) {
		if got := s.Pools.Acquire(s.Pools.NewClient(o), store.AcqMe, []byte("p"), 1, 10, timeout, start); got != want {
			t.Fatalf("pool acquire by %d = %v, want %v", o, got, want)
		}
	}
	lock(10, "k", 1500, 0, 1)
	lock(11, "k", 1500, 500, 0) // waits behind 10
	pool(20, 0, store.Locked)
	pool(21, 1, store.Waiting)
	pool(22, 2, store.Waiting)
	lock(12, "k2", 2000, 0, 1)
	lock(13, "k3", 3000, 0, 1)
	pool(23, 3, store.Waiting)
	ev := func(ms int64, k store.DueKind, o store.Owner) store.DueEvent {
		return store.DueEvent{At: start + ms*msec, Kind: k, Owner: o}
	}
	return &clockScene{s: s, start: start, want: []store.DueEvent{
		ev(300, store.DuePersist, 10), ev(300, store.DuePersist, 12), ev(300, store.DuePersist, 13),
		ev(500, store.DueLockWait, 11),
		ev(1000, store.DuePoolWait, 21),
		ev(1500, store.DueLockHold, 10),
		ev(2000, store.DuePoolWait, 22), ev(2000, store.DueLockHold, 12),
		ev(2500, store.DueSemaphoreGC, 0),
		ev(3000, store.DueLockHold, 13), ev(3000, store.DuePoolWait, 23),
		ev(60000, store.DueCounterGC, 0),
	}}
}

func (c *clockScene) check(t *testing.T) {
	t.Helper()
	if err := c.s.Check(); err != nil {
		t.Fatal(err)
	}
}

// Pool waits, lock timeouts, lock expiries, persistence and both collections
// come out of one Advance in deadline order, ties in the order they were set.
func TestAdvanceInDeadlineOrder(t *testing.T) {
	c := newClockScene(t)
	c.check(t)
	if at, ok := c.s.NextDeadline(); !ok || at != c.want[0].At {
		t.Fatalf("NextDeadline = %d, %v; want %d", at, ok, c.want[0].At)
	}
	var d store.Due
	c.s.Advance(c.start+300*msec-1, &d)
	if len(d.Events) != 0 || len(d.Replies) != 0 || len(d.Wakes) != 0 {
		t.Fatalf("Advance before anything is due: %+v", d)
	}
	c.s.Advance(c.start+3000*msec, &d)
	c.check(t)
	if want := c.want[:len(c.want)-1]; !slices.Equal(d.Events, want) {
		t.Fatalf("events:\n got %v\nwant %v", d.Events, want)
	}
	var wakes []store.Owner
	for _, w := range d.Wakes {
		if w.Outcome != store.Timeout {
			t.Fatalf("wake %+v, want Timeout", w)
		}
		wakes = append(wakes, w.Owner)
	}
	if !slices.Equal(wakes, []store.Owner{21, 22, 23}) {
		t.Fatalf("pool wakes to %v", wakes)
	}
	var replies []string
	for _, r := range d.Replies {
		replies = append(replies, fmt.Sprintf("%d:%v", r.Owner, r.Result))
	}
	if got, want := strings.Join(replies, " "), "11:LockTimeout 10:LockExpried 12:LockExpried 13:LockExpried"; got != want {
		t.Fatalf("lock replies %s, want %s", got, want)
	}
	if d.CounterGC || !d.SemaphoreGC {
		t.Fatalf("collections due: counters %v, semaphores %v", d.CounterGC, d.SemaphoreGC)
	}
	// The semaphores' next collection counts from when the last one was handled.
	if at, ok := c.s.NextDeadline(); !ok || at != c.start+5500*msec {
		t.Fatalf("NextDeadline after = %d, %v; want %d", at-c.start, ok, 5500*msec)
	}

	d.Reset()
	c.s.Advance(c.start+60000*msec, &d)
	last := c.want[len(c.want)-1]
	if len(d.Events) == 0 || d.Events[len(d.Events)-1] != last || !d.CounterGC {
		t.Fatalf("at the counters' boundary: %v, CounterGC %v", d.Events, d.CounterGC)
	}
	for _, e := range d.Events[:len(d.Events)-1] {
		if e.Kind != store.DueSemaphoreGC {
			t.Fatalf("at the counters' boundary: %v", d.Events)
		}
	}
	if n := c.s.Counters.GC(c.start + 60000*msec); n != 0 {
		t.Fatalf("counter GC deleted %d", n)
	}
	c.check(t)
}

// Advancing in small steps hands out the same events in the same order, each
// no earlier than due and no later than the first Advance at or after it.
func TestAdvanceInSteps(t *testing.T) {
	c := newClockScene(t)
	var got []store.DueEvent
	var d store.Due
	prev := c.start
	for now := c.start; now <= c.start+60000*msec; now += 100 * msec {
		d.Reset()
		c.s.Advance(now, &d)
		for _, e := range d.Events {
			if e.At > now || e.At <= prev && now != c.start {
				t.Fatalf("Advance(%d ms) handed %v", (now-c.start)/msec, e)
			}
			if e.Kind != store.DueSemaphoreGC {
				got = append(got, e)
			}
		}
		if d.CounterGC {
			c.s.Counters.GC(now)
		}
		if at, ok := c.s.NextDeadline(); !ok || at <= now {
			t.Fatalf("after Advance(%d ms): NextDeadline %d, %v", (now-c.start)/msec, at, ok)
		}
		prev = now
	}
	c.check(t)
	want := slices.DeleteFunc(slices.Clone(c.want), func(e store.DueEvent) bool { return e.Kind == store.DueSemaphoreGC })
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n got %v\nwant %v", got, want)
	}
}

// Collections: counters at each boundary of their interval, wall-clock
// aligned, at once if they never ran; semaphores an interval after the last.
func TestAdvanceCollections(t *testing.T) {
	start := at(0) + 15*sec
	s := store.New(store.Config{Counters: store.CountersConfig{Interval: 60}, SemaphoreGCInterval: 10 * sec, Start: start})
	var d store.Due
	s.Advance(start, &d)
	if !d.CounterGC || d.SemaphoreGC {
		t.Fatalf("at start: counters %v, semaphores %v; want counters only (never collected)", d.CounterGC, d.SemaphoreGC)
	}
	s.Counters.GC(start)
	type step struct {
		now            int64
		counters, sems bool
	}
	for _, st := range []step{
		{start + 10*sec - 1, false, false},
		{start + 10*sec, false, true},
		{start + 23*sec, false, true},
		{start + 33*sec - 1, false, false},
		{at(60) - 1, false, true},
		{at(60), true, false},
		{at(119), false, true},
		{at(180), true, true}, // not collected: the next is still the boundary after
		{at(189), false, false},
		{at(240) - 1, false, true},
		{at(240), true, false},
	} {
		d.Reset()
		s.Advance(st.now, &d)
		if d.CounterGC != st.counters || d.SemaphoreGC != st.sems {
			t.Fatalf("Advance(%d s): counters %v, semaphores %v; want %v, %v",
				(st.now-at(0))/sec, d.CounterGC, d.SemaphoreGC, st.counters, st.sems)
		}
		if d.CounterGC && st.now != at(180) {
			s.Counters.GC(st.now)
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
	}
}

// On the families of a Store, the methods that drive their own deadlines
// panic: their deadlines are the Store's.
func TestFamilyClocksOfAStorePanic(t *testing.T) {
	s := store.New(store.Config{})
	for name, f := range map[string]func(){
		"Pools.Expire":       func() { s.Pools.Expire(0, nil) },
		"Pools.NextDeadline": func() { s.Pools.NextDeadline() },
		"Locks.Expire":       func() { s.Locks.Expire(0, nil, nil) },
		"Locks.NextDeadline": func() { s.Locks.NextDeadline() },
		"Locks.PersistDue":   func() { s.Locks.PersistDue(0) },
		"Locks.NextPersist":  func() { s.Locks.NextPersist() },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Store.Advance") {
					t.Errorf("%s: recovered %v", name, r)
				}
			}()
			f()
		}()
	}
}

// journalLines renders what Journal emits at now, sorted.
func journalLines(l *store.Locks, now int64) []string {
	var out []string
	l.Journal(now, func(s *store.KeyState) {
		line := fmt.Sprintf("db%d %x value=%x", s.DB, s.Key, s.Value)
		for _, h := range s.Holders {
			line += fmt.Sprintf(" [%x levels=%d deadline=%d ef=%#x]", h.LockID, h.Levels, h.Deadline, lockwire.OfHolder(&h).ExpriedFlag)
		}
		out = append(out, line)
	})
	sort.Strings(out)
	return out
}

// A Store hands out, family by family, exactly what the families alone hand
// out when driven as the loop drove them before (Pools.Expire, then
// Locks.Expire, then Locks.PersistDue), over random work with random ticks;
// its events are in deadline order and its invariants hold throughout.
func TestStoreMatchesFamiliesAlone(t *testing.T) {
	const persistAfter = 40 * msec
	for seed := range uint64(30) {
		rnd := rand.New(rand.NewPCG(seed, 11))
		lcfg := store.LocksConfig{Persist: true, PersistAfter: persistAfter, IDSeed: seed, MaxWaitersPerKey: 6}
		pcfg := store.PoolsConfig{MaxEntries: 2}
		s := store.New(store.Config{Pools: pcfg, Locks: lcfg, Start: at(0), SemaphoreGCInterval: 300 * msec})
		p, l := store.NewPools(pcfg), store.NewLocks(lcfg)
		type pc struct{ a, b *store.PoolClient }
		clients := map[store.Owner]pc{}
		client := func(o store.Owner) pc {
			c, ok := clients[o]
			if !ok {
				c = pc{s.Pools.NewClient(o), p.NewClient(o)}
				clients[o] = c
			}
			return c
		}
		var d store.Due
		var wa, wb []store.Wake
		var ra, rb []store.LockReply
		var xa, xb []store.Exec
		now, last := at(0), at(0)
		for step := range 2000 {
			what := fmt.Sprintf("seed %d step %d", seed, step)
			now += rnd.Int64N(30 * msec)
			switch r := rnd.IntN(10); {
			case r < 4: // slock
				var c wc
				c.Kind = 1 + store.LockKind(rnd.IntN(3)/2)
				c.DB = uint8(rnd.IntN(2))
				c.Key[15] = byte(rnd.IntN(5))
				c.LockID[15] = byte(rnd.IntN(4))
				c.RequestID[15] = byte(step)
				c.Count = uint16(rnd.IntN(2))
				c.Timeout, c.TimeoutFlag = uint16(rnd.IntN(150)), ms
				c.Expried, c.ExpriedFlag = uint16(1+rnd.IntN(200)), ms
				switch rnd.IntN(8) {
				case 0:
					c.ExpriedFlag |= 0x0080 // lock the reversed key on expiry
				case 1:
					c.TimeoutFlag |= 0x0080 // ... on a timeout
				case 2:
					c.ExpriedFlag |= 0x8000 // kept alive by the connection
				case 3:
					c.ExpriedFlag |= 0x0100 // persists at once
				}
				o := store.Owner(1 + rnd.IntN(4))
				sc := c.cmd()
				ra, xa = s.Locks.Do(o, &sc, now, ra[:0], xa[:0])
				rb, xb = l.Do(o, &sc, now, rb[:0], xb[:0])
				if !repliesEqual(ra, rb) || !execsEqual(xa, xb) {
					t.Fatalf("%s: Do: store %+v, alone %+v", what, ra, rb)
				}
				if rnd.IntN(10) == 0 {
					s.Locks.Disconnected(o, now)
					l.Disconnected(o, now)
				}
			case r < 8: // PoolCounter
				o := store.Owner(100 + rnd.IntN(8))
				c := client(o)
				var oa, ob store.Outcome
				if rnd.IntN(6) == 0 {
					oa, wa = s.Pools.Release(c.a, now, wa[:0])
					ob, wb = p.Release(c.b, now, wb[:0])
				} else {
					key := []byte{'k', byte('0' + rnd.IntN(3))}
					mode := store.Mode(rnd.IntN(2))
					tmo := uint32(rnd.IntN(2))
					oa = s.Pools.Acquire(c.a, mode, key, 1, 4, tmo, now)
					ob = p.Acquire(c.b, mode, key, 1, 4, tmo, now)
					wa, wb = wa[:0], wb[:0]
				}
				if oa != ob || !slices.Equal(wa, wb) {
					t.Fatalf("%s: pool: store %v %v, alone %v %v", what, oa, wa, ob, wb)
				}
			case r < 9: // a pool connection goes away
				o := store.Owner(100 + rnd.IntN(8))
				c := client(o)
				wa = s.Pools.Drop(c.a, now, wa[:0])
				wb = p.Drop(c.b, now, wb[:0])
				if !slices.Equal(wa, wb) {
					t.Fatalf("%s: Drop: store %v, alone %v", what, wa, wb)
				}
				delete(clients, o)
			default: // a tick
				d.Reset()
				s.Advance(now, &d)
				wb = p.Expire(now, wb[:0])
				rb, xb = l.Expire(now, rb[:0], xb[:0])
				l.PersistDue(now)
				if !slices.Equal(d.Wakes, wb) {
					t.Fatalf("%s: wakes: store %v, alone %v", what, d.Wakes, wb)
				}
				if !repliesEqual(d.Replies, rb) || !execsEqual(d.Execs, xb) {
					t.Fatalf("%s: lock replies: store %+v, alone %+v", what, d.Replies, rb)
				}
				pw, lk := 0, 0
				for i, e := range d.Events {
					switch {
					case e.At > now || e.At <= last && e.Kind != store.DueCounterGC:
						t.Fatalf("%s: Advance(%d) after Advance(%d) handed %v", what, now, last, e)
					case i > 0 && e.At < d.Events[i-1].At:
						t.Fatalf("%s: events out of order: %v", what, d.Events)
					case e.Kind == store.DuePoolWait:
						pw++
					case e.Kind == store.DueLockWait || e.Kind == store.DueLockHold:
						lk++
					}
				}
				if pw != len(d.Wakes) || lk > len(d.Replies) {
					t.Fatalf("%s: %d pool and %d lock events for %d wakes and %d replies", what, pw, lk, len(d.Wakes), len(d.Replies))
				}
				if ja, jb := journalLines(s.Locks, now), journalLines(l, now); !slices.Equal(ja, jb) {
					t.Fatalf("%s: journal:\nstore %q\nalone %q", what, ja, jb)
				}
				last = now
			}
			if err := s.Check(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
}

func repliesEqual(a, b []store.LockReply) bool {
	return slices.EqualFunc(a, b, func(x, y store.LockReply) bool {
		// Both nil or both not: a nil Value sends no value record.
		if string(x.Value) != string(y.Value) || (x.Value == nil) != (y.Value == nil) {
			return false
		}
		x.Value, y.Value = nil, nil
		return fmt.Sprint(x) == fmt.Sprint(y)
	})
}

func execsEqual(a, b []store.Exec) bool {
	return slices.EqualFunc(a, b, func(x, y store.Exec) bool {
		return x.Owner == y.Owner && x.DB == y.DB && string(x.Frame) == string(y.Frame)
	})
}

// In steady state an Advance that times out pool and lock waits, expires
// holders and ages them allocates nothing.
func TestAdvanceNoAllocs(t *testing.T) {
	s := store.New(store.Config{Locks: store.LocksConfig{Persist: true, PersistAfter: 10 * msec},
		Start: at(0), SemaphoreGCInterval: 1 << 62})
	s.Counters.GC(at(0))
	emit := func(*store.KeyState) {}
	holder, waiter := s.Pools.NewClient(1), s.Pools.NewClient(2)
	key := []byte("held")
	if o := s.Pools.Acquire(holder, store.AcqMe, key, 1, 10, 0, at(0)); o != store.Locked {
		t.Fatal(o)
	}
	hold := with(lockc(1, "h", "k"), func(c *wc) { c.Expried, c.ExpriedFlag = 50, ms })
	wait := with(lockc(2, "w", "k"), func(c *wc) { c.Timeout, c.TimeoutFlag = 20, ms })
	d := store.Due{Wakes: make([]store.Wake, 0, 8), Replies: make([]store.LockReply, 0, 8),
		Execs: make([]store.Exec, 0, 8), Events: make([]store.DueEvent, 0, 8)}
	rs := make([]store.LockReply, 0, 8)
	now := at(1)
	noAllocs(t, "Advance", 2000, func(int) {
		now += sec
		if o := s.Pools.Acquire(waiter, store.AcqMe, key, 1, 10, 1, now); o != store.Waiting {
			t.Fatal(o)
		}
		rs, _ = s.Locks.Do(1, &hold, now, rs[:0], nil)
		rs, _ = s.Locks.Do(2, &wait, now, rs[:0], nil)
		d.Reset()
		s.Advance(now+sec, &d)
		if len(d.Wakes) != 1 || len(d.Replies) != 2 || len(d.Events) != 4 || d.Events[0].Kind != store.DuePersist {
			t.Fatalf("Advance: %d wakes, %d replies, events %v", len(d.Wakes), len(d.Replies), d.Events)
		}
		s.Locks.Journal(now+sec, emit)
	})

	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAdvance measures one pool wait, one lock wait and one lock hold
// through the Store's clock.
func BenchmarkAdvance(b *testing.B) {
	s := store.New(store.Config{Start: at(0)})
	holder, waiter := s.Pools.NewClient(1), s.Pools.NewClient(2)
	key := []byte("held")
	s.Pools.Acquire(holder, store.AcqMe, key, 1, 10, 0, at(0))
	hold := with(lockc(1, "h", "k"), func(c *wc) { c.Expried, c.ExpriedFlag = 50, ms })
	wait := with(lockc(2, "w", "k"), func(c *wc) { c.Timeout, c.TimeoutFlag = 20, ms })
	var d store.Due
	rs := make([]store.LockReply, 0, 8)
	now := at(1)
	for b.Loop() {
		now += sec
		s.Pools.Acquire(waiter, store.AcqMe, key, 1, 10, 1, now)
		rs, _ = s.Locks.Do(1, &hold, now, rs[:0], nil)
		rs, _ = s.Locks.Do(2, &wait, now, rs[:0], nil)
		d.Reset()
		s.Advance(now+sec, &d)
	}
}
