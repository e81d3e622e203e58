package cluster

import (
	"go.etcd.io/raft/v3/raftpb"
)

// A snapshot the leader sent (to a lagging or new member) is installed by the host a slice at
// a time (issue 30, item 7: the loop emptied its store and restored every key in one turn,
// 1.75-2.0 s of CPU for 200k keys, raft's copies of the snapshot included, and every client
// of the member waited). The member's side:
//
//   - raft is not told the snapshot is applied until the host has it: the storage holds the
//     snapshot's MsgStorageAppendResp (Storage.HoldSnapshot) from the moment the host is
//     handed the data (Host.RestoreSnapshot) until the host calls SnapshotInstalled. Until
//     then raft hands out no entry committed after the snapshot, does not count it applied,
//     and this member does not campaign (raft refuses while a snapshot is pending); it still
//     appends, votes and acknowledges what it made durable. The member's applied index,
//     snapshot index and configuration move only at SnapshotInstalled, and no snapshot of
//     its own is due meanwhile (SnapshotDue).
//   - raft (etcd's v3.7) copies a snapshot it receives each time it looks at it: when it
//     takes the message, at every HasReady while the snapshot waits to be stored, and in the
//     Ready that hands it over (proto.Clone in unstable.restore and nextSnapshot): 25 MB each
//     for a store of 200k keys, several times in the turn it arrives. raft never reads the
//     data, so it gets the message without it (keepSnapshotData, in Step); the data waits
//     beside it, and goes back into the snapshot raft hands over for storing (snapshotData,
//     in storageAppend). What raft refuses is forgotten at the end of the turn (Turn).
//   - raft's memory storage keeps the snapshot's metadata alone (Storage.Append): raft reads
//     the snapshot, data shared, through Storage.View.

// receivedSnap is the data of a snapshot the leader sent, kept from raft until it hands the
// snapshot over.
type receivedSnap struct {
	index, term uint64
	data        []byte
}

// keepSnapshotData takes the data out of msg, a snapshot the leader sent, before raft sees it.
func (m *Member) keepSnapshotData(msg *raftpb.Message) {
	sn := msg.GetSnapshot()
	if msg.GetType() != raftpb.MessageType_MsgSnap || sn == nil || len(sn.GetData()) == 0 {
		return
	}
	md := sn.GetMetadata()
	m.received = receivedSnap{index: md.GetIndex(), term: md.GetTerm(), data: sn.GetData()}
	sn.Data = nil
}

// snapshotData puts back the data of snap, the snapshot raft hands over for storing, if it
// is the one received (keepSnapshotData).
func (m *Member) snapshotData(snap *raftpb.Snapshot) {
	r := &m.received
	md := snap.GetMetadata()
	if snap == nil || r.data == nil || len(snap.GetData()) != 0 || md.GetIndex() != r.index || md.GetTerm() != r.term {
		return
	}
	snap.Data = r.data
	*r = receivedSnap{}
}

// installSnapshot hands the host a snapshot the leader sent, once raft's storage has it
// (Storage.Append): raft hears it is applied at SnapshotInstalled.
func (m *Member) installSnapshot(h Host, snap *raftpb.Snapshot) {
	md := snap.GetMetadata()
	if md.GetIndex() <= m.applied {
		return
	}
	if i := m.St.Installing(); i != 0 {
		m.log.Info().Uint64("index", i).Uint64("newer", md.GetIndex()).Msg("cluster: snapshot install dropped for a newer one")
	}
	m.installConf = md.GetConfState()
	m.St.HoldSnapshot(md.GetIndex())
	m.log.Info().Uint64("index", md.GetIndex()).Int("bytes", len(snap.GetData())).Msg("cluster: snapshot install begun")
	h.RestoreSnapshot(snap.GetData())
}

// Installing is the index of the snapshot the host is installing (Host.RestoreSnapshot
// began it, SnapshotInstalled not called yet), 0 if none.
func (m *Member) Installing() uint64 { return m.St.Installing() }

// SnapshotInstalled: the host's store now holds the snapshot its last RestoreSnapshot was
// handed. The member counts it applied (its applied and snapshot indexes, its
// configuration), and raft is told, which releases the entries committed after it (handed
// over at the next Turn).
func (m *Member) SnapshotInstalled() {
	idx := m.St.Installing()
	if idx == 0 {
		return
	}
	m.applied, m.snapIndex = idx, max(m.snapIndex, idx)
	m.Fresh.On = false
	if cs := m.installConf; cs != nil {
		m.Members.SetConf(cs)
	}
	m.installConf = nil
	m.St.ReleaseSnapshot(func(r *raftpb.Message) { _ = m.rn.Step(r) })
	m.log.Info().Uint64("index", idx).Msg("cluster: snapshot installed")
}
