package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// Changes moves with every change the journal takes (a key already in it too, a gone key, a
// flush), and not with one it does not (a lock not yet persisting, a store without a journal).
func TestLocksChanges(t *testing.T) {
	const now = int64(1_700_000_000e9)
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
	do := func(typ store.LockKind, key byte, flag uint16) {
		t.Helper()
		c := wc{LockCommand: store.LockCommand{Kind: typ, Rcount: 1}, Expried: 60, ExpriedFlag: flag}.cmd()
		c.Key[15], c.LockID[15] = key, key
		if rs, _ := l.Do(1, &c, now, nil, nil); len(rs) != 1 || rs[0].Result != store.LockOK {
			t.Fatalf("command %d on key %d: %+v", typ, key, rs)
		}
	}
	step := func(what string, f func(), more bool) {
		t.Helper()
		before := l.Changes()
		f()
		if moved := l.Changes() != before; moved != more {
			t.Fatalf("%s: Changes moved %v, want %v", what, moved, more)
		}
	}
	step("a lock that persists after 1s", func() { do(1, 1, 0) }, false)
	step("a lock that persists now", func() { do(1, 2, 0x0100) }, true)
	step("its refresh, the key already in the journal", func() { do(1, 2, 0x0100) }, true)
	journal(l, now)
	step("its release", func() { do(2, 2, 0x0100) }, true)
	step("a flush", func() { l.Flush(store.AllDBs, now, nil, nil) }, true)
	if !l.Journaled() {
		t.Fatal("nothing journaled after the changes")
	}

	m := store.NewLocks(store.LocksConfig{})
	c := wc{LockCommand: store.LockCommand{Kind: 1, Rcount: 1}, Expried: 60, ExpriedFlag: 0x0100}.cmd()
	m.Do(1, &c, now, nil, nil)
	if m.Changes() != 0 {
		t.Fatalf("a store without a journal counted %d changes", m.Changes())
	}
}
