package load

import (
	"errors"
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
	start int64 // when its op started (intended time in the open loop), ns
	req   Req
	last  bool // the op's last request: its reply completes the op
}

// worker drives one active connection. Only its own goroutine touches its fields,
// except mu-guarded c for stop.
type worker struct {
	rn      *runner
	id      int
	proto   Proto
	mu      sync.Mutex
	c       *net.TCPConn
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
	size      int // slots in flight
	inflight  int // ops in flight
	opaque    uint32
	rng       rand.PCG
	key       []byte // own key, when there are no shared keys
	held      uint32 // Hot: resources this connection holds and has not yet released
	next      int64  // open loop: intended start of the next op
	t         tally
	lastFlush int64
}

func newWorker(rn *runner, id int) *worker {
	w := &worker{rn: rn, id: id, proto: rn.dialect.New(), rng: seed(rn.cfg.Seed, id), fd: -1}
	ops := rn.cfg.Pipeline
	if rn.open {
		ops = openCap
	}
	n := 1
	for n < 2*ops {
		n <<= 1
	}
	w.ring = make([]slot, n)
	w.mask = n - 1
	w.rbuf = make([]byte, readSize)
	w.wbuf = make([]byte, 0, 64*2*ops)
	w.t.lat = make([]int64, 0, flushLat)
	if rn.own != nil {
		w.key = rn.own[id]
	}
	return w
}

// connectRaw dials the worker's socket for the epoll driver.
func (w *worker) connectRaw() error {
	fd, err := w.rn.dial.rawDial(w.id)
	w.fd, w.dialErr = fd, err
	return err
}

// connect dials the worker's connection.
func (w *worker) connect() error {
	c, err := w.rn.dial.dial(w.id)
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
	w.head, w.size, w.inflight, w.r, w.w, w.held = 0, 0, 0, 0, 0, 0
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
		w.wbuf = w.wbuf[:0]
		if rn.open {
			w.fillOpen(now)
		} else {
			w.fillClosed(now)
		}
		if len(w.wbuf) > 0 {
			if _, err := w.c.Write(w.wbuf); err != nil {
				return err
			}
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
	for n := w.rn.claim(w.rn.cfg.Pipeline - w.inflight); n > 0; n-- {
		w.op(now)
	}
}

// fillOpen sends the ops whose intended time has come.
func (w *worker) fillOpen(now int64) {
	for w.next <= now && w.inflight < openCap {
		if w.rn.claim(1) == 0 {
			return
		}
		w.op(w.next)
		w.next += w.rn.gap
	}
}

// op appends the requests of one workload op to wbuf and the ring.
func (w *worker) op(start int64) {
	cfg := &w.rn.cfg
	key := w.key
	if key == nil {
		key = w.rn.keys.Name(w.rn.keys.Pick(&w.rng))
	}
	switch cfg.Workload {
	case Mix:
		if float64(w.rng.Uint64()>>11)*0x1p-53 < cfg.Gets {
			w.send(Req{Kind: Get, Key: key}, start, true)
			break
		}
		fallthrough
	case Pairs:
		w.send(Req{Kind: Acquire, Key: key, N: cfg.N, Max: cfg.Max}, start, false)
		w.send(Req{Kind: Release, Key: key, N: cfg.N}, start, true)
	case Hot:
		// Hold what the last acquire got until this op, so that holds span the
		// server's reads of other connections: that is where contention shows.
		if w.held >= cfg.N {
			w.send(Req{Kind: Release, Key: key, N: cfg.N}, start, false)
			w.held -= cfg.N
		}
		w.send(Req{Kind: Acquire, Key: key, N: cfg.N, Max: cfg.Max}, start, true)
	case Waits:
		w.send(Req{Kind: Wait, Key: key, N: cfg.N, Max: cfg.Max,
			Timeout: uint32(cfg.Timeout / time.Millisecond)}, start, true)
	}
	w.inflight++
}

// send encodes r and remembers it in the ring.
func (w *worker) send(r Req, start int64, last bool) {
	w.opaque++
	r.Opaque = w.opaque
	w.wbuf = w.proto.Append(w.wbuf, r)
	w.ring[(w.head+w.size)&w.mask] = slot{start: start, req: r, last: last}
	w.size++
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
	for w.r < w.w {
		if w.size == 0 {
			return errUnasked
		}
		s := &w.ring[w.head]
		n, o, err := w.proto.Parse(w.rbuf[w.r:w.w], s.req)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		w.r += n
		w.t.reqs++
		w.t.outcomes[o]++
		if o == OK && s.req.Kind == Acquire && w.rn.cfg.Workload == Hot {
			w.held += s.req.N
		}
		if s.last {
			if len(w.t.lat) == cap(w.t.lat) {
				w.rn.rec.flush(&w.t)
			}
			w.t.lat = append(w.t.lat, now-s.start)
			w.t.ops++
			w.inflight--
		}
		w.head = (w.head + 1) & w.mask
		w.size--
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

var errUnasked = errors.New("server sent a reply nobody asked for")

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
	w := &worker{rn: rn, id: rn.cfg.Conns + rn.cfg.Idle + i%(1<<20), proto: rn.dialect.New(),
		rng: seed(rn.cfg.Seed, -1-i), ring: make([]slot, 2), mask: 1, rbuf: make([]byte, 512)}
	if rn.own != nil {
		w.key = rn.own[len(rn.own)-1]
	}
	return w
}

// once runs a churn cycle on w.
func (w *worker) once() error {
	c, err := w.rn.dial.dial(w.id)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	w.op(w.rn.now())
	if _, err := c.Write(w.wbuf); err != nil {
		return err
	}
	for w.size > 0 {
		if w.w == len(w.rbuf) {
			w.grow()
		}
		n, err := c.Read(w.rbuf[w.w:])
		w.w += n
		for w.r < w.w && w.size > 0 {
			m, o, perr := w.proto.Parse(w.rbuf[w.r:w.w], w.ring[w.head].req)
			if perr != nil {
				return perr
			}
			if m == 0 {
				break
			}
			if o.Error() {
				return errors.New(o.String())
			}
			w.r += m
			w.head = (w.head + 1) & w.mask
			w.size--
		}
		if err != nil && w.size > 0 {
			return err
		}
	}
	return nil
}
