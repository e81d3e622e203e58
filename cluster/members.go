package cluster

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Members is the membership: raft's configuration as last applied and every member's peer
// address.
type Members struct {
	Conf     *raftpb.ConfState
	Addrs    map[uint64]string
	promoted map[uint64]bool // learners proposed as voters
}

// NewMembers returns an empty membership.
func NewMembers() Members {
	return Members{Addrs: make(map[uint64]string), promoted: make(map[uint64]bool)}
}

// SetConf takes configuration cs (applied, or read from a snapshot).
func (m *Members) SetConf(cs *raftpb.ConfState) {
	m.Conf = proto.Clone(cs).(*raftpb.ConfState)
}

// IsVoter says whether id votes in the configuration.
func (m *Members) IsVoter(id uint64) bool { return IsVoter(m.Conf, id) }

// IsLearner says whether id is a learner of the configuration.
func (m *Members) IsLearner(id uint64) bool { return IsLearner(m.Conf, id) }

// IsMember says whether id is a voter or a learner of the configuration.
func (m *Members) IsMember(id uint64) bool { return m.IsVoter(id) || m.IsLearner(id) }

// Apply applies committed change cc to rn's configuration and to the addresses: a member
// added keeps the address cc carries (if any), one removed loses its own.
func (m *Members) Apply(rn *raft.RawNode, cc *raftpb.ConfChange) {
	m.SetConf(rn.ApplyConfChange(cc))
	id := cc.GetNodeId()
	switch cc.GetType() {
	case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
		if a := string(cc.GetContext()); a != "" {
			m.Addrs[id] = a
		}
	case raftpb.ConfChangeType_ConfChangeRemoveNode:
		delete(m.Addrs, id)
	}
}

// ProposeLearner proposes id, at peer address addr, as a learner.
func ProposeLearner(rn *raft.RawNode, id uint64, addr string) error {
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(id), Context: []byte(addr)}
	return rn.ProposeConfChange(cc)
}

// Promote proposes, once each, the learners whose log is within 100 entries of commit as
// voters (on a leader), and calls proposed for each.
func (m *Members) Promote(rn *raft.RawNode, commit uint64, proposed func(id, match uint64)) {
	if len(m.Conf.GetLearners()) == 0 {
		return
	}
	rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ != raft.ProgressTypeLearner || m.promoted[id] || pr.Match+100 < commit || pr.Match == 0 {
			return
		}
		cc := &raftpb.ConfChange{Type: raftpb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: new(id),
			Context: []byte(m.Addrs[id])}
		if err := rn.ProposeConfChange(cc); err == nil {
			m.promoted[id] = true
			proposed(id, pr.Match)
		}
	})
}

// Voters are the configuration's voters.
func (m *Members) Voters() []uint64 { return m.Conf.GetVoters() }
