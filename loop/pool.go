package loop

import (
	"bytes"
	"github.com/panjf2000/gnet/v2"

	"tallyd/proto/pool"
	"tallyd/store"
)

// poolReplies maps the store's outcomes to PoolCounter reply lines.
var poolReplies = [...]pool.Reply{
	store.Locked:          pool.Locked,
	store.Done:            pool.Done,
	store.QueueFull:       pool.QueueFull,
	store.Timeout:         pool.Timeout,
	store.LockHeld:        pool.LockHeld,
	store.NotLocked:       pool.NotLocked,
	store.Released:        pool.Released,
	store.WaitForResponse: pool.WaitForResponse,
	store.BadSyntax:       pool.BadSyntax,
}

// servePool handles every whole line buffered on a PoolCounter connection. Lines that
// arrive while the connection waits are served at once (NOTES §3: ERROR WAIT_FOR_RESPONSE,
// RELEASE cancelling the wait, STATS); the waiting request's reply comes later, from
// whatever frees the slot or from its timeout.
func (s *Server) servePool(cs *conn, now int64) gnet.Action {
	c := cs.c
	s.serving = cs
	defer func() { s.serving = nil }()
	s.out = s.out[:0]
	buf, _ := c.Peek(-1)
	used := 0
	for used < len(buf) {
		n, err := s.poolDec.Parse(buf[used:], &s.poolReq)
		if err != nil {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Str("remote", c.RemoteAddr().String()).Int("limit", s.poolDec.MaxLine).
				Msg("closing connection: line too long (pool-max-line)")
			s.out = pool.AppendReply(s.out, pool.LineTooLong)
			s.write(cs, s.out)
			return gnet.Close
		}
		if n == 0 {
			break
		}
		used += n
		s.poolLine(cs, &s.poolReq, now)
		if cs.closed {
			return gnet.Close
		}
		if len(s.out) >= flushAt {
			if !s.write(cs, s.out) {
				return gnet.Close
			}
		}
	}
	if used > 0 {
		_, _ = c.Discard(used)
	}
	if !s.write(cs, s.out) {
		return gnet.Close
	}
	return gnet.None
}

// poolLine applies one PoolCounter request; its reply goes to s.out, replies owed to
// other connections are written to them first.
func (s *Server) poolLine(cs *conn, r *pool.Request, now int64) {
	switch r.Cmd {
	case pool.CmdAcq4Me, pool.CmdAcq4Any:
		mode := store.AcqMe
		if r.Cmd == pool.CmdAcq4Any {
			mode = store.AcqAny
		}
		o := s.pools.Acquire(cs.pool, mode, r.Key, r.Workers, r.MaxQueue, r.Timeout, now)
		s.m.countPool(r.Cmd, o)
		if o != store.Waiting {
			s.out = pool.AppendReply(s.out, poolReplies[o])
		}
	case pool.CmdRelease:
		var o store.Outcome
		o, s.wakes = s.pools.Release(cs.pool, now, s.wakes)
		s.m.countPool(r.Cmd, o)
		s.deliverWakes()
		s.out = pool.AppendReply(s.out, poolReplies[o])
	case pool.CmdStats:
		if bytes.EqualFold(r.StatArg, statsKeysArg) {
			s.poolKeys = s.pools.Busiest(s.poolKeys[:0], statsKeys)
			for _, k := range s.poolKeys {
				s.out = pool.AppendKeyLine(s.out, k.Name, k.Processing, k.Workers, k.Waiting, k.MaxQueue)
			}
			s.out = append(s.out, '\n')
			s.m.countPoolOther(r.Cmd, true)
			break
		}
		st := poolStats(s.pools, now/1e9-s.started/1e9)
		var ok bool
		s.out, ok = pool.AppendStatsReply(s.out, r.StatArg, &st)
		if !ok {
			s.out = pool.AppendReply(s.out, pool.WrongStat)
		}
		s.m.countPoolOther(r.Cmd, ok)
	default:
		s.m.countPoolOther(r.Cmd, false)
		s.out = pool.AppendReply(s.out, pool.BadCommand)
	}
}

// deliverWakes writes the replies owed to waiting connections, in order. A write that
// fails closes that connection inside the Write, and its Drop may owe more replies: they
// join the queue and go out in turn.
func (s *Server) deliverWakes() {
	if s.delivering {
		return // an outer call is draining the queue
	}
	s.delivering = true
	for i := 0; i < len(s.wakes); i++ {
		w := s.wakes[i]
		s.m.poolWake(w.Outcome)
		cs := s.conns[w.Owner]
		if cs == nil || cs.closed {
			continue
		}
		if cs == s.serving { // its own batch is being built: keep the order in it
			s.out = pool.AppendReply(s.out, poolReplies[w.Outcome])
			continue
		}
		var line [16]byte
		b := pool.AppendReply(line[:0], poolReplies[w.Outcome])
		s.m.bytesSent(ProtoPool, len(b))
		if _, err := cs.c.Write(b); err != nil || cs.closed {
			s.pools.Stats().FailedSends++
		}
	}
	s.wakes = s.wakes[:0]
	s.delivering = false
}

// poolStats gathers the figures of a PoolCounter STATS reply.
func poolStats(p *store.Pools, uptime int64) pool.Stats {
	st := p.Stats()
	h, w, q := p.Gauges()
	return pool.Stats{Uptime: uptime,
		TotalAcquired: st.TotalAcquired, TotalReleases: st.TotalReleases,
		HashtableEntries: h, ProcessingWorkers: w, WaitingWorkers: q,
		ConnectErrors: st.ConnectErrors, FailedSends: st.FailedSends, FullQueues: st.FullQueues,
		LockMismatch: st.LockMismatch, LockWhileWaiting: st.LockWhileWaiting,
		ReleaseMismatch: st.ReleaseMismatch, ProcessedCount: st.ProcessedCount,
		TotalProcessingTime: st.TotalProcessingTime, GainedTime: st.GainedTime,
		WaitingTime: st.WaitingTime, WaitingTimeForMe: st.WaitingTimeForMe,
		WaitingTimeForAnyone: st.WaitingTimeForAnyone, WaitingTimeForGood: st.WaitingTimeForGood,
		WastedTimeoutTime: st.WastedTimeoutTime}
}

// statsKeys is how many keys STATS KEYS (a tallyd extension) lists, busiest first.
const statsKeys = 100

var statsKeysArg = []byte("keys")
