// Package tlsbridge terminates TLS off tallyd's event loop. The loop never runs TLS: a
// bridge accepts TLS connections (or dials them) on goroutines of its own, runs each
// handshake on the connection's own goroutine under a timeout, and then copies plaintext
// both ways between the TLS connection and one end of a unix socketpair. The other end is
// handed to the loop (Config.Enroll: the loop registers it on its gnet engine), which then
// serves an ordinary connection; the Conn it is enrolled with says where it came from: the
// listener's tag, the TLS peer's address and the subject of its verified certificate.
//
// A bridged connection holds three descriptors (the TLS socket and both ends of the
// socketpair), and a fourth for the moment its loop end is enrolled (gnet duplicates it):
// the bridge takes all four from Config.Budget before the handshake, gives one back once
// the loop has the connection, and the loop gives back one when it closes its end
// (Conn.LoopClosed); the bridge gives back the other two when its goroutines end.
//
// Closing: when the TLS peer closes (or its connection fails), the loop's end sees EOF, as
// a plaintext connection's socket would; the loop closes it, and the bridge forwards what
// the loop wrote before that, then closes the TLS connection. When the loop closes first,
// the bridge forwards what is left, sends close_notify and closes. Nothing of a connection
// outlives both closes: its two goroutines end and its descriptors are closed.
package tlsbridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Budget is the descriptor budget the bridge takes from (the loop's, shared by every
// listener). Take reports false when it is spent. Both are called from any goroutine.
type Budget interface {
	Take() bool
	Give()
}

// Descriptors is how many descriptors a bridged connection holds while it lives; one
// more is taken while its loop end is being enrolled.
const Descriptors = 3

// peak is what a connection takes from the budget at accept (or dial): Descriptors and the
// one gnet's enrolment duplicates.
const peak = Descriptors + 1

// Defaults of Config's zero fields.
const (
	DefaultHandshakeTimeout       = 10 * time.Second
	DefaultHelloTimeout           = 2 * time.Second
	DefaultMaxHandshakes          = 256
	DefaultMaxHandshakesPerSource = 32
	DefaultCloseGrace             = 10 * time.Second
)

// Copy buffers. What the loop writes is copied in up to a TLS record's largest plaintext
// at once, from buffers shared through a pool: outbound waits for the loop's bytes holding
// none. What the TLS peer sends is copied through a smaller buffer of the connection's own
// (a blocked TLS read needs one): requests are small.
const (
	outSize = 16 << 10
	inSize  = 4 << 10
)

var outBufs = sync.Pool{New: func() any { b := make([]byte, outSize); return &b }}

// Config configures a bridge.
type Config struct {
	// Server is the configuration of accepted connections (Serve); Client, of dialled ones
	// (Dial: its ServerName, when empty, is the dialled host).
	Server, Client *tls.Config
	// HandshakeTimeout bounds each handshake. HelloTimeout bounds, from its accept, the
	// arrival of an accepted connection's whole ClientHello (a silent or trickling client is
	// cut then); it no longer applies once the ClientHello is in.
	HandshakeTimeout time.Duration
	HelloTimeout     time.Duration
	// MaxHandshakes caps the accepted connections in their handshake at once, and
	// MaxHandshakesPerSource those of one source address (an IPv6 /64 counts as one; <0:
	// no such cap). A connection accepted past either cap takes the place of the oldest
	// handshake (of its source, for the second) whose ClientHello has not arrived whole, or
	// failing that which has run longer than HelloTimeout: that one is cut. When there is
	// none, the newcomer is closed at once.
	MaxHandshakes          int
	MaxHandshakesPerSource int
	// Budget is the descriptors the connections take from (nil: none).
	Budget Budget
	// Admit, when set, says at accept whether a connection on the listener tagged tag may
	// go on to its handshake (a connection limit); false closes it at once.
	Admit func(tag any) bool
	// Enroll hands the loop its end of a connection whose handshake succeeded. It owns
	// loopEnd from then on (closed whatever happens), and returns once the loop has taken
	// the connection (or failed to). ctx ends when the bridge closes.
	Enroll func(ctx context.Context, loopEnd net.Conn, c *Conn) error
	// Report, when set, is told of refusals and failures (from the bridge's goroutines).
	Report func(Event)
	// KeepAlive is the TCP keep-alive period of the TLS sockets (0: Go's default).
	KeepAlive time.Duration
	// UserTimeout, when positive, is the TLS sockets' TCP_USER_TIMEOUT: how long sent data
	// may stay unacknowledged before the connection fails (peer links).
	UserTimeout time.Duration
	// CloseGrace is how long what the loop wrote before it closed its end may take to reach
	// the TLS peer (a peer that does not read is then cut off).
	CloseGrace time.Duration
}

// EventKind says what an Event reports.
type EventKind uint8

// The events.
const (
	Refused         EventKind = iota + 1 // closed at accept: Why says which limit
	HandshakeFailed                      // the TLS handshake failed, timed out or was dropped for a newer one (Err)
	AcceptFailed                         // the listener's Accept failed (Err); it goes on after a pause
	EnrollFailed                         // the loop did not take the connection (Err)
)

// Event is a refusal or a failure, for the log and the counters.
type Event struct {
	Kind     EventKind
	Tag      any      // the listener's tag, or the dial's
	Remote   net.Addr // nil for AcceptFailed
	Outbound bool
	Why      string
	Err      error
}

// Conn is one bridged connection as the loop sees it: the context its end is enrolled
// with. Its exported fields are set before Enroll and never change.
type Conn struct {
	Tag      any      // the listener's tag (Serve), or the dial's (Dial)
	Remote   net.Addr // the TLS peer's address
	Subject  string   // the subject of the peer's verified certificate; "" if it sent none
	Outbound bool     // this side dialled

	b        *Bridge
	raw      net.Conn
	tc       *tls.Conn
	pair     net.Conn // the bridge's end of the socketpair
	loopOnce sync.Once
	takeOnce sync.Once // it stopped counting as pending

	// An accepted connection in its handshake (b.hs).
	src        netip.Addr // its source, as the per-source cap counts it
	accepted   time.Time
	hello      atomic.Bool // its ClientHello has arrived whole
	dropped    atomic.Bool // cut to make room for a newer connection
	inTable    bool        // it holds a handshake slot (b.hs.mu)
	prev, next *Conn       // b.hs's list, oldest first (b.hs.mu)
}

// Taken is called by the loop when it counts the connection as one of its own, before it
// publishes that count: from then on the bridge no longer counts it as pending, so that an
// admission check (open connections + Pending) never counts it twice. The bridge calls it
// itself once the loop has answered the enrollment, for a connection the loop refused.
func (c *Conn) Taken() { c.takeOnce.Do(func() { c.b.pending.Add(-1) }) }

// LoopClosed is called by the loop once, when it closes its end (or refuses the
// connection): it gives back the loop end's descriptor, and bounds the time what the loop
// wrote may still take to reach the TLS peer. It never blocks.
func (c *Conn) LoopClosed() {
	c.loopOnce.Do(func() {
		c.b.give(1)
		_ = c.raw.SetWriteDeadline(time.Now().Add(c.b.cfg.CloseGrace))
	})
}

// Stats are a bridge's counters since it started.
type Stats struct {
	Accepted        uint64 // TCP connections accepted
	Refused         uint64 // closed at accept (a limit)
	HandshakeFailed uint64 // handshakes that failed or timed out (Dropped among them)
	Dropped         uint64 // handshakes cut to make room for a newer connection
	Bridged         uint64 // connections handed to the loop
	Live            int64  // connections with goroutines running (handshaking, or bridged)
}

// Bridge terminates TLS for the loop: Serve accepts, Dial connects.
type Bridge struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	hs     handshakes // accepted connections in their handshake

	mu     sync.Mutex
	closed bool
	lns    map[net.Listener]struct{}
	conns  map[*Conn]struct{} // every connection whose goroutines run
	wg     sync.WaitGroup     // accept loops and connections' goroutines

	accepted, refused, failed, bridged, dropped atomic.Uint64
	pending                                     atomic.Int64 // accepted, not yet the loop's
}

// New returns a bridge; nothing runs until Serve or Dial.
func New(cfg Config) *Bridge {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxHandshakesPerSource == 0 {
		cfg.MaxHandshakesPerSource = DefaultMaxHandshakesPerSource
	}
	if cfg.CloseGrace <= 0 {
		cfg.CloseGrace = DefaultCloseGrace
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Bridge{cfg: cfg, ctx: ctx, cancel: cancel, hs: handshakes{bySrc: map[netip.Addr]int{}},
		lns: map[net.Listener]struct{}{}, conns: map[*Conn]struct{}{}}
}

// ErrClosed is returned by Dial once the bridge is closed.
var ErrClosed = errors.New("tls bridge closed")

// Stats returns the bridge's counters.
func (b *Bridge) Stats() Stats {
	b.mu.Lock()
	live := int64(len(b.conns))
	b.mu.Unlock()
	return Stats{Accepted: b.accepted.Load(), Refused: b.refused.Load(), HandshakeFailed: b.failed.Load(),
		Dropped: b.dropped.Load(), Bridged: b.bridged.Load(), Live: live}
}

// Pending is how many accepted connections are not yet the loop's (in their handshake or
// being enrolled): a connection limit counts them with the loop's.
func (b *Bridge) Pending() int64 { return b.pending.Load() }

// Serve accepts TLS connections on ln, on a goroutine of its own, until Close; their
// Conns carry tag. The bridge owns ln.
func (b *Bridge) Serve(ln net.Listener, tag any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = ln.Close()
		return
	}
	b.lns[ln] = struct{}{}
	b.wg.Add(1)
	go b.accept(ln, tag)
}

// accept is a listener's accept loop.
func (b *Bridge) accept(ln net.Listener, tag any) {
	defer b.wg.Done()
	var pause time.Duration
	peek := make([]byte, peekSize)
	for {
		raw, err := ln.Accept()
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors or the like: try again after a pause, as net/http does.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			b.report(Event{Kind: AcceptFailed, Tag: tag, Err: err})
			select {
			case <-time.After(pause):
			case <-b.ctx.Done():
				return
			}
			continue
		}
		pause = 0
		b.accepted.Add(1)
		// The ClientHello's deadline runs from here (a dropped connection's Close wakes it too).
		_ = raw.SetReadDeadline(time.Now().Add(b.cfg.HelloTimeout))
		c := &Conn{Tag: tag, Remote: raw.RemoteAddr(), b: b, raw: raw, src: source(raw.RemoteAddr())}
		if helloIn(raw, peek) {
			c.hello.Store(true) // not droppable from the start, however late its goroutine runs
		}
		why := ""
		switch {
		case b.cfg.Admit != nil && !b.cfg.Admit(tag):
			why = "max-connections"
		default:
			if why = b.enter(c); why == "" && !b.take() {
				b.leave(c)
				why = "open-file cap"
			}
		}
		if why != "" {
			b.refused.Add(1)
			b.report(Event{Kind: Refused, Tag: tag, Remote: c.Remote, Why: why})
			_ = raw.Close()
			continue
		}
		if !b.track(c) {
			b.leave(c)
			b.give(peak)
			_ = raw.Close()
			return
		}
		b.pending.Add(1)
		go b.serveConn(c)
	}
}

// serveConn runs an accepted connection's handshake, then bridges it.
func (b *Bridge) serveConn(c *Conn) {
	tune(c.raw, b.cfg)
	c.tc = tls.Server(&helloConn{Conn: c.raw, c: c}, b.cfg.Server)
	err := b.handshake(b.ctx, c)
	b.leave(c)
	if err != nil {
		switch {
		case c.dropped.Load():
			err = errDropped
		case !c.hello.Load() && errors.Is(err, os.ErrDeadlineExceeded):
			err = fmt.Errorf("no whole ClientHello within %v of the connect", b.cfg.HelloTimeout)
		}
		b.pending.Add(-1)
		b.failed.Add(1)
		b.report(Event{Kind: HandshakeFailed, Tag: c.Tag, Remote: c.Remote, Err: err})
		_ = c.raw.Close()
		b.give(peak)
		b.untrack(c)
		return
	}
	_ = c.raw.SetReadDeadline(time.Time{}) // lifted once the ClientHello came: whatever the scan saw
	b.run(c)
}

// handshake runs c's handshake under the timeout and notes the peer's verified subject.
func (b *Bridge) handshake(ctx context.Context, c *Conn) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.HandshakeTimeout)
	defer cancel()
	if err := c.tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("handshake not finished within %v", b.cfg.HandshakeTimeout)
		}
		return err
	}
	if chains := c.tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
		c.Subject = chains[0][0].Subject.String()
	}
	return nil
}

// Dial connects to addr, runs the handshake and hands the connection to the loop through
// enroll (Config.Enroll when nil), all on the caller's goroutine; the copying then runs on
// goroutines of its own. The Conn carries tag. A failed handshake is reported (Event), a
// failed connect only returned.
func (b *Bridge) Dial(ctx context.Context, addr string, tag any, enroll func(context.Context, net.Conn, *Conn) error) error {
	if !b.take() {
		return errors.New("open-file cap reached")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.ctx, cancel)() // Close ends a dial in progress too
	d := net.Dialer{KeepAlive: b.cfg.KeepAlive}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		b.give(peak)
		return err
	}
	cfg := b.cfg.Client
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	c := &Conn{Tag: tag, Remote: raw.RemoteAddr(), Outbound: true, b: b, raw: raw}
	if !b.track(c) {
		_ = raw.Close()
		b.give(peak)
		return ErrClosed
	}
	tune(raw, b.cfg)
	c.tc = tls.Client(raw, cfg)
	b.pending.Add(1)
	if err := b.handshake(ctx, c); err != nil {
		b.pending.Add(-1)
		b.failed.Add(1)
		b.report(Event{Kind: HandshakeFailed, Tag: tag, Remote: c.Remote, Outbound: true, Err: err})
		_ = raw.Close()
		b.give(peak)
		b.untrack(c)
		return err
	}
	return b.bridge(c, enroll)
}

// run bridges an accepted connection on its goroutine (which becomes the inbound copier).
func (b *Bridge) run(c *Conn) { _ = b.bridge(c, nil) }

// bridge makes c's socketpair, hands the loop its end and starts copying both ways, on two
// goroutines, until both sides are closed; it returns once the loop has the connection.
func (b *Bridge) bridge(c *Conn, enroll func(context.Context, net.Conn, *Conn) error) error {
	if enroll == nil {
		enroll = b.cfg.Enroll
	}
	loopEnd, err := c.socketpair()
	if err != nil {
		b.pending.Add(-1)
		b.report(Event{Kind: EnrollFailed, Tag: c.Tag, Remote: c.Remote, Outbound: c.Outbound, Err: err})
		_ = c.raw.Close()
		b.give(peak)
		b.untrack(c)
		return err
	}
	err = enroll(b.ctx, loopEnd, c)
	c.Taken()
	if err != nil {
		b.report(Event{Kind: EnrollFailed, Tag: c.Tag, Remote: c.Remote, Outbound: c.Outbound, Err: err})
		c.loopOnce.Do(func() { b.give(1) }) // the loop never had it
		_ = c.raw.Close()
		_ = c.pair.Close()
		b.give(peak - 1)
		b.untrack(c)
		return err
	}
	b.give(1) // gnet's duplicate is closed
	b.bridged.Add(1)
	var both sync.WaitGroup
	both.Add(1)
	go func() { defer both.Done(); c.outbound() }()
	finish := func() {
		both.Wait()
		_ = c.pair.Close()
		_ = c.raw.Close()
		b.give(Descriptors - 1) // the loop gives back its end's
		b.untrack(c)
	}
	// The inbound copier is a goroutine of its own too: the handshake's grew its stack.
	b.wg.Add(1) // for it; track counted the connection once
	go func() { defer b.wg.Done(); c.inbound(); finish() }()
	return nil
}

// socketpair makes c's socketpair: the bridge keeps one end (c.pair), the loop gets the
// other.
func (c *Conn) socketpair() (net.Conn, error) {
	mine, loops, err := Socketpair()
	if err != nil {
		return nil, err
	}
	c.pair = mine
	return loops, nil
}

// Socketpair returns the two ends of a new unix stream socketpair, each a *net.UnixConn.
func Socketpair() (net.Conn, net.Conn, error) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	var ends [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		ends[i], err = net.FileConn(f) // a duplicate: f is closed below
		_ = f.Close()
		if err != nil {
			if i == 1 {
				_ = ends[0].Close()
			} else {
				_ = syscall.Close(fds[1])
			}
			return nil, nil, err
		}
	}
	return ends[0], ends[1], nil
}

// inbound copies what the TLS peer sends to the loop. When the peer closes (or its
// connection fails), the loop's end gets EOF, and the loop closes it: outbound then ends.
func (c *Conn) inbound() {
	buf := make([]byte, inSize)
	for {
		n, err := c.tc.Read(buf)
		if n > 0 {
			if _, werr := c.pair.Write(buf[:n]); werr != nil {
				return // the loop closed its end: outbound closes the TLS side
			}
		}
		if err != nil {
			if uc, ok := c.pair.(*net.UnixConn); ok {
				_ = uc.CloseWrite()
			}
			return
		}
	}
}

// outbound copies what the loop writes to the TLS peer. When the loop closes its end, the
// TLS connection is closed (close_notify first, when it can be sent), which ends inbound.
func (c *Conn) outbound() {
	rc, err := c.pair.(syscall.Conn).SyscallConn()
	for err == nil {
		if err = waitReadable(rc); err != nil {
			break
		}
		bp := outBufs.Get().(*[]byte)
		var n int
		n, err = c.pair.Read(*bp)
		if n > 0 {
			if _, werr := c.tc.Write((*bp)[:n]); werr != nil {
				err = werr
			}
		}
		outBufs.Put(bp)
	}
	_ = c.tc.Close()   // ends inbound's Read
	_ = c.pair.Close() // the loop's next read or write fails, if it has not closed yet
}

// waitReadable blocks until the socket has bytes to read, or its end (EOF, an error),
// without reading them: a peek that would block waits for the poller, as a read would.
func waitReadable(rc syscall.RawConn) error {
	var one [1]byte
	return rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), one[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN
	})
}

// track records a connection whose goroutines are about to run; false once closed.
func (b *Bridge) track(c *Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	b.wg.Add(1)
	return true
}

func (b *Bridge) untrack(c *Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	b.wg.Done()
}

func (b *Bridge) take() bool {
	if b.cfg.Budget == nil {
		return true
	}
	for i := 0; i < peak; i++ {
		if !b.cfg.Budget.Take() {
			b.give(i)
			return false
		}
	}
	return true
}

func (b *Bridge) give(n int) {
	if b.cfg.Budget == nil {
		return
	}
	for ; n > 0; n-- {
		b.cfg.Budget.Give()
	}
}

func (b *Bridge) report(e Event) {
	if b.cfg.Report != nil {
		b.cfg.Report(e)
	}
}

// Close stops accepting, ends the handshakes in progress, and waits up to grace for the
// bridged connections to end (the loop closes its ends when it stops); those still open
// then are cut. It returns once every goroutine of the bridge has ended.
func (b *Bridge) Close(grace time.Duration) {
	b.mu.Lock()
	b.closed = true
	for ln := range b.lns {
		_ = ln.Close()
	}
	b.mu.Unlock()
	b.cancel()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	b.mu.Lock()
	for c := range b.conns {
		_ = c.raw.Close() // its copiers end: the loop's end is closed already
	}
	b.mu.Unlock()
	<-done
}
