package loop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/tlsbridge"
)

// OnBoot runs on Run's goroutine before the loop starts: it tunes each listener and records
// the addresses actually bound.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.run.engine = eng
	s.tb.dropInner() // bound: nothing may connect to the loop's own socket (TLS only)
	addrs := make([]net.Addr, len(s.cfg.Listeners))
	tags := map[int]*listenerState{} // the TLS listeners' (tls.go)
	for i, l := range s.cfg.Listeners {
		port, err := 0, error(nil)
		if ln := s.tb.held[i]; ln != nil {
			port = ln.Addr().(*net.TCPAddr).Port // a TLS bridge's, not gnet's
		} else {
			port, err = tuneListener(eng, l.Addr, s.cfg.Backlog)
		}
		if err != nil {
			s.run.bootErr = fmt.Errorf("listener %s (%s): %w", l.Addr, l.Proto, err)
			return gnet.Shutdown
		}
		host, _, _ := net.SplitHostPort(l.Addr)
		addrs[i] = &net.TCPAddr{IP: net.ParseIP(host), Port: port}
		if _, dup := s.ct.byPort[port]; dup {
			s.run.bootErr = fmt.Errorf("two listeners on port %d", port)
			return gnet.Shutdown
		}
		s.ct.byPort[port] = &listenerState{Listener: l, loopback: loopbackBind(l.Addr)}
		if l.TLS {
			tags[i] = s.ct.byPort[port]
		}
	}
	s.run.setAddrs(addrs)
	ev := s.log.Info().Int("open_file_cap", s.ct.fdCap).Int64("max_memory", s.cfg.MaxMemory)
	for i, l := range s.cfg.Listeners {
		ev = ev.Str(listenerField(l), addrs[i].String())
	}
	ev.Str("redis_auth", s.auth.usersSummary()).Bool("protected_mode", s.cfg.ProtectedMode).Msg("tallyd listening")
	s.warnExposed(addrs)
	for i, l := range s.cfg.Listeners {
		if l.Proto == ProtoPeer && !l.TLS {
			go s.touchLoop(addrs[i].String()) // a lone member must tick before anyone connects
		}
	}
	s.tb.up = make(chan struct{}) // closed at the first tick: the engine runs (engineUp)
	if len(tags) > 0 {
		s.tb.quit, s.tb.starting = make(chan struct{}), make(chan struct{})
		go s.startTLS(tags) // it touches the loop too
	}
	if s.fair.slice > 0 {
		go s.startPump() // fair.go
	}
	s.run.markReady()
	return gnet.None
}

// listenerField is a listener's field on the start line: its protocol, with "_tls" for a TLS
// port, so that a TLS port does not hide the plaintext port of the same protocol (two
// fields of one name: the console showed the last, slock=HOST:TLS-PORT).
func listenerField(l Listener) string {
	if l.TLS {
		return l.Proto.String() + "_tls"
	}
	return l.Proto.String()
}

// OnOpen admits or refuses a new connection and gives it its protocol.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if _, ok := c.Context().(pumpMark); ok {
		s.fair.openPump(c) // not a client: the loop's own (fair.go)
		return nil, gnet.None
	}
	if s.run.el.Load() == nil {
		s.run.el.Store(c.EventLoop())
		// Ticks reach the loop only from now on: catch up first, so that what fell due
		// before anyone connected (locks restored from the log) is gone before a request.
		_ = s.tick(context.Background())
	}
	if d, ok := c.Context().(*peerDial); ok {
		s.openPeer(c, d) // a link this node dialled
		return nil, gnet.None
	}
	if done, action := s.openBridged(c); done {
		return nil, action // a TLS peer link, or the loop's touch (tls.go)
	}
	bc, _ := c.Context().(*tlsbridge.Conn) // a TLS client: its descriptors are taken
	ln := s.ct.listenerOf(c)
	if ln == nil {
		s.log.Error().Int("fd", c.Fd()).Msg("connection from an unknown listener; closing it")
		return nil, gnet.Close
	}
	ra := remoteAddr(c)
	g, refused := s.admit(ln, ra)
	if ln.Proto == ProtoPeer {
		switch {
		case s.cl == nil || s.run.stopping.Load():
			return nil, gnet.Close
		case refused != "":
			return s.refuseSource(ln, ra, refused)
		}
		s.openPeer(c, nil)
		return nil, gnet.None
	}
	switch {
	case s.run.stopping.Load():
		return nil, gnet.Close
	case refused != "":
		return s.refuseSource(ln, ra, refused)
	case s.cfg.MaxConnections > 0 && s.ct.live >= s.cfg.MaxConnections:
		return s.refuse(ln, "max-connections", s.cfg.MaxConnections)
	case ln.MaxConnections > 0 && ln.live >= ln.MaxConnections:
		return s.refuse(ln, ln.Proto.String()+" max-connections", ln.MaxConnections)
	case bc == nil && !s.ct.fds.Take(): // given back in OnClose
		return s.refuse(ln, "open-file cap", s.ct.fdCap)
	}
	s.ct.nextOwner++
	cs := &conn{c: c, owner: s.ct.nextOwner, proto: ln.Proto, ln: ln, bridged: bc}
	cs.h = s.handlerFor(cs)
	if cs.slock != nil {
		cs.slock.gate, cs.slock.remote = g, ra
	}
	c.SetContext(cs)
	s.ct.conns[cs.owner] = cs
	s.ct.live++
	if bc != nil {
		bc.Taken() // counted once: no longer the bridge's pending (admitTLS adds the two)
	}
	s.tb.live.Store(int64(s.ct.live))
	ln.live++
	st := &s.ct.stats[ln.Proto]
	st.CurrConnections++
	st.TotalConnections++
	s.idle.touch(cs, s.now().UnixNano(), s.cfg.IdleTimeout)
	s.watchHup(cs) // its close is ordered with later connections' requests (order.go)
	if e := s.log.Debug(); e.Enabled() {
		e = e.Uint64("conn", uint64(cs.owner)).Stringer("proto", ln.Proto).Stringer("remote", remoteAddr(c))
		if bc != nil {
			e = e.Bool("tls", true).Str("subject", bc.Subject)
		}
		e.Msg("connection opened")
	}
	return nil, s.serveEarly(cs) // before the rest of the turn: see order.go
}

// refuse closes a just-accepted connection without sending anything.
func (s *Server) refuse(ln *listenerState, limit string, n int) ([]byte, gnet.Action) {
	s.ct.stats[ln.Proto].Rejected++
	if ln.Proto == ProtoPool {
		s.st.pools.Stats().ConnectErrors++
	}
	if missed, ok := s.logs.reject.allow(s.now()); ok {
		s.log.Warn().Str("limit", limit).Int("value", n).Int("connections", s.ct.live).
			Uint64("refused_since_last_line", missed).Msg("connection refused: limit reached")
	}
	return nil, gnet.Close
}

// listenerOf finds the listener a connection arrived on from its socket's local port (the
// listener address gnet reports does not say which port an ephemeral listener got). A
// connection without a socket (Fd -1: a test's in-memory one) is known by its local address;
// a TLS connection's socket is one end of a socketpair: its bridge says (tls.go).
func (ct *connState) listenerOf(c gnet.Conn) *listenerState {
	if bc, ok := c.Context().(*tlsbridge.Conn); ok {
		ln, _ := bc.Tag.(*listenerState)
		return ln
	}
	fd := c.Fd()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		if a, ok := c.LocalAddr().(*net.TCPAddr); ok && fd < 0 && a != nil {
			return ct.byPort[a.Port]
		}
		return nil
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return ct.byPort[a.Port]
	case *unix.SockaddrInet6:
		return ct.byPort[a.Port]
	}
	return nil
}

// OnClose releases everything the connection held. It may run inside a Write that failed,
// so it only updates state.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	cs, _ := c.Context().(*conn)
	if cs == nil || cs.closed {
		if bc, ok := c.Context().(*tlsbridge.Conn); ok {
			bc.LoopClosed() // a TLS connection refused at open
		}
		if _, ok := c.Context().(pumpMark); ok {
			s.closePump()
		}
		return gnet.None // refused at accept, or already handled
	}
	cs.closed = true
	c.SetContext(nil)
	if s.backing == cs {
		s.snapshotDrop() // its backup's copy-on-write and file go
	}
	if cs.bridged != nil {
		cs.bridged.LoopClosed() // its descriptor is given back there
	}
	now := s.now().UnixNano()
	s.persist.lastNow = now
	if cs.peer != nil {
		cs.h.closed(cs, now)
		s.release(cs)
		s.mem.forgetMem(cs)
		if s.cur == nil {
			s.flush()
		}
		return gnet.None
	}
	held := cs.held()
	cs.h.closed(cs, now)
	s.release(cs)
	s.mem.forgetMem(cs)
	delete(s.ct.conns, cs.owner)
	s.ct.live--
	s.tb.live.Store(int64(s.ct.live))
	if cs.bridged == nil {
		s.ct.fds.Give()
	}
	cs.ln.live--
	s.ct.stats[cs.proto].CurrConnections--
	s.idle.drop(cs)
	s.publishDue()
	if s.cur == nil {
		s.flush() // what its close owes others (an OnTraffic running flushes at its end)
	}
	if e := s.log.Debug(); e.Enabled() {
		why := "closed by server"
		if err != nil {
			why = err.Error()
			if errors.Is(err, io.EOF) {
				why = "closed by peer"
			}
		}
		e.Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).Int("released", held).
			Str("why", why).Msg("connection closed")
	}
	return gnet.None
}

// OnTraffic serves every whole request buffered on c, in order, then flushes: each
// connection with replies gets one Write.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cs, _ := c.Context().(*conn)
	if cs == nil || cs.closed {
		if _, ok := c.Context().(pumpMark); ok {
			turn := s.fair.turnBegin()
			s.pumped(c)
			s.fair.turnEnd(turn)
			return gnet.None
		}
		return gnet.Close
	}
	turn := s.fair.turnBegin()
	now := s.now().UnixNano()
	s.persist.lastNow = now
	s.cur = cs
	inbound := c.InboundBuffered()
	s.serve(cs, now)
	if cs.peer != nil {
		s.rerunVirts(now)
	}
	s.endTraffic(cs, inbound, now)
	s.publishDue()
	s.flush()
	s.cur = nil
	s.fair.turnEnd(turn)
	if cs.quit || cs.closing {
		return gnet.Close
	}
	return gnet.None
}

// serve is the loop's one Peek/Parse/Discard path: it serves cs's buffered requests in order
// until the input holds no whole request, the handler has work that holds the rest back, or
// cs has so much unsent output that it must wait for the socket to take some.
func (s *Server) serve(cs *conn, now int64) {
	c := cs.c
	cs.sent = c.OutboundBuffered()
	s.mem.room = 0 // what happened since cs's last turn is not in it (lockOOM)
	if cs.busy {
		cs.h.more(cs, now)
	}
	var buf []byte
	if cs.need == 0 || c.InboundBuffered() >= cs.need {
		cs.need = 0
		s.ct.peeks++
		buf, _ = c.Peek(-1) // valid until Discard or return
	}
	used, served := 0, 0
	sliced := s.fair.sliced(cs) // the same for the whole turn
	for used < len(buf) && !cs.busy && !cs.quit && !cs.closed {
		if s.full(cs) {
			s.kick(cs) // the rest waits until the socket has taken some
			break
		}
		if served > 0 && sliced && s.sliceOver(cs, served) {
			s.yield(cs) // the rest waits for a later turn (fair.go)
			break
		}
		var n int
		var err error
		if bh, ok := cs.h.(*binaryHandler); ok {
			n, err = bh.parse(cs, buf[used:]) // most frames: a direct call
		} else {
			n, err = cs.h.parse(cs, buf[used:])
		}
		if err != nil {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Str("remote", remoteAddr(c).String()).Err(err).Msg("closing connection: request framing lost")
			cs.quit = true
			break
		}
		if n == 0 {
			break // a partial request stays buffered until more bytes arrive (cs.need)
		}
		cs.need = 0
		used += n
		s.fair.execTimed(cs, now) // fair.go
		served++
	}
	if cs.closed {
		return
	}
	if used > 0 {
		_, _ = c.Discard(used)
		if cs.peer == nil {
			s.idle.touch(cs, now, s.cfg.IdleTimeout)
		}
	}
	n := c.InboundBuffered()
	s.noteIn(cs, inputCost*n)
	if n > s.cfg.MaxInput && !cs.quit && (cs.peer == nil || n > peerLimit || !cs.peer.authed) {
		if missed, ok := s.logs.input.allow(s.now()); ok {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Int("unparsed", n).Int("limit", s.cfg.MaxInput).Uint64("more_since_last_line", missed).
				Msg("closing connection: too much unparsed input (max-input)")
		}
		cs.quit = true
	}
}

// held is what cs holds or waits for, for the close log line.
func (cs *conn) held() int {
	switch {
	case cs.ledger != nil:
		return cs.ledger.Len()
	case cs.pool != nil:
		return cs.pool.Len()
	case cs.slock != nil:
		return len(cs.slock.wills)
	}
	return 0
}

// minTick is the shortest wait between ticks when a timeout or expiry is about to fall due.
const minTick = 250 * time.Microsecond

// publishDue tells the ticker goroutine when the store's next deadline falls due, so that
// millisecond timeouts fire on time rather than at the next regular tick.
func (s *Server) publishDue() {
	due := int64(math.MaxInt64)
	if at, ok := s.st.store.NextDeadline(); ok {
		due = at
	}
	s.run.nextDue.Store(due)
}

// OnTick runs on gnet's ticker goroutine, not the loop: it only hands the timed work over.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.tickHook()
	s.tb.engineUp() // the first tick lets the TLS listeners be served (tls.go)
	if el, ok := s.run.el.Load().(gnet.EventLoop); ok && !s.run.stopping.Load() {
		_ = el.Execute(context.Background(), gnet.RunnableFunc(s.tick))
	}
	delay := s.cfg.Tick
	if due := s.run.nextDue.Load(); due != math.MaxInt64 {
		if d := time.Duration(due - s.now().UnixNano()); d < delay {
			delay = max(d, minTick)
		}
	}
	return delay, gnet.None
}

// tick runs on the loop: what fell due in the store (timeouts, expiries, persistence,
// garbage collection) is handed out, and streaming dumps resumed.
func (s *Server) tick(context.Context) error {
	defer s.fair.turnEnd(s.fair.turnBegin())
	s.applyReload()
	now := s.now()
	s.persist.lastNow = now.UnixNano()
	s.mem.ticks++
	s.metricsTick(now)
	s.infoTick(now.UnixNano())
	s.advance(now.UnixNano())
	clear(s.ps.muted) // expiries commands caused came in this advance at the latest (pubsub.go)
	s.persistTick(now)
	s.clusterTick(now)
	s.idle.sweep(now.UnixNano(), s.cfg.IdleTimeout, s)
	if c, ok := s.ct.fds.follow(now.UnixNano()); ok {
		s.log.Warn().Int("open_file_limit", s.ct.fds.limit).Int("open_file_cap", c).
			Msg("the open-file limit changed: connections are capped to fit it")
		s.ct.fdCap = c
	}
	s.publishDue()
	s.freeFlushed() // what FLUSHDB and FLUSHALL set aside (fair.go)
	s.ps.leavingStep(max(s.fair.slice, int64(DefaultConnSlice)))
	s.unpark()
	s.flush()
	return nil
}

// advance hands the store the time and delivers, in order, everything that fell due: the
// PoolCounter wake-ups, the slock replies (timeouts, expiries) and what they led to, and the
// collections. Ticks run it, and so does each Redis-text command, so that a key a command
// before it expired is gone for it even before the next tick.
func (s *Server) advance(now int64) {
	if at, ok := s.st.store.NextDeadline(); !ok || at > now {
		return
	}
	d := &s.st.due
	d.Reset()
	s.st.store.Advance(now, d)
	s.ksPublish() // the keyspace's expiries, as notifications (ksredis.go)
	if len(d.Wakes) > 0 {
		s.h.pool.wakes = append(s.h.pool.wakes, d.Wakes...)
		s.h.pool.deliver()
	}
	if len(d.Replies) > 0 || len(d.Execs) > 0 {
		s.m.lockBegin(0, nil, true)
		s.sl.replies = append(s.sl.replies[:0], d.Replies...)
		s.sl.execs = append(s.sl.execs[:0], d.Execs...)
		s.drainLocks(now)
	}
	if d.CounterGC {
		s.gcCounters(time.Unix(0, now))
	}
	if d.SemaphoreGC {
		start := time.Now()
		n := s.st.semaphores.GC()
		s.ct.stats[ProtoSemaphore].GC(uint64(time.Since(start).Microseconds()))
		if n > 0 {
			s.log.Debug().Int("deleted", n).Msg("semaphore gc")
		}
	}
}

// gcCounters deletes released counters whose interval has ended, and times it.
func (s *Server) gcCounters(now time.Time) {
	start := time.Now()
	n := s.st.counters.GC(now.UnixNano())
	us := uint64(time.Since(start).Microseconds())
	s.ct.stats[ProtoCounter].GC(us)
	s.log.Debug().Int("deleted", n).Uint64("elapsed_us", us).Int("objects", s.st.counters.Len()).Msg("counter gc")
}
