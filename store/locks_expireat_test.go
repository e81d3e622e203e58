package store

import (
	"math"
	"testing"
)

// TestLocksExpireAt: a hold with an exact expiry (LockCommand.ExpireAt) is due then, not
// by its 16-bit Expried; TTL reports it to the millisecond; an Update that keeps the
// expiry (Expried 0xFFFF, 0x4000) keeps it; the journal carries it and Restore brings it
// back; past the year 2262 it is never due but still reported.
func TestLocksExpireAt(t *testing.T) {
	const ms = int64(1e6)
	now := int64(1_700_000_000_000) * ms
	l := NewLocks(LocksConfig{Persist: true})
	key := [16]byte{15: 'k'}
	at := now/ms + 10_000_000_000 // 10^10 ms: past the 65,534 minutes Expried can say
	c := LockCommand{Kind: 1, Opts: OptUpdate, LockID: key, Key: key, Hold: Hold{N: 0xfffe, Unit: Minutes, Opts: HoldPersistNow}, ExpireAt: at}
	l.Do(1, &c, now, nil, nil)
	if got := l.TTL(0, key, now); got != 10_000_000_000 {
		t.Fatalf("TTL %d, want 10000000000", got)
	}
	keep := LockCommand{Kind: 1, Opts: OptUpdate, LockID: key, Key: key, Hold: Hold{N: 0xFFFF, Opts: HoldNever}}
	l.Do(1, &keep, now+ms, nil, nil)
	if got := l.TTL(0, key, now+ms); got != 10_000_000_000-1 {
		t.Fatalf("TTL after a keep-expiry Update %d", got)
	}
	if r, _ := l.Expire(at*ms-1, nil, nil); len(r) != 0 || l.TTL(0, key, at*ms-1) != 1 {
		t.Fatalf("expired early: %v", r)
	}
	var saved KeyState
	l.Journal(now, func(s *KeyState) {
		saved = *s
		saved.Holders = append([]HolderState(nil), s.Holders...)
	})
	if len(saved.Holders) != 1 || saved.Holders[0].ExpireAt != at {
		t.Fatalf("journal %+v", saved)
	}
	if r, _ := l.Expire(at*ms, nil, nil); len(r) != 1 || r[0].Result != LockExpried {
		t.Fatalf("not expired at ExpireAt: %v", r)
	}
	m := NewLocks(LocksConfig{Persist: true})
	m.Restore(&saved, now+5*ms)
	if got := m.TTL(0, key, now+5*ms); got != 10_000_000_000-5 {
		t.Fatalf("TTL after Restore %d", got)
	}
	far := LockCommand{Kind: 1, Opts: OptUpdate, LockID: key, Key: key, Hold: Hold{N: 1}, ExpireAt: math.MaxInt64}
	m.Do(1, &far, now, nil, nil)
	if got := m.TTL(0, key, now); got != math.MaxInt64-now/ms {
		t.Fatalf("TTL of a far expiry %d", got)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}
