package loop

import (
	"testing"
	"time"
)

// TestSimKeyspaceSnapshotInstall: the leader's raft snapshot carries its keyspace (Redis
// data, store.Keyspace; filled on the loop, since the Redis path does not write it yet),
// and a follower that lagged past the leader's compaction installs it a slice at a time
// into a staging keyspace (counted in --max-memory), serving from its old one meanwhile,
// then swaps it in with the Locks: it then holds every key, value, expiry and fence. On
// 59a2fc0 the follower's keyspace stayed empty.
func TestSimKeyspaceSnapshotInstall(t *testing.T) {
	keys := 60_000
	if raceEnabled {
		keys = 15_000
	}
	c := newSim(t, 3, 21)
	l := c.elect()
	f := c.others(l)[0]
	a := c.client(l)
	if r := a.do("SET", "wire", "before"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	c.run(100 * time.Millisecond)
	c.cutAll(f)
	lm, fm := c.ms[l], c.ms[f]
	ksFill(lm.s.st.store.Keyspace, keys, lm.s.now().UnixMilli(), "sim")
	want := ksDump(lm.s.st.store.Keyspace, lm.s.now().UnixMilli())
	if r := a.do("SET", "wire", "after"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	cl := lm.s.cl
	from := cl.m.SnapIndex()
	cl.cfg.SnapshotEntries = 1
	if !c.runUntil(func() bool { return cl.m.SnapIndex() > from }, 30*time.Second) {
		t.Fatal("the leader took no snapshot")
	}
	cl.cfg.SnapshotEntries = 1 << 40
	snap := cl.m.SnapIndex()
	if err := cl.m.St.Mem.Compact(snap); err != nil {
		t.Fatal(err)
	}
	fc := fm.s.cl
	c.heal()
	if !c.runUntil(func() bool { return fc.installing.on || fc.m.Applied() >= snap }, 30*time.Second) {
		t.Fatalf("follower m%d received no snapshot", f)
	}
	if !fc.installing.on {
		t.Fatalf("follower m%d installed the snapshot at once", f)
	}
	slices, staged, bad := 0, int64(0), ""
	done := func() bool {
		if fc.installing.on {
			slices++
			staged = max(staged, fm.s.installBytes())
			if n := fm.s.st.store.Keyspace.Keys(); n != 0 && bad == "" {
				bad = "the serving keyspace had keys before the swap"
			}
		}
		return !fc.installing.on && fc.m.Applied() >= snap
	}
	if !c.runUntil(done, 60*time.Second) {
		t.Fatalf("follower m%d: applied %d, installing %v", f, fc.m.Applied(), fc.installing.on)
	}
	if bad != "" {
		t.Error(bad)
	}
	if slices < 5 || staged < int64(keys)*40 {
		t.Errorf("installed in %d slices, the staging at most %d bytes (want several slices, the keyspace's bytes counted)", slices, staged)
	}
	sameDump(t, "the follower's keyspace", ksDump(fm.s.st.store.Keyspace, fm.s.now().UnixMilli()), want)
	if err := fm.s.st.store.Check(); err != nil {
		t.Fatal(err)
	}
	c.run(100 * time.Millisecond)
	if r := c.client(f).do("GET", "wire"); !r.isBulk("after") {
		t.Errorf("GET wire on the follower: %s", r)
	}
	t.Logf("%d keys installed in %d slices, staging up to %d bytes", keys, slices, staged)
	c.noPanics()
}
