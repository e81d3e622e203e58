package store

import "testing"

// TestJournaledNotForNettedGrants: a lock granted (persisting at once, as a replicated grant
// does) and released before the next Journal leaves nothing to emit, so Journaled says so: a
// cluster leader's reply to it waits for the next proposal while Journaled is true, and
// none comes when nothing else changes (issue 25: -CLUSTERDOWN after --cluster-timeout at
// the end of a run of LOCK+UNLOCK pairs). A long run of such pairs between two Journals
// keeps the journal's list bounded, and a key freed and reused is emitted once.
func TestJournaledNotForNettedGrants(t *testing.T) {
	l := NewLocks(LocksConfig{Persist: true, PersistAfter: 1e9})
	now := int64(1e18)
	var rs []LockReply
	var ex []Exec
	pair := func(key byte, n int) {
		c := LockCommand{Kind: KindLock, Hold: Hold{N: 30, Opts: HoldPersistNow}}
		c.Key[0], c.Key[1], c.LockID[0] = key, byte(n), 1
		rs, ex = l.Do(1, &c, now, rs[:0], ex[:0])
		if len(rs) != 1 || rs[0].Result != LockOK {
			t.Fatalf("lock: %+v", rs)
		}
		c.Kind = KindUnlock
		rs, ex = l.Do(1, &c, now, rs[:0], ex[:0])
		if len(rs) != 1 || rs[0].Result != LockOK {
			t.Fatalf("unlock: %+v", rs)
		}
	}
	pair('p', 0)
	l.Journal(now, func(*KeyState) {}) // the fencing tokens' first reservation
	for n := range 3 * lockFreeKeys {
		pair('p', n)
		if l.Journaled() && !l.ceilDirty { // a new block of fencing tokens is something to emit
			t.Fatalf("after %d granted and released pairs Journaled says there is something to emit", n+1)
		}
	}
	if len(l.dirty) > lockFreeKeys {
		t.Fatalf("the journal lists %d keys after pairs that left nothing", len(l.dirty))
	}
	recs := 0
	l.Journal(now, func(ks *KeyState) {
		if ks.Ceil == 0 {
			recs++
		}
	})
	if recs != 0 {
		t.Fatalf("Journal emitted %d records", recs)
	}
	// A key made, freed and its lockKey reused for another, held, key: one record.
	pair('q', 0)
	c := LockCommand{Kind: KindLock, Hold: Hold{N: 30, Opts: HoldPersistNow}}
	c.Key[0], c.LockID[0] = 'r', 1
	rs, ex = l.Do(1, &c, now, rs[:0], ex[:0])
	if !l.Journaled() {
		t.Fatal("a held lock persisting at once: Journaled says nothing to emit")
	}
	var keys []byte
	l.Journal(now, func(ks *KeyState) { keys = append(keys, ks.Key[0]) })
	if string(keys) != "r" {
		t.Fatalf("Journal emitted the keys %q, want r", keys)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}
