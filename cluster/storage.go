// Package cluster is tallyd's raft member apart from the loop (Member, member.go): the
// RawNode, raft's storage on this node (this file: the in-memory log raft reads, kept in step
// with the raft log on disk, raftlog, and the appends whose responses wait until that log has
// made them durable), the acknowledgements per consistency level, reads, membership, the
// proposal window and the entries' encoding. The loop is its host (Host): it proposes,
// steps, ticks and turns the member, and applies what it hands back.
package cluster

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tallyd/tallyd/raftlog"
)

// Storage is raft's storage on this node, for raft's asynchronous storage writes: an append
// reaches raft's memory at once and the disk by the log's writer, and its responses are
// delivered once the writer reports it durable (Synced).
type Storage struct {
	Mem  *raft.MemoryStorage // the log raft reads (through View: raft.Config.Storage)
	View raft.Storage        // Mem, but for its snapshot (snap)
	snap *raftpb.Snapshot    // the last snapshot, shared, nil for Mem's
	Log  *raftlog.RaftLog    // the raft log on disk; nil until opened
	// Sim, when set, is written instead of Log: a simulation's disk (MemLog), which loses
	// what it did not make durable when the simulation crashes its member.
	Sim LogWriter

	appends []appendDone // appends in flight, in order
	synced  uint64       // the log's last batch made durable
	stable  uint64       // the last entry index made durable here

	// A snapshot received from the leader that the host installs a slice at a time
	// (HoldSnapshot): raft is told it is applied (its MsgStorageAppendResp, which also
	// releases the entries committed after it) only once the store has it.
	installing uint64            // its index; 0: none
	held       []*raftpb.Message // its response to raft once durable, then those of the appends after it
}

// LogWriter is what Storage writes to: the raft log on disk (raftlog.RaftLog), or a
// simulation's (MemLog). Each call returns its sequence number; the member hears that the
// calls up to a number are durable through Member.Synced.
type LogWriter interface {
	Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) uint64
	SavePeers(p map[uint64]string) uint64
	Compact(snap *raftpb.Snapshot) uint64
}

// writer is the log the storage writes to: Sim if set, else Log.
func (st *Storage) writer() LogWriter {
	if st.Sim != nil {
		return st.Sim
	}
	return st.Log
}

// appendDone is a raft log append in flight: its batch in the log, the responses raft
// asked to be delivered once it is durable, and its last entry's index.
type appendDone struct {
	seq   uint64
	resps []*raftpb.Message
	last  uint64
}

// NewStorage returns an empty storage; its Log is set once the raft log is opened.
func NewStorage() *Storage {
	st := &Storage{Mem: raft.NewMemoryStorage()}
	st.View = snapView{st}
	return st
}

// snapView is raft's view of the storage: Mem, whose Snapshot and CreateSnapshot copy the
// snapshot's data each time (a store of 200k keys: 25 MB, some 100 ms of the loop's turn on a
// loaded machine, again for each follower it is sent to), but for the snapshot, which it
// shares: neither raft nor the loop changes a snapshot's data once taken.
type snapView struct{ st *Storage }

func (v snapView) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	return v.st.Mem.InitialState()
}
func (v snapView) Entries(lo, hi, maxSize uint64) ([]*raftpb.Entry, error) {
	return v.st.Mem.Entries(lo, hi, maxSize)
}
func (v snapView) Term(i uint64) (uint64, error)       { return v.st.Mem.Term(i) }
func (v snapView) LastIndex() (uint64, error)          { return v.st.Mem.LastIndex() }
func (v snapView) FirstIndex() (uint64, error)         { return v.st.Mem.FirstIndex() }
func (v snapView) Snapshot() (*raftpb.Snapshot, error) { return v.st.Snap() }

// Snap returns the last snapshot (raft's Storage.Snapshot), shared: it must not be changed.
func (st *Storage) Snap() (*raftpb.Snapshot, error) {
	if st.snap != nil {
		return st.snap, nil
	}
	return st.Mem.Snapshot()
}

// Load puts what the raft log read back (OpenRaft) into raft's memory: its snapshot, hard
// state and entries. fresh says there was none of them.
func (st *Storage) Load(rs *raftlog.RaftState) (fresh bool, err error) {
	fresh = true
	if rs.Snapshot != nil && !raft.IsEmptySnap(rs.Snapshot) {
		fresh = false
		if err := st.Mem.ApplySnapshot(rs.Snapshot); err != nil {
			return false, fmt.Errorf("raft snapshot: %w", err)
		}
		st.snap = rs.Snapshot
	}
	if rs.HardState != nil && !raft.IsEmptyHardState(rs.HardState) {
		fresh = false
		if err := st.Mem.SetHardState(rs.HardState); err != nil {
			return false, err
		}
	}
	if len(rs.Entries) > 0 {
		fresh = false
		if err := st.Mem.Append(rs.Entries); err != nil {
			return false, fmt.Errorf("raft entries: %w", err)
		}
	}
	return fresh, nil
}

// AppendHooks are the loop's parts of an append, called in this order.
type AppendHooks struct {
	// Snapshot installs a snapshot the leader sent, once raft's memory has it.
	Snapshot func(*raftpb.Snapshot)
	// Entries sees the append's entries once raft's memory has them.
	Entries func([]*raftpb.Entry)
	// Fail reports a failure of raft's memory to take the snapshot ("snapshot") or the
	// entries ("append").
	Fail func(what string, err error)
}

// Append takes one of raft's appends (a LocalAppendThread message: a hard state, a snapshot,
// entries) into raft's memory and hands it to the log's writer. It reports whether the log
// has made it durable already (the caller then delivers it: Deliver).
func (st *Storage) Append(m *raftpb.Message, h AppendHooks) bool {
	var hs *raftpb.HardState
	if m.Term != nil {
		hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		_ = st.Mem.SetHardState(hs)
	}
	snap := m.GetSnapshot()
	if snap != nil && raft.IsEmptySnap(snap) {
		snap = nil
	}
	if snap != nil {
		// Mem gets the metadata alone (it would copy the data: 125 MB for 1M keys, on the
		// loop); raft reads the snapshot from View, shared.
		switch err := st.Mem.ApplySnapshot(&raftpb.Snapshot{Metadata: snap.GetMetadata()}); {
		case err == nil:
			st.snap = snap
		case !errors.Is(err, raft.ErrSnapOutOfDate):
			h.Fail("snapshot", err)
		}
		h.Snapshot(snap)
	}
	ents := m.GetEntries()
	var last uint64
	if len(ents) > 0 {
		if err := st.Mem.Append(ents); err != nil {
			h.Fail("append", err)
		}
		last = ents[len(ents)-1].GetIndex()
		h.Entries(ents)
	}
	seq := st.writer().Save(hs, ents, snap)
	st.appends = append(st.appends, appendDone{seq, m.GetResponses(), last})
	return st.synced >= seq
}

// Synced takes the log writer's report that its batches up to seq are durable.
func (st *Storage) Synced(seq uint64) {
	if seq > st.synced {
		st.synced = seq
	}
}

// Deliver hands the responses of the appends the log has made durable, in order, to step
// (those to this member, self) or send (those to others).
func (st *Storage) Deliver(self uint64, step, send func(*raftpb.Message)) {
	n := 0
	for ; n < len(st.appends) && st.appends[n].seq <= st.synced; n++ {
		a := &st.appends[n]
		st.stable = max(st.stable, a.last)
		for _, r := range a.resps {
			if r.GetTo() == self && st.installing != 0 && (len(st.held) > 0 || r.GetSnapshot().GetMetadata().GetIndex() == st.installing) {
				st.held = append(st.held, r) // until ReleaseSnapshot
				continue
			}
			if r.GetTo() == self {
				step(r)
			} else {
				send(r)
			}
		}
		a.resps = nil
	}
	if n > 0 {
		st.appends = st.appends[:copy(st.appends, st.appends[n:])]
	}
}

// HoldSnapshot says that the snapshot at index, received in an Append, is being installed:
// its response to raft waits, once durable, until ReleaseSnapshot, and so do the responses to
// raft of the appends after it, in order. Until raft hears it, raft hands out no committed
// entry (those after the snapshot wait), does not count the snapshot applied, and this
// member does not campaign; its responses to the leader go as usual (what is durable here
// is acknowledged). The later appends' responses must wait too: raft keeps the snapshot in
// its unstable log until told it is stored, and entries after it told stable before it
// would leave raft's last index at the snapshot's, behind what the leader knows this
// member holds (a heartbeat's commit past it panics raft: "tocommit(N) is out of range").
// A hold of an earlier snapshot, not installed (a newer one replaced it), is dropped with
// what it held: raft takes the newer one's instead.
func (st *Storage) HoldSnapshot(index uint64) {
	st.installing = index
	clear(st.held)
	st.held = st.held[:0]
}

// ReleaseSnapshot ends the hold: the responses held (the snapshot's and later appends') go
// to step now, in order; if the log has not made the snapshot durable yet, its response
// goes when it has, as any.
func (st *Storage) ReleaseSnapshot(step func(*raftpb.Message)) {
	st.installing = 0
	for i, r := range st.held {
		st.held[i] = nil
		step(r)
	}
	st.held = st.held[:0]
}

// Installing returns the index of the snapshot held (HoldSnapshot), 0 if none.
func (st *Storage) Installing() uint64 { return st.installing }

// keepEntries is how many entries a snapshot leaves before its index, for followers a
// little behind.
const keepEntries = 5000

// Snapshot takes a snapshot of the state at index applied (data, the configuration cs) into
// raft's memory and the log on disk, and drops the entries before it but the last
// keepEntries. An error means none was taken.
func (st *Storage) Snapshot(applied uint64, cs *raftpb.ConfState, data []byte) error {
	// Mem's has no data (it would copy it, twice): raft has it from View, shared.
	snap, err := st.Mem.CreateSnapshot(applied, cs, nil)
	if err != nil {
		return err
	}
	snap.Data = data
	st.snap = snap
	if applied > keepEntries {
		_ = st.Mem.Compact(applied - keepEntries)
	}
	st.writer().Compact(snap)
	return nil
}

// Stable returns the last entry index this member's log has made durable.
func (st *Storage) Stable() uint64 { return st.stable }
