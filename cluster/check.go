package cluster

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// This file steps what peers send, after checking it: nothing a peer sends may panic the
// member, and a member that lost its data, or never had any, must not help elect a leader
// that lacks acknowledged writes.

// Step steps a raft message a peer link carried (data, the frame's body), from the member
// the link says it is (link, for the log); proved says the link proved it comes from a
// member (the cluster key, or a verified TLS certificate). closeLink says the link is bad
// and is to be dropped: nothing it sent is acted on.
func (m *Member) Step(data []byte, link uint64, proved bool, h Host) (closeLink bool) {
	msg := &raftpb.Message{}
	if err := proto.Unmarshal(data, msg); err != nil {
		m.log.Warn().Err(err).Uint64("peer", link).Msg("cluster: bad raft message; dropping the link")
		return true
	}
	ok, closeLink := m.acceptable(msg, proved, h)
	if ok && msg.GetType() == raftpb.MessageType_MsgTransferLeader {
		m.transferring = true // a member asked this leader to hand over (WindowOpen)
	}
	if ok {
		m.takeStatus(msg) // a follower's status for the status page (peerstatus.go)
	}
	if ok && !m.holdMemberRead(msg) {
		m.keepSnapshotData(msg)
		m.stepPeer(msg, h)
	}
	return closeLink
}

// acceptable says whether raft message msg may be stepped: it is addressed to this member
// from a member it knows, it is not one of raft's local messages, and it is possible for the
// local log. A message that shows this member lost data it had acknowledged stops the member
// (Host.Fatal) when the link proved it comes from a member; on a link that proved nothing
// (no cluster key, no TLS) it could be forged, so the link is dropped instead: no frame
// takes the member down. closeLink says the link is to be dropped.
func (m *Member) acceptable(msg *raftpb.Message, proved bool, h Host) (ok, closeLink bool) {
	from, t := msg.GetFrom(), msg.GetType()
	switch {
	case msg.GetTo() != m.ID || from == 0 || from == m.ID:
		m.dropRaft(msg, "not addressed from another member to this one")
		return false, true // a bad link: closed and logged, never acted on
	case m.Members.Addrs[from] == "":
		m.dropRaft(msg, "from a node that is not a member")
		return false, true
	case t != raftpb.MessageType_MsgSnap && raft.IsLocalMsg(t):
		m.dropRaft(msg, "a message raft only makes for itself")
		return false, true
	case m.Fresh.On && Mutant != "wiped-vote" && !m.freshMayVote(msg): // the mutant: a wiped member votes
		// A candidate whose log goes past the bootstrap asks a member that started empty,
		// in a cluster that has a history: whatever this member had acknowledged before is
		// gone, so its vote could elect a leader that lacks acknowledged writes. It votes
		// once a leader has caught it up.
		m.dropRaft(msg, "this member started with an empty data directory in a cluster with a history, and no "+
			"leader has caught it up: it does not vote yet (if it lost its data: remove it and --join with a new --node-id)")
		return false, false
	case t == raftpb.MessageType_MsgHeartbeat:
		if last, _ := m.St.Mem.LastIndex(); msg.GetCommit() > last {
			// The leader sends a heartbeat's commit only up to what this member
			// acknowledged having: its log ends before that, so it lost what it had.
			err := fmt.Errorf("%w: the leader (node %d, term %d) counts entries up to %d as held here, but this "+
				"member's raft log ends at %d: it lost its data (a wiped or replaced data directory). Remove it "+
				"(tallyctl cluster remove %d) and start it with a new --node-id and --join", ErrMemberState, from,
				msg.GetTerm(), msg.GetCommit(), last, m.ID)
			if proved {
				h.Fatal(err)
				return false, false
			}
			m.dropRaft(msg, err.Error()+" (or the link forged it: peer links are not authenticated)")
			return false, true
		}
	}
	return true, false
}

// dropRaft logs (rate-limited) a raft message not stepped.
func (m *Member) dropRaft(msg *raftpb.Message, why string) {
	if missed, ok := m.DropLog.Allow(m.now()); ok {
		m.log.Warn().Uint64("from", msg.GetFrom()).Uint64("to", msg.GetTo()).Stringer("type", msg.GetType()).
			Uint64("term", msg.GetTerm()).Uint64("index", msg.GetIndex()).Uint64("more_since_last_line", missed).
			Str("why", why).Msg("cluster: raft message dropped")
	}
}

// stepPeer steps a peer's raft message. Should raft still find it impossible (it panics on
// what breaks its invariants), the member stops cleanly (Host.Fatal) instead of crashing.
func (m *Member) stepPeer(msg *raftpb.Message, h Host) {
	defer func() {
		if r := recover(); r != nil {
			h.Fatal(fmt.Errorf("%w: raft cannot take a %s from node %d (term %d, index %d, commit %d): %v",
				ErrMemberState, msg.GetType(), msg.GetFrom(), msg.GetTerm(), msg.GetIndex(), msg.GetCommit(), r))
		}
	}()
	_ = m.rn.Step(msg)
}

// freshMayVote says whether msg may be stepped by this fresh member (Fresh), and logs when
// msg shows the cluster new.
func (m *Member) freshMayVote(msg *raftpb.Message) bool {
	voters := len(m.Members.Conf.GetVoters())
	ok, found := m.Fresh.MayStep(msg, voters)
	if found {
		m.log.Info().Int("voters", voters).Msg("cluster: a new cluster (a majority started with empty logs)")
	}
	return ok
}

// maxHeldReads bounds the other members' reads a leader holds (each member asks one at a time).
const maxHeldReads = 64

// heldRead is another member's read a leader holds (holdMemberRead).
type heldRead struct {
	m    *raftpb.Message
	to   uint64 // the index the log must be committed to
	term uint64 // the term this node led when it was held
}

// holdMemberRead says whether this leader holds msg, another member's read (MemberRead),
// until its log up to what it has made durable is committed: the read index it answers then
// covers every write it acknowledged, at ONE too (acknowledged once on this node's disk).
func (m *Member) holdMemberRead(msg *raftpb.Message) bool {
	if !m.IsLeader() || !MemberRead(msg) {
		return false
	}
	to := m.St.Stable()
	if m.commit >= to || len(m.heldReads) >= maxHeldReads {
		return false
	}
	m.heldReads = append(m.heldReads, heldRead{m: msg, to: to, term: m.term})
	return true
}

// stepHeldReads steps the reads holdMemberRead held once the log is committed up to theirs;
// those of an earlier term are dropped (their member times out, or asks the new leader).
func (m *Member) stepHeldReads(h Host) {
	if len(m.heldReads) == 0 {
		return
	}
	kept := m.heldReads[:0]
	for _, r := range m.heldReads {
		switch {
		case !m.IsLeader() || r.term != m.term:
		case m.commit >= r.to:
			m.stepPeer(r.m, h)
		default:
			kept = append(kept, r)
		}
	}
	clear(m.heldReads[len(kept):])
	m.heldReads = kept
}
