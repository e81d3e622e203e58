package store_test

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// Peek reports one key: its holder's lock id, token and lease at now, how many wait and for
// how long the oldest has; nothing for a key that does not exist.
func TestLocksPeek(t *testing.T) {
	h := newLkh(t, store.LocksConfig{})
	if _, ok := h.l.Peek(0, id16("k"), h.now, nil, 4); ok {
		t.Fatal("Peek of a key never locked")
	}
	h.do(1, lockc(1, "a", "k")) // held 10 s
	h.advance(2 * time.Second)
	h.do(2, lockc(2, "b", "k")) // waits
	h.advance(1500 * time.Millisecond)
	h.do(3, lockc(3, "c", "k"))
	p, ok := h.l.Peek(0, id16("k"), h.now, nil, 4)
	if !ok || len(p.Holders) != 1 || p.MoreHolders != 0 || p.Waiters != 2 {
		t.Fatalf("Peek: %+v %v", p, ok)
	}
	hd := p.Holders[0]
	if hd.LockID != id16("a") || hd.Token == 0 || hd.TTL < 6500 || hd.TTL > 7500 { // seconds run on to the end of the second
		t.Errorf("holder: %+v (want lock id a, a token, 6.5-7.5 s left)", hd)
	}
	if p.LongestWait != int64(1500*time.Millisecond) {
		t.Errorf("longest wait %v, want 1.5s", time.Duration(p.LongestWait))
	}
	if p, _ := h.l.Peek(0, id16("k"), h.now, nil, 0); len(p.Holders) != 0 || p.MoreHolders != 1 {
		t.Errorf("no holders asked for: %+v", p)
	}
}
