package tlsbridge

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Handshakes in progress, and who may be cut to make room (issue 30, item 6). A stranger
// must not be able to shut the TLS port with connections that send nothing, or a
// ClientHello a byte a second: each accepted connection must deliver its whole ClientHello
// within Config.HelloTimeout of its accept (helloConn follows the records as the handshake
// reads them); one source address holds at most Config.MaxHandshakesPerSource handshakes;
// and a connection accepted when the slots are full takes the place of the oldest one that
// has not delivered its ClientHello yet (or, failing that, that has run past HelloTimeout)
// rather than being refused. A real client sends its ClientHello with its first packet, so it
// leaves the droppable ones within a round trip; a silent one can only wait to be dropped.

// errDropped is a dropped handshake's error (Event.Err).
var errDropped = errors.New("dropped for a newer connection: the handshake slots were full and its ClientHello had not come")

// handshakes is the table of accepted connections in their handshake.
type handshakes struct {
	mu         sync.Mutex
	n          int
	bySrc      map[netip.Addr]int
	head, tail *Conn // accept order, oldest first
}

// enter gives c a handshake slot, cutting the connection it takes the place of when the
// slots (its source's, or all) are full; it returns why c is refused, or "".
func (b *Bridge) enter(c *Conn) string {
	h := &b.hs
	c.accepted = time.Now()
	h.mu.Lock()
	var victim *Conn
	if max := b.cfg.MaxHandshakesPerSource; max > 0 && h.bySrc[c.src] >= max {
		if victim = h.victim(c.src, true, c.accepted, b.cfg.HelloTimeout); victim == nil {
			h.mu.Unlock()
			return "handshakes from one address"
		}
	} else if h.n >= b.cfg.MaxHandshakes {
		if victim = h.victim(netip.Addr{}, false, c.accepted, b.cfg.HelloTimeout); victim == nil {
			h.mu.Unlock()
			return "handshakes in progress"
		}
	}
	if victim != nil {
		h.remove(victim)
	}
	h.add(c)
	h.mu.Unlock()
	if victim != nil {
		victim.dropped.Store(true)
		b.dropped.Add(1)
		_ = victim.raw.Close() // its handshake fails now; its goroutine cleans up
	}
	return ""
}

// leave gives back c's slot, if it still holds one.
func (b *Bridge) leave(c *Conn) {
	b.hs.mu.Lock()
	if c.inTable {
		b.hs.remove(c)
	}
	b.hs.mu.Unlock()
}

// victim is the handshake a newcomer may take the place of (of src only, when ofSrc): the
// oldest whose ClientHello has not come whole, else the oldest that has run longer than
// grace; nil when there is none. At most MaxHandshakes are looked at.
func (h *handshakes) victim(src netip.Addr, ofSrc bool, now time.Time, grace time.Duration) *Conn {
	var stalled *Conn
	for c := h.head; c != nil; c = c.next {
		if ofSrc && c.src != src {
			continue
		}
		if !c.hello.Load() {
			return c
		}
		if stalled == nil && now.Sub(c.accepted) > grace {
			stalled = c
		}
	}
	return stalled
}

func (h *handshakes) add(c *Conn) {
	c.inTable = true
	c.prev, c.next = h.tail, nil
	if h.tail != nil {
		h.tail.next = c
	} else {
		h.head = c
	}
	h.tail = c
	h.n++
	h.bySrc[c.src]++
}

func (h *handshakes) remove(c *Conn) {
	c.inTable = false
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		h.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		h.tail = c.prev
	}
	c.prev, c.next = nil, nil
	h.n--
	if k := h.bySrc[c.src] - 1; k > 0 {
		h.bySrc[c.src] = k
	} else {
		delete(h.bySrc, c.src)
	}
}

// source is the address a connection from a counts against: its IP, an IPv6 one's /64
// (one host's share of addresses); the zero Addr when a is not TCP.
func source(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

// helloConn is an accepted socket as its handshake reads it: once the ClientHello has come
// whole it marks the connection (no longer droppable) and lifts the ClientHello's deadline.
type helloConn struct {
	net.Conn
	c    *Conn
	scan helloScan
}

func (h *helloConn) Read(p []byte) (int, error) {
	n, err := h.Conn.Read(p)
	if n > 0 && !h.scan.done && h.scan.feed(p[:n]) {
		h.c.hello.Store(true)
		_ = h.Conn.SetReadDeadline(time.Time{})
	}
	return n, err
}

// helloScan follows the TLS records a client sends until its first handshake message, a
// ClientHello, is whole (it may span records). Anything else ends the scan: crypto/tls
// then fails the handshake on it, and the ClientHello's deadline still runs meanwhile.
type helloScan struct {
	hdr  [5]byte // the record header being read
	nh   int
	left int     // bytes of the current record's body still to come
	msg  [4]byte // the handshake message's header
	nm   int
	need int // the message's bytes still to come once its header is in
	done bool
}

// feed scans p, what the client sent next; it reports whether the ClientHello just became whole.
func (s *helloScan) feed(p []byte) bool {
	for len(p) > 0 && !s.done {
		if s.left == 0 {
			k := copy(s.hdr[s.nh:], p)
			s.nh += k
			p = p[k:]
			if s.nh < len(s.hdr) {
				return false
			}
			s.nh = 0
			s.left = int(s.hdr[3])<<8 | int(s.hdr[4])
			if s.hdr[0] != 22 || s.left == 0 { // not a handshake record
				s.done = true
				return false
			}
			continue
		}
		k := min(s.left, len(p))
		body := p[:k]
		p = p[k:]
		s.left -= k
		if s.nm < len(s.msg) {
			m := copy(s.msg[s.nm:], body)
			s.nm += m
			body = body[m:]
			if s.nm < len(s.msg) {
				continue
			}
			if s.msg[0] != 1 { // not a ClientHello
				s.done = true
				return false
			}
			s.need = int(s.msg[1])<<16 | int(s.msg[2])<<8 | int(s.msg[3])
		}
		if s.need -= len(body); s.need <= 0 {
			s.done = true
			return true
		}
	}
	return false
}

// peekSize is how much of a new connection's first bytes helloIn looks at: a ClientHello
// record of the largest size.
const peekSize = 5 + 16<<10

// helloIn says whether the whole ClientHello of a connection just accepted is in its socket
// buffer already (as a real client's usually is: it sends it with its first packet). The
// bytes are peeked at, not read; buf is the accept loop's.
func helloIn(raw net.Conn, buf []byte) bool {
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = rc.Control(func(fd uintptr) {
		n, _, _ = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
	var s helloScan
	return n > 0 && s.feed(buf[:n])
}
