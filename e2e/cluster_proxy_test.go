package e2e

// The fault-injecting TCP proxy that stands for a network link between two cluster nodes
// when the tests cannot use network namespaces (not root, or no iproute2).

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// faultLink forwards every connection accepted on its listener to one destination. While
// it is cut, nothing passes: bytes read on either side are held back, new connections
// are accepted but not forwarded, as packets are dropped on a link that is down. When the
// link is restored, every connection that lived through the cut is closed (the bytes it
// lost would corrupt its stream), so the nodes reconnect.
//
// Each direction can also be delayed: bytes read at t are written at t + the delay then
// set (never before bytes read earlier), as packets in flight on a slow link. Bytes
// already on their way when the link is cut still arrive; a link that is cut and then
// restored closes its connections (and drops what was still on its way) as above.
type faultLink struct {
	ln   net.Listener
	dest string

	mu     sync.Mutex
	cut    bool
	healed chan struct{}          // closed when a cut ends
	epoch  int                    // cuts so far
	conns  map[*linkConn]struct{} // open connections
	closed bool
	delays [2]time.Duration // by direction: dirUp, dirDown
}

// The directions of a faultLink's connections.
const (
	dirUp   = 0 // from the node that dialled to the destination
	dirDown = 1 // from the destination back to the node that dialled
)

// linkConn is one accepted connection and, once forwarded, its upstream.
type linkConn struct {
	down, up net.Conn
	epoch    int // the link's epoch when accepted
	once     sync.Once
}

func (c *linkConn) close() {
	c.once.Do(func() {
		c.down.Close()
		if c.up != nil {
			c.up.Close()
		}
	})
}

// newFaultLink listens on an ephemeral port of 127.0.0.1 and forwards to dest.
func newFaultLink(dest string) (*faultLink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &faultLink{ln: ln, dest: dest, healed: make(chan struct{}), conns: map[*linkConn]struct{}{}}
	close(l.healed)
	go l.accept()
	return l, nil
}

// addr is where a node dials to reach dest through the link.
func (l *faultLink) addr() string { return l.ln.Addr().String() }

func (l *faultLink) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		lc := &linkConn{down: c}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		lc.epoch = l.epoch
		l.conns[lc] = struct{}{}
		cut, healed := l.cut, l.healed
		l.mu.Unlock()
		go l.serve(lc, cut, healed)
	}
}

// serve forwards one connection, or holds it until the cut that it arrived in ends.
func (l *faultLink) serve(lc *linkConn, cut bool, healed chan struct{}) {
	defer l.forget(lc)
	if cut {
		<-healed
		return
	}
	up, err := net.DialTimeout("tcp", l.dest, time.Second)
	if err != nil {
		return
	}
	l.mu.Lock()
	lc.up = up
	stale := l.closed || l.epoch != lc.epoch
	l.mu.Unlock()
	if stale {
		up.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { l.pump(lc, dirUp, up, lc.down); done <- struct{}{} }()
	go func() { l.pump(lc, dirDown, lc.down, up); done <- struct{}{} }()
	<-done
}

// chunk is bytes on their way, due at a time.
type chunk struct {
	b   []byte
	due time.Time
	eof bool // the source ended: pass the EOF on
}

// pump copies src to dst (direction dir) until either fails, holding bytes back while the
// link is cut and for the direction's delay.
func (l *faultLink) pump(lc *linkConn, dir int, dst, src net.Conn) {
	defer lc.close()
	// The bytes read go through a queue to a writer that waits until each is due.
	q := make(chan chunk, 4096)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for c := range q {
			if d := time.Until(c.due); d > 0 {
				time.Sleep(d)
			}
			if c.eof {
				// Half-close: pass the EOF on.
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				return
			}
			if _, err := dst.Write(c.b); err != nil {
				lc.close()
				return
			}
		}
	}()
	defer func() {
		close(q)
		<-written // what was on its way arrives before the connection is closed
	}()
	var last time.Time
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			cut, healed, stale, delay := l.cut, l.healed, l.epoch != lc.epoch, l.delays[dir]
			l.mu.Unlock()
			if cut {
				<-healed // the bytes are lost; the connection ends with the cut
				return
			}
			if stale {
				return
			}
			due := time.Now().Add(delay)
			if due.Before(last) {
				due = last
			}
			last = due
			select {
			case q <- chunk{b: buf[:n], due: due}:
			case <-written: // the writer failed
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				select {
				case q <- chunk{eof: true, due: last}:
				case <-written:
				}
			}
			return
		}
	}
}

// setDelay delays direction dir (dirUp, dirDown) of the link's connections by d from now
// on (0: none).
func (l *faultLink) setDelay(dir int, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delays[dir] = d
}

func (l *faultLink) forget(lc *linkConn) {
	lc.close()
	l.mu.Lock()
	delete(l.conns, lc)
	l.mu.Unlock()
}

// setCut cuts the link (true) or restores it (false); restoring closes every
// connection that was open during the cut.
func (l *faultLink) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cut == l.cut {
		return
	}
	l.cut = cut
	if cut {
		l.epoch++
		l.healed = make(chan struct{})
		return
	}
	close(l.healed)
	for lc := range l.conns {
		if lc.epoch != l.epoch {
			lc.close()
		}
	}
}

// close stops the listener and ends every connection.
func (l *faultLink) close() {
	l.ln.Close()
	l.mu.Lock()
	l.closed = true
	if l.cut {
		l.cut = false
		close(l.healed)
	}
	for lc := range l.conns {
		lc.close()
	}
	l.mu.Unlock()
}

// TestFaultLink checks the proxy itself against an echo server: it forwards, a cut
// stalls old and new connections, and restoring the link closes the ones that lived
// through the cut while new ones work again.
func TestFaultLink(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	l, err := newFaultLink(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()

	dial := func() net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", l.addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// roundTrip sends msg and reports whether it came back within d.
	roundTrip := func(c net.Conn, msg string, d time.Duration) error {
		_ = c.SetDeadline(time.Now().Add(d))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			return errors.New("echo garbled: " + string(buf))
		}
		return nil
	}
	isTimeout := func(err error) bool {
		var ne net.Error
		return errors.As(err, &ne) && ne.Timeout()
	}

	old := dial()
	if err := roundTrip(old, "before", time.Second); err != nil {
		t.Fatalf("through an intact link: %v", err)
	}
	l.setCut(true)
	if err := roundTrip(old, "during", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("an old connection across a cut link: %v, want a timeout (nothing passes)", err)
	}
	during := dial()
	if err := roundTrip(during, "new", 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("a new connection across a cut link: %v, want a timeout", err)
	}
	l.setCut(false)
	for name, c := range map[string]net.Conn{"old": old, "during": during} {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := c.Read(make([]byte, 16)); err == nil || isTimeout(err) {
			t.Fatalf("%s connection after the link came back: read %d bytes, %v; want it closed", name, n, err)
		}
	}
	if err := roundTrip(dial(), "after", time.Second); err != nil {
		t.Fatalf("a new connection after the link came back: %v", err)
	}
	n := 0
	if !waitUntil(time.Now().Add(2*time.Second), 10*time.Millisecond, func() bool {
		l.mu.Lock()
		n = len(l.conns)
		l.mu.Unlock()
		return n == 1
	}) {
		t.Fatalf("the link tracks %d connections, want 1 (the closed ones forgotten)", n)
	}
}

// TestFaultLinkDelay checks a delayed direction: bytes arrive no sooner than the delay
// after they were sent, in order, the other direction is not delayed, and bytes on their
// way when the link is cut still arrive.
func TestFaultLinkDelay(t *testing.T) {
	// The far end answers each byte it reads with the time it read it.
	far, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	arrived := make(chan time.Time, 16)
	go func() {
		c, err := far.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
			arrived <- time.Now()
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	l, err := newFaultLink(far.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	c, err := net.DialTimeout("tcp", l.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(b byte) time.Time {
		t.Helper()
		sent := time.Now()
		if _, err := c.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
		return sent
	}
	recv := func(want byte) time.Time {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != want {
			t.Fatalf("read %q (%v), want %q", b, err, want)
		}
		return time.Now()
	}
	const d = 300 * time.Millisecond
	sent := send('a')
	at := <-arrived
	recv('a')
	if at.Sub(sent) >= d {
		t.Fatalf("undelayed: arrived after %v", at.Sub(sent))
	}
	l.setDelay(dirUp, d)
	sent = send('b')
	send('c')
	atB, atC := <-arrived, <-arrived
	back := recv('b')
	recv('c')
	if atB.Sub(sent) < d || atC.Before(atB) {
		t.Fatalf("delayed by %v: b arrived after %v, c %v after b", d, atB.Sub(sent), atC.Sub(atB))
	}
	if back.Sub(atB) >= d {
		t.Fatalf("the way back, not delayed, took %v", back.Sub(atB))
	}
	// Sent, then the link cut while the byte is on its way: it arrives all the same.
	sent = send('d')
	time.Sleep(50 * time.Millisecond)
	l.setCut(true)
	select {
	case at := <-arrived:
		if at.Sub(sent) < d {
			t.Fatalf("d arrived after %v, before its delay", at.Sub(sent))
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a byte on its way when the link was cut never arrived")
	}
	l.setCut(false)
}
