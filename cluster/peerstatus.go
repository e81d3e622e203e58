package cluster

import (
	"encoding/binary"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// A follower tells the leader how it is doing, for the status page (issue 35): its applied
// and commit indexes and its raft log's mean fsync time ride in the Context of its append
// responses (MsgAppResp), which raft does not read. The leader takes them off before raft
// steps the message. A member of an earlier version sends none (the page shows nothing for
// it) and ignores those it gets: raft never looks at an append response's Context.

// statusTag starts a status Context (version 1): what else a Context may hold never starts so.
const statusTag = "tally-st1"

// statusLen is a status Context's length: the tag, applied, commit, fsync mean (µs).
const statusLen = len(statusTag) + 8 + 8 + 4

// PeerStatus is what a member last reported of itself to this leader.
type PeerStatus struct {
	Applied, Commit uint64
	FsyncMicros     uint32    // its raft log's mean fsync, µs; 0 when it has made none
	At              time.Time // when it was heard; zero: never
}

// FsyncMicros is this member's raft log's mean fsync time (µs), which the host keeps up to
// date; it goes to the leader with the append responses.
func (m *Member) SetFsyncMicros(us uint32) { m.fsyncMicros = us }

// PeerStatus says what member id last reported to this leader (zero At: nothing).
func (m *Member) PeerStatus(id uint64) PeerStatus { return m.peerStatus[id] }

// stampStatus puts this member's status in msg, an append response to the leader.
func (m *Member) stampStatus(msg *raftpb.Message) {
	if msg.GetType() != raftpb.MessageType_MsgAppResp || len(msg.GetContext()) != 0 {
		return
	}
	b := m.statusBuf[:0]
	b = append(b, statusTag...)
	b = binary.BigEndian.AppendUint64(b, m.applied)
	b = binary.BigEndian.AppendUint64(b, m.commit)
	b = binary.BigEndian.AppendUint32(b, m.fsyncMicros)
	m.statusBuf = b
	msg.Context = b
}

// takeStatus takes a member's status off msg (leader): it is recorded, and raft steps the
// message without it.
func (m *Member) takeStatus(msg *raftpb.Message) {
	c := msg.GetContext()
	if msg.GetType() != raftpb.MessageType_MsgAppResp || len(c) != statusLen || string(c[:len(statusTag)]) != statusTag {
		return
	}
	c = c[len(statusTag):]
	if m.peerStatus == nil {
		m.peerStatus = make(map[uint64]PeerStatus)
	}
	m.peerStatus[msg.GetFrom()] = PeerStatus{Applied: binary.BigEndian.Uint64(c), Commit: binary.BigEndian.Uint64(c[8:]),
		FsyncMicros: binary.BigEndian.Uint32(c[16:]), At: m.now()}
	msg.Context = nil
}
