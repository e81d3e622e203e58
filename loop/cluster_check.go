package loop

import (
	"context"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// This file checks what peers send before raft sees it: nothing a peer sends may panic the
// member, and a member that lost its data, or never had any, must not help elect a leader
// that lacks acknowledged writes.

// raftAcceptable says whether raft message m, from peer link cs, may be stepped: it is
// addressed to this member from a member it knows, it is not one of raft's local messages,
// and it is possible for the local log. A message that shows this member lost data it had
// acknowledged stops the member (memberFatal) when the link proved it comes from a member;
// on a link that proved nothing (no cluster key, no TLS) it could be forged, so the link is
// dropped instead: no frame takes the member down.
func (s *Server) raftAcceptable(cs *conn, m *raftpb.Message) bool {
	cl := s.cl
	from, t := m.GetFrom(), m.GetType()
	switch {
	case m.GetTo() != cl.cfg.NodeID || from == 0 || from == cl.cfg.NodeID:
		s.dropRaft(m, "not addressed from another member to this one")
		cs.quit = true // a bad link: closed and logged, never acted on
		return false
	case cl.members.Addrs[from] == "":
		s.dropRaft(m, "from a node that is not a member")
		cs.quit = true // a bad link: closed and logged, never acted on
		return false
	case t != raftpb.MessageType_MsgSnap && raft.IsLocalMsg(t):
		s.dropRaft(m, "a message raft only makes for itself")
		cs.quit = true // a bad link: closed and logged, never acted on
		return false
	case cl.fresh.On && !s.freshMayVote(m):
		// A candidate whose log goes past the bootstrap asks a member that started empty,
		// in a cluster that has a history: whatever this member had acknowledged before is
		// gone, so its vote could elect a leader that lacks acknowledged writes. It votes
		// once a leader has caught it up.
		s.dropRaft(m, "this member started with an empty data directory in a cluster with a history, and no "+
			"leader has caught it up: it does not vote yet (if it lost its data: remove it and --join with a new --node-id)")
		return false
	case t == raftpb.MessageType_MsgHeartbeat:
		if last, _ := cl.st.Mem.LastIndex(); m.GetCommit() > last {
			// The leader sends a heartbeat's commit only up to what this member
			// acknowledged having: its log ends before that, so it lost what it had.
			err := fmt.Errorf("%w: the leader (node %d, term %d) counts entries up to %d as held here, but this "+
				"member's raft log ends at %d: it lost its data (a wiped or replaced data directory). Remove it "+
				"(tallyctl cluster remove %d) and start it with a new --node-id and --join", ErrMemberState, from,
				m.GetTerm(), m.GetCommit(), last, cl.cfg.NodeID)
			if cs.peer.proved {
				s.memberFatal(err)
				return false
			}
			s.dropRaft(m, err.Error()+" (or the link forged it: peer links are not authenticated)")
			cs.quit = true
			return false
		}
	}
	return true
}

// dropRaft logs (rate-limited) a raft message not stepped.
func (s *Server) dropRaft(m *raftpb.Message, why string) {
	if missed, ok := s.cl.dropLog.allow(s.now()); ok {
		s.log.Warn().Uint64("from", m.GetFrom()).Uint64("to", m.GetTo()).Stringer("type", m.GetType()).
			Uint64("term", m.GetTerm()).Uint64("index", m.GetIndex()).Uint64("more_since_last_line", missed).
			Str("why", why).Msg("cluster: raft message dropped")
	}
}

// stepPeer steps a peer's raft message. Should raft still find it impossible (it panics on
// what breaks its invariants), the member stops cleanly instead of crashing.
func (s *Server) stepPeer(m *raftpb.Message) {
	defer func() {
		if r := recover(); r != nil {
			s.memberFatal(fmt.Errorf("%w: raft cannot take a %s from node %d (term %d, index %d, commit %d): %v",
				ErrMemberState, m.GetType(), m.GetFrom(), m.GetTerm(), m.GetIndex(), m.GetCommit(), r))
		}
	}()
	_ = s.cl.rn.Step(m)
}

// memberFatal stops the member for err: raft is not driven any more, and Run returns err.
func (s *Server) memberFatal(err error) {
	cl := s.cl
	if cl.stopping {
		return
	}
	cl.stopping = true
	s.persist.fatal.CompareAndSwap(nil, &err)
	s.log.Error().Err(err).Msg("cluster: stopping")
	go func() { _ = s.Stop(context.Background()) }()
}

// freshMayVote says whether m may be stepped by this fresh member (cluster.Fresh), and logs
// when m shows the cluster new.
func (s *Server) freshMayVote(m *raftpb.Message) bool {
	voters := len(s.cl.members.Conf.GetVoters())
	ok, found := s.cl.fresh.MayStep(m, voters)
	if found {
		s.log.Info().Int("voters", voters).Msg("cluster: a new cluster (a majority started with empty logs)")
	}
	return ok
}
