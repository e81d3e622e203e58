package load

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"time"
)

// Per-connection sizes.
const (
	readSize   = 16 << 10 // initial read buffer; grows for larger replies
	openCap    = 4096     // open loop: ops in flight before a connection stops sending
	flushLat   = 512      // latencies a connection keeps before it flushes them
	flushEvery = int64(100 * time.Millisecond)
)

// slot is a request in flight.
type slot struct {
	start    int64 // when its op started (intended time in the open loop), ns
	req      Req
	last     bool // the op's last request: its reply completes the op
	grant    bool // an acquire whose release goes out once it is granted
	probe    bool // a no-op sent right behind a grant acquire: answered first, the acquire waited
	answered bool // answered out of order, waiting for the slots before it
}

// worker drives one active connection. Only its own goroutine touches its fields,
// except mu-guarded c for stop.
type worker struct {
	rn      *runner
	id      int
	proto   Proto
	match   Matcher // proto, when its replies may come out of order
	churner bool    // a churn cycle's: its tally is not recorded
	mu      sync.Mutex
	c       net.Conn // a *net.TCPConn, or a *tls.Conn over one
	dialErr error
	fd      int // the epoll driver's socket, or -1
	sent    int // epoll driver: bytes of wbuf written
	pend    int // epoll driver: bytes of wbuf waiting for the socket

	wbuf      []byte
	rbuf      []byte
	r, w      int // unread bytes are rbuf[r:w]
	ring      []slot
	mask      int
	head      int // oldest slot in flight
	size      int // slots in flight, the answered ones behind the head included
	owed      int // releases of grant acquires in flight still to come: ring room kept for them
	inflight  int // ops in flight
	opaque    uint32
	ops       uint32 // ops started: Req.Op
	rng       rand.PCG
	key       []byte // own key, when there are no shared keys
	held      uint32 // Hot: resources this connection holds and has not yet released
	next      int64  // open loop: intended start of the next op
	t         tally
	lastFlush int64
}

func newWorker(rn *runner, id int) *worker {
	w := &worker{rn: rn, id: id, rng: seed(rn.cfg.Seed, id), fd: -1}
	w.setProto()
	ops := rn.cfg.Pipeline
	if rn.open {
		ops = openCap
	}
	// Out of order, answered slots wait in the ring for the ones before them (behind an
	// acquire that waits): room for four times the pipeline. fillClosed and fillOpen never
	// overfill it.
	slots := rn.perOp * ops
	if w.match != nil && !rn.open {
		slots *= 4
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	w.ring = make([]slot, n)
	w.mask = n - 1
	w.rbuf = make([]byte, readSize)
	w.wbuf = make([]byte, 0, 64*rn.perOp*ops)
	w.t.lat = make([]int64, 0, flushLat)
	if rn.own != nil {
		w.key = rn.own[id]
	}
	return w
}

// setProto gives w a fresh protocol state, for a new connection.
func (w *worker) setProto() {
	w.proto = w.rn.dialect.New()
	w.match, _ = w.proto.(Matcher)
}

// connectRaw dials the worker's socket for the epoll driver.
func (w *worker) connectRaw() error {
	fd, err := w.rn.dial.rawDial(w.id)
	w.fd, w.dialErr = fd, err
	return err
}

// connect dials the worker's connection.
func (w *worker) connect() error {
	c, err := w.rn.dial.conn(w.id)
	w.mu.Lock()
	w.c, w.dialErr = c, err
	w.mu.Unlock()
	return err
}

// loop serves the connection until the run ends, reconnecting after failures.
func (w *worker) loop() {
	rn := w.rn
	if rn.open {
		// Spread the connections' schedules over one gap.
		w.next = rn.gap * int64(w.id) / int64(len(rn.workers))
	}
	for {
		if w.c == nil {
			if rn.now() >= rn.end.Load() {
				return
			}
			if err := w.connect(); err != nil {
				w.count(errConnect)
				time.Sleep(50 * time.Millisecond)
				continue
			}
		}
		err := w.serve()
		w.mu.Lock()
		w.c.Close()
		w.c = nil
		w.mu.Unlock()
		switch {
		case errors.Is(err, errStop), errors.Is(err, errDone):
			return
		case errors.Is(err, os.ErrDeadlineExceeded) && rn.now() >= rn.end.Load():
			return
		case errors.Is(err, io.EOF):
			w.count(errClosed)
		case errors.As(err, new(*net.OpError)):
			w.count(errIO)
		default:
			w.count(errProtocol)
			w.rn.noteErr(err)
		}
		w.forget()
		time.Sleep(20 * time.Millisecond)
	}
}

// forget drops the ops in flight on a broken connection: they count as lost and go
// back to the --requests budget.
func (w *worker) forget() {
	if w.t.measured {
		w.t.errs[errLost] += uint64(w.inflight)
	}
	if w.rn.budget != nil {
		w.rn.budget.Add(int64(w.inflight))
	}
	w.head, w.size, w.owed, w.inflight, w.r, w.w, w.held = 0, 0, 0, 0, 0, 0, 0
	w.wbuf = w.wbuf[:0]
	w.setProto()
	w.rn.rec.flush(&w.t)
}

// count counts a transport error, in the window's tally if the run is measuring.
func (w *worker) count(k errKind) {
	now := w.rn.now()
	w.window(now)
	w.t.errs[k]++
	w.rn.rec.flush(&w.t)
}

// serve runs the connection until the run ends or the connection fails.
func (w *worker) serve() error {
	rn := w.rn
	if !rn.open {
		w.c.SetDeadline(rn.wall(rn.end.Load()))
	}
	for {
		now := rn.now()
		end := rn.end.Load()
		if now >= end {
			return errStop
		}
		// wbuf may hold releases that replies asked for.
		if rn.open {
			w.fillOpen(now)
		} else {
			w.fillClosed(now)
		}
		if len(w.wbuf) > 0 {
			if _, err := w.c.Write(w.wbuf); err != nil {
				return err
			}
			w.wbuf = w.wbuf[:0]
		}
		if w.size == 0 {
			if !rn.open {
				return errDone // the --requests budget is spent
			}
			if rn.budget != nil && rn.budget.Load() <= 0 {
				return errDone
			}
			time.Sleep(time.Duration(min(w.next, end) - now))
			continue
		}
		if rn.open {
			// Wake for the next op, unless ops already due could not go (ops in flight
			// at the cap, or the --requests budget spent): then only replies help. A
			// deadline in the past would fail the read without trying it.
			wake := end
			if w.next > now {
				wake = min(w.next, end)
			}
			w.c.SetReadDeadline(rn.wall(wake))
		}
		if w.w == len(w.rbuf) {
			w.grow()
		}
		n, err := w.c.Read(w.rbuf[w.w:])
		now = rn.now()
		if n > 0 {
			w.w += n
			if perr := w.consume(now); perr != nil {
				return perr
			}
		}
		if err != nil {
			if rn.open && errors.Is(err, os.ErrDeadlineExceeded) && rn.now() < rn.end.Load() {
				continue // time to send the next ops
			}
			return err
		}
		if now-w.lastFlush > flushEvery {
			w.rn.rec.flush(&w.t)
			w.lastFlush = now
		}
	}
}

// fillClosed tops the connection up to Pipeline ops in flight.
func (w *worker) fillClosed(now int64) {
	want := min(w.rn.cfg.Pipeline-w.inflight, (len(w.ring)-w.size-w.owed)/w.rn.perOp)
	for n := w.rn.claim(want); n > 0; n-- {
		w.op(now)
	}
}

// fillOpen sends the ops whose intended time has come.
func (w *worker) fillOpen(now int64) {
	for w.next <= now && w.inflight < openCap && w.size+w.owed+w.rn.perOp <= len(w.ring) {
		if w.rn.claim(1) == 0 {
			return
		}
		w.op(w.next)
		w.next += w.rn.gap
	}
}

// op appends the requests of one workload op to wbuf and the ring.
func (w *worker) op(start int64) {
	rn := w.rn
	cfg := &rn.cfg
	key := w.key
	if key == nil {
		key = rn.keys.Name(rn.keys.Pick(&w.rng))
	}
	w.ops++
	acq := Req{Kind: Acquire, Key: key, N: cfg.N, Max: cfg.Max, Queue: cfg.Queue, Timeout: rn.timeout,
		Expiry: rn.expiry, Op: w.ops}
	switch cfg.Workload {
	case Mix:
		if float64(w.rng.Uint64()>>11)*0x1p-53 < cfg.Gets {
			w.send(&Req{Kind: Get, Key: key, Op: w.ops}, start, asLast)
			break
		}
		fallthrough
	case Pairs:
		if rn.grant || w.churner && rn.dialect.Waits {
			// The release goes out once the acquire is granted (see answer); a probe
			// right behind the acquire tells whether it waited.
			w.send(&acq, start, asGrant)
			if rn.probe && !w.churner {
				w.send(&Req{Kind: Noop, Op: w.ops}, start, asProbe)
			}
			break
		}
		w.send(&acq, start, asPart)
		w.send(&Req{Kind: Release, Key: key, N: cfg.N, Op: w.ops}, start, asLast)
	case Hot:
		// Hold what the last acquire got until this op, so that holds span the
		// server's reads of other connections: that is where contention shows.
		if w.held >= cfg.N {
			w.send(&Req{Kind: Release, Key: key, N: cfg.N, Op: w.ops}, start, asPart)
			w.held -= cfg.N
		}
		w.send(&acq, start, asLast)
	case Waits:
		acq.Kind = Wait
		w.send(&acq, start, asGrant)
	}
	w.inflight++
}

// Roles of a request in its op.
const (
	asPart  = iota // neither of the others
	asLast         // its reply completes the op
	asGrant        // an acquire whose release goes out once it is granted
	asProbe        // a no-op right behind a grant acquire
)

// send encodes *r, the request of the op started at start with the given role, and
// remembers it in the ring.
func (w *worker) send(r *Req, start int64, role int) {
	w.opaque++
	r.Opaque = w.opaque
	s := &w.ring[(w.head+w.size)&w.mask]
	*s = slot{start: start, req: *r, last: role == asLast, grant: role == asGrant, probe: role == asProbe}
	w.size++
	if role == asGrant {
		w.owed++
	}
	w.wbuf = w.proto.Append(w.wbuf, &s.req)
}

// window points the tally at the measured window or outside it, flushing on a change.
func (w *worker) window(now int64) {
	in := now >= w.rn.mStart && now < w.rn.mEnd
	if in != w.t.measured {
		w.rn.rec.flush(&w.t)
		w.t.measured = in
	}
}

// consume parses the complete replies in rbuf, received at now.
func (w *worker) consume(now int64) error {
	w.window(now)
	if err := w.take(now); err != nil {
		return err
	}
	switch {
	case w.r == w.w:
		w.r, w.w = 0, 0
	case w.r > len(w.rbuf)/2:
		w.w = copy(w.rbuf, w.rbuf[w.r:w.w])
		w.r = 0
	}
	return nil
}

// take parses the complete replies in rbuf[r:w] and matches each to its request: the
// oldest in flight, or the one the Matcher names.
func (w *worker) take(now int64) error {
	for w.r < w.w {
		buf := w.rbuf[w.r:w.w]
		i, n := 0, 0
		var o Outcome
		var err error
		if w.match != nil {
			i, n, o, err = w.match.Match(buf, (*pending)(w))
		} else if w.size == 0 {
			return errUnasked
		} else {
			n, o, err = w.proto.Parse(buf, &w.ring[w.head].req)
		}
		if err != nil {
			return &ReplyError{Err: err, Reply: append([]byte(nil), buf[:min(len(buf), 128)]...)}
		}
		if n == 0 {
			return nil
		}
		w.r += n
		switch {
		case i < 0:
			w.t.outcomes[o]++ // pushed, not asked for
		case i >= w.size || w.ring[(w.head+i)&w.mask].answered:
			return errUnasked
		default:
			w.answer((w.head+i)&w.mask, o, now)
		}
	}
	return nil
}

// answer records the reply o to the request in ring[at], sends what it calls for (the
// release of a granted acquire) and retires the answered slots at the head of the ring.
func (w *worker) answer(at int, o Outcome, now int64) {
	s := &w.ring[at]
	s.answered = true
	w.t.reqs++
	w.t.outcomes[o]++
	var again *Req // a request the server asked for again (Resent), sent once s is retired
	switch {
	case o == OK && s.req.Kind == Acquire:
		w.t.acquired++
	case o == OK && s.req.Kind == Release:
		w.t.released++
	case o == Resent && s.last && !s.grant && !s.probe && w.match == nil:
		// Only the last request of an op, on an in-order protocol (Redis's EVALSHA after
		// NOSCRIPT): the op goes on with the copy, and s, at the head, is retired below.
		r := s.req
		again, s.last = &r, false
	}
	switch {
	case s.probe:
		// The acquire right before it: retired (at the head) or answered, it did not wait.
		if at != w.head && !w.ring[(at-1)&w.mask].answered {
			w.t.waited++
		}
	case s.grant:
		w.owed--
		next := &w.ring[(at+1)&w.mask]
		inFlight := (at+1-w.head)&w.mask < w.size
		switch {
		case o == OK:
			r := &s.req
			w.send(&Req{Kind: Release, Key: r.Key, N: r.N, Op: r.Op, Expiry: r.Expiry}, s.start, asLast)
		case inFlight && next.probe && next.req.Op == s.req.Op && !next.answered:
			next.last = true // refused: the op ends with its probe's reply
		default:
			w.done(s.start, now) // refused
		}
	}
	if w.rn.hot && o == OK && s.req.Kind == Acquire {
		w.held += s.req.N
	}
	if s.last {
		w.done(s.start, now)
	}
	// Retired slots are not cleared: nothing reads a slot outside [head, head+size),
	// and send writes a whole one.
	for w.size > 0 && w.ring[w.head].answered {
		w.head = (w.head + 1) & w.mask
		w.size--
	}
	if again != nil {
		w.send(again, s.start, asLast)
	}
}

// done counts an op completed at now.
func (w *worker) done(start, now int64) {
	if len(w.t.lat) == cap(w.t.lat) {
		w.rn.rec.flush(&w.t)
	}
	w.t.lat = append(w.t.lat, now-start)
	w.t.ops++
	w.inflight--
}

// pending shows a worker's requests in flight to a Matcher.
type pending worker

func (p *pending) Len() int { return p.size }

func (p *pending) At(i int) (*Req, bool) {
	s := &p.ring[(p.head+i)&p.mask]
	return &s.req, s.answered
}

var errUnasked = errors.New("server sent a reply nobody asked for")

// ReplyError is a reply the runner could not take: the stream is dropped.
type ReplyError struct {
	Err   error
	Reply []byte // the start of what the server sent from that reply on
}

func (e *ReplyError) Error() string {
	for _, c := range e.Reply {
		if c < ' ' && c != '\r' && c != '\n' || c >= 0x7f {
			return fmt.Sprintf("%v; the reply: % x", e.Err, e.Reply)
		}
	}
	return fmt.Sprintf("%v; the reply: %q", e.Err, e.Reply)
}

func (e *ReplyError) Unwrap() error { return e.Err }

// grow makes room in rbuf for a reply larger than it.
func (w *worker) grow() {
	if w.r > 0 {
		w.w = copy(w.rbuf, w.rbuf[w.r:w.w])
		w.r = 0
		return
	}
	b := make([]byte, 2*len(w.rbuf))
	copy(b, w.rbuf[:w.w])
	w.rbuf = b
}

// churn starts connect/op/close cycles at the configured rate until the run ends.
func (rn *runner) churn(done chan<- struct{}) {
	defer close(done)
	gap := time.Duration(float64(time.Second) / rn.cfg.Churn)
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	next := rn.now()
	for i := 0; ; i++ {
		now := rn.now()
		if now >= rn.end.Load() {
			break
		}
		if d := next - now; d > 0 {
			time.Sleep(time.Duration(d))
			continue
		}
		next += int64(gap)
		select {
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				rn.cycle(i)
			}()
		default:
			if now >= rn.mStart && now < rn.mEnd {
				rn.churnMu.Lock()
				rn.churnN.Skipped++
				rn.churnMu.Unlock()
			}
		}
	}
	wg.Wait()
}

// cycle connects, completes one op of the workload and closes.
func (rn *runner) cycle(i int) {
	w := newChurner(rn, i)
	start := rn.now()
	ok := w.once() == nil
	now := rn.now()
	if start < rn.mStart || start >= rn.mEnd {
		return
	}
	rn.churnMu.Lock()
	if ok {
		rn.churnN.Cycles++
		record(rn.churnH, now-start)
	} else {
		rn.churnN.Failed++
	}
	rn.churnMu.Unlock()
}

// newChurner returns a worker for one churn cycle; its tally is not recorded.
func newChurner(rn *runner, i int) *worker {
	w := &worker{rn: rn, id: rn.cfg.Conns + rn.cfg.Idle + i%(1<<20), churner: true,
		rng: seed(rn.cfg.Seed, -1-i), ring: make([]slot, 4), mask: 3, rbuf: make([]byte, 512)}
	w.t.lat = make([]int64, 0, 4) // one op: never flushed
	w.setProto()
	if rn.own != nil {
		w.key = rn.own[len(rn.own)-1]
	}
	return w
}

// once runs a churn cycle on w.
func (w *worker) once() error {
	c, err := w.rn.dial.conn(w.id)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	w.op(w.rn.now())
	for w.size > 0 {
		if len(w.wbuf) > 0 {
			if _, err := c.Write(w.wbuf); err != nil {
				return err
			}
			w.wbuf = w.wbuf[:0]
		}
		if w.w == len(w.rbuf) {
			w.grow()
		}
		n, err := c.Read(w.rbuf[w.w:])
		w.w += n
		if perr := w.take(w.rn.now()); perr != nil {
			return perr
		}
		for o, v := range w.t.outcomes {
			if v > 0 && Outcome(o).Error() {
				return errors.New(Outcome(o).String())
			}
		}
		if err != nil && w.size > 0 {
			return err
		}
	}
	return nil
}
