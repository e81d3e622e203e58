package loop

import (
	"strconv"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// SNAPSHOT (tallyctl snapshot save) answers a backup file (snapfile) as one bulk string.
//
// The store is encoded in the turn the command runs, as a raft snapshot is (SnapshotAll):
// one instant, with no copy-on-write to keep, at ~50 ns a key. The file is then sent as a
// continuation (textcont.go) a chunk at a time while the connection's output has room, so
// what waits in the output stays under half of --max-output however big the store. The
// reply goes through put(): on a single node it waits until the log holds every change
// made before it, on a leader until they are committed and a read barrier confirmed it
// still leads, so the file holds every write acknowledged before SNAPSHOT ran (and no write
// that will not be acknowledged).
//
// Any other cluster member serves it too, as etcd serves a linearizable read on a follower:
// it asks raft for a read index (ReadIndex goes to the leader, which confirms it still leads
// with a heartbeat round and answers its commit index; cluster.Reads tells these reads from
// a leader's barriers), and encodes its own store once it has applied up to that index. The
// leader holds such a read until its own log is committed (holdMemberRead), so the index
// covers every write it acknowledged before, at ONE too. No leader, a leader change, or no
// answer within --cluster-timeout answers -CLUSTERDOWN, never a stale file. One SNAPSHOT runs
// at a time, since each holds a copy of the store until it is sent.

// snapshotChunk is how much of the file goes into the output per step, at most (and at
// most a quarter of --max-output, so that a chunk never takes the output past its limit).
const snapshotChunk = 256 << 10

// snapshotCmd runs SNAPSHOT for cs.
func (s *Server) snapshotCmd(cs *conn, args [][]byte, now int64) {
	switch {
	case s.runsWhole(cs):
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR SNAPSHOT is not allowed in transactions or scripts"))
		return
	case s.snapshotBusy():
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR a SNAPSHOT is already in progress"))
		return
	}
	c := s.contBegin(cs, contSnapshot)
	s.backing = cs
	if s.cl != nil && !s.cl.serving() {
		c.since = now // the file waits for a read index (snapshotRead)
	} else {
		s.snapshotEncode(cs, c, now)
	}
	s.contStep(cs, c, now)
	c.suspend(args)
}

// snapshotEncode encodes the store into c's file and puts the bulk string's length in cs's
// output.
func (s *Server) snapshotEncode(cs *conn, c *textCont, now int64) {
	start := time.Now()
	h, body := s.backup(now)
	c.file, c.sent = snapfile.Encode(h, body), 0
	s.log.Info().Str("kind", h.Kind.String()).Uint64("index", h.Index).Uint64("term", h.Term).Uint64("keys", h.Keys).
		Int("bytes", len(c.file)).Dur("took_ms", time.Since(start)).Msg("snapshot taken for a backup")
	s.put(cs, append(strconv.AppendInt(append(s.out(cs), '$'), int64(len(c.file)), 10), '\r', '\n'))
}

// snapshotBusy reports whether another connection's SNAPSHOT is still being sent.
func (s *Server) snapshotBusy() bool {
	b := s.backing
	return b != nil && !b.closed && b.slock != nil && b.slock.cont != nil && b.slock.cont.active && b.slock.cont.kind == contSnapshot
}

// snapshotStep puts the next chunk of the file in cs's output; after the last, the bulk
// string's end. Before the file (a member that does not lead): false while it waits for its
// read.
func (s *Server) snapshotStep(cs *conn, c *textCont, now int64) bool {
	if c.file == nil {
		return s.snapshotRead(cs, c, now)
	}
	end := min(c.sent+max(min(snapshotChunk, s.cfg.MaxOutput/4), 1024), len(c.file))
	b := append(s.out(cs), c.file[c.sent:end]...)
	c.sent = end
	if c.sent == len(c.file) {
		b = append(b, '\r', '\n')
		c.active, c.file = false, nil
		s.backing = nil
	}
	s.put(cs, b)
	return true
}

// snapshotRead moves a member's SNAPSHOT on: it asks for a read index once a leader is
// known, encodes the store once it has applied up to it, or answers -CLUSTERDOWN; false
// means it waits.
func (s *Server) snapshotRead(cs *conn, c *textCont, now int64) bool {
	cl := s.cl
	switch st := s.snapshotState(c, now); st {
	case snapWait:
		return false
	case snapAsk:
		c.read, c.lead, c.asked = cl.reads.AskMember(cl.rn), cl.leader, now
		return false
	case snapEncode:
		s.snapshotEncode(cs, c, now)
		return true
	default:
		why := snapDown[st]
		s.m.cl.clusterDown(why, 1)
		s.put(cs, resp.AppendError(s.out(cs), why))
		c.active, s.backing = false, nil
		return true
	}
}

// snapshotRetry is how many raft ticks a member's read waits for its answer before it is
// asked again.
const snapshotRetry = 5

// What a member's SNAPSHOT waiting for its read does next (snapshotState).
const (
	snapWait   = iota // nothing yet
	snapAsk           // a leader is known: ask it for a read index
	snapEncode        // the store has applied up to the read index
	snapNoLeader
	snapNoQuorum
	snapChanged
)

// snapDown is the error each failed state answers, as other commands do.
var snapDown = [...]string{snapNoLeader: "CLUSTERDOWN no leader", snapNoQuorum: "CLUSTERDOWN no quorum",
	snapChanged: "CLUSTERDOWN leader changed"}

// snapshotState says what a member's SNAPSHOT waiting for its read (c) does next at now.
func (s *Server) snapshotState(c *textCont, now int64) int {
	cl := s.cl
	r := &cl.reads
	switch {
	case c.read != 0 && (cl.leader != 0 && cl.leader != c.lead || r.Member != c.read):
		return snapChanged // asked of another leader (or forgotten), as a forwarded command is
	case c.read != 0 && r.Got && cl.applied >= r.Index:
		return snapEncode
	case cl.leader != 0 && (cl.leader == cl.cfg.NodeID || s.leaderLink() != nil) &&
		(c.read == 0 || !r.Got && now-c.asked >= snapshotRetry*int64(cl.cfg.Tick)):
		return snapAsk // a read is lost with its link (raft does not ask again): asked again
	}
	// Waiting: for a leader, for its answer, or to apply up to it; or the time ran out (a
	// leader lost meanwhile may come back and answer before it does).
	switch {
	case now-c.since < int64(cl.cfg.Timeout):
		return snapWait
	case cl.leader == 0:
		return snapNoLeader
	}
	return snapNoQuorum
}

// snapshotPoll runs at each cluster turn: a SNAPSHOT waiting for its read is served again
// once it can go on (snapshotState).
func (s *Server) snapshotPoll() {
	cs := s.backing
	if cs == nil {
		return
	}
	if cs.closed {
		s.backing = nil
		return
	}
	c := cs.slock.cont
	if c == nil || !c.active || c.kind != contSnapshot || c.file != nil {
		return
	}
	if s.snapshotState(c, s.now().UnixNano()) != snapWait {
		s.kick(cs)
	}
}

// maxHeldReads bounds the other members' reads a leader holds (each member asks one at a time).
const maxHeldReads = 64

// holdMemberRead says whether this leader holds m, another member's read (cluster.MemberRead),
// until its log up to what it has made durable is committed: the read index it answers then
// covers every write it acknowledged, at ONE too (acknowledged once on this node's disk).
func (s *Server) holdMemberRead(m *raftpb.Message) bool {
	cl := s.cl
	if !cl.isLeader() || !cluster.MemberRead(m) {
		return false
	}
	to := cl.st.Stable()
	if cl.commit >= to || len(cl.heldReads) >= maxHeldReads {
		return false
	}
	cl.heldReads = append(cl.heldReads, heldRead{m: m, to: to, term: cl.term})
	return true
}

// stepHeldReads steps the reads holdMemberRead held once the log is committed up to theirs;
// those of an earlier term are dropped (their member times out, or asks the new leader).
func (s *Server) stepHeldReads() {
	cl := s.cl
	if len(cl.heldReads) == 0 {
		return
	}
	kept := cl.heldReads[:0]
	for _, h := range cl.heldReads {
		switch {
		case !cl.isLeader() || h.term != cl.term:
		case cl.commit >= h.to:
			s.stepPeer(h.m)
		default:
			kept = append(kept, h)
		}
	}
	clear(cl.heldReads[len(kept):])
	cl.heldReads = kept
}

// heldRead is another member's read a leader holds (holdMemberRead).
type heldRead struct {
	m    *raftpb.Message
	to   uint64 // the index the log must be committed to
	term uint64 // the term this node led when it was held
}

// backup encodes the store's persistent state at now as a backup file's header and body:
// a raft snapshot's data (the key-name secret, a cluster's peer table, every key's record).
func (s *Server) backup(now int64) (snapfile.Header, []byte) {
	h := snapfile.Header{Kind: snapfile.Single, Index: s.persist.seq}
	var b []byte
	if cl := s.cl; cl != nil {
		h.Kind, h.Index, h.Term = snapfile.Cluster, cl.applied, cl.rn.BasicStatus().GetTerm()
		b = raftlog.AppendPeers(cl.secret.SnapshotHead(), cl.members.Addrs)
	} else {
		b = append(cluster.SecretEntry(s.st.keys.Secret()), cluster.EntRecords)
	}
	s.st.locks.SnapshotAll(now, func(ks *store.KeyState) {
		b = aof.AppendState(b, ks)
		if ks.Ceil == 0 && !ks.Flush {
			h.Keys++
		}
	})
	return h, b
}

// The data directory's files, as tallyd restore writes them.
const (
	KeySecretFile = keySecretName // the key-name secret of a single node
	LogFile       = logName       // a single node's append-only log
	RaftDir       = raftDir       // a cluster member's raft log and snapshot
)
