package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/pool"
)

// Pool is the PoolCounter locks of a Client's servers. Each key lives on
// the first server of its order that is up.
//
// Keys go on the wire percent-encoded as PHP's rawurlencode does (every
// byte but letters, digits and "-_.~" becomes %XX), as MediaWiki's client
// sends them, so any string is a key and a key names the same pool from
// Go and from MediaWiki.
type Pool struct {
	c *Client
}

// Limits are what an acquire asks of its key; the server judges each
// request by its own limits.
type Limits struct {
	Workers  uint32        // holders at once
	MaxQueue uint32        // holders and waiters at once; beyond: ErrQueueFull
	Timeout  time.Duration // longest wait for a slot, rounded up to whole seconds; 0: do not wait
}

// Acquire sends ACQ4ME: it returns once key is locked for the caller, or
// with an error wrapping ErrQueueFull, ErrTimeout (no slot within
// l.Timeout), ErrInvalid (Workers or MaxQueue 0), or ctx's error if ctx
// ends first, which closes the connection and so leaves the queue.
func (p *Pool) Acquire(ctx context.Context, key string, l Limits) (*Hold, error) {
	return p.acquire(ctx, "ACQ4ME", key, l)
}

// AcquireAny sends ACQ4ANY: as Acquire, except that a release of the key
// while the caller waits wakes it with an error wrapping ErrDone instead
// of a lock: another worker has done the work.
func (p *Pool) AcquireAny(ctx context.Context, key string, l Limits) (*Hold, error) {
	return p.acquire(ctx, "ACQ4ANY", key, l)
}

// Do locks key with ACQ4ME, runs fn and releases the lock however fn ends,
// a panic included. It returns fn's error joined with the release's.
func (p *Pool) Do(ctx context.Context, key string, l Limits, fn func(context.Context) error) error {
	h, err := p.Acquire(ctx, key, l)
	if err != nil {
		return err
	}
	return h.run(ctx, fn)
}

// DoAny is Do with ACQ4ANY: if another worker's release wakes the caller,
// fn does not run and the error wraps ErrDone.
func (p *Pool) DoAny(ctx context.Context, key string, l Limits, fn func(context.Context) error) error {
	h, err := p.AcquireAny(ctx, key, l)
	if err != nil {
		return err
	}
	return h.run(ctx, fn)
}

// Stats sends "STATS arg" (FULL, UPTIME or a counter's name) to the i-th
// server given to New and returns its "name: value" lines.
func (p *Pool) Stats(ctx context.Context, i int, arg string) ([]Stat, error) {
	if strings.ContainsAny(arg, "\r\n") {
		return nil, fmt.Errorf("client: STATS %q: the argument has a line break: %w", arg, ErrInvalid)
	}
	e, err := p.c.endpoint(protoPool, i)
	if err != nil {
		return nil, err
	}
	full := strings.EqualFold(arg, "FULL")
	for {
		lc, err := e.take(ctx)
		if err != nil {
			return nil, err
		}
		lines, err := lc.roundtrip(ctx, pool.AppendStats(nil, arg), 0, full)
		if err != nil {
			e.discard(lc)
			var ce *ConnError
			if lc.reused && errors.As(err, &ce) && !timedOut(err) {
				continue // an idle connection the server had closed: try a new one
			}
			return nil, err
		}
		e.put(lc)
		if len(lines) == 0 {
			return nil, nil
		}
		if k, ok := poolKind(lines[0]); ok {
			return nil, &Error{Addr: e.addr, Op: "STATS", Key: arg, Reply: lines[0], kind: k}
		}
		stats := make([]Stat, 0, len(lines))
		for _, l := range lines {
			name, value, _ := strings.Cut(l, ": ")
			stats = append(stats, Stat{Name: name, Value: value})
		}
		return stats, nil
	}
}

func (p *Pool) acquire(ctx context.Context, cmd, key string, l Limits) (*Hold, error) {
	if key == "" {
		return nil, fmt.Errorf("client: %s: empty key: %w", cmd, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var secs uint32
	if l.Timeout > 0 {
		secs = uint32(min(uint64((l.Timeout-1)/time.Second)+1, math.MaxUint32))
	}
	var req []byte
	if cmd == "ACQ4ME" {
		req = pool.AppendAcq4Me(nil, rawurlencode(key), l.Workers, l.MaxQueue, secs)
	} else {
		req = pool.AppendAcq4Any(nil, rawurlencode(key), l.Workers, l.MaxQueue, secs)
	}
	wait := time.Duration(secs) * time.Second
	var h *Hold
	err := p.c.each(ctx, key, protoPool, func(e *endpoint) error {
		for {
			lc, err := e.take(ctx)
			if err != nil {
				return err
			}
			lines, err := lc.roundtrip(ctx, req, wait, false)
			if err != nil {
				e.discard(lc) // closing it leaves the queue
				var ce *ConnError
				if lc.reused && errors.As(err, &ce) && !timedOut(err) {
					continue // an idle connection the server had closed: try a new one
				}
				return err // a server that does not answer is not asked twice
			}
			if lines[0] == "LOCKED" {
				h = &Hold{key: key, e: e, lc: lc}
				return nil
			}
			err = lineError(e, cmd, key, lines[0])
			var ce *ConnError
			if errors.As(err, &ce) || errors.Is(err, ErrLineTooLong) {
				e.discard(lc)
			} else {
				e.put(lc) // a refusal leaves the connection holding nothing
			}
			return err
		}
	})
	return h, err
}

// lineError turns a PoolCounter reply line into an *Error, or a
// *ConnError if it is no reply at all.
func lineError(e *endpoint, op, key, line string) error {
	kind, ok := poolKind(line)
	if !ok {
		return &ConnError{Addr: e.addr, Op: "read", Err: fmt.Errorf("unexpected reply %q to %s", line, op)}
	}
	return &Error{Addr: e.addr, Op: op, Key: key, Reply: line, kind: kind}
}

// noAnswer is the error of a wait cut short because the server did not answer
// a probe within the duration: a timeout, as a read deadline's is.
type noAnswer time.Duration

func (d noAnswer) Error() string {
	return fmt.Sprintf("the server does not answer (no reply to a probe within %v) while the request waits", time.Duration(d))
}
func (noAnswer) Timeout() bool   { return true }
func (noAnswer) Temporary() bool { return true }

// timedOut reports whether err is a deadline that passed (the server did not
// answer), not a connection the server closed.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rawurlencode encodes s as PHP's rawurlencode does.
func rawurlencode(s string) []byte {
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b = append(b, c)
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// lineConn is a PoolCounter connection, or a slock connection that waits
// for a lock, used by one caller at a time.
type lineConn struct {
	e      *endpoint
	nc     net.Conn
	br     *bufio.Reader
	reused bool // came from the idle pool

	mu     sync.Mutex // guards active against a late context.AfterFunc
	active bool
}

// take returns an idle connection or dials a new one.
func (e *endpoint) take(ctx context.Context) (*lineConn, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(e.idle); n > 0 {
		lc := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		lc.reused = true
		e.busy[lc] = struct{}{} // made by the take that dialed it
		e.mu.Unlock()
		return lc, nil
	}
	e.mu.Unlock()
	nc, err := e.dial(ctx)
	if err != nil {
		return nil, err
	}
	size := 1024 // a PoolCounter line
	if e.proto == protoSlock {
		size = maxLockReply
	}
	lc := &lineConn{e: e, nc: nc, br: bufio.NewReaderSize(nc, size)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		_ = nc.Close()
		return nil, ErrClosed
	}
	if e.busy == nil {
		e.busy = make(map[*lineConn]struct{})
	}
	e.busy[lc] = struct{}{}
	return lc, nil
}

// put returns a connection that holds nothing to the idle pool.
func (e *endpoint) put(lc *lineConn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.busy, lc)
	if e.closed || len(e.idle) >= e.c.opts.MaxIdle {
		_ = lc.nc.Close()
		return
	}
	e.idle = append(e.idle, lc)
}

// discard closes a connection, releasing whatever it held or waited for.
func (e *endpoint) discard(lc *lineConn) {
	e.mu.Lock()
	delete(e.busy, lc)
	e.mu.Unlock()
	_ = lc.nc.Close()
}

// roundtrip writes req and reads one reply line, or with full the lines up
// to an empty one (STATS FULL). wait is how long the server may take on
// purpose. ctx's end interrupts it; the connection must then be discarded.
func (lc *lineConn) roundtrip(ctx context.Context, req []byte, wait time.Duration, full bool) ([]string, error) {
	var lines []string
	err := lc.run(ctx, wait, func() (op string, err error) {
		lines, op, err = lc.exchange(req, full)
		return op, err
	})
	return lines, err
}

// run runs exchange, a request and the reading of its reply, which returns
// the operation that failed ("write", "read") with its error. wait is how
// long the server may take on purpose. ctx's end interrupts it; the
// connection must then be discarded.
func (lc *lineConn) run(ctx context.Context, wait time.Duration, exchange func() (op string, err error)) error {
	deadline := time.Now().Add(wait + lc.e.c.opts.IOTimeout)
	ctxDeadline, hasDeadline := ctx.Deadline()
	if hasDeadline && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
	}
	_ = lc.nc.SetDeadline(deadline)
	lc.mu.Lock()
	lc.active = true
	lc.mu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		lc.mu.Lock()
		defer lc.mu.Unlock()
		if lc.active {
			_ = lc.nc.SetDeadline(time.Unix(1, 0))
		}
	})
	var hung atomic.Bool
	var watched, unwatched chan struct{}
	if wait > 0 {
		watched, unwatched = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(unwatched)
			lc.watch(watched, &hung)
		}()
	}
	op, err := exchange()
	stop()
	lc.mu.Lock()
	lc.active = false
	lc.mu.Unlock()
	if watched != nil {
		close(watched)
		<-unwatched // soon: the watch's probe is cut short; lc is not touched once this returns
	}
	if err == nil {
		lc.e.markUp() // it answers
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if hung.Load() {
		return &ConnError{Addr: lc.e.addr, Op: "read", Err: noAnswer(lc.e.c.opts.HealthTimeout)}
	}
	var ne net.Error
	if hasDeadline && deadline.Equal(ctxDeadline) && errors.As(err, &ne) && ne.Timeout() {
		return context.DeadlineExceeded
	}
	return &ConnError{Addr: lc.e.addr, Op: op, Err: err}
}

// watch runs while a request that may wait on purpose (ACQ4ME with a timeout)
// waits on lc: from IOTimeout on, it probes the server every HealthInterval,
// and if a probe gets no answer it sets hung and ends the wait, so that a
// request to a server that stopped answering fails over after about
// IOTimeout, whatever wait it asked for. It returns when done closes.
func (lc *lineConn) watch(done chan struct{}, hung *atomic.Bool) {
	c := lc.e.c
	t := time.NewTimer(c.opts.IOTimeout)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithCancel(c.ctx)
		go func() { // the wait's end cuts the probe short
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := lc.e.probe(ctx)
		ended := ctx.Err() != nil // the wait ended (or the Client closed) meanwhile
		cancel()
		if err != nil && !ended {
			hung.Store(true)
			lc.mu.Lock()
			if lc.active {
				_ = lc.nc.SetDeadline(time.Unix(1, 0))
			}
			lc.mu.Unlock()
			return
		}
		t.Reset(c.opts.HealthInterval)
	}
}

func (lc *lineConn) exchange(req []byte, full bool) (lines []string, op string, err error) {
	if _, err := lc.nc.Write(req); err != nil {
		return nil, "write", err
	}
	for {
		line, err := lc.br.ReadSlice('\n')
		if err != nil {
			if err == bufio.ErrBufferFull {
				err = fmt.Errorf("reply line longer than %d bytes", lc.br.Size())
			}
			return nil, "read", err
		}
		s := strings.TrimSuffix(string(line[:len(line)-1]), "\r")
		if full && s == "" {
			return lines, "", nil
		}
		lines = append(lines, s)
		if !full || len(lines) == 1 && strings.HasPrefix(s, "ERROR ") {
			return lines, "", nil
		}
	}
}
