package store

import (
	"fmt"
	"testing"
	"unsafe"
)

func TestLedgerIdleIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(Ledger{}); n > 64 {
		t.Fatalf("a Ledger is %d bytes, want at most 64", n)
	}
	c := NewCounters(CountersConfig{})
	l := c.NewLedger(7)
	if l.ents != nil || l.idx != nil {
		t.Fatalf("new ledger preallocates: cap %d, index %v", cap(l.ents), l.idx != nil)
	}
}

func TestObjectOverheadCoversObject(t *testing.T) {
	// The object, plus a string header and a pointer in the map.
	if min := int64(unsafe.Sizeof(object{})) + 24; objectCost < min {
		t.Fatalf("objectCost %d < %d", objectCost, min)
	}
}

// TestLedgerIndex grows a ledger past linearMax and back, checking that the
// index appears, stays consistent, and that capacity and index are given back
// when most entries go.
func TestLedgerIndex(t *testing.T) {
	c := NewCounters(CountersConfig{})
	l := c.NewLedger(1)
	name := func(i int) []byte { return []byte(fmt.Sprint("k", i)) }
	const n = 1000
	for i := range n {
		if r := c.Acquire(l, name(i), 1, 10, 0); r != OK {
			t.Fatalf("Acquire %d: %v", i, r)
		}
		if (l.idx != nil) != (l.Len() > linearMax) {
			t.Fatalf("%d entries, index %v", l.Len(), l.idx != nil)
		}
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	big := cap(l.ents)
	// Release in an order that moves entries around.
	for i := 0; i < n; i += 2 {
		if r := c.Release(l, name(i), 1, 0); r != OK {
			t.Fatalf("Release %d: %v", i, r)
		}
	}
	for i := n - 1; i > 20; i -= 2 {
		if r := c.Release(l, name(i), 1, 0); r != OK {
			t.Fatalf("Release %d: %v", i, r)
		}
		if err := c.Check(); err != nil {
			t.Fatalf("after releasing %d: %v", i, err)
		}
	}
	if l.Len() != 10 || cap(l.ents) >= big/4 || l.idx == nil || len(l.idx) != 10 {
		t.Fatalf("after shrinking to %d entries: cap %d (was %d), index %d", l.Len(), cap(l.ents), big, len(l.idx))
	}
	for i := 1; i <= 19; i += 2 {
		if got := l.Held(name(i)); got != 1 {
			t.Fatalf("holds %d of k%d, want 1", got, i)
		}
	}
	for i := 1; i <= 19; i += 2 {
		c.Release(l, name(i), 1, 0)
	}
	if l.Len() != 0 || l.ents != nil || l.idx != nil {
		t.Fatalf("empty ledger keeps cap %d, index %v", cap(l.ents), l.idx != nil)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestLedgerDropGivesBack(t *testing.T) {
	c := NewCounters(CountersConfig{})
	small, large := c.NewLedger(1), c.NewLedger(2)
	for i := range 100 {
		c.Acquire(large, []byte{byte(i)}, 1, 100, 0)
		if i < linearMax {
			c.Acquire(small, []byte{byte(i)}, 1, 100, 0)
		}
	}
	c.Drop(small, 0)
	c.Drop(large, 0)
	if large.ents != nil || large.idx != nil {
		t.Fatalf("dropped large ledger keeps cap %d, index %v", cap(large.ents), large.idx != nil)
	}
	if small.Len() != 0 || cap(small.ents) == 0 {
		t.Fatalf("dropped small ledger: len %d cap %d; want 0 and its slice kept for reuse", small.Len(), cap(small.ents))
	}
	for _, e := range small.ents[:cap(small.ents)] {
		if e.o != nil {
			t.Fatalf("dropped ledger still points at %q", e.o.name)
		}
	}
	if len(c.t.ledgers) != 0 {
		t.Fatalf("%d ledgers still tracked after Drop", len(c.t.ledgers))
	}
}
