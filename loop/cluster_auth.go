package loop

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"

	"github.com/tallyd/tallyd/proto/peer"
)

// This file authenticates peer links with the cluster key (--cluster-key-file): at link open
// each end sends a Challenge, a fresh nonce, and answers the other's with a Proof, an
// HMAC-SHA256 under the key of both nonces, its role and (the dialler's) its node id. Until
// the other end's Proof checks, nothing it sends but Hello, Challenge and Proof is acted on,
// and a frame may be at most preAuthFrame long. It proves who connects; it does not encrypt
// or protect a link from someone on its path: peer TLS does (--peer-cert-file).

// preAuthFrame is the largest frame a link may send before it is authenticated.
const preAuthFrame = 4096

// authLabel starts every MAC input, so that no other use of the key can be replayed here.
const authLabel = "tallyd peer link v1\x00"

// Roles in a MAC: who proves.
const (
	roleDialler  byte = 1
	roleAcceptor byte = 2
)

// ready says whether l's link can carry frames: connected and authenticated.
func (l *peerLink) ready() bool {
	return l != nil && l.out != nil && l.out.peer.authed && !l.out.closed && !l.out.closing
}

// challenge sends cs's Challenge, when the cluster has a key.
func (s *Server) challenge(cs *conn) {
	if s.cl.cfg.Key == nil {
		return
	}
	if _, err := rand.Read(cs.peer.nonce[:]); err != nil {
		panic("loop: no random source: " + err.Error())
	}
	s.put(cs, peer.AppendAuth(s.out(cs), peer.TypeChallenge, &cs.peer.nonce))
}

// proof computes the Proof of prover (role, id: 0 for an acceptor) for the verifier's nonce
// v and the prover's own nonce p.
func (s *Server) proof(role byte, id uint64, v, p *[peer.AuthLen]byte) (out [peer.AuthLen]byte) {
	m := hmac.New(sha256.New, s.cl.cfg.Key)
	m.Write([]byte(authLabel))
	m.Write([]byte{role})
	m.Write(v[:])
	m.Write(p[:])
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	m.Write(b[:])
	m.Sum(out[:0])
	return out
}

// authFrame handles a frame of a link not yet authenticated: a Hello says who it claims to
// be, a Challenge is answered with this end's Proof, a Proof is checked. Anything else, or
// anything out of order, closes the link.
func (s *Server) authFrame(cs *conn, f *peer.Frame) {
	cl := s.cl
	pc := cs.peer
	my := roleAcceptor
	if pc.outbound {
		my = roleDialler
	}
	switch {
	case f.Type == peer.TypeHello && !pc.outbound && pc.id == 0:
		pc.id, pc.addr = f.From, string(f.Addr)
		if pc.id == 0 || pc.id == cl.cfg.NodeID {
			s.authFailed(cs, "a Hello with an impossible node id")
		}
	case f.Type == peer.TypeChallenge && !pc.gotCh:
		pc.gotCh = true
		copy(pc.theirs[:], f.Auth)
		var id uint64
		if my == roleDialler {
			id = cl.cfg.NodeID
		}
		p := s.proof(my, id, &pc.theirs, &pc.nonce)
		s.put(cs, peer.AppendAuth(s.out(cs), peer.TypeProof, &p))
	case f.Type == peer.TypeProof && pc.gotCh && (pc.outbound || pc.id != 0):
		their, id := roleDialler, pc.id
		if pc.outbound {
			their, id = roleAcceptor, 0
		}
		want := s.proof(their, id, &pc.nonce, &pc.theirs)
		if !hmac.Equal(want[:], f.Auth) {
			s.authFailed(cs, "wrong proof: it does not hold this cluster's key")
			return
		}
		pc.authed, pc.proved = true, true
		if pc.outbound {
			s.peerUp(cs)
		} else {
			s.learnPeer(cs)
		}
	default:
		s.authFailed(cs, "a "+f.Type.String()+" frame before the link proved the cluster key")
	}
}

// authFailed closes a link that failed authentication and says so (rate-limited).
func (s *Server) authFailed(cs *conn, why string) {
	if missed, ok := s.cl.m.DropLog.Allow(s.now()); ok {
		s.log.Warn().Str("remote", remoteAddr(cs.c).String()).Uint64("claimed_id", cs.peer.id).Str("why", why).
			Uint64("more_since_last_line", missed).Msg("cluster: peer link refused")
	}
	cs.quit = true
}

// learnPeer takes what an authenticated link's Hello said: a member this node has not
// heard of (it joined and has not applied the configuration yet) gets a link of its own,
// which its answers go back on.
func (s *Server) learnPeer(cs *conn) {
	cl := s.cl
	id, a := cs.peer.id, cs.peer.addr
	if id != 0 && id != cl.cfg.NodeID && a != "" && cl.links[id] == nil {
		cl.m.Members.Addrs[id] = a
		cl.links[id] = &peerLink{id: id, addr: a}
	}
}

// peerAuth says how peer links are authenticated, for INFO.
func (cl *clusterState) peerAuth() string {
	switch {
	case cl.cfg.Key != nil && cl.peerTLS:
		return "key+tls"
	case cl.cfg.Key != nil:
		return "key"
	case cl.peerTLS:
		return "tls"
	}
	return "none"
}

// peerAuthWarning is the warning of a cluster whose peer links are not authenticated.
func (cl *clusterState) peerAuthWarning() string {
	if cl.peerAuth() != "none" {
		return ""
	}
	return "PEER LINKS ARE NOT AUTHENTICATED: anyone who reaches the peer port can read and write every key, " +
		"join the cluster and disrupt it. Set --cluster-key-file (the same secret on every member) or peer TLS " +
		"(--peer-cert-file, --peer-key-file, --peer-trusted-ca-file)"
}
