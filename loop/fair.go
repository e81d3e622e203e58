package loop

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/proto/resp"
)

// Fairness between connections (issue 21, item 1), after memcached's reqs_per_event.
//
// One read can bring a connection thousands of requests: 2,000 pipelined KEYS over 100,000
// keys in one 48 KB write held the loop 16.7 s, and every other client on every port waited.
// So a connection gets a slice of each loop turn (--conn-slice, 1 ms by default, measured on
// the monotonic clock: work, not a count of requests), then yields: the requests it has left
// stay in its input buffer, its replies so far are written, and it is served again on a later
// turn, after the connections whose bytes arrived meanwhile. Its own replies keep their order:
// it is the same Peek/Parse/Discard path going on where it stopped.
//
// "A later turn" must really come after epoll has been asked again. gnet runs the tasks that
// Conn.Wake queues after the turn's ready connections, but a Wake queued while those tasks run
// runs in the same pass, before any other connection is read: a connection that yielded and
// woke itself would starve everyone exactly as before. So the loop has a pump: a loopback TCP
// connection registered on the loop like a client. A yield writes one byte to its far end
// (once per turn); epoll reports the pump on its next wait, with whatever else became
// readable; the pump's OnTraffic wakes the connections that yielded. Each slice of a busy
// connection is thus separated from the next by an epoll_wait, as memcached's fake write event
// separates them (conn_new_cmd with reqs_per_event spent).
//
// A single command that cannot stop halfway still runs whole. Those that cost what the data
// costs are bounded or go on across turns: KEYS walks the keys a step at a time and MGET
// answers its keys as the socket takes them (textcont.go), SCAN examines at most
// rediscmd.MaxScanCount keys a call, a hash is at most --slock-max-data bytes, FLUSHALL frees the
// keys a slice per turn (store: Locks.Flush), and a MULTI queue is bounded in commands and in
// estimated work (txwork.go). Peer links and a follower's forwarded commands are not sliced,
// nor is anyone before the pump is registered (a millisecond after start), or without it.
//
// The loop also measures every turn (an OnTraffic, a tick, the pump's): the longest, and how
// many passed 1 ms, 10 ms, 100 ms and 1 s, shown by INFO (section Latency) and /metrics, so
// that an operator sees a stall, as Redis's LATENCY does.

// DefaultConnSlice is the default of Config.ConnSlice.
const DefaultConnSlice = time.Millisecond

// sliceCheckEvery is how many requests run between two looks at the clock when none of them
// looked itself (a Redis-text command does, for SLOWLOG): a clock read costs about 30 ns, as
// much as a cheap request.
const sliceCheckEvery = 16

// monoBase is the origin of nanotime.
var monoBase = time.Now()

// nanotime is the monotonic clock in nanoseconds: what turns and slices are measured with,
// whatever clock Config.Now gives (tests may fake that one).
func nanotime() int64 { return int64(time.Since(monoBase)) }

// stallBounds are the thresholds a turn is counted over (ns).
var stallBounds = [...]int64{1e6, 10e6, 100e6, 1e9}

// fairState is the loop's side of fairness, and its turn figures.
type fairState struct {
	slice   int64  // ns a connection is served per turn; <= 0: no limit
	clock   int64  // nanotime at the last look: the start of the event, the end of a text command
	fresh   bool   // clock is still "now": no request ran since it was read but one that read it
	reads   uint64 // clock readings commands took (clockRead)
	start   int64  // nanotime at which the connection being served started its slice
	yielded []*conn
	spare   []*conn
	yields  uint64 // slices that ended with requests left

	pump    gnet.Conn               // the loop's end of the pump; nil until it is registered
	pumpW   *net.TCPConn            // its far end, which a yield writes to
	pumpRaw syscallRawConn          // pumpW's descriptor
	poked   bool                    // a byte is on its way to the pump
	handed  atomic.Pointer[pumpEnd] // the far end, from startPump's goroutine to the loop

	// Turn figures.
	turns    uint64
	maxTurn  int64                    // ns
	over     [len(stallBounds)]uint64 // turns longer than each bound
	turnHist hist
}

// syscallRawConn is the part of syscall.RawConn a yield uses.
type syscallRawConn interface {
	Write(f func(fd uintptr) (done bool)) error
}

// pumpMark is the context of the pump's connection: OnOpen, OnTraffic and OnClose tell it
// from a client by it.
type pumpMark struct{}

// startPump connects the pump and registers its loop end on the engine. It runs on its own
// goroutine from OnBoot; until it is done (a millisecond or so), connections are not sliced.
func (s *Server) startPump() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.log.Warn().Err(err).Msg("no fairness pump: connections are not sliced (--conn-slice)")
		return
	}
	defer ln.Close()
	w, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		s.log.Warn().Err(err).Msg("no fairness pump: connections are not sliced (--conn-slice)")
		return
	}
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	r, err := ln.Accept()
	if err != nil {
		_ = w.Close()
		s.log.Warn().Err(err).Msg("no fairness pump: connections are not sliced (--conn-slice)")
		return
	}
	tw := w.(*net.TCPConn)
	raw, err := tw.SyscallConn()
	if err != nil {
		_ = w.Close()
		_ = r.Close()
		return
	}
	s.fair.handed.Store(&pumpEnd{w: tw, raw: raw})
	// Registered once the engine runs (Register before that races gnet's own set-up), and
	// one Register at a time (gnet's round-robin index is not safe for concurrent use).
	for !s.tb.engineRunning() {
		if s.run.stopping.Load() {
			_, _ = w.Close(), r.Close()
			return
		}
		time.Sleep(time.Millisecond)
	}
	err = s.register(context.Background(), pumpMark{}, r) // gnet takes a duplicate of r's descriptor and closes r
	if err != nil {
		s.fair.handed.Store(nil)
		_ = w.Close()
		if !s.run.stopping.Load() {
			s.log.Warn().Err(err).Msg("no fairness pump: connections are not sliced (--conn-slice)")
		}
	}
}

// pumpEnd is the pump's far end, handed from startPump to the loop.
type pumpEnd struct {
	w   *net.TCPConn
	raw syscallRawConn
}

// openPump runs on the loop when the pump's connection is registered.
func (f *fairState) openPump(c gnet.Conn) {
	if end := f.handed.Load(); end != nil {
		f.pump, f.pumpW, f.pumpRaw = c, end.w, end.raw
	}
}

// closePump runs on the loop when the pump's connection closes (at shutdown).
func (s *Server) closePump() {
	if s.fair.pumpW != nil {
		_ = s.fair.pumpW.Close()
	}
	s.fair.pump, s.fair.pumpW, s.fair.pumpRaw = nil, nil, nil
	s.fair.handed.Store(nil)
	for _, cs := range s.fair.yielded { // nothing will pump them now
		cs.yielded = false
		s.kick(cs)
	}
	s.fair.yielded = s.fair.yielded[:0]
}

// pumped runs on the loop when the pump's byte arrives: the connections that yielded are
// served again, each with a new slice.
func (s *Server) pumped(c gnet.Conn) {
	_, _ = c.Discard(-1)
	s.fair.poked = false
	list := s.fair.yielded
	s.fair.yielded = s.fair.spare[:0]
	for i, cs := range list {
		list[i] = nil
		cs.yielded = false
		if !cs.closed && !cs.closing {
			_ = cs.c.Wake(nil) // OnTraffic(cs) after this turn's ready connections
		}
	}
	s.fair.spare = list[:0]
	s.freeFlushed()
	s.ps.leavingStep(max(s.fair.slice, int64(DefaultConnSlice))) // a closed subscriber's many channels (pubsub.go)
	s.installStep()                                              // a snapshot from the leader being installed (cluster_install.go)
}

// sliceOver reports whether cs, having served served requests in this turn, has used its
// slice. It reads the clock only every sliceCheckEvery requests, or when the last one did.
func (s *Server) sliceOver(cs *conn, served int) bool {
	if !s.fair.sliced(cs) {
		return false
	}
	if !s.fair.fresh {
		if served%sliceCheckEvery != 0 {
			return false
		}
		s.fair.clock, s.fair.fresh = nanotime(), true
	}
	return s.fair.clock-s.fair.start >= s.fair.slice
}

// sliced reports whether cs's requests are served a slice at a time: fairness is on, the
// pump is there to bring it back (until it is, and without it, each connection runs as long
// as it has requests, as before), and cs is a client's own connection.
func (f *fairState) sliced(cs *conn) bool {
	return f.slice > 0 && f.pump != nil && cs.peer == nil && cs.virt == nil
}

// execTimed runs the request cs's handler parsed; the clock reading of the last command goes
// stale unless this one read the clock itself (a Redis-text command does).
func (f *fairState) execTimed(cs *conn, now int64) {
	reads := f.reads
	if bh, ok := cs.h.(*binaryHandler); ok {
		bh.exec(cs, now) // most frames: a direct call
	} else {
		cs.h.exec(cs, now)
	}
	if f.reads == reads {
		f.fresh = false
	}
}

// sliceLeft reports whether the connection being served still has some of its slice: what
// a command going on across turns (KEYS, MGET) asks between two steps. It reads the clock.
func (s *Server) sliceLeft(cs *conn) bool {
	if !s.fair.sliced(cs) {
		return true
	}
	s.fair.clock, s.fair.fresh = nanotime(), true
	return s.fair.clock-s.fair.start < s.fair.slice
}

// clockRead records a clock reading a command took (nanotime) as it ended: the slice check
// after it, and the next command's start, need none.
func (f *fairState) clockRead(t int64) {
	f.clock, f.fresh, f.reads = t, true, f.reads+1
}

// yield ends cs's slice: it is served again on a later turn, after the connections that are
// ready now.
func (s *Server) yield(cs *conn) {
	s.fair.yields++
	if !cs.yielded {
		cs.yielded = true
		s.fair.yielded = append(s.fair.yielded, cs)
	}
	s.poke()
}

// poke has the pump fire at the loop's next turn (once, however many ask before then).
func (s *Server) poke() {
	if s.fair.poked || s.fair.pump == nil {
		return
	}
	s.fair.poked = true
	var err error
	werr := s.fair.pumpRaw.Write(func(fd uintptr) bool {
		_, err = unix.Write(int(fd), []byte{1})
		return true // never wait for the socket on the loop
	})
	if werr != nil || (err != nil && err != unix.EAGAIN) {
		// The pump is broken: wake everyone that waits for it the old way.
		s.log.Warn().AnErr("err", werr).AnErr("write", err).Msg("fairness pump failed: connections are no longer sliced (--conn-slice)")
		s.closePump()
	}
}

// freeFlushedFor frees flushed keys, for one slice of the loop's time at most, until need
// bytes are freed (the memory budget: what clients no longer see goes first); it returns the
// bytes freed.
func (s *Server) freeFlushedFor(need int64) int64 {
	if !s.st.locks.Flushing() {
		return 0
	}
	before := s.st.store.Bytes()
	start := nanotime()
	slice := max(s.fair.slice, int64(DefaultConnSlice))
	for s.st.locks.FreeFlushed(freeStep) && before-s.st.store.Bytes() < need && nanotime()-start < slice {
	}
	return before - s.st.store.Bytes()
}

// freeStep is how many flushed keys are freed between two looks at the clock.
const freeStep = 1024

// freeFlushed frees, for one slice of the loop's time, keys that FLUSHDB and FLUSHALL set
// aside (store: Locks.Flush), and has the pump come back for more at the next turn; ticks
// run it too. Nothing is answered: the keys are gone for every client already.
func (s *Server) freeFlushed() {
	if !s.st.locks.Flushing() {
		return
	}
	start := nanotime()
	slice := max(s.fair.slice, int64(DefaultConnSlice))
	for s.st.locks.FreeFlushed(freeStep) {
		if nanotime()-start >= slice {
			s.poke() // on the pump's next turn, after the connections ready now
			return
		}
	}
}

// turnBegin starts measuring a turn of the loop (an OnTraffic, a tick): its start, for
// turnEnd.
func (f *fairState) turnBegin() int64 {
	t := nanotime()
	f.clock, f.fresh, f.start = t, true, t
	return t
}

// turnEnd counts the turn that turnBegin started.
func (f *fairState) turnEnd(start int64) {
	d := nanotime() - start
	f.turns++
	f.maxTurn = max(f.maxTurn, d)
	for i, b := range stallBounds {
		if d <= b {
			break
		}
		f.over[i]++
	}
	f.turnHist.observe(latencyBounds, d, 1)
}

// latencyInfo fills in INFO's Latency section.
func (s *Server) latencyInfo() *resp.InfoLatency {
	f := &s.fair
	l := &s.info.latency
	*l = resp.InfoLatency{Turns: f.turns, MaxTurnUS: f.maxTurn / 1000, Over: f.over, Yields: f.yields,
		SlowlogLen: len(s.slow.ring), SlowlogIDs: s.slow.total}
	if f.slice > 0 {
		l.SliceUS = f.slice / 1000
	}
	return l
}
