package aof

import (
	"math"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestExpireAtRecord: a holder's exact expiry (Unix ms, past what Unix ns can hold too)
// comes back from its record; a plain deadline stays as it was.
func TestExpireAtRecord(t *testing.T) {
	for _, h := range []store.HolderState{
		{Levels: 1, Deadline: 1_700_000_000_123_456_789},
		{Levels: 1, ExpireAt: 1_700_000_000_123, Deadline: 1_700_000_000_123_000_000},
		{Levels: 1, ExpireAt: math.MaxInt64, Deadline: math.MaxInt64},
		{Levels: 1},
	} {
		rec := AppendState(nil, &store.KeyState{Key: [16]byte{1}, Holders: []store.HolderState{h}})
		p, _, err := next(rec)
		if err != nil {
			t.Fatal(err)
		}
		var s store.KeyState
		if err := decode(p, &s); err != nil {
			t.Fatal(err)
		}
		got := s.Holders[0]
		want := h
		if h.ExpireAt != 0 {
			want.Deadline = 0 // the store derives it from ExpireAt
		}
		if got != want {
			t.Fatalf("holder %+v came back as %+v", h, got)
		}
	}
}
