package cluster

import (
	"encoding/binary"

	"go.etcd.io/raft/v3"
)

// Reads is a leader's read barriers (ReadIndex): each asked for is numbered, and the last
// one passed is known. A barrier proves the leader still led when it began.
type Reads struct {
	Seq, Done uint64 // the last barrier asked for, and the last passed
	wanted    bool
}

// Want asks for a barrier at the next Ask and returns its number.
func (r *Reads) Want() uint64 {
	r.wanted = true
	return r.Seq + 1
}

// Ask begins the barrier wanted, if any, on rn (a leader's).
func (r *Reads) Ask(rn *raft.RawNode) {
	if !r.wanted {
		return
	}
	r.wanted = false
	r.Seq++
	rn.ReadIndex(binary.BigEndian.AppendUint64(nil, r.Seq))
}

// Passed takes a read state's context: the barrier it numbers has passed.
func (r *Reads) Passed(ctx []byte) {
	if len(ctx) == 8 {
		if n := binary.BigEndian.Uint64(ctx); n > r.Done {
			r.Done = n
		}
	}
}
