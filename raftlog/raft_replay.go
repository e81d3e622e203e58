package raftlog

import (
	"github.com/tallyd/tallyd/logfile"

	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// entLoc is where an entry's record is in raft.log.
type entLoc struct {
	off int64
	n   uint32
}

// raftDisk is what the writer knows of the files: the live records of raft.log, so that a
// compaction can carry them over to the next one.
type raftDisk struct {
	f        raftFile
	dir      *os.File
	size     int64  // of raft.log
	hs       []byte // the last hard state record (framed); nil: none
	peers    []byte // the last peer table record (framed); nil: none
	snapIdx  uint64 // index of the newest snapshot, raft.snap's or one received in raft.log
	snapTerm uint64
	fileSnap uint64 // index of raft.snap (0: none)
	snapSize int64
	logStart uint64   // raft.log holds no entry at or below this
	base     uint64   // ents[k] is the entry at index base+1+k
	ents     []entLoc // the live entries of raft.log
}

// add records a live entry at index i (replacing i and everything after it). It reports
// false when i leaves a gap after the last entry.
func (d *raftDisk) add(i uint64, at entLoc) bool {
	if i <= d.base {
		return true // covered by the snapshot
	}
	k := i - d.base - 1
	if k > uint64(len(d.ents)) {
		return false
	}
	d.ents = append(d.ents[:k], at)
	return true
}

func (d *raftDisk) lastIndex() uint64 { return d.base + uint64(len(d.ents)) }

// received records a snapshot at index i, term t found in raft.log: it replaces every
// entry before it.
func (d *raftDisk) received(i, t uint64) {
	d.ents = d.ents[:0]
	if i > d.snapIdx {
		d.snapIdx, d.snapTerm = i, t
	}
	d.base = max(d.base, i)
}

// entSlot holds an entry and the values its fields point to: one allocation for both.
type entSlot struct {
	e     raftpb.Entry
	index uint64
	term  uint64
	typ   raftpb.EntryType
}

// replayRaft reads the raft directory back: raft.snap, then raft.log, whose torn or corrupt
// tail it cuts off (a damaged record with valid records after it is a *CorruptError, as
// scan.go tells, and the file is left as it is).
// Temporary files of an interrupted compaction are removed.
func replayRaft(dir string) (*RaftState, *raftDisk, error) {
	logPath, snapPath := filepath.Join(dir, RaftLogName), filepath.Join(dir, RaftSnapName)
	for _, p := range []string{logPath + raftTmp, snapPath + raftTmp} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
	}
	st, d := &RaftState{}, &raftDisk{}
	if err := loadSnapFile(snapPath, st, d); err != nil {
		return nil, nil, err
	}

	f, err := os.OpenFile(logPath, os.O_RDWR|os.O_CREATE, logfile.FileMode)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil, nil, err
	}
	if len(b) < len(RaftHeader) {
		if string(b) != RaftHeader[:len(b)] {
			return nil, nil, fmt.Errorf("%s is not a tallyd raft log (bad header)", logPath)
		}
		if len(b) > 0 {
			st.TruncatedBytes, st.TailWhy = int64(len(b)), "header cut off"
		}
		if err := logfile.Rehead(f, RaftHeader); err != nil {
			return nil, nil, err
		}
		if err := logfile.SyncDir(dir); err != nil {
			return nil, nil, err
		}
		d.size = int64(len(RaftHeader))
		return st, d, nil
	}
	if string(b[:len(RaftHeader)]) != RaftHeader {
		return nil, nil, fmt.Errorf("%s is not a tallyd raft log (bad header %q)", logPath, b[:len(RaftHeader)])
	}

	keep, why, err := readRaftLog(logPath, b, st, d)
	if err != nil {
		return nil, nil, err
	}
	if keep < len(b) {
		if err := logfile.Cut(f, int64(keep)); err != nil {
			return nil, nil, err
		}
		st.TruncatedBytes, st.TailWhy = int64(len(b)-keep), why
	}
	return st, d, nil
}

// readRaftLog reads the records of raft.log, whose bytes (header included) are b, into st
// and d, which hold what raft.snap had. It returns how much of b to keep: less than all of
// it when the tail is torn or corrupt (why says how). A damaged record with valid records
// after it is a *CorruptError.
func readRaftLog(logPath string, b []byte, st *RaftState, d *raftDisk) (keep int, why string, err error) {
	var (
		hs    *raftpb.HardState
		slab  []entSlot
		ents  []*raftpb.Entry
		off   = len(RaftHeader)
		peers map[uint64]string
	)
	keep = len(b)
	for off < len(b) {
		p, n, err := raftNext(b[off:])
		var snap *raftpb.Snapshot
		if err == nil && p[0] == kindSnapshot {
			snap, err = decodeSnap(p)
		}
		if err != nil {
			w, cerr := logfile.CorruptAt(raftFormat{}, KindRaft, logPath, b[off:], int64(off))
			if cerr != nil {
				return 0, "", cerr
			}
			why, keep = w, off
			break
		}
		rec := b[off : off+n]
		switch p[0] {
		case kindHardState:
			d.hs = rec
			hs = &raftpb.HardState{Term: new(binary.LittleEndian.Uint64(p[1:])),
				Vote: new(binary.LittleEndian.Uint64(p[9:])), Commit: new(binary.LittleEndian.Uint64(p[17:]))}
		case kindPeers:
			d.peers = rec
			peers = decodePeers(p)
		case kindSnapshot:
			i := snap.GetMetadata().GetIndex()
			if i > d.snapIdx {
				st.Snapshot = snap
			}
			d.received(i, snap.GetMetadata().GetTerm())
			ents = ents[:0]
		case kindEntry:
			i := binary.LittleEndian.Uint64(p[2:])
			if i <= d.base {
				d.logStart = 0 // the log still holds entries a snapshot covers
				break
			}
			if !d.add(i, entLoc{int64(off), uint32(n)}) {
				return 0, "", fmt.Errorf("raft log %s: entry %d at offset %d follows entry %d: entries are missing"+
					" (restore the directory from a backup, or remove it and rejoin with --join)", logPath, i, off, d.lastIndex())
			}
			if len(slab) == 0 {
				slab = make([]entSlot, 256)
			}
			s := &slab[0]
			slab = slab[1:]
			s.index, s.term, s.typ = i, binary.LittleEndian.Uint64(p[10:]), raftpb.EntryType(p[18])
			fields := p[1]
			if fields&entIndex != 0 {
				s.e.Index = &s.index
			}
			if fields&entTerm != 0 {
				s.e.Term = &s.term
			}
			if fields&entType != 0 {
				s.e.Type = &s.typ
			}
			if fields&entData != 0 {
				s.e.Data = p[entryHead:len(p):len(p)]
			}
			ents = append(ents[:i-d.base-1], &s.e)
		}
		off += n
	}
	d.size = int64(keep)
	d.hs, d.peers = bytes.Clone(d.hs), bytes.Clone(d.peers) // the writer reuses them
	st.Entries = ents
	st.Peers = peers
	if hs != nil {
		// The commit index is at least the snapshot's (a snapshot saved with a torn hard
		// state after it) and at most the last entry's; lowering it is safe, the leader
		// tells it again.
		c := min(max(hs.GetCommit(), d.snapIdx), d.lastIndex())
		if c != hs.GetCommit() {
			hs.Commit = new(c)
		}
		st.HardState = hs
	}
	return keep, why, nil
}

// loadSnapFile reads raft.snap at path, if there is one, into st and d.
func loadSnapFile(path string, st *RaftState, d *raftDisk) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	snap, err := readSnapFile(path, b)
	if err != nil {
		return err
	}
	st.Snapshot = snap
	d.snapIdx, d.snapTerm = snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	d.fileSnap, d.base, d.logStart, d.snapSize = d.snapIdx, d.snapIdx, d.snapIdx, int64(len(b))
	return nil
}

// readSnapFile checks and decodes raft.snap: its header and exactly one snapshot record.
func readSnapFile(path string, b []byte) (*raftpb.Snapshot, error) {
	bad := func(why string) error {
		return fmt.Errorf("raft snapshot %s is damaged (%s): restore the directory from a backup, or remove it and rejoin with --join",
			path, why)
	}
	if len(b) < len(RaftSnapHeader) || string(b[:len(RaftSnapHeader)]) != RaftSnapHeader {
		return nil, bad("bad header")
	}
	b = b[len(RaftSnapHeader):]
	p, n, err := raftNext(b)
	if err == nil && p[0] != kindSnapshot {
		err = fmt.Errorf("record kind %#x", p[0])
	}
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after the snapshot", len(b)-n)
	}
	if err != nil {
		return nil, bad(err.Error())
	}
	snap, err := decodeSnap(p)
	if err != nil {
		return nil, bad(err.Error())
	}
	return snap, nil
}

// decodeSnap decodes a shaped snapshot payload (Data is a view into p).
func decodeSnap(p []byte) (*raftpb.Snapshot, error) {
	cl := binary.LittleEndian.Uint32(p[17:])
	cs := &raftpb.ConfState{}
	if err := proto.Unmarshal(p[snapHead:snapHead+cl], cs); err != nil {
		return nil, fmt.Errorf("snapshot ConfState: %v", err)
	}
	s := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{ConfState: cs,
		Index: new(binary.LittleEndian.Uint64(p[1:])), Term: new(binary.LittleEndian.Uint64(p[9:]))}}
	if data := p[snapHead+cl:]; len(data) > 0 {
		s.Data = data[:len(data):len(data)]
	}
	return s, nil
}

// decodePeers decodes a shaped peer table payload.
func decodePeers(p []byte) map[uint64]string {
	n := binary.LittleEndian.Uint32(p[1:])
	m := make(map[uint64]string, n)
	q := p[peersHead:]
	for range n {
		al := int(binary.LittleEndian.Uint16(q[8:]))
		m[binary.LittleEndian.Uint64(q)] = string(q[peerHead : peerHead+al])
		q = q[peerHead+al:]
	}
	return m
}
