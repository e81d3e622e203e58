package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// BenchmarkAcquireRelease: one connection acquires and releases one counter;
// its ledger entry appears and disappears every time.
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("counters", func(b *testing.B) {
		c := store.NewCounters(store.CountersConfig{})
		l := c.NewLedger(1)
		name := []byte("some-counter")
		now := at(0)
		b.ReportAllocs()
		for b.Loop() {
			c.Acquire(l, name, 1, 10, now)
			c.Release(l, name, 1, now)
		}
	})
	b.Run("semaphores", func(b *testing.B) {
		s := store.NewSemaphores(store.SemaphoresConfig{})
		l := s.NewLedger(1)
		name := []byte("some-semaphore")
		b.ReportAllocs()
		for b.Loop() {
			s.Acquire(l, name, 1, 10, 0)
			s.Release(l, name, 1, 0)
		}
	})
}

// BenchmarkAcquireReleaseManyKeys: acquire/release pairs cycling through
// 10,000 counters, by a connection that holds nothing else ("ledger=0", the
// entry comes and goes) or that holds all 10,000 of them ("ledger=10000",
// found through the ledger's index).
func BenchmarkAcquireReleaseManyKeys(b *testing.B) {
	const n = 10000
	k := keys(n)
	for _, hold := range []bool{false, true} {
		name := "ledger=0"
		if hold {
			name = "ledger=10000"
		}
		b.Run(name, func(b *testing.B) {
			c := store.NewCounters(store.CountersConfig{SizeHint: n})
			other, l := c.NewLedger(1), c.NewLedger(2)
			for _, key := range k {
				c.Acquire(other, key, 1, 10, at(0))
				if hold {
					c.Acquire(l, key, 1, 10, at(0))
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				key := k[i%n]
				c.Acquire(l, key, 1, 10, at(0))
				c.Release(l, key, 1, at(0))
				i++
			}
		})
	}
}

func BenchmarkGet(b *testing.B) {
	const n = 10000
	k := keys(n)
	c := store.NewCounters(store.CountersConfig{SizeHint: n})
	l := c.NewLedger(1)
	for _, key := range k {
		c.Acquire(l, key, 1, 10, at(0))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := c.Get(k[i%n]); !ok {
			b.Fatal("not found")
		}
		i++
	}
}

// BenchmarkDrop: a connection holding some counters goes away. With 8 the
// acquires are part of each op; with 1,000 only Drop is timed.
func BenchmarkDrop(b *testing.B) {
	b.Run("entries=8", func(b *testing.B) {
		k := keys(8)
		c := store.NewCounters(store.CountersConfig{})
		l := c.NewLedger(1)
		b.ReportAllocs()
		for b.Loop() {
			for _, key := range k {
				c.Acquire(l, key, 1, 10, at(0))
			}
			c.Drop(l, at(0))
		}
	})
	b.Run("entries=1000", func(b *testing.B) {
		k := keys(1000)
		c := store.NewCounters(store.CountersConfig{})
		l := c.NewLedger(1)
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			for _, key := range k {
				c.Acquire(l, key, 1, 10, at(0))
			}
			b.StartTimer()
			c.Drop(l, at(0))
		}
	})
}
