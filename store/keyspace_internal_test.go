package store

import "testing"

// TestKeyspaceAllocTable: ksAlloc, by table, is allocSize.
func TestKeyspaceAllocTable(t *testing.T) {
	for n := 0; n < 5000; n++ {
		if ksAlloc(n) != allocSize(n) {
			t.Fatalf("%d: %d %d", n, ksAlloc(n), allocSize(n))
		}
	}
}
