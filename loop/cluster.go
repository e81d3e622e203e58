package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/peer"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// This file is tallyd's cluster mode: the slock family's durable state (values, durable
// counters, locks held past --lock-persist-after) replicated with etcd's raft. The raft
// member (cluster.Member: the RawNode, its storage, acknowledgements, reads, membership) is
// apart from the loop, as etcd's raftNode is apart from etcdserver; the loop is its host
// (memberHost): it proposes what its commands journaled, steps what its peer links carry,
// ticks it, and at each turn is handed records to apply, messages to send, snapshots to
// restore and role changes. The leader runs commands on its store as a single node does;
// what the store journals in one loop turn becomes one raft entry (the log's own state
// records). Followers apply committed entries to their store. A reply is held, with the
// append-only log's gate marks (persist.go), until its change reaches the connection's
// consistency level; reads at QUORUM or ALL wait for a ReadIndex round.
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
var ErrMemberState = cluster.ErrMemberState

// peerLink is this node's view of one other member: its address and the connection this
// node dials to it (raft messages and forwarded commands go out on it).
type peerLink struct {
	id      uint64
	addr    string
	out     *conn // nil while not connected
	dialing bool
	next    int64 // Unix ns before which it is not dialled again
}

// clusterState is the loop's side of the cluster: the host of its raft member (m), the
// peer links, forwarding, WAIT and the snapshot being encoded.
type clusterState struct {
	cfg   ClusterConfig
	m     *cluster.Member // the raft member (cluster/member.go)
	links map[uint64]*peerLink
	warm  []store.KeyName // the keys of the records being applied (applyRecords)

	ticked  int64 // Unix ns of the last raft tick
	peerTLS bool  // links go through the TLS bridge, certificates verified both ways (tls.go)

	snapping   raftSnap     // the raft snapshot being encoded (cluster_snap.go)
	installing installState // a snapshot from the leader being installed (cluster_install.go)
	releasedAt uint64       // the acknowledgements releaseHeld last looked at

	joinLink *peerLink

	// Forwarding (cluster_fwd.go).
	nextSession uint64
	sessions    map[uint64]*conn // follower: sessions of local clients on the leader
	virts       map[virtKey]*conn
	waiting     []*conn // connections whose next command waits for a leader, a ready leader, or its replies
	rerun       []*conn // virtual connections to serve again

	// WAIT (wait.go).
	replWaits []*conn // connections blocked in WAIT

	joinAt int64 // Unix ns of the next join request (--join, until a member)
	joinTo string

	stopping bool
	errLog   rateLog
}

func (cl *clusterState) isLeader() bool { return cl.m.IsLeader() }

// serving says whether commands run on this node's store: it leads and has applied every
// earlier entry.
func (cl *clusterState) serving() bool { return cl.m.Serving() }

// raftDir is the raft log's directory in the data directory.
const raftDir = "raft"

// openCluster reads the raft log back into raft's storage and the store, and builds the
// member (on Run's goroutine, before the loop starts).
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
	cl := &clusterState{cfg: *cc, m: cluster.NewMember(cc.NodeID, &s.log, s.now),
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
	cl.m.St.Log = lg
	if st.TruncatedBytes > 0 {
		s.log.Warn().Str("dir", filepath.Join(s.cfg.DataDir, raftDir)).Int64("bytes_cut", st.TruncatedBytes).
			Str("why", st.TailWhy).Msg("raft log: torn tail cut off")
	}
	defer func() {
		if err != nil {
			lg.Close() // Run returns: nothing else stops its writer
		}
	}()
	now := s.now().UnixNano()
	joining, err := cl.m.Open(st, cluster.Boot{Peers: cc.Peers, Join: cc.Join, New: cc.New, DataDir: s.cfg.DataDir},
		func(data []byte) { s.restoreSnapshot(data, now) })
	if err != nil {
		return err
	}
	if joining {
		cl.joinTo = cc.Join
	}
	for id, a := range cl.m.Members.Addrs {
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
	s.cl.m.Synced(seq, memberHost{s})
	s.clusterTurn()
}

// clusterTurn runs at every flush: the changes this turn made are proposed, and the member
// takes its turn (cluster.Member.Turn: read barriers, raft's Readies, acknowledgements);
// then the replies that waited for them are released.
func (s *Server) clusterTurn() {
	cl := s.cl
	if cl == nil || cl.stopping {
		return
	}
	s.propose()
	cl.m.Turn(memberHost{s})
	s.m.cl.committed(cl.m.Acks.Acked[LevelQuorum], s.now)
	s.releaseHeld()
	s.snapshotPoll()
	if cl.serving() && s.st.locks.Journaled() && cl.m.WindowOpen() {
		s.clusterTurn() // a commit opened the window: what waited in the journal goes now
	}
}

// memberHost is the loop's side of its raft member (cluster.Host).
type memberHost struct{ s *Server }

func (h memberHost) ApplyRecords(recs []byte, now int64) { h.s.applyRecords(recs, now) }
func (h memberHost) SetSecret(k [32]byte)                { h.s.setSecret(k) }
func (h memberHost) Abdicate(why string)                 { h.s.abdicate(why) }
func (h memberHost) LeaderReady()                        { h.s.wakeWaiting() }
func (h memberHost) Fatal(err error)                     { h.s.memberFatal(err) }
func (h memberHost) MemberAdded(id uint64, addr string)  { h.s.memberAdded(id, addr) }
func (h memberHost) MemberRemoved(id uint64)             { h.s.memberRemoved(id) }

// AppliedBatch: a follower's store only mirrors the log.
func (h memberHost) AppliedBatch() { h.s.st.locks.ForgetJournal() }

// Acked: what raft learned of the followers may answer blocked WAITs.
func (h memberHost) Acked() { h.s.checkWaits(0) }

// RestoreSnapshot begins installing a snapshot the leader sent, a slice at a time
// (cluster_install.go): the member counts it applied once swapped in.
func (h memberHost) RestoreSnapshot(data []byte) { h.s.installSnapshot(data) }

// RoleChanged: the sessions held on a former leader end, and the connections that waited
// for a leader go on.
func (h memberHost) RoleChanged(was uint64) {
	s := h.s
	if lead := s.cl.m.Leader(); lead != was {
		s.leaderChanged(was)
		if lead != 0 {
			s.m.cl.leaderKnown()
		}
	}
	s.wakeWaiting()
}

// Send puts a raft message on the link to its member.
func (h memberHost) Send(to uint64, m cluster.Message) error {
	s := h.s
	l := s.cl.links[to]
	if !l.ready() {
		return cluster.ErrUnreachable
	}
	b, err := m.AppendTo(peer.AppendHeader(s.out(l.out), peer.TypeRaft, m.Size()))
	if err != nil {
		return err
	}
	s.put(l.out, b)
	return nil
}

// memberAdded adds a link to a member added (or moves it to the address the change carries).
func (s *Server) memberAdded(id uint64, addr string) {
	cl := s.cl
	if id != cl.cfg.NodeID && cl.links[id] == nil {
		cl.links[id] = &peerLink{id: id, addr: addr}
	} else if l := cl.links[id]; l != nil && l.addr != addr {
		l.addr = addr
	}
	if id == cl.cfg.NodeID {
		cl.joinTo = ""
	}
}

// memberRemoved drops the link to a member removed.
func (s *Server) memberRemoved(id uint64) {
	cl := s.cl
	if l := cl.links[id]; l != nil {
		if l.out != nil {
			s.closeLater(l.out)
		}
		delete(cl.links, id)
	}
}

// learnPeers takes a peer table read from a snapshot.
func (s *Server) learnPeers(p map[uint64]string) {
	for id, a := range p {
		s.cl.m.Members.Addrs[id] = a
	}
}

// applyRecords restores the keys of a run of records (and any peer table among them).
// A run of up to warmRecords records at a time is warmed (store.Locks.Warm), then restored.
func (s *Server) applyRecords(b []byte, now int64) {
	restore := func(ks *store.KeyState) { s.st.locks.Restore(ks, now) }
	ka := ksApplier{ks: s.st.store.Keyspace}
	h := aof.Handlers{State: restore, Keyspace: ka.apply, Peers: s.learnPeers, Message: s.relayed}
	cl := s.cl
	for len(b) > 0 {
		var n int
		cl.warm, n = aof.RecordKeys(b, cl.warm[:0], warmRecords)
		if n == 0 {
			n = len(b) // damaged: decoding says how
		}
		s.st.locks.Warm(cl.warm)
		// The messages the leader published with these changes, published here too (pubsub.go).
		if err := aof.DecodeAll(b[:n], &h); err != nil {
			s.log.Error().Err(err).Msg("cluster: bad records in the raft log")
			return
		}
		b = b[n:]
	}
	if ka.errs > 0 {
		s.log.Error().Err(ka.first).Int("records", ka.errs).Msg("cluster: keyspace records that do not apply, skipped")
	}
}

// warmRecords is how many records a follower warms its caches for at a time: a few
// hundred keys' lines fit the cache with room to spare.
const warmRecords = 512

// setSecret adopts the cluster's key-name secret.
func (s *Server) setSecret(k [32]byte) {
	s.st.keys = rediscmd.NewKeys(k)
	s.cl.m.Secret = cluster.Secret{Known: true, Key: k}
}

// maxProposalBuf is the largest buffer kept between proposals (one holds every change of a
// round, so it is larger than the single node's journal buffer).
const maxProposalBuf = 16 << 20

// propose hands the changes made since the last proposal to the member as one entry, unless
// its window is closed (cluster.Member.WindowOpen).
func (s *Server) propose() {
	cl := s.cl
	if !cl.serving() || !s.st.locks.Journaled() && len(s.ps.relay) == 0 || !cl.m.WindowOpen() {
		return
	}
	p := &s.persist
	p.buf = cluster.ProposalBuf(p.buf)
	s.st.locks.Journal(p.lastNow, p.emit)
	p.buf = append(p.buf, s.ps.relay...) // the messages published with these changes (pubsub.go)
	s.ps.relay = s.ps.relay[:0]
	if cap(s.ps.relay) > maxRelayBuf {
		s.ps.relay = nil
	}
	if len(p.buf) == cluster.ProposalHead {
		return
	}
	seq, err := cl.m.Propose(p.buf)
	s.m.cl.proposed(seq, s.now)
	if cap(p.buf) > maxProposalBuf {
		p.buf = nil
	}
	if err != nil {
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
	cl.m.Unready()
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
	cl.m.Acks.Forget()
	s.resetFromLog()
}

// resetFromLog rebuilds the replicated family from raft's storage: the snapshot, then the
// entries up to the applied index.
func (s *Server) resetFromLog() {
	now := s.now().UnixNano()
	s.st.store.ResetLocks()
	s.st.locks = s.st.store.Locks
	s.st.store.ResetKeyspace()
	s.cl.m.Replay(func(data []byte) { s.restoreSnapshot(data, now) }, func(recs []byte) { s.applyRecords(recs, now) })
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
	a := &cl.m.Acks
	mark := a.Acked[LevelOne] + a.Acked[LevelQuorum] + a.Acked[LevelAll] + cl.m.Reads.Done
	if mark == cl.releasedAt {
		return
	}
	cl.releasedAt = mark
	s.pendHeld()
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
		cl.m.Tick()
	}
	if ns-cl.ticked >= int64(cl.cfg.Tick) {
		cl.ticked = ns // the loop stalled: do not make up for it in a burst
	}
	s.dialPeers(ns)
	s.joinTick(ns)
	cl.m.PromoteLearners()
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

// clusterInfo gathers INFO's Cluster figures; nil when not in cluster mode.
func (s *Server) clusterInfo() *resp.InfoCluster {
	cl := s.cl
	if cl == nil {
		return nil
	}
	st := cl.m.Status()
	ls := cl.m.St.Log.Stats()
	c := &resp.InfoCluster{NodeID: cl.cfg.NodeID, Role: st.Role, LeaderID: st.Lead, Term: st.Term,
		Commit: st.Commit, Applied: cl.m.Applied(), SnapshotIndex: cl.m.SnapIndex(), LeaderReady: cl.serving(),
		PeerAuth: cl.peerAuth(), PeerAuthWarning: cl.peerAuthWarning(),
		LogBytes: ls.LogSize, LogBatches: ls.Batches, LogFsyncs: ls.Fsyncs, LogAppends: ls.OpsSaved,
		LastFsyncUS: ls.LastFsyncTime.Microseconds(), LogFailing: ls.LastErr}
	match := map[uint64]uint64{}
	cl.m.Matches(func(id, m uint64) { match[id] = m })
	for id, addr := range cl.m.Members.Addrs {
		p := resp.InfoPeer{ID: id, Addr: addr, Voter: cl.m.Members.IsVoter(id), Match: -1, Link: "down"}
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

// closeCluster stops the raft log's writer (after the engine stopped).
func (s *Server) closeCluster() {
	if s.cl != nil && s.cl.m.St.Log != nil {
		s.cl.stopping = true
		s.cl.m.St.Log.Close()
	}
}

// memberFatal stops the member for err: raft is not driven any more, and Run returns err.
func (s *Server) memberFatal(err error) {
	cl := s.cl
	if cl.stopping {
		return
	}
	cl.stopping = true
	s.persist.fatal.CompareAndSwap(nil, &err)
	s.log.Error().Err(err).Msg("cluster: stopping")
	go func() { _ = s.Stop(context.Background()) }()
}
