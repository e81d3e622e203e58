package loop

import (
	"encoding/binary"
	"errors"

	"github.com/panjf2000/gnet/v2"

	"tallyd/proto/resp"
	"tallyd/proto/slock"
)

// This file is slock's Redis-text side: the commands of a connection that speaks RESP,
// looked up in proto/slock's command table and dispatched by their typed form. Key/value
// commands are in slockkv.go.

// slockText serves the Redis-text commands buffered on cs, stopping behind a LOCK or
// UNLOCK that has not resolved yet.
func (s *Server) slockText(cs *conn, now int64) gnet.Action {
	c := cs.c
	sc := cs.slock
	if sc.waiting {
		return gnet.None
	}
	buf, _ := c.Peek(-1)
	used := 0
	defer func() {
		if used > 0 && !cs.closed {
			_, _ = c.Discard(used)
		}
	}()
	for used < len(buf) && !sc.waiting {
		args, n, err := s.respDec.Parse(buf[used:], s.args[:0])
		s.args = args[:0]
		if err != nil {
			why := "bad RESP request"
			if errors.Is(err, resp.ErrInline) {
				why = "inline text command"
			}
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Str("remote", c.RemoteAddr().String()).Err(err).
				Msg("closing slock connection: " + why)
			return gnet.Close
		}
		if n == 0 {
			break
		}
		raw := buf[used : used+n]
		used += n
		if len(args) == 0 {
			continue
		}
		if s.slockCommand(cs, args, raw, now) {
			return gnet.Close
		}
		if cs.closed {
			return gnet.Close
		}
		if len(s.out) >= flushAt && !s.write(cs, s.out) {
			return gnet.Close
		}
	}
	return gnet.None
}

// slockCommand runs one text command line (raw: its bytes as they came); true means close
// the connection after the reply.
func (s *Server) slockCommand(cs *conn, args [][]byte, raw []byte, now int64) (quit bool) {
	sc := cs.slock
	spec := slock.Lookup(args[0])
	defer s.textDone(s.textBegin(args[0]))
	if spec == nil {
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR Unknown Command"))
		return false
	}
	if !spec.ArityOK(len(args)) {
		s.textError(cs, spec.ArityError())
		return false
	}
	r := &sc.req
	var err error
	s.dataBuf, err = slock.Parse(spec, args, &sc.text, now/1e6, func() [16]byte { return s.textID(cs) }, r, s.dataBuf[:0])
	if err != nil {
		s.textError(cs, err)
		return false
	}
	switch spec.Cmd {
	case slock.CmdLock, slock.CmdUnlock, slock.CmdPush:
		s.textLock(cs, r, now)
	case slock.CmdKV:
		s.slockKV(cs, now)
	case slock.CmdPing:
		if len(args) > 1 {
			s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), args[1]))
		} else {
			s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "PONG"))
		}
	case slock.CmdEcho:
		s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), args[1]))
	case slock.CmdQuit:
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return true
	case slock.CmdSelect:
		sc.text.DB = uint8(r.N)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	case slock.CmdTimeout:
		if resp.Is(r.Arg, "SET") {
			sc.text.Timeout, sc.text.TimeoutFlag = uint16(r.N), uint16(r.N>>16)
			s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		} else {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(sc.text.TimeoutFlag)<<16|int64(sc.text.Timeout)))
		}
	case slock.CmdInfo:
		s.sendTo(cs, resp.AppendBulk(s.scratchFor(cs), resp.InfoSections(s.slockInfo(now), args[1:])))
	case slock.CmdConfig, slock.CmdClient, slock.CmdCommand:
		s.slockAdmin(cs, args)
	default:
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR Unknown Command"))
	}
	return false
}

// textError answers the command being served with err (slock.AppendTextError).
func (s *Server) textError(cs *conn, err error) {
	s.sendTo(cs, slock.AppendTextError(s.scratchFor(cs), err))
}

// textLock runs a text LOCK, UNLOCK or PUSH; LOCK and UNLOCK answer when it resolves.
func (s *Server) textLock(cs *conn, r *slock.Request, now int64) {
	sc := cs.slock
	cmd := frameCommand(&r.Frame)
	if r.Will {
		cmd.Data = append([]byte(nil), cmd.Data...)
		sc.wills = append(sc.wills, cmd)
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
		return
	}
	if r.Spec.Cmd == slock.CmdPush {
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK")) // PUSH does not wait for the result
		s.runLock(cs.owner, &cmd, now)
		return
	}
	sc.waiting, sc.waitID, sc.waitLock = true, cmd.RequestID, cmd.Type == uint8(slock.TypeLock)
	s.runLock(cs.owner, &cmd, now)
}

// textID makes a RequestId or LockId for a text command: unique per server run.
func (s *Server) textID(cs *conn) (id [16]byte) {
	cs.slock.seq++
	binary.BigEndian.PutUint64(id[:8], uint64(s.started)^uint64(cs.owner)<<20)
	binary.BigEndian.PutUint64(id[8:], uint64(cs.owner)<<32|cs.slock.seq)
	return id
}

func argAt(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}
