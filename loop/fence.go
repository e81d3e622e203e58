package loop

import (
	"encoding/binary"
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// This file is who holds a lock, across members and failovers, and the parts of fencing
// tokens (store/locks_fence.go) that belong to the loop.

// floorTokens starts the fencing-token counter, once the log is read back, at the time
// floor of now (store.TimeFloor) if that is above the log's ceiling: every token this
// process grants is then above every token granted before it started, from any log or
// backup, as long as this clock is not behind the clocks that granted them
// (docs/cluster.md "Fencing tokens"). A ceiling ahead of the clock by more than a second
// means it is behind, and is logged: the counter starts above the ceiling all the same.
func (s *Server) floorTokens() {
	now := s.now()
	floor := store.TimeFloor(now.UnixMilli())
	_, ceil := s.st.locks.FenceCeil()
	switch {
	case floor == 0:
		s.log.Warn().Time("clock", now).Uint64("ceiling", ceil).
			Msg("fencing tokens: the clock is before 2024 (or absurdly far ahead): tokens continue from the log's ceiling, and may repeat ones granted after a backup this was restored from")
	case ceil > floor+1000*store.TokensPerMs:
		s.log.Warn().Time("clock", now).Uint64("ceiling", ceil).Time("ceiling_time", time.UnixMilli(store.FloorTime(ceil))).
			Msg("fencing tokens: the log's ceiling is ahead of this clock: the clock is behind the one that granted them (tokens continue above the ceiling; a restore from an older backup is safe only once the clock has caught up)")
	}
	s.st.locks.RaiseTokens(floor)
}

// stampLock completes a lock command of connection cs (nil: closed) before the store runs
// it: the client id its holder keeps, and, in cluster mode at QUORUM or ALL, the flag that
// logs a grant at once. A grant is then in the raft entry its reply waits for: it survives
// a failover as acknowledged. (Otherwise a lock is logged only once held
// --lock-persist-after, which is what a single node and CONSISTENCY ONE keep.)
//
// An Unlock needs neither (the store keeps a client id only with a holder or waiter, and
// logs at once only grants), so it is left as it came: half the frames of a Lock/Unlock
// run skip this.
func (s *Server) stampLock(cs *conn, cmd *store.LockCommand) {
	if cmd.Kind != store.KindLock && cmd.Kind != store.KindWillLock {
		return
	}
	lvl := LevelQuorum
	if cs != nil && cs.slock != nil {
		cmd.Client = s.clientOf(cs)
		lvl = cs.slock.level()
	}
	switch {
	case s.cl == nil || cmd.Kind != store.KindLock:
	case lvl >= LevelQuorum && mutant != "grant-before-log": // the mutant acknowledges a grant not yet in the log
		cmd.PersistAtOnce()
	case cs != nil && cs.slock != nil:
		cs.slock.lockedOne = true // the leader's abdicate closes it: its holder is told
	}
}

// clientOf returns slock connection cs's client id, drawn at its first use: unguessable and
// unique in the cluster, it names the client whatever member or session its commands run
// on, so that the holders it makes stay its own after a failover (a follower sends it with
// every forwarded command).
func (s *Server) clientOf(cs *conn) uint64 {
	sc := cs.slock
	if sc.client == 0 {
		id := s.st.ids.Next()
		sc.client = binary.LittleEndian.Uint64(id[:8]) | 1
	}
	return sc.client
}

// token answers TOKEN key [LOCK_ID id]: the fencing token of the key's holder with that
// LockId, or of its oldest holder; nil when there is none.
func (s *Server) token(cs *conn, args [][]byte) {
	sc := cs.slock
	q, err := rediscmd.ParseToken(args, &sc.text)
	if err != nil {
		s.textError(cs, err)
		return
	}
	t, ok := s.st.locks.Token(sc.text.DB, q.Key, q.LockID, q.Any)
	if !ok {
		s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
		return
	}
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(t)))
}
