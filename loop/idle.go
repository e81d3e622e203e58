package loop

import (
	"time"

	"github.com/rs/zerolog"
)

// Idle connections (--idle-timeout, Redis's timeout). A connection that has sent no whole
// request for IdleTimeout, and holds and awaits nothing, is closed from a tick. Partial
// requests do not count, so a client trickling bytes that never make a request is closed
// like one that sends nothing.
//
// No timer per connection, and no tick looks at every connection: each connection is on
// one of two lists, each ordered by when its connections are next looked at, and a tick
// looks only at the heads that are due.
//   - active: by last whole request plus IdleTimeout; a served request moves the
//     connection to the tail (once per OnTraffic, not per request).
//   - held: connections that were due but held or awaited something (or were not yet idle
//     long enough), looked at again every idleRecheck (or IdleTimeout, if shorter).

// idleRecheck is how often a connection that holds or awaits something is looked at again:
// how late, at most, it is closed once it stops holding anything without a request (a lock
// expired, a wait timed out).
const idleRecheck = time.Second

// idleList is a list of connections linked through idlePrev and idleNext, ordered by idleAt.
type idleList struct{ head, tail *conn }

// idleState is the loop's idle bookkeeping.
type idleState struct {
	active, held idleList
	closed       uint64 // connections closed for being idle
	log          rateLog
}

// idleHost is what the idle lists need of the loop at a sweep: whether a connection holds or
// awaits something, closing one, and the log.
type idleHost interface {
	idleHolds(cs *conn) bool
	closeLater(cs *conn)
	logger() *zerolog.Logger
}

// touch records that cs was served a whole request (or opened) at now; timeout is
// --idle-timeout (0: off).
func (il *idleState) touch(cs *conn, now int64, timeout time.Duration) {
	if timeout <= 0 || cs.closed {
		return
	}
	cs.idleSeen = now
	at := now + int64(timeout)
	if cs.idleOn == &il.active && cs.idleNext == nil {
		cs.idleAt = max(cs.idleAt, at) // already the tail: the order holds
		return
	}
	il.move(cs, &il.active, at)
}

// move puts cs at the tail of l, to be looked at at at.
func (il *idleState) move(cs *conn, l *idleList, at int64) {
	il.drop(cs)
	cs.idleAt, cs.idleOn, cs.idlePrev = at, l, l.tail
	if l.tail != nil {
		l.tail.idleNext = cs
	} else {
		l.head = cs
	}
	l.tail = cs
}

// drop takes cs off its list, if it is on one.
func (il *idleState) drop(cs *conn) {
	l := cs.idleOn
	if l == nil {
		return
	}
	if cs.idlePrev != nil {
		cs.idlePrev.idleNext = cs.idleNext
	} else {
		l.head = cs.idleNext
	}
	if cs.idleNext != nil {
		cs.idleNext.idlePrev = cs.idlePrev
	} else {
		l.tail = cs.idlePrev
	}
	cs.idlePrev, cs.idleNext, cs.idleOn = nil, nil, nil
}

// sweep runs on each tick: the connections due that are idle are closed (after the tick's
// flush), the others are looked at again later.
func (il *idleState) sweep(now int64, idleTimeout time.Duration, h idleHost) {
	timeout := int64(idleTimeout)
	if timeout <= 0 {
		return
	}
	recheck := min(timeout, int64(idleRecheck))
	n := 0
	for _, l := range [...]*idleList{&il.active, &il.held} {
		for cs := l.head; cs != nil && cs.idleAt <= now; cs = l.head {
			if h.idleHolds(cs) || now-cs.idleSeen < timeout {
				il.move(cs, &il.held, now+recheck)
				continue
			}
			il.drop(cs)
			h.closeLater(cs)
			n++
		}
	}
	if n == 0 {
		return
	}
	il.closed += uint64(n)
	if missed, ok := il.log.allow(time.Unix(0, now)); ok {
		h.logger().Info().Int("closed", n).Dur("idle_timeout_ms", idleTimeout).
			Uint64("more_since_last_line", missed).Msg("closing idle connections (idle-timeout)")
	}
}

// logger is the loop's log, for the parts of the loop that log through a host interface.
func (s *Server) logger() *zerolog.Logger { return &s.log }

// idleHolds reports whether cs holds or awaits something that its close would end, or has
// work under way: such a connection is never closed for being idle.
func (s *Server) idleHolds(cs *conn) bool {
	if cs.closed || cs.closing || cs.quit || cs.busy || cs.dump != nil || cs.parked || cs.kicked || cs.inHeld {
		return true
	}
	switch {
	case cs.ledger != nil:
		return cs.ledger.Len() > 0
	case cs.pool != nil:
		return cs.pool.Len() > 0
	case cs.slock != nil:
		sl := cs.slock
		return len(sl.wills) > 0 || sl.waiting || s.st.locks.Tied(cs.owner) || sl.subscribed() // a subscriber waits for messages, as Redis exempts it from timeout
	}
	return false
}
