package loop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/panjf2000/gnet/v2"

	"tallyd/proto/resp"
	"tallyd/proto/slock"
	"tallyd/store"
)

// slockConn is the slock state of one connection.
type slockConn struct {
	kind     slock.Kind // Unknown until the first bytes decide
	clientID [16]byte   // from INIT
	hasInit  bool
	wills    []store.LockCommand // WILL_LOCK / WILL_UNLOCK, run at close (data copied)

	// Redis-text side.
	text     slock.Text
	waiting  bool     // a LOCK/UNLOCK is unresolved: later commands wait behind it
	waitID   [16]byte // its RequestId
	waitLock bool     // it is a LOCK (its LockId becomes the default for UNLOCK)
	seq      uint64   // for RequestIds and LockIds of text commands
	kv       slock.KV // the key/value command being served
	kvActive bool     // the awaited reply is kv's
	kvMulti  bool     // kv is a DEL or EXISTS of several keys: replies are counted
	kvN      int64    // their count
	kvInt    int64    // the INCR family's new value

	// Replies held until the append-only log has the records before them (persist.go).
	held    []byte
	heldSeq uint64
	inHeld  bool
}

// pendingWill is a will command, or the disconnect itself, of a closed connection, to run
// once the current delivery is over.
type pendingWill struct {
	owner      store.Owner
	cmd        store.LockCommand
	disconnect bool // Locks.Disconnected rather than a command
}

// ownedExec is an EXECUTE inner command with its frame copied out of the store.
type ownedExec struct {
	owner store.Owner
	db    uint8
	frame []byte
}

// serveSlock sniffs a new connection's protocol, then serves its frames or commands.
func (s *Server) serveSlock(cs *conn, now int64) gnet.Action {
	sc := cs.slock
	s.persist.lastNow = now
	if len(sc.held) > s.cfg.MaxOutput {
		return gnet.None // its replies wait for the log: read on once they are out
	}
	if sc.kind == slock.Unknown {
		buf, _ := cs.c.Peek(-1)
		kind, ok := slock.Sniff(buf)
		if !ok {
			return gnet.None // one byte of a magic: wait for the next
		}
		if kind == slock.Unknown {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Str("remote", cs.c.RemoteAddr().String()).
				Msg("closing slock connection: inline text command (only RESP arrays and binary frames are spoken)")
			return gnet.Close
		}
		sc.kind = kind
	}
	s.serving = cs
	defer func() { s.serving = nil }()
	s.out = s.out[:0]
	var act gnet.Action
	if sc.kind == slock.Binary {
		act = s.slockBinary(cs, now)
	} else {
		act = s.slockText(cs, now)
	}
	if act != gnet.None || cs.closed {
		s.write(cs, s.out)
		return gnet.Close
	}
	if !s.write(cs, s.out) {
		return gnet.Close
	}
	return s.checkInput(cs)
}

// slockBinary serves the whole 64-byte frames buffered on cs.
func (s *Server) slockBinary(cs *conn, now int64) gnet.Action {
	c := cs.c
	buf, _ := c.Peek(-1)
	used := 0
	defer func() {
		if used > 0 && !cs.closed {
			_, _ = c.Discard(used)
		}
	}()
	for used < len(buf) && cs.slock.kind == slock.Binary {
		n, err := s.slockDec.Parse(buf[used:], &s.frame)
		if err != nil {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Str("remote", c.RemoteAddr().String()).Err(err).
				Msg("closing slock connection: bad frame")
			s.out = slock.AppendErrorReply(s.out, err)
			return gnet.Close
		}
		if n == 0 {
			break
		}
		used += n
		f := &s.frame
		s.m.slockFrame(f.Type)
		switch f.Type {
		case slock.TypeLock, slock.TypeUnlock:
			s.lockCmd = frameCommand(f)
			s.runLock(cs.owner, &s.lockCmd, now)
		case slock.TypeWillLock, slock.TypeWillUnlock:
			cmd := frameCommand(f)
			cmd.Data = append([]byte(nil), cmd.Data...)
			cs.slock.wills = append(cs.slock.wills, cmd)
		case slock.TypeInit:
			s.slockInit(cs, f)
		case slock.TypePing, slock.TypeAdmin:
			s.out = slock.AppendSimple(s.out, f.Type, f.RequestID, slock.ResultOK)
			if f.Type == slock.TypeAdmin {
				cs.slock.kind = slock.RESP // the connection speaks Redis text from now on
			}
		case slock.TypeQuit:
			s.out = slock.AppendSimple(s.out, f.Type, f.RequestID, slock.ResultOK)
			return gnet.Close
		case slock.TypeState:
			st, ok := s.locks.State(f.DB)
			s.out = slock.AppendState(s.out, f.RequestID, stateOf(f.DB, st, ok))
		case slock.TypeLeader:
			s.out = slock.AppendLeader(s.out, f.RequestID, s.leaderAddr())
		case slock.TypeCall:
			s.slockCall(cs, f)
		default:
			s.out = slock.AppendSimple(s.out, f.Type, f.RequestID, slock.ResultUnknownCommand)
		}
		if cs.closed {
			return gnet.Close
		}
		if len(s.out) >= flushAt && !s.write(cs, s.out) {
			return gnet.Close
		}
	}
	if cs.slock.kind == slock.RESP && used < len(buf) { // ADMIN switched it: serve the rest as text
		_, _ = c.Discard(used)
		used = 0
		return s.slockText(cs, now)
	}
	return gnet.None
}

// frameCommand converts a decoded frame to the store's command (Data stays a view).
func frameCommand(f *slock.Frame) store.LockCommand {
	t := uint8(f.Type)
	switch f.Type {
	case slock.TypeWillLock:
		t = uint8(slock.TypeLock)
	case slock.TypeWillUnlock:
		t = uint8(slock.TypeUnlock)
	}
	return store.LockCommand{Type: t, RequestID: f.RequestID, Flag: f.Flag, DB: f.DB,
		LockID: f.LockID, Key: f.Key, Timeout: f.Timeout, TimeoutFlag: f.TimeoutFlag,
		Expried: f.Expried, ExpriedFlag: f.ExpriedFlag, Count: f.Count, Rcount: f.Rcount, Data: f.Data}
}

func stateOf(db uint8, st store.LockState, exists bool) *slock.State {
	out := &slock.State{DB: db}
	if exists {
		out.DBState = 1
		out.LockCount, out.UnlockCount = st.LockCount, st.UnLockCount
		out.LockedCount, out.WaitCount = st.LockedCount, st.WaitCount
		out.TimeoutedCount, out.ExpriedCount = st.TimeoutedCount, st.ExpriedCount
		out.UnlockErrorCount, out.KeyCount = st.UnlockErrorCount, st.KeyCount
	}
	return out
}

// slockInit registers the connection under its ClientId: frames for locks of an earlier,
// closed connection with the same ClientId come here from now on.
func (s *Server) slockInit(cs *conn, f *slock.Frame) {
	init := uint8(slock.InitStandalone)
	if old := s.slockClients[f.ClientID]; old != nil && old != cs {
		init |= slock.InitKnownClient
	}
	if cs.slock.hasInit && cs.slock.clientID != f.ClientID && s.slockClients[cs.slock.clientID] == cs {
		delete(s.slockClients, cs.slock.clientID)
	}
	cs.slock.clientID, cs.slock.hasInit = f.ClientID, true
	s.slockClients[f.ClientID] = cs
	s.out = slock.AppendInit(s.out, f.RequestID, init)
}

// leaderAddr is the address a standalone server names as the leader.
func (s *Server) leaderAddr() string {
	for i, l := range s.cfg.Listeners {
		if l.Proto == ProtoSlock {
			if a := s.Addr(i); a != nil {
				return a.String()
			}
		}
	}
	return ""
}

// runLock runs one command and delivers everything it causes.
func (s *Server) runLock(owner store.Owner, cmd *store.LockCommand, now int64) {
	s.m.lockBegin(owner, cmd, false)
	s.lockReplies, s.execs = s.locks.Do(owner, cmd, now, s.lockReplies[:0], s.execs[:0])
	s.drainLocks(now)
	s.m.lockFinish()
}

// drainLocks delivers the replies of the last Locks call, then runs the EXECUTE inner
// commands and the will commands of closed connections it led to, one at a time. Each
// Locks call invalidates the values and frames of the one before, so replies go out and
// EXECUTE frames are copied before the next call.
func (s *Server) drainLocks(now int64) {
	if s.draining {
		return // the outer call delivers what was just added
	}
	s.draining = true
	defer func() { s.draining = false }()
	for {
		for i := range s.lockReplies {
			s.deliverLock(&s.lockReplies[i])
		}
		s.lockReplies = s.lockReplies[:0]
		for _, x := range s.execs {
			s.execQueue = append(s.execQueue, ownedExec{x.Owner, x.DB, append([]byte(nil), x.Frame...)})
		}
		s.execs = s.execs[:0]
		s.discardOwner = 0
		switch {
		case len(s.execQueue) > 0:
			x := s.execQueue[0]
			s.execQueue = s.execQueue[1:]
			var f slock.Frame
			n, err := s.slockDec.Parse(x.frame, &f)
			if err != nil || n == 0 || (f.Type != slock.TypeLock && f.Type != slock.TypeUnlock) || f.DB != x.db {
				continue // malformed EXECUTE content is silently ignored
			}
			cmd := frameCommand(&f)
			s.m.lockBegin(x.owner, &cmd, true)
			s.lockReplies, s.execs = s.locks.Do(x.owner, &cmd, now, s.lockReplies, s.execs)
		case len(s.willQueue) > 0:
			w := s.willQueue[0]
			s.willQueue = s.willQueue[1:]
			if w.disconnect {
				s.locks.Disconnected(w.owner, now)
				continue
			}
			s.discardOwner = w.owner // a will's own results are discarded
			s.m.lockBegin(w.owner, &w.cmd, true)
			s.lockReplies, s.execs = s.locks.Do(w.owner, &w.cmd, now, s.lockReplies, s.execs)
		default:
			s.execQueue, s.willQueue = s.execQueue[:0], s.willQueue[:0]
			return
		}
	}
}

// deliverLock sends one reply to the connection it is for: its owner, or, when that one
// has closed, the newest connection that sent INIT with the same ClientId; else it is
// dropped (locks outlive their connections).
func (s *Server) deliverLock(r *store.LockReply) {
	s.m.lockReply(r)
	if r.Owner == s.discardOwner && r.Owner != 0 {
		return
	}
	cs := s.conns[r.Owner]
	if cs == nil {
		if cid, ok := s.slockClosed[r.Owner]; ok {
			cs = s.slockClients[cid]
		}
	}
	if cs == nil || cs.closed || cs.slock == nil {
		return
	}
	rep := slock.LockReply{Type: slock.Type(r.Type), RequestID: r.RequestID, Result: slock.Result(r.Result),
		DB: r.DB, LockID: r.LockID, Key: r.Key, Lcount: r.Lcount, Count: r.Count, Lrcount: r.Lrcount,
		Rcount: r.Rcount, Value: r.Value}
	sc := cs.slock
	if sc.kind != slock.Binary {
		if !sc.waiting || r.RequestID != sc.waitID {
			return // text connections see only the reply they wait for
		}
		sc.waiting = false
		if sc.kvActive {
			s.kvReply(cs, &rep)
			return
		}
		if r.Result == store.LockOK {
			if sc.waitLock {
				sc.text.LastLockID = r.LockID
			} else {
				sc.text.LastLockID = [16]byte{}
			}
		}
		s.sendTo(cs, slock.AppendTextLockReply(s.scratchFor(cs), &rep))
		if cs != s.serving {
			_ = cs.c.Wake(nil) // serve the commands that waited behind it
		}
		return
	}
	s.sendTo(cs, slock.AppendLockReply(s.scratchFor(cs), &rep))
}

// scratchFor returns where a reply for cs is built: the batch being built for it, or the
// shared scratch buffer for a write to another connection.
func (s *Server) scratchFor(cs *conn) []byte {
	if cs == s.serving {
		return s.out
	}
	return s.scratch[:0]
}

// sendTo finishes a reply built on scratchFor(cs).
func (s *Server) sendTo(cs *conn, b []byte) {
	if cs == s.serving {
		s.out = b
		return
	}
	s.scratch = b[:0]
	s.m.bytesSent(cs.proto, len(b))
	if s.holdReply(cs, b) {
		return
	}
	if _, err := cs.c.Write(b); err == nil && !cs.closed {
		if n := cs.c.OutboundBuffered(); n > s.cfg.MaxOutput {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Int("unsent", n).Int("limit", s.cfg.MaxOutput).
				Msg("closing connection: too many unsent replies (max-output)")
			_ = cs.c.Close()
		}
	}
}

// slockClose runs at a slock connection's close: its will commands run, its keep-alive
// locks start to expire, and frames for its locks go to a later connection with its
// ClientId, if one comes.
func (s *Server) slockClose(cs *conn, now int64) {
	sc := cs.slock
	for _, w := range sc.wills {
		s.willQueue = append(s.willQueue, pendingWill{owner: cs.owner, cmd: w})
	}
	sc.wills = nil
	s.willQueue = append(s.willQueue, pendingWill{owner: cs.owner, disconnect: true})
	if sc.hasInit {
		s.slockClosed[cs.owner] = sc.clientID
		if s.slockClients[sc.clientID] == cs {
			delete(s.slockClients, sc.clientID)
		}
	}
	s.drainLocks(now)
}

// slockExpire delivers the replies of the waits and expiries that the tick's Advance
// found due, and runs the EXECUTEs they led to.
func (s *Server) slockExpire(now int64) {
	if d := &s.due; len(d.Replies) > 0 || len(d.Execs) > 0 {
		s.m.lockBegin(0, nil, true)
		s.lockReplies = append(s.lockReplies[:0], d.Replies...)
		s.execs = append(s.execs[:0], d.Execs...)
		s.drainLocks(now)
	}
}

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
		used += n
		if len(args) == 0 {
			continue
		}
		if s.slockCommand(cs, args, now) {
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

// slockCommand runs one text command; true means close the connection after the reply.
func (s *Server) slockCommand(cs *conn, args [][]byte, now int64) (quit bool) {
	sc := cs.slock
	name := args[0]
	defer s.textDone(s.textBegin(name))
	switch {
	case resp.Is(name, "LOCK"), resp.Is(name, "UNLOCK"), resp.Is(name, "PUSH"):
		s.dataBuf = s.dataBuf[:0]
		var f slock.Frame
		will, buf, err := slock.ParseTextLock(args, &sc.text, func() [16]byte { return s.textID(cs) }, &f, s.dataBuf)
		s.dataBuf = buf
		if err != nil {
			var te *slock.TextError
			if errors.As(err, &te) {
				s.out = resp.AppendError(s.out, "ERR "+te.Msg)
			} else {
				s.out = resp.AppendError(s.out, "ERR "+err.Error())
			}
			return false
		}
		cmd := frameCommand(&f)
		if will {
			cmd.Data = append([]byte(nil), cmd.Data...)
			sc.wills = append(sc.wills, cmd)
			s.out = resp.AppendSimple(s.out, "OK")
			return false
		}
		if resp.Is(name, "PUSH") {
			s.out = resp.AppendSimple(s.out, "OK") // PUSH does not wait for the result
			s.runLock(cs.owner, &cmd, now)
			return false
		}
		sc.waiting, sc.waitID, sc.waitLock = true, cmd.RequestID, cmd.Type == uint8(slock.TypeLock)
		s.runLock(cs.owner, &cmd, now)
	case resp.Is(name, "PING"):
		if len(args) > 1 {
			s.out = resp.AppendBulk(s.out, args[1])
		} else {
			s.out = resp.AppendSimple(s.out, "PONG")
		}
	case resp.Is(name, "ECHO"):
		if len(args) != 2 {
			s.out = resp.AppendError(s.out, "ERR wrong number of arguments for 'echo' command")
		} else {
			s.out = resp.AppendBulk(s.out, args[1])
		}
	case resp.Is(name, "QUIT"):
		s.out = resp.AppendSimple(s.out, "OK")
		return true
	case resp.Is(name, "SELECT"):
		n, ok := resp.ParseInt(argAt(args, 1))
		if !ok || n < 0 || n > store.MaxLockDB {
			s.out = resp.AppendError(s.out, "ERR DB index is out of range")
		} else {
			sc.text.DB = uint8(n)
			s.out = resp.AppendSimple(s.out, "OK")
		}
	case resp.Is(name, "TIMEOUT"):
		switch {
		case resp.Is(argAt(args, 1), "SET"):
			n, ok := resp.ParseInt(argAt(args, 2))
			if !ok || n < 0 || n > 0xffffffff {
				s.out = resp.AppendError(s.out, "ERR Command Parse Args Error")
			} else {
				sc.text.Timeout, sc.text.TimeoutFlag = uint16(n), uint16(n>>16)
				s.out = resp.AppendSimple(s.out, "OK")
			}
		case resp.Is(argAt(args, 1), "GET"):
			s.out = resp.AppendInt(s.out, int64(sc.text.TimeoutFlag)<<16|int64(sc.text.Timeout))
		default:
			s.out = resp.AppendError(s.out, "ERR Command Parse Args Error")
		}
	case resp.Is(name, "INFO"):
		s.out = resp.AppendBulk(s.out, resp.InfoSections(s.slockInfo(now), args[1:]))
	default:
		if op, cname := slock.LookupKV(name); op != slock.OpNone {
			s.slockKV(cs, args, op, cname, now)
		} else if !s.slockAdmin(cs, args) {
			s.out = resp.AppendError(s.out, "ERR Unknown Command")
		}
	}
	return false
}

func argAt(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// textID makes a RequestId or LockId for a text command: unique per server run.
func (s *Server) textID(cs *conn) (id [16]byte) {
	cs.slock.seq++
	binary.BigEndian.PutUint64(id[:8], uint64(s.started)^uint64(cs.owner)<<20)
	binary.BigEndian.PutUint64(id[8:], uint64(cs.owner)<<32|cs.slock.seq)
	return id
}

// slockInfo renders INFO: the server, its clients, and each database's lock counts.
func (s *Server) slockInfo(now int64) []byte {
	b := s.infoBuf[:0]
	b = append(b, "# Server\r\nredis_version:7.0.0\r\ntallyd_version:"...)
	b = append(b, s.cfg.Version...)
	b = append(b, "\r\nredis_mode:standalone\r\nserver_name:tallyd\r\nprocess_id:"...)
	b = strconv.AppendInt(b, int64(os.Getpid()), 10)
	b = append(b, "\r\nuptime_in_seconds:"...)
	b = strconv.AppendInt(b, (now-s.started)/1e9, 10)
	b = append(b, "\r\n\r\n# Clients\r\nconnected_clients:"...)
	b = strconv.AppendUint(b, s.stats[ProtoSlock].CurrConnections, 10)
	b = append(b, "\r\ntotal_connections_received:"...)
	b = strconv.AppendUint(b, s.stats[ProtoSlock].TotalConnections, 10)
	b = append(b, "\r\n\r\n"...)
	b = s.appendPersistInfo(b)
	b = append(b, "# Keyspace\r\n"...)
	for db := 0; db <= store.MaxLockDB; db++ {
		st, ok := s.locks.State(uint8(db))
		if !ok {
			continue
		}
		b = fmt.Appendf(b, "db%d:keys=%d,locked=%d,waiting=%d,lock_count=%d,unlock_count=%d,timeouted=%d,expried=%d,unlock_errors=%d\r\n",
			db, st.KeyCount, st.LockedCount, st.WaitCount, st.LockCount, st.UnLockCount,
			st.TimeoutedCount, st.ExpriedCount, st.UnlockErrorCount)
	}
	s.infoBuf = b
	return b
}

// slockCall answers a CALL: the LIST_LOCK, LIST_LOCKED and LIST_WAIT listings.
func (s *Server) slockCall(cs *conn, f *slock.Frame) {
	method := string(f.Method)
	var body []byte
	switch method {
	case slock.MethodListLock:
		req, err := slock.ParseListLockRequest(f.Body)
		if err != nil {
			s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownError, slock.ErrTypeDecode, nil)
			return
		}
		infos, ok := s.locks.ListLocks(dbOf(req.DB), nil)
		if !ok {
			s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownDB, slock.ErrTypeUnknownDB, nil)
			return
		}
		list := make([]slock.ListLock, len(infos))
		for i := range infos {
			list[i] = slock.ListLock{Key: infos[i].Key, LockedCount: infos[i].Levels, Data: lockData(&infos[i].Data)}
		}
		body = slock.AppendListLockResponse(nil, list)
	case slock.MethodListLocked, slock.MethodListWait:
		req, err := slock.ParseListKeyRequest(f.Body)
		if err != nil {
			s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownError, slock.ErrTypeDecode, nil)
			return
		}
		var info store.LockInfo
		var st store.ListStatus
		if method == slock.MethodListLocked {
			var holders []store.HolderInfo
			info, holders, st = s.locks.ListLocked(dbOf(req.DB), req.Key, nil)
			if st == store.ListOK {
				r := &slock.ListLocked{Key: info.Key, LockedCount: info.Levels, Data: lockData(&info.Data)}
				for _, h := range holders {
					r.Locks = append(r.Locks, slock.Locked{LockID: h.LockID, StartTime: uint64(h.Start),
						TimeoutTime: uint64(h.Timeout), ExpriedTime: uint64(h.Expires), LockedCount: uint32(h.Levels),
						IsLongTime: h.LongTime, Command: callCommand(&h.Command)})
				}
				body = slock.AppendListLockedResponse(nil, r)
			}
		} else {
			var waiters []store.WaiterInfo
			info, waiters, st = s.locks.ListWait(dbOf(req.DB), req.Key, nil)
			if st == store.ListOK {
				r := &slock.ListWait{Key: info.Key, LockedCount: info.Levels, Data: lockData(&info.Data)}
				for _, w := range waiters {
					r.Waits = append(r.Waits, slock.Wait{LockID: w.LockID, StartTime: uint64(w.Start),
						TimeoutTime: uint64(w.Timeout), IsLongTime: w.LongTime, Command: callCommand(&w.Command)})
				}
				body = slock.AppendListWaitResponse(nil, r)
			}
		}
		switch st {
		case store.ListNoDB:
			s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownDB, slock.ErrTypeUnknownDB, nil)
			return
		case store.ListNoLock:
			s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownDB, slock.ErrTypeLockManager, nil)
			return
		}
	default:
		s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultUnknownCommand, "", nil)
		return
	}
	s.out = slock.AppendCall(s.out, f.RequestID, slock.ResultOK, "", body)
}

// dbOf maps a listing's db_id to a DbId (out of range: one that never exists).
func dbOf(db uint32) uint8 {
	if db > store.MaxLockDB {
		return store.MaxLockDB + 1
	}
	return uint8(db)
}

func lockData(d *store.LockData) *slock.LockData {
	if d.Record == nil {
		return nil
	}
	return &slock.LockData{Value: d.Value, Cmd: uint32(d.Command), Flag: uint32(d.Flag)}
}

func callCommand(c *store.LockCommand) slock.Command {
	return slock.Command{RequestID: c.RequestID, Flag: c.Flag, LockID: c.LockID, Key: c.Key,
		TimeoutFlag: c.TimeoutFlag, Timeout: c.Timeout, ExpriedFlag: c.ExpriedFlag, Expried: c.Expried,
		Count: c.Count, Rcount: c.Rcount}
}
