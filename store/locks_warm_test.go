package store

import (
	"math/rand/v2"
	"testing"
)

// TestWarmChangesNothing: warming keys, present or not, of databases made or not, leaves
// the state as it was, and allocates nothing once its buffers have grown.
func TestWarmChangesNothing(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 25))
	l := NewLocks(LocksConfig{Persist: true, PersistAfter: 50e6})
	now := int64(1e18)
	var ks KeyState
	for range 300 {
		randomState(rnd, &ks, now, 50e6)
		l.Restore(&ks, now)
	}
	names := []KeyName{{DB: 255}, {DB: 7}}
	for db := range 2 {
		for k := range 8 {
			n := KeyName{DB: uint8(db)}
			n.Key[15] = byte(k)
			names = append(names, n)
		}
	}
	before := dumpLocks(l)
	l.Warm(names)
	if after := dumpLocks(l); after != before {
		t.Fatalf("Warm changed the state:\n%s\nto\n%s", before, after)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() { l.Warm(names) }); a != 0 {
		t.Fatalf("Warm allocates %v times", a)
	}
}
