package store

import (
	"testing"
	"unsafe"
)

// TestSizes: a LockCommand stays within 120 bytes, which keeps a lockItem at
// 320, its size class.
func TestSizes(t *testing.T) {
	if n := unsafe.Sizeof(LockCommand{}); n > 120 {
		t.Errorf("LockCommand is %d bytes, want at most 120", n)
	}
	if n := unsafe.Sizeof(lockItem{}); n != 320 {
		t.Errorf("lockItem is %d bytes, want 320", n)
	}
}
