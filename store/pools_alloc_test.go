package store_test

import (
	"slices"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// want fails unless got is want.
func want(t *testing.T, what string, got, want store.Outcome) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// wakesAre fails unless ws are the given outcomes.
func wakesAre(t *testing.T, what string, ws []store.Wake, outs ...store.Outcome) {
	t.Helper()
	ok := len(ws) == len(outs)
	for i := 0; ok && i < len(ws); i++ {
		ok = ws[i].Outcome == outs[i]
	}
	if !ok {
		// A copy, so that outs does not escape and allocate on every call.
		t.Fatalf("%s: wakes %v, want %v", what, ws, slices.Clone(outs))
	}
}

func TestPoolsNoAllocs(t *testing.T) {
	p := store.NewPools(store.PoolsConfig{})
	a, b, c := p.NewClient(1), p.NewClient(2), p.NewClient(3)
	key, held := []byte("steady"), []byte("held")
	buf := make([]store.Wake, 0, 8)
	var out store.Outcome

	// The key is created and deleted by every pair.
	noAllocs(t, "Acquire+Release of a new key", 10000, func(i int) {
		want(t, "Acquire", p.Acquire(a, store.Mode(i&1), key, 1, 1, 0, t0), store.Locked)
		out, buf = p.Release(a, t0, buf[:0])
		want(t, "Release", out, store.Released)
	})
	want(t, "Acquire", p.Acquire(b, store.AcqMe, held, 2, 10, 0, t0), store.Locked)
	noAllocs(t, "Acquire+Release of a held key", 10000, func(int) {
		want(t, "Acquire", p.Acquire(a, store.AcqMe, held, 2, 10, 0, t0), store.Locked)
		out, buf = p.Release(a, t0, buf[:0])
		want(t, "Release", out, store.Released)
	})
	noAllocs(t, "refusals", 10000, func(int) {
		want(t, "Acquire", p.Acquire(a, store.AcqMe, held, 1, 10, 0, t0), store.Timeout)
		want(t, "Acquire", p.Acquire(a, store.AcqMe, held, 1, 1, 0, t0), store.QueueFull)
		want(t, "Acquire", p.Acquire(a, store.AcqMe, nil, 1, 1, 0, t0), store.BadSyntax)
		out, buf = p.Release(a, t0, buf[:0])
		want(t, "Release", out, store.NotLocked)
	})
	// a waits behind b on held, and cancels with RELEASE.
	noAllocs(t, "wait+Release while waiting", 10000, func(i int) {
		want(t, "Acquire", p.Acquire(a, store.AcqAny, held, 1, 10, 5, at(int64(i))), store.Waiting)
		want(t, "Acquire while waiting", p.Acquire(a, store.AcqMe, key, 1, 10, 5, at(int64(i))), store.WaitForResponse)
		out, buf = p.Release(a, at(int64(i)), buf[:0])
		want(t, "Release", out, store.Released)
		wakesAre(t, "Release while waiting", buf)
	})
	// a waits behind b on held and times out.
	now := at(1000000)
	noAllocs(t, "wait+Expire", 10000, func(int) {
		want(t, "Acquire", p.Acquire(a, store.AcqMe, held, 1, 10, 1, now), store.Waiting)
		now += sec
		buf = p.Expire(now, buf[:0])
		wakesAre(t, "Expire", buf, store.Timeout)
	})
	out, buf = p.Release(b, now, buf[:0])
	want(t, "Release", out, store.Released)

	// Three clients take turns: the holder releases, giving DONE to the
	// ACQ4ANY waiter and the slot to the ACQ4ME waiter.
	cs := []*store.PoolClient{a, b, c}
	want(t, "Acquire", p.Acquire(a, store.AcqMe, key, 1, 10, 0, now), store.Locked)
	noAllocs(t, "contended Release", 10000, func(i int) {
		h, me, any := cs[i%3], cs[(i+1)%3], cs[(i+2)%3]
		want(t, "Acquire", p.Acquire(me, store.AcqMe, key, 1, 10, 10, now), store.Waiting)
		want(t, "Acquire", p.Acquire(any, store.AcqAny, key, 1, 10, 10, now), store.Waiting)
		out, buf = p.Release(h, now, buf[:0])
		want(t, "Release", out, store.Released)
		wakesAre(t, "Release", buf, store.Done, store.Locked)
	})
	// The holder goes away and comes back, as a waiter.
	for _, x := range cs {
		buf = p.Drop(x, now, buf[:0])
	}
	want(t, "Acquire", p.Acquire(a, store.AcqMe, key, 1, 10, 0, now), store.Locked)
	noAllocs(t, "Drop of a holder", 10000, func(i int) {
		h, next := cs[i%2], cs[(i+1)%2]
		want(t, "Acquire", p.Acquire(next, store.AcqAny, key, 1, 10, 10, now), store.Waiting)
		buf = p.Drop(h, now, buf[:0])
		wakesAre(t, "Drop", buf, store.Locked)
	})
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestPoolsNoAllocsRecycledKeys: lock/release pairs over 4,000 keys, each
// deleted and created again every round, by connections holding up to four.
func TestPoolsNoAllocsRecycledKeys(t *testing.T) {
	const n = 4000
	p := store.NewPools(store.PoolsConfig{})
	k := keys(n)
	cs := []*store.PoolClient{p.NewClient(1), p.NewClient(2)}
	buf := make([]store.Wake, 0, 8)
	var out store.Outcome
	for _, key := range k { // every key exists once before
		want(t, "Acquire", p.Acquire(cs[0], store.AcqMe, key, 1, 1, 0, t0), store.Locked)
		out, buf = p.Release(cs[0], t0, buf[:0])
	}
	noAllocs(t, "Acquire+Release over 4,000 keys", 20000, func(i int) {
		c := cs[i%2]
		for j := range 4 {
			want(t, "Acquire", p.Acquire(c, store.AcqMe, k[(4*i+j)%n], 1, 1, 0, t0), store.Locked)
		}
		for range 4 {
			out, buf = p.Release(c, t0, buf[:0])
			want(t, "Release", out, store.Released)
		}
	})
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
