package counter

import "encoding/binary"

// StatCmd indexes the per-command counts of a server's Stats reply, in the
// order the reply lists them.
type StatCmd uint8

// The commands a Stats reply counts, in reply order.
const (
	StatNoop StatCmd = iota
	StatGet
	StatAcquire
	StatRelease
	StatStats
	StatDump
	NumStatCmds
)

var statCmdNames = [NumStatCmds]string{
	"command:noop", "command:get", "command:acquire",
	"command:release", "command:stats", "command:dump",
}

// StatCmdOf maps a request opcode to its count; ok is false for opcodes that
// are not counted.
func StatCmdOf(op Opcode) (c StatCmd, ok bool) {
	switch op {
	case OpNoop:
		return StatNoop, true
	case OpGet:
		return StatGet, true
	case OpAcquire:
		return StatAcquire, true
	case OpRelease:
		return StatRelease, true
	case OpStats:
		return StatStats, true
	case OpDump:
		return StatDump, true
	}
	return 0, false
}

// ServerStats are the figures of a server's Stats reply, as plain values the
// server fills in.
type ServerStats struct {
	Objects          uint64 // live counters or semaphores
	TotalObjects     uint64 // objects ever created
	UsedMemory       uint64 // bytes, estimated
	GCCount          uint64 // garbage collections run
	LastGCElapsed    uint64 // µs
	TotalGCElapsed   uint64 // µs
	CurrConnections  uint64
	TotalConnections uint64
	Commands         [NumStatCmds]uint64 // requests of each command
	WithDump         bool                // list command:dump (the counter dialect; the semaphore one has no Dump)
}

// AppendServerStats appends the Stats reply (opcode 0x10, status 0) of a
// server with figures s, in the reference's order: objects, total_objects,
// used_memory, conflicts, gc_count, last_gc_elapsed, total_gc_elapsed,
// curr_connections, total_connections, then command:* (command:dump only
// WithDump). conflicts is always 0: the server's hash table has no chains to
// count.
func AppendServerStats(dst []byte, opaque uint32, s *ServerStats) []byte {
	h := len(dst)
	dst = AppendHeader(dst, OpStats, StatusOK, 0, opaque)
	dst = appendStat(dst, "objects", s.Objects)
	dst = appendStat(dst, "total_objects", s.TotalObjects)
	dst = appendStat(dst, "used_memory", s.UsedMemory)
	dst = appendStat(dst, "conflicts", 0)
	dst = appendStat(dst, "gc_count", s.GCCount)
	dst = appendStat(dst, "last_gc_elapsed", s.LastGCElapsed)
	dst = appendStat(dst, "total_gc_elapsed", s.TotalGCElapsed)
	dst = appendStat(dst, "curr_connections", s.CurrConnections)
	dst = appendStat(dst, "total_connections", s.TotalConnections)
	n := NumStatCmds
	if !s.WithDump {
		n = StatDump
	}
	for i := range n {
		dst = appendStat(dst, statCmdNames[i], s.Commands[i])
	}
	binary.BigEndian.PutUint32(dst[h+4:], uint32(len(dst)-h-HeaderLen))
	return dst
}
