package lockwire

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestRoundTrip: every flag byte and every flag word reads and writes back
// as it came, for each kind.
func TestRoundTrip(t *testing.T) {
	for _, k := range []store.LockKind{store.KindLock, store.KindUnlock, store.KindWillLock, store.KindWillUnlock, 5} {
		for f := range 256 {
			w := Words{Flag: uint8(f), Timeout: uint16(f), Expried: uint16(f) << 8}
			if got := Read(k, w).Words(k); got != w {
				t.Fatalf("kind %d: %+v came back %+v", k, w, got)
			}
		}
	}
	for x := range 1 << 16 {
		w := Words{Timeout: 7, TimeoutFlag: uint16(x), Expried: 9, ExpriedFlag: uint16(x)}
		if got := Read(store.KindLock, w).Words(store.KindLock); got != w {
			t.Fatalf("%+v came back %+v", w, got)
		}
	}
}

// TestRead: the words name the options the store reads.
func TestRead(t *testing.T) {
	f := Read(store.KindLock, Words{Flag: 0x01 | 0x20, Timeout: 3, TimeoutFlag: 0x0440 | 0x0200 | 0x0800,
		Expried: 5, ExpriedFlag: 0x0040 | 0x0100 | 0x4000})
	want := Fields{Opts: store.OptShow,
		Wait: store.Wait{N: 3, Unit: store.Millis, Opts: store.WaitWhileUnlocked},
		Hold: store.Hold{N: 5, Unit: store.Minutes, Opts: store.HoldPersistNow | store.HoldNever},
		Echo: store.Echo{Opts: 0x20, Wait: 0x0040 | 0x0800}}
	if f != want {
		t.Fatalf("Read = %+v, want %+v", f, want)
	}
	if u := Read(store.KindUnlock, Words{Flag: 0x01 | 0x08}).Opts; u != store.OptHead|store.OptRequeue {
		t.Fatalf("Unlock flag 0x09 reads as %#x", u)
	}
}

// TestPlainWords: words with no flag and at most a unit bit, which read takes a short way
// for, read as the tables read them, for every pair of time words.
func TestPlainWords(t *testing.T) {
	for _, k := range []store.LockKind{store.KindLock, store.KindUnlock, store.KindWillLock, store.KindWillUnlock, 5} {
		for x := range 1 << 16 {
			for _, y := range []uint16{0, millis, minutes, millis | minutes, 0x8000, uint16(x)} {
				w := Words{Timeout: 7, TimeoutFlag: uint16(x), Expried: 9, ExpriedFlag: y}
				var want Fields
				readTables(k, &w, &want.Opts, &want.Wait, &want.Hold, &want.Echo)
				if got := Read(k, w); got != want {
					t.Fatalf("kind %d, %+v: read %+v, the tables %+v", k, w, got, want)
				}
			}
		}
	}
}

var sinkWords Words

// BenchmarkRoundTrip: a Lock's words to the store's fields and back, as each binary lock
// command and its reply cost (tables: about 23 ns, a loop over the bits: about 38 ns).
func BenchmarkRoundTrip(b *testing.B) {
	c := store.LockCommand{Kind: store.KindLock}
	w := Words{Flag: 0x03, Timeout: 5, TimeoutFlag: 0x0108, Expried: 10, ExpriedFlag: 0x4500}
	for i := 0; i < b.N; i++ {
		Set(&c, w)
		sinkWords = Of(&c)
	}
}
