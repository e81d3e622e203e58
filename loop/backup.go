package loop

import (
	"strconv"
	"time"

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
// that will not be acknowledged). Only a leader serves it in a cluster (a follower's store
// may lag); one runs at a time, since each holds a copy of the store until it is sent.

// snapshotChunk is how much of the file goes into the output per step, at most (and at
// most a quarter of --max-output, so that a chunk never takes the output past its limit).
const snapshotChunk = 256 << 10

// snapshotCmd runs SNAPSHOT for cs.
func (s *Server) snapshotCmd(cs *conn, args [][]byte, now int64) {
	switch {
	case s.runsWhole(cs):
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR SNAPSHOT is not allowed in transactions or scripts"))
		return
	case s.cl != nil && !s.cl.serving():
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR SNAPSHOT runs on the leader: this member is not it (leader_id "+
			strconv.FormatUint(s.cl.leader, 10)+" in INFO cluster)"))
		return
	case s.snapshotBusy():
		s.sendTo(cs, resp.AppendError(s.scratchFor(cs), "ERR a SNAPSHOT is already in progress"))
		return
	}
	start := time.Now()
	h, body := s.backup(now)
	c := s.contBegin(cs, contSnapshot)
	c.file, c.sent = snapfile.Encode(h, body), 0
	s.backing = cs
	s.log.Info().Str("kind", h.Kind.String()).Uint64("index", h.Index).Uint64("keys", h.Keys).Int("bytes", len(c.file)).
		Dur("took", time.Since(start)).Msg("snapshot taken for a backup")
	s.put(cs, append(strconv.AppendInt(append(s.out(cs), '$'), int64(len(c.file)), 10), '\r', '\n'))
	s.contStep(cs, c, now)
	c.suspend(args)
}

// snapshotBusy reports whether another connection's SNAPSHOT is still being sent.
func (s *Server) snapshotBusy() bool {
	b := s.backing
	return b != nil && !b.closed && b.slock != nil && b.slock.cont != nil && b.slock.cont.active && b.slock.cont.kind == contSnapshot
}

// snapshotStep puts the next chunk of the file in cs's output; after the last, the bulk
// string's end.
func (s *Server) snapshotStep(cs *conn, c *textCont) {
	end := min(c.sent+max(min(snapshotChunk, s.cfg.MaxOutput/4), 1024), len(c.file))
	b := append(s.out(cs), c.file[c.sent:end]...)
	c.sent = end
	if c.sent == len(c.file) {
		b = append(b, '\r', '\n')
		c.active, c.file = false, nil
		s.backing = nil
	}
	s.put(cs, b)
}

// backup encodes the store's persistent state at now as a backup file's header and body:
// a raft snapshot's data (the key-name secret, a cluster's peer table, every key's record).
func (s *Server) backup(now int64) (snapfile.Header, []byte) {
	h := snapfile.Header{Kind: snapfile.Single, Index: s.persist.seq}
	var b []byte
	if cl := s.cl; cl != nil {
		h.Kind, h.Index, h.Term = snapfile.Cluster, cl.applied, cl.term
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
