package cluster

import (
	"encoding/binary"
	"strconv"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Level is a consistency level, as Cassandra's.
type Level uint8

// The consistency levels.
const (
	LevelOne    Level = 1 // the leader has it durably (may be lost if the leader dies before replicating it)
	LevelQuorum Level = 2 // committed by a majority
	LevelAll    Level = 3 // durable on every voter
)

// LevelNames are the levels' names, by level.
var LevelNames = [...]string{LevelOne: "ONE", LevelQuorum: "QUORUM", LevelAll: "ALL"}

func (l Level) String() string {
	if l >= LevelOne && l <= LevelAll {
		return LevelNames[l]
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// ownEntry maps a proposal of this leader to its raft index.
type ownEntry struct{ index, seq uint64 }

// Acks is a leader's bookkeeping of its proposals: their sequence numbers, the raft index
// each got, and per level the last one acknowledged.
type Acks struct {
	Seq   uint64               // the last proposal's sequence number
	Acked [LevelAll + 1]uint64 // per level: the last proposal acknowledged at it
	own   []ownEntry           // this term's proposals in the log, not yet acknowledged at every level
}

// Lead starts a term of this node's leadership: proposals of earlier terms are forgotten and
// numbering goes on past every number used, all of them acknowledged.
func (a *Acks) Lead() {
	a.own = a.own[:0]
	a.Seq = max(a.Seq, a.Acked[LevelOne], a.Acked[LevelQuorum], a.Acked[LevelAll])
	for l := range a.Acked {
		a.Acked[l] = a.Seq
	}
}

// Forget drops every proposal's index (the leadership ended).
func (a *Acks) Forget() { a.own = a.own[:0] }

// Window is how many proposals await their commit.
func (a *Acks) Window() uint64 { return a.Seq - a.Acked[LevelQuorum] }

// Note records the raft index of this leader's proposals (of term) among entries entering
// its log.
func (a *Acks) Note(ents []*raftpb.Entry, term uint64) {
	for _, e := range ents {
		d := e.GetData()
		if e.GetType() == raftpb.EntryType_EntryNormal && len(d) >= 9 && d[0] == EntRecords && e.GetTerm() == term {
			a.own = append(a.own, ownEntry{e.GetIndex(), binary.BigEndian.Uint64(d[1:9])})
		}
	}
}

// Index returns the raft index of proposal seq, while it is remembered.
func (a *Acks) Index(seq uint64) (uint64, bool) {
	for _, o := range a.own {
		if o.seq == seq {
			return o.index, true
		}
	}
	return 0, false
}

// Ack moves each level's acknowledged proposal to what idx (per level, the raft index
// reached) covers, and returns how many remembered proposals every level now covers (for
// Drop).
func (a *Acks) Ack(idx [LevelAll + 1]uint64) int {
	done := len(a.own)
	for l := LevelOne; l <= LevelAll; l++ {
		i := 0
		for i < len(a.own) && a.own[i].index <= idx[l] {
			a.Acked[l] = max(a.Acked[l], a.own[i].seq)
			i++
		}
		done = min(done, i)
	}
	return done
}

// Drop forgets the first n remembered proposals (acknowledged at every level).
func (a *Acks) Drop(n int) {
	if n > 0 {
		a.own = a.own[:copy(a.own, a.own[n:])]
	}
}

// Levels returns the raft index each level reaches on a leader whose own log is durable up
// to stable, and whose commit index is commit; all is the index every voter's log reaches.
func Levels(rn *raft.RawNode, self, stable, commit uint64, cs *raftpb.ConfState) (idx [LevelAll + 1]uint64, all uint64) {
	all = stable
	rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) {
		if typ == raft.ProgressTypePeer && id != self && IsVoter(cs, id) {
			all = min(all, pr.Match)
		}
	})
	return [LevelAll + 1]uint64{LevelOne: stable, LevelQuorum: commit, LevelAll: min(all, commit)}, all
}

// IsVoter says whether id votes in configuration cs.
func IsVoter(cs *raftpb.ConfState, id uint64) bool {
	for _, v := range cs.GetVoters() {
		if v == id {
			return true
		}
	}
	return false
}

// IsLearner says whether id is a learner in configuration cs.
func IsLearner(cs *raftpb.ConfState, id uint64) bool {
	for _, v := range cs.GetLearners() {
		if v == id {
			return true
		}
	}
	return false
}
