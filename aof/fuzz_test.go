package aof

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// FuzzReplayCut: a log of records whose values are the fuzzer's bytes (records inside
// values included), cut anywhere, always replays: the whole records before the cut are
// applied, the rest is cut off, and the file left is exactly those records.
func FuzzReplayCut(f *testing.F) {
	inner := state(0, "in", "x", 1)
	rec := AppendState(nil, &inner)
	f.Add([]byte("v"), rec, uint16(40))
	f.Add(rec, append(bytes.Clone(rec), rec...), uint16(100))
	f.Add([]byte{}, []byte{0, 0, 0, 0}, uint16(7))
	f.Fuzz(func(t *testing.T, v1, v2 []byte, cut uint16) {
		b := []byte(Header)
		var ends []int
		for i, v := range [][]byte{v1, v2, v1, v2} {
			s := state(uint8(i), "k", "", i%2)
			s.Value = v
			b = AppendState(b, &s)
			ends = append(ends, len(b))
		}
		c := len(Header) + int(cut)%(len(b)-len(Header)+1)
		whole, keep := 0, len(Header)
		for _, e := range ends {
			if e <= c {
				whole, keep = whole+1, e
			}
		}
		path := filepath.Join(t.TempDir(), "f.aof")
		if err := os.WriteFile(path, b[:c], 0o600); err != nil {
			t.Fatal(err)
		}
		n := 0
		r, err := Replay(path, func(*store.KeyState) { n++ })
		if err != nil {
			t.Fatalf("cut at %d of %d: %v", c, len(b), err)
		}
		if n != whole || r.Size != int64(keep) {
			t.Fatalf("cut at %d: %d records, %d bytes kept; want %d, %d", c, n, r.Size, whole, keep)
		}
		left, _ := os.ReadFile(path)
		if !bytes.Equal(left, b[:keep]) {
			t.Fatalf("cut at %d: the file left is not the whole records before the cut", c)
		}
	})
}
