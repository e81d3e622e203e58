package store

import (
	"strings"
	"testing"
)

// checkStore returns a Store with a pool wait, an slock wait and an aging,
// expiring holder in its deadline heap.
func checkStore(t *testing.T) *Store {
	t.Helper()
	const now = int64(1_700_000_000e9)
	s := New(Config{Locks: LocksConfig{Persist: true, PersistAfter: 1e9}, Start: now})
	s.Counters.GC(now)
	a, b := s.Pools.NewClient(1), s.Pools.NewClient(2)
	if s.Pools.Acquire(a, AcqMe, []byte("p"), 1, 5, 0, now) != Locked || s.Pools.Acquire(b, AcqMe, []byte("p"), 1, 5, 3, now) != Waiting {
		t.Fatal("pool setup")
	}
	c := LockCommand{Kind: 1, Wait: Wait{N: 5}, Hold: Hold{N: 10}}
	c.Key[0] = 'k'
	if rs, _ := s.Locks.Do(3, &c, now, nil, nil); len(rs) != 1 || rs[0].Result != LockOK {
		t.Fatalf("lock: %+v", rs)
	}
	c.LockID[0] = 1
	if rs, _ := s.Locks.Do(4, &c, now, nil, nil); len(rs) != 0 {
		t.Fatalf("queued lock: %+v", rs)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.NextDeadline() // every item in the heap proper, where its order is checked
	if n := len(s.q.h); n != 6 {
		t.Fatalf("%d items in the heap, want 6: pool wait, lock wait, hold, aging, two collections", n)
	}
	return s
}

// Check finds what is wrong with the shared deadline heap.
func TestStoreCheckFinds(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		spoil      func(s *Store)
	}{
		{"heap order", "before its parent", func(s *Store) {
			last := len(s.q.h) - 1
			s.q.h[last].at = s.q.h[0].at - 1
			s.q.h[last].d.at = s.q.h[last].at
		}},
		{"stale handle", "handle", func(s *Store) { s.q.h[1].d.i = 1 }},
		{"no semaphore collection", "0 semaphore collections", func(s *Store) { s.q.remove(&s.semGC) }},
		{"counter collection too early", "before the interval after the last", func(s *Store) {
			s.q.move(&s.Counters.gc, s.Counters.gcNext()-1)
		}},
		{"another store's collection", "of another store", func(s *Store) { s.q.add(&semaphoreGC{}, 0) }},
		{"foreign item", "*store.item", func(s *Store) { s.q.add(&item{}, 0) }},
		{"pool wait lost", "in the deadline heap false", func(s *Store) {
			for i := range s.q.h {
				if e, ok := s.q.h[i].d.it.(*poolEntry); ok {
					s.q.remove(e)
					return
				}
			}
		}},
		{"waiter aging", "holders in the aging heap", func(s *Store) {
			for i := range s.q.h {
				if w, ok := s.q.h[i].d.it.(*lockItem); ok && w.waiting {
					s.q.add((*agedItem)(w), 0)
					return
				}
			}
		}},
		{"aging at the wrong time", "ages at", func(s *Store) {
			for i := range s.q.h {
				if a, ok := s.q.h[i].d.it.(*agedItem); ok {
					s.q.move(a, a.pdl.at+1)
					return
				}
			}
		}},
	} {
		s := checkStore(t)
		tc.spoil(s)
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
