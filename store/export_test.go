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
	StageExpried = stageExpried
)
