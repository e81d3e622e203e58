package loop

import (
	"math"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// This file is WAIT numreplicas timeout. On a single node it answers 0 at once, as Redis
// without replicas. In a cluster it runs on the leader (a follower forwards it, and the
// leader's virtual connection for that client holds its writes) and counts, as Redis counts
// replicas that acknowledged the client's replication offset, the other voters whose raft
// log (raft's Progress Match) holds the connection's last write: the entry of the proposal
// that carried its last change. It answers at once when numreplicas is reached; otherwise
// the connection (never the loop) waits, its later commands behind it, until raft's progress
// reaches numreplicas (checked as the leader learns its followers' progress) or timeout ms
// pass (checked at each tick; 0 waits for ever), and then answers the count.

// replWait is a WAIT that blocks its connection.
type replWait struct {
	active bool
	want   int64 // numreplicas
	until  int64 // Unix ns it answers anyway; 0: never
}

// waitCmd answers WAIT numreplicas timeout, with Redis 7's errors.
func (s *Server) waitCmd(cs *conn, args [][]byte, now int64) {
	want, ok := resp.ParseInt(args[1])
	if !ok {
		s.textError(cs, &rediscmd.TextError{Msg: "value is not an integer or out of range"})
		return
	}
	t, ok := resp.ParseInt(args[2])
	switch {
	case !ok:
		s.textError(cs, &rediscmd.TextError{Msg: "timeout is not an integer or out of range"})
		return
	case t < 0:
		s.textError(cs, &rediscmd.TextError{Msg: "timeout is negative"})
		return
	}
	cl := s.cl
	if cl == nil || !cl.isLeader() {
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0)) // no replicas (a follower forwards WAIT)
		return
	}
	sc := cs.slock
	got := s.replicasHolding(sc)
	if got >= want || sc.tx.exec {
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), got)) // inside EXEC nothing waits, as in Redis
		return
	}
	sc.repl = replWait{active: true, want: want}
	if t > 0 {
		sc.repl.until = math.MaxInt64
		if t < (math.MaxInt64-now)/1e6 {
			sc.repl.until = now + t*1e6
		}
	}
	cl.replWaits = append(cl.replWaits, cs)
}

// noteWrite marks the change cs's command just made (it gave the journal a record) as
// cs's last write: the next proposal takes the whole journal, so that proposal carries it.
func (s *Server) noteWrite(cs *conn) {
	cl := s.cl
	if !cl.serving() || !s.st.locks.Journaled() {
		return
	}
	cs.slock.wr = cl.m.NoteWrite()
}

// replicasHolding is how many voters other than this leader have sc's last write in their
// raft log (every other voter when sc wrote nothing; cluster.Member.ReplicasHolding).
func (s *Server) replicasHolding(sc *slockConn) int64 {
	return s.cl.m.ReplicasHolding(&sc.wr, s.st.locks.Journaled())
}

// checkWaits answers the blocked WAITs whose count is reached, and, when now is not 0,
// those whose timeout passed.
func (s *Server) checkWaits(now int64) {
	cl := s.cl
	if len(cl.replWaits) == 0 || !cl.isLeader() {
		return
	}
	kept := cl.replWaits[:0]
	for _, cs := range cl.replWaits {
		sc := cs.slock
		if cs.closed || cs.closing || !sc.repl.active {
			sc.repl.active = false
			continue
		}
		got := s.replicasHolding(sc)
		if got < sc.repl.want && (now == 0 || sc.repl.until == 0 || now < sc.repl.until) {
			kept = append(kept, cs)
			continue
		}
		sc.repl.active = false
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), got))
		s.kick(cs) // the commands that waited behind it
	}
	clear(cl.replWaits[len(kept):])
	cl.replWaits = kept
}

// abdicateWaits answers the blocked WAITs of a leader that stops leading as its held
// replies are answered: the writes they count may never be committed. (A virtual
// connection is closed instead, and its follower answers the same error.)
func (s *Server) abdicateWaits() {
	cl := s.cl
	for _, cs := range cl.replWaits {
		sc := cs.slock
		if sc.repl.active && !cs.closed && !cs.closing {
			s.m.cl.clusterDown("CLUSTERDOWN leader changed", 1)
			s.putSettled(cs, resp.AppendError(s.out(cs), "CLUSTERDOWN leader changed"))
			s.kick(cs)
		}
		sc.repl.active = false
	}
	clear(cl.replWaits)
	cl.replWaits = cl.replWaits[:0]
}
