package loop

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestSimSnapshotInstallSliced (issue 30, item 7): a follower that receives the leader's raft
// snapshot of 200k keys installs it a slice at a time. No event of its loop runs longer than
// 100 ms of real time (~10 ms now; emptied and rebuilt in one turn, it held the loop 400-600
// ms here); meanwhile it serves reads at ONE from the state it had, raft does not count the
// snapshot applied, and an entry committed after it waits: once swapped in, the follower has
// every key, and the write made during the install.
func TestSimSnapshotInstallSliced(t *testing.T) {
	keys, per := 200_000, 2000
	if raceEnabled {
		keys = 50_000
	}
	if v := os.Getenv("TALLYD_INSTALL_KEYS"); v != "" {
		keys, _ = strconv.Atoi(v) // 1000000 by hand
	}
	start := time.Now()
	c := newSim(t, 3, 11)
	l := c.elect()
	f := c.others(l)[0]
	fa := c.client(f)
	if r := fa.do("SET", "k:0", "before"); !r.isOK() {
		t.Fatalf("SET through the follower: %s", r)
	}
	c.run(100 * time.Millisecond)
	c.cutAll(f) // what was in flight is lost: it needs what the leader compacts
	a := c.client(l)
	msetKeys(t, a, keys, per)
	c.run(100 * time.Millisecond)
	lm := c.ms[l]
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
	t.Logf("%v: leader m%d: %d keys set, snapshot at %d", time.Since(start), l, keys, snap)

	fm := c.ms[f]
	fc := fm.s.cl
	was := fc.m.Applied()
	fm.longest, fm.longestCPU, fm.nextCPU = 0, 0, 0
	lm.longestCPU = 0
	c.heal()
	if !c.runUntil(func() bool { return fc.installing.on || fc.m.Applied() >= snap }, 30*time.Second) {
		t.Fatalf("follower m%d received no snapshot (applied %d)", f, fc.m.Applied())
	}
	if !fc.installing.on {
		t.Fatalf("follower m%d installed the snapshot of %d keys at once", f, keys)
	}
	// Meanwhile: a write committed after the snapshot, and a read at ONE on the follower.
	a.send("SET", "k:1", "after")
	fa.send("GET", "k:0")
	// And writes all along the install: the follower appends them and acknowledges them to
	// the leader, whose heartbeats then carry their commit (raft must not have forgotten them).
	b := c.client(l)
	writes := 0
	slices, bad := 0, ""
	check := func() bool {
		if fc.installing.on {
			slices++
			if slices%100 == 0 && writes < 20 {
				b.send("SET", "w:"+strconv.Itoa(writes), "during")
				writes++
			}
			if st := fc.m.Status(); st.RaftApplied >= snap && bad == "" {
				bad = "raft counts the snapshot applied at " + strconv.FormatUint(st.RaftApplied, 10) + " before the swap"
			}
			if fc.m.Applied() != was && bad == "" {
				bad = "the follower's applied index moved to " + strconv.FormatUint(fc.m.Applied(), 10) + " before the swap"
			}
		}
		return !fc.installing.on && fc.m.Applied() > snap
	}
	if !c.runUntil(check, 60*time.Second) {
		t.Fatalf("follower m%d: applied %d, installing %v (snapshot at %d)", f, fc.m.Applied(), fc.installing.on, snap)
	}
	if bad != "" {
		t.Error(bad)
	}
	if r := a.reply(5 * time.Second); !r.isOK() {
		t.Fatalf("SET during the install: %s", r)
	}
	for i := range writes {
		if r := b.reply(5 * time.Second); !r.isOK() {
			t.Fatalf("SET w:%d during the install: %s", i, r)
		}
	}
	if writes < 5 {
		t.Errorf("only %d writes during the install (%d checks)", writes, slices)
	}
	if r := fa.reply(5 * time.Second); !r.isBulk("before") && !r.isBulk("v0") {
		t.Errorf("GET k:0 at ONE on follower m%d during the install: %s, want before (or v0 once installed)", f, r)
	}
	t.Logf("%v: follower m%d installed the snapshot at %d over %d checks; its longest event %v of CPU (at %v), %v of real time (at %v); the next longest %v of CPU (at %v)",
		time.Since(start), f, snap, slices, fm.longestCPU, fm.longestCPUAt.Sub(c.start).Seconds(),
		fm.longest, fm.longestAt.Sub(c.start).Seconds(), fm.nextCPU, fm.nextCPUAt.Sub(c.start).Seconds())
	// CPU time: what an event did, however loaded the machine (real time at load 14 on two
	// cores was 4 s for an event of 0.3 s of CPU). The event the snapshot arrives in decodes
	// the raft message, a copy of its 25 MB: 2 ms of CPU, but 130-190 ms when the copy's
	// allocation comes while the GC marks (the loop then assists it); every other event
	// restores a slice: ~1 ms, up to 90 ms of CPU seen at load 12-16 (the GC's assists and
	// the page faults of a store growing by 100 MB). Before, one event took 1.75-2.0 s.
	// The leader marshals the snapshot into one raft message for the link (not sliced yet;
	// reported, not judged: the sim's own trace decodes the frame in that event too).
	t.Logf("the leader's longest event meanwhile: %v of CPU (at %v)", lm.longestCPU, lm.longestCPUAt.Sub(c.start).Seconds())
	if fm.longestCPU > 600*time.Millisecond || fm.nextCPU > 200*time.Millisecond {
		t.Errorf("events of the follower's loop took %v and %v of CPU while it installed a snapshot of %d keys (want <= 600ms for the one it arrives in, 200ms for any other)",
			fm.longestCPU, fm.nextCPU, keys)
	}
	c.run(200 * time.Millisecond)
	for _, j := range []int{0, 1, 2, keys / 2, keys - 1} {
		r := fa.do("GET", "k:"+strconv.Itoa(j))
		want := "v" + strconv.Itoa(j)
		if j == 1 {
			want = "after"
		}
		if !r.isBulk(want) {
			t.Errorf("GET k:%d on follower m%d: %s, want %s", j, f, r, want)
		}
	}
	for i := range writes {
		if r := fa.do("GET", "w:"+strconv.Itoa(i)); !r.isBulk("during") {
			t.Errorf("GET w:%d on follower m%d: %s, want during", i, f, r)
		}
	}
	if fc.stopping {
		t.Errorf("follower m%d stopped", f)
	}
	c.noPanics()
}
