package loop

import (
	"strconv"
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// A MULTI queue is bounded in commands (--multi-max-commands) and in the work its EXEC would
// do (--multi-max-work), besides its bytes (--max-input): EXEC runs the queue whole, with no
// other connection served in between, so the queue's work is how long EXEC holds the loop
// (issue 21, item 1: MULTI with 20,000 HINCRBY on a 16k-field hash held it 14.9 s). The work
// of a command is estimated when it is queued, from what it will touch then: the keys it
// names, the keys KEYS walks, the bytes of the value or hash it reads or rewrites. The
// figures are the loop's own, measured (SLOWLOG) on a 2-core AMD EPYC: a command costs about
// 300 ns, a key of MGET, DEL or MSET about 600 ns, a key KEYS walks about 50 ns, a byte of a
// hash rewritten about 0.7 ns, a byte of a hash rendered about 4 ns, INFO about 30 µs. A
// command past a bound answers an error and makes EXEC answer -EXECABORT, as one past the
// bytes does.

// Defaults of the MULTI bounds.
const (
	DefaultMultiMaxCommands = 100_000
	DefaultMultiMaxWork     = 50 * time.Millisecond
)

// Estimated costs, ns.
const (
	workCommand  = 300
	workKey      = 600
	workScanKey  = 50
	workInfo     = 30_000
	workByte     = 1 // a byte of a value or hash read or rewritten
	workRendered = 4 // a byte of a hash rendered whole (HGETALL, HKEYS, HVALS)
)

// txWork estimates the loop time (ns) command args (spec: its entry) will take when EXEC
// runs it on cs's current database.
func (s *Server) txWork(cs *conn, spec *rediscmd.Spec, args [][]byte) int64 {
	db := cs.slock.text.DB
	w := int64(workCommand)
	value := func(k []byte) int64 { return int64(len(s.st.locks.Value(db, cs.slock.text.KeyID(k)))) }
	switch spec.Cmd {
	case rediscmd.CmdMGet, rediscmd.CmdWatch:
		w += workKey * int64(len(args)-1)
	case rediscmd.CmdMSet, rediscmd.CmdMSetNX:
		w += workKey * int64(len(args)/2)
	case rediscmd.CmdScan:
		var q rediscmd.Scan
		if rediscmd.ParseScan(args, &q) == nil {
			w += workScanKey * int64(q.Count)
		}
	case rediscmd.CmdInfo:
		w += workInfo
	case rediscmd.CmdPublish: // the channel tested against every pattern, about a ns a byte (pubsub.go)
		if len(args) > 1 {
			w += workByte * int64(len(s.ps.patIdx)) * int64(len(args[1]))
		}
	case rediscmd.CmdHash:
		n := value(args[1])
		switch spec.Hash {
		case rediscmd.HashGetAll, rediscmd.HashKeys, rediscmd.HashVals:
			w += workRendered * n
		default:
			w += workByte * n
		}
	case rediscmd.CmdKV:
		switch spec.Op {
		case rediscmd.OpKeys:
			w += workScanKey * int64(s.st.locks.ValueCount(db))
		case rediscmd.OpDel, rediscmd.OpExists:
			w += workKey * int64(len(args)-1)
		case rediscmd.OpGet, rediscmd.OpGetSet, rediscmd.OpAppend, rediscmd.OpSet, rediscmd.OpStrlen, rediscmd.OpGetDel, rediscmd.OpGetEx, rediscmd.OpDelEx, rediscmd.OpDigest:
			w += workByte * value(args[1])
		}
	}
	for _, a := range args[1:] {
		w += workByte * int64(len(a)) / 8 // copying the arguments in and out
	}
	return w
}

// txLimit says why cs cannot queue command args (spec: its entry) with its transaction's
// bounds, "" if it can; work is the command's estimate.
func (s *Server) txLimit(cs *conn, work int64) string {
	tx := &cs.slock.tx
	switch max := s.cfg.MultiMaxCommands; {
	case max > 0 && tx.n >= max:
		return "ERR MULTI queue over " + strconv.Itoa(max) +
			" commands (--multi-max-commands): the transaction will be discarded"
	}
	if max := int64(s.cfg.MultiMaxWork); max > 0 && tx.work+work > max {
		return "ERR MULTI queue over an estimated " + time.Duration(max).String() +
			" of work for EXEC (--multi-max-work): the transaction will be discarded"
	}
	return ""
}

// txRefuse drops cs's queue for a bound it passed: EXEC will abort.
func (s *Server) txRefuse(cs *conn, b []byte, why string) []byte {
	tx := &cs.slock.tx
	tx.dirty = true
	tx.queue, tx.n, tx.work = nil, 0, 0
	s.noteTx(cs)
	return resp.AppendError(b, why)
}
