package loop

import "github.com/tallyd/tallyd/proto/counter"

// listenerStats are the loop's own counts for one protocol's listeners: its
// connections, and for the yrmcds protocols the requests of each command and
// the garbage collections the loop ran and timed. The store's figures
// (objects, memory, PoolCounter's counters) live in the store.
type listenerStats struct {
	CurrConnections  uint64
	TotalConnections uint64
	Rejected         uint64 // connections closed at accept by a connection limit
	Commands         [counter.NumStatCmds]uint64
	GCCount          uint64
	LastGCElapsed    uint64 // µs
	TotalGCElapsed   uint64 // µs
}

// GC records one garbage collection that took elapsedMicros.
func (y *listenerStats) GC(elapsedMicros uint64) {
	y.GCCount++
	y.LastGCElapsed = elapsedMicros
	y.TotalGCElapsed += elapsedMicros
}
