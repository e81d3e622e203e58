package loop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/proto/acl"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// slockConn is the slock state of one connection.
type slockConn struct {
	kind      slock.Kind // Unknown until the first bytes decide
	clientID  [16]byte   // from INIT
	hasInit   bool
	wills     []store.LockCommand // WILL_LOCK / WILL_UNLOCK, run at close (data copied)
	willBytes int                 // what wills cost, as counted in the memory budget

	// Redis-text side.
	text     rediscmd.Text
	waiting  bool             // a LOCK/UNLOCK is unresolved: later commands wait behind it
	waitID   [16]byte         // its RequestId
	waitLock bool             // it is a LOCK (its LockId becomes the default for UNLOCK)
	req      rediscmd.Request // the command being served (req.KV: the key/value command awaited)
	kvActive bool             // the awaited reply is req.KV's
	kvMulti  bool             // req.KV is one key of a command on several: replies are counted
	kvN      int64            // their count
	tx       txState          // MULTI/EXEC and WATCH (tx.go)
	cont     *textCont        // a command going on across turns (textcont.go)
	name     string           // CLIENT SETNAME's
	subs     *connSubs        // its pub/sub subscriptions (pubsub.go)
	kvName   []byte           // the name of the key req.KV's awaited reply is about, for notifications
	kvKeep   []byte           // kvName copied, while the command waits
	kvPast   bool             // req.KV is an EXPIRE to a time past: the key is deleted
	pushID   [16]byte         // the RequestId of the PUSH being run (its reply is not awaited)

	client    uint64 // its cluster-wide client id (fence.go), 0 until it needs one
	lockedOne bool   // cluster mode: it took a lock at CONSISTENCY ONE (lost at a failover, maybe)

	// Access (auth.go, admit.go).
	user   *acl.User // logged in as (AUTH, HELLO AUTH); nil: the default user, if it needs no password
	noUser bool      // a virtual connection whose follower named a user this member does not have (or has off)
	gate   gate      // what it may speak, decided at accept
	remote net.Addr  // where it comes from, as admit judged it (remoteAddr)

	// Cluster mode (cluster_fwd.go).
	lvl         Level  // CONSISTENCY; 0 is the default, QUORUM
	session     uint64 // its session on the leader (a follower's client), 0 if none
	link        *conn  // the link that session is on
	outstanding int    // text commands forwarded and not yet answered
	fwdSince    int64  // Unix ns the leader last answered it, or it forwarded to an idle session
	fwdTx       bool   // a MULTI was forwarded: everything goes to the leader until EXEC or DISCARD
	touched     bool   // it ran lock or transaction commands: its state dies with the leader's
	waitSince   int64  // Unix ns its next command started waiting for a leader (0: not waiting)
	onWaiting   bool   // on clusterState.waiting
	expired     bool   // it waited past --cluster-timeout: its commands are answered CLUSTERDOWN
	local       bool   // the command being served only touches the connection's own settings
	fwdWait     bool   // a follower's: a WAIT is among the commands forwarded (it may wait for long)

	// WAIT (wait.go).
	wr   cluster.WriteMark // its last write, on a leader (WAIT, wait.go)
	repl replWait          // a WAIT that blocks it
}

// level is the connection's consistency level.
func (sc *slockConn) level() Level {
	if sc.lvl == 0 {
		return LevelQuorum
	}
	return sc.lvl
}

func newSlockConn() *slockConn { return &slockConn{text: rediscmd.Text{Timeout: 15}} }

// slockState is what the slock handlers share: the lock store's latest replies and what they
// led to, and the connections by INIT ClientId.
type slockState struct {
	replies   []store.LockReply
	execs     []store.Exec
	execQueue []ownedExec
	willQueue []pendingWill
	clients   map[[16]byte]*conn       // live connections by INIT ClientId
	closed    map[store.Owner][16]byte // closed connections that had sent INIT
	dataBuf   []byte                   // data records of the text command being served
	infoBuf   []byte
	info      resp.Info // INFO's figures, refilled by each INFO
	names     [][]byte  // KEYS and SCAN
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

// sniffHandler is where a slock connection starts: its first bytes tell binary frames from
// Redis text, and the connection gets the handler for what it speaks.
type sniffHandler struct{ s *Server }

func (h *sniffHandler) parse(cs *conn, in []byte) (int, error) {
	kind, ok := slock.Sniff(in)
	if !ok {
		return 0, nil // one byte of a magic: wait for the next
	}
	switch kind {
	case slock.Binary:
		cs.h = &h.s.h.slockBin
	case slock.RESP:
		cs.h = &h.s.h.slockText
	default:
		return 0, errors.New("inline text command (only RESP arrays and binary frames are spoken)")
	}
	if cs.slock.gate != gateOpen && h.s.gateRefuses(cs, kind) {
		return 0, nil // closed once its answer is written
	}
	cs.slock.kind = kind
	return cs.h.parse(cs, in)
}

func (h *sniffHandler) exec(cs *conn, now int64) {}
func (h *sniffHandler) more(cs *conn, now int64) { cs.busy = false }
func (h *sniffHandler) closed(cs *conn, now int64) {
	h.s.slockClose(cs, now)
}

// binaryHandler serves slock's 64-byte frames.
type binaryHandler struct {
	s     *Server
	dec   slock.Decoder
	frame slock.Frame
	cmd   store.LockCommand
	raw   []byte // the frame's bytes (cluster mode: what a follower forwards)
}

func (h *binaryHandler) parse(cs *conn, in []byte) (int, error) {
	n, err := h.dec.Parse(in, &h.frame)
	if err != nil {
		h.s.put(cs, slock.AppendErrorReply(h.s.out(cs), err))
		return 0, fmt.Errorf("bad slock frame: %w", err)
	}
	if h.s.cl != nil && n > 0 {
		if h.s.holdBinary(cs) {
			return 0, nil // it waits in the input (cluster_fwd.go)
		}
		h.raw = in[:n]
	}
	return n, nil
}

func (h *binaryHandler) more(cs *conn, now int64) { cs.busy = false }
func (h *binaryHandler) closed(cs *conn, now int64) {
	h.s.slockClose(cs, now)
}

func (h *binaryHandler) exec(cs *conn, now int64) {
	s, f := h.s, &h.frame
	if s.cl != nil && s.clusterBinary(cs, h.raw) {
		h.raw = nil
		return // forwarded to the leader
	}
	h.raw = nil
	s.m.slockFrame(f.Type)
	switch f.Type {
	case slock.TypeLock, slock.TypeUnlock:
		if (f.Data != nil || f.Type == slock.TypeLock && f.ExpriedFlag&persistAtOnce != 0) && s.logFailing() != "" {
			// A data command changes a value, and a lock asking to persist at once is
			// logged before it is answered: while the log cannot take them, the frame is
			// refused, as the text side answers MISCONF. (Other changes the log records,
			// an unlock of a logged lock, a lock on a key with a value, keep their reply
			// held until the log takes them.)
			s.put(cs, slock.AppendLockReply(s.out(cs), &slock.LockReply{Type: f.Type, RequestID: f.RequestID,
				Result: slock.ResultUnknownError, DB: f.DB, LockID: f.LockID, Key: f.Key}))
			break
		}
		if s.cfg.MaxMemory > 0 && s.lockOOM(cs, f) {
			break
		}
		setFrameCommand(&h.cmd, f)
		s.runLock(cs, &h.cmd, now)
	case slock.TypeWillLock, slock.TypeWillUnlock:
		s.mem.room = 0 // the headroom lockOOM counts down is only for Locks and Unlocks
		if why := s.willRefusal(cs, willCost+len(f.Data)); why != "" {
			// A WILL is not answered when queued; a refused one is, so the client knows.
			s.put(cs, slock.AppendSimple(s.out(cs), f.Type, f.RequestID, slock.ResultUnknownError))
			s.willLog(cs, why)
			break
		}
		s.queueWill(cs, frameCommand(f))
	case slock.TypeInit:
		s.slockInit(cs, f)
	case slock.TypePing, slock.TypeAdmin:
		s.put(cs, slock.AppendSimple(s.out(cs), f.Type, f.RequestID, slock.ResultOK))
		if f.Type == slock.TypeAdmin {
			cs.slock.kind = slock.RESP // the connection speaks Redis text from now on
			cs.h = &s.h.slockText
		}
	case slock.TypeQuit:
		s.put(cs, slock.AppendSimple(s.out(cs), f.Type, f.RequestID, slock.ResultOK))
		cs.quit = true
	case slock.TypeState:
		st, ok := s.st.locks.State(f.DB)
		s.put(cs, slock.AppendState(s.out(cs), f.RequestID, stateOf(f.DB, st, ok)))
	case slock.TypeLeader:
		s.put(cs, slock.AppendLeader(s.out(cs), f.RequestID, s.leaderAddr()))
	case slock.TypeCall:
		s.mem.room = 0
		s.slockCall(cs, f)
	default:
		s.put(cs, slock.AppendSimple(s.out(cs), f.Type, f.RequestID, slock.ResultUnknownCommand))
	}
}

// persistAtOnce is the ExpriedFlag bit asking for a lock to be logged as soon as it is
// granted (store/locks_persist.go).
const persistAtOnce = 0x0100

// frameCommand converts a decoded frame to the store's command (Data stays a view).
func frameCommand(f *slock.Frame) store.LockCommand {
	var c store.LockCommand
	setFrameCommand(&c, f)
	return c
}

// setFrameCommand makes c the store's command for a decoded frame (Data stays a view), in
// place: the binary path keeps one command for the connection's handler and fills it per
// frame, as building a LockCommand and copying it cost more than the store's lookup.
func setFrameCommand(c *store.LockCommand, f *slock.Frame) {
	kind := store.LockKind(f.Type) // the kinds' values are slock's frame types
	switch f.Type {
	case slock.TypeWillLock:
		kind = store.KindLock
	case slock.TypeWillUnlock:
		kind = store.KindUnlock
	}
	// Field by field: a composite literal would clear the whole command first. Every field
	// is set (TestSetFrameCommandSetsEveryField); the options, wait, hold and echo by Set.
	c.Kind, c.DB, c.Rcount, c.Count = kind, f.DB, f.Rcount, f.Count
	c.RequestID, c.LockID, c.Key = f.RequestID, f.LockID, f.Key
	c.Data, c.Add, c.Delta, c.ExpireAt, c.Client = f.Data, false, 0, 0, 0
	lockwire.Set(c, lockwire.Words{Flag: f.Flag, Timeout: f.Timeout, TimeoutFlag: f.TimeoutFlag,
		Expried: f.Expried, ExpriedFlag: f.ExpriedFlag})
}

func stateOf(db uint8, st store.LockState, exists bool) *slock.State {
	out := &slock.State{DB: db}
	if exists {
		out.DBState = 1
		out.LockCount, out.UnlockCount = st.LockCount, st.UnLockCount
		out.LockedCount, out.WaitCount = st.LockedCount, st.WaitCount
		out.TimeoutedCount, out.ExpriedCount = st.TimeoutedCount, st.ExpiredCount
		out.UnlockErrorCount, out.KeyCount = st.UnlockErrorCount, st.KeyCount
	}
	return out
}

// slockInit registers the connection under its ClientId: frames for locks of an earlier,
// closed connection with the same ClientId come here from now on.
func (s *Server) slockInit(cs *conn, f *slock.Frame) {
	init := uint8(slock.InitStandalone)
	if old := s.sl.clients[f.ClientID]; old != nil && old != cs {
		init |= slock.InitKnownClient
	}
	if cs.slock.hasInit && cs.slock.clientID != f.ClientID && s.sl.clients[cs.slock.clientID] == cs {
		delete(s.sl.clients, cs.slock.clientID)
	}
	cs.slock.clientID, cs.slock.hasInit = f.ClientID, true
	s.sl.clients[f.ClientID] = cs
	s.put(cs, slock.AppendInit(s.out(cs), f.RequestID, init))
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
func (s *Server) runLock(cs *conn, cmd *store.LockCommand, now int64) {
	s.stampLock(cs, cmd)
	s.m.lockBegin(cs.owner, cmd, false)
	s.sl.replies, s.sl.execs = s.st.locks.Do(cs.owner, cmd, now, s.sl.replies[:0], s.sl.execs[:0])
	s.drainLocks(now)
	s.m.lockFinish()
}

// drainLocks delivers the replies of the last Locks call, then runs the EXECUTE inner
// commands and the will commands of closed connections it led to, one at a time. Each
// Locks call invalidates the values and frames of the one before, so replies go out and
// EXECUTE frames are copied before the next call.
func (s *Server) drainLocks(now int64) {
	sl := &s.sl
	var discard store.Owner // a will's own results are discarded
	for {
		for i := range sl.replies {
			s.deliverLock(&sl.replies[i], discard)
		}
		sl.replies = sl.replies[:0]
		for _, x := range sl.execs {
			sl.execQueue = append(sl.execQueue, ownedExec{x.Owner, x.DB, append([]byte(nil), x.Frame...)})
		}
		sl.execs = sl.execs[:0]
		discard = 0
		switch {
		case len(sl.execQueue) > 0:
			s.mem.room = 0 // what it runs is not counted in lockOOM's headroom
			x := sl.execQueue[0]
			sl.execQueue = sl.execQueue[1:]
			var f slock.Frame
			n, err := s.h.slockBin.dec.Parse(x.frame, &f)
			if err != nil || n == 0 || (f.Type != slock.TypeLock && f.Type != slock.TypeUnlock) || f.DB != x.db {
				continue // malformed EXECUTE content is silently ignored
			}
			cmd := frameCommand(&f)
			s.stampLock(s.ct.conns[x.owner], &cmd)
			s.m.lockBegin(x.owner, &cmd, true)
			sl.replies, sl.execs = s.st.locks.Do(x.owner, &cmd, now, sl.replies, sl.execs)
		case len(sl.willQueue) > 0:
			s.mem.room = 0
			w := sl.willQueue[0]
			sl.willQueue = sl.willQueue[1:]
			if w.disconnect {
				s.st.locks.Disconnected(w.owner, now)
				continue
			}
			discard = w.owner
			s.m.lockBegin(w.owner, &w.cmd, true)
			sl.replies, sl.execs = s.st.locks.Do(w.owner, &w.cmd, now, sl.replies, sl.execs)
		default:
			sl.execQueue, sl.willQueue = sl.execQueue[:0], sl.willQueue[:0]
			return
		}
	}
}

// deliverLock appends one reply to the connection it is for: its owner, or, when that one
// has closed, the newest connection that sent INIT with the same ClientId; else it is
// dropped (locks outlive their connections), as are replies to discard's commands.
func (s *Server) deliverLock(r *store.LockReply, discard store.Owner) {
	s.m.lockReply(r)
	if s.ps.notify != 0 && r.Result == store.LockExpried {
		s.ps.notifyExpiry(r) // notify.go
	}
	if r.Owner == discard && r.Owner != 0 {
		s.ps.notifyLockReply(r) // a WILL's lock or unlock
		return
	}
	cs := s.cur // most replies are to the connection being served: no lookup for them
	if cs == nil || cs.owner != r.Owner || cs.peer != nil || cs.closed {
		cs = s.ct.conns[r.Owner]
	}
	if cs == nil {
		if cid, ok := s.sl.closed[r.Owner]; ok {
			cs = s.sl.clients[cid]
		}
	}
	if cs == nil || cs.closed || cs.slock == nil {
		return
	}
	sc := cs.slock
	if sc.kind == slock.Binary {
		s.put(cs, appendLockFrame(s.out(cs), r))
		if s.ps.notify != 0 { // no call while no notification is on, as mostly
			s.ps.notifyLockReply(r)
		}
		return
	}
	if !sc.waiting || r.RequestID != sc.waitID {
		if r.RequestID == sc.pushID && r.Owner == cs.owner {
			s.ps.notifyLockReply(r) // a PUSH's, unanswered
		}
		return // text connections see only the reply they wait for
	}
	sc.waiting = false
	if cs != s.cur { // the one being served goes on by itself
		s.kick(cs) // serve the commands that waited behind it
	}
	rep := slock.LockReply{Type: slock.Type(r.Kind), RequestID: r.RequestID, Result: slockResults[r.Result],
		DB: r.DB, LockID: r.LockID, Key: r.Key, Lcount: r.Lcount, Count: r.Count, Lrcount: r.Lrcount,
		Rcount: r.Rcount, Value: r.Value, Token: r.Token}
	if sc.kvActive {
		s.kvReply(cs, &rep, r.Result)
		return
	}
	if r.Result == store.LockOK {
		if sc.waitLock {
			sc.text.LastLockID = r.LockID
		} else {
			sc.text.LastLockID = [16]byte{}
		}
	}
	s.sendTo(cs, rediscmd.AppendTextLockReply(s.scratchFor(cs), &rep))
	s.ps.notifyLockReply(r)
}

// appendLockFrame appends r's frame as slock.AppendLockReply does a slock.LockReply
// (TestAppendLockFrame), written in place: filling a slock.LockReply to encode copied
// every field of every reply.
func appendLockFrame(dst []byte, r *store.LockReply) []byte {
	n := len(dst)
	dst = slices.Grow(dst, slock.FrameLen+len(r.Value))[:n+slock.FrameLen]
	b := dst[n : n+slock.FrameLen]
	b[0], b[1], b[2] = slock.Magic, slock.Version, byte(r.Kind)
	*(*[16]byte)(b[3:19]) = r.RequestID
	b[19] = byte(slockResults[r.Result])
	b[20] = 0
	b[21] = r.DB
	*(*[16]byte)(b[22:38]) = r.LockID
	*(*[16]byte)(b[38:54]) = r.Key
	binary.LittleEndian.PutUint16(b[54:], r.Lcount)
	binary.LittleEndian.PutUint16(b[56:], r.Count)
	b[58], b[59] = r.Lrcount, r.Rcount
	b[60], b[61], b[62], b[63] = 0, 0, 0, 0
	if len(r.Value) > 0 {
		b[20] = slock.FlagData
		dst = append(dst, r.Value...)
	}
	return dst
}

// scratchFor returns cs's output buffer, to append a reply to (an alias of out).
func (s *Server) scratchFor(cs *conn) []byte { return s.out(cs) }

// sendTo stores cs's output buffer with a reply appended (an alias of put).
func (s *Server) sendTo(cs *conn, b []byte) { s.put(cs, b) }

// slockClose runs at a slock connection's close: its will commands run, its keep-alive
// locks start to expire, and frames for its locks go to a later connection with its
// ClientId, if one comes.
func (s *Server) slockClose(cs *conn, now int64) {
	sc := cs.slock
	if s.cl != nil {
		s.endSession(cs)
		if sc.onWaiting {
			s.dropWaiting(cs)
		}
	}
	s.unwatchAll(cs)
	s.ps.closed(cs, s.fair.sliced(cs)) // (many channels: across turns, pubsub.go)
	for _, w := range sc.wills {
		s.sl.willQueue = append(s.sl.willQueue, pendingWill{owner: cs.owner, cmd: w})
	}
	sc.wills = nil
	s.mem.wills -= int64(sc.willBytes)
	sc.willBytes = 0
	s.sl.willQueue = append(s.sl.willQueue, pendingWill{owner: cs.owner, disconnect: true})
	if sc.hasInit {
		s.sl.closed[cs.owner] = sc.clientID
		if s.sl.clients[sc.clientID] == cs {
			delete(s.sl.clients, sc.clientID)
		}
	}
	s.drainLocks(now)
}

// slockInfo renders INFO: the server, its clients, memory, rates, and each database's
// keys and lock counts.
func (s *Server) slockInfo(now int64) []byte {
	s.fillInfo(&s.sl.info, now)
	s.sl.infoBuf = resp.AppendInfo(s.sl.infoBuf[:0], &s.sl.info)
	s.sl.infoBuf = resp.AppendInfoLatency(append(s.sl.infoBuf, "\r\n"...), s.latencyInfo()) // fair.go
	s.sl.infoBuf = resp.AppendInfoCluster(append(s.sl.infoBuf, "\r\n"...), s.clusterInfo())
	return s.sl.infoBuf
}

// slockCall answers a CALL: the LIST_LOCK, LIST_LOCKED and LIST_WAIT listings.
func (s *Server) slockCall(cs *conn, f *slock.Frame) {
	method := string(f.Method)
	var body []byte
	switch method {
	case slock.MethodListLock:
		req, err := slock.ParseListLockRequest(f.Body)
		if err != nil {
			s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownError, slock.ErrTypeDecode, nil))
			return
		}
		infos, ok := s.st.locks.ListLocks(dbOf(req.DB), nil)
		if !ok {
			s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownDB, slock.ErrTypeUnknownDB, nil))
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
			s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownError, slock.ErrTypeDecode, nil))
			return
		}
		var info store.LockInfo
		var st store.ListStatus
		if method == slock.MethodListLocked {
			var holders []store.HolderInfo
			info, holders, st = s.st.locks.ListLocked(dbOf(req.DB), req.Key, nil)
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
			info, waiters, st = s.st.locks.ListWait(dbOf(req.DB), req.Key, nil)
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
			s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownDB, slock.ErrTypeUnknownDB, nil))
			return
		case store.ListNoLock:
			s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownDB, slock.ErrTypeLockManager, nil))
			return
		}
	default:
		s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultUnknownCommand, "", nil))
		return
	}
	s.put(cs, slock.AppendCall(s.out(cs), f.RequestID, slock.ResultOK, "", body))
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
	w := lockwire.Of(c)
	return slock.Command{RequestID: c.RequestID, Flag: w.Flag, LockID: c.LockID, Key: c.Key,
		TimeoutFlag: w.TimeoutFlag, Timeout: w.Timeout, ExpriedFlag: w.ExpriedFlag, Expried: w.Expried,
		Count: c.Count, Rcount: c.Rcount}
}
