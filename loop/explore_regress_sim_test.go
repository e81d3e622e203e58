package loop

import (
	"testing"
	"time"
)

// Bugs the explorer (explore_test.go) found, as scenarios of their own: a seed's history
// changes whenever the explorer draws differently, these do not.

// The explorer's seed 196 (at 8b4430c): a leadership transfer to a member that could not
// take it (cut off, here down) makes raft drop the leader's proposals until it gives the
// transfer up; the leader abdicated on the dropped proposal (store rebuilt, unready), but
// raft kept it leader of the same term, so the term's first entry that makes a leader ready
// never came again: it answered -CLUSTERDOWN for good, and its heartbeats kept the others
// from electing another. It must serve again once the transfer is given up.
func TestSimTransferDroppedProposal(t *testing.T) {
	c := newSim(t, 3, 196)
	l := c.elect()
	f := c.others(l)[0]
	a := c.client(l)
	if r := a.do("SET", "x", "1"); !r.isOK() {
		t.Fatalf("SET x 1 on the leader m%d: %s", l, r)
	}
	c.kill(f)
	m := c.ms[l]
	c.tracef(false, "leadership transfer m%d -> m%d (down)", l, f)
	c.runOn(m, func() {
		m.s.cl.m.TransferLeader(f)
		m.s.flush()
	})
	// Sent during the transfer: it waits (the leader proposes nothing while a transfer is
	// pending, cluster.Member.WindowOpen) and is acknowledged once raft abandons the
	// transfer. Before, raft dropped its proposal and the leader never served again in that
	// term. (A leader unready in its own term recovers too: cluster
	// TestMemberUnreadyLeaderRecovers.)
	if r := a.do("SET", "x", "2"); !r.isOK() {
		t.Fatalf("SET x 2 on m%d during the transfer to a dead member: %s (%s)", l, r, c.raftState(l))
	}
	if c.logged(l, "proposal dropped") {
		t.Fatal("a proposal was dropped during the transfer")
	}
	b := c.client(c.others(l, f)[0])
	ok := c.runUntil(func() bool { return c.leader() != 0 }, 5*time.Second)
	if !ok {
		t.Fatalf("no member serves 5 s after the transfer to a dead member: %s; %s", c.raftState(l), c.raftState(c.others(l, f)[0]))
	}
	if r := b.do("SET", "x", "3"); !r.isOK() {
		t.Fatalf("SET x 3 through m%d after the transfer was given up: %s (%s)", c.others(l, f)[0], r, c.raftState(l))
	}
	c.noPanics()
}
