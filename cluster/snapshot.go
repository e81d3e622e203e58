package cluster

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/raftlog"
)

// Snapshots of the host's store (the host encodes them a slice at a time).

// Conf is a configuration, as a snapshot takes it.
type Conf struct{ cs *raftpb.ConfState }

// SnapshotDue says whether the raft log is due a compaction: every entries applied entries,
// or soon after the membership changed, and never while a snapshot the leader sent is
// being installed. On a leader, only while its store holds exactly the
// applied state (journaled: the host's store has changes not yet proposed).
func (m *Member) SnapshotDue(entries uint64, journaled bool) bool {
	if m.Installing() != 0 {
		return false // the store is about to be the leader's snapshot
	}
	if m.applied < m.snapIndex+entries && !(m.SnapSoon && m.applied > m.snapIndex) {
		return false
	}
	if m.IsLeader() && (m.Acks.Acked[LevelQuorum] < m.Acks.Seq || journaled || m.applied < m.commit || !m.ready) {
		return false
	}
	return true
}

// SnapshotConf returns the configuration as it is now, for a snapshot begun now.
func (m *Member) SnapshotConf() Conf { return Conf{proto.Clone(m.Members.Conf).(*raftpb.ConfState)} }

// SnapshotHead begins a snapshot's data: the secret, the peer table, the records' kind.
func (m *Member) SnapshotHead(b []byte) []byte {
	return raftlog.AppendPeers(append(b, m.Secret.SnapshotHead()...), m.Members.Addrs)
}

// TakeSnapshot hands the snapshot of the state at index (configuration conf, data) to
// raft's storage, which compacts the log; false when a newer one was installed meanwhile.
func (m *Member) TakeSnapshot(index uint64, conf Conf, data []byte) (bool, error) {
	if index <= m.snapIndex {
		return false, nil
	}
	if err := m.St.Snapshot(index, conf.cs, data); err != nil {
		return false, err
	}
	m.snapIndex = max(m.snapIndex, index)
	if proto.Equal(conf.cs, m.Members.Conf) {
		m.SnapSoon = false // else the membership changed meanwhile: another soon
	}
	return true, nil
}
