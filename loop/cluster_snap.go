package loop

import (
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/store"
)

// A member's raft snapshot (what compacts its log, and what a lagging or new follower
// receives) is encoded a slice at a time, as SNAPSHOT's backup is (backup.go; issue 30,
// item 7: encoded in one turn, the snapshot of a store of 1M keys held the loop, and every
// client, for about a second). store.Locks.BeginSave and store.Keyspace.BeginSave fix the
// instant, the applied index (famSave), and SaveNext encodes saveStep keys at a time for up to raftSnapSlice per loop tick, in
// blocks joined at the end a few per tick (raft keeps the data as one slice); a key
// about to change before the walk reached it is encoded first, its state then
// (copy-on-write), so the data is the store at that index whatever is applied meanwhile.
// Until it is done raft's storage keeps the last snapshot and the log after it (nothing is
// compacted): a follower that needs a snapshot meanwhile is sent the last one and catches up
// from the log. The store has one save at a time: a SNAPSHOT has priority (it drops the raft
// snapshot in progress, which begins again after it), and the raft snapshot does not begin
// while a SNAPSHOT is in progress. A store rebuilt meanwhile (a leader that stopped leading,
// a snapshot installed) drops it too.

// raftSnapSlice is how long the raft snapshot's encoding may run per loop tick, at most
// (a step more: saveStep keys, ~0.3 ms).
const raftSnapSlice = time.Millisecond

// raftSnap is the raft snapshot being encoded.
type raftSnap struct {
	on      bool
	locks   *store.Locks // the store it encodes
	fs      famSave      // the two families' saves (keyspace_persist.go)
	index   uint64       // the applied index it is of
	conf    cluster.Conf // the configuration then
	blocks  [][]byte     // encoding: the secret, the peers, the records so far
	data    []byte       // once encoded: the blocks joined, a slice at a time
	next    int          // the block next joined
	start   time.Time
	steps   int
	longest time.Duration // the longest tick's encoding, for the log
}

// raftSnapRecord adds a key's state to the raft snapshot (store.Locks.BeginSave's emit).
func (s *Server) raftSnapRecord(ks *store.KeyState) {
	rs := &s.cl.snapping
	b := &rs.blocks[len(rs.blocks)-1]
	*b = aof.AppendState(*b, ks)
	if len(*b) >= snapshotBlock {
		rs.blocks = append(rs.blocks, make([]byte, 0, snapshotBlock+4<<10))
	}
}

// raftSnapKeyspace adds the keyspace records gathered so far to the raft snapshot.
func (s *Server) raftSnapKeyspace() {
	rs := &s.cl.snapping
	b := &rs.blocks[len(rs.blocks)-1]
	*b = rs.fs.ks.flush(*b)
	if len(*b) >= snapshotBlock {
		rs.blocks = append(rs.blocks, make([]byte, 0, snapshotBlock+4<<10))
	}
}

// maybeSnapshot compacts the raft log once enough entries were applied since the last
// snapshot: it begins encoding one when the store holds exactly the applied state (a
// leader's own proposals all committed and applied), and goes on with the one in progress.
func (s *Server) maybeSnapshot(now int64) {
	cl := s.cl
	if cl.snapping.on {
		s.raftSnapStep()
		return
	}
	if cl.installing.on {
		return // the store is about to be the leader's snapshot
	}
	if !cl.m.SnapshotDue(cl.cfg.SnapshotEntries, s.st.locks.Journaled()) {
		return
	}
	if s.backing != nil || s.st.locks.SaveEpoch() != 0 || s.st.store.Keyspace.SaveEpoch() != 0 {
		return // a SNAPSHOT's turn
	}
	rs := &cl.snapping
	*rs = raftSnap{on: true, locks: s.st.locks, index: cl.m.Applied(), start: time.Now(), conf: cl.m.SnapshotConf()}
	b := cl.m.SnapshotHead(make([]byte, 0, snapshotBlock+4<<10))
	rs.blocks = append(rs.blocks, b)
	s.famSaveBegin(&rs.fs, now, s.raftSnapRecord)
	s.raftSnapStep()
}

// raftSnapStep encodes the raft snapshot's next keys for up to raftSnapSlice and, once
// they are all encoded, hands it to raft's storage (which compacts the log).
func (s *Server) raftSnapStep() {
	cl := s.cl
	rs := &cl.snapping
	if rs.data == nil && (s.st.locks != rs.locks || s.famSaveLost(&rs.fs)) {
		// A SNAPSHOT began (it goes first), or the store was rebuilt: the instant is gone.
		s.log.Info().Uint64("index", rs.index).Msg("cluster: snapshot dropped; it begins again later")
		*rs = raftSnap{}
		return
	}
	t0 := nanotime()
	for rs.data == nil && nanotime()-t0 < int64(raftSnapSlice) {
		done := s.famSaveStep(&rs.fs)
		s.raftSnapKeyspace()
		if done {
			n := 0
			for _, b := range rs.blocks {
				n += len(b)
			}
			rs.data = make([]byte, 0, n) // the blocks are joined into it from now on
		}
	}
	// Joined a few blocks per tick (a copy of 25 MB in one go takes tens of ms).
	for rs.data != nil && rs.next < len(rs.blocks) && nanotime()-t0 < int64(raftSnapSlice) {
		rs.data = append(rs.data, rs.blocks[rs.next]...)
		rs.blocks[rs.next] = nil
		rs.next++
	}
	rs.steps++
	rs.longest = max(rs.longest, time.Duration(nanotime()-t0))
	if rs.data == nil || rs.next < len(rs.blocks) {
		return
	}
	data := rs.data
	*rs = raftSnap{index: rs.index, conf: rs.conf, start: rs.start, steps: rs.steps, longest: rs.longest}
	switch taken, err := cl.m.TakeSnapshot(rs.index, rs.conf, data); {
	case err != nil:
		s.log.Error().Err(err).Uint64("index", rs.index).Msg("cluster: snapshot")
		*rs = raftSnap{}
		return
	case !taken:
		*rs = raftSnap{} // a newer one was installed meanwhile (the leader's)
		return
	}
	s.log.Info().Uint64("index", rs.index).Int("bytes", len(data)).Dur("took_ms", time.Since(rs.start)).
		Int("ticks", rs.steps).Dur("longest_tick_ms", rs.longest).Msg("cluster: snapshot taken")
	*rs = raftSnap{}
}
