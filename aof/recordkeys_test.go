package aof

import (
	"fmt"
	"testing"

	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// TestRecordKeys: the keys of a run's state records, in order, skipping other records,
// stopping after max of them at a record's end, and at a record cut off or out of range.
func TestRecordKeys(t *testing.T) {
	var b []byte
	var want []store.KeyName
	for i := range 5 {
		ks := store.KeyState{DB: uint8(i), Value: []byte("\x02\x00\x00\x00\x00\x00"), Holders: []store.HolderState{{Levels: 1}}}
		ks.Key[0] = byte('a' + i)
		b = AppendState(b, &ks)
		want = append(want, store.KeyName{DB: ks.DB, Key: ks.Key})
		switch i {
		case 1:
			b = AppendState(b, &store.KeyState{Ceil: 7})
		case 2:
			b = raftlog.AppendPeers(b, map[uint64]string{1: "a:1"})
			b = AppendMessage(b, []byte("ch"), []byte("msg"))
		case 3:
			b = AppendState(b, &store.KeyState{DB: 3, Flush: true})
		}
	}
	got, n := RecordKeys(b, nil, 100)
	if fmt.Sprint(got) != fmt.Sprint(want) || n != len(b) {
		t.Fatalf("all: %v, %d of %d bytes; want %v", got, n, len(b), want)
	}
	got, n = RecordKeys(b, nil, 2)
	if fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Fatalf("max 2: %v", got)
	}
	rest, m := RecordKeys(b[n:], got[:0], 100)
	if fmt.Sprint(rest) != fmt.Sprint(want[2:]) || n+m != len(b) {
		t.Fatalf("after max 2 (%d bytes): %v, %d bytes", n, rest, m)
	}
	got, n = RecordKeys(b[:len(b)-1], nil, 100) // the last record cut off
	if fmt.Sprint(got) != fmt.Sprint(want[:4]) || n >= len(b)-1 {
		t.Fatalf("cut off: %v, %d bytes", got, n)
	}
	if err := DecodeRecords(b[:n], func(*store.KeyState) {}, func(map[uint64]string) {}); err != nil {
		t.Fatalf("the records before the cut: %v", err)
	}
	bad := append([]byte(nil), b...)
	bad[3] = 0xFF // a length out of range
	if got, n = RecordKeys(bad, nil, 100); len(got) != 0 || n != 0 {
		t.Fatalf("damaged: %v, %d bytes", got, n)
	}
}
