package loop

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// This file is tallyd's cluster mode: the slock family's durable state (values, durable
// counters, locks held past --lock-persist-after) replicated with etcd's raft, driven from
// the one loop as the raft module's doc.go describes. The leader runs commands on its store
// as a single node does; what the store journals in one loop turn becomes one raft entry (the
// log's own state records). Followers apply committed entries to their store. A reply is
// held, with the append-only log's gate marks (persist.go), until its change reaches the
// connection's consistency level; reads at QUORUM or ALL wait for a ReadIndex round.
//
// The raft log (raftlog.RaftLog) is written by its own goroutine: a Ready's entries and hard state
// are handed to it, and the Ready is finished (messages sent, committed entries applied,
// Advance) once it reports them fsynced. Everything that arrives meanwhile goes into the
// next Ready: one fsync and one round for all of it (group commit).

// Level is a consistency level (cluster.Level).
type Level = cluster.Level

// The consistency levels.
const (
	LevelOne    = cluster.LevelOne
	LevelQuorum = cluster.LevelQuorum
	LevelAll    = cluster.LevelAll
)

// ParseLevel reads ONE, QUORUM or ALL (any case).
func ParseLevel(b []byte) (Level, bool) {
	for l := LevelOne; l <= LevelAll; l++ {
		if resp.Is(b, cluster.LevelNames[l]) {
			return l, true
		}
	}
	return 0, false
}

// ClusterConfig configures cluster mode (Config.Cluster; nil runs a single node).
type ClusterConfig struct {
	NodeID   uint64
	Peers    map[uint64]string // the initial voters and their peer addresses (--cluster)
	Join     string            // a member's peer address to join through (--join); empty with --cluster
	PeerAddr string            // this node's peer address (its entry in Peers, or --peer-addr)
	Tick     time.Duration     // raft's tick: elections after 10, heartbeats every one
	Timeout  time.Duration     // how long a command waits for a leader or its level
	// SnapshotEntries is how many applied entries past the last snapshot trigger a new one.
	SnapshotEntries uint64
	// New bootstraps a new cluster from Peers when the data directory holds no raft log
	// (--initial-cluster-state new). Without it such a member refuses to start
	// (ErrMemberState), unless it joins (Join): an empty data directory on a member that
	// belongs to a cluster means it lost its data.
	New bool
	// Key is the cluster's shared secret (--cluster-key-file): every peer link proves it
	// both ways before any of its frames is acted on (cluster_auth.go). nil: links are
	// not authenticated (a warning at start and in INFO), unless TLS authenticates them.
	Key []byte
}

// ErrMemberState is the error (wrapped) of a member that must not run as it is: it has no
// raft log and was not told to bootstrap a new cluster, or the cluster shows that it lost
// data it had acknowledged. tallyd exits with status 78 on it.
var ErrMemberState = errors.New("this member must not run as it is")

// Entry kinds (cluster.EntRecords: aof state records).
const (
	entRecords = cluster.EntRecords
	entSecret  = cluster.EntSecret
)

// peerLink is this node's view of one other member: its address and the connection this
// node dials to it (raft messages and forwarded commands go out on it).
type peerLink struct {
	id      uint64
	addr    string
	out     *conn // nil while not connected
	dialing bool
	next    int64 // Unix ns before which it is not dialled again
}

// clusterState is the loop's side of the cluster.
type clusterState struct {
	cfg   ClusterConfig
	rn    *raft.RawNode
	st    *cluster.Storage // raft's storage: its memory and the raft log on disk
	links map[uint64]*peerLink
	warm  []store.KeyName // the keys of the records being applied (applyRecords)

	role     raft.StateType
	leader   uint64
	term     uint64 // the term this node leads, while it leads
	ready    bool   // leading, and every entry of earlier terms is applied: commands run here
	ticked   int64  // Unix ns of the last raft tick
	loadedTo uint64 // the commit index found at start: local reads wait until it is applied

	fresh   cluster.Fresh // the vote rule of a member that started empty (cluster/fresh.go)
	dropLog rateLog
	peerTLS bool // links go through the TLS bridge, certificates verified both ways (tls.go)

	applied, commit, all uint64          // indexes: applied here, committed, on every voter (st.Stable: fsynced here)
	snapIndex            uint64          // the last snapshot's index
	snapSoon             bool            // the membership changed: snapshot at the next chance
	snapping             raftSnap        // the raft snapshot being encoded (cluster_snap.go)
	installing           installState    // a snapshot from the leader being installed (cluster_install.go)
	received             receivedSnap    // the data of a snapshot the leader sent, kept from raft (cluster_install.go)
	members              cluster.Members // the configuration and the peer addresses

	acks       cluster.Acks  // proposals and what acknowledges them
	reads      cluster.Reads // read barriers (ReadIndex), and this member's own reads (backup.go)
	heldReads  []heldRead    // other members' reads this leader holds (backup.go)
	releasedAt uint64        // the acknowledgements releaseHeld last looked at

	lastProposal int // the size of this leader's last proposal (windowOpen)

	secret   cluster.Secret // the key-name secret, once known (replicated)
	joinLink *peerLink

	// Forwarding (cluster_fwd.go).
	nextSession uint64
	sessions    map[uint64]*conn // follower: sessions of local clients on the leader
	virts       map[virtKey]*conn
	waiting     []*conn // connections whose next command waits for a leader, a ready leader, or its replies
	rerun       []*conn // virtual connections to serve again

	// WAIT (wait.go).
	replWaits []*conn // connections blocked in WAIT
	readyIdx  uint64  // the index of this leader's first entry of its term

	joinAt int64 // Unix ns of the next join request (--join, until a member)
	joinTo string

	stopping bool
	errLog   rateLog
	buf      []byte
	fatal    error
}

func (cl *clusterState) isLeader() bool { return cl.role == raft.StateLeader }

// serving says whether commands run on this node's store: it leads and has applied every
// earlier entry.
func (cl *clusterState) serving() bool { return cl.role == raft.StateLeader && cl.ready }

// raftDir is the raft log's directory in the data directory.
const raftDir = "raft"

// openCluster reads the raft log back into raft's storage and the store, and builds the
// RawNode (on Run's goroutine, before the loop starts).
func (s *Server) openCluster() (err error) {
	cc := s.cfg.Cluster
	if s.cfg.DataDir == "" {
		return errors.New("cluster mode needs a data directory (--data-dir)")
	}
	if err := os.MkdirAll(s.cfg.DataDir, DataDirMode); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if cc.Tick <= 0 {
		cc.Tick = 100 * time.Millisecond
	}
	if cc.Timeout <= 0 {
		cc.Timeout = 2 * time.Second
	}
	if cc.SnapshotEntries == 0 {
		cc.SnapshotEntries = 20000
	}
	cl := &clusterState{cfg: *cc, st: cluster.NewStorage(), members: cluster.NewMembers(),
		links: make(map[uint64]*peerLink), sessions: make(map[uint64]*conn), virts: make(map[virtKey]*conn),
		peerTLS: s.cfg.TLS.PeerClient != nil}
	s.cl = cl
	s.replies = raftGate{s}
	s.persist.lastNow = s.now().UnixNano()
	s.persist.emit = s.appendRecord
	lg, st, err := raftlog.OpenRaft(filepath.Join(s.cfg.DataDir, raftDir), s.raftProgress)
	if err != nil {
		return err
	}
	cl.st.Log = lg
	if st.TruncatedBytes > 0 {
		s.log.Warn().Str("dir", filepath.Join(s.cfg.DataDir, raftDir)).Int64("bytes_cut", st.TruncatedBytes).
			Str("why", st.TailWhy).Msg("raft log: torn tail cut off")
	}
	defer func() {
		if err != nil {
			lg.Close() // Run returns: nothing else stops its writer
		}
	}()
	for id, a := range cc.Peers {
		cl.members.Addrs[id] = a
	}
	for id, a := range st.Peers {
		cl.members.Addrs[id] = a
	}
	now := s.now().UnixNano()
	fresh, err := cl.st.Load(st)
	if err != nil {
		return err
	}
	if st.Snapshot != nil && !raft.IsEmptySnap(st.Snapshot) {
		s.restoreSnapshot(st.Snapshot.GetData(), now)
		cl.snapIndex = st.Snapshot.GetMetadata().GetIndex()
		cl.applied = cl.snapIndex
		if cs := st.Snapshot.GetMetadata().GetConfState(); cs != nil {
			cl.members.SetConf(cs)
		}
	}
	if st.HardState != nil && !raft.IsEmptyHardState(st.HardState) {
		cl.loadedTo = st.HardState.GetCommit()
	}
	cl.rn, err = raft.NewRawNode(cluster.RaftConfig(cc.NodeID, cl.applied, cl.st, cluster.Logger{Log: &s.log}))
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	cl.fresh.On = fresh
	if !fresh && cluster.BootstrapOnly(st.Snapshot, st.Entries) {
		// It bootstrapped (or restarted after bootstrapping) and no leader's entry ever
		// reached it: as empty as a new member, whatever it held before it lost its data.
		cl.fresh.On = true
		cl.fresh.BootLast, _ = cl.st.Mem.LastIndex()
	}
	switch {
	case !fresh:
		s.log.Info().Uint64("node_id", cc.NodeID).Uint64("snapshot_index", cl.snapIndex).Int("entries", len(st.Entries)).
			Uint64("commit", cl.loadedTo).Msg("cluster: raft log read back")
	case cc.Join != "":
		cl.joinTo = cc.Join
		s.log.Info().Uint64("node_id", cc.NodeID).Str("join", cc.Join).Msg("cluster: joining")
	case !cc.New:
		return fmt.Errorf("%w: the data directory %s holds no raft log. To bootstrap a new cluster, start every "+
			"member once with --initial-cluster-state new. If this member belonged to a cluster it lost its data: "+
			"remove it (tallyctl cluster remove %d, on a member that has a quorum) and start it with a new --node-id "+
			"and --join HOST:PORT (a member's peer address) instead of --cluster", ErrMemberState, s.cfg.DataDir, cc.NodeID)
	default:
		peers := make([]raft.Peer, 0, len(cc.Peers))
		for id, a := range cc.Peers {
			peers = append(peers, raft.Peer{ID: id, Context: []byte(a)})
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
		if err := cl.rn.Bootstrap(peers); err != nil {
			return fmt.Errorf("raft bootstrap: %w", err)
		}
		cl.fresh.BootLast = uint64(len(peers))
		s.log.Info().Uint64("node_id", cc.NodeID).Int("voters", len(peers)).Msg("cluster: new cluster bootstrapped")
	}
	for id, a := range cl.members.Addrs {
		if id != cc.NodeID {
			cl.links[id] = &peerLink{id: id, addr: a}
		}
	}
	if w := cl.peerAuthWarning(); w != "" {
		s.log.Warn().Msg("cluster: " + w)
	}
	return nil
}

// raftProgress runs on the raft log's goroutine after each batch.
func (s *Server) raftProgress(pr raftlog.RaftProgress) {
	if pr.Err != nil {
		// As with appendfsync always: what cannot be made durable is never acknowledged, and
		// the node stops rather than vote or acknowledge on a log it cannot write.
		err := fmt.Errorf("stopping: raft log: %w", pr.Err)
		s.persist.fatal.CompareAndSwap(nil, &err)
		s.log.Error().Err(pr.Err).Msg("cluster: the raft log cannot be written; stopping")
		go func() { _ = s.Stop(context.Background()) }()
		return
	}
	s.runFlushed(func() { s.raftSynced(pr.Synced) })
}

// raftSynced takes the log's progress on the loop: the appends it made durable deliver
// their responses.
func (s *Server) raftSynced(seq uint64) {
	s.cl.st.Synced(seq)
	s.deliverAppends()
	s.clusterTurn()
}

// clusterTurn runs at every flush: the changes this turn made are proposed, a read barrier
// is asked for if a reply waits on one, and raft's Readies are handled. Storage writes are
// asynchronous (raft's AsyncStorageWrites): appends go to the log writer and answer when
// durable, committed entries are applied at once, so neither waits for the other and a
// leader goes on replicating while its own fsync runs.
func (s *Server) clusterTurn() {
	cl := s.cl
	if cl == nil || cl.stopping {
		return
	}
	s.propose()
	if cl.isLeader() {
		cl.reads.Ask(cl.rn)
	}
	s.stepHeldReads()
	cluster.HandleReadies(cl.rn, raftReadies{s})
	cl.received = receivedSnap{} // taken by its append, or refused by raft
	// Committed means on a majority's disks already: QUORUM replies need not wait for this
	// node's own write of the commit index.
	if c := cl.rn.BasicStatus().GetCommit(); c > cl.commit {
		cl.commit = c
	}
	s.updateAcks()
	s.m.cl.committed(cl.acks.Acked[LevelQuorum], s.now)
	s.releaseHeld()
	s.snapshotPoll()
	if cl.serving() && s.st.locks.Journaled() && cl.windowOpen() {
		s.clusterTurn() // a commit opened the window: what waited in the journal goes now
	}
}

// raftReadies is the loop's side of raft's Readies (cluster.HandleReadies).
type raftReadies struct{ s *Server }

func (r raftReadies) SoftState(ss *raft.SoftState) { r.s.softState(ss) }
func (r raftReadies) Append(m *raftpb.Message)     { r.s.storageAppend(m) }
func (r raftReadies) Apply(m *raftpb.Message)      { r.s.storageApply(m) }
func (r raftReadies) Send(m *raftpb.Message)       { r.s.sendRaft(m) }

// ReadState: a read barrier this leader asked for (clusterTurn), or this member's own read
// (backup.go), has passed.
func (r raftReadies) ReadState(ctx []byte, index uint64) { r.s.cl.reads.Passed(ctx, index) }

// storageAppend hands one of raft's appends (entries, hard state, a snapshot) to the log
// writer; its responses wait until it is durable.
func (s *Server) storageAppend(m *raftpb.Message) {
	cl := s.cl
	s.snapshotData(m.GetSnapshot())
	durable := cl.st.Append(m, cluster.AppendHooks{
		Snapshot: s.installSnapshot,
		Entries: func(ents []*raftpb.Entry) {
			cl.fresh.Appended(ents[len(ents)-1].GetIndex()) // a leader's entries end the rule: its log is a prefix of the leader's
			if cl.isLeader() {
				cl.acks.Note(ents, cl.term)
			}
		},
		Fail: func(what string, err error) { s.log.Error().Err(err).Msg("cluster: " + what) },
	})
	if durable {
		s.deliverAppends()
	}
}

// deliverAppends delivers the responses of the appends the log has made durable, in order.
func (s *Server) deliverAppends() {
	cl := s.cl
	cl.st.Deliver(cl.cfg.NodeID, func(r *raftpb.Message) { _ = cl.rn.Step(r) }, s.sendRaft)
}

// storageApply applies committed entries (on the loop, at once) and tells raft.
func (s *Server) storageApply(m *raftpb.Message) {
	cl := s.cl
	now := s.now().UnixNano()
	for _, e := range m.GetEntries() {
		if e.GetIndex() <= cl.applied {
			continue // a snapshot has it already
		}
		s.applyEntry(e, now)
	}
	if !cl.isLeader() {
		s.st.locks.ForgetJournal() // a follower's store only mirrors the log
	}
	for _, r := range m.GetResponses() {
		_ = cl.rn.Step(r)
	}
}

// softState follows role and leader changes.
func (s *Server) softState(ss *raft.SoftState) {
	cl := s.cl
	was, wasLeader, wasTerm := cl.leader, cl.isLeader(), cl.term
	cl.role, cl.leader = ss.RaftState, ss.Lead
	term := cl.rn.BasicStatus().GetTerm()
	if wasLeader && (!cl.isLeader() || term != wasTerm) {
		s.abdicate("leader changed")
	}
	if cl.isLeader() && (!wasLeader || term != wasTerm) {
		cl.term, cl.ready = term, false
		cl.acks.Lead()
		s.log.Info().Uint64("node_id", cl.cfg.NodeID).Uint64("term", term).Msg("cluster: this node leads")
	}
	if cl.leader != was {
		s.leaderChanged(was)
		if cl.leader != 0 {
			s.m.cl.leaderKnown()
			s.log.Info().Uint64("leader_id", cl.leader).Uint64("term", term).Msg("cluster: leader known")
		}
	}
	s.wakeWaiting()
}

// updateAcks moves each level's acknowledged proposal to what the indexes now cover.
func (s *Server) updateAcks() {
	cl := s.cl
	if !cl.isLeader() {
		return
	}
	idx, all := cluster.Levels(cl.rn, cl.cfg.NodeID, cl.st.Stable(), cl.commit, cl.members.Conf)
	cl.all = all
	done := cl.acks.Ack(idx)
	s.checkWaits(0) // before the acks forget indexes: what raft learned of the followers may answer blocked WAITs
	cl.acks.Drop(done)
}

// isVoter says whether id votes in the current configuration.
func (cl *clusterState) isVoter(id uint64) bool { return cl.members.IsVoter(id) }

// applyEntry applies one committed entry.
func (s *Server) applyEntry(e *raftpb.Entry, now int64) {
	cl := s.cl
	cl.applied = e.GetIndex()

	switch e.GetType() {
	case raftpb.EntryType_EntryConfChange:
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			s.log.Error().Err(err).Msg("cluster: bad configuration change")
			return
		}
		s.applyConfChange(&cc)
		return
	case raftpb.EntryType_EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			s.log.Error().Err(err).Msg("cluster: bad configuration change")
			return
		}
		cl.members.SetConf(cl.rn.ApplyConfChange(&cc))
		return
	}
	d := e.GetData()
	if cl.isLeader() && e.GetTerm() == cl.term {
		if !cl.ready && len(d) == 0 {
			cl.ready = true // this term's first entry: everything before it is applied
			cl.readyIdx = e.GetIndex()
			if !cl.secret.Known {
				s.proposeSecret()
			}
			s.log.Info().Uint64("index", e.GetIndex()).Msg("cluster: leader ready")
			s.wakeWaiting()
		}
		return // this leader's own change: its store has it already
	}
	if len(d) == 0 {
		return
	}
	switch d[0] {
	case entRecords:
		if len(d) >= 9 {
			s.applyRecords(d[9:], now)
		}
	case entSecret:
		if k, ok := cluster.ParseSecret(d); ok {
			s.setSecret(k)
		}
	}
}

// learnPeers takes a peer table read from a snapshot.
func (s *Server) learnPeers(p map[uint64]string) {
	for id, a := range p {
		s.cl.members.Addrs[id] = a
	}
}

// applyRecords restores the keys of a run of records (and any peer table among them).
// A run of up to warmRecords records at a time is warmed (store.Locks.Warm), then restored.
func (s *Server) applyRecords(b []byte, now int64) {
	restore := func(ks *store.KeyState) { s.st.locks.Restore(ks, now) }
	cl := s.cl
	for len(b) > 0 {
		var n int
		cl.warm, n = aof.RecordKeys(b, cl.warm[:0], warmRecords)
		if n == 0 {
			n = len(b) // damaged: decoding says how
		}
		s.st.locks.Warm(cl.warm)
		// The messages the leader published with these changes, published here too (pubsub.go).
		if err := aof.DecodeRecordsWith(b[:n], restore, s.learnPeers, s.relayed); err != nil {
			s.log.Error().Err(err).Msg("cluster: bad records in the raft log")
			return
		}
		b = b[n:]
	}
}

// warmRecords is how many records a follower warms its caches for at a time: a few
// hundred keys' lines fit the cache with room to spare.
const warmRecords = 512

// setSecret adopts the cluster's key-name secret.
func (s *Server) setSecret(k [32]byte) {
	s.st.keys = rediscmd.NewKeys(k)
	s.cl.secret = cluster.Secret{Known: true, Key: k}
}

// proposeSecret has a new cluster's first leader choose the key-name secret every node uses.
func (s *Server) proposeSecret() {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("loop: no random source: " + err.Error())
	}
	if err := s.cl.rn.Propose(cluster.SecretEntry(k)); err == nil {
		s.setSecret(k)
	}
}

// applyConfChange applies a membership change: raft's configuration, and the peer table.
func (s *Server) applyConfChange(cc *raftpb.ConfChange) {
	cl := s.cl
	cl.members.Apply(cl.rn, cc)
	id := cc.GetNodeId()
	switch cc.GetType() {
	case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
		if id != cl.cfg.NodeID && cl.links[id] == nil {
			cl.links[id] = &peerLink{id: id, addr: cl.members.Addrs[id]}
		} else if l := cl.links[id]; l != nil && l.addr != cl.members.Addrs[id] {
			l.addr = cl.members.Addrs[id]
		}
		if id == cl.cfg.NodeID {
			cl.joinTo = ""
		}
		// raft takes a snapshot only if its configuration has the member: one taken after
		// this change is what a new member catching up from a snapshot needs.
		cl.snapSoon = true
		s.log.Info().Uint64("node_id", id).Str("addr", cl.members.Addrs[id]).Stringer("change", cc.GetType()).Msg("cluster: member added")
	case raftpb.ConfChangeType_ConfChangeRemoveNode:
		if l := cl.links[id]; l != nil {
			if l.out != nil {
				s.closeLater(l.out)
			}
			delete(cl.links, id)
		}
		s.log.Info().Uint64("node_id", id).Msg("cluster: member removed")
	}
	cl.st.Log.SavePeers(cl.members.Addrs)
}

// proposeWindow is how many of this leader's proposals may await their commit: changes
// made meanwhile wait in the store's journal and go, all together, into the next proposal
// once one commits (group commit: one raft round, and one fsync on each member, for
// everything that arrived while the last rounds were in flight).
const proposeWindow = 2

// soloProposal is the size from which a proposal awaits its commit alone (a window of one).
// Under load what arrives meanwhile then goes, all together, into the next proposal: fewer,
// larger entries, and each entry costs every member an fsync, a message each way and a few
// wake-ups of the loop (about 500 µs of CPU over three members on a 2-core test machine), which is
// what bounds the rate when members share CPUs. A small proposal (a light load) lets the
// next go at once, for latency.
const soloProposal = 4 << 10

// windowOpen says whether a new proposal may go now.
func (cl *clusterState) windowOpen() bool {
	w := cl.acks.Window()
	return w == 0 || w < proposeWindow && cl.lastProposal < soloProposal
}

// maxProposalBuf is the largest buffer kept between proposals (one holds every change of a
// round, so it is larger than the single node's journal buffer).
const maxProposalBuf = 16 << 20

// propose hands the changes made since the last proposal to raft as one entry, unless
// proposeWindow proposals await their commit already.
func (s *Server) propose() {
	cl := s.cl
	if !cl.serving() || !s.st.locks.Journaled() && len(s.ps.relay) == 0 || !cl.windowOpen() {
		return
	}
	p := &s.persist
	p.buf = append(p.buf[:0], entRecords, 0, 0, 0, 0, 0, 0, 0, 0)
	s.st.locks.Journal(p.lastNow, p.emit)
	p.buf = append(p.buf, s.ps.relay...) // the messages published with these changes (pubsub.go)
	s.ps.relay = s.ps.relay[:0]
	if cap(s.ps.relay) > maxRelayBuf {
		s.ps.relay = nil
	}
	if len(p.buf) == 9 {
		return
	}
	cl.acks.Seq++
	s.m.cl.proposed(cl.acks.Seq, s.now)
	binary.BigEndian.PutUint64(p.buf[1:9], cl.acks.Seq)
	data := append([]byte(nil), p.buf...) // raft keeps it
	cl.lastProposal = len(data)
	if cap(p.buf) > maxProposalBuf {
		p.buf = nil
	}
	if err := cl.rn.Propose(data); err != nil {
		s.log.Warn().Err(err).Msg("cluster: proposal dropped")
		s.abdicate("proposal dropped")
	}
}

// restoreSnapshot fills the store (emptied) from a snapshot's data: the key-name secret
// (once known), then the log's records (the peer table and every logged key's state).
func (s *Server) restoreSnapshot(d []byte, now int64) {
	k, recs, ok := cluster.SplitSnapshot(d)
	if k != nil {
		s.setSecret(*k)
	}
	if !ok {
		s.log.Error().Msg("cluster: snapshot without records")
		return
	}
	s.applyRecords(recs, now)
}

// abdicate runs when this node stops leading: what it ran but did not get committed may never
// be, so replies held for it are answered with an error (or their connection closed), the
// connections whose lock state lived only here are closed, and the store is rebuilt from the
// committed state.
func (s *Server) abdicate(why string) {
	cl := s.cl
	cl.ready = false
	s.log.Warn().Str("why", why).Msg("cluster: no longer leading; rebuilding the store from the committed log")
	for _, cs := range s.ct.conns {
		if cs.slock == nil || cs.closed {
			continue
		}
		if sc := cs.slock; sc.kind == slock.Binary || cs.virt != nil || sc.touched || sc.waiting || sc.lockedOne {
			// Its lock state lived here: a wait the rebuilt store no longer has, a lock taken
			// at ONE that may never have been replicated (the holder is told by the close).
			s.closeLater(cs)
			continue
		}
		s.failHeld(cs, "CLUSTERDOWN leader changed")
	}
	s.abdicateWaits()
	cl.acks.Forget()
	s.resetFromLog()
}

// resetFromLog rebuilds the replicated family from raft's storage: the snapshot, then the
// entries up to the applied index.
func (s *Server) resetFromLog() {
	cl := s.cl
	now := s.now().UnixNano()
	s.st.store.ResetLocks()
	s.st.locks = s.st.store.Locks
	snap, err := cl.st.Snap()
	if err == nil && !raft.IsEmptySnap(snap) {
		s.restoreSnapshot(snap.GetData(), now)
	}
	first, _ := cl.st.Mem.FirstIndex()
	if cl.applied >= first {
		ents, err := cl.st.Mem.Entries(first, cl.applied+1, math.MaxUint64)
		if err != nil {
			s.log.Error().Err(err).Msg("cluster: rebuilding the store")
		}
		for _, e := range ents {
			if e.GetType() == raftpb.EntryType_EntryNormal && len(e.GetData()) > 9 && e.GetData()[0] == entRecords {
				s.applyRecords(e.GetData()[9:], now)
			}
		}
	}
	s.st.locks.ForgetJournal()
}

// failHeld answers every reply cs holds for the log with err instead: it was never
// acknowledged, and its outcome is unknown.
func (s *Server) failHeld(cs *conn, err string) {
	if len(cs.gates) == 0 {
		return
	}
	at := cs.gates[0].at
	n := countReplies(cs.out[at:])
	s.m.cl.clusterDown(err, n)
	b := cs.out[:at]
	for range n {
		b = append(b, '-')
		b = append(b, err...)
		b = append(b, '\r', '\n')
	}
	cs.gates = cs.gates[:0]
	s.putSettled(cs, b)
}

// releaseHeld re-examines the connections whose replies wait, once something acknowledged
// more: each is written up to what is now acknowledged.
func (s *Server) releaseHeld() {
	cl := s.cl
	mark := cl.acks.Acked[LevelOne] + cl.acks.Acked[LevelQuorum] + cl.acks.Acked[LevelAll] + cl.reads.Done
	if mark == cl.releasedAt {
		return
	}
	cl.releasedAt = mark
	s.pendHeld()
}

// raftGate is the reply gate of a cluster: on a leader, a reply waits until the changes made
// before it reach its connection's level in raft.
type raftGate struct{ s *Server }

func (g raftGate) turn() { g.s.clusterTurn() }

func (g raftGate) failing() string {
	if g.s.cl.st.Log == nil {
		return ""
	}
	return g.s.cl.st.Log.Failing()
}

// mark runs as a reply is added to slock connection cs's output at offset from, on a leader:
// it waits until the changes made so far reach cs's level and, at QUORUM and ALL, until a
// read barrier confirms this node still leads.
func (g raftGate) mark(cs *conn, from int) {
	s := g.s
	cl := s.cl
	if !cl.isLeader() {
		return
	}
	if cs.slock.local {
		return // a connection's own setting: it goes out behind the replies before it
	}
	lvl := cs.slock.level()
	pending := cl.acks.Seq > cl.acks.Acked[lvl] || s.st.locks.Journaled()
	if !pending && lvl == LevelOne {
		return
	}
	if n := len(cs.gates); n > 0 && !cs.gates[n-1].settled {
		return // the mark before covers it (made in the same turn, with the same proposal count)
	}
	cs.gates = append(cs.gates, gateMark{at: from, lvl: lvl, since: s.persist.lastNow, after: cl.acks.Seq})
	s.hold(cs)
}

// writable returns how much of cs's output may be written now.
func (rg raftGate) writable(cs *conn) int {
	s := rg.s
	cl := s.cl
	g := cs.gates
	for j := range g {
		if !g[j].settled {
			g[j].settled = true
			g[j].seq = cl.acks.Seq
			if s.st.locks.Journaled() {
				g[j].seq++ // its change waits for the next proposal, which takes the whole journal
			}
			if g[j].lvl >= LevelQuorum && g[j].seq <= g[j].after {
				// The proposal it would wait for was made before its command ran: its commit
				// proves only that this node led then, and a new leader may have acknowledged
				// writes (or granted locks) since. A read barrier that begins now proves it
				// still leads after the command ran (issue 19).
				g[j].rd = cl.reads.Want()
			}
		}
	}
	i := 0
	for i < len(g) && g[i].seq <= cl.acks.Acked[g[i].lvl] && g[i].rd <= cl.reads.Done {
		i++
	}
	cs.gates = g[:copy(g, g[i:])]
	if len(cs.gates) == 0 {
		return len(cs.out)
	}
	s.hold(cs)
	return cs.gates[0].at
}

// clusterTick runs on each loop tick: raft's clock, dials, joins, timeouts, snapshots.
func (s *Server) clusterTick(now time.Time) {
	cl := s.cl
	if cl == nil || cl.stopping {
		return
	}
	ns := now.UnixNano()
	if cl.ticked == 0 {
		cl.ticked = ns
	}
	for n := 0; ns-cl.ticked >= int64(cl.cfg.Tick) && n < 3; n++ {
		cl.ticked += int64(cl.cfg.Tick)
		cl.rn.Tick()
	}
	if ns-cl.ticked >= int64(cl.cfg.Tick) {
		cl.ticked = ns // the loop stalled: do not make up for it in a burst
	}
	s.dialPeers(ns)
	s.joinTick(ns)
	s.promoteLearners()
	s.expireHeld(ns)
	s.checkWaits(ns)
	s.expireWaiting(ns)
	s.expireSessions(ns)
	s.installStep()
	s.maybeSnapshot(ns)
	s.clusterTurn()
}

// expireHeld answers replies that waited longer than --cluster-timeout for their level.
func (s *Server) expireHeld(now int64) {
	cl := s.cl
	limit := int64(cl.cfg.Timeout)
	for _, cs := range s.persist.held {
		if len(cs.gates) == 0 || cs.closed || now-cs.gates[0].since < limit {
			continue
		}
		if cs.slock == nil || cs.slock.kind == slock.Binary || cs.slock.touched {
			s.closeLater(cs)
			continue
		}
		s.failHeld(cs, "CLUSTERDOWN no quorum")
	}
}

// promoteLearners makes caught-up learners voters (the leader only).
func (s *Server) promoteLearners() {
	cl := s.cl
	if !cl.serving() {
		return
	}
	cl.members.Promote(cl.rn, cl.commit, func(id, match uint64) {
		s.log.Info().Uint64("node_id", id).Uint64("match", match).Msg("cluster: promoting a caught-up learner")
	})
}

// clusterInfo gathers INFO's Cluster figures; nil when not in cluster mode.
func (s *Server) clusterInfo() *resp.InfoCluster {
	cl := s.cl
	if cl == nil {
		return nil
	}
	st := cl.rn.BasicStatus()
	ls := cl.st.Log.Stats()
	c := &resp.InfoCluster{NodeID: cl.cfg.NodeID, Role: "follower", LeaderID: st.Lead, Term: st.GetTerm(),
		Commit: st.GetCommit(), Applied: cl.applied, SnapshotIndex: cl.snapIndex, LeaderReady: cl.serving(),
		PeerAuth: cl.peerAuth(), PeerAuthWarning: cl.peerAuthWarning(),
		LogBytes: ls.LogSize, LogBatches: ls.Batches, LogFsyncs: ls.Fsyncs, LogAppends: ls.OpsSaved,
		LastFsyncUS: ls.LastFsyncTime.Microseconds(), LogFailing: ls.LastErr}
	switch {
	case st.RaftState == raft.StateLeader:
		c.Role = "leader"
	case st.RaftState == raft.StateCandidate || st.RaftState == raft.StatePreCandidate:
		c.Role = "candidate"
	case cl.isLearner(cl.cfg.NodeID):
		c.Role = "learner"
	}
	match := map[uint64]uint64{}
	if st.RaftState == raft.StateLeader {
		cl.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { match[id] = pr.Match })
	}
	for id, addr := range cl.members.Addrs {
		p := resp.InfoPeer{ID: id, Addr: addr, Voter: cl.isVoter(id), Match: -1, Link: "down"}
		if m, ok := match[id]; ok {
			p.Match = int64(m)
		}
		switch l := cl.links[id]; {
		case id == cl.cfg.NodeID:
			p.Link = "self"
		case l.ready():
			p.Link = "up"
		case l != nil && l.out != nil:
			p.Link = "authenticating"
		}
		c.Peers = append(c.Peers, p)
	}
	sort.Slice(c.Peers, func(i, j int) bool { return c.Peers[i].ID < c.Peers[j].ID })
	return c
}

func (cl *clusterState) isLearner(id uint64) bool { return cl.members.IsLearner(id) }

// closeCluster stops the raft log's writer (after the engine stopped).
func (s *Server) closeCluster() {
	if s.cl != nil && s.cl.st.Log != nil {
		s.cl.stopping = true
		s.cl.st.Log.Close()
	}
}
