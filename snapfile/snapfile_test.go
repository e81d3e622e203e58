package snapfile

import (
	"bytes"
	"strings"
	"testing"
)

func sample() []byte {
	return Encode(Header{Kind: Cluster, Index: 42, Term: 7, Keys: 3}, []byte("some records of the store"))
}

func TestRoundTrip(t *testing.T) {
	b := sample()
	h, body, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Kind: Cluster, Index: 42, Term: 7, Keys: 3, Body: 25}
	if h != want || string(body) != "some records of the store" {
		t.Fatalf("got %+v %q, want %+v", h, body, want)
	}
	if uint64(len(b)) != h.Size() {
		t.Fatalf("size %d, header says %d", len(b), h.Size())
	}
	h, _, err = Read(bytes.NewReader(Encode(Header{Kind: Single}, nil)))
	if err != nil || h.Kind != Single || h.Body != 0 {
		t.Fatalf("empty body: %+v %v", h, err)
	}
}

// TestEveryTruncationRefused: every cut of a file, however short, is refused with an error.
func TestEveryTruncationRefused(t *testing.T) {
	b := sample()
	for n := 0; n < len(b); n++ {
		if _, _, err := Decode(b[:n]); err == nil {
			t.Fatalf("a file cut to %d of %d bytes was accepted", n, len(b))
		} else if n > HeaderLen && !strings.Contains(err.Error(), "cut off") {
			t.Fatalf("cut to %d: %v, want a cut-off error", n, err)
		}
	}
	if _, _, err := Decode(append(sample(), 0)); err == nil {
		t.Fatal("a byte after the end was accepted")
	}
}

// TestEveryFlippedByteRefused: a bit flipped anywhere is refused.
func TestEveryFlippedByteRefused(t *testing.T) {
	for i := range sample() {
		for _, bit := range []byte{1, 0x80} {
			b := sample()
			b[i] ^= bit
			if _, _, err := Decode(b); err == nil {
				t.Fatalf("byte %d flipped (^%#x) was accepted", i, bit)
			}
		}
	}
}

func TestHeaderErrors(t *testing.T) {
	b := sample()
	b[8] = 9
	if _, err := ParseHeader(b); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Fatalf("version: %v", err)
	}
	if _, err := ParseHeader([]byte("TALLYAOF\x00\x00\x00\x01")); err == nil || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("an aof: %v", err)
	}
}

// FuzzDecode: no bytes panic Decode, and whatever it accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(sample())
	f.Add([]byte(Magic))
	f.Add(Encode(Header{Kind: Single}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(Encode(h, body), b) {
			t.Fatalf("accepted %x, which encodes back differently", b)
		}
	})
}
