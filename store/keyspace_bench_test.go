package store_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// Benchmarks of the keyspace beside the same operations on today's path, store.Locks
// (a key/value Lock per SET and INCR, Value for GET), over 100k random keys named as
// redis-benchmark names them (key:%012d, 16 bytes) with 3-byte values.

const benchKeys = 100_000

// ksKeyNames returns n names, views into one array (as a server's are views into its
// input buffer: a benchmark reading each through its own slice header would time that
// header's cache miss too).
func ksKeyNames(n int) [][]byte {
	all := make([]byte, 0, 16*n)
	k := make([][]byte, n)
	for i := range k {
		all = fmt.Appendf(all, "key:%012d", i)
	}
	for i := range k {
		k[i] = all[16*i : 16*i+16]
	}
	return k
}

// ksKey returns name j of keys made by ksKeyNames, without reading a slice header.
func ksKey(all []byte, j int32) []byte { return all[16*j : 16*j+16 : 16*j+16] }

func benchOrder() []int32 {
	r := rand.New(rand.NewPCG(7, 7))
	o := make([]int32, 1<<20)
	for i := range o {
		o[i] = int32(r.IntN(benchKeys))
	}
	return o
}

func BenchmarkKeyspace(b *testing.B) {
	keys, order := ksKeyNames(benchKeys), benchOrder()
	all := keys[0][:16*benchKeys]
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	o := &store.SetOpts{}
	for _, k := range keys {
		ks.Set(0, k, []byte("abc"), o, 0, nil)
	}
	val := []byte("xyz")
	buf := make([]byte, 0, 64)
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf, _ = ks.Get(0, ksKey(all, order[i&(1<<20-1)]), 0, buf[:0])
			i++
		}
	})
	b.Run("Set", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ks.Set(0, ksKey(all, order[i&(1<<20-1)]), val, o, 0, nil)
			i++
		}
	})
	b.Run("SetLogged", func(b *testing.B) {
		ks := store.NewKeyspace(store.KeyspaceConfig{Log: true, Events: true})
		for _, k := range keys {
			ks.Set(0, k, []byte("abc"), o, 0, nil)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ks.Set(0, ksKey(all, order[i&(1<<20-1)]), val, o, 0, nil)
			if i++; i&255 == 0 {
				ks.ClearLog()
				ks.ClearEvents()
			}
		}
	})
	b.Run("IncrBy", func(b *testing.B) {
		ks := store.NewKeyspace(store.KeyspaceConfig{})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ks.IncrBy(0, ksKey(all, order[i&(1<<20-1)]), 1, 0)
			i++
		}
	})
	b.Run("SetNXPX+DelIfEq", func(b *testing.B) {
		ks := store.NewKeyspace(store.KeyspaceConfig{})
		nx := &store.SetOpts{Cond: store.SetNX, At: 30_000}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			k := ksKey(all, order[i&(1<<20-1)])
			ks.Set(0, k, val, nx, 0, nil)
			ks.DelIf(0, k, store.SetIfEq, val, 0)
			i++
		}
	})
}

func BenchmarkLocksKV(b *testing.B) {
	keys, order := ksKeyNames(benchKeys), benchOrder()
	l := store.NewLocks(store.LocksConfig{})
	sets := make([]store.LockCommand, benchKeys)
	incrs := make([]store.LockCommand, benchKeys)
	ids := make([][16]byte, benchKeys)
	for i, k := range keys {
		sets[i] = kvSet(1, string(k), []byte("abc"))
		incrs[i] = kvIncr(2, "c"+string(k[4:]), 1)
		ids[i] = id16(string(k))
	}
	var rs []store.LockReply
	var ex []store.Exec
	for i := range sets {
		rs, ex = l.Do(1, &sets[i], at(0), rs[:0], ex[:0])
	}
	buf := make([]byte, 0, 64)
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf = append(buf[:0], l.Value(0, ids[order[i&(1<<20-1)]])...)
			i++
		}
	})
	b.Run("Set", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rs, ex = l.Do(1, &sets[order[i&(1<<20-1)]], at(0), rs[:0], ex[:0])
			i++
		}
	})
	b.Run("IncrBy", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rs, ex = l.Do(1, &incrs[order[i&(1<<20-1)]], at(0), rs[:0], ex[:0])
			i++
		}
	})
}

// heapInuse returns the heap in use after a collection.
func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// rss returns the process's resident set (0 where /proc has none).
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}

// TestKeyspaceMemory measures bytes per key (the heap in use before and after filling,
// runtime.MemStats.HeapInuse) for 1M keys with 3-byte values, 1M with a TTL, and 1M hash
// fields (10k hashes of 100), on the keyspace and, for the first, on store.Locks; and
// checks that Bytes estimates them within 15%. It takes seconds and 1 GB: it runs only
// with TALLYD_MEMORY=1 (the numbers are in docs/architecture.md).
func TestKeyspaceMemory(t *testing.T) {
	if os.Getenv("TALLYD_MEMORY") == "" {
		t.Skip("set TALLYD_MEMORY=1 to measure")
	}
	const n = 1_000_000
	keys := ksKeyNames(n)
	measure := func(name string, per int, fill func() (any, int64)) {
		t.Helper()
		debug.FreeOSMemory()
		before, rss0 := heapInuse(), rss()
		keep, est := fill()
		used, rss1 := heapInuse()-before, rss()
		debug.FreeOSMemory()
		rss2 := rss()
		runtime.KeepAlive(keep)
		t.Logf("%-28s %6.1f bytes per %s (heap in use), Bytes() %6.1f, RSS %6.1f (%6.1f once the garbage is given back)",
			name, float64(used)/float64(n), map[int]string{1: "key", 100: "field"}[per], float64(est)/float64(n),
			float64(rss1-rss0)/float64(n), float64(rss2-rss0)/float64(n))
		if est > 0 && (float64(est) < 0.85*float64(used) || float64(est) > 1.15*float64(used)) {
			t.Errorf("%s: Bytes %d, heap in use grew %d", name, est, used)
		}
	}
	o := &store.SetOpts{}
	measure("keyspace: 1M SET 3 bytes", 1, func() (any, int64) {
		ks := store.NewKeyspace(store.KeyspaceConfig{})
		for _, k := range keys {
			ks.Set(0, k, []byte("abc"), o, 0, nil)
		}
		return ks, ks.Bytes()
	})
	measure("keyspace: 1M SET EX 3 bytes", 1, func() (any, int64) {
		ks := store.NewKeyspace(store.KeyspaceConfig{})
		ex := &store.SetOpts{At: 3_600_000}
		for _, k := range keys {
			ks.Set(0, k, []byte("abc"), ex, 0, nil)
		}
		return ks, ks.Bytes()
	})
	measure("keyspace: 10k HSET x 100", 100, func() (any, int64) {
		ks := store.NewKeyspace(store.KeyspaceConfig{})
		pair := make([][]byte, 2)
		for h := range 10_000 {
			key := fmt.Appendf(nil, "hash:%06d", h)
			for f := range 100 {
				pair[0], pair[1] = fmt.Appendf(pair[0][:0], "field:%03d", f), []byte("abc")
				ks.HSet(0, key, pair, 0)
			}
		}
		return ks, ks.Bytes()
	})
	measure("locks: 1M SET 3 bytes", 1, func() (any, int64) {
		l := store.NewLocks(store.LocksConfig{})
		var rs []store.LockReply
		var ex []store.Exec
		for _, k := range keys {
			c := kvSet(1, string(k), []byte("abc"))
			rs, ex = l.Do(1, &c, at(0), rs[:0], ex[:0])
		}
		return l, 0
	})
}
