package cluster

import (
	"maps"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// TestMembersChange: every member applies the bootstrap's voters and their addresses, then
// a learner added and removed; a learner that never caught up is not promoted.
func TestMembersChange(t *testing.T) {
	h := newHarness(t, 3)
	l := h.elect()
	everywhere := func(ok func(m *Members) bool) func() bool {
		return func() bool {
			for _, m := range h.members {
				if !ok(&m.members) {
					return false
				}
			}
			return true
		}
	}
	boot := map[uint64]string{1: "m1", 2: "m2", 3: "m3"}
	h.until("the bootstrap applied", 50, everywhere(func(m *Members) bool {
		return m.IsVoter(1) && m.IsVoter(2) && m.IsVoter(3) && maps.Equal(m.Addrs, boot)
	}))

	if err := ProposeLearner(l.rn, 4, "m4"); err != nil {
		t.Fatal(err)
	}
	h.until("learner 4 added", 50, everywhere(func(m *Members) bool {
		return m.IsLearner(4) && !m.IsVoter(4) && m.IsMember(4) && m.Addrs[4] == "m4"
	}))
	for range 5 {
		h.tick()
	}
	l.members.Promote(l.rn, l.rn.BasicStatus().GetCommit(), func(id, match uint64) {
		t.Errorf("learner %d promoted at match %d, before it has any entry", id, match)
	})

	rm := &raftpb.ConfChange{Type: raftpb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(uint64(4))}
	if err := l.rn.ProposeConfChange(rm); err != nil {
		t.Fatal(err)
	}
	h.until("learner 4 removed", 50, everywhere(func(m *Members) bool {
		return !m.IsMember(4) && maps.Equal(m.Addrs, boot)
	}))
}
