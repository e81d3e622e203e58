package cluster

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Reads is a member's reads through raft (ReadIndex). A leader's read barriers: each asked
// for is numbered, and the last one passed is known; a barrier proves the leader still led
// when it began. A member's own read (SNAPSHOT on a follower): numbered apart, its context
// tagged so that neither is taken for the other, and the read index it got. A leader holds a
// member's read it is asked for until its log is committed (HoldsMemberRead), so that the
// index covers every write acknowledged before it, at any level.
type Reads struct {
	Seq, Done uint64 // the last barrier asked for, and the last passed
	wanted    bool

	Member uint64 // the last member read asked for (AskMember)
	Got    bool   // it was answered
	Index  uint64 // with this read index: the member's store holds the reads once applied to it
}

// memberTag begins the context of a member's read; a barrier's is 8 bytes, untagged.
const memberTag = 'M'

// Want asks for a barrier at the next Ask and returns its number.
func (r *Reads) Want() uint64 {
	r.wanted = true
	return r.Seq + 1
}

// Ask begins the barrier wanted, if any, on rn (a leader's).
func (r *Reads) Ask(rn *raft.RawNode) {
	if !r.wanted {
		return
	}
	r.wanted = false
	r.Seq++
	rn.ReadIndex(binary.BigEndian.AppendUint64(nil, r.Seq))
}

// AskMember begins a read of this member's own on rn (any role: a follower's goes to its
// leader) and returns its number; an earlier one not yet answered is forgotten.
func (r *Reads) AskMember(rn *raft.RawNode) uint64 {
	r.Member++
	r.Got, r.Index = false, 0
	rn.ReadIndex(binary.BigEndian.AppendUint64([]byte{memberTag}, r.Member))
	return r.Member
}

// Passed takes a read state: the barrier its context numbers has passed, or the member
// read it numbers got index.
func (r *Reads) Passed(ctx []byte, index uint64) {
	switch {
	case len(ctx) == 8:
		if n := binary.BigEndian.Uint64(ctx); n > r.Done {
			r.Done = n
		}
	case len(ctx) == 9 && ctx[0] == memberTag:
		if binary.BigEndian.Uint64(ctx[1:]) == r.Member {
			r.Got, r.Index = true, index
		}
	}
}

// MemberRead says whether m is another member's read (MsgReadIndex with a member's context).
func MemberRead(m *raftpb.Message) bool {
	if m.GetType() != raftpb.MessageType_MsgReadIndex {
		return false
	}
	e := m.GetEntries()
	return len(e) == 1 && len(e[0].GetData()) == 9 && e[0].GetData()[0] == memberTag
}
