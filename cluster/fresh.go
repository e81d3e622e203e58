package cluster

import "go.etcd.io/raft/v3/raftpb"

// Fresh is the vote rule of a member that started with an empty data directory (or holds
// only its bootstrap) and that no leader has caught up yet: its log has no entry past the
// bootstrap entries (BootLast). It votes for a candidate with more only once the cluster is
// known to be new: a majority, itself included, asked for votes with bootstrap-only logs
// before any peer showed entries past them. A member that lost its data sees its peers'
// history first, so its vote cannot elect a leader that lacks acknowledged writes.
type Fresh struct {
	On       bool   // the rule holds: no leader has caught this member up
	BootLast uint64 // the index of the last bootstrap entry

	newCluster bool
	history    bool            // a peer showed entries past the bootstrap before newCluster
	seenBoot   map[uint64]bool // peers that asked for votes with bootstrap-only logs
}

// Appended notes entries up to index last entering the log: a leader's entry past the
// bootstrap means a leader is catching this member up, and the rule ends.
func (f *Fresh) Appended(last uint64) {
	if f.On && last > f.BootLast {
		f.On = false
	}
}

// MayStep watches what m, from a peer, shows of its log, and says whether m may be stepped
// (a vote for a log past the bootstrap may not, until the cluster is known to be new);
// found says that m showed the cluster new, among voters voters.
func (f *Fresh) MayStep(m *raftpb.Message, voters int) (ok, found bool) {
	if !f.On {
		return true, false
	}
	t := m.GetType()
	vote := t == raftpb.MessageType_MsgVote || t == raftpb.MessageType_MsgPreVote
	if !f.newCluster && !f.history {
		switch {
		case vote && m.GetIndex() <= f.BootLast:
			if f.seenBoot == nil {
				f.seenBoot = make(map[uint64]bool)
			}
			f.seenBoot[m.GetFrom()] = true
			if 2*(len(f.seenBoot)+1) > voters {
				f.newCluster, found = true, true
			}
		case vote && m.GetIndex() > f.BootLast,
			t == raftpb.MessageType_MsgHeartbeat && m.GetCommit() > f.BootLast,
			t == raftpb.MessageType_MsgApp && m.GetIndex() > f.BootLast:
			f.history = true
		}
	}
	return !vote || m.GetIndex() <= f.BootLast || f.newCluster, found
}
