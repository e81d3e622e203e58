// Package stats holds the counters the loop bumps and renders them as each protocol's STATS reply.
package stats

import (
	"tallyd/proto/counter"
)

// Command indexes the per-command counters of the yrmcds protocols, in STATS order.
type Command uint8

// The yrmcds commands, in the order their counters appear in STATS.
const (
	CmdNoop Command = iota
	CmdGet
	CmdAcquire
	CmdRelease
	CmdStats
	CmdDump
	numCommands
)

var commandNames = [numCommands]string{
	"command:noop", "command:get", "command:acquire",
	"command:release", "command:stats", "command:dump",
}

// CommandOf maps a request opcode to its counter; ok is false for opcodes that are not counted.
func CommandOf(op counter.Opcode) (Command, bool) {
	switch op {
	case counter.OpNoop:
		return CmdNoop, true
	case counter.OpGet:
		return CmdGet, true
	case counter.OpAcquire:
		return CmdAcquire, true
	case counter.OpRelease:
		return CmdRelease, true
	case counter.OpStats:
		return CmdStats, true
	case counter.OpDump:
		return CmdDump, true
	}
	return 0, false
}

// Yrmcds is the statistics of one yrmcds listener (the counter protocol or its semaphore
// variant). Only the event loop writes it.
type Yrmcds struct {
	CurrConnections  uint64
	TotalConnections uint64
	Rejected         uint64 // connections closed at accept by a connection limit
	Commands         [numCommands]uint64
	GCCount          uint64
	LastGCElapsed    uint64 // µs
	TotalGCElapsed   uint64 // µs
}

// GC records one garbage collection that took elapsedMicros.
func (y *Yrmcds) GC(elapsedMicros uint64) {
	y.GCCount++
	y.LastGCElapsed = elapsedMicros
	y.TotalGCElapsed += elapsedMicros
}

// Render appends the STATS items of a yrmcds listener to dst in the reference's order, with
// the store's object numbers:
// objects, total_objects, used_memory, conflicts, gc_count, last_gc_elapsed,
// total_gc_elapsed, curr_connections, total_connections, then command:* (command:dump only
// when withDump, i.e. for the counter protocol). conflicts is always 0: the store's hash
// table has no chains to count.
func (y *Yrmcds) Render(dst []counter.Stat, objects, totalObjects, usedMemory uint64, withDump bool) []counter.Stat {
	dst = append(dst,
		counter.Stat{Name: "objects", Value: objects},
		counter.Stat{Name: "total_objects", Value: totalObjects},
		counter.Stat{Name: "used_memory", Value: usedMemory},
		counter.Stat{Name: "conflicts", Value: 0},
		counter.Stat{Name: "gc_count", Value: y.GCCount},
		counter.Stat{Name: "last_gc_elapsed", Value: y.LastGCElapsed},
		counter.Stat{Name: "total_gc_elapsed", Value: y.TotalGCElapsed},
		counter.Stat{Name: "curr_connections", Value: y.CurrConnections},
		counter.Stat{Name: "total_connections", Value: y.TotalConnections},
	)
	n := numCommands
	if !withDump {
		n = CmdDump
	}
	for i := Command(0); i < n; i++ {
		dst = append(dst, counter.Stat{Name: commandNames[i], Value: y.Commands[i]})
	}
	return dst
}
