package load

import (
	"errors"
	"io"
	"runtime"
	"syscall"
)

// The epoll driver runs the closed loop of many connections on one goroutine per
// processor with plain system calls: a read and a write per batch of replies, no
// goroutine wake-ups, no deadline timers. It is what lets one core generate millions
// of requests a second. A connection that fails leaves it for the portable driver
// (worker.loop), which reconnects.

const canEpoll = true

// rawDial connects worker i with system calls, outside Go's poller, and returns the
// non-blocking socket.
func (ds *dialers) rawDial(i int) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	fail := func(err error) (int, error) {
		syscall.Close(fd)
		return -1, err
	}
	if ds.sources > 0 {
		syscall.SetsockoptInt(fd, syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: Source(i, ds.sources).As4()}); err != nil {
			return fail(err)
		}
	}
	syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	to := &syscall.SockaddrInet4{Port: int(ds.ip.Port()), Addr: ds.ip.Addr().As4()}
	// A blocking connect: a signal may interrupt it while the handshake goes on.
	for err = syscall.Connect(fd, to); err != nil; err = syscall.Connect(fd, to) {
		switch err {
		case syscall.EISCONN:
			err = nil
		case syscall.EINTR, syscall.EALREADY, syscall.EINPROGRESS:
			runtime.Gosched()
			continue
		}
		break
	}
	if err != nil {
		return fail(err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		return fail(err)
	}
	return fd, nil
}

// epoll drives workers on one epoll instance until the run ends; each worker's
// done() is called once, by this loop or by the portable driver it falls back to.
func (rn *runner) epoll(ws []*worker, done func()) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		for _, w := range ws {
			go func() { defer done(); w.loop() }()
		}
		return
	}
	defer syscall.Close(epfd)
	var byFD []*worker
	live := 0
	for _, w := range ws {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(w.fd)}
		if w.fd < 0 || syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, w.fd, &ev) != nil {
			w.closeRaw()
			go func() { defer done(); w.loop() }()
			continue
		}
		for len(byFD) <= w.fd {
			byFD = append(byFD, nil)
		}
		byFD[w.fd] = w
		live++
	}
	// leave takes w off the loop; err says why (nil: finished).
	leave := func(w *worker, err error) {
		syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, w.fd, nil)
		byFD[w.fd] = nil
		w.closeRaw()
		live--
		if err == nil {
			done()
			return
		}
		w.lose(err)
		go func() { defer done(); w.loop() }()
	}
	for _, w := range ws {
		if w.fd >= 0 && byFD[w.fd] == w {
			if err := w.pumpRaw(epfd, rn.now()); err != nil {
				leave(w, errOrNil(err))
			}
		}
	}
	events := make([]syscall.EpollEvent, 256)
	for live > 0 {
		if rn.now() >= rn.end.Load() {
			break
		}
		n, err := syscall.EpollWait(epfd, events, 0)
		if n == 0 && err == nil && rn.cfg.Spin > 0 {
			// Poll a while before sleeping: a sleeping generator makes each of the
			// server's replies pay for waking it up.
			for until := rn.now() + int64(rn.cfg.Spin); n == 0 && err == nil && rn.now() < until; {
				n, err = syscall.EpollWait(epfd, events, 0)
			}
		}
		if n == 0 && err == nil {
			n, err = syscall.EpollWait(epfd, events, 10)
		}
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			break
		}
		now := rn.now()
		for _, ev := range events[:n] {
			w := byFD[ev.Fd]
			if w == nil {
				continue
			}
			var err error
			if ev.Events&syscall.EPOLLOUT != 0 {
				err = w.writeRaw(epfd)
			}
			if err == nil && ev.Events&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP) != 0 {
				err = w.readRaw(epfd, now)
			}
			if err != nil {
				leave(w, errOrNil(err))
			}
		}
	}
	for _, w := range byFD {
		if w != nil {
			rn.rec.flush(&w.t)
			w.closeRaw()
			done()
		}
	}
}

// errOrNil maps the normal ends of a connection's work to nil.
func errOrNil(err error) error {
	if errors.Is(err, errDone) || errors.Is(err, errStop) {
		return nil
	}
	return err
}

// readRaw reads what the socket has, handles the replies and sends the next ops.
func (w *worker) readRaw(epfd int, now int64) error {
	if w.w == len(w.rbuf) {
		w.grow()
	}
	n, err := syscall.Read(w.fd, w.rbuf[w.w:])
	switch {
	case err == syscall.EAGAIN || err == syscall.EINTR:
		return nil
	case err != nil:
		return err
	case n == 0:
		return io.EOF
	}
	now = w.rn.now()
	w.w += n
	if err := w.consume(now); err != nil {
		return err
	}
	if now-w.lastFlush > flushEvery {
		w.rn.rec.flush(&w.t)
		w.lastFlush = now
	}
	return w.pumpRaw(epfd, now)
}

// pumpRaw tops the pipeline up and writes, unless earlier bytes are still unsent.
func (w *worker) pumpRaw(epfd int, now int64) error {
	if w.pend > 0 {
		return nil
	}
	if now >= w.rn.end.Load() {
		return errStop
	}
	w.fillClosed(now) // behind any releases the replies asked for
	if len(w.wbuf) == 0 {
		if w.size == 0 {
			return errDone
		}
		return nil
	}
	return w.writeRaw(epfd)
}

// writeRaw writes wbuf[sent:], asking for EPOLLOUT while the socket is full.
func (w *worker) writeRaw(epfd int) error {
	for w.sent < len(w.wbuf) {
		n, err := syscall.Write(w.fd, w.wbuf[w.sent:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			if w.pend == 0 {
				ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT, Fd: int32(w.fd)}
				syscall.EpollCtl(epfd, syscall.EPOLL_CTL_MOD, w.fd, &ev)
			}
			w.pend = len(w.wbuf) - w.sent
			return nil
		}
		if err != nil {
			return err
		}
		w.sent += n
	}
	if w.pend > 0 {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(w.fd)}
		syscall.EpollCtl(epfd, syscall.EPOLL_CTL_MOD, w.fd, &ev)
	}
	w.sent, w.pend = 0, 0
	w.wbuf = w.wbuf[:0]
	return nil
}

func (w *worker) closeRaw() {
	if w.fd >= 0 {
		syscall.Close(w.fd)
		w.fd = -1
	}
	w.sent, w.pend = 0, 0
}

// lose counts the error that ended a connection and forgets what was in flight.
func (w *worker) lose(err error) {
	var errno syscall.Errno
	switch {
	case errors.Is(err, io.EOF):
		w.count(errClosed)
	case errors.As(err, &errno):
		w.count(errIO)
	default:
		w.count(errProtocol)
		w.rn.noteErr(err)
	}
	w.forget()
}
