package loop

import (
	"crypto/sha256"
	"hash"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// SNAPSHOT (tallyctl snapshot save) answers a backup file (snapfile) as one bulk string.
//
// The file is the store as it was when SNAPSHOT began, encoded a slice at a time (issue 30,
// item 7: encoded in one turn, a SNAPSHOT of 1M keys held the loop, and every other client,
// up to 845 ms). store.Locks.BeginSave and store.Keyspace.BeginSave fix the instant (in one
// turn; famSave) and SaveNext encodes saveStep keys per step, the Locks' then the
// keyspace's (its records as runs of aof kind 6), as many steps as the connection's slice of a turn allows (fair.go), other
// connections served between; a key about to change before its step came is encoded first,
// its state then (the copy-on-write Redis's fork gives BGSAVE). So the file holds every
// write acknowledged before SNAPSHOT began and none made after. The file is built in
// blocks of snapshotBlock bytes (no copy of the whole as it grows), counted against
// --max-memory while it exists; its length is known at the end of the encoding, then it is
// sent as a continuation (textcont.go) a chunk at a time while the connection's output has
// room, so what waits in the output stays under half of --max-output however big the
// store, the SHA-256 trailer computed a chunk at a time as it goes. A connection that closes
// drops its backup. The reply goes through put(): on a single node it waits until the log
// holds every change made before it, on a leader until they are committed and a read barrier
// confirmed it still leads (and no write that will not be acknowledged).
//
// Any other cluster member serves it too, as etcd serves a linearizable read on a follower:
// it asks raft for a read index (ReadIndex goes to the leader, which confirms it still leads
// with a heartbeat round and answers its commit index; cluster.Reads tells these reads from
// a leader's barriers), and begins its backup once it has applied up to that index. The
// leader holds such a read until its own log is committed (cluster/check.go), so the index
// covers every write it acknowledged before, at ONE too. No leader, a leader change, or no
// answer within --cluster-timeout answers -CLUSTERDOWN, never a stale file. One SNAPSHOT runs
// at a time.

// snapshotChunk is how much of the file goes into the output per step, at most (and at
// most a quarter of --max-output, so that a chunk never takes the output past its limit).
const snapshotChunk = 256 << 10

// saveStep is how many keys a step of a backup's encoding looks at (~0.3 ms: some 300 ns a
// key to encode; SaveNext), fewer once the states it encoded take 256 KiB (large values or
// holder lists: store's saveStepBytes).
const saveStep = 1024

// snapshotBlock is the size of the file's blocks.
const snapshotBlock = 1 << 20

// A SNAPSHOT's stages (textCont.stage).
const (
	snapWaits    = iota // a member that does not lead: waiting for its read
	snapEncoding        // the store is being encoded
	snapSending         // the file is being sent
)

// backupState is the file of the SNAPSHOT in progress (Server.backing's).
type backupState struct {
	h      snapfile.Header
	blocks [][]byte // the header's room, then the body, in blocks
	size   int64    // bytes in blocks, for the memory budget
	start  time.Time
	sum    hash.Hash // sending: of the file so far
	next   int       // sending: the block next sent (blocks before it are gone), and where in it
	off    int

	longest time.Duration // the longest encoding step, for the log
	fs      famSave       // the two families' saves (keyspace_persist.go)
}

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
		s.snapshotBegin(c, now)
	}
	s.contStep(cs, c, now)
	c.suspend(args)
}

// snapshotBegin starts encoding the store as it is now into the file.
func (s *Server) snapshotBegin(c *textCont, now int64) {
	s.journal(now) // a single node: the log has every change so far, so the backup has them
	bk := &s.bk
	*bk = backupState{start: time.Now(), h: snapfile.Header{Kind: snapfile.Single, Index: s.persist.seq}}
	b := make([]byte, snapfile.HeaderLen, snapshotBlock+4<<10) // the header's room
	if cl := s.cl; cl != nil {
		bk.h.Kind, bk.h.Index, bk.h.Term = snapfile.Cluster, cl.m.Applied(), cl.m.RaftTerm()
		b = cl.m.SnapshotHead(b)
	} else {
		b = append(append(b, cluster.SecretEntry(s.st.keys.Secret())...), cluster.EntRecords)
	}
	bk.blocks = append(bk.blocks, b)
	bk.size = int64(cap(b))
	c.stage = snapEncoding
	s.famSaveBegin(&bk.fs, now, bk.saveRecord)
	s.log.Info().Str("kind", bk.h.Kind.String()).Uint64("index", bk.h.Index).Int("keys", s.st.locks.LoggedKeys()).
		Int("keyspace_keys", s.st.store.Keyspace.Keys()).Msg("snapshot for a backup begun")
}

// saveRecord adds a key's state to the file (store.Locks.BeginSave's emit).
func (bk *backupState) saveRecord(ks *store.KeyState) {
	b := &bk.blocks[len(bk.blocks)-1]
	was := cap(*b)
	*b = aof.AppendState(*b, ks)
	if ks.Ceil == 0 && !ks.Flush {
		bk.h.Keys++
	}
	bk.size += int64(cap(*b) - was)
	if len(*b) >= snapshotBlock {
		bk.blocks = append(bk.blocks, make([]byte, 0, snapshotBlock+4<<10))
		bk.size += snapshotBlock + 4<<10
	}
}

// putKeyspace adds the keyspace records gathered so far to the file, as runs of aof kind 6.
func (bk *backupState) putKeyspace() {
	b := &bk.blocks[len(bk.blocks)-1]
	was := cap(*b)
	*b = bk.fs.ks.flush(*b)
	bk.size += int64(cap(*b) - was)
	if len(*b) >= snapshotBlock {
		bk.blocks = append(bk.blocks, make([]byte, 0, snapshotBlock+4<<10))
		bk.size += snapshotBlock + 4<<10
	}
}

// snapRebuilt is SNAPSHOT's answer when the store is rebuilt while it is encoded.
const snapRebuilt = "ERR SNAPSHOT interrupted: the store was rebuilt from the raft log meanwhile; try again"

// seal ends the encoding: the file's header, in its room, and the sum of what is sent begun.
func (bk *backupState) seal(log *zerolog.Logger) snapfile.Header {
	n := 0
	for _, b := range bk.blocks {
		n += len(b)
	}
	bk.h.Body = uint64(n - snapfile.HeaderLen)
	bk.h.Keys += bk.fs.keys
	snapfile.AppendHeader(bk.blocks[0][:0], &bk.h) // in its room
	bk.sum = sha256.New()
	h := bk.h
	log.Info().Str("kind", h.Kind.String()).Uint64("index", h.Index).Uint64("term", h.Term).Uint64("keys", h.Keys).
		Uint64("bytes", h.Size()).Dur("took_ms", time.Since(bk.start)).Dur("longest_step_ms", bk.longest).
		Msg("snapshot taken for a backup")
	return h
}

// snapshotDrop ends the SNAPSHOT in progress and lets its file go.
func (s *Server) snapshotDrop() {
	s.famSaveEnd(&s.bk.fs)
	clear(s.bk.blocks)
	s.bk = backupState{}
	s.backing = nil
}

// snapshotBusy reports whether another connection's SNAPSHOT is still being sent.
func (s *Server) snapshotBusy() bool {
	b := s.backing
	return b != nil && !b.closed && b.slock != nil && b.slock.cont != nil && b.slock.cont.active && b.slock.cont.kind == contSnapshot
}

// snapshotStep encodes the next keys of the file, or puts its next chunk in cs's output and,
// after the last, the trailer and the bulk string's end. Before the file (a member that does
// not lead): false while it waits for its read.
func (s *Server) snapshotStep(cs *conn, c *textCont, now int64) bool {
	switch c.stage {
	case snapWaits:
		return s.snapshotRead(cs, c, now)
	case snapEncoding:
		if s.famSaveLost(&s.bk.fs) {
			// The store was rebuilt meanwhile (a member that stopped leading, or installed
			// a snapshot): the instant it began is gone.
			s.put(cs, resp.AppendError(s.out(cs), snapRebuilt))
			c.active = false
			s.snapshotDrop()
			return true
		}
		t0 := nanotime()
		done := s.famSaveStep(&s.bk.fs)
		s.bk.putKeyspace() // what this step and the copy-on-write since the last emitted
		s.bk.longest = max(s.bk.longest, time.Duration(nanotime()-t0))
		if done { // the bulk string's length, then the file (snapSending)
			h := s.bk.seal(&s.log)
			c.stage = snapSending
			s.put(cs, append(strconv.AppendUint(append(s.out(cs), '$'), h.Size(), 10), '\r', '\n'))
		}
		return true
	}
	out, done := s.bk.chunk(s.out(cs), max(min(snapshotChunk, s.cfg.MaxOutput/4), 1024))
	if done {
		c.active = false
		s.snapshotDrop()
	}
	s.put(cs, out)
	return true
}

// chunk appends the file's next room bytes to out, and after the last its trailer and the
// bulk string's end (done).
func (bk *backupState) chunk(out []byte, room int) ([]byte, bool) {
	for room > 0 && bk.next < len(bk.blocks) {
		blk := bk.blocks[bk.next]
		p := blk[bk.off:min(bk.off+room, len(blk))]
		bk.sum.Write(p)
		out = append(out, p...)
		room -= len(p)
		if bk.off += len(p); bk.off == len(blk) {
			bk.size -= int64(cap(blk))
			bk.blocks[bk.next] = nil
			bk.next, bk.off = bk.next+1, 0
		}
	}
	if bk.next == len(bk.blocks) {
		return append(bk.sum.Sum(out), '\r', '\n'), true
	}
	return out, false
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
		c.read, c.lead, c.asked = cl.m.AskMemberRead(), cl.m.Leader(), now
		return false
	case snapEncode:
		s.snapshotBegin(c, now)
		return true
	default:
		why := snapDown[st]
		s.m.cl.clusterDown(why, 1)
		s.put(cs, resp.AppendError(s.out(cs), why))
		c.active = false
		s.snapshotDrop()
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
	r := &cl.m.Reads
	lead := cl.m.Leader()
	switch {
	case c.read != 0 && (lead != 0 && lead != c.lead || r.Member != c.read):
		return snapChanged // asked of another leader (or forgotten), as a forwarded command is
	case c.read != 0 && r.Got && cl.m.Applied() >= r.Index:
		return snapEncode
	case lead != 0 && (lead == cl.cfg.NodeID || s.leaderLink() != nil) &&
		(c.read == 0 || !r.Got && now-c.asked >= snapshotRetry*int64(cl.cfg.Tick)):
		return snapAsk // a read is lost with its link (raft does not ask again): asked again
	}
	// Waiting: for a leader, for its answer, or to apply up to it; or the time ran out (a
	// leader lost meanwhile may come back and answer before it does).
	switch {
	case now-c.since < int64(cl.cfg.Timeout):
		return snapWait
	case lead == 0:
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
		s.snapshotDrop()
		return
	}
	c := cs.slock.cont
	if c == nil || !c.active || c.kind != contSnapshot || c.stage != snapWaits {
		return
	}
	if s.snapshotState(c, s.now().UnixNano()) != snapWait {
		s.kick(cs)
	}
}

// The data directory's files, as tallyd restore writes them.
const (
	KeySecretFile = keySecretName // the key-name secret of a single node
	LogFile       = logName       // a single node's append-only log
	RaftDir       = raftDir       // a cluster member's raft log and snapshot
)
