package loop

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/tlsbridge"
)

// This file is TLS, which the loop never runs: listeners marked TLS are not gnet's but a
// tlsbridge's, whose goroutines accept, run each handshake (under a timeout, with a cap on
// those in progress) and then copy plaintext between the TLS connection and one end of a
// socketpair. The other end is registered on the engine with the bridge's Conn as its
// context, so the loop serves it as any connection of its listener; remoteAddr gives the
// TLS peer's address. With peer TLS, the peer port is such a listener and the links this
// member dials go through a bridge too (dialPeer).

// TLSConfig is the TLS of a server's listeners and peer links (Config.TLS).
type TLSConfig struct {
	// Client is the configuration of the client listeners marked TLS.
	Client *tls.Config
	// PeerServer and PeerClient are the peer links' (accepted and dialled); with them the
	// peer listener must be marked TLS. Nil: plaintext links.
	PeerServer, PeerClient *tls.Config
	// HandshakeTimeout bounds each handshake (0: tlsbridge.DefaultHandshakeTimeout);
	// HelloTimeout, from its accept, the arrival of a connection's whole ClientHello (0:
	// tlsbridge.DefaultHelloTimeout). MaxHandshakes caps those in progress on each bridge
	// (0: tlsbridge.DefaultMaxHandshakes), MaxHandshakesPerSource those of one source
	// address (0: tlsbridge.DefaultMaxHandshakesPerSource; <0: none); past a cap, the
	// oldest one without a ClientHello is dropped (tlsbridge.Config).
	HandshakeTimeout       time.Duration
	HelloTimeout           time.Duration
	MaxHandshakes          int
	MaxHandshakesPerSource int
}

// tlsState is the server's TLS bridges.
type tlsState struct {
	client, peer *tlsbridge.Bridge
	held         map[int]net.Listener // by listener index: bound by preflight, served by a bridge once the engine runs
	// live and max are s.ct.live and cfg.MaxConnections, published by the loop for the
	// admission of TLS connections at accept (before their handshake).
	live, max atomic.Int64
	logMu     sync.Mutex
	log       [4]rateLog // refusals, failed handshakes (accepted, dialled), the rest
	regMu     sync.Mutex // serializes Engine.Register (register)

	// startTLS waits for up, closed by the first OnTick (the engine runs: its loop is
	// registered), or quit, closed by stopTLS; starting is closed when it returns.
	up, quit, starting chan struct{}
	upOnce             sync.Once

	innerDir string // the directory of the loop's own socket when every listener is TLS (innerListener)
}

// loopTouch is the context of the connection that tells the loop it is running (startTLS).
type loopTouch struct{}

// tlsGrace is how long a stopping server waits for bridged connections to end before it
// cuts them.
const tlsGrace = 2 * time.Second

// checkTLS checks that every TLS listener has its configuration.
func checkTLS(cfg *Config) error {
	for _, l := range cfg.Listeners {
		switch {
		case !l.TLS:
		case l.Proto == ProtoPeer && (cfg.TLS.PeerServer == nil || cfg.TLS.PeerClient == nil):
			return errors.New("the peer listener is marked TLS but peer TLS is not configured")
		case l.Proto != ProtoPeer && cfg.TLS.Client == nil:
			return fmt.Errorf("the %s listener %s is marked TLS but no certificate is configured", l.Proto, l.Addr)
		}
	}
	if cfg.TLS.PeerClient != nil && cfg.Cluster == nil {
		return errors.New("peer TLS is configured outside cluster mode")
	}
	return nil
}

// newBridges makes the bridges the configuration asks for (Run, once the cluster's state
// exists: peer links time out as it says).
func (s *Server) newBridges() {
	t := &s.tb
	t.max.Store(int64(s.cfg.MaxConnections))
	base := tlsbridge.Config{
		HandshakeTimeout: s.cfg.TLS.HandshakeTimeout, MaxHandshakes: s.cfg.TLS.MaxHandshakes,
		HelloTimeout: s.cfg.TLS.HelloTimeout, MaxHandshakesPerSource: s.cfg.TLS.MaxHandshakesPerSource,
		Budget: &s.ct.fds, Enroll: s.enrollTLS, Report: s.tlsEvent, KeepAlive: 5 * time.Minute,
	}
	if s.cfg.TLS.Client != nil {
		c := base
		c.Server, c.Admit = s.cfg.TLS.Client, s.admitTLS
		t.client = tlsbridge.New(c)
	}
	if s.cfg.TLS.PeerClient != nil && s.cl != nil {
		c := base
		c.Server, c.Client = s.cfg.TLS.PeerServer, s.cfg.TLS.PeerClient
		c.Admit = func(any) bool { return !s.run.stopping.Load() }
		c.UserTimeout = s.linkTimeout() // as openPeer sets on a plaintext link
		t.peer = tlsbridge.New(c)
	}
}

// innerListener makes the address of a listener of the loop's own for a server whose every
// listener is a TLS bridge's (TLS only: the plaintext ports set to 0): gnet runs no engine
// without a listener (Engine.Register and Stop answer "the internal engine is empty", so
// no bridged connection could reach the loop). It is a unix socket in a private directory
// of $TMPDIR, unlinked as soon as it is bound (dropInner, from OnBoot), so that nothing
// can connect to it; Run's end removes the directory (stopTLS).
func (tb *tlsState) innerListener() (string, error) {
	dir, err := os.MkdirTemp("", "tallyd-loop-") // mode 0700
	if err != nil {
		return "", fmt.Errorf("TLS only: a directory for the loop's internal socket (set TMPDIR to a writable one): %w", err)
	}
	tb.innerDir = dir
	return "unix://" + filepath.Join(dir, "loop.sock"), nil
}

// dropInner unlinks the loop's own socket once gnet has bound it (OnBoot).
func (tb *tlsState) dropInner() {
	if tb.innerDir != "" {
		_ = os.RemoveAll(tb.innerDir)
	}
}

// startTLS runs on a goroutine of its own from OnBoot: once the engine runs (connections
// can be registered on it only then), it serves the TLS listeners. First it registers a
// connection that tells the loop it runs, so that ticks reach it before any client
// connects (a lone member must elect itself).
func (s *Server) startTLS(tags map[int]*listenerState) {
	defer close(s.tb.starting)
	select {
	case <-s.tb.up:
	case <-s.tb.quit:
		return
	}
	a, b, err := tlsbridge.Socketpair()
	if err == nil {
		_ = b.Close() // the loop closes its end at once
		err = s.register(context.Background(), loopTouch{}, a)
	}
	if err != nil && !s.run.stopping.Load() {
		s.log.Warn().Err(err).Msg("TLS: could not tell the loop it runs")
	}
	for i, ln := range s.tb.held {
		br := s.tb.client
		if tags[i].Proto == ProtoPeer {
			br = s.tb.peer
		}
		br.Serve(ln, tags[i])
	}
}

// engineRunning says whether the engine's loop runs (its first tick came): only then may
// a connection be registered on it.
func (tb *tlsState) engineRunning() bool {
	select {
	case <-tb.up:
		return true
	default:
		return false
	}
}

// engineUp runs at every OnTick (the ticker goroutine starts once the engine's loop is
// registered): the first lets startTLS go on.
func (tb *tlsState) engineUp() {
	if tb.up != nil {
		tb.upOnce.Do(func() { close(tb.up) })
	}
}

// stopTLS closes the bridges once the engine is down (every loop end is closed): Run's end.
func (tb *tlsState) stopTLS() {
	if tb.starting != nil {
		close(tb.quit)
		<-tb.starting
	}
	for _, ln := range tb.held { // if the bridges never served them
		_ = ln.Close()
	}
	for _, b := range []*tlsbridge.Bridge{tb.client, tb.peer} {
		if b != nil {
			b.Close(tlsGrace)
		}
	}
	tb.dropInner() // if the engine never booted
}

// register puts c on the loop with context v and returns once the loop's OnOpen has run
// (or registering failed, or ctx ended); c is closed in any case. Engine.Register is not
// safe for concurrent use (its load balancer's round-robin index is a plain int), so calls
// are serialized; the wait for OnOpen is not.
func (s *Server) register(ctx context.Context, v any, c net.Conn) error {
	s.tb.regMu.Lock()
	ch, err := s.run.engine.Register(gnet.NewNetConnContext(gnet.NewContext(context.Background(), v), c))
	s.tb.regMu.Unlock()
	if err != nil {
		_ = c.Close()
		return err
	}
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.tb.quit:
		// The engine is down (Run's end): the loop will never run the registration, and
		// stopTLS waits for startTLS, which waited here (a server stopped right after it
		// started hung for ever: TestTLSStartLineShowsBothPorts, in make test once).
		return errors.New("the engine stopped before the connection was registered")
	}
}

// enrollTLS hands the loop a bridged connection's end (tlsbridge.Config.Enroll).
func (s *Server) enrollTLS(ctx context.Context, end net.Conn, bc *tlsbridge.Conn) error {
	return s.register(ctx, bc, end)
}

// admitTLS says whether a TLS connection just accepted may start its handshake: not when
// the connections already open and those in their handshakes reach --max-connections.
func (s *Server) admitTLS(any) bool {
	if s.run.stopping.Load() {
		return false
	}
	max := s.tb.max.Load()
	return max <= 0 || s.tb.live.Load()+s.tb.client.Pending() < max
}

// dialPeer connects to a member's peer address and puts the link on the loop with context
// d: through the TLS bridge with peer TLS, over plain TCP otherwise. It runs on a goroutine
// of its own (dialLink).
func (s *Server) dialPeer(d *peerDial, addr string) error {
	if s.tb.peer == nil {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return s.register(context.Background(), d, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.linkTimeout())
	defer cancel()
	return s.tb.peer.Dial(ctx, addr, d, s.enrollTLS) // a failed handshake is logged (tlsEvent)
}

// tlsEvent logs a bridge's refusal or failure, at most once a second with a count of the
// rest (from the bridge's goroutines).
func (s *Server) tlsEvent(e tlsbridge.Event) {
	t := &s.tb
	k := 3
	switch {
	case e.Kind == tlsbridge.Refused:
		k = 0
	case e.Kind == tlsbridge.HandshakeFailed && !e.Outbound:
		k = 1
	case e.Kind == tlsbridge.HandshakeFailed:
		k = 2
	}
	t.logMu.Lock()
	missed, ok := t.log[k].allow(time.Now())
	t.logMu.Unlock()
	if !ok {
		return
	}
	ev := s.log.Warn().Uint64("more_since_last_line", missed)
	switch tag := e.Tag.(type) {
	case *listenerState:
		ev = ev.Stringer("proto", tag.Proto).Str("listener", tag.Addr)
	case *peerDial:
		ev = ev.Stringer("proto", ProtoPeer).Uint64("peer", tag.id)
	}
	if e.Remote != nil {
		ev = ev.Stringer("remote", e.Remote)
	}
	if e.Err != nil {
		ev = ev.Err(e.Err)
	}
	switch e.Kind {
	case tlsbridge.Refused:
		ev.Str("limit", e.Why).Msg("TLS connection refused: limit reached")
	case tlsbridge.HandshakeFailed:
		if e.Outbound {
			ev.Msg("TLS: dialling a peer failed")
			return
		}
		ev.Msg("TLS handshake failed; connection closed")
	case tlsbridge.AcceptFailed:
		ev.Msg("TLS listener: accept failed; trying again")
	default:
		ev.Msg("TLS connection not handed to the loop")
	}
}

// openBridged is OnOpen's part for a connection a bridge handed over (bc) or that tells the
// loop it runs: whether OnOpen is done with it, and the action. Peer links are set up
// here; client connections go on through OnOpen's limits, with their listener from bc.
func (s *Server) openBridged(c gnet.Conn) (done bool, action gnet.Action) {
	switch v := c.Context().(type) {
	case loopTouch:
		return true, gnet.Close
	case *tlsbridge.Conn:
		d, _ := v.Tag.(*peerDial)
		ln, _ := v.Tag.(*listenerState)
		switch {
		case d != nil:
			s.openPeer(c, d)
		case ln != nil && ln.Proto == ProtoPeer:
			if s.cl == nil || s.run.stopping.Load() {
				return true, gnet.Close
			}
			s.openPeer(c, nil)
		default:
			return false, gnet.None
		}
		if cs, _ := c.Context().(*conn); cs != nil {
			cs.bridged = v
			cs.peer.proved = true // the other end's certificate is verified
			if e := s.log.Debug(); e.Enabled() {
				e.Uint64("conn", uint64(cs.owner)).Stringer("remote", v.Remote).Str("subject", v.Subject).
					Bool("outbound", v.Outbound).Msg("cluster: TLS peer link opened")
			}
		}
		return true, gnet.None
	}
	return false, gnet.None
}

// remoteAddr is the address of c's client: for a TLS connection the TLS peer's (the
// loop's socket is one end of a socketpair), otherwise the socket's peer. Allow-lists,
// protected mode and log lines take it from here.
func remoteAddr(c gnet.Conn) net.Addr {
	switch v := c.Context().(type) {
	case *conn:
		if v.bridged != nil {
			return v.bridged.Remote
		}
	case *tlsbridge.Conn:
		return v.Remote
	}
	return c.RemoteAddr()
}
