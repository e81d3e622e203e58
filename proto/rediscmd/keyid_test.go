package rediscmd

import (
	"encoding/hex"
	"testing"

	"github.com/tallyd/tallyd/proto/slock"
)

// TestKeyID: names that TextID merges get distinct LockKeys; short names keep TextID's
// padding (binary clients meet them); hashed ones never look like a short name's, depend
// on the secret, and cost no allocation.
func TestKeyID(t *testing.T) {
	k := NewKeys([32]byte{1})
	h := "550e8400e29b41d4a716446655440000"
	raw, _ := hex.DecodeString(h)
	names := []string{h, "550E8400E29B41D4A716446655440000", string(raw), "abc", "\x00abc", "", "\x00",
		"0123456789abcdef", "\x000123456789abcdef", "a", "\x00a", "a\x00"}
	seen := map[[16]byte]string{}
	for _, n := range names {
		id := k.KeyID([]byte(n))
		if o, ok := seen[id]; ok {
			t.Fatalf("%q and %q share LockKey %x", o, n, id)
		}
		seen[id] = n
		short := len(n) < 16 && (n == "" || n[0] != 0)
		switch {
		case short && id != slock.TextID([]byte(n)):
			t.Fatalf("short name %q: %x, TextID %x", n, id, slock.TextID([]byte(n)))
		case !short && id[0] < 0x80:
			t.Fatalf("hashed name %q: %x has byte 0 < 0x80", n, id)
		case !short && NewKeys([32]byte{2}).KeyID([]byte(n)) == id:
			t.Fatalf("hashed name %q: same LockKey under another secret", n)
		case !short && (*Keys)(nil).KeyID([]byte(n)) != NewKeys([32]byte{}).KeyID([]byte(n)):
			t.Fatalf("nil Keys is not the zero secret")
		}
	}
	long := []byte("a key name longer than sixteen bytes")
	if n := testing.AllocsPerRun(100, func() { k.KeyID(long) }); n != 0 {
		t.Fatalf("KeyID allocates %v times", n)
	}
}
