package loop

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// /readyz's view of a cluster member (unready, read on the simulated loop): ready on every
// member once a leader serves and the links are up; on a leader that lost its followers, no
// quorum and then, as it steps down, no leader; ready again once they are back.
func TestSimReadiness(t *testing.T) {
	c := newSim(t, 3, 1)
	l := c.elect()
	allReady := func() bool {
		for _, m := range c.ms {
			if m != nil && m.up && m.s.unready() != "" {
				return false
			}
		}
		return true
	}
	why := func() string {
		var b strings.Builder
		for _, m := range c.ms {
			if m != nil {
				fmt.Fprintf(&b, " m%d: %q;", m.id, m.s.unready())
			}
		}
		return b.String()
	}
	if !c.runUntil(allReady, 5*time.Second) {
		t.Fatalf("not every member ready 5s after m%d was elected:%s", l, why())
	}
	before := c.ms[l].s.snapshot(c.now).Raft
	a := c.client(l)
	for i := range 5 {
		if r := a.do("SET", fmt.Sprint("k", i), "v"); r.String() != "+OK" {
			t.Fatalf("SET: %s", r)
		}
	}
	after := c.ms[l].s.snapshot(c.now).Raft
	if after.Role != "leader" || after.Commit <= before.Commit || after.ProposalCommit.Count < before.ProposalCommit.Count+1 {
		t.Fatalf("leader's raft metrics did not move with 5 SETs: before %+v, after %+v", before, after)
	}
	for _, p := range after.Peers {
		if !p.Up || p.Match < int64(before.Commit) {
			t.Fatalf("peer %d as the leader sees it: %+v (commit before the SETs %d)", p.ID, p, before.Commit)
		}
	}

	f1, f2 := c.others(l)[0], c.others(l)[1]
	if got := c.ms[f1].s.snapshot(c.now).Raft; got.Role != "follower" || got.LeaderChanges < 1 {
		t.Fatalf("follower m%d's raft metrics: %+v", f1, got)
	}
	c.kill(f1)
	c.kill(f2)
	if !c.runUntil(func() bool { return c.ms[l].s.unready() == "no quorum: 1 of 3 voters reachable" }, 5*time.Second) {
		t.Fatalf("the leader without its followers:%s", why())
	}
	if !c.runUntil(func() bool { return c.ms[l].s.unready() == "no leader" }, 10*time.Second) {
		t.Fatalf("the old leader after its election timeout:%s", why())
	}
	if err := c.restart(f1); err != nil {
		t.Fatal(err)
	}
	if err := c.restart(f2); err != nil {
		t.Fatal(err)
	}
	c.elect()
	if !c.runUntil(allReady, 10*time.Second) {
		t.Fatalf("not every member ready again after the followers came back:%s", why())
	}
	c.noPanics()
}

// A follower whose link to the leader is cut knows the leader but cannot forward to it.
func TestSimReadinessFollowerCut(t *testing.T) {
	c := newSim(t, 3, 5)
	l := c.elect()
	f := c.others(l)[0]
	if !c.runUntil(func() bool { return c.ms[f].s.unready() == "" }, 5*time.Second) {
		t.Fatalf("follower m%d not ready: %q", f, c.ms[f].s.unready())
	}
	c.cut(f, l)
	want := fmt.Sprintf("no link to the leader (node %d)", l)
	if !c.runUntil(func() bool { w := c.ms[f].s.unready(); return w == want || w == "no leader" }, 5*time.Second) {
		t.Fatalf("follower m%d cut from the leader m%d: %q", f, l, c.ms[f].s.unready())
	}
	c.heal()
	if !c.runUntil(func() bool { return c.ms[f].s.unready() == "" }, 10*time.Second) {
		t.Fatalf("follower m%d not ready after the cut healed: %q", f, c.ms[f].s.unready())
	}
	c.noPanics()
}

// clusterDown counts by reason; the proposal-to-commit clock skips numbers it never saw.
func TestClusterMetricsCounts(t *testing.T) {
	var m clusterMetrics
	m.clusterDown("CLUSTERDOWN no leader", 1)
	m.clusterDown("CLUSTERDOWN no quorum", 3)
	m.clusterDown("CLUSTERDOWN leader changed", 2)
	m.clusterDown("CLUSTERDOWN what", 1)
	if m.down != [numDown]uint64{1, 3, 2, 1} {
		t.Fatalf("down: %v", m.down)
	}
	at := time.Unix(100, 0)
	now := func() time.Time { return at }
	m.proposed(1, now)
	m.proposed(2, now)
	at = at.Add(3 * time.Millisecond)
	m.committed(2, now)
	if m.commit.count != 2 || m.commit.sumNs != 6e6 {
		t.Fatalf("two proposals committed 3 ms later: count %d, sum %d ns", m.commit.count, m.commit.sumNs)
	}
	m.committed(1000, now) // a new term's numbering: nothing was timed
	if m.commit.count != 2 || m.timedTo != 1000 {
		t.Fatalf("after a jump: count %d, timedTo %d", m.commit.count, m.timedTo)
	}
	if a := testing.AllocsPerRun(100, func() { m.proposed(1001, now); m.committed(1001, now) }); a != 0 {
		t.Fatalf("proposal timing allocates %.1f times", a)
	}
}
