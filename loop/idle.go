package loop

import "time"

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

// idleTouch records that cs was served a whole request (or opened) at now.
func (s *Server) idleTouch(cs *conn, now int64) {
	if s.cfg.IdleTimeout <= 0 || cs.closed {
		return
	}
	cs.idleSeen = now
	at := now + int64(s.cfg.IdleTimeout)
	if cs.idleOn == &s.idle.active && cs.idleNext == nil {
		cs.idleAt = max(cs.idleAt, at) // already the tail: the order holds
		return
	}
	s.idleMove(cs, &s.idle.active, at)
}

// idleMove puts cs at the tail of l, to be looked at at at.
func (s *Server) idleMove(cs *conn, l *idleList, at int64) {
	s.idleDrop(cs)
	cs.idleAt, cs.idleOn, cs.idlePrev = at, l, l.tail
	if l.tail != nil {
		l.tail.idleNext = cs
	} else {
		l.head = cs
	}
	l.tail = cs
}

// idleDrop takes cs off its list, if it is on one.
func (s *Server) idleDrop(cs *conn) {
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

// idleSweep runs on each tick: the connections due that are idle are closed (after the
// tick's flush), the others are looked at again later.
func (s *Server) idleSweep(now int64) {
	timeout := int64(s.cfg.IdleTimeout)
	if timeout <= 0 {
		return
	}
	recheck := min(timeout, int64(idleRecheck))
	n := 0
	for _, l := range [...]*idleList{&s.idle.active, &s.idle.held} {
		for cs := l.head; cs != nil && cs.idleAt <= now; cs = l.head {
			if s.idleHolds(cs) || now-cs.idleSeen < timeout {
				s.idleMove(cs, &s.idle.held, now+recheck)
				continue
			}
			s.idleDrop(cs)
			s.closeLater(cs)
			n++
		}
	}
	if n == 0 {
		return
	}
	s.idle.closed += uint64(n)
	if missed, ok := s.idle.log.allow(time.Unix(0, now)); ok {
		s.log.Info().Int("closed", n).Dur("idle_timeout_ms", s.cfg.IdleTimeout).
			Uint64("more_since_last_line", missed).Msg("closing idle connections (idle-timeout)")
	}
}

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
