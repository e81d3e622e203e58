package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
)

// parseFunc decodes the reply at the start of buf into cl: n == 0 and a nil
// error when it is not all there yet. An error loses the framing.
type parseFunc func(buf []byte, cl *call) (n int, err error)

// call is one request on a pipelined connection.
type call struct {
	opaque uint32
	sent   time.Time
	done   chan struct{} // closed when the reply is in cl or err is set, unless abandoned

	// Set by the reader before finished.
	status counter.Status // yrmcds
	body   []byte         // yrmcds, a copy
	reply  resp.Reply     // RESP, a copy
	// leveled: the command went between CONSISTENCY LEVEL and CONSISTENCY QUORUM, so
	// three replies answer it (values.go).
	leveled bool
	err     error // the connection broke

	finished, abandoned bool // under mux.mu

	// onAbandon, if set, runs in a goroutine of its own when a reply
	// arrives that nobody waits for any more.
	onAbandon func(*call)
}

// mux is a pipelined connection: requests go out in order, replies come
// back in the same order and one reader goroutine hands each to its call.
type mux struct {
	e     *endpoint
	nc    net.Conn
	parse parseFunc

	wmu    sync.Mutex // serialises writes
	wbuf   []byte
	opaque uint32

	mu      sync.Mutex
	pending []*call // sent, awaiting replies, oldest first
	err     error   // why the connection broke; set once
	dead    atomic.Bool

	watchers map[uint64]func() // run once when it breaks (watch)
	watchSeq uint64
}

func newMux(e *endpoint, nc net.Conn, parse parseFunc) *mux {
	m := &mux{e: e, nc: nc, parse: parse}
	e.c.wg.Add(1)
	go m.read()
	return m
}

func (m *mux) alive() bool { return !m.dead.Load() }

// do sends the request build appends and waits for its reply or for ctx.
// It sends even when ctx has ended (Release relies on it). The error is
// m's *ConnError if the connection broke, or ctx's if it ended first;
// a reply that arrives after that is discarded (cl.onAbandon sees it).
func (m *mux) do(ctx context.Context, cl *call, build func(dst []byte, opaque uint32) []byte) error {
	cl.done = make(chan struct{})
	io := m.e.c.opts.IOTimeout
	m.wmu.Lock()
	m.opaque++
	cl.opaque = m.opaque
	m.wbuf = build(m.wbuf[:0], cl.opaque)
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		m.wmu.Unlock()
		return err
	}
	cl.sent = time.Now()
	m.pending = append(m.pending, cl)
	if len(m.pending) == 1 {
		_ = m.nc.SetReadDeadline(cl.sent.Add(io))
	}
	m.mu.Unlock()
	_ = m.nc.SetWriteDeadline(time.Now().Add(io))
	_, err := m.nc.Write(m.wbuf)
	if cap(m.wbuf) > 64<<10 {
		m.wbuf = nil
	}
	m.wmu.Unlock()
	if err != nil {
		m.fail(&ConnError{Addr: m.e.addr, Op: "write", Err: err})
	}
	select {
	case <-cl.done:
		return cl.err
	case <-ctx.Done():
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cl.finished {
		return cl.err // the reply won the race: use it
	}
	cl.abandoned = true
	return ctx.Err()
}

// read hands each reply to the oldest pending call until the connection
// breaks.
func (m *mux) read() {
	defer m.e.c.wg.Done()
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		n, rerr := m.nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		used := 0
		for used < len(buf) {
			m.mu.Lock()
			if len(m.pending) == 0 {
				m.mu.Unlock()
				m.fail(&ConnError{Addr: m.e.addr, Op: "read", Err: fmt.Errorf("%d bytes nobody asked for: %q",
					len(buf)-used, clip(buf[used:]))})
				return
			}
			cl := m.pending[0]
			m.mu.Unlock()
			k, err := m.parse(buf[used:], cl)
			if err != nil {
				m.fail(&ConnError{Addr: m.e.addr, Op: "read", Err: err})
				return
			}
			if k == 0 {
				break
			}
			used += k
			m.finish(cl)
		}
		buf = buf[:copy(buf, buf[used:])]
		if rerr != nil {
			var ne net.Error
			if errors.As(rerr, &ne) && ne.Timeout() {
				m.mu.Lock()
				idle := len(m.pending) == 0 || time.Since(m.pending[0].sent) < m.e.c.opts.IOTimeout
				m.mu.Unlock()
				if idle { // the deadline was for a call answered meanwhile
					continue
				}
				rerr = fmt.Errorf("no reply within %v", m.e.c.opts.IOTimeout)
			}
			m.fail(&ConnError{Addr: m.e.addr, Op: "read", Err: rerr})
			return
		}
	}
}

// finish pops cl, the oldest call, whose reply has been parsed into it.
func (m *mux) finish(cl *call) {
	m.mu.Lock()
	if m.err != nil { // broken meanwhile: fail has woken cl
		m.mu.Unlock()
		return
	}
	m.pending[0] = nil
	m.pending = m.pending[1:]
	if len(m.pending) == 0 {
		m.pending = m.pending[:0:0]
		_ = m.nc.SetReadDeadline(time.Time{})
	} else {
		_ = m.nc.SetReadDeadline(m.pending[0].sent.Add(m.e.c.opts.IOTimeout))
	}
	cl.finished = true
	abandoned := cl.abandoned
	m.mu.Unlock()
	m.e.markUp() // it answers
	switch {
	case !abandoned:
		close(cl.done)
	case cl.onAbandon != nil:
		c := m.e.c
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			cl.onAbandon(cl)
		}()
	}
}

// fail breaks the connection for err: every pending call gets err, and the
// server is marked down unless the Client is closing.
func (m *mux) fail(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	m.dead.Store(true)
	pending := m.pending
	m.pending = nil
	var wake []*call
	for _, cl := range pending {
		cl.err = err
		cl.finished = true
		if !cl.abandoned {
			wake = append(wake, cl)
		}
	}
	watchers := m.watchers
	m.watchers = nil
	m.mu.Unlock()
	_ = m.nc.Close()
	for _, cl := range wake {
		close(cl.done)
	}
	for _, fn := range watchers {
		fn()
	}
	if err != ErrClosed {
		m.e.markDown(err)
	}
}

// watch runs fn once when m breaks (at once if it has), unless the stop it
// returns is called first. fn runs in the goroutine that breaks m and must
// not block.
func (m *mux) watch(fn func()) (stop func()) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		fn()
		return func() {}
	}
	if m.watchers == nil {
		m.watchers = make(map[uint64]func())
	}
	m.watchSeq++
	id := m.watchSeq
	m.watchers[id] = fn
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.watchers, id)
		m.mu.Unlock()
	}
}

// broken returns why m broke.
func (m *mux) broken() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// maxReplyBody bounds a yrmcds reply body; a Stats reply is a few hundred
// bytes, an error message a few dozen.
const maxReplyBody = 1 << 20

func parseCounter(buf []byte, cl *call) (int, error) {
	var r counter.Response
	n, err := counter.ParseResponse(buf, maxReplyBody, &r)
	if n == 0 || err != nil {
		return 0, err
	}
	if r.Opaque != cl.opaque {
		return 0, fmt.Errorf("reply to request %d (%s, %s) came for request %d", r.Opaque, r.Opcode, r.Status, cl.opaque)
	}
	cl.status = r.Status
	cl.body = bytes.Clone(r.Body)
	return n, nil
}

func parseRESP(buf []byte, cl *call) (int, error) {
	if cl.leveled {
		return parseLeveled(buf, cl)
	}
	r, n, err := resp.ParseReply(buf)
	if n == 0 || err != nil {
		return 0, err
	}
	cl.reply = cloneReply(r)
	return n, nil
}

// parseLeveled reads the three replies of a command sent between CONSISTENCY LEVEL and
// CONSISTENCY QUORUM (values.go): the command's, or the first one's if it is an error.
func parseLeveled(buf []byte, cl *call) (int, error) {
	var rs [3]resp.Reply
	at := 0
	for i := range rs {
		r, n, err := resp.ParseReply(buf[at:])
		if n == 0 || err != nil {
			return 0, err
		}
		rs[i] = r
		at += n
	}
	cl.reply = cloneReply(rs[1])
	if rs[0].Kind == '-' {
		cl.reply = cloneReply(rs[0])
	}
	return at, nil
}

// cloneReply copies r out of the read buffer.
func cloneReply(r resp.Reply) resp.Reply {
	r.Str = bytes.Clone(r.Str)
	if r.Elems != nil {
		elems := make([]resp.Reply, len(r.Elems))
		for i, e := range r.Elems {
			elems[i] = cloneReply(e)
		}
		r.Elems = elems
	}
	return r
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
