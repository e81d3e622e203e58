package loop

import (
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/store"
)

// A follower installs a raft snapshot the leader sent (a lagging or new member) a slice at a
// time (issue 30, item 7: it emptied its store and restored every key in one loop turn,
// 1.75-2.0 s of CPU for 200k keys here, raft's copies of the snapshot included, and every
// client of the member waited). The member (cluster/install.go) hands the data over
// (memberHost.RestoreSnapshot) and holds raft's news that the snapshot is applied until the
// loop calls cluster.Member.SnapshotInstalled, after the swap below; it also keeps the data
// from raft's copies. This file is the loop's side: the store.
//
// The records are restored into a staging slock family (store.Store.StagingLocks), and
// the keyspace's into a staging keyspace (StagingKeyspace; swapped in with SwapKeyspace at
// the same step), at most
// installSlice per loop turn, a run of at most installRunRecords records or installRunBytes
// bytes between two looks at the clock; the pump brings the loop back for the next slice
// after the connections ready meanwhile (fair.go), and ticks do too. Meanwhile the old store
// goes on serving what a member serves from its own store (reads at consistency ONE, as a
// member that lags does: the state it had), and raft goes on too: the member appends, votes
// and acknowledges what it has made durable, but raft hands out no entry committed after
// the snapshot, does not count it applied, and the member does not campaign. Once every
// record is restored the staging family takes the store's place in one step
// (store.Store.SwapLocks: O(PoolCounter waits), not O(keys)), with the key-name secret and
// the peer table the snapshot carries; only then is the member told (SnapshotInstalled:
// the applied index and the configuration move, raft hears it), and the entries after it
// are applied.
//
// The staging family counts in --max-memory while it is built. A newer snapshot received
// meanwhile replaces the one being installed (its staging is dropped). What began on the old
// store before the swap ends with it: a SNAPSHOT being encoded answers snapRebuilt, the
// member's own raft snapshot in progress is dropped when the install begins.

// installSlice is how long the install may run per loop turn (a run more).
const installSlice = time.Millisecond

// A run of records restored between two looks at the clock: installRunRecords (~40 µs; a
// restore allocates a key and a holder, and the GC may have the loop assist it, so a run is
// kept short) or installRunBytes (a record with a large value or many holders is large).
const (
	installRunRecords = 64
	installRunBytes   = 64 << 10
)

// installState is a snapshot from the leader being installed.
type installState struct {
	on      bool
	secret  *[32]byte         // the key-name secret it carries, if any
	peers   map[uint64]string // the peer table it carries, once read
	recs    []byte            // its records not yet restored
	locks   *store.Locks      // the staging family they are restored into
	ks      ksApplier         // and the staging keyspace (store.Store.StagingKeyspace)
	bytes   int               // the records' length
	start   time.Time
	slices  int
	longest time.Duration // the longest slice, for the log
}

// installSnapshot begins installing data, a snapshot the leader sent, once raft's storage
// has it (memberHost.RestoreSnapshot): the first slice runs now.
func (s *Server) installSnapshot(data []byte) {
	cl := s.cl
	in := &cl.installing
	if rs := &cl.snapping; rs.on {
		// This member's own snapshot of the store it leaves: of no use now.
		if rs.data == nil {
			s.famSaveEnd(&rs.fs)
		}
		*rs = raftSnap{}
	}
	k, recs, ok := cluster.SplitSnapshot(data)
	if !ok {
		s.log.Error().Uint64("index", cl.m.Installing()).Msg("cluster: snapshot without records")
	}
	*in = installState{on: true, secret: k, recs: recs, bytes: len(recs), locks: s.st.store.StagingLocks(),
		ks: ksApplier{ks: s.st.store.StagingKeyspace()}, start: time.Now()}
	s.installStep()
}

// installStep restores the next records of the snapshot being installed for up to
// installSlice, and swaps the store once they are all restored; else the pump comes back
// for more at the next turn (ticks run it too).
func (s *Server) installStep() {
	cl := s.cl
	if cl == nil || !cl.installing.on {
		return
	}
	in := &cl.installing
	t0 := nanotime()
	now := s.now().UnixNano()
	peers := func(p map[uint64]string) { in.peers = p }
	restore := func(ks *store.KeyState) { in.locks.Restore(ks, now) }
	h := aof.Handlers{State: restore, Keyspace: in.ks.apply, Peers: peers, Message: s.relayed}
	for len(in.recs) > 0 && nanotime()-t0 < int64(installSlice) {
		var n int
		cl.warm, n = aof.RecordKeysUpTo(in.recs, cl.warm[:0], installRunRecords, installRunBytes)
		if n == 0 {
			n = len(in.recs) // damaged: decoding says how
		}
		if err := aof.DecodeAll(in.recs[:n], &h); err != nil {
			s.log.Error().Err(err).Uint64("index", cl.m.Installing()).Msg("cluster: bad records in a snapshot")
			n = len(in.recs)
		}
		in.recs = in.recs[n:]
	}
	in.locks.ForgetJournal() // what it restored is in the log already: O(keys of the slice)
	in.slices++
	in.longest = max(in.longest, time.Duration(nanotime()-t0))
	if len(in.recs) > 0 {
		s.poke()
		return
	}
	s.installSwap()
}

// installSwap puts the restored snapshot in the store's place and tells the member, which
// counts it applied and tells raft.
func (s *Server) installSwap() {
	cl := s.cl
	in := &cl.installing
	t0 := nanotime()
	s.st.store.SwapLocks(in.locks)
	s.st.locks = s.st.store.Locks
	s.st.store.SwapKeyspace(in.ks.ks)
	if in.secret != nil {
		s.setSecret(*in.secret)
	}
	if in.peers != nil {
		s.learnPeers(in.peers)
	}
	index := cl.m.Installing()
	swap := time.Duration(nanotime() - t0)
	st := *in
	*in = installState{}
	cl.m.SnapshotInstalled()
	if st.ks.errs > 0 {
		s.log.Error().Err(st.ks.first).Int("records", st.ks.errs).Uint64("index", index).Msg("cluster: keyspace records of a snapshot that do not apply, skipped")
	}
	s.log.Info().Uint64("index", index).Int("bytes", st.bytes).Int("keys", s.st.locks.LoggedKeys()).
		Int("keyspace_keys", s.st.store.Keyspace.Keys()).
		Dur("took_ms", time.Since(st.start)).Int("slices", st.slices).Dur("longest_slice_ms", st.longest).
		Dur("swap_ms", swap).Msg("cluster: snapshot swapped in")
}

// installBytes is what the snapshot being installed takes so far (the memory budget).
func (s *Server) installBytes() int64 {
	if s.cl == nil || !s.cl.installing.on {
		return 0
	}
	return store.StagedBytes(s.cl.installing.locks) + store.StagedKeyspaceBytes(s.cl.installing.ks.ks)
}
