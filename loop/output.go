package loop

import (
	"context"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// The one way out. Every reply and every wake-up is appended to its connection's output
// buffer (out, then put) and the connection is marked pending; nothing else writes. One
// flush at the end of each event (OnTraffic, OnClose, a tick, the log's progress) writes
// each pending connection once, as Redis's pending-write queue does
// (handleClientsWithPendingWrites), so 50 replies owed to one connection in a turn cost
// one write(2).
//
// Closes that the loop decides on for a connection other than the one it serves (too much
// unsent output) wait until the flush is over (as Redis's freeClientAsync), so no Write
// and no handler runs inside another. A Write that fails still closes its connection inside
// gnet; that OnClose only updates state and appends to other connections' buffers, which
// the running flush then writes in turn.
//
// Replies to a connection whose change is not yet in the append-only log wait in its buffer:
// the flush writes only up to the position the log has acknowledged (replyGate), and the log's
// progress report flushes the rest (persist.go).
//
// A client that reads as fast as it can is never cut: a handler stops producing replies for a
// connection once its unsent bytes reach half of --max-output, leaving the requests behind in
// the input buffer, and continues when the socket has taken them (kick, park). A single reply
// may still be larger than --max-output (an EXEC of twenty 1 MB GETs, which must run whole):
// what a connection's own commands produced is its to read, and it is cut for it only if its
// socket then takes nothing for outputStall. What it did not ask for — wake-ups it cannot
// refuse, piling up while it does not read — is cut at once past --max-output (issue 21,
// item 6: MGET of 20 × 1 MB values was cut after 11.3 MB although the client read).

// outputStall is how long a connection over --max-output with replies it asked for may leave
// its socket full before it is taken for one that does not read, and closed.
const outputStall = 2 * time.Second

// keepOut is the largest log buffer kept for reuse once it has been written (persist.go).
const keepOut = 64 << 10

// keepTurn is the largest output buffer kept for reuse once it has been written: a whole
// turn's replies to one connection fit in it (a 64 KiB read of slock frames is answered with
// 64 KiB, which append grows a little past 64 KiB), so a connection that streams requests
// does not grow a buffer from a small one again at every turn (issue 25: that growing was a
// third of the loop's time under slock's stream benchmark).
const keepTurn = 256 << 10

// freeBytes is the most capacity the loop keeps in free output buffers, all together.
const freeBytes = 4 << 20

// keepSub is the largest output buffer a subscriber keeps once it has been written.
const keepSub = 4 << 10

// freeBufs is how many empty output buffers the loop keeps for connections to take.
const freeBufs = 256

// outQueue is the server's side of the one way out: the connections to write, close, serve
// again or watch at the flush, and the output buffers kept for reuse.
type outQueue struct {
	cur      *conn   // the connection whose OnTraffic is running
	pending  []*conn // connections with output for the next flush
	closing  []*conn // connections to close after the flush
	kicked   []*conn // connections to serve again after the flush
	parked   []*conn // connections waiting for their socket to drain
	stalls   []*conn // connections over --max-output with replies they asked for
	free     [][]byte
	freeCap  int // the capacity of the buffers on free
	flushing bool
}

// output is a connection's side of the one way out: its replies not yet written, the marks
// that hold parts of them for the reply gate, and what its socket has taken.
type output struct {
	out        []byte     // replies not yet written
	gates      []gateMark // parts of out that wait for the reply gate (persist.go, cluster.go)
	sent       int        // bytes gnet still had to send at the last look
	asked      int        // of them, what its own commands produced
	stalled    bool       // on Server.stalls: over --max-output with a reply it asked for
	stallAt    int64      // nanotime its socket last took some of it
	stallTaken int64      // what its socket had taken then
	handed     int64      // bytes handed to gnet so far
}

// wrote drops the first n bytes of the output, just written, and moves the marks back.
func (o *output) wrote(n int) {
	o.out = o.out[:copy(o.out, o.out[n:])]
	for i := range o.gates {
		o.gates[i].at -= n
	}
	o.handed += int64(n)
}

// gated reports whether some of the output waits for the reply gate.
func (o *output) gated() bool { return len(o.gates) > 0 }

// replyGate holds slock connections' replies until what they report is durable: in the
// append-only log (logGate, persist.go), in raft at the connection's level (raftGate,
// cluster.go), or nowhere (openGate). The server picks one as it opens its log.
type replyGate interface {
	// mark runs as replies are added to slock connection cs's output at offset from.
	mark(cs *conn, from int)
	// writable returns how much of cs's output, which has marks, may be written now.
	writable(cs *conn) int
	// turn runs at each round of a flush, before the pending connections are written.
	turn()
	// failing says why the log cannot take writes now, or "".
	failing() string
}

// openGate holds nothing: no log.
type openGate struct{}

func (openGate) mark(*conn, int)       {}
func (openGate) writable(cs *conn) int { return len(cs.out) }
func (openGate) turn()                 {}
func (openGate) failing() string       { return "" }

// out returns the buffer to append cs's next reply to; give it back with put.
func (s *Server) out(cs *conn) []byte {
	if cs.out == nil {
		if n := len(s.free); n > 0 {
			cs.out, s.free = s.free[n-1], s.free[:n-1]
			s.freeCap -= cap(cs.out)
		}
	}
	return cs.out
}

// put stores b, cs's output buffer with replies appended, and marks cs for the flush; the
// reply gate holds an slock connection's new replies until what they report is durable.
func (s *Server) put(cs *conn, b []byte) {
	from := len(cs.out)
	cs.out = b
	if cs.slock != nil {
		s.replies.mark(cs, from)
	}
	s.pend(cs)
}

// putSettled is put for replies whose outcome is settled elsewhere, which the gate marks
// none of: a leader's replies relayed to its client (the leader's gate held them) and errors
// that end held replies. They go out behind whatever cs's earlier marks still hold.
func (s *Server) putSettled(cs *conn, b []byte) {
	cs.out = b
	s.pend(cs)
}

// pend marks cs for the next flush.
func (s *Server) pend(cs *conn) {
	if !cs.pending && !cs.closed {
		cs.pending = true
		s.pending = append(s.pending, cs)
	}
}

// full reports whether cs has so much unsent output that its handler should stop producing
// until the socket has taken some (the requests behind stay in its input buffer).
func (s *Server) full(cs *conn) bool {
	if cs.peer != nil {
		return false // a link's output is bounded by peerLimit
	}
	return len(cs.out)+cs.sent >= s.cfg.MaxOutput/2
}

// kick asks for cs to be served again after the flush: it stopped with requests left
// behind a full output buffer, a streaming dump, or a reply it waited for.
func (s *Server) kick(cs *conn) {
	if !cs.kicked && !cs.closed {
		cs.kicked = true
		s.kicked = append(s.kicked, cs)
	}
}

// flush writes every pending connection's output with one Write each, closes the
// connections that went over --max-output, and writes what their closes owed to others,
// until nothing is left. Then it serves again the connections that were kicked.
func (s *Server) flush() {
	if s.flushing {
		return // an OnClose inside a failed Write: the running flush picks up what it added
	}
	s.flushing = true
	for {
		s.replies.turn() // in a cluster, proposes this turn's changes and handles raft's Readies
		if len(s.pending) == 0 && len(s.closing) == 0 {
			break
		}
		for i := 0; i < len(s.pending); i++ {
			cs := s.pending[i]
			s.pending[i] = nil
			cs.pending = false
			s.write(cs)
		}
		s.pending = s.pending[:0]
		for i := 0; i < len(s.closing); i++ {
			cs := s.closing[i]
			s.closing[i] = nil
			if !cs.closed && cs != s.cur { // the one being served closes as OnTraffic returns
				s.closeConn(cs)
			}
		}
		s.closing = s.closing[:0]
	}
	s.flushing = false
	s.resume()
}

// write writes the part of cs's output the reply gate allows, once, and keeps the rest.
func (s *Server) write(cs *conn) {
	if cs.closed {
		s.release(cs)
		return
	}
	n := len(cs.out)
	if cs.gated() {
		n = s.replies.writable(cs)
	}
	if n > 0 {
		s.m.bytesSent(cs.proto, n)
		_, err := cs.c.Write(cs.out[:n])
		if cs.closed || err != nil {
			if cs.proto == ProtoPool {
				s.st.pools.Stats().FailedSends++ // PoolCounter's STATS counts replies it could not send
			}
			s.release(cs) // the failed Write ran OnClose
			return
		}
		cs.wrote(n)
	}
	cs.sent = cs.c.OutboundBuffered()
	s.noteOut(cs)
	if cs == s.cur {
		cs.asked = cs.sent // its own turn: what is unsent it asked for
	} else {
		cs.asked = min(cs.asked, cs.sent) // as the socket takes it, what it asked for is read
	}
	if cs.slock != nil && cs.slock.subscribed() {
		// A subscriber's messages are wake-ups it cannot refuse: bounded by the pubsub class
		// of client-output-buffer-limit instead of --max-output (pubsub.go).
		if s.ps.over(cs) {
			s.closeLater(cs)
			return
		}
	} else if cs.sent > s.cfg.MaxOutput && (cs.peer == nil || cs.sent > peerLimit) {
		if cs.peer != nil || cs.sent > cs.asked+s.cfg.MaxOutput {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Str("remote", remoteAddr(cs.c).String()).Int("unsent", cs.sent).Int("limit", s.cfg.MaxOutput).
				Msg("closing connection: too many unsent replies (max-output)")
			s.closeLater(cs)
			return
		}
		s.watchStall(cs) // a big reply it asked for: closed only if it does not read it
	}
	if len(cs.out) == 0 {
		s.release(cs)
	}
}

// release gives cs's empty output buffer back for reuse (a large one to the collector).
func (s *Server) release(cs *conn) {
	b := cs.out
	cs.out, cs.gates = nil, cs.gates[:0]
	switch {
	case b == nil || cap(b) > keepTurn:
	case cap(b) <= keepSub && !cs.closed && cs.slock != nil && cs.slock.subscribed():
		cs.out = b[:0] // a subscriber keeps a small buffer: its messages come unasked, many at a time (pubsub.go)
	case len(s.free) < freeBufs && s.freeCap+cap(b) <= freeBytes:
		s.free = append(s.free, b[:0])
		s.freeCap += cap(b)
	}
	if !cs.closed {
		s.noteOut(cs)
	}
}

// closeLater closes cs once the flush in progress is over.
func (s *Server) closeLater(cs *conn) {
	if !cs.closing && !cs.closed {
		cs.closing = true
		s.closing = append(s.closing, cs)
	}
}

// resume serves the kicked connections again: at once (on the loop's next turn) when their
// socket has room, else from a tick once it has drained.
func (s *Server) resume() {
	for i := 0; i < len(s.kicked); i++ {
		cs := s.kicked[i]
		s.kicked[i] = nil
		cs.kicked = false
		switch {
		case cs.closed || cs.closing:
		case s.full(cs):
			s.parkConn(cs)
		case cs.busy || cs.c.InboundBuffered() > 0:
			_ = cs.c.Wake(nil) // OnTraffic(cs) again, with no new bytes
		}
	}
	s.kicked = s.kicked[:0]
}

// parkConn waits for cs's socket to drain before serving it again (checked each tick).
func (s *Server) parkConn(cs *conn) {
	if !cs.parked {
		cs.parked = true
		s.parked = append(s.parked, cs)
	}
}

// watchStall follows cs from each tick while it is over --max-output with replies it asked
// for, or full with a command half answered (an MGET going on: textcont.go); if its socket
// takes nothing for outputStall meanwhile, it does not read, and it is closed.
func (s *Server) watchStall(cs *conn) {
	if cs.stalled || cs.closed || cs.closing {
		return
	}
	cs.stalled, cs.stallAt, cs.stallTaken = true, nanotime(), cs.handed-int64(cs.sent)
	s.stalls = append(s.stalls, cs)
}

// stallWatched reports whether cs is still in a state watchStall follows.
func (s *Server) stallWatched(cs *conn) bool {
	return cs.sent > s.cfg.MaxOutput || cs.slock != nil && cs.slock.contActive() && s.full(cs)
}

// checkStalls runs on each tick: a watched connection whose socket took some of its backlog
// is given another outputStall, one no longer over the limit is no longer watched, one whose
// socket took nothing for outputStall does not read and is closed.
func (s *Server) checkStalls() {
	if len(s.stalls) == 0 {
		return
	}
	now := nanotime()
	kept := s.stalls[:0]
	for _, cs := range s.stalls {
		if cs.closed || cs.closing {
			cs.stalled = false
			continue
		}
		cs.sent = cs.c.OutboundBuffered()
		cs.asked = min(cs.asked, cs.sent)
		s.noteOut(cs)
		taken := cs.handed - int64(cs.sent) // what the socket has taken so far
		switch {
		case !s.stallWatched(cs):
			cs.stalled = false
			continue
		case taken > cs.stallTaken:
			cs.stallAt, cs.stallTaken = now, taken
		case time.Duration(now-cs.stallAt) >= outputStall:
			cs.stalled = false
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Str("remote", remoteAddr(cs.c).String()).Int("unsent", cs.sent+len(cs.out)).Int("limit", s.cfg.MaxOutput).
				Dur("unread_for", outputStall).
				Msg("closing connection: too many unsent replies and the client does not read them (max-output)")
			s.closeLater(cs)
			continue
		}
		kept = append(kept, cs)
	}
	clear(s.stalls[len(kept):])
	s.stalls = kept
}

// unpark runs on each tick: parked connections whose socket has taken enough are kicked.
func (s *Server) unpark() {
	s.checkStalls()
	kept := s.parked[:0]
	for _, cs := range s.parked {
		if cs.closed {
			cs.parked = false
			continue
		}
		cs.sent = cs.c.OutboundBuffered()
		s.noteOut(cs)
		if s.full(cs) {
			kept = append(kept, cs)
			continue
		}
		cs.parked = false
		s.kick(cs)
	}
	clear(s.parked[len(kept):])
	s.parked = kept
}

// runFlushed runs f on the loop (from another goroutine) and flushes what it produced.
func (s *Server) runFlushed(f func()) {
	el, ok := s.run.el.Load().(gnet.EventLoop)
	if !ok {
		return
	}
	_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		f()
		s.flush()
		return nil
	}))
}
