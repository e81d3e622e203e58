package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/store"
)

const msec = int64(1e6)

// t0 is the start of every pool script: the fake clock reads t0 + ms*msec.
var t0 = at(0)

// pools drives a Pools through a script, checking the invariants after every
// step. Clients are numbered; their Owner is their number.
type pools struct {
	t  *testing.T
	p  *store.Pools
	cs map[int]*store.PoolClient
}

func newPools(t *testing.T, cfg store.PoolsConfig) *pools {
	return &pools{t: t, p: store.NewPools(cfg), cs: map[int]*store.PoolClient{}}
}

func (h *pools) client(id int) *store.PoolClient {
	c := h.cs[id]
	if c == nil {
		c = h.p.NewClient(store.Owner(id))
		h.cs[id] = c
	}
	return c
}

func (h *pools) check(what string) {
	h.t.Helper()
	if err := h.p.Check(); err != nil {
		h.t.Fatalf("after %s: %v", what, err)
	}
}

// acq is an acquire by client id at ms milliseconds.
func (h *pools) acq(id int, mode store.Mode, key string, workers, maxqueue, timeout uint32, ms int64, want store.Outcome) {
	h.t.Helper()
	was := h.client(id).Waiting()
	got := h.p.Acquire(h.client(id), mode, []byte(key), workers, maxqueue, timeout, t0+ms*msec)
	if got != want {
		h.t.Fatalf("client %d: Acquire(%v, %q, %d, %d, %d) at %d ms = %v, want %v", id, mode, key, workers, maxqueue, timeout, ms, got, want)
	}
	if w := h.client(id).Waiting(); w != (want == store.Waiting || was) {
		h.t.Fatalf("client %d: Waiting() = %v after %v, was %v", id, w, got, was)
	}
	h.check("Acquire")
}

// me and any are acquires with workers 1, maxqueue 10.
func (h *pools) me(id int, key string, timeout uint32, ms int64, want store.Outcome) {
	h.t.Helper()
	h.acq(id, store.AcqMe, key, 1, 10, timeout, ms, want)
}

func (h *pools) any(id int, key string, timeout uint32, ms int64, want store.Outcome) {
	h.t.Helper()
	h.acq(id, store.AcqAny, key, 1, 10, timeout, ms, want)
}

func (h *pools) rel(id int, ms int64, want store.Outcome, wakes ...store.Wake) {
	h.t.Helper()
	got, w := h.p.Release(h.client(id), t0+ms*msec, nil)
	if got != want || !slices.Equal(w, wakes) {
		h.t.Fatalf("client %d: Release at %d ms = %v, wakes %v; want %v, wakes %v", id, ms, got, w, want, wakes)
	}
	h.check("Release")
}

func (h *pools) drop(id int, ms int64, wakes ...store.Wake) {
	h.t.Helper()
	w := h.p.Drop(h.client(id), t0+ms*msec, nil)
	if !slices.Equal(w, wakes) {
		h.t.Fatalf("client %d: Drop at %d ms: wakes %v, want %v", id, ms, w, wakes)
	}
	if n := h.client(id).Len(); n != 0 {
		h.t.Fatalf("client %d: Len %d after Drop", id, n)
	}
	h.check("Drop")
}

func (h *pools) expire(ms int64, wakes ...store.Wake) {
	h.t.Helper()
	w := h.p.Expire(t0+ms*msec, nil)
	if !slices.Equal(w, wakes) {
		h.t.Fatalf("Expire at %d ms: wakes %v, want %v", ms, w, wakes)
	}
	h.check("Expire")
}

// gauges fails unless the gauges read keys live keys, proc held and wait
// waiting entries.
func (h *pools) gauges(keys, proc, wait uint64) {
	h.t.Helper()
	k, p, w := h.p.Gauges()
	if k != keys || p != proc || w != wait {
		h.t.Fatalf("Gauges = %d keys, %d processing, %d waiting; want %d, %d, %d", k, p, w, keys, proc, wait)
	}
}

// next fails unless the next deadline is at ms (or there is none, for ms < 0).
func (h *pools) next(ms int64) {
	h.t.Helper()
	at, ok := h.p.NextDeadline()
	if ms < 0 {
		if ok {
			h.t.Fatalf("NextDeadline = %d ms, want none", (at-t0)/msec)
		}
		return
	}
	if !ok || at != t0+ms*msec {
		h.t.Fatalf("NextDeadline = %d ms, %v; want %d ms", (at-t0)/msec, ok, ms)
	}
}

func (h *pools) stats(want store.PoolStats) {
	h.t.Helper()
	if got := *h.p.Stats(); got != want {
		h.t.Fatalf("Stats:\n got %+v\nwant %+v", got, want)
	}
}

func wake(id int, o store.Outcome) store.Wake { return store.Wake{Owner: store.Owner(id), Outcome: o} }

const (
	locked  = store.Locked
	done    = store.Done
	waiting = store.Waiting
	timeout = store.Timeout
)

// TestPoolAcquireSteps: each of the seven checks, and that each earlier one
// wins over the later ones.
func TestPoolAcquireSteps(t *testing.T) {
	type req struct {
		mode                       store.Mode
		key                        string
		workers, maxqueue, timeout uint32
	}
	tests := []struct {
		name  string
		setup func(h *pools) // client 1 is the one asking
		req   req
		want  store.Outcome
		stat  func(s *store.PoolStats) uint64
	}{
		{"1 LOCK_HELD at MaxEntries", func(h *pools) {
			for _, k := range []string{"a", "b", "c", "d"} {
				h.me(1, k, 0, 0, locked)
			}
		}, req{store.AcqMe, "e", 1, 10, 5}, store.LockHeld, func(s *store.PoolStats) uint64 { return s.LockMismatch }},
		{"1 beats 2: full and newest waiting", func(h *pools) {
			h.me(2, "w", 0, 0, locked)
			for _, k := range []string{"a", "b", "c"} {
				h.me(1, k, 0, 0, locked)
			}
			h.me(1, "w", 5, 0, waiting)
		}, req{store.AcqMe, "", 0, 0, 0}, store.LockHeld, func(s *store.PoolStats) uint64 { return s.LockMismatch }},
		{"2 WAIT_FOR_RESPONSE", func(h *pools) {
			h.me(2, "w", 0, 0, locked)
			h.any(1, "w", 5, 0, waiting)
		}, req{store.AcqMe, "x", 1, 10, 5}, store.WaitForResponse, func(s *store.PoolStats) uint64 { return s.LockWhileWaiting }},
		{"2 beats 3: bad syntax while waiting", func(h *pools) {
			h.me(2, "w", 0, 0, locked)
			h.me(1, "w", 5, 0, waiting)
		}, req{store.AcqMe, "", 0, 0, 0}, store.WaitForResponse, func(s *store.PoolStats) uint64 { return s.LockWhileWaiting }},
		{"3 empty key", nil, req{store.AcqMe, "", 1, 10, 5}, store.BadSyntax, nil},
		{"3 workers 0", nil, req{store.AcqAny, "k", 0, 10, 5}, store.BadSyntax, nil},
		{"3 maxqueue 0", nil, req{store.AcqMe, "k", 1, 0, 5}, store.BadSyntax, nil},
		{"3 unknown mode", nil, req{store.Mode(2), "k", 1, 10, 5}, store.BadSyntax, nil},
		{"3 beats 4: maxqueue 0 on a busy key", func(h *pools) {
			h.me(2, "k", 0, 0, locked)
		}, req{store.AcqMe, "k", 1, 0, 5}, store.BadSyntax, nil},
		{"4 QUEUE_FULL", func(h *pools) {
			h.me(2, "k", 0, 0, locked)
			h.me(3, "k", 5, 0, waiting)
		}, req{store.AcqMe, "k", 1, 2, 5}, store.QueueFull, func(s *store.PoolStats) uint64 { return s.FullQueues }},
		{"4 beats 5: full though a slot is free", func(h *pools) {
			h.acq(2, store.AcqMe, "k", 5, 10, 0, 0, locked)
			h.acq(3, store.AcqAny, "k", 5, 10, 0, 0, locked)
		}, req{store.AcqMe, "k", 5, 2, 5}, store.QueueFull, func(s *store.PoolStats) uint64 { return s.FullQueues }},
		{"5 LOCKED on a new key", nil, req{store.AcqMe, "k", 1, 1, 0}, store.Locked, func(s *store.PoolStats) uint64 { return s.TotalAcquired }},
		{"5 LOCKED even if others wait", func(h *pools) {
			h.me(2, "k", 0, 0, locked)
			h.me(3, "k", 5, 0, waiting)
			h.any(4, "k", 5, 0, waiting)
		}, req{store.AcqAny, "k", 2, 10, 0}, store.Locked, func(s *store.PoolStats) uint64 { return s.TotalAcquired }},
		{"5 beats 6: timeout 0 but lockable", func(h *pools) {
			h.acq(2, store.AcqMe, "k", 2, 10, 0, 0, locked)
		}, req{store.AcqMe, "k", 2, 10, 0}, store.Locked, func(s *store.PoolStats) uint64 { return s.TotalAcquired }},
		{"6 TIMEOUT at once", func(h *pools) {
			h.me(2, "k", 0, 0, locked)
		}, req{store.AcqMe, "k", 1, 10, 0}, store.Timeout, nil},
		{"7 waits", func(h *pools) {
			h.me(2, "k", 0, 0, locked)
		}, req{store.AcqAny, "k", 1, 10, 1}, store.Waiting, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPools(t, store.PoolsConfig{})
			if tt.setup != nil {
				tt.setup(h)
			}
			before := *h.p.Stats()
			keys, proc, wait := h.p.Gauges()
			c := h.client(1)
			n := c.Len()
			r := tt.req
			h.acq(1, r.mode, r.key, r.workers, r.maxqueue, r.timeout, 0, tt.want)
			after := *h.p.Stats()
			// The step's own stat moves by one; nothing else does.
			if tt.stat != nil {
				if got := tt.stat(&after) - tt.stat(&before); got != 1 {
					t.Fatalf("stat moved by %d, want 1", got)
				}
				after = before
			}
			if after != before {
				t.Fatalf("stats moved:\n%+v\n%+v", before, after)
			}
			switch tt.want {
			case store.Locked:
				k2, p2, w2 := h.p.Gauges()
				if p2 != proc+1 || w2 != wait || k2 < keys || c.Len() != n+1 {
					t.Fatalf("after LOCKED: gauges %d %d %d (were %d %d %d), Len %d (was %d)", k2, p2, w2, keys, proc, wait, c.Len(), n)
				}
			case store.Waiting:
				h.gauges(keys, proc, wait+1)
				if c.Len() != n+1 {
					t.Fatalf("Len %d, was %d", c.Len(), n)
				}
				h.next(1000)
			default: // a refusal changes nothing
				h.gauges(keys, proc, wait)
				if c.Len() != n {
					t.Fatalf("Len %d, was %d", c.Len(), n)
				}
			}
		})
	}
}

// TestPoolReleaseWakesAnyThenMe: a release gives DONE to every ACQ4ANY
// waiter, in FIFO order, then LOCKED to the oldest ACQ4ME waiter only.
func TestPoolReleaseWakesAnyThenMe(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 10, 1, waiting)
	h.any(3, "k", 10, 2, waiting)
	h.me(4, "k", 10, 3, waiting)
	h.any(5, "k", 10, 4, waiting)
	h.me(6, "other", 0, 4, locked)
	h.any(7, "other", 10, 4, waiting) // another key's waiter is not woken
	h.gauges(2, 2, 5)
	h.rel(1, 100, store.Released, wake(3, done), wake(5, done), wake(2, locked))
	h.gauges(2, 2, 2)
	for id, want := range map[int]int{1: 0, 2: 1, 3: 0, 4: 1, 5: 0} {
		if n := h.client(id).Len(); n != want {
			t.Fatalf("client %d has %d entries, want %d", id, n, want)
		}
	}
	if h.client(2).Waiting() || !h.client(4).Waiting() {
		t.Fatal("client 2 should hold, client 4 still wait")
	}
	// Client 2 inherited the slot: its release wakes client 4.
	h.rel(2, 200, store.Released, wake(4, locked))
	h.rel(4, 300, store.Released)
	h.gauges(1, 1, 1)
	h.rel(4, 300, store.NotLocked)
}

func TestPoolReleaseOnlyAnyWaiters(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.any(2, "k", 10, 0, waiting)
	h.any(3, "k", 10, 0, waiting)
	h.rel(1, 0, store.Released, wake(2, done), wake(3, done))
	h.gauges(0, 0, 0) // the slot is freed and the key deleted
	h.next(-1)
	h.any(4, "k", 0, 0, locked)
}

func TestPoolReleaseOnlyMeWaiters(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 10, 0, waiting)
	h.me(3, "k", 10, 0, waiting)
	h.rel(1, 0, store.Released, wake(2, locked))
	h.gauges(1, 1, 1)
	h.me(4, "k", 0, 0, timeout) // the slot went to client 2
}

// TestPoolDropHolder: a holder that goes away hands its slot to the oldest
// ACQ4ME waiter, else the oldest ACQ4ANY one, with LOCKED; nobody gets DONE.
func TestPoolDropHolder(t *testing.T) {
	t.Run("me waiters", func(t *testing.T) {
		h := newPools(t, store.PoolsConfig{})
		h.me(1, "k", 0, 0, locked)
		h.any(2, "k", 10, 0, waiting)
		h.me(3, "k", 10, 0, waiting)
		h.me(4, "k", 10, 0, waiting)
		h.drop(1, 0, wake(3, locked))
		h.gauges(1, 1, 2)
		if !h.client(2).Waiting() || h.client(3).Waiting() {
			t.Fatal("client 2 should still wait and client 3 hold")
		}
	})
	t.Run("only any waiters", func(t *testing.T) {
		h := newPools(t, store.PoolsConfig{})
		h.me(1, "k", 0, 0, locked)
		h.any(2, "k", 10, 0, waiting)
		h.any(3, "k", 10, 0, waiting)
		h.drop(1, 0, wake(2, locked))
		h.gauges(1, 1, 1)
		// Client 2 now holds like an ACQ4ME holder: its release DONEs client 3.
		h.rel(2, 0, store.Released, wake(3, done))
		h.gauges(0, 0, 0)
	})
	t.Run("no waiters", func(t *testing.T) {
		h := newPools(t, store.PoolsConfig{})
		h.me(1, "k", 0, 0, locked)
		h.me(1, "j", 0, 0, locked)
		h.drop(1, 0)
		h.gauges(0, 0, 0)
	})
	t.Run("several keys, newest first", func(t *testing.T) {
		h := newPools(t, store.PoolsConfig{})
		h.me(1, "a", 0, 0, locked)
		h.me(1, "b", 0, 0, locked)
		h.me(1, "c", 0, 0, locked)
		h.me(2, "a", 10, 0, waiting)
		h.any(3, "c", 10, 0, waiting)
		h.me(4, "b", 10, 0, waiting)
		h.drop(1, 0, wake(3, locked), wake(4, locked), wake(2, locked))
		h.gauges(3, 3, 0)
	})
}

// TestPoolDropWaiter: a waiter that goes away is removed silently, and is
// not woken later.
func TestPoolDropWaiter(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 10, 0, waiting)
	h.any(3, "k", 5, 0, waiting)
	h.me(4, "k", 10, 0, waiting)
	h.drop(2, 0)
	h.gauges(1, 1, 2)
	h.drop(3, 0)
	h.gauges(1, 1, 1)
	h.next(10000)
	h.rel(1, 0, store.Released, wake(4, locked))
	h.expire(20000)
}

// TestPoolDropHolderWaitingOnItsOwnKey: a connection holding a key and
// waiting for it too does not hand the slot to itself when it goes away.
func TestPoolDropHolderWaitingOnItsOwnKey(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 10, 0, waiting)
	h.me(1, "k", 10, 0, waiting) // behind client 2
	h.gauges(1, 1, 2)
	h.drop(1, 0, wake(2, locked))
	h.gauges(1, 1, 0)
}

func TestPoolTimeout(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 3, 500, waiting)  // due at 3500
	h.any(3, "k", 1, 700, waiting) // due at 1700
	h.me(4, "k", 3, 500, waiting)  // due at 3500, after client 2
	h.next(1700)
	h.expire(1699)
	h.expire(1700, wake(3, timeout))
	h.gauges(1, 1, 2)
	h.next(3500)
	h.expire(3499)
	h.expire(3600, wake(2, timeout), wake(4, timeout))
	h.next(-1)
	h.gauges(1, 1, 0)
	h.rel(1, 4000, store.Released) // nobody left to wake
	h.gauges(0, 0, 0)
}

// TestPoolTimeoutFiresWhateverTheClientSends: requests from a waiting client
// neither cancel nor move its timeout.
func TestPoolTimeoutFiresWhateverTheClientSends(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.me(2, "k", 2, 0, waiting)
	h.me(2, "other", 5, 100, store.WaitForResponse)
	h.acq(2, store.AcqMe, "", 0, 0, 0, 200, store.WaitForResponse)
	h.next(2000)
	h.expire(2000, wake(2, timeout))
	if h.client(2).Waiting() || h.client(2).Len() != 0 {
		t.Fatal("client 2 still has its entry after TIMEOUT")
	}
	h.me(2, "other", 0, 2100, locked) // free to ask again
}

// TestPoolReleaseWhileWaiting: RELEASE from a waiting client cancels its
// wait, answers RELEASED and wakes nobody; the gauges stay right.
func TestPoolReleaseWhileWaiting(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "k", 0, 0, locked)
	h.any(2, "k", 10, 0, waiting)
	h.any(3, "k", 10, 0, waiting)
	h.me(4, "k", 10, 0, waiting)
	h.gauges(1, 1, 3)
	h.rel(3, 500, store.Released)
	h.gauges(1, 1, 2)
	h.rel(4, 500, store.Released)
	h.gauges(1, 1, 1)
	h.rel(4, 500, store.NotLocked)
	h.rel(1, 600, store.Released, wake(2, done))
	h.gauges(0, 0, 0)
	h.next(-1)
	h.expire(20000)
	s := h.p.Stats()
	if s.TotalReleases != 3 || s.ReleaseMismatch != 1 || s.ProcessedCount != 1 || s.WaitingTime != 0 || s.WastedTimeoutTime != 0 {
		t.Fatalf("stats %+v", *s)
	}
}

// TestPoolReleaseWhileWaitingKeepsOlderEntries: the cancelled wait is the
// newest entry; the older held ones stay.
func TestPoolReleaseWhileWaitingKeepsOlderEntries(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.me(1, "a", 0, 0, locked)
	h.me(2, "b", 0, 0, locked)
	h.me(1, "b", 10, 0, waiting)
	h.rel(1, 0, store.Released)
	if c := h.client(1); c.Len() != 1 || c.Waiting() {
		t.Fatalf("client 1: Len %d, Waiting %v; want 1, false", c.Len(), c.Waiting())
	}
	h.me(3, "a", 0, 0, timeout)
	h.gauges(2, 2, 0)
}

// TestPoolReleaseLIFO: RELEASE pops the newest entry, not by key.
func TestPoolReleaseLIFO(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	for _, k := range []string{"a", "b", "c"} {
		h.me(1, k, 0, 0, locked)
	}
	h.me(2, "a", 10, 0, waiting)
	h.me(3, "b", 10, 0, waiting)
	h.me(4, "c", 10, 0, waiting)
	h.rel(1, 0, store.Released, wake(4, locked))
	h.rel(1, 0, store.Released, wake(3, locked))
	h.rel(1, 0, store.Released, wake(2, locked))
	h.rel(1, 0, store.NotLocked)
}

// TestPoolPerRequestLimits: a key keeps only its counts; each request is
// judged by its own workers and maxqueue.
func TestPoolPerRequestLimits(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.acq(1, store.AcqMe, "k", 1, 10, 0, 0, locked)
	h.acq(2, store.AcqMe, "k", 3, 10, 0, 0, locked) // 1 < 3
	h.acq(3, store.AcqMe, "k", 2, 10, 0, 0, timeout)
	h.acq(3, store.AcqAny, "k", 3, 10, 0, 0, locked) // 2 < 3: now 3 hold
	h.acq(4, store.AcqMe, "k", 1, 10, 5, 0, waiting) // 3 >= 1
	h.gauges(1, 3, 1)
	h.acq(5, store.AcqMe, "k", 9, 4, 5, 0, store.QueueFull) // count 4 >= 4
	h.acq(5, store.AcqMe, "k", 9, 5, 5, 0, locked)          // count 4 < 5, 3 < 9
	h.acq(6, store.AcqMe, "k", 1, 6, 5, 0, waiting)
	h.acq(7, store.AcqAny, "k", 100, 6, 5, 0, store.QueueFull)
	h.acq(7, store.AcqAny, "k", 100, 7, 5, 0, locked)
	h.gauges(1, 5, 2)
	// Processing (5) now exceeds the workers of the waiters' requests (1):
	// one release still hands over just one slot.
	h.rel(7, 0, store.Released, wake(4, locked))
	h.gauges(1, 5, 1)
}

// TestPoolSeveralEntriesOnOneKey: one connection may hold a key several
// times; each entry takes a slot and is released on its own.
func TestPoolSeveralEntriesOnOneKey(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	h.acq(1, store.AcqMe, "k", 3, 10, 0, 0, locked)
	h.acq(1, store.AcqMe, "k", 3, 10, 0, 0, locked)
	h.acq(1, store.AcqAny, "k", 3, 10, 0, 0, locked)
	h.acq(1, store.AcqMe, "k", 3, 10, 0, 0, store.Timeout)
	h.gauges(1, 3, 0)
	h.acq(2, store.AcqMe, "k", 3, 10, 5, 0, waiting)
	h.rel(1, 0, store.Released, wake(2, locked))
	h.rel(1, 0, store.Released)
	h.gauges(1, 2, 0)
	h.rel(1, 0, store.Released)
	h.rel(2, 0, store.Released)
	h.gauges(0, 0, 0)
}

func TestPoolMaxEntries(t *testing.T) {
	for _, max := range []int{0, 1, 2, 6} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			h := newPools(t, store.PoolsConfig{MaxEntries: max})
			n := max
			if n == 0 {
				n = store.DefaultPoolEntries
			}
			for i := range n {
				h.me(1, fmt.Sprint(i), 0, 0, locked)
			}
			h.me(1, "more", 0, 0, store.LockHeld)
			h.me(1, "0", 0, 0, store.LockHeld)
			h.rel(1, 0, store.Released)
			h.me(1, "more", 0, 0, locked)
			h.me(1, "more2", 0, 0, store.LockHeld)
			// A wait counts as an entry too.
			h.rel(1, 0, store.Released)
			h.me(2, "w", 0, 0, locked)
			h.me(1, "w", 10, 0, waiting)
			h.me(1, "x", 10, 0, store.LockHeld) // step 1 before step 2
			if got := h.p.Stats().LockMismatch; got != 4 {
				t.Fatalf("lock_mismatch %d, want 4", got)
			}
		})
	}
}

// TestPoolMaxKeys: creating a key beyond MaxKeys is QUEUE_FULL; existing
// keys still work, and a deleted key frees room.
func TestPoolMaxKeys(t *testing.T) {
	h := newPools(t, store.PoolsConfig{MaxKeys: 2})
	h.acq(1, store.AcqMe, "a", 2, 10, 0, 0, locked)
	h.acq(2, store.AcqMe, "b", 2, 10, 0, 0, locked)
	h.acq(3, store.AcqMe, "c", 2, 10, 0, 0, store.QueueFull)
	h.acq(3, store.AcqMe, "a", 2, 10, 0, 0, locked)
	h.rel(2, 0, store.Released)
	h.acq(4, store.AcqMe, "c", 2, 10, 0, 0, locked)
	h.acq(2, store.AcqMe, "b", 2, 10, 0, 0, store.QueueFull)
	h.gauges(2, 3, 0)
	if got := h.p.Stats().FullQueues; got != 2 {
		t.Fatalf("full_queues %d, want 2", got)
	}
}

// TestPoolKeysReused: a key deleted and asked for again, and many keys
// deleted at once, work as new.
func TestPoolKeysReused(t *testing.T) {
	h := newPools(t, store.PoolsConfig{MaxEntries: 10000})
	ks := keys(10000)
	for round := range 3 {
		for _, k := range ks {
			if o := h.p.Acquire(h.client(1), store.AcqMe, k, 1, 1, 0, t0); o != locked {
				t.Fatalf("round %d: Acquire(%s) = %v", round, k, o)
			}
		}
		h.gauges(10000, 10000, 0)
		h.check("acquiring")
		for range ks {
			h.p.Release(h.client(1), t0, nil)
		}
		h.gauges(0, 0, 0)
		h.check("releasing")
	}
}

// TestPool200000Keys: 200,000 distinct keys held at once, none granted twice.
func TestPool200000Keys(t *testing.T) {
	const n = 200000
	h := newPools(t, store.PoolsConfig{})
	ks := keys(n)
	cs := make([]*store.PoolClient, n/4)
	for i := range cs {
		cs[i] = h.p.NewClient(store.Owner(i))
	}
	other := h.p.NewClient(n)
	for i, k := range ks {
		if o := h.p.Acquire(cs[i/4], store.AcqMe, k, 1, 2, 0, t0); o != locked {
			t.Fatalf("Acquire(%s) = %v", k, o)
		}
	}
	h.gauges(n, n, 0)
	for _, k := range ks {
		if o := h.p.Acquire(other, store.AcqAny, k, 1, 2, 0, t0); o != timeout {
			t.Fatalf("second Acquire(%s) = %v", k, o)
		}
	}
	h.check("200,000 keys")
	for _, c := range cs {
		if w := h.p.Drop(c, t0, nil); len(w) != 0 {
			t.Fatalf("Drop woke %v", w)
		}
	}
	h.gauges(0, 0, 0)
	h.check("dropping")
}

// TestPoolStats: every counter and time sum, with exact values.
func TestPoolStats(t *testing.T) {
	h := newPools(t, store.PoolsConfig{MaxEntries: 2})
	var want store.PoolStats
	h.me(1, "k", 0, 0, locked) // holds from 0
	want.TotalAcquired++
	h.any(2, "k", 10, 500, waiting)  // waits from 0.5 s
	h.any(3, "k", 10, 1000, waiting) // waits from 1 s
	h.me(4, "k", 10, 1250, waiting)  // waits from 1.25 s
	h.me(5, "k", 10, 1500, waiting)  // waits from 1.5 s
	h.stats(want)

	// Release at 3 s: held 3 s; DONE to 2 (waited 2.5 s) and 3 (2 s); 4 gets
	// the slot after 1.75 s.
	h.rel(1, 3000, store.Released, wake(2, done), wake(3, done), wake(4, locked))
	want.TotalReleases++
	want.ProcessedCount++
	want.TotalProcessingTime += 3
	want.GainedTime += 3 + 3
	want.WaitingTimeForGood += 2.5 + 2
	want.TotalAcquired++
	want.WaitingTime += 1.75
	want.WaitingTimeForMe += 1.75
	h.stats(want)

	// 4 holds since 3 s; it goes away at 4.5 s: 5 gets the slot after 3 s.
	h.drop(4, 4500, wake(5, locked))
	want.ProcessedCount++
	want.TotalProcessingTime += 1.5
	want.TotalAcquired++
	want.WaitingTime += 3
	want.WaitingTimeForMe += 3
	h.stats(want)

	// An ACQ4ANY waiter inherits from a dropped holder.
	h.any(6, "k", 10, 5000, waiting) // waits from 5 s
	h.drop(5, 5250, wake(6, locked))
	want.ProcessedCount++
	want.TotalProcessingTime += 0.75
	want.TotalAcquired++
	want.WaitingTime += 0.25
	want.WaitingTimeForAnyone += 0.25
	h.stats(want)

	// A timeout 2 s after its wait began, seen 50 ms late.
	h.me(7, "k", 2, 6000, waiting)
	h.expire(8050, wake(7, timeout))
	want.WastedTimeoutTime += 2.05
	h.stats(want)

	// Refusals.
	h.me(8, "k", 0, 8100, timeout)
	h.acq(8, store.AcqMe, "k", 1, 1, 0, 8100, store.QueueFull)
	want.FullQueues++
	h.me(8, "k", 10, 8100, waiting)
	h.me(8, "j", 10, 8100, store.WaitForResponse)
	want.LockWhileWaiting++
	h.rel(8, 8200, store.Released) // a cancelled wait: no times
	want.TotalReleases++
	h.rel(8, 8200, store.NotLocked)
	want.ReleaseMismatch++
	h.me(8, "a", 0, 8200, locked)
	h.me(8, "b", 0, 8200, locked)
	want.TotalAcquired += 2
	h.me(8, "c", 0, 8200, store.LockHeld)
	want.LockMismatch++
	h.stats(want)

	// The caller's own counters live in the same struct.
	h.p.Stats().ConnectErrors += 2
	h.p.Stats().FailedSends++
	want.ConnectErrors, want.FailedSends = 2, 1
	h.stats(want)
	h.gauges(3, 3, 0)
}

func TestPoolWaiting(t *testing.T) {
	h := newPools(t, store.PoolsConfig{})
	c := h.client(2)
	if c.Waiting() || c.Len() != 0 || c.Owner() != 2 {
		t.Fatalf("new client: Waiting %v, Len %d, Owner %d", c.Waiting(), c.Len(), c.Owner())
	}
	h.me(1, "k", 0, 0, locked)
	h.me(2, "j", 0, 0, locked)
	h.me(2, "k", 5, 0, waiting) // acq checks Waiting() after each step
	h.rel(1, 0, store.Released, wake(2, locked))
	if c.Waiting() || c.Len() != 2 {
		t.Fatalf("after hand-over: Waiting %v, Len %d", c.Waiting(), c.Len())
	}
}

func TestPoolForeignClientPanics(t *testing.T) {
	a, b := store.NewPools(store.PoolsConfig{}), store.NewPools(store.PoolsConfig{})
	c := b.NewClient(1)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "pool client") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	a.Acquire(c, store.AcqMe, []byte("k"), 1, 1, 0, t0)
}

func TestPoolNames(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{store.AcqMe.String(), "AcqMe"},
		{store.AcqAny.String(), "AcqAny"},
		{store.Mode(7).String(), "Mode(7)"},
		{store.Locked.String(), "Locked"},
		{store.WaitForResponse.String(), "WaitForResponse"},
		{store.Waiting.String(), "Waiting"},
		{store.Outcome(99).String(), "Outcome(99)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}
