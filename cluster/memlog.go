package cluster

import (
	"fmt"
	"maps"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/raftlog"
)

// MemLog is a raft log held in memory, for simulations (cluster/sim): the disk of a
// simulated member (Storage.Sim). Save, SavePeers and Compact queue what they are handed,
// as raftlog.RaftLog does; Sync makes everything queued durable (a group commit: one write
// and one fsync), and Crash loses what was not made durable (but a prefix of it, as a
// write that reached the disk without its fsync). State reads back what is durable, as
// raftlog.OpenRaft reads a directory back, for the member's restart. A MemLog outlives the
// members that write it: a restart opens a new member on the same MemLog.
type MemLog struct {
	seq, synced uint64
	queued      []memOp

	// What is durable.
	hs    *raftpb.HardState
	snap  *raftpb.Snapshot
	ents  []*raftpb.Entry // after snap, in order
	peers map[uint64]string

	// Err is the first impossible call (a gap in the entries): a bug of the member's.
	Err error
	// Syncs counts the Syncs that made something durable.
	Syncs int
}

// memOp is one queued call.
type memOp struct {
	seq     uint64
	hs      *raftpb.HardState
	ents    []*raftpb.Entry
	snap    *raftpb.Snapshot // received from the leader (Save) or taken (compact)
	compact bool
	peers   map[uint64]string
}

// NewMemLog returns an empty log (a member's empty data directory).
func NewMemLog() *MemLog { return &MemLog{} }

// Save queues a hard state, entries and a snapshot received from the leader (as
// raftlog.RaftLog.Save: the entries and the snapshot's data are kept, not copied).
func (l *MemLog) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) uint64 {
	hasHS := hs != nil && hs.GetTerm()|hs.GetVote()|hs.GetCommit() != 0
	hasSnap := snap != nil && snap.GetMetadata().GetIndex() != 0
	if !hasHS && len(ents) == 0 && !hasSnap {
		return l.seq
	}
	l.seq++
	op := memOp{seq: l.seq}
	if hasHS {
		op.hs = proto.Clone(hs).(*raftpb.HardState)
	}
	if len(ents) > 0 {
		op.ents = append([]*raftpb.Entry(nil), ents...)
	}
	if hasSnap {
		op.snap = snap
	}
	l.queued = append(l.queued, op)
	return l.seq
}

// SavePeers queues the peer address table.
func (l *MemLog) SavePeers(p map[uint64]string) uint64 {
	l.seq++
	l.queued = append(l.queued, memOp{seq: l.seq, peers: maps.Clone(p)})
	return l.seq
}

// Compact queues a snapshot the member took: it replaces the entries up to its index.
func (l *MemLog) Compact(snap *raftpb.Snapshot) uint64 {
	l.seq++
	l.queued = append(l.queued, memOp{seq: l.seq, snap: snap, compact: true})
	return l.seq
}

// Pending says whether calls wait to be made durable.
func (l *MemLog) Pending() bool { return len(l.queued) > 0 }

// Synced is the last call made durable.
func (l *MemLog) Synced() uint64 { return l.synced }

// Sync makes every call queued durable and returns the last one's number (for
// Member.Synced).
func (l *MemLog) Sync() uint64 {
	if len(l.queued) > 0 {
		l.Syncs++
	}
	for _, op := range l.queued {
		l.apply(op)
	}
	clear(l.queued)
	l.queued = l.queued[:0]
	return l.synced
}

// Crash loses the calls not made durable but the first keep of them (written without
// their fsync: a prefix survives a crash, as raftlog cuts a torn tail at its first broken
// record), and ends the writer: the next member's calls are numbered from 1, as those of a
// raft log OpenRaft opened. It returns how many were lost. Crash(Queued()) is a clean close.
func (l *MemLog) Crash(keep int) int {
	keep = min(max(keep, 0), len(l.queued))
	for _, op := range l.queued[:keep] {
		l.apply(op)
	}
	lost := len(l.queued) - keep
	clear(l.queued)
	l.queued = l.queued[:0]
	l.seq, l.synced = 0, 0 // the next member's writer numbers its calls from the start, as OpenRaft's
	return lost
}

// Queued is how many calls wait to be made durable.
func (l *MemLog) Queued() int { return len(l.queued) }

// apply makes op durable.
func (l *MemLog) apply(op memOp) {
	l.synced = op.seq
	if op.peers != nil {
		l.peers = op.peers
	}
	if s := op.snap; s != nil {
		i := s.GetMetadata().GetIndex()
		if l.snap == nil || i > l.snap.GetMetadata().GetIndex() {
			l.snap = s
			if op.compact {
				l.ents = dropThrough(l.ents, i) // the entries after it stay
			} else {
				l.ents = nil // raft restores a snapshot it received in place of its whole log
			}
		}
	}
	if len(op.ents) > 0 {
		first := op.ents[0].GetIndex()
		next := l.snapIndex() + 1
		if n := len(l.ents); n > 0 {
			next = l.ents[n-1].GetIndex() + 1
		}
		switch {
		case first > next:
			if l.Err == nil {
				l.Err = fmt.Errorf("raft log: entries from %d after the last at %d: a gap", first, next-1)
			}
			return
		case first <= l.snapIndex():
			// Entries a snapshot covers (raft sends them only to be replaced): those after it stay.
			ents := op.ents
			for len(ents) > 0 && ents[0].GetIndex() <= l.snapIndex() {
				ents = ents[1:]
			}
			l.ents = append(l.ents[:0], ents...)
		default:
			l.ents = append(dropFrom(l.ents, first), op.ents...)
		}
	}
	if op.hs != nil {
		l.hs = op.hs
	}
}

func (l *MemLog) snapIndex() uint64 { return l.snap.GetMetadata().GetIndex() }

// dropThrough drops the entries up to index i.
func dropThrough(ents []*raftpb.Entry, i uint64) []*raftpb.Entry {
	n := 0
	for n < len(ents) && ents[n].GetIndex() <= i {
		n++
	}
	return append([]*raftpb.Entry(nil), ents[n:]...)
}

// dropFrom drops the entries from index i on.
func dropFrom(ents []*raftpb.Entry, i uint64) []*raftpb.Entry {
	n := len(ents)
	for n > 0 && ents[n-1].GetIndex() >= i {
		n--
	}
	return ents[:n:n]
}

// State reads back what is durable, as raftlog.OpenRaft reads a directory back (for
// Member.Open): the snapshot, the hard state (its commit no further than the log), the
// entries after the snapshot and the peer table.
func (l *MemLog) State() *raftlog.RaftState {
	rs := &raftlog.RaftState{Snapshot: l.snap, Entries: append([]*raftpb.Entry(nil), l.ents...),
		Peers: maps.Clone(l.peers)}
	if l.hs != nil {
		hs := proto.Clone(l.hs).(*raftpb.HardState)
		last := l.snapIndex()
		if n := len(l.ents); n > 0 {
			last = l.ents[n-1].GetIndex()
		}
		c := min(max(hs.GetCommit(), l.snapIndex()), last)
		hs.Commit = &c
		rs.HardState = hs
	}
	return rs
}

// Describe is a raft message's encoding (a peer frame's body) in words, for a trace.
func Describe(b []byte) string {
	var m raftpb.Message
	if err := proto.Unmarshal(b, &m); err != nil {
		return "undecodable: " + err.Error()
	}
	s := fmt.Sprintf("%s %d->%d term %d", m.GetType(), m.GetFrom(), m.GetTo(), m.GetTerm())
	switch m.GetType() {
	case raftpb.MessageType_MsgApp, raftpb.MessageType_MsgAppResp:
		s += fmt.Sprintf(" index %d logterm %d commit %d entries %d reject %v", m.GetIndex(), m.GetLogTerm(),
			m.GetCommit(), len(m.GetEntries()), m.GetReject())
	case raftpb.MessageType_MsgVote, raftpb.MessageType_MsgPreVote, raftpb.MessageType_MsgVoteResp,
		raftpb.MessageType_MsgPreVoteResp:
		s += fmt.Sprintf(" index %d logterm %d reject %v", m.GetIndex(), m.GetLogTerm(), m.GetReject())
	case raftpb.MessageType_MsgSnap:
		s += fmt.Sprintf(" snapshot %d bytes %d", m.GetSnapshot().GetMetadata().GetIndex(), len(m.GetSnapshot().GetData()))
	case raftpb.MessageType_MsgHeartbeat, raftpb.MessageType_MsgHeartbeatResp:
		s += fmt.Sprintf(" commit %d", m.GetCommit())
	}
	return s
}

// IsHeartbeat says whether b encodes a heartbeat or its answer (left out of a short trace).
func IsHeartbeat(b []byte) bool {
	var m raftpb.Message
	if proto.Unmarshal(b, &m) != nil {
		return false
	}
	return m.GetType() == raftpb.MessageType_MsgHeartbeat || m.GetType() == raftpb.MessageType_MsgHeartbeatResp
}
