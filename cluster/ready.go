package cluster

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// ReadyHandler is what a member does with raft's Readies, under asynchronous storage writes.
type ReadyHandler interface {
	// SoftState sees a change of role or leader.
	SoftState(*raft.SoftState)
	// ReadState sees a read (ReadIndex) pass, by the context it was asked with, at index.
	ReadState(ctx []byte, index uint64)
	// Append stores a LocalAppendThread message (Storage.Append).
	Append(*raftpb.Message)
	// Apply applies a LocalApplyThread message's committed entries and steps its responses.
	Apply(*raftpb.Message)
	// Send sends a message to another member.
	Send(*raftpb.Message)
}

// HandleReadies hands every Ready rn has to h, in order: the soft state, the read states,
// then the messages.
func HandleReadies(rn *raft.RawNode, h ReadyHandler) {
	for rn.HasReady() {
		rd := rn.Ready()
		if rd.SoftState != nil {
			h.SoftState(rd.SoftState)
		}
		for _, r := range rd.ReadStates {
			h.ReadState(r.RequestCtx, r.Index)
		}
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				h.Append(m)
			case raft.LocalApplyThread:
				h.Apply(m)
			default:
				h.Send(m)
			}
		}
	}
}
