package aof

import (
	"time"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/raftlog"
)

// KindAOF is the append-only log, as check-log and a CorruptError name it.
const KindAOF = "append-only log"

// logKinds are the kinds of log file CheckLog knows, by their header, in the order it
// tries them (new each time: the format keeps a scratch key state).
func logKinds() []logfile.Kind {
	return []logfile.Kind{{Name: KindAOF, Header: Header, Format: &aofFormat{}}, raftlog.LogKind, raftlog.SnapKind}
}

// LogCheck is what CheckLog found in a log file.
type LogCheck = logfile.LogCheck

// LogDamage is one damaged stretch of a log.
type LogDamage = logfile.LogDamage

// CheckLog reads the log file at path (an append-only log, a raft log or a raft snapshot,
// told by its header) and reports its valid records and its damage, changing nothing.
func CheckLog(path string) (*LogCheck, error) { return logfile.CheckLog(path, logKinds()) }

// FixLog repairs the log file at path as CheckLog reports it (logfile.FixLog).
func FixLog(path string, now time.Time) (*LogCheck, string, error) {
	return logfile.FixLog(path, now, logKinds())
}
