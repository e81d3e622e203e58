package raftlog

import "go.etcd.io/raft/v3/raftpb"

// AppendHardState appends a hard state record, as the log writes it (for tests and tools
// that build a raft log).
func AppendHardState(dst []byte, term, vote, commit uint64) []byte {
	return appendHardState(dst, term, vote, commit)
}

// AppendEntry appends an entry record, as the log writes it.
func AppendEntry(dst []byte, e *raftpb.Entry) []byte { return appendEntry(dst, e) }

// AppendSnapshot appends a snapshot record, as the log writes one received from the leader.
func AppendSnapshot(dst []byte, snap *raftpb.Snapshot) []byte {
	h := appendSnapHead(nil, snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm(), marshalConf(snap), len(snap.Data))
	finishSnap(h, snap.Data)
	return append(append(dst, h...), snap.Data...)
}
