package loop

import (
	"errors"
	"strconv"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/peer"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// This file is forwarding: a follower sends its slock clients' commands to the leader over
// its peer link, and relays the replies in order; the leader runs them on a virtual
// connection per client session, whose replies go back framed on the link once their
// consistency level is reached.

// virtKey names a virtual connection on the leader: the link it came on and the session.
type virtKey struct {
	link    store.Owner // the link's owner number
	session uint64
}

// virtConn is the gnet.Conn of a virtual connection: its input is what the follower
// forwarded, and what the loop writes to it goes out as Reply frames on the link.
type virtConn struct {
	gnet.Conn // the link's: addresses and the loop
	s         *Server
	vc        *conn
	link      *conn
	session   uint64
	in        []byte
	used      int
}

func (v *virtConn) Peek(n int) ([]byte, error) { return v.in[v.used:], nil }

func (v *virtConn) Discard(n int) (int, error) {
	v.used += n
	if v.used >= len(v.in) {
		v.in, v.used = v.in[:0], 0
	}
	return n, nil
}

func (v *virtConn) InboundBuffered() int  { return len(v.in) - v.used }
func (v *virtConn) OutboundBuffered() int { return 0 }

func (v *virtConn) Write(b []byte) (int, error) {
	s := v.s
	if v.link.closed {
		return 0, errLinkClosed
	}
	s.put(v.link, peer.AppendReply(s.out(v.link), v.session, b))
	return len(b), nil
}

func (v *virtConn) Wake(gnet.AsyncCallback) error {
	cl := v.s.cl
	cl.rerun = append(cl.rerun, v.vc)
	if v.link.closed {
		return nil
	}
	return v.link.c.Wake(nil)
}

// errLinkClosed is a virtual connection's Write after its link closed.
var errLinkClosed = errors.New("peer link closed")

// forwarded runs commands a follower forwarded on link cs: on the session's virtual
// connection, created at its first frame.
func (s *Server) forwarded(cs *conn, f *peer.Frame, now int64) {
	cl := s.cl
	if !cl.isLeader() {
		s.put(cs, peer.AppendClose(s.out(cs), f.Session, 1))
		return
	}
	key := virtKey{cs.owner, f.Session}
	vc := cl.virts[key]
	if vc == nil {
		s.ct.nextOwner++
		vc = &conn{owner: s.ct.nextOwner, proto: ProtoSlock, slock: newSlockConn()}
		v := &virtConn{Conn: cs.c, s: s, vc: vc, link: cs, session: f.Session}
		vc.c, vc.virt = v, v
		if f.Kind == peer.KindBinary {
			vc.slock.kind, vc.h = slock.Binary, &s.h.slockBin
		} else {
			vc.slock.kind, vc.h = slock.RESP, &s.h.slockText
		}
		s.ct.conns[vc.owner] = vc
		cl.virts[key] = vc
	}
	sc := vc.slock
	sc.text.DB, sc.text.Timeout, sc.text.TimeoutFlag = f.DB, f.Timeout, f.TimeoutFlag
	sc.text.Slock = f.Kind == peer.KindSlock // the client's CLIENT SLOCK setting, as it was when it sent this
	if f.Client != 0 {
		sc.client = f.Client // what it locks is its client's, whichever session it came on
	}
	sc.lvl = Level(f.Level)
	s.auth.virtUser(vc, f.User)
	vc.virt.in = append(vc.virt.in, f.Data...)
	s.serveVirt(vc, now)
}

// serveVirt serves a virtual connection's buffered commands.
func (s *Server) serveVirt(vc *conn, now int64) {
	if vc.closed {
		return
	}
	s.serve(vc, now)
	if vc.quit {
		s.closeLater(vc)
	}
}

// rerunVirts serves the virtual connections that were kicked (from their link's OnTraffic).
func (s *Server) rerunVirts(now int64) {
	cl := s.cl
	for len(cl.rerun) > 0 {
		vc := cl.rerun[0]
		cl.rerun = cl.rerun[1:]
		s.serveVirt(vc, now)
	}
	cl.rerun = cl.rerun[:0]
}

// closeVirt ends a virtual connection as a disconnect would; tell says whether the follower
// is to be told (it is not when it asked, or its link is gone).
func (s *Server) closeVirt(vc *conn, tell bool) {
	if vc.closed {
		return
	}
	v := vc.virt
	vc.closed = true
	now := s.now().UnixNano()
	vc.h.closed(vc, now)
	s.release(vc)
	s.mem.forgetMem(vc)
	delete(s.ct.conns, vc.owner)
	s.idle.drop(vc)
	delete(s.cl.virts, virtKey{v.link.owner, v.session})
	if tell && !v.link.closed {
		s.put(v.link, peer.AppendClose(s.out(v.link), v.session, 0))
	}
}

// closeConn closes cs: a virtual connection at once, a real one through gnet.
func (s *Server) closeConn(cs *conn) {
	if cs.virt != nil {
		s.closeVirt(cs, true)
		return
	}
	_ = cs.c.EventLoop().Close(cs.c) // runs OnClose now, which may owe others replies
}

// leaderLink returns the link to forward to, nil when there is none.
func (s *Server) leaderLink() *conn {
	cl := s.cl
	lead := cl.m.Leader()
	if lead == 0 || lead == cl.cfg.NodeID {
		return nil
	}
	if l := cl.links[lead]; l.ready() {
		return l.out
	}
	return nil
}

// runsLocally says whether a text command runs on this node's store when it does not lead:
// the connection's own settings, and reads at consistency ONE.
func (s *Server) runsLocally(cs *conn, spec *rediscmd.Spec) bool {
	sc := cs.slock
	if spec == nil {
		return true // answered unknown here
	}
	if sc.fwdTx {
		return false // a transaction queues on the leader
	}
	if sc.subscribed() {
		return true // subscriptions are this member's: PING and RESET too (pubsub.go)
	}
	switch spec.Route {
	case rediscmd.RouteMember, rediscmd.RouteConn, rediscmd.RouteUser: // the member's own: never forwarded, never waiting
		return true
	case rediscmd.RouteLeader:
		return false
	}
	return spec.Flags&rediscmd.CmdReadonly != 0 && sc.level() == LevelOne
}

// connLocal says whether a command (nil: unknown) only reads or sets its connection's own
// settings: its reply needs no read barrier, and waits only behind the replies before it.
func connLocal(spec *rediscmd.Spec) bool {
	return spec == nil || spec.Route == rediscmd.RouteConn || spec.Route == rediscmd.RouteUser
}

// holdText says whether the text command just parsed for cs must wait (it stays in the
// input, and cs is served again when what it waits for changes): for a leader, for this
// leader to be ready, for the replies to commands forwarded before it, or for the store to be
// loaded.
func (s *Server) holdText(cs *conn, args [][]byte) bool {
	cl := s.cl
	sc := cs.slock
	switch {
	case sc.tx.active:
		return false // queued by MULTI: nothing runs yet
	case cs.virt != nil:
		return !cl.serving() && s.waitFor(cs)
	case cl.serving():
		if sc.outstanding > 0 {
			return s.waitFor(cs) // replies from the former leader still due
		}
		s.endSession(cs)
		return false
	}
	spec := rediscmd.Lookup(args[0])
	if s.runsLocally(cs, spec) {
		if sc.outstanding > 0 || spec != nil && spec.Flags&rediscmd.CmdReadonly != 0 && !cl.m.Loaded() {
			return s.waitFor(cs)
		}
		return false
	}
	if sc.outstanding >= maxForwarded {
		return s.waitFor(cs) // the leader answers some first (relayReply serves it again)
	}
	if s.leaderLink() != nil || sc.expired {
		return false
	}
	return s.waitFor(cs)
}

// maxForwarded is how many text commands one connection may have forwarded to the leader
// and not yet answered; the rest wait in its input (bounded by --max-input), so a client
// that pipelines without reading cannot fill the peer link.
const maxForwarded = 1024

// holdBinary says whether a binary frame must wait for a leader (see holdText).
func (s *Server) holdBinary(cs *conn) bool {
	cl := s.cl
	if cs.virt != nil {
		return !cl.serving() && s.waitFor(cs)
	}
	if cl.serving() || s.leaderLink() != nil || cs.slock.expired {
		return false
	}
	return s.waitFor(cs)
}

// waitFor puts cs on the waiting list; true.
func (s *Server) waitFor(cs *conn) bool {
	sc := cs.slock
	if sc.waitSince == 0 {
		sc.waitSince = s.persist.lastNow
	}
	if !sc.onWaiting {
		sc.onWaiting = true
		s.cl.waiting = append(s.cl.waiting, cs)
	}
	return true
}

// dropWaiting takes a closing connection off the waiting list.
func (s *Server) dropWaiting(cs *conn) {
	cl := s.cl
	for i, w := range cl.waiting {
		if w == cs {
			cl.waiting = append(cl.waiting[:i], cl.waiting[i+1:]...)
			break
		}
	}
	cs.slock.onWaiting = false
}

// wakeWaiting serves the waiting connections again: what they waited for may have come.
func (s *Server) wakeWaiting() {
	cl := s.cl
	for _, cs := range cl.waiting {
		cs.slock.onWaiting = false
		if cl.m.Leader() != 0 {
			cs.slock.expired = false
			cs.slock.waitSince = 0
		}
		if cs.virt != nil {
			cl.rerun = append(cl.rerun, cs)
			if !cs.virt.link.closed {
				_ = cs.virt.link.c.Wake(nil)
			}
			continue
		}
		s.kick(cs)
	}
	clear(cl.waiting)
	cl.waiting = cl.waiting[:0]
}

// expireWaiting gives up on a leader for connections that waited past --cluster-timeout:
// their next command is answered -CLUSTERDOWN (a binary connection is closed).
func (s *Server) expireWaiting(now int64) {
	cl := s.cl
	limit := int64(cl.cfg.Timeout)
	any := false
	for _, cs := range cl.waiting {
		sc := cs.slock
		if cs.closed || sc.waitSince == 0 || now-sc.waitSince < limit || sc.outstanding > 0 {
			continue
		}
		if sc.kind == slock.Binary || cs.virt != nil {
			s.closeLater(cs) // a virtual one: its follower answers CLUSTERDOWN
			continue
		}
		sc.expired = true
		any = true
	}
	if any {
		for _, cs := range cl.waiting {
			if cs.slock.expired {
				cs.slock.onWaiting = false
				s.kick(cs)
			}
		}
		kept := cl.waiting[:0]
		for _, cs := range cl.waiting {
			if cs.slock.onWaiting {
				kept = append(kept, cs)
			}
		}
		clear(cl.waiting[len(kept):])
		cl.waiting = kept
	}
}

// clusterText routes a text command on a node that does not run it: to the leader, or
// answered -CLUSTERDOWN; false means it runs here.
func (s *Server) clusterText(cs *conn, spec *rediscmd.Spec, raw []byte) bool {
	sc := cs.slock
	if s.runsLocally(cs, spec) {
		return false
	}
	lnk := s.leaderLink()
	if lnk == nil {
		sc.waitSince = 0
		s.m.cl.clusterDown("CLUSTERDOWN no leader", 1)
		s.put(cs, resp.AppendError(s.out(cs), "CLUSTERDOWN no leader"))
		return true
	}
	kind := peer.KindText
	if sc.text.Slock {
		kind = peer.KindSlock // its SETNX is slock's mutex, its GET of a counter an integer
	}
	s.forward(cs, lnk, kind, raw)
	sc.outstanding++
	switch spec.Cmd {
	case rediscmd.CmdMulti:
		sc.fwdTx, sc.touched = true, true
	case rediscmd.CmdExec, rediscmd.CmdDiscard:
		sc.fwdTx = false
	case rediscmd.CmdLock, rediscmd.CmdUnlock, rediscmd.CmdPush, rediscmd.CmdWatch:
		sc.touched = true
	case rediscmd.CmdWait:
		sc.fwdWait = true // its reply may rightly take longer than --cluster-timeout (expireSessions)
	default:
		if sc.level() == LevelOne && spec.Flags&rediscmd.CmdWrite != 0 {
			sc.touched = true // what it wrote at ONE may be lost with the leader: it is told by a close
		}
	}
	return true
}

// clusterBinary routes a binary frame on a node that does not run it; false means it runs here.
func (s *Server) clusterBinary(cs *conn, raw []byte) bool {
	if cs.virt != nil {
		return false
	}
	if s.cl.serving() {
		if cs.slock.session != 0 {
			s.closeLater(cs) // its lock state is on the former leader
			return true
		}
		return false
	}
	lnk := s.leaderLink()
	if lnk == nil {
		s.closeLater(cs)
		return true
	}
	s.forward(cs, lnk, peer.KindBinary, raw)
	cs.slock.touched = true
	return true
}

// forward sends raw, one whole command of cs, to the leader on lnk.
func (s *Server) forward(cs *conn, lnk *conn, kind uint8, raw []byte) {
	cl := s.cl
	sc := cs.slock
	sc.waitSince, sc.expired = 0, false
	if sc.session == 0 {
		cl.nextSession++
		sc.session, sc.link = cl.nextSession, lnk
		cl.sessions[sc.session] = cs
	}
	if sc.outstanding == 0 || kind == peer.KindBinary {
		sc.fwdSince = s.persist.lastNow
	}
	s.put(lnk, peer.AppendForwardAs(s.out(lnk), sc.session, s.clientOf(cs), kind, uint8(sc.level()), sc.text.DB,
		sc.text.Timeout, sc.text.TimeoutFlag, s.userOf(cs).Name, raw))
}

// relayReply passes the leader's replies to a session on to its client.
func (s *Server) relayReply(session uint64, data []byte) {
	cs := s.cl.sessions[session]
	if cs == nil || cs.closed {
		return
	}
	s.putSettled(cs, append(s.out(cs), data...))
	sc := cs.slock
	sc.fwdSince = s.persist.lastNow
	if sc.kind != slock.Binary {
		sc.outstanding = max(sc.outstanding-countReplies(data), 0)
		sc.fwdWait = sc.fwdWait && sc.outstanding > 0
		if sc.outstanding < maxForwarded && (sc.onWaiting || cs.busy) {
			s.kick(cs)
		}
	}
}

// sessionLost ends cs's session on the leader, whose outcome is unknown: its outstanding
// commands are answered with err, or, when it held state there (locks, a transaction, a
// binary session), the connection is closed as the leader's side was.
func (s *Server) sessionLost(cs *conn, err string) {
	sc := cs.slock
	delete(s.cl.sessions, sc.session)
	sc.session, sc.link = 0, nil
	sc.fwdWait = false
	if sc.kind == slock.Binary || sc.touched {
		s.closeLater(cs)
		return
	}
	s.m.cl.clusterDown(err, sc.outstanding)
	b := s.out(cs)
	for ; sc.outstanding > 0; sc.outstanding-- {
		b = resp.AppendError(b, err)
	}
	s.putSettled(cs, b)
	sc.fwdTx = false
	s.kick(cs)
}

// endSession ends cs's session on the leader (it closed, or this node now leads).
func (s *Server) endSession(cs *conn) {
	sc := cs.slock
	if sc.session == 0 {
		return
	}
	delete(s.cl.sessions, sc.session)
	if l := sc.link; l != nil && !l.closed {
		s.put(l, peer.AppendClose(s.out(l), sc.session, 0))
	}
	sc.session, sc.link = 0, nil
}

// expireSessions gives up on forwarded commands the leader has not answered within
// --cluster-timeout (and a little more: the leader answers CLUSTERDOWN itself by then when it
// can): their outcome is unknown. A session with a WAIT among them is not given up this way
// (WAIT may rightly wait longer, 0 for ever): a lost link or leader still ends it.
func (s *Server) expireSessions(now int64) {
	cl := s.cl
	limit := int64(cl.cfg.Timeout) + int64(cl.cfg.Timeout)/2
	for _, cs := range cl.sessions {
		sc := cs.slock
		if sc.outstanding > 0 && now-sc.fwdSince > limit && !sc.fwdWait {
			if l := sc.link; l != nil && !l.closed {
				s.put(l, peer.AppendClose(s.out(l), sc.session, 0))
			}
			s.sessionLost(cs, "CLUSTERDOWN no quorum")
		}
	}
}

// leaderChanged ends the sessions held on the former leader.
func (s *Server) leaderChanged(old uint64) {
	cl := s.cl
	for _, cs := range cl.sessions {
		if cs.slock.link != nil && cs.slock.link.peer != nil && cs.slock.link.peer.id == old {
			l := cs.slock.link
			if !l.closed {
				s.put(l, peer.AppendClose(s.out(l), cs.slock.session, 0))
			}
			s.sessionLost(cs, "CLUSTERDOWN leader changed")
		}
	}
}

// countReplies counts the whole RESP replies at the start of b.
func countReplies(b []byte) int {
	n := 0
	for len(b) > 0 {
		m, err := resp.SkipReply(b)
		if err != nil || m == 0 {
			break
		}
		b = b[m:]
		n++
	}
	return n
}

// consistency runs CONSISTENCY [ONE|QUORUM|ALL].
func (s *Server) consistency(cs *conn, args [][]byte) {
	sc := cs.slock
	switch {
	case len(args) == 1:
		s.put(cs, resp.AppendSimple(s.out(cs), sc.level().String()))
	case len(args) == 2:
		l, ok := ParseLevel(args[1])
		if !ok {
			s.put(cs, resp.AppendError(s.out(cs), "ERR syntax error: CONSISTENCY takes ONE, QUORUM or ALL"))
			return
		}
		sc.lvl = l
		s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
	default:
		s.put(cs, resp.AppendError(s.out(cs), "ERR wrong number of arguments for 'consistency' command"))
	}
}

// removeMember proposes id's removal.
func (s *Server) removeMember(id uint64) error {
	if err := s.cl.m.ProposeRemove(id); err != nil {
		return err
	}
	s.log.Info().Uint64("node_id", id).Msg("cluster: removing a member")
	return nil
}

// clusterCmd runs CLUSTER ADD id host:port | CLUSTER REMOVE id (on the leader).
func (s *Server) clusterCmd(cs *conn, args [][]byte) {
	cl := s.cl
	if cl == nil {
		s.put(cs, resp.AppendError(s.out(cs), "ERR This instance has cluster support disabled"))
		return
	}
	switch {
	case resp.Is(args[1], "ADD") && len(args) == 4:
		id, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil || id == 0 {
			s.put(cs, resp.AppendError(s.out(cs), "ERR node id must be a positive integer"))
			return
		}
		if cl.isMember(id) {
			s.put(cs, resp.AppendError(s.out(cs), "ERR node "+strconv.FormatUint(id, 10)+" is already a member"))
			return
		}
		if err := s.addMember(id, string(args[3])); err != nil {
			s.put(cs, resp.AppendError(s.out(cs), "ERR "+err.Error()))
			return
		}
		s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
	case resp.Is(args[1], "REMOVE") && len(args) == 3:
		id, err := strconv.ParseUint(string(args[2]), 10, 64)
		if err != nil || !cl.isMember(id) {
			s.put(cs, resp.AppendError(s.out(cs), "ERR no such member"))
			return
		}
		if err := s.removeMember(id); err != nil {
			s.put(cs, resp.AppendError(s.out(cs), "ERR "+err.Error()))
			return
		}
		s.put(cs, resp.AppendSimple(s.out(cs), "OK"))
	default:
		s.put(cs, resp.AppendError(s.out(cs), "ERR syntax error: CLUSTER ADD <id> <host:port> | CLUSTER REMOVE <id>"))
	}
}
