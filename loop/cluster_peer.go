package loop

import (
	"fmt"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/peer"
)

// This file is the cluster's peer links: connections between members on the same gnet
// engine as the clients'. Each node dials every other member (EventLoop-registered
// connections, so they live on the one loop) and sends its raft messages and forwarded
// commands on that link; it receives the others' on the links they dialled, and the replies
// to what it forwarded on its own.

// ProtoPeer is the peer port's protocol (cluster mode).
const ProtoPeer Proto = numProtos + 1

// peerConn is a peer link's own state.
type peerConn struct {
	id       uint64 // the member at the other end (from its Hello, for links it dialled)
	outbound bool   // this node dialled it
	join     bool   // a link dialled to ask to join
	addr     string // the peer address its Hello claimed (acted on once it is authenticated)

	// Authentication (cluster_auth.go): nothing but Hello, Challenge and Proof is acted on
	// until authed.
	authed bool
	proved bool               // authed by proof (the cluster key, or a verified TLS certificate), not for want of any
	nonce  [peer.AuthLen]byte // the Challenge this end sent
	theirs [peer.AuthLen]byte // the other end's Challenge
	gotCh  bool               // theirs is set
}

// peerDial marks a connection this node dialled, until its OnOpen.
type peerDial struct {
	id   uint64
	join bool
}

// peerLimit is the most a peer link may buffer either way: a snapshot travels in one frame.
const peerLimit = peer.MaxFrame + 16<<20

// peerHandler serves peer links: it decodes frames and hands each to the cluster.
type peerHandler struct {
	s *Server
	f peer.Frame
}

func (h *peerHandler) parse(cs *conn, in []byte) (int, error) {
	limit := peer.MaxFrame
	if !cs.peer.authed {
		limit = preAuthFrame // a stranger's frame costs at most this
	}
	f, n, err := peer.ParseLimit(in, limit)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		cs.need = peer.FrameLen(in) // a snapshot's frame: wait for all of it (conn.need)
	}
	h.f = f
	return n, nil
}

func (h *peerHandler) exec(cs *conn, now int64)   { h.s.peerFrame(cs, &h.f, now) }
func (h *peerHandler) more(cs *conn, now int64)   { cs.busy = false }
func (h *peerHandler) closed(cs *conn, now int64) { h.s.peerGone(cs) }

// openPeer sets up a peer link at its OnOpen: accepted on the peer port (ln), or dialled (d).
func (s *Server) openPeer(c gnet.Conn, d *peerDial) {
	s.ct.nextOwner++
	cs := &conn{c: c, owner: s.ct.nextOwner, proto: ProtoPeer, h: &s.h.peer, peer: &peerConn{authed: s.cl.cfg.Key == nil}}
	c.SetContext(cs)
	// A link whose peer went silent (a partition drops packets without a word) fails once
	// what was sent stays unacknowledged this long, and is dialled again, rather than wait
	// out TCP's retransmission backoff.
	_ = unix.SetsockoptInt(c.Fd(), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(s.linkTimeout().Milliseconds()))
	if d == nil {
		if e := s.log.Debug(); e.Enabled() {
			e.Stringer("remote", remoteAddr(c)).Uint64("conn", uint64(cs.owner)).Msg("cluster: link accepted")
		}
		s.challenge(cs) // it says who it is in its Hello, and proves it
		return
	}
	cl := s.cl
	cs.peer.id, cs.peer.outbound, cs.peer.join = d.id, true, d.join
	l := cl.links[d.id]
	if d.join {
		l = cl.joinLink
	}
	if l == nil || l.out != nil || cl.stopping {
		if e := s.log.Debug(); e.Enabled() {
			e.Uint64("peer", d.id).Bool("known", l != nil).Bool("linked", l != nil && l.out != nil).Msg("cluster: dialled link not wanted; closing it")
		}
		_ = c.Close()
		return
	}
	l.out, l.dialing = cs, false
	s.put(cs, peer.AppendHello(s.out(cs), cl.cfg.NodeID, 0, cl.cfg.PeerAddr))
	s.challenge(cs)
	if cs.peer.authed {
		s.peerUp(cs)
	}
}

// peerUp runs once a link this node dialled is authenticated (at once without a key): a
// join link asks to join, and commands waiting for the leader may go.
func (s *Server) peerUp(cs *conn) {
	cl := s.cl
	if cs.peer.join {
		s.put(cs, peer.AppendJoin(s.out(cs), cl.cfg.NodeID, cl.cfg.PeerAddr))
	}
	if e := s.log.Debug(); e.Enabled() {
		e.Uint64("peer", cs.peer.id).Msg("cluster: link up")
	}
	if cs.peer.id == cl.m.Leader() {
		s.wakeWaiting()
	}
}

// peerFrame handles one frame from a peer link.
func (s *Server) peerFrame(cs *conn, f *peer.Frame, now int64) {
	cl := s.cl
	if cl == nil {
		return
	}
	if !cs.peer.authed {
		s.authFrame(cs, f)
		return
	}
	if l := cl.links[cs.peer.id]; l != nil {
		l.heard = now
	}
	switch f.Type {
	case peer.TypeHello:
		cs.peer.id, cs.peer.addr = f.From, string(f.Addr)
		if e := s.log.Debug(); e.Enabled() {
			e.Uint64("peer", f.From).Str("addr", cs.peer.addr).Uint64("conn", uint64(cs.owner)).Msg("cluster: link says hello")
		}
		s.learnPeer(cs)
	case peer.TypeRaft:
		if cl.m.Step(f.Msg, cs.peer.id, cs.peer.proved, memberHost{s}) {
			cs.quit = true // a bad link: closed and logged, never acted on
		}
	case peer.TypeForward:
		s.forwarded(cs, f, now)
	case peer.TypeReply:
		s.relayReply(f.Session, f.Data)
	case peer.TypeClose:
		if cs.peer.outbound {
			if fc := cl.sessions[f.Session]; fc != nil {
				s.sessionLost(fc, "CLUSTERDOWN leader changed")
			}
		} else if vc := cl.virts[virtKey{cs.owner, f.Session}]; vc != nil {
			s.closeVirt(vc, false)
		}
	case peer.TypeJoin:
		s.joinRequest(cs, f.ID, string(f.Addr))
	case peer.TypeJoinReply:
		s.joinReply(cs, f)
	}
}

// peerGone runs when a peer link closes: what travelled on it is lost.
func (s *Server) peerGone(cs *conn) {
	cl := s.cl
	if cl == nil {
		return
	}
	now := s.now().UnixNano()
	if e := s.log.Debug(); e.Enabled() {
		e.Uint64("peer", cs.peer.id).Bool("outbound", cs.peer.outbound).Uint64("conn", uint64(cs.owner)).Msg("cluster: link down")
	}
	if cs.peer.outbound {
		l := cl.links[cs.peer.id]
		if cs.peer.join {
			l = cl.joinLink
		}
		if l != nil && l.out == cs {
			l.out = nil
			l.next = now + int64(redial)
		}
		for _, fc := range cl.sessions {
			if fc.slock != nil && fc.slock.link == cs {
				s.sessionLost(fc, "CLUSTERDOWN leader changed")
			}
		}
		return
	}
	for k, vc := range cl.virts {
		if k.link == cs.owner {
			s.closeVirt(vc, false)
		}
	}
}

// linkTimeout is how long a link's unacknowledged data may wait before the link fails:
// two election timeouts, at least a second.
func (s *Server) linkTimeout() time.Duration {
	return max(time.Second, 2*cluster.ElectionTicks*s.cl.cfg.Tick)
}

// redial is how long after a link failed it is dialled again.
const redial = 200 * time.Millisecond

// dialPeers dials the members this node has no link to (and the join address).
func (s *Server) dialPeers(now int64) {
	cl := s.cl
	for _, l := range cl.links {
		s.dialLink(l, false, now)
	}
	if cl.joinLink != nil {
		s.dialLink(cl.joinLink, true, now)
	}
}

func (s *Server) dialLink(l *peerLink, join bool, now int64) {
	if l.out != nil || l.dialing || now < l.next || l.addr == "" {
		return
	}
	l.dialing = true
	id, addr := l.id, l.addr
	if e := s.log.Debug(); e.Enabled() {
		e.Uint64("peer", id).Str("addr", addr).Bool("join", join).Msg("cluster: dialling")
	}
	if s.run.dialHook != nil {
		s.run.dialHook(&peerDial{id: id, join: join}, addr)
		return
	}
	go s.dial(&peerDial{id: id, join: join}, addr) // a dial may block: never on the loop
}

// dial connects to a member and registers the connection on the loop.
func (s *Server) dial(d *peerDial, addr string) {
	err := s.dialPeer(d, addr) // plaintext, or through the TLS bridge (tls.go)
	if err == nil {
		return
	}
	s.runFlushed(func() {
		if e := s.log.Debug(); e.Enabled() {
			e.Err(err).Uint64("peer", d.id).Msg("cluster: dial failed")
		}
		s.dialFailed(d)
	})
}

// dialFailed runs on the loop when dialling d failed: it is dialled again later.
func (s *Server) dialFailed(d *peerDial) {
	cl := s.cl
	l := cl.links[d.id]
	if d.join {
		l = cl.joinLink
	}
	if l != nil {
		l.dialing = false
		l.next = s.now().Add(redial).UnixNano()
	}
}

// touchLoop connects once to the peer port so that the loop is known (ticks reach it only
// then) even before a client or a member connects: a lone member must still elect itself.
func (s *Server) touchLoop(addr string) {
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
	}
}

// joinTick asks, until this node is a member, to be added through the --join address (or
// the leader it was pointed to).
func (s *Server) joinTick(now int64) {
	cl := s.cl
	if cl.joinTo == "" {
		cl.joinLink = nil
		return
	}
	if cl.isMember(cl.cfg.NodeID) {
		cl.joinTo = ""
		if cl.joinLink != nil && cl.joinLink.out != nil {
			s.closeLater(cl.joinLink.out)
		}
		cl.joinLink = nil
		return
	}
	if cl.joinLink == nil {
		cl.joinLink = &peerLink{addr: cl.joinTo}
	}
	if l := cl.joinLink; l.ready() && now >= cl.joinAt {
		s.put(l.out, peer.AppendJoin(s.out(l.out), cl.cfg.NodeID, cl.cfg.PeerAddr))
		cl.joinAt = now + int64(time.Second)
	}
}

// joinRequest answers a node asking to join: the leader adds it as a learner (promoted once
// it has caught up); another member names the leader.
func (s *Server) joinRequest(cs *conn, id uint64, addr string) {
	cl := s.cl
	if !cl.serving() {
		s.put(cs, peer.AppendJoinReply(s.out(cs), false, cl.m.Leader(), cl.m.Members.Addrs[cl.m.Leader()], "not the leader"))
		return
	}
	if id == 0 || addr == "" {
		s.put(cs, peer.AppendJoinReply(s.out(cs), false, cl.m.Leader(), cl.m.Members.Addrs[cl.m.Leader()], "a node id and a peer address are needed"))
		return
	}
	if cl.m.Members.IsVoter(id) {
		// It asks to join, so its log is empty: a voter that lost its data, whose votes are
		// forgotten. Raft's safety needs it to come back as a new member.
		msg := fmt.Sprintf("node %d is a voter already: a node that lost its data joins with a new --node-id (and `tallyctl cluster remove %d`)", id, id)
		s.put(cs, peer.AppendJoinReply(s.out(cs), false, cl.m.Leader(), cl.m.Members.Addrs[cl.m.Leader()], msg))
		return
	}
	if !cl.isMember(id) {
		if err := s.addMember(id, addr); err != nil {
			s.put(cs, peer.AppendJoinReply(s.out(cs), false, cl.m.Leader(), cl.m.Members.Addrs[cl.m.Leader()], err.Error()))
			return
		}
	}
	s.put(cs, peer.AppendJoinReply(s.out(cs), true, cl.m.Leader(), cl.m.Members.Addrs[cl.m.Leader()], ""))
}

// joinReply takes a member's answer: on to the leader it named, or wait to be contacted.
func (s *Server) joinReply(cs *conn, f *peer.Frame) {
	cl := s.cl
	if f.OK || cl.joinLink == nil {
		return
	}
	if a := string(f.LeaderAddr); a != "" && a != cl.joinLink.addr {
		cl.joinLink.addr = a
		s.closeLater(cs)
	}
	if missed, ok := cl.errLog.allow(s.now()); ok {
		s.log.Warn().Str("why", string(f.Err)).Str("leader", string(f.LeaderAddr)).Uint64("more_since_last_line", missed).
			Msg("cluster: join refused for now")
	}
}

// addMember proposes id as a learner at addr.
func (s *Server) addMember(id uint64, addr string) error {
	cl := s.cl
	if err := cl.m.ProposeLearner(id, addr); err != nil {
		return err
	}
	s.log.Info().Uint64("node_id", id).Str("addr", addr).Msg("cluster: adding a learner")
	return nil
}

// isMember says whether id is a voter or learner of the current configuration.
func (cl *clusterState) isMember(id uint64) bool { return cl.m.Members.IsMember(id) }
