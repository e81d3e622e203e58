package cluster

import (
	"bytes"
	"testing"
)

// TestSecretSnapshot: a snapshot's data gives back the secret it began with (if known) and
// its records; data without records says so; an entry gives back its secret.
func TestSecretSnapshot(t *testing.T) {
	key := [32]byte{1, 2, 3, 31: 9}
	for _, sec := range []Secret{{}, {Known: true, Key: key}} {
		d := append(sec.SnapshotHead(), "recs"...)
		k, recs, ok := SplitSnapshot(d)
		if !ok || string(recs) != "recs" || (k != nil) != sec.Known || k != nil && *k != key {
			t.Fatalf("secret known %v: split %x into %v, %q, %v", sec.Known, d, k, recs, ok)
		}
	}
	if k, _, ok := SplitSnapshot(SecretEntry(key)); ok || k == nil || *k != key {
		t.Fatalf("a snapshot of only the secret: %v, %v", k, ok)
	}
	if _, _, ok := SplitSnapshot(nil); ok {
		t.Fatal("empty data has records")
	}
	if k, ok := ParseSecret(SecretEntry(key)); !ok || k != key {
		t.Fatalf("ParseSecret: %x, %v", k, ok)
	}
	for _, bad := range [][]byte{nil, {EntSecret}, append(SecretEntry(key), 0), bytes.Repeat([]byte{EntRecords}, 33)} {
		if _, ok := ParseSecret(bad); ok {
			t.Errorf("ParseSecret(%x) took it", bad)
		}
	}
}
