package loop

import (
	"bytes"
	"fmt"

	"github.com/tallyd/tallyd/proto/pool"
	"github.com/tallyd/tallyd/store"
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

// poolHandler serves the PoolCounter line protocol. Lines that arrive while the connection
// waits are served at once (NOTES §3: ERROR WAIT_FOR_RESPONSE, RELEASE cancelling the wait,
// STATS); the waiting request's reply comes later, from whatever frees the slot or from its
// timeout.
type poolHandler struct {
	s     *Server
	dec   pool.Decoder
	req   pool.Request
	keys  []store.PoolKeyInfo // STATS KEYS
	wakes []store.Wake        // replies owed to waiting connections, delivered in order
}

func (h *poolHandler) parse(cs *conn, in []byte) (int, error) {
	n, err := h.dec.Parse(in, &h.req)
	if err != nil {
		h.s.put(cs, pool.AppendReply(h.s.out(cs), pool.LineTooLong))
		return 0, fmt.Errorf("line longer than %d bytes (pool-max-line)", h.dec.MaxLine)
	}
	return n, nil
}

// exec applies one PoolCounter request; the replies it owes other connections are
// appended to theirs first.
func (h *poolHandler) exec(cs *conn, now int64) {
	s, r := h.s, &h.req
	switch r.Cmd {
	case pool.CmdAcq4Me, pool.CmdAcq4Any:
		mode := store.AcqMe
		if r.Cmd == pool.CmdAcq4Any {
			mode = store.AcqAny
		}
		o := s.st.pools.Acquire(cs.pool, mode, r.Key, r.Workers, r.MaxQueue, r.Timeout, now)
		s.m.countPool(r.Cmd, o)
		s.m.hot.pool(r.Key, o)
		if o != store.Waiting {
			s.put(cs, pool.AppendReply(s.out(cs), poolReplies[o]))
		}
	case pool.CmdRelease:
		var o store.Outcome
		o, h.wakes = s.st.pools.Release(cs.pool, now, h.wakes)
		s.m.countPool(r.Cmd, o)
		h.deliver()
		s.put(cs, pool.AppendReply(s.out(cs), poolReplies[o]))
	case pool.CmdStats:
		out := s.out(cs)
		if bytes.EqualFold(r.StatArg, statsKeysArg) {
			h.keys = s.st.pools.Busiest(h.keys[:0], statsKeys)
			for _, k := range h.keys {
				out = pool.AppendKeyLine(out, k.Name, k.Processing, k.Workers, k.Waiting, k.MaxQueue)
			}
			s.put(cs, append(out, '\n'))
			s.m.countPoolOther(r.Cmd, true)
			break
		}
		st := poolStats(s.st.pools, now/1e9-s.info.started/1e9)
		var ok bool
		out, ok = pool.AppendStatsReply(out, r.StatArg, &st)
		if !ok {
			out = pool.AppendReply(out, pool.WrongStat)
		}
		s.put(cs, out)
		s.m.countPoolOther(r.Cmd, ok)
	default:
		s.m.countPoolOther(r.Cmd, false)
		s.put(cs, pool.AppendReply(s.out(cs), pool.BadCommand))
	}
}

func (h *poolHandler) more(cs *conn, now int64) { cs.busy = false }

func (h *poolHandler) closed(cs *conn, now int64) {
	h.wakes = h.s.st.pools.Drop(cs.pool, now, h.wakes)
	h.deliver() // hand-overs to the dropped connection's waiters
}

// deliver appends the replies owed to waiting connections to theirs, in order.
func (h *poolHandler) deliver() {
	s := h.s
	for _, w := range h.wakes {
		s.m.poolWake(w.Outcome)
		if cs := s.ct.conns[w.Owner]; cs != nil && !cs.closed {
			s.put(cs, pool.AppendReply(s.out(cs), poolReplies[w.Outcome]))
		}
	}
	h.wakes = h.wakes[:0]
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
