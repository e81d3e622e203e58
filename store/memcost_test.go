package store

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
)

// TestAllocSize checks the size classes against what append allocates: it rounds a new
// slice's capacity up to the allocator's size class (or whole pages beyond 32 KiB).
func TestAllocSize(t *testing.T) {
	for n := 1; n <= 70000; n++ {
		if got, want := allocSize(n), int64(cap(append([]byte(nil), make([]byte, n)...))); got != want {
			t.Fatalf("allocSize(%d) = %d, append allocates %d", n, got, want)
		}
	}
}

// heapNow is the bytes of live heap objects, after two collections.
func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMemoryCosts measures what each kind of stored state really takes on the heap
// (runtime.MemStats, n of them at once) and checks that Store.Bytes counts it within
// 10%, and that it counts nothing once the state is gone.
func TestMemoryCosts(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the heap")
	}
	const n = 20000
	name := func(i, size int) []byte {
		b := make([]byte, size)
		copy(b, fmt.Sprintf("%d-", i))
		return b
	}
	key := func(i int) (k [16]byte) { binary.LittleEndian.PutUint32(k[:], uint32(i)+1); return k }
	set := func(size int) []byte {
		r := binary.LittleEndian.AppendUint32(nil, uint32(2+size))
		return append(append(r, dataSet, 0), make([]byte, size)...)
	}
	execute := func(stage uint8, size int) []byte {
		r := binary.LittleEndian.AppendUint32(nil, uint32(2+size))
		return append(append(r, stage<<6|dataExecute, 0), make([]byte, size)...)
	}

	type kind struct {
		what string
		fill func(s *Store) // makes n of the state
		undo func(s *Store) // takes it all away again
	}
	var ls []*Ledger
	var pcs []*PoolClient
	var rs []LockReply
	var ex []Exec
	do := func(s *Store, o Owner, c LockCommand) {
		rs, ex = s.Locks.Do(o, &c, 1e9, rs[:0], ex[:0])
	}
	counters := func(size int, release bool) kind {
		return kind{fmt.Sprintf("counters, %d-byte names, released %v", size, release), func(s *Store) {
			l := s.Counters.NewLedger(1)
			ls = append(ls, l)
			for i := range n {
				s.Counters.Acquire(l, name(i, size), 1, 10, 1e9)
			}
			if release {
				s.Counters.Drop(l, 2e9)
			}
		}, func(s *Store) {
			for _, l := range ls {
				s.Counters.Drop(l, 3e9)
			}
			s.Counters.GC(86400e9 * 2)
		}}
	}
	holders := func(what string, data []byte, mk func(i int) LockCommand) kind {
		return kind{what, func(s *Store) {
			for i := range n {
				c := mk(i)
				c.Data = data
				do(s, 1, c)
			}
		}, func(s *Store) {
			s.Locks.Flush(0, 2e9, nil, nil)
			for s.Locks.FreeFlushed(1 << 20) { // a flush frees its keys a slice at a time
			}
		}}
	}
	never := func(i int) LockCommand {
		return LockCommand{Kind: 1, LockID: key(i), Key: key(i), Wait: Wait{N: 5}, Hold: Hold{N: 0xFFFF, Opts: HoldNever}}
	}
	waiters := func(size int) kind {
		var data []byte
		if size > 0 {
			data = set(size)
		}
		return kind{fmt.Sprintf("waiters with %d-byte data records", len(data)), func(s *Store) {
			do(s, 1, never(0))
			for i := range n {
				do(s, 2, LockCommand{Kind: 1, LockID: key(i + 1), Key: key(0), Wait: Wait{N: 600}, Hold: Hold{N: 10}, Data: data})
			}
		}, func(s *Store) {
			s.Locks.Disconnected(2, 1e9)
			_, _, _, _ = s.Locks.EvictOrphans(1<<62, 1e9, nil, nil)
			s.Locks.Flush(0, 2e9, nil, nil)
			for s.Locks.FreeFlushed(1 << 20) { // a flush frees its keys a slice at a time
			}
		}}
	}
	kinds := []kind{
		counters(8, false), counters(64, false), counters(1000, false), counters(8, true), counters(64, true),
		{"semaphores, 16-byte names", func(s *Store) {
			l := s.Semaphores.NewLedger(1)
			ls = append(ls, l)
			for i := range n {
				s.Semaphores.Acquire(l, name(i, 16), 1, 10, 1e9)
			}
		}, func(s *Store) {
			for _, l := range ls {
				s.Semaphores.Drop(l, 3e9)
			}
			s.Semaphores.GC()
		}},
		holders("holders, expiring", nil, func(i int) LockCommand {
			return LockCommand{Kind: 1, LockID: key(i), Key: key(i), Wait: Wait{N: 5}, Hold: Hold{N: 100}}
		}),
		holders("holders, never expiring", nil, never),
		holders("holders with 10-byte values", set(10), never),
		holders("holders with 200-byte values", set(200), never),
		holders("holders with 5000-byte values", set(5000), never),
		holders("holders with a 300-byte EXECUTE attached", execute(stageExpired, 300), never),
		holders("holders, 16 on each key", nil, func(i int) LockCommand {
			return LockCommand{Kind: 1, LockID: key(i), Key: key(i / 16), Wait: Wait{N: 5}, Hold: Hold{N: 0xFFFF, Opts: HoldNever}, Count: 0xFFFF}
		}),
		waiters(0), waiters(100), waiters(3000),
		{"PoolCounter entries, 64-byte keys", func(s *Store) {
			for i := range n / 4 {
				c := s.Pools.NewClient(Owner(i + 1))
				pcs = append(pcs, c)
				for j := range 4 {
					s.Pools.Acquire(c, AcqMe, name(4*i+j, 64), 1, 10, 0, 1e9)
				}
			}
		}, func(s *Store) {
			for _, c := range pcs {
				s.Pools.Drop(c, 2e9, nil)
			}
			s.Pools.Trim()
		}},
	}
	for _, k := range kinds {
		s := New(Config{})
		ls, pcs = nil, nil
		h0, b0 := heapNow(), s.Bytes()
		k.fill(s)
		h1, b1 := heapNow(), s.Bytes()
		real, counted := float64(h1-h0)/n, float64(b1-b0)/n
		t.Logf("%-50s %6.0f bytes each, counted %6.0f (%+.1f%%)", k.what, real, counted, 100*(counted/real-1))
		if counted < 0.9*real || counted > 1.1*real {
			t.Errorf("%s: %.0f bytes each, counted %.0f", k.what, real, counted)
		}
		k.undo(s)
		s.Locks.Trim()
		s.Pools.Trim()
		if err := s.Check(); err != nil {
			t.Fatalf("%s: %v", k.what, err)
		}
		if left := s.Bytes() - int64(cap(s.q.h))*heapSlot; left > 64<<10 {
			t.Errorf("%s: %d bytes still counted once it is gone", k.what, left)
		}
		runtime.KeepAlive(ls)
		runtime.KeepAlive(pcs)
	}
}
