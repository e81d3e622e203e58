package loop

import (
	"github.com/panjf2000/gnet/v2"

	"tallyd/proto/counter"
	"tallyd/store"
)

const (
	// flushAt is the reply size at which a long pipelined batch is written before parsing on.
	flushAt = 256 << 10
	// dumpChunk is how much of a Dump is produced per turn before other connections get theirs.
	dumpChunk = 128 << 10
	// keepOut is the largest reply buffer kept between wake-ups.
	keepOut = 1 << 20
)

// serveYrmcds handles every whole request buffered on a yrmcds (counter or semaphore)
// connection and writes the replies once.
func (s *Server) serveYrmcds(cs *conn, now int64) gnet.Action {
	c := cs.c
	out := s.out[:0]
	if cs.dump != nil {
		if c.OutboundBuffered() >= s.cfg.MaxOutput/2 {
			return s.checkInput(cs) // the client is slow to read: resume from a tick
		}
		out = s.streamDump(cs, out, now)
	}
	used := 0
	if cs.dump == nil {
		buf, _ := c.Peek(-1) // valid until Discard or return
		dec := &s.decoders[cs.proto]
		for used < len(buf) {
			n, err := dec.Parse(buf[used:], &s.req)
			if err != nil {
				s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
					Str("remote", cs.c.RemoteAddr().String()).Err(err).
					Msg("closing connection: request framing lost")
				s.write(cs, out) // replies to the requests before it still go out
				return gnet.Close
			}
			if n == 0 {
				break // a partial frame stays buffered until more bytes arrive
			}
			used += n
			mark := len(out)
			out = s.yrmcds(cs, &s.req, out, now)
			s.m.countYrmcds(cs.proto, s.req.Opcode, out[mark:])
			if cs.dump != nil {
				out = s.streamDump(cs, out, now)
				if cs.dump != nil {
					break // requests behind a streaming Dump wait for it
				}
			}
			if len(out) >= flushAt {
				if !s.write(cs, out) {
					return gnet.Close
				}
				out = out[:0]
			}
		}
		if used > 0 {
			_, _ = c.Discard(used)
		}
	}
	if !s.write(cs, out) {
		return gnet.Close
	}
	if cs.dump != nil && c.OutboundBuffered() == 0 {
		_ = c.Wake(nil) // the socket took it all: continue on the next turn of the loop
	}
	return s.checkInput(cs)
}

// write sends out on cs and enforces the output limit; false means the connection is closed
// or must be.
func (s *Server) write(cs *conn, out []byte) bool {
	if cap(out) <= keepOut {
		s.out = out[:0]
	} else {
		s.out = make([]byte, 0, 64<<10)
	}
	s.m.bytesSent(cs.proto, len(out))
	if len(out) == 0 || cs.slock != nil && s.holdReply(cs, out) {
		return !cs.closed
	}
	if _, err := cs.c.Write(out); err != nil || cs.closed {
		return false // a failed write has already run OnClose
	}
	if n := cs.c.OutboundBuffered(); n > s.cfg.MaxOutput {
		s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
			Str("remote", cs.c.RemoteAddr().String()).Int("unsent", n).Int("limit", s.cfg.MaxOutput).
			Msg("closing connection: too many unsent replies (max-output)")
		return false
	}
	return true
}

// checkInput closes a connection whose unparsed input has grown past the limit (a client
// that pipelines without end behind a streaming Dump).
func (s *Server) checkInput(cs *conn) gnet.Action {
	if n := cs.c.InboundBuffered(); n > s.cfg.MaxInput {
		if missed, ok := s.inputLog.allow(s.now()); ok {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Int("unparsed", n).Int("limit", s.cfg.MaxInput).Uint64("more_since_last_line", missed).
				Msg("closing connection: too much unparsed input (max-input)")
		}
		return gnet.Close
	}
	return gnet.None
}

// yrmcds applies one decoded request and appends its reply.
func (s *Server) yrmcds(cs *conn, r *counter.Request, out []byte, now int64) []byte {
	if r.Status != counter.StatusOK {
		return counter.AppendError(out, r.Opcode, r.Status, r.Opaque)
	}
	st := &s.stats[cs.proto]
	if cmd, ok := counter.StatCmdOf(r.Opcode); ok {
		st.Commands[cmd]++
	}
	isCounter := cs.proto == ProtoCounter
	switch r.Opcode {
	case counter.OpNoop:
		return counter.AppendOK(out, r.Opcode, r.Opaque)
	case counter.OpGet:
		var v uint32
		var ok bool
		if isCounter {
			v, ok = s.counters.Get(r.Name)
		} else {
			v, ok = s.semaphores.Get(r.Name)
		}
		if !ok {
			return counter.AppendError(out, r.Opcode, counter.StatusNotFound, r.Opaque)
		}
		return counter.AppendUint32(out, r.Opcode, r.Opaque, v)
	case counter.OpAcquire:
		var res store.Result
		if isCounter {
			res = s.counters.Acquire(cs.ledger, r.Name, r.Resources, r.Maximum, now)
		} else {
			res = s.semaphores.Acquire(cs.ledger, r.Name, r.Resources, r.Maximum, now)
		}
		if res != store.OK {
			return s.storeError(cs, out, r, res)
		}
		return counter.AppendUint32(out, r.Opcode, r.Opaque, r.Resources)
	case counter.OpRelease:
		var res store.Result
		if isCounter {
			res = s.counters.Release(cs.ledger, r.Name, r.Resources, now)
		} else {
			res = s.semaphores.Release(cs.ledger, r.Name, r.Resources, now)
		}
		if res != store.OK {
			return s.storeError(cs, out, r, res)
		}
		return counter.AppendOK(out, r.Opcode, r.Opaque)
	case counter.OpStats:
		var info store.Info
		if isCounter {
			info = s.counters.Info()
		} else {
			info = s.semaphores.Info()
		}
		return counter.AppendServerStats(out, r.Opaque, &counter.ServerStats{
			Objects: info.Objects, TotalObjects: info.TotalObjects, UsedMemory: info.UsedMemory,
			GCCount: st.GCCount, LastGCElapsed: st.LastGCElapsed, TotalGCElapsed: st.TotalGCElapsed,
			CurrConnections: st.CurrConnections, TotalConnections: st.TotalConnections,
			Commands: st.Commands, WithDump: isCounter})
	case counter.OpDump: // the decoder refuses Dump in the semaphore dialect
		cs.dump = s.counters.DumpStart()
		cs.dumpOp = r.Opaque
		return out
	}
	return counter.AppendError(out, r.Opcode, counter.StatusUnknownCommand, r.Opaque)
}

// storeError appends the reply for a refused store operation.
func (s *Server) storeError(cs *conn, out []byte, r *counter.Request, res store.Result) []byte {
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
		if missed, ok := s.oomLog.allow(s.now()); ok {
			s.log.Warn().Stringer("proto", cs.proto).Int("max_objects", s.cfg.MaxObjects).
				Uint64("more_since_last_line", missed).Msg("acquire refused: object limit reached (max-objects)")
		}
	}
	return counter.AppendError(out, r.Opcode, st, r.Opaque)
}

// streamDump appends the next part of cs's Dump; when the last counter is out it appends
// the empty terminating reply and ends the dump.
func (s *Server) streamDump(cs *conn, out []byte, now int64) []byte {
	for len(out) < dumpChunk {
		entries, done := s.counters.DumpNext(cs.dump, now, s.dumpBuf[:0])
		for i := range entries {
			e := &entries[i]
			out = counter.AppendDumpEntry(out, cs.dumpOp, e.Current, e.Max, []byte(e.Name))
		}
		if done {
			out = counter.AppendOK(out, counter.OpDump, cs.dumpOp)
			cs.dump = nil
			delete(s.dumping, cs)
			return out
		}
	}
	s.dumping[cs] = struct{}{}
	return out
}
