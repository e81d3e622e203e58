package store_test

import (
	"fmt"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// BenchmarkPoolAcquireRelease: ACQ4ME then RELEASE by one connection, on a
// key nobody else holds (created and deleted every time), on a key another
// connection holds, and cycling through 4,000 keys.
func BenchmarkPoolAcquireRelease(b *testing.B) {
	b.Run("new key", func(b *testing.B) {
		p := store.NewPools(store.PoolsConfig{})
		c := p.NewClient(1)
		key := []byte("some-pool-key")
		buf := make([]store.Wake, 0, 8)
		b.ReportAllocs()
		for b.Loop() {
			p.Acquire(c, store.AcqMe, key, 1, 10, 5, t0)
			_, buf = p.Release(c, t0, buf[:0])
		}
	})
	b.Run("held key", func(b *testing.B) {
		p := store.NewPools(store.PoolsConfig{})
		c, other := p.NewClient(1), p.NewClient(2)
		key := []byte("some-pool-key")
		p.Acquire(other, store.AcqMe, key, 2, 10, 5, t0)
		buf := make([]store.Wake, 0, 8)
		b.ReportAllocs()
		for b.Loop() {
			p.Acquire(c, store.AcqMe, key, 2, 10, 5, t0)
			_, buf = p.Release(c, t0, buf[:0])
		}
	})
	b.Run("4000 keys", func(b *testing.B) {
		const n = 4000
		p := store.NewPools(store.PoolsConfig{})
		c := p.NewClient(1)
		k := keys(n)
		buf := make([]store.Wake, 0, 8)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			p.Acquire(c, store.AcqMe, k[i%n], 1, 10, 5, t0)
			_, buf = p.Release(c, t0, buf[:0])
			i++
		}
	})
}

// BenchmarkPoolAcquireReleaseContended: n connections share one key with one
// worker. The holder releases, which hands the slot to the oldest ACQ4ME
// waiter (and, in the "any" case, DONEs the ACQ4ANY waiter); the releaser
// then queues again. One op is one RELEASE and one acquire that waits.
func BenchmarkPoolAcquireReleaseContended(b *testing.B) {
	for _, n := range []int{3, 16, 64} {
		b.Run(fmt.Sprintf("me/conns=%d", n), func(b *testing.B) {
			p := store.NewPools(store.PoolsConfig{})
			key := []byte("hot-key")
			cs := make([]*store.PoolClient, n)
			for i := range cs {
				cs[i] = p.NewClient(store.Owner(i))
				p.Acquire(cs[i], store.AcqMe, key, 1, 1000, 10, t0)
			}
			buf := make([]store.Wake, 0, 8)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				c := cs[i%n]
				var o store.Outcome
				o, buf = p.Release(c, t0, buf[:0])
				if o != store.Released || len(buf) != 1 || p.Acquire(c, store.AcqMe, key, 1, 1000, 10, t0) != store.Waiting {
					b.Fatalf("Release = %v, woke %v", o, buf)
				}
				i++
			}
		})
	}
	b.Run("any/conns=3", func(b *testing.B) {
		p := store.NewPools(store.PoolsConfig{})
		key := []byte("hot-key")
		cs := []*store.PoolClient{p.NewClient(1), p.NewClient(2), p.NewClient(3)}
		p.Acquire(cs[0], store.AcqMe, key, 1, 10, 0, t0)
		buf := make([]store.Wake, 0, 8)
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			h, me, any := cs[i%3], cs[(i+1)%3], cs[(i+2)%3]
			p.Acquire(me, store.AcqMe, key, 1, 10, 10, t0)
			p.Acquire(any, store.AcqAny, key, 1, 10, 10, t0)
			_, buf = p.Release(h, t0, buf[:0])
			if len(buf) != 2 {
				b.Fatalf("Release woke %v", buf)
			}
			i++
		}
	})
}

// BenchmarkPoolExpire: 10,000 connections wait on one held key with
// deadlines a millisecond apart; each op advances the clock a millisecond,
// times one out, and has it wait again.
func BenchmarkPoolExpire(b *testing.B) {
	const n = 10000
	p := store.NewPools(store.PoolsConfig{})
	key := []byte("held-key")
	p.Acquire(p.NewClient(n), store.AcqMe, key, 1, n+1, 0, t0)
	cs := make([]*store.PoolClient, n)
	now := t0
	for i := range cs {
		cs[i] = p.NewClient(store.Owner(i))
		p.Acquire(cs[i], store.AcqMe, key, 1, n+1, 10, now)
		now += msec
	}
	buf := make([]store.Wake, 0, 8)
	now = t0 + 10*sec // the first deadline
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		buf = p.Expire(now, buf[:0])
		if len(buf) != 1 {
			b.Fatalf("Expire woke %d, want 1", len(buf))
		}
		p.Acquire(cs[i%n], store.AcqMe, key, 1, n+1, 10, now)
		now += msec
		i++
	}
}
