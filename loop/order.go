package loop

import (
	"cmp"
	"encoding/binary"
	"io"
	"slices"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/store"
)

// Arrival order across connections.
//
// Requests from different connections must be served in the order their bytes arrived:
// a PoolCounter client's ACQ4ANY that arrived before the holder's RELEASE waits and gets
// DONE; served after it, it gets LOCKED (issue 11, item 9). The loop serves connections in
// the order epoll reports them, and that order followed arrival except in two ways.
//
//   - Level-triggered epoll puts every descriptor it reports back at the tail of its ready
//     list, and only the next epoll_wait drops the ones that are no longer readable. gnet
//     serves the whole batch before that call, so a connection just served sits in the list
//     ahead of one that became readable after the batch was returned. If its client answers
//     quickly (a PoolCounter holder sending RELEASE right after its LOCKED), that later line
//     is reported, and served, first. strace of a failing trial shows exactly this: the
//     batch [A] is served (A's ACQ4ME → LOCKED), B's ACQ4ANY arrives, then A's RELEASE,
//     and the next epoll_wait returns [A, B]. Edge-triggered epoll does not put a reported
//     descriptor back, so a connection enters the list when its new bytes arrive. Server.Run
//     sets gnet.WithEdgeTriggeredIOChunk(2) (chunk 2, the smallest gnet allows, so that gnet
//     reads once per event as it does level-triggered, not again until EAGAIN; a read that
//     fills the read buffer is continued by gnet itself).
//   - A connection still in the listen queue is not in the epoll set: the bytes its client
//     sends at once are seen only when the loop accepts it and adds it to the set, behind
//     every connection whose bytes arrived meanwhile. serveEarly serves the whole requests
//     already waiting on a connection as soon as it is accepted, before the rest of the
//     turn, as the client sent them right after connecting.
//
// Measured with TestPoolArrivalOrder* (200 trials each, in-process clients over loopback,
// runs of the three): level-triggered as before, the waiter got LOCKED in 9–16 of 200 on
// fresh pairs, 19–80 on warm pairs and 29–107 when it connects and sends at once; with
// edge-triggered epoll alone, 0, 0 and 27–49; with serveEarly alone, 8–9, 47–64 and 8–14;
// with both, 0 in 20 runs of each (one under -race).
//
//   - A connection's close is not ordered with the connections accepted after it. gnet
//     registers the listeners level-triggered, and accepts one connection per report, so
//     a listener that was reported sits in epoll's ready list from then on, ahead of every
//     descriptor that becomes ready later. A client that closes a connection holding a lock
//     and at once opens another to take the same lock (PoolCounter's own test suite does,
//     in test_close_socket_release and from one test to the next) has the new connection
//     accepted and its request served early, and the old connection's EOF read only after
//     it, in the same batch: QUEUE_FULL or TIMEOUT where LOCKED was due (issue 31, item 3;
//     strace: epoll_wait returns [listener, old fd EPOLLIN|EPOLLRDHUP], accept4, the new
//     request's reply, then read(old fd) = 0). So the loop keeps an epoll set of its own in
//     which every client connection is registered for EPOLLRDHUP alone (hupWatch): before
//     serveEarly serves a new connection's first requests, the connections whose peers have
//     closed, with nothing left unread, are closed first, as their EOFs arrived first. gnet
//     reads the EOF later and finds the connection already released. Measured with
//     TestPoolCloseThenAcquire (a holder closes, a new connection takes its lock at once):
//     LOCKED missing in about half of the trials before, none after.
//   - The same holds for a RELEASE (any request) that arrived before a newcomer's first
//     bytes: in the batch [listener, A], the newcomer's ACQ4ME was served at accept and
//     A's RELEASE after it (TestPoolReleaseThenNewcomer: QUEUE_FULL in 12-67 of 400 trials
//     before). But a newcomer whose bytes came before A's must still be served first
//     (TestPoolNewcomerServedAtAccept), and the two look the same to epoll. What tells
//     them apart is when the bytes arrived: every accepted socket has SO_TIMESTAMPNS on
//     (inherited from its listener), and a MSG_PEEK recvmsg returns the kernel's receive
//     time of the unread bytes. The watch set registers EPOLLIN too, so it reports every
//     connection that received bytes since the last look; serveBefore peeks at each, and
//     those whose unread bytes arrived before the newcomer's are served first, oldest
//     first, through the same early path. The time is the newest merged segment's (TCP
//     merges segments that arrive while older ones are unread), so a connection with old
//     and new bytes unread may look later than it is, and is then left to gnet's order,
//     as before. The cost is one recvmsg per connection that received bytes since the
//     last newcomer's accept, paid only when a newcomer has bytes waiting at accept.
//     Measured: 0 of 400 in 6 runs of the test after, 12-67 of 400 in every run before.
//
// Order holds between epoll turns. Within one, a connection's bytes are read together:
// if A's second line arrived after B's but A's first was still unread, A's two lines are
// served before B's, as in any loop that reads a socket's buffer at once.

// earlyConn is a just-accepted connection seen through a copy of the bytes waiting on its
// socket, so that the usual request path can serve them before gnet has read anything.
// Every other method is the connection's own.
type earlyConn struct {
	gnet.Conn
	in   []byte
	used int
}

func (e *earlyConn) Peek(n int) ([]byte, error) {
	rest := e.in[e.used:]
	if n <= 0 {
		return rest, nil
	}
	if n > len(rest) {
		return rest, io.ErrShortBuffer
	}
	return rest[:n], nil
}

func (e *earlyConn) Discard(n int) (int, error) {
	rest := len(e.in) - e.used
	if n <= 0 || n > rest {
		n = rest
	}
	e.used += n
	return n, nil
}

func (e *earlyConn) InboundBuffered() int { return len(e.in) - e.used }

// earlySize caps how much of a new connection's waiting bytes serveEarly looks at; a
// request that does not fit is left to gnet.
const earlySize = 64 << 10

// serveEarly serves the whole requests already waiting on a connection that was just
// accepted. First the other connections whose unread bytes arrived before its own are served
// (serveBefore), and those whose peers closed are closed; then it peeks at the socket, runs
// the usual request path over the copy, and takes from the socket exactly the bytes that
// were served; the rest stays for gnet to read. It costs one recvmsg per accepted connection
// (EAGAIN when the client has not sent yet).
func (s *Server) serveEarly(cs *conn) gnet.Action {
	if s.ct.early == nil {
		s.ct.early = make([]byte, earlySize)
	}
	fd := cs.c.Fd()
	n, at := s.ct.hups.peek(fd, s.ct.early)
	if n <= 0 {
		return gnet.None // nothing yet, or the peer already closed: gnet will see it
	}
	if s.serveBefore(cs, at) { // others' requests were served through the scratch buffer
		if n, _ = s.ct.hups.peek(fd, s.ct.early); n <= 0 {
			return gnet.None
		}
	}
	if cs.closed {
		return gnet.None
	}
	return s.serveKernel(cs, n)
}

// serveKernel serves the whole requests among the n bytes peeked from cs's socket into
// s.ct.early, which gnet has not read, and takes the bytes served from the socket.
func (s *Server) serveKernel(cs *conn, n int) gnet.Action {
	fd := cs.c.Fd()
	real := cs.c
	// Its own value, not a field of Server: whatever keeps it after OnTraffic still
	// writes to this connection.
	ec := &earlyConn{Conn: real, in: s.ct.early[:n]}
	cs.c = ec
	act := s.OnTraffic(ec)
	cs.c = real
	used := ec.used
	ec.in, ec.used = nil, 0
	if cs.closed {
		return act
	}
	if act != gnet.None {
		// Closing (QUIT, a framing error): take every byte peeked, so that the close sends
		// FIN after the replies. Unread bytes would make it a reset, and a client that
		// reads late would lose the replies to it (QUIT's +OK).
		used = n
	}
	for used > 0 {
		m, err := unix.Read(fd, s.ct.early[:used])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			// Cannot happen (the bytes were peeked); if it does, the rest of what was
			// served would be served again, so give up on the connection.
			s.log.Error().Err(err).Uint64("conn", uint64(cs.owner)).Msg("closing connection: could not take the bytes served early")
			return gnet.Close
		}
		used -= m
	}
	return act
}

// hupWatch is an epoll set of the loop's own, in which every client connection with a socket
// of its own is registered for EPOLLIN and EPOLLRDHUP, edge-triggered: it reports the
// connections that received bytes or whose peer closed (or shut its side down) since the last
// look, whatever order gnet's epoll set will report them in. A descriptor leaves the set when
// gnet closes it. Every accepted socket has SO_TIMESTAMPNS on (from its listener, set in
// tuneListener), so that a peek tells when its unread bytes arrived: the kernel's receive
// time of the newest segment among them (segments that arrive while the older ones are
// unread are merged, and the merged segment takes the newer time).
type hupWatch struct {
	fd  int // the epoll descriptor; valid when on
	on  bool
	off bool // it could not be created: no watch, the order is gnet's alone
	ev  []unix.EpollEvent
	oob []byte      // recvmsg's control buffer (the timestamp)
	due []dueConn   // serveBefore's scratch: the connections to serve first, by arrival
	msg unix.Msghdr // peek's recvmsg header, kept here so that it is not allocated
	iov unix.Iovec
	one [1]byte // a peek of one byte (a local would escape through iov)
}

// dueConn is a connection whose unread bytes arrived at at (Unix ns).
type dueConn struct {
	cs *conn
	at int64
}

// hupEvents is how many reports one look takes at a time.
const hupEvents = 64

// watchHup registers a new client connection in the watch set (order.go).
func (s *Server) watchHup(cs *conn) {
	w := &s.ct.hups
	fd := cs.c.Fd()
	if w.off || fd < 0 || cs.bridged != nil || cs.peer != nil {
		return
	}
	if !w.on {
		efd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			w.off = true
			s.log.Warn().Err(err).Msg("no hang-up watch: a close may be served after requests that came after it")
			return
		}
		w.fd, w.on, w.ev = efd, true, make([]unix.EpollEvent, hupEvents)
		w.oob = make([]byte, unix.CmsgSpace(32))
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(uint32(cs.owner)), Pad: int32(uint32(cs.owner >> 32))}
	_ = unix.EpollCtl(w.fd, unix.EPOLL_CTL_ADD, fd, &ev) // without it, gnet's order alone
}

// peek copies the bytes waiting on socket fd into b without taking them, and returns how
// many (0 when the peer has closed or reset the connection and nothing is left, -1 when
// nothing is there yet) and when they arrived (Unix ns; 0 when unknown). It allocates
// nothing (unix.Recvmsg does: its message header escapes).
func (w *hupWatch) peek(fd int, b []byte) (n int, at int64) {
	if len(b) == 0 {
		return -1, 0
	}
	w.iov.Base = &b[0]
	w.iov.SetLen(len(b))
	w.msg = unix.Msghdr{Iov: &w.iov}
	w.msg.SetIovlen(1)
	if w.on {
		w.msg.Control = &w.oob[0]
		w.msg.SetControllen(len(w.oob))
	}
	defer func() { w.iov.Base, w.msg = nil, unix.Msghdr{} }() // b is the caller's
	for {
		r, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&w.msg)),
			unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return -1, 0
		case errno != 0:
			return 0, 0
		}
		if !w.on {
			return int(r), 0
		}
		return int(r), arrival(w.oob[:w.msg.Controllen])
	}
}

// arrival reads the SCM_TIMESTAMPNS message among the control messages oob.
func arrival(oob []byte) int64 {
	for len(oob) >= unix.SizeofCmsghdr { // (x/sys indexes an empty one)
		h, data, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			return 0
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS {
			switch len(data) {
			case 16: // struct timespec with 64-bit fields
				return int64(binary.NativeEndian.Uint64(data))*1e9 + int64(binary.NativeEndian.Uint64(data[8:]))
			case 8:
				return int64(int32(binary.NativeEndian.Uint32(data)))*1e9 + int64(binary.NativeEndian.Uint32(data[4:]))
			}
			return 0
		}
		oob = rest
	}
	return 0
}

// serveBefore runs, before a newcomer nc's first requests (whose bytes arrived at at), what
// came before them on the other connections: those whose peers have closed, with nothing
// left unread, are closed (what they held is released); those whose unread bytes arrived
// earlier (a RELEASE sent before the newcomer connected) have their whole requests served,
// oldest first. A connection with bytes in gnet's buffer, or whose requests wait behind
// work of its own, is left to gnet. It reports whether any connection was served (the
// scratch buffer s.ct.early then holds its bytes, not nc's).
func (s *Server) serveBefore(nc *conn, at int64) bool {
	w := &s.ct.hups
	if !w.on {
		return false
	}
	w.due = w.due[:0]
	for {
		n, err := unix.EpollWait(w.fd, w.ev, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		for _, ev := range w.ev[:n] {
			owner := store.Owner(uint32(ev.Fd)) | store.Owner(uint32(ev.Pad))<<32
			cs := s.ct.conns[owner]
			if cs == nil || cs == nc || !s.servableNow(cs) {
				continue
			}
			switch m, t := w.peek(cs.c.Fd(), w.one[:]); {
			case m == 0:
				s.OnClose(cs.c, io.EOF) // gnet's own close, when it reads the EOF, finds it done
			case m > 0 && at > 0 && t > 0 && t < at:
				w.due = append(w.due, dueConn{cs, t})
			}
		}
		if n < len(w.ev) {
			break
		}
	}
	if len(w.due) == 0 {
		return false
	}
	slices.SortFunc(w.due, func(a, b dueConn) int { return cmp.Compare(a.at, b.at) })
	for i := range w.due {
		cs := w.due[i].cs
		w.due[i].cs = nil
		if !s.servableNow(cs) {
			continue // closed or held back by one served before it
		}
		n, _ := w.peek(cs.c.Fd(), s.ct.early)
		if n <= 0 {
			continue
		}
		if act := s.serveKernel(cs, n); act != gnet.None && !cs.closed {
			s.closeConn(cs)
		} else if s.servableNow(cs) {
			if m, _ := w.peek(cs.c.Fd(), w.one[:]); m == 0 {
				s.OnClose(cs.c, io.EOF) // and its peer is gone: closed as the others above
			}
		}
	}
	w.due = w.due[:0]
	return true
}

// servableNow reports whether cs's unread bytes may be served now, out of gnet's order: it
// is open, has nothing in gnet's buffer that came before them, and no work of its own holds
// its requests back.
func (s *Server) servableNow(cs *conn) bool {
	return !cs.closed && !cs.closing && !cs.quit && !cs.busy && !cs.yielded && !cs.parked && !cs.kicked &&
		cs.c.InboundBuffered() == 0
}

// close releases the hang-up set, once the loop is gone.
func (w *hupWatch) close() {
	if w.on {
		_ = unix.Close(w.fd)
		w.on = false
	}
}
