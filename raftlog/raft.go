package raftlog

import (
	"github.com/tallyd/tallyd/logfile"

	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The raft log replaces tallyd.aof in cluster mode. It lives in a directory of two files:
//
//	raft.snap  RaftSnapHeader, then one snapshot record: the last local compaction
//	raft.log   RaftHeader, then records, appended by the writer
//
// Records are framed as the append-only log's (u32 n, u32 CRC-32C of the payload, n
// bytes of payload, little-endian); the payload's first byte is its kind:
//
//	hard state  0x21 | u64 term | u64 vote | u64 commit
//	entry       0x22 | u8 fields present (1 index, 2 term, 4 type, 8 data) | u64 index
//	            | u64 term | u8 type | data
//	snapshot    0x23 | u64 index | u64 term | u32 n | n bytes of ConfState (protobuf) | data
//	peers       0x24 | u32 count | count × (u64 ID | u16 n | n bytes of host:port)
//
// Replay reads them in order: the last hard state and peer table win; an entry at index i
// replaces i and everything after it; a snapshot record (one received from the leader)
// replaces every entry read before it; entries at or below the snapshot's index are dropped.
// Compaction writes raft.snap and a new raft.log through temporary files renamed into place,
// so a crash at any point leaves a pair that replays to the same state (a new raft.snap with
// the old raft.log only has entries it drops).

// RaftHeader starts a raft log file; RaftSnapHeader the snapshot file.
const (
	RaftHeader     = "TALLYRFT\x00\x00\x00\x01"
	RaftSnapHeader = "TALLYRSN\x00\x00\x00\x01"
)

// Files in the raft directory.
const (
	RaftLogName  = "raft.log"
	RaftSnapName = "raft.snap"
	raftTmp      = ".tmp" // suffix of the file a compaction writes before renaming it
)

const (
	kindHardState = 0x21
	kindEntry     = 0x22
	kindSnapshot  = 0x23
	kindPeers     = 0x24

	// KindPeers is the kind of a peer table record, which a snapshot's data carries too.
	KindPeers = kindPeers

	hsPayload    = 1 + 3*8
	entryHead    = 1 + 1 + 8 + 8 + 1
	snapHead     = 1 + 8 + 8 + 4
	peersHead    = 1 + 4
	peerHead     = 8 + 2
	entIndex     = 1
	entTerm      = 2
	entType      = 4
	entData      = 8
	entAllFields = entIndex | entTerm | entType | entData

	// MaxRaftRecord is the largest raft record payload (a snapshot is one record).
	MaxRaftRecord = 1 << 30
)

// RaftState is what OpenRaft read back from disk.
type RaftState struct {
	HardState *raftpb.HardState // nil: none saved
	Snapshot  *raftpb.Snapshot  // nil: none (else Data = the state records, Metadata = index/term/ConfState)
	// Entries follow the snapshot (the first is at its index + 1, or 1 without one), in
	// order, reconciled. Their Data are views into one buffer holding the file.
	Entries []*raftpb.Entry
	Peers   map[uint64]string // the peer address table last saved; nil: none

	// TruncatedBytes is a torn or corrupt tail cut off the log (0: none); TailWhy says why.
	TruncatedBytes int64
	TailWhy        string
}

// RaftProgress is what the writer did in one batch.
type RaftProgress struct {
	Synced    uint64        // every Save, SavePeers and Compact numbered up to this is on disk
	Err       error         // a write, fsync or compaction failed in this batch (it is retried)
	Bytes     int64         // written to the log in this batch
	Ops       int           // calls (Save, SavePeers, Compact) made durable by this batch
	Fsyncs    int           // fsyncs of the log in this batch (1 without a compaction)
	FsyncTime time.Duration // time spent in them
	Compacted bool          // a compaction was done in this batch
}

// RaftStats is what INFO shows of the raft log.
type RaftStats struct {
	LogSize, SnapSize      int64         // bytes of raft.log and raft.snap
	Entries                int           // entries in raft.log after the snapshot
	FirstIndex, LastIndex  uint64        // of those entries (FirstIndex 0: none)
	SnapshotIndex          uint64        // of the newest snapshot on disk
	Pending                int64         // bytes queued, not yet written
	Batches, Fsyncs        int64         // rounds of the writer, fsyncs of every file
	LastSync               time.Time     // the last fsync that succeeded
	LastFsyncTime          time.Duration // how long the last fsync took
	Compactions            int64         // done since the start
	LastCompact            time.Time     // zero: none
	LastCompactTime        time.Duration // how long it took
	LastErr                string        // the last error while writes fail; "" once one succeeds
	SyncedSeq, QueuedSeq   uint64        // the last call on disk, the last call queued
	TruncatedAtStart       int64         // bytes of a torn tail cut off by OpenRaft
	BytesWritten, OpsSaved int64         // to raft.log by batches, and calls made durable
}

// raftFile is what the raft writer needs of a file: an *os.File, or a test's stand-in that
// fails on cue.
type raftFile interface {
	WriteAt(b []byte, off int64) (int, error)
	ReadAt(b []byte, off int64) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
}

// openRaftFile opens the raft log, its snapshot and their temporary files (tests replace it).
var openRaftFile = func(name string, flag int, perm os.FileMode) (raftFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// What a queued operation is.
const (
	opRecs    = iota // whole records in the buffer
	opSnap           // a snapshot record: its head in the buffer, data beside
	opCompact        // a compaction: the snapshot record's head in the buffer, data beside
)

type raftOp struct {
	kind uint8
	end  int    // where its bytes end in the buffer (they start where the previous op's end)
	data []byte // a snapshot's data
	seq  uint64 // the last call it covers
}

// RaftLog is the durable raft log: the event loop queues hard states, entries, snapshots
// and peer tables without touching the disk, and one writer goroutine writes what is
// queued with one write and one fsync (a group commit), then reports with done.
type RaftLog struct {
	dir  string
	done func(RaftProgress)

	mu      sync.Mutex
	buf     []byte
	ops     []raftOp
	seq     uint64
	last    uint64 // index of the last entry queued (or of a snapshot after it)
	closing bool

	wake    chan struct{}
	stopped chan struct{}

	fatal atomic.Pointer[string] // a call that can never be written (a record too large)

	step *raftStepper // nil, but in a test that steps the writer itself (raft_step.go)

	// Published for Stats and Failing.
	logSize, snapSize      atomic.Int64
	entries                atomic.Int64
	firstIndex, lastIndex  atomic.Uint64
	snapIndex              atomic.Uint64
	batches, fsyncs        atomic.Int64
	lastSync, lastFsyncDur atomic.Int64
	compactions            atomic.Int64
	lastCompact, compactNs atomic.Int64
	synced                 atomic.Uint64
	bytesWritten, opsSaved atomic.Int64
	truncated              int64
	lastErr                atomic.Pointer[string]
	fail                   atomic.Pointer[string] // why the last attempt failed (Redis-style); nil once one succeeds
	fsyncHist              logfile.FsyncHist      // fsyncs, and batches that failed (metrics)
}

// FsyncHist is the histogram of the log's fsyncs and the count of its failed batches; safe
// from any goroutine.
func (l *RaftLog) FsyncHist() *logfile.FsyncHist { return &l.fsyncHist }

// OpenRaft opens the raft log in dir (creating the directory and the files), reads it
// back, cutting off a torn tail, and starts its writer. done runs on the writer goroutine
// after each batch (the loop hands it over with EventLoop.Execute); it must not call Close.
//
// To restart raft from the state: MemoryStorage.ApplySnapshot(st.Snapshot) if there is one,
// SetHardState(st.HardState) if there is one, Append(st.Entries).
func OpenRaft(dir string, done func(RaftProgress)) (*RaftLog, *RaftState, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
		if err := logfile.SyncDir(filepath.Dir(dir)); err != nil { // the new directory stays
			return nil, nil, err
		}
	}
	st, d, err := replayRaft(dir)
	if err != nil {
		return nil, nil, err
	}
	f, err := openRaftFile(filepath.Join(dir, RaftLogName), os.O_RDWR, logfile.FileMode)
	if err != nil {
		return nil, nil, err
	}
	dirf, err := os.Open(dir)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	d.f, d.dir = f, dirf
	l := &RaftLog{dir: dir, done: done, wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		truncated: st.TruncatedBytes}
	l.lastSync.Store(time.Now().UnixNano())
	l.last = d.lastIndex()
	l.publish(d)
	l.stepIfAsked()
	go l.run(d)
	return l, st, nil
}

// Save queues a hard state (skipped when nil or all zero), entries (an entry at index i
// replaces i and everything after it; one past the last is a gap, which breaks the log:
// Failing says so and nothing more is written) and a snapshot received from the leader (skipped when
// nil or at index 0; it replaces every entry before it). It copies what it keeps, except the
// snapshot's Data, which must not be modified afterwards. It returns the call's sequence
// number: RaftProgress.Synced >= it means all of it is on disk.
func (l *RaftLog) Save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot) uint64 {
	hasHS := hs != nil && hs.GetTerm()|hs.GetVote()|hs.GetCommit() != 0
	hasSnap := snap != nil && snap.GetMetadata().GetIndex() != 0
	if !hasHS && len(ents) == 0 && !hasSnap {
		l.mu.Lock()
		s := l.seq
		l.mu.Unlock()
		return s
	}
	var conf []byte
	if hasSnap {
		conf = marshalConf(snap)
	}
	l.mu.Lock()
	l.seq++
	if hasSnap {
		l.queueSnap(opSnap, snap, conf)
		l.last = snap.GetMetadata().GetIndex()
	}
	for _, e := range ents {
		i := e.GetIndex()
		if i == 0 || i > l.last+1 {
			l.broken(fmt.Sprintf("entry %d queued after entry %d: a gap", i, l.last))
			continue
		}
		if len(e.GetData()) > MaxRaftRecord-entryHead {
			l.broken(fmt.Sprintf("entry %d has %d bytes, more than a record holds (%d)", i, len(e.GetData()), MaxRaftRecord))
			continue
		}
		l.last = i
		l.buf = appendEntry(l.buf, e)
	}
	if hasHS {
		l.buf = appendHardState(l.buf, hs.GetTerm(), hs.GetVote(), hs.GetCommit())
	}
	l.endRecs()
	s := l.seq
	l.mu.Unlock()
	l.signal()
	return s
}

// SavePeers queues the peer address table (ID -> host:port), durable like Save.
func (l *RaftLog) SavePeers(p map[uint64]string) uint64 {
	ids := make([]uint64, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	l.mu.Lock()
	l.seq++
	l.buf = appendPeers(l.buf, ids, p)
	l.endRecs()
	s := l.seq
	l.mu.Unlock()
	l.signal()
	return s
}

// Compact replaces what is on disk up to snap's index by snap, a snapshot the loop took
// of its store: the writer writes raft.snap (temporary file, fsync, rename, fsync of the
// directory), then a new raft.log with the entries after the index, the hard state and the
// peer table. It runs on the writer goroutine, in order with the other calls; snap.Data is
// kept, not copied, and must not be modified afterwards. A snapshot older than the log's
// (one received from the leader since) is ignored.
func (l *RaftLog) Compact(snap *raftpb.Snapshot) uint64 {
	conf := marshalConf(snap)
	l.mu.Lock()
	l.seq++
	l.queueSnap(opCompact, snap, conf)
	l.last = max(l.last, snap.GetMetadata().GetIndex())
	s := l.seq
	l.mu.Unlock()
	l.signal()
	return s
}

// queueSnap queues a snapshot op; l.mu is held.
func (l *RaftLog) queueSnap(kind uint8, snap *raftpb.Snapshot, conf []byte) {
	md := snap.GetMetadata()
	data := snap.GetData()
	if snapHead+len(conf)+len(data) > MaxRaftRecord {
		l.broken(fmt.Sprintf("snapshot at %d has %d bytes, more than a record holds (%d)", md.GetIndex(), len(data), MaxRaftRecord))
		return
	}
	l.buf = appendSnapHead(l.buf, md.GetIndex(), md.GetTerm(), conf, len(data))
	l.ops = append(l.ops, raftOp{kind: kind, end: len(l.buf), data: data, seq: l.seq})
}

// broken records a call that can never be written as asked (a caller's bug): the log
// writes nothing more from then on and reports why with every batch.
func (l *RaftLog) broken(why string) {
	msg := fmt.Sprintf("raft log %s: %s", l.dir, why)
	l.fatal.CompareAndSwap(nil, &msg)
}

// endRecs closes the records appended since the last op into an opRecs op; l.mu is held.
func (l *RaftLog) endRecs() {
	n := len(l.ops)
	prevEnd := 0
	if n > 0 {
		prevEnd = l.ops[n-1].end
	}
	if len(l.buf) == prevEnd {
		if n > 0 {
			l.ops[n-1].seq = l.seq
		}
		return
	}
	if n > 0 && l.ops[n-1].kind == opRecs {
		l.ops[n-1].end, l.ops[n-1].seq = len(l.buf), l.seq
		return
	}
	l.ops = append(l.ops, raftOp{kind: opRecs, end: len(l.buf), seq: l.seq})
}

func (l *RaftLog) signal() {
	if l.step != nil && l.step.on.Load() {
		return // the test wakes the writer (Step)
	}
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Failing returns why the log cannot be written now, as Redis words it ("No space left on
// device"), or "" when the last write and fsync succeeded. Safe from any goroutine.
func (l *RaftLog) Failing() string {
	if e := l.fatal.Load(); e != nil {
		return *e
	}
	if e := l.fail.Load(); e != nil {
		return *e
	}
	return ""
}

// Stats returns the log's counters; safe from any goroutine.
func (l *RaftLog) Stats() RaftStats {
	l.mu.Lock()
	pending, queued := len(l.buf), l.seq
	for _, op := range l.ops {
		pending += len(op.data)
	}
	l.mu.Unlock()
	s := RaftStats{LogSize: l.logSize.Load(), SnapSize: l.snapSize.Load(), Entries: int(l.entries.Load()),
		FirstIndex: l.firstIndex.Load(), LastIndex: l.lastIndex.Load(), SnapshotIndex: l.snapIndex.Load(),
		Pending: int64(pending), Batches: l.batches.Load(), Fsyncs: l.fsyncs.Load(),
		LastSync: time.Unix(0, l.lastSync.Load()), LastFsyncTime: time.Duration(l.lastFsyncDur.Load()),
		Compactions: l.compactions.Load(), LastCompactTime: time.Duration(l.compactNs.Load()),
		SyncedSeq: l.synced.Load(), QueuedSeq: queued, TruncatedAtStart: l.truncated,
		BytesWritten: l.bytesWritten.Load(), OpsSaved: l.opsSaved.Load()}
	if t := l.lastCompact.Load(); t != 0 {
		s.LastCompact = time.Unix(0, t)
	}
	if e := l.lastErr.Load(); e != nil && l.Failing() != "" {
		s.LastErr = *e
	}
	return s
}

// Close writes what is queued, fsyncs it and stops the writer (a log that cannot be
// written is given up after one more try).
func (l *RaftLog) Close() {
	l.Unstepped() // a stepped log's writer closes by itself too
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	l.signal()
	<-l.stopped
}

// marshalConf encodes snap's ConfState.
func marshalConf(snap *raftpb.Snapshot) []byte {
	cs := snap.GetMetadata().GetConfState()
	if cs == nil {
		return nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(cs)
	if err != nil {
		panic(fmt.Sprintf("raft log: marshal ConfState: %v", err)) // a ConfState always marshals
	}
	return b
}

func appendHardState(dst []byte, term, vote, commit uint64) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, logfile.RecHead)...)
	dst = append(dst, kindHardState)
	dst = binary.LittleEndian.AppendUint64(dst, term)
	dst = binary.LittleEndian.AppendUint64(dst, vote)
	dst = binary.LittleEndian.AppendUint64(dst, commit)
	return logfile.Seal(dst, start)
}

func appendEntry(dst []byte, e *raftpb.Entry) []byte {
	start := len(dst)
	var fields byte
	if e.Index != nil {
		fields |= entIndex
	}
	if e.Term != nil {
		fields |= entTerm
	}
	if e.Type != nil {
		fields |= entType
	}
	if e.Data != nil {
		fields |= entData
	}
	dst = append(dst, make([]byte, logfile.RecHead)...)
	dst = append(dst, kindEntry, fields)
	dst = binary.LittleEndian.AppendUint64(dst, e.GetIndex())
	dst = binary.LittleEndian.AppendUint64(dst, e.GetTerm())
	dst = append(dst, byte(e.GetType()))
	dst = append(dst, e.GetData()...)
	return logfile.Seal(dst, start)
}

// appendSnapHead appends a snapshot record up to its data, which is n bytes long and
// written beside it; the checksum is left to finishSnap.
func appendSnapHead(dst []byte, index, term uint64, conf []byte, n int) []byte {
	size := snapHead + len(conf) + n
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = append(dst, kindSnapshot)
	dst = binary.LittleEndian.AppendUint64(dst, index)
	dst = binary.LittleEndian.AppendUint64(dst, term)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(conf)))
	return append(dst, conf...)
}

// finishSnap writes the checksum into the snapshot record head h, whose data is data.
func finishSnap(h, data []byte) {
	c := crc32.Update(crc32.Checksum(h[logfile.RecHead:], logfile.Castagnoli), logfile.Castagnoli, data)
	binary.LittleEndian.PutUint32(h[4:], c)
}

func appendPeers(dst []byte, ids []uint64, p map[uint64]string) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, logfile.RecHead)...)
	dst = append(dst, kindPeers)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ids)))
	for _, id := range ids {
		a := p[id]
		if len(a) > 0xFFFF {
			a = a[:0xFFFF]
		}
		dst = binary.LittleEndian.AppendUint64(dst, id)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(a)))
		dst = append(dst, a...)
	}
	return logfile.Seal(dst, start)
}

// errRaftShort is a record cut off by the end of the bytes.
var errRaftShort = errors.New("record cut off")

// raftNext checks the record at the start of b (its length, shape, then checksum) and
// returns its payload and total length. errRaftShort means b ends inside it; other errors
// mean it is corrupt.
func raftNext(b []byte) (payload []byte, n int, err error) {
	if len(b) < logfile.RecHead {
		return nil, 0, errRaftShort
	}
	size := binary.LittleEndian.Uint32(b)
	if size < 1 || size > MaxRaftRecord {
		return nil, 0, fmt.Errorf("record length %d out of range [1, %d]", size, MaxRaftRecord)
	}
	if uint64(len(b)) < logfile.RecHead+uint64(size) {
		return nil, 0, errRaftShort
	}
	payload = b[logfile.RecHead : logfile.RecHead+size]
	if err := raftShaped(payload); err != nil {
		return nil, 0, err
	}
	if crc32.Checksum(payload, logfile.Castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errors.New("checksum mismatch")
	}
	return payload, logfile.RecHead + int(size), nil
}

// raftShaped reports whether p, a payload, has a known kind and lengths that agree with it.
func raftShaped(p []byte) error {
	if len(p) == 0 {
		return errors.New("empty record")
	}
	switch p[0] {
	case kindHardState:
		if len(p) != hsPayload {
			return fmt.Errorf("hard state of %d bytes, want %d", len(p), hsPayload)
		}
	case kindEntry:
		if len(p) < entryHead {
			return fmt.Errorf("entry of %d bytes, want at least %d", len(p), entryHead)
		}
		if p[1]&^entAllFields != 0 || p[1]&entData == 0 && len(p) > entryHead {
			return fmt.Errorf("entry fields %#x do not match its length", p[1])
		}
	case kindSnapshot:
		if len(p) < snapHead {
			return fmt.Errorf("snapshot of %d bytes, want at least %d", len(p), snapHead)
		}
		if n := binary.LittleEndian.Uint32(p[17:]); uint64(n) > uint64(len(p)-snapHead) {
			return fmt.Errorf("snapshot ConfState of %d bytes overruns the record", n)
		}
	case kindPeers:
		if len(p) < peersHead {
			return fmt.Errorf("peer table of %d bytes, want at least %d", len(p), peersHead)
		}
		n := binary.LittleEndian.Uint32(p[1:])
		q := p[peersHead:]
		for range n {
			if len(q) < peerHead {
				return errors.New("peer table cut short")
			}
			al := int(binary.LittleEndian.Uint16(q[8:]))
			if len(q) < peerHead+al {
				return errors.New("peer address overruns the record")
			}
			q = q[peerHead+al:]
		}
		if len(q) != 0 {
			return fmt.Errorf("%d bytes after the peer table", len(q))
		}
	default:
		return fmt.Errorf("unknown raft record kind %#x", p[0])
	}
	return nil
}
