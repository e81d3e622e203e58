package store

// The data-record layout constants are unexported (proto/slock exports the
// wire values); the store's tests name them through these aliases.
const (
	DataSet      = dataSet
	DataUnset    = dataUnset
	DataIncr     = dataIncr
	DataAppend   = dataAppend
	DataShift    = dataShift
	DataExecute  = dataExecute
	DataPipeline = dataPipeline
	DataPush     = dataPush
	DataPop      = dataPop

	StageCurrent = stageCurrent
	StageUnlock  = stageUnlock
	StageTimeout = stageTimeout
	StageExpired = stageExpired
)

// MapPeak is the most counters the table's map has held since it was last built.
func (c *Counters) MapPeak() int { return c.t.peak }

// NameCost is what a counter or semaphore named with n bytes costs in Info.UsedMemory.
func NameCost(n int) uint64 { return nameCost(n) }

// SetKeyspaceTableMax makes keyspace index tables split past n slots, and returns the
// function that puts it back.
func SetKeyspaceTableMax(n int) func() {
	old := tabMaxSlots
	tabMaxSlots = n
	return func() { tabMaxSlots = old }
}
