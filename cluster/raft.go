package cluster

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Timing, in raft ticks.
const (
	ElectionTicks  = 10
	HeartbeatTicks = 1
)

// RaftConfig is the raft configuration of member id, which has applied its log up to applied:
// asynchronous storage writes (st), pre-vote and check-quorum, linearizable reads by
// ReadIndex, and no proposal forwarding (the loop forwards commands itself).
func RaftConfig(id, applied uint64, st *Storage, log raft.Logger) *raft.Config {
	return &raft.Config{ID: id, ElectionTick: ElectionTicks, HeartbeatTick: HeartbeatTicks, Storage: st.View,
		Applied: applied, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 1024, MaxCommittedSizePerReady: 64 << 20,
		CheckQuorum: true, PreVote: true, ReadOnlyOption: raft.ReadOnlySafe, DisableProposalForwarding: true,
		StepDownOnRemoval: true, AsyncStorageWrites: true, Logger: log}
}

// BootstrapOnly says whether a raft log read back holds nothing but a bootstrap: the
// configuration entries of the initial members (or a snapshot of just those), and no entry a
// leader appended.
func BootstrapOnly(snap *raftpb.Snapshot, ents []*raftpb.Entry) bool {
	n := uint64(0) // the configuration's members so far
	last := uint64(0)
	if snap != nil && !raft.IsEmptySnap(snap) {
		cs := snap.GetMetadata().GetConfState()
		n = uint64(len(cs.GetVoters()) + len(cs.GetLearners()))
		last = snap.GetMetadata().GetIndex()
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryType_EntryConfChange {
			return false
		}
		n++
		last = e.GetIndex()
	}
	return last > 0 && last <= n
}

// Logger sends raft's own log lines to tallyd's log.
type Logger struct{ Log *zerolog.Logger }

func (l Logger) Debug(v ...any)                 {}
func (l Logger) Debugf(format string, v ...any) {}
func (l Logger) Info(v ...any)                  { l.Log.Debug().Msg("raft: " + fmt.Sprint(v...)) }
func (l Logger) Infof(format string, v ...any) {
	ev := l.Log.Debug()
	if raftNews(format) {
		ev = l.Log.Info()
	}
	if ev.Enabled() {
		ev.Msg("raft: " + fmt.Sprintf(format, v...))
	}
}

// raftInfo is what of raft's Infof lines an operator needs at INFO, by their format strings:
// elections, leader changes and membership (configuration, snapshots restored). The rest —
// votes cast and received, messages ignored, the unstable log's bookkeeping ("entry at index
// 6 missing from unstable log; ignoring"), proposals dropped without a leader — is DEBUG.
var raftInfo = []string{
	" became ",                // follower, candidate, pre-candidate, leader
	"elected leader",          // raft.node: the leader known
	"changed leader",          //
	"lost leader",             //
	"starting a new election", //
	"starts an election",      // MsgTimeoutNow
	"transfer leadership",     // started, in progress, aborted
	"switched to configuration",
	"joint configuration",
	"restored snapshot",
	"newRaft ",
}

// raftNews says whether a raft Infof line with this format is logged at INFO (raftInfo).
func raftNews(format string) bool {
	for _, s := range raftInfo {
		if strings.Contains(format, s) {
			return true
		}
	}
	return false
}
func (l Logger) Warning(v ...any) { l.Log.Warn().Msg("raft: " + fmt.Sprint(v...)) }
func (l Logger) Warningf(format string, v ...any) {
	l.Log.Warn().Msg("raft: " + fmt.Sprintf(format, v...))
}
func (l Logger) Error(v ...any) { l.Log.Error().Msg("raft: " + fmt.Sprint(v...)) }
func (l Logger) Errorf(format string, v ...any) {
	l.Log.Error().Msg("raft: " + fmt.Sprintf(format, v...))
}
func (l Logger) Fatal(v ...any) { l.Panic(v...) }
func (l Logger) Fatalf(format string, v ...any) {
	l.Panicf(format, v...)
}
func (l Logger) Panic(v ...any) {
	l.Log.Error().Msg("raft: " + fmt.Sprint(v...))
	panic(fmt.Sprint(v...))
}
func (l Logger) Panicf(format string, v ...any) {
	l.Log.Error().Msg("raft: " + fmt.Sprintf(format, v...))
	panic(fmt.Sprintf(format, v...))
}
