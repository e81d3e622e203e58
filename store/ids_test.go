package store

import (
	"math/bits"
	"testing"
)

// TestIDs: ids of one generator never repeat, consecutive ones differ in about half
// their bits, two keys give unrelated ids, and an id costs no allocation.
func TestIDs(t *testing.T) {
	g, h := NewIDs([16]byte{1}), NewIDs([16]byte{2})
	seen := map[[16]byte]bool{}
	prev := g.Next()
	for range 100000 {
		id := g.Next()
		if seen[id] {
			t.Fatalf("id %x repeated", id)
		}
		seen[id] = true
		d := 0
		for i := range id {
			d += bits.OnesCount8(id[i] ^ prev[i])
		}
		if d < 24 || d > 104 {
			t.Fatalf("consecutive ids %x, %x differ in %d bits", prev, id, d)
		}
		prev = id
	}
	if seen[h.Next()] {
		t.Fatal("another key's first id is one of this key's")
	}
	if n := testing.AllocsPerRun(100, func() { g.Next() }); n != 0 {
		t.Fatalf("Next allocates %v times", n)
	}
}
