package store_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// vkey is the 16-byte key number i.
func vkey(i int) (k [16]byte) {
	binary.BigEndian.PutUint64(k[8:], uint64(i)+1)
	return k
}

// setKey gives key i of db a value (SET as the text side runs it), or drops it (DEL).
func setKey(l *store.Locks, db uint8, i int, on bool) {
	c := wc{LockCommand: store.LockCommand{Kind: 1, DB: db, LockID: vkey(i), Key: vkey(i),
		Data: rec(0, 0, u32(uint32(i)))}, Flag: 0x02 | 0x20, Expried: 0x7FFF, ExpriedFlag: kvFlags}.cmd()
	if !on {
		c = with(c, func(c *wc) { c.Kind, c.Flag, c.Data = 2, 0, nil })
	}
	l.Do(1, &c, 0, nil, nil)
}

// TestScanValuesSeesEveryStayingKey is SCAN's guarantee: keys are added and removed at
// random between the calls of a scan, and every key that had a value from its first call
// to its last is returned at least once. Each call passes at most count keys, and a scan
// ends within as many calls as there were keys at its start and added during it, divided
// by count, rounded up.
func TestScanValuesSeesEveryStayingKey(t *testing.T) {
	for seed := range uint64(30) {
		rnd := rand.New(rand.NewPCG(seed, 11))
		l := store.NewLocks(store.LocksConfig{})
		const universe = 400
		has := make([]bool, universe)
		toggle := func(i int) {
			has[i] = !has[i]
			setKey(l, 0, i, has[i])
		}
		for i := range universe {
			if rnd.IntN(2) == 0 {
				toggle(i)
			}
		}
		// Another database's keys never show.
		setKey(l, 1, 7, true)
		for scan := range 20 {
			staying := make([]bool, universe) // has a value for the whole scan so far
			copy(staying, has)
			seen := make([]int, universe)
			budget := l.ValueCount(0)
			var cursor uint64
			calls, churn := 0, rnd.IntN(30)
			for {
				count := 1 + rnd.IntN(12)
				got := 0
				cursor = l.ScanValues(0, cursor, count, func(key [16]byte, value []byte) {
					got++
					i := int(binary.BigEndian.Uint64(key[8:])) - 1
					if i < 0 || i >= universe || !has[i] {
						t.Fatalf("seed %d scan %d: key %x has no value", seed, scan, key)
					}
					if want := rec(0, 0, u32(uint32(i))); string(value) != string(want) {
						t.Fatalf("seed %d: key %d value %x, want %x", seed, i, value, want)
					}
					seen[i]++
				})
				calls++
				if got > count {
					t.Fatalf("seed %d: a call of count %d passed %d keys", seed, count, got)
				}
				if cursor == 0 {
					break
				}
				for range rnd.IntN(churn + 1) {
					i := rnd.IntN(universe)
					if !has[i] {
						budget++
					}
					toggle(i)
					staying[i] = staying[i] && has[i]
				}
				if calls > budget {
					t.Fatalf("seed %d scan %d: %d calls and not done, for %d keys", seed, scan, calls, budget)
				}
			}
			for i := range universe {
				if staying[i] && seen[i] == 0 {
					t.Fatalf("seed %d scan %d (churn %d): key %d had a value throughout and was not returned", seed, scan, churn, i)
				}
			}
			if err := l.Check(); err != nil {
				t.Fatal(err)
			}
		}
		if l.ValueCount(1) != 1 || l.ScanValues(1, 0, 5, func([16]byte, []byte) {}) != 0 {
			t.Fatalf("db 1: ValueCount %d", l.ValueCount(1))
		}
	}
}

// TestScanValuesWithoutChanges: with nothing changing, a scan returns every key once,
// in ceil(n/count) calls, and the cursors it returns count down.
func TestScanValuesWithoutChanges(t *testing.T) {
	l := store.NewLocks(store.LocksConfig{})
	for i := range 95 {
		setKey(l, 3, i, true)
	}
	seen := map[[16]byte]int{}
	var cursor uint64
	var cursors []uint64
	for {
		cursor = l.ScanValues(3, cursor, 10, func(k [16]byte, _ []byte) { seen[k]++ })
		cursors = append(cursors, cursor)
		if cursor == 0 {
			break
		}
	}
	if len(cursors) != 10 || len(seen) != 95 {
		t.Fatalf("%d calls, %d keys; want 10 calls, 95 keys", len(cursors), len(seen))
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("key %x returned %d times", k, n)
		}
	}
	if cursors[0] != 85 || cursors[8] != 5 {
		t.Fatalf("cursors %v", cursors)
	}
	// A cursor past the end, or of an unknown database, is safe.
	if c := l.ScanValues(3, 1<<60, 100, func([16]byte, []byte) {}); c != 0 {
		t.Fatalf("cursor 2^60: next %d, want 0 (it walks from the end)", c)
	}
	if c := l.ScanValues(255, 7, 100, func([16]byte, []byte) { t.Fatal("db 255 has keys") }); c != 0 {
		t.Fatalf("db 255: next %d", c)
	}
	// FLUSHDB empties the table.
	l.Flush(3, 0, nil, nil)
	if err := l.Check(); err != nil || l.ValueCount(3) != 0 {
		t.Fatalf("after Flush: %v, ValueCount %d", err, l.ValueCount(3))
	}
}

// TestValueTableShrinks: a table that grew large and emptied gives its memory back, and
// keeps working.
func TestValueTableShrinks(t *testing.T) {
	l := store.NewLocks(store.LocksConfig{})
	for i := range 5000 {
		setKey(l, 0, i, true)
	}
	for i := range 4990 {
		setKey(l, 0, i, false)
	}
	if err := l.Check(); err != nil || l.ValueCount(0) != 10 {
		t.Fatalf("%v, ValueCount %d", err, l.ValueCount(0))
	}
	n := 0
	for c := l.ScanValues(0, 0, 3, func([16]byte, []byte) { n++ }); c != 0; c = l.ScanValues(0, c, 3, func([16]byte, []byte) { n++ }) {
	}
	if n != 10 {
		t.Fatalf("scan after shrinking saw %d keys, want 10", n)
	}
}

// BenchmarkScanValues: one SCAN call of COUNT 10 over 300,000 keys with values, walking
// the whole scan over and over (and over 3,000 for comparison); and, for KEYS, one walk over
// all of them.
func BenchmarkScanValues(b *testing.B) {
	const keys = 300_000
	l := store.NewLocks(store.LocksConfig{})
	for i := range keys {
		setKey(l, 0, i, true)
	}
	n := 0
	fn := func(k [16]byte, v []byte) { n += int(v[len(v)-1]) + int(k[15]) } // touches the key and its value record
	b.Run("count10", func(b *testing.B) {
		var c uint64
		b.ReportAllocs()
		for b.Loop() {
			c = l.ScanValues(0, c, 10, fn)
		}
	})
	small := store.NewLocks(store.LocksConfig{})
	for i := range 3000 {
		setKey(small, 0, i, true)
	}
	b.Run("count10-of-3k", func(b *testing.B) { // the cost of a call does not grow with the keys
		var c uint64
		for b.Loop() {
			c = small.ScanValues(0, c, 10, fn)
		}
	})
	b.Run("all-300k", func(b *testing.B) {
		for b.Loop() {
			l.ScanValues(0, 0, keys, fn)
		}
	})
	if n == 0 {
		b.Fatal("nothing scanned")
	}
}
