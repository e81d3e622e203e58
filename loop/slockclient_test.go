package loop

// A small slock client for the tests, written from slock-protocol.md, slock-README.zh.md and
// NOTES.md §4: binary frames over one connection, replies matched to requests by RequestId
// by a reader goroutine, and frames nobody asked for (EXPRIED pushes, replies to RequestIds
// the client never registered) on a channel of their own. On top of it, each lock type of
// slock's own clients, built from Lock and Unlock frames exactly as those clients build them.
// And a RESP client for the Redis-text side of the port.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// slockMaxReply bounds a reply's value record or CALL body (a 1 MiB value comes back whole).
const slockMaxReply = 4 << 20

// replyWait is how long a client waits for a reply that must come.
const replyWait = 5 * time.Second

// slockReply is one reply frame, copied out of the stream.
type slockReply struct {
	slock.Reply
	Raw []byte    // the frame and what followed it (value record or CALL body)
	At  time.Time // when the reader decoded it
}

// data parses the value record the reply carries; ok is false when it carries none.
func (r *slockReply) data(t testing.TB) (d slock.Data, ok bool) {
	t.Helper()
	if r.Value == nil {
		return d, false
	}
	d, err := slock.ParseDataRecord(r.Value)
	if err != nil {
		t.Fatalf("reply to %x carries a bad value record % x: %v", r.RequestID, r.Value, err)
	}
	return d, true
}

func (r *slockReply) String() string {
	return fmt.Sprintf("{%s req %x result %d (%s) flag %#x db %d lock %x key %x lcount %d count %d lrcount %d rcount %d value % x}",
		r.Type, r.RequestID, r.Result, r.Result, r.Flag, r.DB, r.LockID, r.Key, r.Lcount, r.Count, r.Lrcount, r.Rcount, r.Value)
}

// pendingReq is a RequestId the client expects left more replies to.
type pendingReq struct {
	ch   chan *slockReply
	left int
}

// slockClient is one binary connection.
type slockClient struct {
	t testing.TB
	c net.Conn

	wmu sync.Mutex // one writer at a time

	mu      sync.Mutex
	pending map[[16]byte]*pendingReq
	unasked chan *slockReply
	lost    atomic.Int64 // unasked frames dropped because nobody read them

	done chan struct{} // closed when the reader stops
	rerr error         // why it stopped; read after done

	idHi uint64 // random high half of every id this client makes
	seq  atomic.Uint64
}

// dialSlock connects to addr; the connection is closed when the test ends.
func dialSlock(t testing.TB, addr string) *slockClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyWait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return newSlockClient(t, c)
}

// newSlockClient speaks slock's binary frames on c (a TLS connection, say); c is closed when
// the test ends.
func newSlockClient(t testing.TB, c net.Conn) *slockClient {
	t.Helper()
	var hi [8]byte
	_, _ = rand.Read(hi[:])
	sc := &slockClient{
		t: t, c: c,
		pending: make(map[[16]byte]*pendingReq),
		unasked: make(chan *slockReply, 1<<14),
		done:    make(chan struct{}),
		idHi:    binary.LittleEndian.Uint64(hi[:]),
	}
	go sc.read()
	t.Cleanup(func() { _ = c.Close(); <-sc.done })
	return sc
}

// read decodes replies until the connection ends and dispatches each.
func (c *slockClient) read() {
	defer close(c.done)
	buf := make([]byte, 0, 64<<10)
	tmp := make([]byte, 64<<10)
	for {
		m, err := c.c.Read(tmp)
		buf = append(buf, tmp[:m]...)
		off := 0
		for {
			var r slock.Reply
			n, perr := slock.ParseReply(buf[off:], slockMaxReply, &r)
			if perr != nil {
				c.rerr = fmt.Errorf("undecodable reply % x: %w", buf[off:min(len(buf), off+64)], perr)
				return
			}
			if n == 0 {
				break
			}
			rep := &slockReply{Raw: append([]byte(nil), buf[off:off+n]...), At: time.Now()}
			_, _ = slock.ParseReply(rep.Raw, slockMaxReply, &rep.Reply)
			off += n
			c.dispatch(rep)
		}
		buf = buf[:copy(buf, buf[off:])]
		if err != nil {
			c.rerr = err
			if len(buf) > 0 {
				c.rerr = fmt.Errorf("%w with %d bytes of a partial reply", err, len(buf))
			}
			return
		}
	}
}

// dispatch hands r to whoever registered its RequestId, or to the unasked channel. An
// EXPRIED push is always unasked: it reuses the RequestId of a lock long answered.
func (c *slockClient) dispatch(r *slockReply) {
	var ch chan *slockReply
	if !(r.Type == slock.TypeLock && r.Result == slock.ResultExpried) {
		c.mu.Lock()
		if p := c.pending[r.RequestID]; p != nil {
			ch = p.ch
			if p.left--; p.left == 0 {
				delete(c.pending, r.RequestID)
			}
		}
		c.mu.Unlock()
	}
	if ch != nil {
		ch <- r // buffered for every reply registered
		return
	}
	select {
	case c.unasked <- r:
	default:
		c.lost.Add(1)
	}
}

// id returns a fresh 16-byte id (RequestId or LockId): the client's random half, then a
// counter.
func (c *slockClient) id() (id [16]byte) {
	binary.BigEndian.PutUint64(id[:8], c.idHi)
	binary.BigEndian.PutUint64(id[8:], c.seq.Add(1))
	return id
}

// expect registers requestID for n replies (a requeue or reverse-key lock gets two).
func (c *slockClient) expect(requestID [16]byte, n int) <-chan *slockReply {
	ch := make(chan *slockReply, n)
	c.mu.Lock()
	c.pending[requestID] = &pendingReq{ch: ch, left: n}
	c.mu.Unlock()
	return ch
}

// send writes b; safe from any goroutine.
func (c *slockClient) send(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.c.Write(b)
	return err
}

// write writes b or fails the test (test goroutine only).
func (c *slockClient) write(b []byte) {
	c.t.Helper()
	if err := c.send(b); err != nil {
		c.t.Fatalf("write %d bytes: %v", len(b), err)
	}
}

// op is a request in flight.
type op struct {
	c     *slockClient
	rid   [16]byte
	ch    <-chan *slockReply
	what  string
	after func(*slockReply) // run on the reply by reply()
}

// reply waits for the op's reply.
func (o op) reply() *slockReply {
	o.c.t.Helper()
	select {
	case r := <-o.ch:
		if o.after != nil {
			o.after(r)
		}
		return r
	case <-time.After(replyWait):
		o.c.t.Fatalf("%s (request %x): no reply in %v (connection: %v)", o.what, o.rid, replyWait, o.c.readErr())
	}
	return nil
}

// want waits for the op's reply and checks its result.
func (o op) want(res slock.Result) *slockReply {
	o.c.t.Helper()
	r := o.reply()
	if r.Result != res {
		o.c.t.Fatalf("%s: result %d (%s), want %d (%s); reply %v", o.what, r.Result, r.Result, res, res, r)
	}
	return r
}

// none asserts the op has no reply within d (a request that waits).
func (o op) none(d time.Duration) {
	o.c.t.Helper()
	select {
	case r := <-o.ch:
		o.c.t.Fatalf("%s: expected no reply yet, got %v", o.what, r)
	case <-time.After(d):
	}
}

// within waits for the op's reply, failing if it takes longer than d.
func (o op) within(d time.Duration) *slockReply {
	o.c.t.Helper()
	select {
	case r := <-o.ch:
		if o.after != nil {
			o.after(r)
		}
		return r
	case <-time.After(d):
		o.c.t.Fatalf("%s: no reply within %v", o.what, d)
	}
	return nil
}

// readErr reports why the reader stopped, or nil while it runs.
func (c *slockClient) readErr() error {
	select {
	case <-c.done:
		return c.rerr
	default:
		return nil
	}
}

// start registers f's RequestId (made fresh if zero) and sends f with its data record.
func (c *slockClient) start(f *slock.Frame, what string) op {
	c.t.Helper()
	if f.RequestID == ([16]byte{}) {
		f.RequestID = c.id()
	}
	ch := c.expect(f.RequestID, 1)
	c.write(slock.AppendLockRequest(nil, f))
	return op{c: c, rid: f.RequestID, ch: ch, what: what}
}

// raw registers requestID and sends b, any bytes.
func (c *slockClient) raw(requestID [16]byte, b []byte, what string) op {
	c.t.Helper()
	ch := c.expect(requestID, 1)
	c.write(b)
	return op{c: c, rid: requestID, ch: ch, what: what}
}

// push returns the next unasked frame.
func (c *slockClient) push(what string) *slockReply {
	c.t.Helper()
	select {
	case r := <-c.unasked:
		return r
	case <-time.After(replyWait):
		c.t.Fatalf("no unasked frame (%s) in %v (connection: %v)", what, replyWait, c.readErr())
	}
	return nil
}

// noPush asserts no unasked frame arrives within d.
func (c *slockClient) noPush(d time.Duration) {
	c.t.Helper()
	if n := c.lost.Load(); n > 0 {
		c.t.Fatalf("%d unasked frames were dropped unread", n)
	}
	select {
	case r := <-c.unasked:
		c.t.Fatalf("unexpected unasked frame %v", r)
	case <-time.After(d):
	}
}

// expectClosed asserts the server closes the connection (the reader sees EOF or a reset).
func (c *slockClient) expectClosed() {
	c.t.Helper()
	select {
	case <-c.done:
		if c.rerr == nil || !(errors.Is(c.rerr, io.EOF) || errors.Is(c.rerr, net.ErrClosed) || isReset(c.rerr)) {
			c.t.Fatalf("connection ended with %v, want a close by the server", c.rerr)
		}
	case <-time.After(replyWait):
		c.t.Fatal("the server did not close the connection")
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// close closes the connection from the client side and waits for the reader.
func (c *slockClient) close() {
	_ = c.c.Close()
	<-c.done
}

// init sends INIT with clientID and returns the reply.
func (c *slockClient) init(clientID [16]byte) *slockReply {
	c.t.Helper()
	rid := c.id()
	return c.raw(rid, slock.AppendInitRequest(nil, rid, clientID), "INIT").want(slock.ResultOK)
}

// simple sends a frame of type t with bytes 19-63 zero (PING, QUIT, LEADER, ...).
func (c *slockClient) simple(t slock.Type) op {
	c.t.Helper()
	rid := c.id()
	return c.raw(rid, slock.AppendRequest(nil, t, rid), t.String())
}

// ping round-trips a PING: every reply the server sent before it has been dispatched.
func (c *slockClient) ping() {
	c.t.Helper()
	r := c.simple(slock.TypePing).want(slock.ResultOK)
	if r.Type != slock.TypePing {
		c.t.Fatalf("PING answered with type %s", r.Type)
	}
}

// state returns database db's STATE.
func (c *slockClient) state(db uint8) slock.State {
	c.t.Helper()
	rid := c.id()
	r := c.raw(rid, slock.AppendStateRequest(nil, rid, db), "STATE").want(slock.ResultOK)
	if r.Type != slock.TypeState || r.State.DB != db {
		c.t.Fatalf("STATE %d answered %v / %+v", db, r, r.State)
	}
	return r.State
}

// call sends a CALL of method with body.
func (c *slockClient) call(method string, body []byte) *slockReply {
	c.t.Helper()
	rid := c.id()
	r := c.raw(rid, slock.AppendCallRequest(nil, rid, method, body), "CALL "+method).reply()
	if r.Type != slock.TypeCall {
		c.t.Fatalf("CALL %s answered with type %s", method, r.Type)
	}
	return r
}

// lockFrame builds a Lock/Unlock frame the way slock's clients do: timeout and expried are
// 32-bit, the flag in the high 16 bits and the time in the low 16.
func lockFrame(typ slock.Type, flag, db uint8, key, lockID [16]byte, timeout, expried uint32, count uint16, rcount uint8, data []byte) *slock.Frame {
	return &slock.Frame{Type: typ, Flag: flag, DB: db, LockID: lockID, Key: key,
		Timeout: uint16(timeout), TimeoutFlag: uint16(timeout >> 16),
		Expried: uint16(expried), ExpriedFlag: uint16(expried >> 16),
		Count: count, Rcount: rcount, Data: data}
}

// Times in the clients' 32-bit form.
const (
	tfPriority = 0x0010 << 16
	tfMinutes  = 0x0040 << 16
	tfReverse  = 0x0080 << 16
	tfArrival  = 0x0100 << 16
	tfUnlocked = 0x0200 << 16
	tfMillis   = 0x0400 << 16
	tfVersion  = 0x4000 << 16 // TimeoutFlag: less-lock-version; ExpriedFlag: never expires
	tfKeep     = 0x8000 << 16
)

// ms is a millisecond time in the clients' 32-bit form.
func ms(n uint16) uint32 { return uint32(n) | tfMillis }

// key16 maps a text name to a 16-byte key as the text protocol does.
func key16(s string) [16]byte { return slock.TextID([]byte(s)) }

// ---------------------------------------------------------------------------------------
// Lock: the building block (slock's Lock object): one LockId on one key.

type sLock struct {
	c                *slockClient
	db               uint8
	key, id          [16]byte
	timeout, expried uint32
	count            uint16
	rcount           uint8
}

// newLock is a non-reentrant exclusive lock with a fresh LockId.
func newLock(c *slockClient, key [16]byte, timeout, expried uint32) *sLock {
	return &sLock{c: c, key: key, id: c.id(), timeout: timeout, expried: expried}
}

// send sends a command of this lock with the given flag and optional data record.
func (l *sLock) send(typ slock.Type, flag uint8, data []byte) op {
	l.c.t.Helper()
	f := lockFrame(typ, flag, l.db, l.key, l.id, l.timeout, l.expried, l.count, l.rcount, data)
	return l.c.start(f, fmt.Sprintf("%s flag %#x key %x lock %x", typ, flag, l.key, l.id))
}

func (l *sLock) Lock() op       { l.c.t.Helper(); return l.send(slock.TypeLock, 0, nil) }
func (l *sLock) LockShow() op   { l.c.t.Helper(); return l.send(slock.TypeLock, 0x01, nil) }
func (l *sLock) LockUpdate() op { l.c.t.Helper(); return l.send(slock.TypeLock, 0x02, nil) }
func (l *sLock) Unlock() op     { l.c.t.Helper(); return l.send(slock.TypeUnlock, 0, nil) }
func (l *sLock) UnlockHead() op { l.c.t.Helper(); return l.send(slock.TypeUnlock, 0x01, nil) }
func (l *sLock) CancelWait() op { l.c.t.Helper(); return l.send(slock.TypeUnlock, 0x02, nil) }

// newRLock is a reentrant lock: Rcount 0xff, each Unlock releases one level.
func newRLock(c *slockClient, key [16]byte, timeout, expried uint32) *sLock {
	l := newLock(c, key, timeout, expried)
	l.rcount = 0xff
	return l
}

// ---------------------------------------------------------------------------------------
// Event: "set" and "cleared" states on one key. Default-set mode: the event is set while
// the key is free; Clear holds it (LockId = the key, Update so clearing twice is fine);
// waiters probe it with Expried 0. Default-clear mode: the event is set while a holder with
// Count 1 holds it; waiters wait while it is unlocked (TimeoutFlag 0x0200), with Count 1 so
// that holder admits their probe.

type sEvent struct {
	c                *slockClient
	key              [16]byte
	timeout, expried uint32
	defaultSet       bool
}

func newEvent(c *slockClient, key [16]byte, timeout, expried uint32, defaultSet bool) *sEvent {
	return &sEvent{c: c, key: key, timeout: timeout, expried: expried, defaultSet: defaultSet}
}

// eventLock is the lock that holds the event key (cleared in default-set mode, set in
// default-clear mode).
func (e *sEvent) eventLock() *sLock {
	l := &sLock{c: e.c, key: e.key, id: e.key, timeout: e.timeout, expried: e.expried}
	if !e.defaultSet {
		l.count = 1
	}
	return l
}

// Clear clears the event; result 0, or 5 (already cleared) / 6 (already not set).
func (e *sEvent) Clear() {
	e.c.t.Helper()
	var r *slockReply
	if e.defaultSet {
		r = e.eventLock().LockUpdate().reply()
		if r.Result != slock.ResultOK && r.Result != slock.ResultLockedError {
			e.c.t.Fatalf("event clear: %v", r)
		}
		return
	}
	r = e.eventLock().Unlock().reply()
	if r.Result != slock.ResultOK && r.Result != slock.ResultUnlockError {
		e.c.t.Fatalf("event clear: %v", r)
	}
}

// Set sets the event.
func (e *sEvent) Set() {
	e.c.t.Helper()
	var r *slockReply
	if e.defaultSet {
		r = e.eventLock().Unlock().reply()
		if r.Result != slock.ResultOK && r.Result != slock.ResultUnlockError {
			e.c.t.Fatalf("event set: %v", r)
		}
		return
	}
	r = e.eventLock().LockUpdate().reply()
	if r.Result != slock.ResultOK && r.Result != slock.ResultLockedError {
		e.c.t.Fatalf("event set: %v", r)
	}
}

// waitLock is the probe a waiter sends: Expried 0.
func (e *sEvent) waitLock(timeout uint32) *sLock {
	l := &sLock{c: e.c, key: e.key, id: e.c.id(), timeout: timeout}
	if !e.defaultSet {
		l.timeout |= tfUnlocked
		l.count = 1
	}
	return l
}

// IsSet reports whether the event is set now (a wait with Timeout 0).
func (e *sEvent) IsSet() bool {
	e.c.t.Helper()
	r := e.waitLock(0).Lock().reply()
	switch r.Result {
	case slock.ResultOK:
		return true
	case slock.ResultTimeout:
		return false
	}
	e.c.t.Fatalf("event is-set: %v", r)
	return false
}

// Wait waits up to timeout for the event: result 0 when set, 8 on timeout.
func (e *sEvent) Wait(timeout uint32) op {
	e.c.t.Helper()
	return e.waitLock(timeout).Lock()
}

// ---------------------------------------------------------------------------------------
// Semaphore of n: each Acquire is a holder with a fresh LockId and Count n-1; Release
// unlocks the oldest holder (unlock flag 0x01 with a LockId that holds nothing).

type sSemaphore struct {
	c                *slockClient
	key              [16]byte
	n                uint16
	timeout, expried uint32
}

func newSemaphore(c *slockClient, key [16]byte, n uint16, timeout, expried uint32) *sSemaphore {
	return &sSemaphore{c: c, key: key, n: n, timeout: timeout, expried: expried}
}

func (s *sSemaphore) Acquire() op {
	s.c.t.Helper()
	l := newLock(s.c, s.key, s.timeout, s.expried)
	l.count = s.n - 1
	return l.Lock()
}

func (s *sSemaphore) Release() op {
	s.c.t.Helper()
	l := &sLock{c: s.c, key: s.key, timeout: s.timeout, expried: s.expried, count: s.n - 1}
	return l.UnlockHead()
}

// Count returns how many are acquired: a Show probe answers 7 with the levels, or 0 on a
// free key.
func (s *sSemaphore) Count() uint16 {
	s.c.t.Helper()
	l := &sLock{c: s.c, key: s.key, id: s.c.id(), count: 0xffff}
	r := l.LockShow().reply()
	if r.Result != slock.ResultOK && r.Result != slock.ResultUnownError {
		s.c.t.Fatalf("semaphore count: %v", r)
	}
	return r.Lcount
}

// ---------------------------------------------------------------------------------------
// RWLock: readers hold with Count 0xffff and their own LockIds; the writer with Count 0.

type sRWLock struct {
	c                *slockClient
	key              [16]byte
	timeout, expried uint32
	readers          []*sLock
	writer           *sLock
}

func newRWLock(c *slockClient, key [16]byte, timeout, expried uint32) *sRWLock {
	return &sRWLock{c: c, key: key, timeout: timeout, expried: expried}
}

func (rw *sRWLock) RLock() op {
	rw.c.t.Helper()
	l := newLock(rw.c, rw.key, rw.timeout, rw.expried)
	l.count = 0xffff
	o := l.Lock()
	o.after = func(r *slockReply) {
		if r.Result == slock.ResultOK {
			rw.readers = append(rw.readers, l)
		}
	}
	return o
}

func (rw *sRWLock) RUnlock() op {
	rw.c.t.Helper()
	l := rw.readers[0]
	rw.readers = rw.readers[1:]
	return l.Unlock()
}

func (rw *sRWLock) Lock() op {
	rw.c.t.Helper()
	rw.writer = newLock(rw.c, rw.key, rw.timeout, rw.expried)
	return rw.writer.Lock()
}

func (rw *sRWLock) Unlock() op {
	rw.c.t.Helper()
	return rw.writer.Unlock()
}

// ---------------------------------------------------------------------------------------
// MaxConcurrentFlow of n: each flow object holds the key with its own LockId and Count n-1.

type sMaxConcurrentFlow struct{ l *sLock }

func newMaxConcurrentFlow(c *slockClient, key [16]byte, n uint16, timeout, expried uint32) *sMaxConcurrentFlow {
	l := newLock(c, key, timeout, expried)
	l.count = n - 1
	return &sMaxConcurrentFlow{l}
}

func (f *sMaxConcurrentFlow) Acquire() op { f.l.c.t.Helper(); return f.l.Lock() }
func (f *sMaxConcurrentFlow) Release() op { f.l.c.t.Helper(); return f.l.Unlock() }

// ---------------------------------------------------------------------------------------
// TokenBucketFlow of n per period: each Acquire takes a lock with a fresh LockId and Count
// n-1 that is never unlocked and expires after the period (in milliseconds, flag 0x0400,
// for periods under 3 s; in whole seconds, rounded up, otherwise).

type sTokenBucketFlow struct {
	c       *slockClient
	key     [16]byte
	n       uint16
	timeout uint32
	period  time.Duration
}

func newTokenBucketFlow(c *slockClient, key [16]byte, n uint16, timeout uint32, period time.Duration) *sTokenBucketFlow {
	return &sTokenBucketFlow{c: c, key: key, n: n, timeout: timeout, period: period}
}

func (f *sTokenBucketFlow) expried() uint32 {
	if f.period < 3*time.Second {
		return ms(uint16(f.period / time.Millisecond))
	}
	return uint32(math.Ceil(f.period.Seconds()))
}

func (f *sTokenBucketFlow) Acquire() op {
	f.c.t.Helper()
	l := newLock(f.c, f.key, f.timeout, f.expried())
	l.count = f.n - 1
	return l.Lock()
}

// ---------------------------------------------------------------------------------------
// PriorityLock: an exclusive lock whose waiters are served by priority (TimeoutFlag
// 0x0010, the priority in Rcount).

func newPriorityLock(c *slockClient, key [16]byte, priority uint8, timeout, expried uint32) *sLock {
	l := newLock(c, key, timeout|tfPriority, expried)
	l.rcount = priority
	return l
}

// ---------------------------------------------------------------------------------------
// TreeLock (§5.13): node K with parent P holds a marker on K (LockId = P, lock flag 0x10)
// and a link on P (LockId = K); both with Count 0xffff so leaves and siblings are admitted.
// A leaf holds its node's key with its own LockId and unlocks with flag 0x10: when the last
// leaf of a node goes, the server unlocks the marker, then the link on the parent, and so
// on up the tree. Waiting on a node is an Expried-0 probe with Count 0: granted once no
// leaf below it is held.

type sTreeLock struct {
	c                *slockClient
	key, parent      [16]byte // parent zero: the root
	timeout, expried uint32
}

func newTreeLock(c *slockClient, key [16]byte, timeout, expried uint32) *sTreeLock {
	return &sTreeLock{c: c, key: key, timeout: timeout, expried: expried}
}

func (n *sTreeLock) NewChild() *sTreeLock {
	return &sTreeLock{c: n.c, key: n.c.id(), parent: n.key, timeout: n.timeout, expried: n.expried}
}

// Lock links the node into the tree: the link on its parent, then its marker. The root
// has neither.
func (n *sTreeLock) Lock() {
	n.c.t.Helper()
	if n.parent == ([16]byte{}) {
		return
	}
	link := &sLock{c: n.c, key: n.parent, id: n.key, timeout: n.timeout, expried: n.expried, count: 0xffff}
	link.Lock().want(slock.ResultOK)
	marker := &sLock{c: n.c, key: n.key, id: n.parent, timeout: n.timeout, expried: n.expried, count: 0xffff}
	marker.send(slock.TypeLock, 0x10, nil).want(slock.ResultOK)
}

// NewLeaf returns a leaf lock on the node.
func (n *sTreeLock) NewLeaf() *sTreeLeaf {
	l := newLock(n.c, n.key, n.timeout, n.expried)
	l.count = 0xffff
	return &sTreeLeaf{l}
}

// Wait waits up to timeout until nothing below the node is held.
func (n *sTreeLock) Wait(timeout uint32) op {
	n.c.t.Helper()
	return (&sLock{c: n.c, key: n.key, id: n.c.id(), timeout: timeout}).Lock()
}

type sTreeLeaf struct{ l *sLock }

func (lf *sTreeLeaf) Lock() op   { lf.l.c.t.Helper(); return lf.l.Lock() }
func (lf *sTreeLeaf) Unlock() op { lf.l.c.t.Helper(); return lf.l.send(slock.TypeUnlock, 0x10, nil) }

// ---------------------------------------------------------------------------------------
// GroupEvent: an event with versions. LockIds carry the version in bytes 0-7 (little
// endian) and the client id in 8-15, and every command has TimeoutFlag 0x4000
// (less-lock-version): a waiter whose version is older than the holder's has missed a
// wake-up and succeeds at once. Clear holds the key with the current version; Wakeup
// unlocks it with the requeue flag 0x08, which wakes every waiter and holds the key again
// with the version incremented; Set unlocks the oldest holder.

type sGroupEvent struct {
	c                *slockClient
	key              [16]byte
	clientID         uint64
	version          uint64
	timeout, expried uint32
}

func newGroupEvent(c *slockClient, key [16]byte, clientID, version uint64, timeout, expried uint32) *sGroupEvent {
	return &sGroupEvent{c: c, key: key, clientID: clientID, version: version, timeout: timeout, expried: expried}
}

func groupLockID(version, clientID uint64) (id [16]byte) {
	binary.LittleEndian.PutUint64(id[:8], version)
	binary.LittleEndian.PutUint64(id[8:], clientID)
	return id
}

func (g *sGroupEvent) lock(timeout, expried uint32) *sLock {
	return &sLock{c: g.c, key: g.key, id: groupLockID(g.version, g.clientID), timeout: timeout | tfVersion, expried: expried}
}

func (g *sGroupEvent) Clear() {
	g.c.t.Helper()
	r := g.lock(g.timeout, g.expried).LockUpdate().reply()
	if r.Result != slock.ResultOK && r.Result != slock.ResultLockedError {
		g.c.t.Fatalf("group event clear: %v", r)
	}
}

func (g *sGroupEvent) Set() {
	g.c.t.Helper()
	l := g.lock(g.timeout, g.expried)
	l.id = [16]byte{}
	r := l.UnlockHead().reply()
	if r.Result != slock.ResultOK && r.Result != slock.ResultUnlockError {
		g.c.t.Fatalf("group event set: %v", r)
	}
}

// Wakeup wakes the current waiters and leaves the event cleared at the next version.
func (g *sGroupEvent) Wakeup() {
	g.c.t.Helper()
	r := g.lock(g.timeout, g.expried).send(slock.TypeUnlock, 0x08, nil).want(slock.ResultOK)
	g.version = binary.LittleEndian.Uint64(r.LockID[:8])
}

func (g *sGroupEvent) IsSet() bool {
	g.c.t.Helper()
	r := g.lock(0, 0).Lock().reply()
	switch r.Result {
	case slock.ResultOK:
		return true
	case slock.ResultTimeout:
		return false
	}
	g.c.t.Fatalf("group event is-set: %v", r)
	return false
}

// Wait waits for a wake-up or the set event; on success the client moves to the version
// the reply names if it is newer, else to the next one.
func (g *sGroupEvent) Wait(timeout uint32) op {
	g.c.t.Helper()
	o := g.lock(timeout, 0).Lock()
	o.after = func(r *slockReply) {
		if r.Result != slock.ResultOK {
			return
		}
		if v := binary.LittleEndian.Uint64(r.LockID[:8]); v > g.version {
			g.version = v
		} else {
			g.version++
		}
	}
	return o
}

// ---------------------------------------------------------------------------------------
// The Redis-text side: a RESP client.

type respClient struct {
	t   testing.TB
	c   net.Conn
	buf []byte
}

func dialResp(t testing.TB, addr string) *respClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyWait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &respClient{t: t, c: c}
}

func (rc *respClient) send(args ...string) {
	rc.t.Helper()
	rc.write(resp.AppendCommand(nil, args...))
}

func (rc *respClient) write(b []byte) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(replyWait))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// tryReply reads one reply within d; the reply's bytes are its own.
func (rc *respClient) tryReply(d time.Duration) (resp.Reply, error) {
	deadline := time.Now().Add(d)
	tmp := make([]byte, 64<<10)
	for {
		r, n, err := resp.ParseReply(rc.buf)
		if err != nil {
			return r, err
		}
		if n > 0 {
			raw := append([]byte(nil), rc.buf[:n]...)
			rc.buf = rc.buf[:copy(rc.buf, rc.buf[n:])]
			r, _, _ = resp.ParseReply(raw)
			return r, nil
		}
		_ = rc.c.SetReadDeadline(deadline)
		m, err := rc.c.Read(tmp)
		rc.buf = append(rc.buf, tmp[:m]...)
		if err != nil && m == 0 {
			return r, err
		}
	}
}

func (rc *respClient) reply() resp.Reply {
	rc.t.Helper()
	r, err := rc.tryReply(replyWait)
	if err != nil {
		rc.t.Fatalf("read reply: %v", err)
	}
	return r
}

// cmd sends a command and returns its reply.
func (rc *respClient) cmd(args ...string) resp.Reply {
	rc.t.Helper()
	rc.send(args...)
	return rc.reply()
}

// silent asserts no reply arrives within d.
func (rc *respClient) silent(d time.Duration) {
	rc.t.Helper()
	if r, err := rc.tryReply(d); err == nil {
		rc.t.Fatalf("expected no reply yet, got %s", showResp(r))
	}
}

// expectClosed asserts the server closes the connection, sending nothing more.
func (rc *respClient) expectClosed() {
	rc.t.Helper()
	if len(rc.buf) > 0 {
		rc.t.Fatalf("unread bytes %q before the close", rc.buf)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(replyWait))
	var b [256]byte
	n, err := rc.c.Read(b[:])
	if n > 0 {
		rc.t.Fatalf("expected a close, got %q", b[:n])
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		rc.t.Fatal("the server did not close the connection")
	}
}

// showResp renders a reply for messages.
func showResp(r resp.Reply) string {
	switch r.Kind {
	case '+', '-':
		return string(r.Kind) + string(r.Str)
	case ':':
		return fmt.Sprintf(":%d", r.Int)
	case '$':
		if r.Null {
			return "$-1"
		}
		return fmt.Sprintf("%q", r.Str)
	case '*':
		if r.Null {
			return "*-1"
		}
		s := "["
		for i, e := range r.Elems {
			if i > 0 {
				s += " "
			}
			s += showResp(e)
		}
		return s + "]"
	}
	return "?"
}

// textLock is a decoded 12- or 14-element LOCK/UNLOCK reply.
type textLock struct {
	Code, Name, LockID string
	Lcount, Count      string
	Lrcount, Rcount    string
	Data               *resp.Reply // nil for a 12-element reply
	Token              uint64      // a grant's fencing token; 0 for none
	raw                resp.Reply
}

// parseTextLock checks the shape of a LOCK/UNLOCK reply and splits it.
func parseTextLock(t testing.TB, r resp.Reply) (tl textLock) {
	t.Helper()
	if n := len(r.Elems); n >= 14 && string(r.Elems[n-2].Str) == "TOKEN" {
		// A grant's fencing token, last (issue 19).
		tok, err := strconv.ParseUint(string(r.Elems[n-1].Str), 10, 64)
		if r.Elems[n-1].Kind != '$' || err != nil || tok == 0 {
			t.Fatalf("LOCK reply %s: TOKEN is not a positive integer", showResp(r))
		}
		r.Elems = r.Elems[:n-2]
		defer func() { tl.Token = tok }()
	}
	if r.Kind != '*' || (len(r.Elems) != 12 && len(r.Elems) != 14) {
		t.Fatalf("LOCK reply %s: want an array of 12 or 14, and TOKEN", showResp(r))
	}
	for i, e := range r.Elems[:12] {
		if e.Kind != '$' {
			t.Fatalf("LOCK reply %s: element %d is not a bulk string", showResp(r), i)
		}
	}
	s := func(i int) string { return string(r.Elems[i].Str) }
	tl = textLock{Code: s(0), Name: s(1), LockID: s(3), Lcount: s(5), Count: s(7), Lrcount: s(9), Rcount: s(11), raw: r}
	if labels := [5]string{s(2), s(4), s(6), s(8), s(10)}; labels != [5]string{"LOCK_ID", "LCOUNT", "COUNT", "LRCOUNT", "RCOUNT"} {
		t.Fatalf("LOCK reply %s: labels %q", showResp(r), labels)
	}
	if len(r.Elems) == 14 {
		if r.Elems[12].Kind != '$' || string(r.Elems[12].Str) != "DATA" {
			t.Fatalf("LOCK reply %s: element 12 is not DATA", showResp(r))
		}
		tl.Data = &r.Elems[13]
	}
	if len(tl.LockID) != 32 {
		t.Fatalf("LOCK reply %s: LOCK_ID is not 32 hex digits", showResp(r))
	}
	return tl
}
