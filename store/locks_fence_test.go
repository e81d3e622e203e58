package store_test

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// fenceLock grants (or reenters) key for lockID and returns the reply's token.
func fenceLock(t *testing.T, l *store.Locks, key, lockID byte, now int64) uint64 {
	t.Helper()
	c := wc{LockCommand: store.LockCommand{Kind: 1, Count: 0, Rcount: 1}, Expried: 60}.cmd()
	c.Key[15], c.LockID[15] = key, lockID
	rs, _ := l.Do(1, &c, now, nil, nil)
	if len(rs) != 1 || rs[0].Result != store.LockOK {
		t.Fatalf("lock %d/%d: %+v", key, lockID, rs)
	}
	return rs[0].Token
}

func fenceUnlock(t *testing.T, l *store.Locks, key, lockID byte, now int64) {
	t.Helper()
	c := store.LockCommand{Kind: 2}
	c.Key[15], c.LockID[15] = key, lockID
	if rs, _ := l.Do(1, &c, now, nil, nil); len(rs) != 1 || rs[0].Result != store.LockOK {
		t.Fatalf("unlock %d/%d: %+v", key, lockID, rs)
	}
}

// journal collects what Journal emits, deep enough to restore later.
func journal(l *store.Locks, now int64) []store.KeyState {
	var out []store.KeyState
	l.Journal(now, func(s *store.KeyState) {
		c := *s
		c.Value = append([]byte(nil), s.Value...)
		c.Holders = append([]store.HolderState(nil), s.Holders...)
		out = append(out, c)
	})
	return out
}

// Every grant gets a fresh, larger token; a reentry keeps its holder's; a restart from the log
// (or a new leader that applied the committed records) issues tokens above every reserved one,
// even those of holders long gone.
func TestFenceTokens(t *testing.T) {
	const now = int64(1_700_000_000e9)
	cfg := store.LocksConfig{Persist: true, PersistAfter: 1e9}
	l := store.NewLocks(cfg)
	t1 := fenceLock(t, l, 1, 1, now)
	if t1 == 0 {
		t.Fatal("a grant carries no token")
	}
	if again := fenceLock(t, l, 1, 1, now); again != t1 {
		t.Fatalf("reentry token %d, want the holder's %d", again, t1)
	}
	fenceUnlock(t, l, 1, 1, now)
	t2 := fenceLock(t, l, 1, 2, now)
	if t2 <= t1 {
		t.Fatalf("second grant token %d, not above %d", t2, t1)
	}
	if got, ok := l.Token(0, [16]byte{15: 1}, [16]byte{15: 2}, false); !ok || got != t2 {
		t.Fatalf("Token = %d %v, want %d", got, ok, t2)
	}
	if _, ok := l.Token(0, [16]byte{15: 1}, [16]byte{15: 9}, false); ok {
		t.Fatal("Token of a LockId that holds nothing")
	}
	if !l.Journaled() {
		t.Fatal("the first grant reserved tokens but nothing is to be journaled")
	}
	recs := journal(l, now)
	var ceil uint64
	for _, r := range recs {
		if r.Ceil != 0 {
			ceil = r.Ceil
		}
	}
	if ceil < t2 {
		t.Fatalf("journal reserved up to %d, below the token %d issued", ceil, t2)
	}
	// A young lock is not in the journal, but its token is below the reserved ceiling: a
	// restart never issues it again.
	r := store.NewLocks(cfg)
	for i := range recs {
		r.Restore(&recs[i], now)
	}
	if t3 := fenceLock(t, r, 5, 1, now); t3 <= ceil {
		t.Fatalf("after a restart the token %d is not above the reserved %d", t3, ceil)
	}
	// A snapshot keeps the ceiling.
	var snapCeil uint64
	r.SnapshotAll(now, func(s *store.KeyState) { snapCeil = max(snapCeil, s.Ceil) })
	if _, c := r.FenceCeil(); snapCeil != c || c <= ceil {
		t.Fatalf("snapshot ceiling %d, Locks' %d, earlier %d", snapCeil, c, ceil)
	}
}

// A graceful stop persists every held lock, however young, but those asked never to persist.
func TestPersistAll(t *testing.T) {
	const now = int64(1_700_000_000e9)
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 60e9})
	fenceLock(t, l, 1, 1, now)
	never := wc{LockCommand: store.LockCommand{Kind: 1}, Expried: 60, ExpriedFlag: 0x0200}.cmd()
	never.Key[15], never.LockID[15] = 2, 1
	l.Do(1, &never, now, nil, nil)
	journal(l, now) // the reservation
	if l.Journaled() {
		t.Fatal("young locks journaled before PersistAll")
	}
	l.PersistAll(now)
	keys := map[byte]bool{}
	for _, r := range journal(l, now) {
		if len(r.Holders) > 0 {
			keys[r.Key[15]] = true
		}
	}
	if !keys[1] || keys[2] {
		t.Fatalf("PersistAll journaled keys %v, want 1 and not 2", keys)
	}
	// A key the log has already is not written again: a graceful stop does not grow the log
	// by every key.
	l2 := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 60e9})
	old := wc{LockCommand: store.LockCommand{Kind: 1}, Expried: 60, ExpriedFlag: 0x0100}.cmd() // logged at once
	old.Key[15], old.LockID[15] = 3, 1
	l2.Do(1, &old, now, nil, nil)
	journal(l2, now)
	l2.PersistAll(now)
	if recs := journal(l2, now); len(recs) != 0 {
		t.Fatalf("PersistAll wrote a key the log had already: %+v", recs)
	}
}

// A fenced write raises its key's fence; the key's records carry it.
func TestKeyFence(t *testing.T) {
	const now = int64(1_700_000_000e9)
	l := store.NewLocks(store.LocksConfig{Persist: true}) // every holder persists at once
	fenceLock(t, l, 1, 1, now)
	journal(l, now)
	key := [16]byte{15: 1}
	l.RaiseFence(0, key, 34)
	l.RaiseFence(0, key, 33) // lower: ignored
	if f := l.KeyFence(0, key); f != 34 {
		t.Fatalf("KeyFence = %d, want 34", f)
	}
	recs := journal(l, now)
	if len(recs) != 1 || recs[0].Fence != 34 {
		t.Fatalf("journal after RaiseFence: %+v", recs)
	}
	r := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
	r.Restore(&recs[0], now)
	if f := r.KeyFence(0, key); f != 34 {
		t.Fatalf("restored KeyFence = %d, want 34", f)
	}
}

// The time floor (issue 30, item 4): 8192 tokens a millisecond since 2024-01-01, none before
// it or absurdly far ahead; RaiseTokens only raises the counter; the next grant is above the
// floor and reserves a block above it; a ResetLocks (a member rebuilding its store) keeps the
// counter, so the process never issues a token twice.
func TestFenceTimeFloor(t *testing.T) {
	if store.TimeFloor(1_704_067_200_000) != 0 || store.TimeFloor(0) != 0 || store.TimeFloor(-5) != 0 || store.TimeFloor(1<<62) != 0 {
		t.Fatal("a floor for a clock before 2024 or absurdly far ahead")
	}
	nov2026 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixMilli()
	f := store.TimeFloor(nov2026)
	if f != uint64(nov2026-1_704_067_200_000)*store.TokensPerMs || store.TimeFloor(nov2026+1) != f+store.TokensPerMs {
		t.Fatalf("TimeFloor(%d) = %d", nov2026, f)
	}
	if store.FloorTime(f) != nov2026 {
		t.Fatalf("FloorTime(%d) = %d, want %d", f, store.FloorTime(f), nov2026)
	}
	if y2058 := time.Date(2058, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(); store.TimeFloor(y2058) >= 1<<53 {
		t.Fatalf("the floor passes 2^53 before 2058: %d", store.TimeFloor(y2058))
	}
	if far := store.TimeFloor(1<<49 + 1_704_067_200_000 - 1); far >= 1<<62 {
		t.Fatalf("the largest floor %d leaves less than 2^62 tokens", far)
	}

	const now = int64(1_700_000_000e9)
	s := store.New(store.Config{Locks: store.LocksConfig{Persist: true, PersistAfter: 1e9}})
	l := s.Locks
	t1 := fenceLock(t, l, 1, 1, now)
	fenceUnlock(t, l, 1, 1, now)
	l.RaiseTokens(f)
	l.RaiseTokens(f / 2) // never lowers it
	t2 := fenceLock(t, l, 1, 2, now)
	if t2 != f+1 || t2 <= t1 {
		t.Fatalf("after RaiseTokens(%d) the token %d (before: %d)", f, t2, t1)
	}
	var ceil uint64
	for _, r := range journal(l, now) {
		ceil = max(ceil, r.Ceil)
	}
	if ceil < t2 || ceil >= t2+store.TokensPerMs {
		t.Fatalf("the block reserved up to %d after the token %d: want one millisecond's worth", ceil, t2)
	}
	fenceUnlock(t, l, 1, 2, now)
	s.ResetLocks() // the log has nothing: the counter stays
	if t3 := fenceLock(t, l, 1, 3, now); t3 <= t2 {
		t.Fatalf("after ResetLocks the token %d, not above %d", t3, t2)
	}
}
