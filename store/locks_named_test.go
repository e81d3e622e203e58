package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// The "Locks and DEL" link, the store's side (locks_named.go).

func namedDo(t *testing.T, s *store.Store, o store.Owner, c store.LockCommand, now int64) []store.LockReply {
	t.Helper()
	rs, _ := s.Locks.Do(o, &c, now, nil, nil)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return append([]store.LockReply(nil), rs...)
}

// TestLockedName: a LOCK under its own LockId (text or binary) is found by the key's name
// while it holds it, by its short name recovered from the LockKey or by the long name a text
// LOCK gives; a key held under itself (a Redis key today) is not; a release, an expiry and a
// flush take it out; a LOCK restored from the log is found too.
func TestLockedName(t *testing.T) {
	s := store.New(store.Config{})
	now := at(0)
	if _, ok := s.LockedName(0, []byte("job")); ok || s.Locks.NamedLocks(0) != 0 {
		t.Fatal("a name found in an empty store")
	}
	// A LOCK under its own LockId on the short name "job".
	if rs := namedDo(t, s, 1, lockc(1, "lockid-1", "job"), now); rs[0].Result != store.LockOK {
		t.Fatalf("LOCK: %+v", rs)
	}
	h, ok := s.LockedName(0, []byte("job"))
	if !ok || h.LockID != id16("lockid-1") || h.Owner != 1 || s.Locks.NamedLocks(0) != 1 {
		t.Fatalf("LockedName(job) = %+v %v", h, ok)
	}
	if _, ok := s.LockedName(1, []byte("job")); ok {
		t.Fatal("found in another database")
	}
	if _, ok := s.LockedName(0, []byte("jo")); ok {
		t.Fatal("another name found")
	}
	// A Redis key (held under the key itself) is no LOCK.
	namedDo(t, s, 2, lockc(2, "redis", "redis"), now)
	if _, ok := s.LockedName(0, []byte("redis")); ok {
		t.Fatal("a key held under itself taken for a LOCK")
	}
	// A long name: found by the name a text LOCK gives, never by a hashed LockKey alone.
	long := []byte("a-long-name-of-more-than-sixteen-bytes")
	hashed := [16]byte{0x80, 1, 2, 3}
	c := lockc(3, "lockid-3", "")
	c.Key = hashed
	if rs, _ := s.Locks.DoNamed(3, &c, long, now, nil, nil); rs[0].Result != store.LockOK {
		t.Fatalf("LOCK long: %+v", rs)
	}
	if h, ok := s.LockedName(0, long); !ok || h.LockID != id16("lockid-3") {
		t.Fatalf("LockedName(long) = %+v %v", h, ok)
	}
	c2 := lockc(4, "lockid-4", "")
	c2.Key = [16]byte{0x90, 9}
	namedDo(t, s, 4, c2, now)
	if s.Locks.NamedLocks(0) != 3 {
		t.Fatalf("%d keys counted, want 3", s.Locks.NamedLocks(0))
	}
	// The release of job, the long one's too.
	namedDo(t, s, 1, unlockc(5, "lockid-1", "job"), now)
	u := unlockc(6, "lockid-3", "")
	u.Key = hashed
	namedDo(t, s, 3, u, now)
	if _, ok := s.LockedName(0, []byte("job")); ok {
		t.Fatal("job found after its release")
	}
	if _, ok := s.LockedName(0, long); ok {
		t.Fatal("the long name found after its release")
	}
	// Expiry: lockc holds for 10 s.
	namedDo(t, s, 1, lockc(7, "lockid-7", "exp"), now)
	if _, ok := s.LockedName(0, []byte("exp")); !ok {
		t.Fatal("exp not found")
	}
	var d store.Due
	s.Advance(now+11e9, &d)
	if _, ok := s.LockedName(0, []byte("exp")); ok {
		t.Fatal("exp found after its expiry")
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// Restored from a log (no name given: the short name from the LockKey), then flushed.
	s.Locks.Restore(&store.KeyState{DB: 2, Key: id16("rst"), Holders: []store.HolderState{{LockID: id16("x"), Levels: 1, Count: 1,
		Hold: store.Hold{N: 1, Opts: store.HoldNever}}}}, now)
	if h, ok := s.LockedName(2, []byte("rst")); !ok || h.LockID != id16("x") {
		t.Fatalf("restored LOCK: %+v %v", h, ok)
	}
	namedDo(t, s, 1, lockc(8, "lockid-8", "f"), now)
	s.Locks.Restore(&store.KeyState{DB: 2, Flush: true}, now)
	if _, ok := s.LockedName(2, []byte("rst")); ok || s.Locks.NamedLocks(2) != 0 {
		t.Fatal("found after FLUSHDB")
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	// Looking up allocates nothing.
	if n := testing.AllocsPerRun(100, func() { s.LockedName(0, []byte("f")); s.LockedName(0, long) }); n != 0 {
		t.Fatalf("LockedName: %v allocations", n)
	}
}

// TestLockWaitsForKeyspaceKey: the rule's case 3: a LOCK on a name the keyspace has waits
// (TIMEOUT at once with no wait), and is granted once the keyspace's key goes (KeyGone); a
// LOCK on a name the keyspace does not have, or has past its time, is granted at once.
func TestLockWaitsForKeyspaceKey(t *testing.T) {
	s := store.New(store.Config{})
	now := at(0)
	s.Keyspace.Set(0, []byte("r"), []byte("v"), &store.SetOpts{}, now/1e6, nil)
	s.Keyspace.Set(0, []byte("old"), []byte("v"), &store.SetOpts{At: now/1e6 - 1}, now/1e6, nil)
	try := with(lockc(1, "lockid-1", "r"), func(c *wc) { c.Timeout = 0 })
	if rs := namedDo(t, s, 1, try, now); rs[0].Result != store.LockTimeout {
		t.Fatalf("LOCK r TIMEOUT 0 on a keyspace key: %+v", rs)
	}
	if s.Locks.WaitsOnKeyspace() {
		t.Fatal("a refused LOCK listed as waiting")
	}
	if rs := namedDo(t, s, 2, lockc(2, "lockid-2", "r"), now); len(rs) != 0 {
		t.Fatalf("LOCK r TIMEOUT 5 on a keyspace key: %+v, want it queued", rs)
	}
	if !s.Locks.WaitsOnKeyspace() {
		t.Fatal("the queued LOCK is not listed")
	}
	if rs := namedDo(t, s, 3, lockc(3, "lockid-3", "free"), now); rs[0].Result != store.LockOK {
		t.Fatalf("LOCK free: %+v", rs)
	}
	if rs := namedDo(t, s, 3, lockc(4, "lockid-4", "old"), now); rs[0].Result != store.LockOK {
		t.Fatalf("LOCK on a keyspace key past its time: %+v", rs)
	}
	// A Redis write under the key itself is not a LOCK: not held back (today's Redis path).
	if rs := namedDo(t, s, 4, lockc(5, "r", "r"), now); rs[0].Result != store.LockOK {
		t.Fatalf("a lock under the key itself: %+v", rs)
	}
	if rs := namedDo(t, s, 4, unlockc(6, "r", "r"), now); len(rs) != 1 || rs[0].Owner != 4 {
		t.Fatalf("its release granted the LOCK waiting for the keyspace's key: %+v", rs)
	}
	// The keyspace's key goes: the waiting LOCK is granted.
	s.Keyspace.Del(0, []byte("r"), now/1e6)
	rs, _ := s.KeyGone(0, []byte("r"), now, nil, nil)
	if len(rs) != 1 || rs[0].Result != store.LockOK || rs[0].Owner != 2 || rs[0].RequestID != rid(2) {
		t.Fatalf("KeyGone: %+v", rs)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if s.Locks.WaitsOnKeyspace() {
		t.Fatal("still listed after the grant")
	}
	if h, ok := s.LockedName(0, []byte("r")); !ok || h.LockID != id16("lockid-2") {
		t.Fatalf("the granted LOCK: %+v %v", h, ok)
	}
	if rs, _ := s.KeyGone(0, []byte("r"), now, nil, nil); len(rs) != 0 {
		t.Fatalf("a second KeyGone: %+v", rs)
	}
}
