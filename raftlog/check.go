package raftlog

import (
	"fmt"
	"path/filepath"

	"github.com/tallyd/tallyd/logfile"
)

// The kinds of file of the raft directory, as check-log and a CorruptError name them.
const (
	KindRaft     = "raft log"
	KindRaftSnap = "raft snapshot"
)

// CorruptError is a damaged record of raft.log with valid records after it: OpenRaft stops on it.
type CorruptError = logfile.CorruptError

// LogKind is raft.log for the check-log tool (logfile.CheckLog).
var LogKind = logfile.Kind{Name: KindRaft, Header: RaftHeader, File: RaftLogName, Format: raftFormat{}, Verify: verifyRepair}

// SnapKind is raft.snap for the check-log tool: one record, never repaired.
var SnapKind = logfile.Kind{Name: KindRaftSnap, Header: RaftSnapHeader, File: RaftSnapName,
	One: func(path string, b []byte) error {
		_, err := readSnapFile(path, b)
		return err
	},
	NoFix: func(path string) error {
		return fmt.Errorf("%s: a raft snapshot is one record and cannot be repaired: restore the data directory "+
			"from a backup, or remove this member from the cluster and rejoin it empty (tallyctl cluster remove, then --join)", path)
	},
}

// verifyRepair reads out, the repaired raft.log at path, as start-up will read it (after
// the snapshot beside it, if any): a repair that would not start either is refused.
func verifyRepair(path string, out []byte) error {
	st, d := &RaftState{}, &raftDisk{}
	err := loadSnapFile(filepath.Join(filepath.Dir(path), RaftSnapName), st, d)
	if err == nil {
		_, _, err = readRaftLog(path, out, st, d)
	}
	if err != nil {
		return fmt.Errorf("%s: without its damaged records the raft log would not start either (%v); "+
			"nothing was changed: restore the data directory from a backup, or remove this member from the cluster and "+
			"rejoin it empty (tallyctl cluster remove, then --join)", path, err)
	}
	return nil
}
