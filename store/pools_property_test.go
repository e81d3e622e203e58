package store_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// The pool property test runs seeded random acquires, releases, disconnects,
// clock advances and expiries against Pools and against a model written
// straight from NOTES §3 with slices, comparing every outcome, every wake in
// order, the gauges, the statistics, each client's state and the next
// deadline after every operation, and running Check.

// ment is the model of one entry.
type ment struct {
	client  int
	key     string
	mode    store.Mode
	waiting bool
	since   int64  // got the lock, or started waiting
	due     int64  // while waiting
	seq     uint64 // order in which waits began
}

// mkey is the model of one key: held entries and FIFO queues.
type mkey struct {
	held    int
	me, any []*ment
}

// mstats are the model's statistics, times in exact nanoseconds.
type mstats struct {
	acquired, releases, fullQueues, lockMismatch, lockWhileWaiting, releaseMismatch, processed uint64
	processing, gained, waiting, waitingMe, waitingAny, good, wasted                           int64
}

type poolModel struct {
	maxEntries, maxKeys int
	keys                map[string]*mkey
	clients             map[int][]*ment
	seq                 uint64
	st                  mstats
}

func newPoolModel(maxEntries, maxKeys int) *poolModel {
	return &poolModel{maxEntries: maxEntries, maxKeys: maxKeys, keys: map[string]*mkey{}, clients: map[int][]*ment{}}
}

func (m *poolModel) acquire(id int, mode store.Mode, key string, workers, maxqueue, timeout uint32, now int64) store.Outcome {
	ents := m.clients[id]
	if len(ents) >= m.maxEntries {
		m.st.lockMismatch++
		return store.LockHeld
	}
	if len(ents) > 0 && ents[len(ents)-1].waiting {
		m.st.lockWhileWaiting++
		return store.WaitForResponse
	}
	if key == "" || workers == 0 || maxqueue == 0 {
		return store.BadSyntax
	}
	k := m.keys[key]
	count, processing := 0, 0
	if k != nil {
		count, processing = k.held+len(k.me)+len(k.any), k.held
	}
	if count >= int(maxqueue) {
		m.st.fullQueues++
		return store.QueueFull
	}
	if processing >= int(workers) && timeout == 0 {
		return store.Timeout
	}
	if k == nil {
		if m.maxKeys > 0 && len(m.keys) >= m.maxKeys {
			m.st.fullQueues++
			return store.QueueFull
		}
		k = &mkey{}
		m.keys[key] = k
	}
	e := &ment{client: id, key: key, mode: mode, since: now}
	m.clients[id] = append(ents, e)
	if processing < int(workers) {
		k.held++
		m.st.acquired++
		return store.Locked
	}
	e.waiting = true
	e.due = now + int64(timeout)*sec
	m.seq++
	e.seq = m.seq
	if mode == store.AcqMe {
		k.me = append(k.me, e)
	} else {
		k.any = append(k.any, e)
	}
	return store.Waiting
}

// pop removes client id's newest entry, which must be e if e is not nil.
func (m *poolModel) pop(id int, e *ment) *ment {
	ents := m.clients[id]
	last := ents[len(ents)-1]
	if e != nil && last != e {
		panic("model: waiter is not its client's newest entry")
	}
	if len(ents) == 1 {
		delete(m.clients, id)
	} else {
		m.clients[id] = ents[:len(ents)-1]
	}
	return last
}

// unqueue removes waiting entry e from its key's queue.
func (m *poolModel) unqueue(e *ment) {
	k := m.keys[e.key]
	q := &k.me
	if e.mode == store.AcqAny {
		q = &k.any
	}
	i := slices.Index(*q, e)
	*q = slices.Delete(*q, i, i+1)
}

// tidy deletes key if nothing is on it.
func (m *poolModel) tidy(key string) {
	if k := m.keys[key]; k.held == 0 && len(k.me) == 0 && len(k.any) == 0 {
		delete(m.keys, key)
	}
}

// grant hands the slot of an ended entry of k to w, or frees it.
func (m *poolModel) grant(k *mkey, w *ment, now int64) []store.Wake {
	if w == nil {
		k.held--
		return nil
	}
	m.unqueue(w)
	w.waiting = false
	wait := now - w.since
	w.since = now
	m.st.acquired++
	m.st.waiting += wait
	if w.mode == store.AcqMe {
		m.st.waitingMe += wait
	} else {
		m.st.waitingAny += wait
	}
	return []store.Wake{{Owner: store.Owner(w.client), Outcome: store.Locked}}
}

func (m *poolModel) release(id int, now int64) (store.Outcome, []store.Wake) {
	if len(m.clients[id]) == 0 {
		m.st.releaseMismatch++
		return store.NotLocked, nil
	}
	e := m.pop(id, nil)
	m.st.releases++
	if e.waiting {
		m.unqueue(e)
		m.tidy(e.key)
		return store.Released, nil
	}
	k := m.keys[e.key]
	held := now - e.since
	m.st.processed++
	m.st.processing += held
	var wakes []store.Wake
	for _, w := range slices.Clone(k.any) {
		m.pop(w.client, w)
		m.unqueue(w)
		m.st.gained += held
		m.st.good += now - w.since
		wakes = append(wakes, store.Wake{Owner: store.Owner(w.client), Outcome: store.Done})
	}
	var first *ment
	if len(k.me) > 0 {
		first = k.me[0]
	}
	wakes = append(wakes, m.grant(k, first, now)...)
	m.tidy(e.key)
	return store.Released, wakes
}

func (m *poolModel) drop(id int, now int64) []store.Wake {
	var wakes []store.Wake
	for len(m.clients[id]) > 0 {
		e := m.pop(id, nil)
		if e.waiting {
			m.unqueue(e)
		} else {
			k := m.keys[e.key]
			m.st.processed++
			m.st.processing += now - e.since
			var first *ment
			switch {
			case len(k.me) > 0:
				first = k.me[0]
			case len(k.any) > 0:
				first = k.any[0]
			}
			wakes = append(wakes, m.grant(k, first, now)...)
		}
		m.tidy(e.key)
	}
	return wakes
}

func (m *poolModel) waiters() []*ment {
	var ws []*ment
	for _, k := range m.keys {
		ws = append(ws, k.me...)
		ws = append(ws, k.any...)
	}
	slices.SortFunc(ws, func(a, b *ment) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq)) })
	return ws
}

func (m *poolModel) expire(now int64) []store.Wake {
	var wakes []store.Wake
	for _, w := range m.waiters() {
		if w.due > now {
			break
		}
		m.pop(w.client, w)
		m.unqueue(w)
		m.st.wasted += now - w.since
		wakes = append(wakes, store.Wake{Owner: store.Owner(w.client), Outcome: store.Timeout})
		m.tidy(w.key)
	}
	return wakes
}

func (m *poolModel) gauges() (keys, processing, waiting uint64) {
	for _, k := range m.keys {
		processing += uint64(k.held)
		waiting += uint64(len(k.me) + len(k.any))
	}
	return uint64(len(m.keys)), processing, waiting
}

// compare fails if the store's state differs from the model's.
func (m *poolModel) compare(p *store.Pools, cs []*store.PoolClient) error {
	gk, gp, gw := p.Gauges()
	if mk, mp, mw := m.gauges(); gk != mk || gp != mp || gw != mw {
		return fmt.Errorf("gauges %d %d %d, model %d %d %d", gk, gp, gw, mk, mp, mw)
	}
	for id, c := range cs {
		ents := m.clients[id]
		w := len(ents) > 0 && ents[len(ents)-1].waiting
		if c.Len() != len(ents) || c.Waiting() != w {
			return fmt.Errorf("client %d: Len %d, Waiting %v; model %d, %v", id, c.Len(), c.Waiting(), len(ents), w)
		}
	}
	at, ok := p.NextDeadline()
	if ws := m.waiters(); ok != (len(ws) > 0) || ok && at != ws[0].due {
		return fmt.Errorf("NextDeadline %d, %v; model has %d waiters", at, ok, len(ws))
	}
	s := p.Stats()
	want := store.PoolStats{
		TotalAcquired: m.st.acquired, TotalReleases: m.st.releases, FullQueues: m.st.fullQueues,
		LockMismatch: m.st.lockMismatch, LockWhileWaiting: m.st.lockWhileWaiting,
		ReleaseMismatch: m.st.releaseMismatch, ProcessedCount: m.st.processed,
	}
	got := *s
	times := []struct {
		name string
		got  *float64
		ns   int64
	}{
		{"total processing time", &got.TotalProcessingTime, m.st.processing},
		{"gained time", &got.GainedTime, m.st.gained},
		{"waiting time", &got.WaitingTime, m.st.waiting},
		{"waiting time for me", &got.WaitingTimeForMe, m.st.waitingMe},
		{"waiting time for anyone", &got.WaitingTimeForAnyone, m.st.waitingAny},
		{"waiting time for good", &got.WaitingTimeForGood, m.st.good},
		{"wasted timeout time", &got.WastedTimeoutTime, m.st.wasted},
	}
	for _, tm := range times {
		w := float64(tm.ns) / 1e9
		if math.Abs(*tm.got-w) > 1e-9*math.Max(1, w) {
			return fmt.Errorf("%s %v s, model %v s", tm.name, *tm.got, w)
		}
		*tm.got = 0
	}
	if got != want {
		return fmt.Errorf("stats %+v, model %+v", got, want)
	}
	return nil
}

// poolProp is one configuration of the random runs.
type poolProp struct {
	clients, keys       int
	maxEntries, maxKeys int
	maxWorkers, maxQ    uint32
	maxTimeout          uint32 // seconds
}

func TestPoolsModel(t *testing.T) {
	props := []poolProp{
		{clients: 6, keys: 2, maxEntries: 4, maxWorkers: 2, maxQ: 5, maxTimeout: 3},
		{clients: 12, keys: 3, maxEntries: 4, maxWorkers: 3, maxQ: 8, maxTimeout: 2},
		{clients: 10, keys: 1, maxEntries: 2, maxWorkers: 2, maxQ: 12, maxTimeout: 4},
		{clients: 8, keys: 6, maxEntries: 1, maxKeys: 3, maxWorkers: 2, maxQ: 4, maxTimeout: 2},
		{clients: 20, keys: 4, maxEntries: 3, maxWorkers: 1, maxQ: 20, maxTimeout: 5},
	}
	for i, pc := range props {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("config%d/seed%d", i, seed), func(t *testing.T) {
				runPoolModel(t, pc, seed, 2500)
			})
		}
	}
}

func runPoolModel(t *testing.T, pc poolProp, seed uint64, ops int) {
	r := rand.New(rand.NewPCG(seed, uint64(pc.clients)))
	p := store.NewPools(store.PoolsConfig{MaxEntries: pc.maxEntries, MaxKeys: pc.maxKeys})
	m := newPoolModel(pc.maxEntries, pc.maxKeys)
	cs := make([]*store.PoolClient, pc.clients)
	for i := range cs {
		cs[i] = p.NewClient(store.Owner(i))
	}
	keyNames := make([]string, pc.keys)
	for i := range keyNames {
		keyNames[i] = fmt.Sprintf("k\x00%d", i)
	}
	now := at(0)
	var buf []store.Wake
	for op := range ops {
		id := r.IntN(pc.clients)
		c := cs[id]
		var what string
		switch x := r.IntN(100); {
		case x < 45:
			mode := store.Mode(r.IntN(2))
			key := keyNames[r.IntN(len(keyNames))]
			if r.IntN(40) == 0 {
				key = ""
			}
			workers := uint32(r.IntN(int(pc.maxWorkers) + 1))
			if workers == 0 && r.IntN(4) != 0 {
				workers = 1
			}
			maxq := uint32(r.IntN(int(pc.maxQ) + 1))
			if maxq == 0 && r.IntN(4) != 0 {
				maxq = pc.maxQ
			}
			tmo := uint32(r.IntN(int(pc.maxTimeout) + 1))
			what = fmt.Sprintf("client %d: Acquire(%v, %q, %d, %d, %d)", id, mode, key, workers, maxq, tmo)
			got := p.Acquire(c, mode, []byte(key), workers, maxq, tmo, now)
			if want := m.acquire(id, mode, key, workers, maxq, tmo, now); got != want {
				t.Fatalf("op %d: %s = %v, model %v", op, what, got, want)
			}
		case x < 70:
			what = fmt.Sprintf("client %d: Release", id)
			var got store.Outcome
			got, buf = p.Release(c, now, buf[:0])
			want, wakes := m.release(id, now)
			if got != want || !slices.Equal(buf, wakes) {
				t.Fatalf("op %d: %s = %v, %v; model %v, %v", op, what, got, buf, want, wakes)
			}
		case x < 77:
			what = fmt.Sprintf("client %d: Drop", id)
			buf = p.Drop(c, now, buf[:0])
			if wakes := m.drop(id, now); !slices.Equal(buf, wakes) {
				t.Fatalf("op %d: %s woke %v; model %v", op, what, buf, wakes)
			}
		default:
			// Advance the clock by up to 1.5 s, sometimes exactly to the
			// next deadline, and expire what is due.
			if at, ok := p.NextDeadline(); ok && r.IntN(3) == 0 && at > now {
				now = at
			} else {
				now += r.Int64N(1500) * msec
			}
			what = "Expire"
			buf = p.Expire(now, buf[:0])
			if wakes := m.expire(now); !slices.Equal(buf, wakes) {
				t.Fatalf("op %d: Expire at %d ms woke %v; model %v", op, (now-t0)/msec, buf, wakes)
			}
		}
		if err := p.Check(); err != nil {
			t.Fatalf("op %d: after %s: %v", op, what, err)
		}
		if err := m.compare(p, cs); err != nil {
			t.Fatalf("op %d: after %s: %v", op, what, err)
		}
	}
	// Everyone leaves: nothing may be left behind.
	for id, c := range cs {
		buf = p.Drop(c, now, buf[:0])
		if wakes := m.drop(id, now); !slices.Equal(buf, wakes) {
			t.Fatalf("final Drop of %d woke %v; model %v", id, buf, wakes)
		}
	}
	if k, pr, w := p.Gauges(); k != 0 || pr != 0 || w != 0 {
		t.Fatalf("after everyone left: gauges %d %d %d", k, pr, w)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
