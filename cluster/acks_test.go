package cluster

import (
	"encoding/binary"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// propose has leader m propose its next numbered proposal, as the loop does.
func (h *harness) propose(m *member) uint64 {
	h.t.Helper()
	m.acks.Seq++
	d := binary.BigEndian.AppendUint64([]byte{EntRecords}, m.acks.Seq)
	if err := m.rn.Propose(append(d, 'x')); err != nil {
		h.t.Fatal(err)
	}
	return m.acks.Seq
}

// elect has member 1 campaign and returns the leader elected.
func (h *harness) elect() *member {
	h.t.Helper()
	if err := h.members[0].rn.Campaign(); err != nil {
		h.t.Fatal(err)
	}
	h.until("a leader", 50, func() bool { return h.leader() != nil })
	return h.leader()
}

// ack updates leader m's acknowledgements from what raft knows, as the loop's turn does.
func ack(m *member) {
	st := m.rn.BasicStatus()
	idx, _ := Levels(m.rn, m.id, m.st.Stable(), st.GetCommit(), &raftpb.ConfState{Voters: []uint64{1, 2, 3}})
	m.acks.Drop(m.acks.Ack(idx))
}

// TestAcksLevels: a leader's proposal is acknowledged at ONE and QUORUM once a majority has
// it, and at ALL only once every voter has it; its index is remembered until then.
func TestAcksLevels(t *testing.T) {
	h := newHarness(t, 3)
	l := h.elect()
	l.acks.Lead()
	acked := func(lvl Level, seq uint64) func() bool {
		return func() bool { ack(l); return l.acks.Acked[lvl] >= seq }
	}
	p1 := h.propose(l)
	h.until("p1 acknowledged at ALL", 50, acked(LevelAll, p1))
	if _, ok := l.acks.Index(p1); ok {
		t.Fatal("p1's index is remembered after every level acknowledged it")
	}

	f := h.members[0]
	if f == l {
		f = h.members[1]
	}
	h.cut[f.id] = true
	p2 := h.propose(l)
	h.until("p2 acknowledged at QUORUM", 50, acked(LevelQuorum, p2))
	for range 10 {
		h.tick()
	}
	ack(l)
	if l.acks.Acked[LevelOne] != p2 || l.acks.Acked[LevelAll] != p1 || l.acks.Window() != 0 {
		t.Fatalf("a member cut off: acknowledged %v, want ONE and QUORUM %d, ALL %d", l.acks.Acked, p2, p1)
	}
	if _, ok := l.acks.Index(p2); !ok {
		t.Fatal("p2's index is forgotten before ALL acknowledged it")
	}
	delete(h.cut, f.id)
	h.until("p2 acknowledged at ALL", 100, acked(LevelAll, p2))

	l.acks.Seq = 7 // a new term goes on past every number used, all acknowledged
	l.acks.Lead()
	if l.acks.Acked != [LevelAll + 1]uint64{7, 7, 7, 7} || l.acks.Window() != 0 {
		t.Fatalf("after Lead: %d acknowledged %v", l.acks.Seq, l.acks.Acked)
	}
}

// TestReadsBarrier: a leader's read barrier passes while a majority follows it, and not
// while it is cut off.
func TestReadsBarrier(t *testing.T) {
	h := newHarness(t, 3)
	l := h.elect()
	h.until("the leader's first entry committed", 50, func() bool { return l.rn.BasicStatus().GetCommit() >= 4 })
	if n := l.reads.Want(); n != 1 {
		t.Fatalf("first barrier numbered %d", n)
	}
	l.reads.Ask(l.rn)
	h.until("barrier 1 passed", 20, func() bool { return l.reads.Done == 1 })

	h.cut[l.id] = true
	if n := l.reads.Want(); n != 2 {
		t.Fatalf("second barrier numbered %d", n)
	}
	l.reads.Ask(l.rn)
	for range ElectionTicks / 2 {
		h.tick()
	}
	if l.reads.Done != 1 || l.reads.Seq != 2 {
		t.Fatalf("cut off: barriers asked %d, passed %d", l.reads.Seq, l.reads.Done)
	}
	l.reads.Passed([]byte{1, 2}, 5) // not a barrier's context
	if l.reads.Done != 1 {
		t.Fatal("a short context passed a barrier")
	}
}

// TestLevelString names the levels and anything else by number.
func TestLevelString(t *testing.T) {
	for l, want := range map[Level]string{LevelOne: "ONE", LevelQuorum: "QUORUM", LevelAll: "ALL", 0: "Level(0)", 9: "Level(9)"} {
		if got := l.String(); got != want {
			t.Errorf("Level %d: %q, want %q", l, got, want)
		}
	}
}

// TestReadsMember: a follower's own read goes to the leader and comes back with the leader's
// commit index; it is told apart from a barrier both ways, and only the last one asked counts.
func TestReadsMember(t *testing.T) {
	h := newHarness(t, 3)
	l := h.elect()
	h.until("the leader's first entry committed", 50, func() bool { return l.rn.BasicStatus().GetCommit() >= 4 })
	var f *member
	for _, m := range h.members {
		if m != nil && m != l {
			f = m
			break
		}
	}
	n := f.reads.AskMember(f.rn)
	h.until("the follower's read answered", 20, func() bool { return f.reads.Got })
	if c := l.rn.BasicStatus().GetCommit(); f.reads.Index != c || f.reads.Member != n {
		t.Fatalf("read %d answered at %d (asked %d); the leader's commit is %d", n, f.reads.Index, f.reads.Member, c)
	}
	if f.reads.Done != 0 {
		t.Fatalf("a member read passed barrier %d", f.reads.Done)
	}
	f.reads.AskMember(f.rn)
	f.reads.Passed([]byte{'M', 0, 0, 0, 0, 0, 0, 0, byte(n)}, 99) // the earlier one's answer, late
	if f.reads.Got {
		t.Fatal("an earlier read's answer was taken for the last one's")
	}
	l.reads.Passed([]byte{'M', 0, 0, 0, 0, 0, 0, 0, 9}, 99)
	if l.reads.Done != 0 {
		t.Fatal("a member read's context passed a barrier")
	}
}
