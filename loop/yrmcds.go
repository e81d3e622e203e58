package loop

import (
	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/store"
)

// dumpChunk is how much of a Dump is produced per turn before other connections get theirs.
const dumpChunk = 128 << 10

// yrmcdsHandler serves the yrmcds counter protocol, or its semaphore variant.
type yrmcdsHandler struct {
	s       *Server
	dec     counter.Decoder
	req     counter.Request
	dumpBuf []store.DumpEntry
}

func (h *yrmcdsHandler) parse(cs *conn, in []byte) (int, error) {
	n, err := h.dec.Parse(in, &h.req)
	if n == 0 && err == nil {
		cs.need = counter.FrameLen(in) // wait for the whole frame (conn.need)
	}
	return n, err
}

func (h *yrmcdsHandler) exec(cs *conn, now int64) {
	s := h.s
	out, st := s.yrmcdsReq(cs, &h.req, s.out(cs), now)
	if cs.dump != nil {
		out = h.streamDump(cs, out, now)
	}
	s.put(cs, out)
	if cs.busy {
		s.kick(cs) // the dump goes on in a later turn, once the socket has taken this part
	}
	s.m.countYrmcds(cs.proto, h.req.Opcode, st)
}

// more streams the next part of a Dump; requests behind it wait until it is over.
func (h *yrmcdsHandler) more(cs *conn, now int64) {
	if cs.dump != nil && !h.s.full(cs) {
		h.s.put(cs, h.streamDump(cs, h.s.out(cs), now))
	}
	if cs.busy {
		h.s.kick(cs)
	}
}

func (h *yrmcdsHandler) closed(cs *conn, now int64) {
	cs.dump = nil
	h.s.st.family(cs.proto).Drop(cs.ledger, now)
}

// family is the store family a yrmcds listener of proto serves.
func (st *storeState) family(proto Proto) store.Family {
	if proto == ProtoCounter {
		return st.counters
	}
	return st.semaphores
}

// yrmcdsReq applies one decoded request and appends its reply; it returns the reply's status
// (for a Dump, which streams, OK).
func (s *Server) yrmcdsReq(cs *conn, r *counter.Request, out []byte, now int64) ([]byte, counter.Status) {
	if r.Status != counter.StatusOK {
		return counter.AppendError(out, r.Opcode, r.Status, r.Opaque), r.Status
	}
	st := &s.ct.stats[cs.proto]
	if cmd, ok := counter.StatCmdOf(r.Opcode); ok {
		st.Commands[cmd]++
	}
	isCounter := cs.proto == ProtoCounter
	fam := s.st.family(cs.proto)
	switch r.Opcode {
	case counter.OpNoop:
		return counter.AppendOK(out, r.Opcode, r.Opaque), counter.StatusOK
	case counter.OpGet:
		v, ok := fam.Get(r.Name)
		if !ok {
			return counter.AppendError(out, r.Opcode, counter.StatusNotFound, r.Opaque), counter.StatusNotFound
		}
		return counter.AppendUint32(out, r.Opcode, r.Opaque, v), counter.StatusOK
	case counter.OpAcquire:
		if s.cfg.MaxMemory > 0 && s.yrmcdsOOM(cs, r.Name) {
			return counter.AppendError(out, r.Opcode, counter.StatusOutOfMemory, r.Opaque), counter.StatusOutOfMemory
		}
		if res := fam.Acquire(cs.ledger, r.Name, r.Resources, r.Maximum, now); res != store.OK {
			return s.storeError(cs, out, r, res)
		}
		s.m.hot.counter(cs.proto, r.Name, r.Maximum)
		return counter.AppendUint32(out, r.Opcode, r.Opaque, r.Resources), counter.StatusOK
	case counter.OpRelease:
		if res := fam.Release(cs.ledger, r.Name, r.Resources, now); res != store.OK {
			return s.storeError(cs, out, r, res)
		}
		return counter.AppendOK(out, r.Opcode, r.Opaque), counter.StatusOK
	case counter.OpStats:
		info := fam.Info()
		return counter.AppendServerStats(out, r.Opaque, &counter.ServerStats{
			Objects: info.Objects, TotalObjects: info.TotalObjects, UsedMemory: info.UsedMemory,
			GCCount: st.GCCount, LastGCElapsed: st.LastGCElapsed, TotalGCElapsed: st.TotalGCElapsed,
			CurrConnections: st.CurrConnections, TotalConnections: st.TotalConnections,
			Commands: st.Commands, WithDump: isCounter}), counter.StatusOK
	case counter.OpDump: // the decoder refuses Dump in the semaphore dialect
		cs.dump = s.st.counters.DumpStart()
		cs.dumpOp, cs.dumpAc = r.Opaque, r.DumpAcquired
		cs.busy = true
		return out, counter.StatusOK
	}
	return counter.AppendError(out, r.Opcode, counter.StatusUnknownCommand, r.Opaque), counter.StatusUnknownCommand
}

// storeError appends the reply for a refused store operation.
func (s *Server) storeError(cs *conn, out []byte, r *counter.Request, res store.Result) ([]byte, counter.Status) {
	st := counter.StatusInvalid
	switch res {
	case store.NotFound:
		st = counter.StatusNotFound
	case store.NotAvailable:
		st = counter.StatusNotAvailable
	case store.NotAcquired:
		st = counter.StatusNotAcquired
	case store.OutOfMemory:
		st = counter.StatusOutOfMemory
		if missed, ok := s.logs.oom.allow(s.now()); ok {
			s.log.Warn().Stringer("proto", cs.proto).Int("max_objects", s.cfg.MaxObjects).
				Uint64("more_since_last_line", missed).Msg("acquire refused: object limit reached (max-objects)")
		}
	}
	return counter.AppendError(out, r.Opcode, st, r.Opaque), st
}

// streamDump appends the next part of cs's Dump; when the last counter is out it appends
// the empty terminating reply and ends the dump.
func (h *yrmcdsHandler) streamDump(cs *conn, out []byte, now int64) []byte {
	for len(out) < dumpChunk {
		entries, done := h.s.st.counters.DumpNext(cs.dump, now, h.dumpBuf[:0])
		h.dumpBuf = entries[:0]
		for i := range entries {
			e := &entries[i]
			if cs.dumpAc {
				out = counter.AppendDumpEntryAcquired(out, cs.dumpOp, e.Current, e.Max, []byte(e.Name), e.Acquired)
			} else {
				out = counter.AppendDumpEntry(out, cs.dumpOp, e.Current, e.Max, []byte(e.Name))
			}
		}
		if done {
			out = counter.AppendOK(out, counter.OpDump, cs.dumpOp)
			cs.dump, cs.busy = nil, false
			return out
		}
	}
	return out
}
