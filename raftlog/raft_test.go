package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tallyd/tallyd/logfile"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func rent(i, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryNormal)}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func rents(from, to, term uint64, tag string) []*raftpb.Entry {
	var es []*raftpb.Entry
	for i := from; i <= to; i++ {
		es = append(es, rent(i, term, fmt.Sprintf("%s-%d", tag, i)))
	}
	return es
}

func rhs(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func rsnap(i, term uint64, data string, voters ...uint64) *raftpb.Snapshot {
	return &raftpb.Snapshot{Data: []byte(data), Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(term),
		ConfState: &raftpb.ConfState{Voters: voters}}}
}

// progress collects what a raft log's writer reports.
type progress struct {
	mu  sync.Mutex
	all []RaftProgress
}

func (p *progress) done(r RaftProgress) {
	p.mu.Lock()
	p.all = append(p.all, r)
	p.mu.Unlock()
}

func (p *progress) last() RaftProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.all) == 0 {
		return RaftProgress{}
	}
	return p.all[len(p.all)-1]
}

// until waits for a report that f accepts and returns it.
func (p *progress) until(t *testing.T, what string, f func(RaftProgress) bool) RaftProgress {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	seen := 0
	for time.Now().Before(deadline) {
		p.mu.Lock()
		for ; seen < len(p.all); seen++ {
			if r := p.all[seen]; f(r) {
				p.mu.Unlock()
				return r
			}
		}
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no report %s in 10s; last %+v", what, p.last())
	return RaftProgress{}
}

func (p *progress) synced(t *testing.T, seq uint64) RaftProgress {
	t.Helper()
	return p.until(t, fmt.Sprintf("synced to %d", seq), func(r RaftProgress) bool { return r.Synced >= seq })
}

func openRaft(t *testing.T, dir string) (*RaftLog, *RaftState, *progress) {
	t.Helper()
	p := &progress{}
	l, st, err := OpenRaft(dir, p.done)
	if err != nil {
		t.Fatal(err)
	}
	return l, st, p
}

// reopen reads dir back (starting and stopping a writer).
func reopen(t *testing.T, dir string) *RaftState {
	t.Helper()
	l, st, _ := openRaft(t, dir)
	l.Close()
	return st
}

// describe prints a state for comparisons: everything replay returns, in order.
func describe(st *RaftState) string {
	var b strings.Builder
	if st.HardState != nil {
		fmt.Fprintf(&b, "hs %d/%d/%d\n", st.HardState.GetTerm(), st.HardState.GetVote(), st.HardState.GetCommit())
	}
	if st.Snapshot != nil {
		md := st.Snapshot.GetMetadata()
		fmt.Fprintf(&b, "snap %d/%d %v %q\n", md.GetIndex(), md.GetTerm(), md.GetConfState().GetVoters(), st.Snapshot.GetData())
	}
	for _, e := range st.Entries {
		fmt.Fprintf(&b, "e %d/%d/%d %q\n", e.GetIndex(), e.GetTerm(), e.GetType(), e.GetData())
	}
	if st.Peers != nil {
		fmt.Fprintf(&b, "peers %v\n", st.Peers)
	}
	return b.String()
}

func TestRaftRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "raft") // created, readable by tallyd's user only
	l, st, p := openRaft(t, dir)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the raft directory: %v %v", fi.Mode(), err)
	}
	if st.HardState != nil || st.Snapshot != nil || len(st.Entries) != 0 || st.Peers != nil {
		t.Fatalf("a new log reads back %s", describe(st))
	}
	if s := l.Save(nil, nil, nil); s != 0 {
		t.Fatalf("an empty Save is numbered %d, want 0", s)
	}
	ents := rents(1, 10, 1, "a")
	cc := &raftpb.Entry{Index: new(uint64(11)), Term: new(uint64(2)), Type: new(raftpb.EntryConfChange), Data: []byte{1, 2, 3}}
	empty := &raftpb.Entry{Index: new(uint64(12)), Term: new(uint64(2))} // a leader's empty entry: no type, no data
	zero := &raftpb.Entry{Index: new(uint64(13)), Term: new(uint64(2)), Data: []byte{}}
	ents = append(ents, cc, empty, zero)
	s1 := l.Save(rhs(2, 1, 9), ents, nil)
	s2 := l.SavePeers(map[uint64]string{1: "10.0.0.1:7000", 2: "10.0.0.2:7000", 30: "[::1]:7003"})
	s3 := l.Save(rhs(2, 1, 11), nil, nil)
	if !(s1 == 1 && s2 == 2 && s3 == 3) {
		t.Fatalf("calls numbered %d %d %d, want 1 2 3", s1, s2, s3)
	}
	if e := l.Save(&raftpb.HardState{}, nil, nil); e != 3 {
		t.Fatalf("an empty hard state is numbered %d, want 3 (nothing queued)", e)
	}
	p.synced(t, s3)
	l.Close()
	if r := p.last(); r.Err != nil || r.Synced != 3 {
		t.Fatalf("last report %+v", r)
	}

	st = reopen(t, dir)
	if len(st.Entries) != len(ents) {
		t.Fatalf("%d entries read back, want %d", len(st.Entries), len(ents))
	}
	for i := range ents {
		if !proto.Equal(st.Entries[i], ents[i]) {
			t.Fatalf("entry %d reads back as %v, want %v", i, st.Entries[i], ents[i])
		}
	}
	if !proto.Equal(st.HardState, rhs(2, 1, 11)) {
		t.Fatalf("hard state %v", st.HardState)
	}
	if want := map[uint64]string{1: "10.0.0.1:7000", 2: "10.0.0.2:7000", 30: "[::1]:7003"}; !maps.Equal(st.Peers, want) {
		t.Fatalf("peers %v, want %v", st.Peers, want)
	}
	if st.TruncatedBytes != 0 || st.Snapshot != nil {
		t.Fatalf("read back %s, truncated %d", describe(st), st.TruncatedBytes)
	}
}

func TestRaftOverwriteSuffix(t *testing.T) {
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	l.Save(rhs(1, 1, 3), rents(1, 10, 1, "old"), nil)
	l.Save(rhs(2, 2, 4), rents(6, 8, 2, "new"), nil) // a new leader replaces 6 and after
	p.synced(t, l.Save(nil, rents(9, 9, 2, "new"), nil))
	l.Close()
	st := reopen(t, dir)
	want := append(rents(1, 5, 1, "old"), rents(6, 9, 2, "new")...)
	var wantS RaftState
	wantS.Entries, wantS.HardState = want, rhs(2, 2, 4)
	if describe(st) != describe(&wantS) {
		t.Fatalf("read back\n%s\nwant\n%s", describe(st), describe(&wantS))
	}

	// The writer's view follows the overwrite too: a compaction keeps 8 and 9 of term 2.
	l, _, p = openRaft(t, dir)
	l.Save(rhs(3, 3, 9), rents(9, 9, 3, "third"), nil) // and 9 once more, after the restart
	p.synced(t, l.Compact(rsnap(7, 2, "state-7", 1, 2, 3)))
	l.Close()
	st = reopen(t, dir)
	wantS = RaftState{HardState: rhs(3, 3, 9), Snapshot: rsnap(7, 2, "state-7", 1, 2, 3),
		Entries: append(rents(8, 8, 2, "new"), rents(9, 9, 3, "third")...)}
	if describe(st) != describe(&wantS) {
		t.Fatalf("after compaction read back\n%s\nwant\n%s", describe(st), describe(&wantS))
	}
}

// writeRaftLog makes each call and waits for it to be written, and returns the file's
// bytes and where each call's records ended.
func writeRaftLog(t *testing.T, dir string, calls ...func(l *RaftLog) uint64) ([]byte, []int64) {
	t.Helper()
	l, _, p := openRaft(t, dir)
	var ends []int64
	for _, c := range calls {
		p.synced(t, c(l))
		ends = append(ends, l.Stats().LogSize)
	}
	l.Close()
	b, err := os.ReadFile(filepath.Join(dir, RaftLogName))
	if err != nil {
		t.Fatal(err)
	}
	return b, ends
}

func TestRaftTornTail(t *testing.T) {
	src := t.TempDir()
	e4 := rents(4, 4, 1, strings.Repeat("x", 200))
	b, ends := writeRaftLog(t, src,
		func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, 0), rents(1, 3, 1, "a"), nil) },
		func(l *RaftLog) uint64 { return l.SavePeers(map[uint64]string{1: "a:1"}) },
		func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, 3), e4, nil) })
	if ends[2] != int64(len(b)) {
		t.Fatalf("stats say %d bytes, the file has %d", ends[2], len(b))
	}
	whole := reopenCopy(t, b)
	// Every cut inside the last batch (an entry and a hard state) loses just that batch; a
	// cut between its two records keeps the entry.
	entryEnd := int(ends[1]) + len(appendEntry(nil, e4[0]))
	for cut := int(ends[1]); cut < len(b); cut++ {
		st := reopenCopy(t, b[:cut])
		keep := ends[1]
		if cut >= entryEnd {
			keep = int64(entryEnd)
		}
		if st.TruncatedBytes != int64(cut)-keep || (keep < int64(cut)) != (st.TailWhy != "") {
			t.Fatalf("cut at %d: truncated %d (%q), want %d", cut, st.TruncatedBytes, st.TailWhy, int64(cut)-keep)
		}
		want := 3
		if cut >= entryEnd {
			want = 4
		}
		if len(st.Entries) != want || st.HardState.GetCommit() != 0 || st.Peers[1] != "a:1" {
			t.Fatalf("cut at %d: read back\n%s", cut, describe(st))
		}
	}
	if len(whole.Entries) != 4 || whole.HardState.GetCommit() != 3 {
		t.Fatalf("whole log read back\n%s", describe(whole))
	}
	// A cut inside the header leaves an empty log.
	for cut := range len(RaftHeader) {
		if st := reopenCopy(t, b[:cut]); len(st.Entries) != 0 || st.TruncatedBytes != int64(cut) {
			t.Fatalf("cut at %d in the header: %d entries, %d truncated", cut, len(st.Entries), st.TruncatedBytes)
		}
	}
}

// reopenCopy replays a raft.log holding b in a fresh directory, checks the file left is b
// without its truncated tail, and that replaying it again reads the same.
func reopenCopy(t *testing.T, b []byte) *RaftState {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RaftLogName), b, logfile.FileMode); err != nil {
		t.Fatal(err)
	}
	st := reopen(t, dir)
	left, _ := os.ReadFile(filepath.Join(dir, RaftLogName))
	want := []byte(RaftHeader)
	keep := len(b) - int(st.TruncatedBytes)
	if keep > len(RaftHeader) {
		want = b[:keep]
	}
	if !bytes.Equal(left, want) {
		t.Fatalf("%d bytes replayed: the file left (%d bytes) is not the first %d", len(b), len(left), keep)
	}
	again := reopen(t, dir)
	if describe(again) != describe(st) || again.TruncatedBytes != 0 {
		t.Fatalf("a second replay reads\n%s\nthe first\n%s", describe(again), describe(st))
	}
	return st
}

func TestRaftCorruptMiddle(t *testing.T) {
	src := t.TempDir()
	b, ends := writeRaftLog(t, src,
		func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, 0), rents(1, 3, 1, "a"), nil) },
		func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, 3), rents(4, 6, 1, "b"), nil) })
	for _, at := range []int{len(RaftHeader), len(RaftHeader) + 3, len(RaftHeader) + logfile.RecHead + 5, int(ends[0]) - 1} {
		c := bytes.Clone(b)
		c[at] ^= 0x40
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, RaftLogName), c, logfile.FileMode); err != nil {
			t.Fatal(err)
		}
		_, _, err := OpenRaft(dir, func(RaftProgress) {})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("byte %d damaged: %v, want a CorruptError", at, err)
		}
		if left, _ := os.ReadFile(filepath.Join(dir, RaftLogName)); !bytes.Equal(left, c) {
			t.Fatalf("byte %d damaged: the file was changed", at)
		}
	}
	// The same damage in the last record is a corrupt tail: cut off.
	c := bytes.Clone(b)
	c[len(c)-3] ^= 0x40
	st := reopenCopy(t, c)
	if st.TruncatedBytes != logfile.RecHead+hsPayload || len(st.Entries) != 6 || st.HardState.GetCommit() != 0 {
		t.Fatalf("a damaged last record: truncated %d, read\n%s", st.TruncatedBytes, describe(st))
	}
	// Not a raft log at all: an append-only log (aof.Header).
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, RaftLogName), []byte("TALLYAOF\x00\x00\x00\x01more"), logfile.FileMode)
	if _, _, err := OpenRaft(dir, func(RaftProgress) {}); err == nil || !strings.Contains(err.Error(), "not a tallyd raft log") {
		t.Fatalf("an append-only log opened as a raft log: %v", err)
	}
}

func TestRaftEntriesMissing(t *testing.T) {
	dir := t.TempDir()
	b := []byte(RaftHeader)
	for _, i := range []uint64{1, 2, 4} {
		b = appendEntry(b, rent(i, 1, "x"))
	}
	os.WriteFile(filepath.Join(dir, RaftLogName), b, logfile.FileMode)
	if _, _, err := OpenRaft(dir, func(RaftProgress) {}); err == nil || !strings.Contains(err.Error(), "entry 4 at offset") {
		t.Fatalf("a log missing entry 3 opened: %v", err)
	}
}

// A Save that would leave a gap breaks the log at once rather than at the next start.
func TestRaftGapBreaks(t *testing.T) {
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	s := l.Save(rhs(1, 1, 0), rents(1, 3, 1, "a"), nil)
	p.synced(t, s)
	l.Save(rhs(1, 1, 3), rents(5, 5, 1, "b"), nil)
	r := p.until(t, "of the gap", func(r RaftProgress) bool { return r.Err != nil })
	if r.Synced != s || !strings.Contains(r.Err.Error(), "entry 5 queued after entry 3: a gap") ||
		!strings.Contains(l.Failing(), "a gap") {
		t.Fatalf("report %+v, failing %q", r, l.Failing())
	}
	l.Save(rhs(1, 1, 3), rents(4, 4, 1, "c"), nil) // nothing more is written
	l.Close()
	if st := reopen(t, dir); len(st.Entries) != 3 || st.HardState.GetCommit() != 0 {
		t.Fatalf("read back\n%s", describe(st))
	}
	// After a restart, entries go on from the last on disk (or the snapshot).
	l, _, p = openRaft(t, dir)
	p.synced(t, l.Save(nil, rents(4, 4, 1, "d"), nil))
	l.Save(nil, nil, rsnap(10, 2, "s", 1))
	p.synced(t, l.Save(nil, rents(11, 11, 2, "f"), nil))
	if l.Failing() != "" {
		t.Fatalf("failing: %q", l.Failing())
	}
	l.Close()
}

func TestRaftSnapshotFileDamaged(t *testing.T) {
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	l.Save(rhs(1, 1, 5), rents(1, 5, 1, "a"), nil)
	p.synced(t, l.Compact(rsnap(5, 1, "state", 1)))
	l.Close()
	path := filepath.Join(dir, RaftSnapName)
	good, _ := os.ReadFile(path)
	for _, at := range []int{0, len(RaftSnapHeader) + 2, len(good) - 1} {
		c := bytes.Clone(good)
		c[at] ^= 1
		os.WriteFile(path, c, logfile.FileMode)
		if _, _, err := OpenRaft(dir, func(RaftProgress) {}); err == nil || !strings.Contains(err.Error(), "is damaged") {
			t.Fatalf("byte %d of the snapshot damaged: %v", at, err)
		}
	}
	os.WriteFile(path, good[:len(good)-1], logfile.FileMode)
	if _, _, err := OpenRaft(dir, func(RaftProgress) {}); err == nil {
		t.Fatal("a cut snapshot file opened")
	}
}

func TestRaftCompactRestart(t *testing.T) {
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	l.SavePeers(map[uint64]string{1: "h1:1", 2: "h2:2", 3: "h3:3"})
	for i := uint64(1); i <= 100; i += 10 {
		l.Save(rhs(1, 1, i-1), rents(i, i+9, 1, "a"), nil)
	}
	p.synced(t, l.Save(rhs(1, 1, 100), nil, nil))
	before := l.Stats()
	s := l.Compact(rsnap(60, 1, "state-60", 1, 2, 3))
	l.Save(rhs(2, 2, 100), rents(101, 110, 2, "b"), nil)
	r := p.synced(t, s)
	last := p.synced(t, s+1)
	after := l.Stats()
	l.Close()
	if !r.Compacted && !last.Compacted {
		t.Fatalf("no report of the compaction: %+v %+v", r, last)
	}
	if after.SnapshotIndex != 60 || after.FirstIndex != 61 || after.LastIndex != 110 || after.Entries != 50 ||
		after.Compactions != 1 || after.LogSize >= before.LogSize || after.SnapSize == 0 {
		t.Fatalf("stats before %+v\nafter %+v", before, after)
	}
	st := reopen(t, dir)
	want := RaftState{HardState: rhs(2, 2, 100), Snapshot: rsnap(60, 1, "state-60", 1, 2, 3),
		Entries: append(rents(61, 100, 1, "a"), rents(101, 110, 2, "b")...), Peers: map[uint64]string{1: "h1:1", 2: "h2:2", 3: "h3:3"}}
	if describe(st) != describe(&want) {
		t.Fatalf("read back\n%s\nwant\n%s", describe(st), describe(&want))
	}
	if n, _ := os.ReadDir(dir); len(n) != 2 {
		t.Fatalf("the directory holds %d files, want raft.log and raft.snap", len(n))
	}

	// Again after the restart, up to the last entry, and with an older snapshot (ignored).
	l, _, p = openRaft(t, dir)
	l.Compact(rsnap(110, 2, "state-110", 1, 2, 3))
	p.synced(t, l.Compact(rsnap(100, 1, "older", 1, 2, 3)))
	st2 := l.Stats()
	l.Close()
	st = reopen(t, dir)
	want = RaftState{HardState: rhs(2, 2, 110), Snapshot: rsnap(110, 2, "state-110", 1, 2, 3), Peers: want.Peers}
	want.HardState.Commit = new(uint64(110)) // at least the snapshot's index
	if describe(st) != describe(&want) || st2.Entries != 0 || st2.LastIndex != 110 {
		t.Fatalf("read back\n%s\nwant\n%s\nstats %+v", describe(st), describe(&want), st2)
	}
}

func TestRaftReceivedSnapshot(t *testing.T) {
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	// Entries of an old term, some past the snapshot to come: they are all replaced.
	l.Save(rhs(1, 1, 5), rents(1, 60, 1, "stale"), nil)
	l.Save(rhs(3, 0, 50), rents(51, 55, 3, "new"), rsnap(50, 3, "leader-state", 1, 2))
	p.synced(t, l.Save(nil, rents(56, 56, 3, "new"), nil))
	if s := l.Stats(); s.SnapshotIndex != 50 || s.FirstIndex != 51 || s.LastIndex != 56 {
		t.Fatalf("stats %+v", s)
	}
	l.Close()
	want := RaftState{HardState: rhs(3, 0, 50), Snapshot: rsnap(50, 3, "leader-state", 1, 2), Entries: rents(51, 56, 3, "new")}
	if st := reopen(t, dir); describe(st) != describe(&want) {
		t.Fatalf("read back\n%s\nwant\n%s", describe(st), describe(&want))
	}
	// A local compaction older than the received snapshot is ignored; a newer one works.
	l, _, p = openRaft(t, dir)
	l.Compact(rsnap(40, 1, "older", 1, 2))
	p.synced(t, l.Compact(rsnap(53, 3, "state-53", 1, 2)))
	l.Close()
	want = RaftState{HardState: rhs(3, 0, 53), Snapshot: rsnap(53, 3, "state-53", 1, 2), Entries: rents(54, 56, 3, "new")}
	if st := reopen(t, dir); describe(st) != describe(&want) {
		t.Fatalf("after compaction read back\n%s\nwant\n%s", describe(st), describe(&want))
	}
}

// A received snapshot whose hard state was torn off: the commit index is raised to it.
func TestRaftCommitRaisedToSnapshot(t *testing.T) {
	src := t.TempDir()
	b, _ := writeRaftLog(t, src,
		func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, 2), rents(1, 3, 1, "a"), nil) },
		func(l *RaftLog) uint64 { return l.Save(rhs(2, 0, 20), nil, rsnap(20, 2, "s", 1)) })
	st := reopenCopy(t, b[:len(b)-1])
	if st.HardState.GetCommit() != 20 || st.HardState.GetTerm() != 1 || st.Snapshot.GetMetadata().GetIndex() != 20 || len(st.Entries) != 0 {
		t.Fatalf("read back\n%s", describe(st))
	}
}

// Each crash point of a compaction leaves files that replay to the state before it or after it.
func TestRaftCompactCrashPoints(t *testing.T) {
	base := t.TempDir()
	l, _, p := openRaft(t, base)
	l.SavePeers(map[uint64]string{1: "a:1", 2: "b:2"})
	l.Save(rhs(1, 1, 10), rents(1, 30, 1, "a"), nil)
	l.Save(rhs(2, 1, 30), rents(31, 35, 2, "b"), rsnap(30, 2, "received-30", 1, 2))
	p.synced(t, l.Compact(rsnap(32, 2, "state-32", 1, 2)))
	l.Save(rhs(3, 1, 33), rents(36, 50, 3, "c"), nil)
	p.synced(t, l.Save(nil, rents(40, 45, 4, "d"), nil))
	l.Close()
	old := snapshotDir(t, base)
	oldState := describe(reopen(t, base))

	l, _, p = openRaft(t, base)
	p.synced(t, l.Compact(rsnap(42, 4, "state-42", 1, 2)))
	l.Close()
	neu := snapshotDir(t, base)
	newState := describe(reopen(t, base))
	if oldState == newState || !strings.Contains(newState, "state-42") || strings.Contains(newState, "e 42/") ||
		!strings.Contains(newState, "e 43/4/0 \"d-43\"") || !strings.Contains(oldState, "e 42/4/0 \"d-42\"") {
		t.Fatalf("before\n%s\nafter\n%s", oldState, newState)
	}

	half := func(b []byte) []byte { return b[:len(b)/2] }
	cases := []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"snapshot file being written", map[string][]byte{RaftSnapName: old[RaftSnapName], RaftLogName: old[RaftLogName],
			RaftSnapName + raftTmp: half(neu[RaftSnapName])}, oldState},
		{"snapshot file written, not renamed", map[string][]byte{RaftSnapName: old[RaftSnapName], RaftLogName: old[RaftLogName],
			RaftSnapName + raftTmp: neu[RaftSnapName]}, oldState},
		{"snapshot renamed, log not begun", map[string][]byte{RaftSnapName: neu[RaftSnapName], RaftLogName: old[RaftLogName]}, newState},
		{"log being written", map[string][]byte{RaftSnapName: neu[RaftSnapName], RaftLogName: old[RaftLogName],
			RaftLogName + raftTmp: half(neu[RaftLogName])}, newState},
		{"log written, not renamed", map[string][]byte{RaftSnapName: neu[RaftSnapName], RaftLogName: old[RaftLogName],
			RaftLogName + raftTmp: neu[RaftLogName]}, newState},
		{"log renamed", neu, newState},
	}
	for _, c := range cases {
		dir := t.TempDir()
		for name, b := range c.files {
			if err := os.WriteFile(filepath.Join(dir, name), b, logfile.FileMode); err != nil {
				t.Fatal(err)
			}
		}
		st := reopen(t, dir)
		if got := describe(st); got != c.want {
			t.Fatalf("%s: read back\n%s\nwant\n%s", c.name, got, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, RaftLogName+raftTmp)); err == nil {
			t.Fatalf("%s: the temporary log file is left", c.name)
		}
		if _, err := os.Stat(filepath.Join(dir, RaftSnapName+raftTmp)); err == nil {
			t.Fatalf("%s: the temporary snapshot file is left", c.name)
		}
		// And the log goes on from there: compact again, append, read back.
		l, _, p := openRaft(t, dir)
		l.Compact(rsnap(44, 4, "state-44", 1, 2))
		p.synced(t, l.Save(rhs(5, 1, 45), rents(46, 46, 5, "e"), nil))
		l.Close()
		st = reopen(t, dir)
		if len(st.Entries) != 2 || st.Entries[0].GetIndex() != 45 || st.Entries[1].GetIndex() != 46 ||
			st.Snapshot.GetMetadata().GetIndex() != 44 || st.Peers[2] != "b:2" {
			t.Fatalf("%s: after another compaction read back\n%s", c.name, describe(st))
		}
	}
}

func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range []string{RaftSnapName, RaftLogName} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		m[name] = b
	}
	return m
}

// faultFile is a raft file on a disk that fails on cue.
type faultFile struct {
	*os.File
	d *faultDisk
}

type faultDisk struct {
	mu        sync.Mutex
	failSync  string // files whose name ends so fail their fsync with EIO
	room      int64  // -1: no limit; else writes past it fail with ENOSPC after writing what fits
	syncDelay time.Duration
	syncs     int
}

func (f faultFile) WriteAt(b []byte, off int64) (int, error) {
	f.d.mu.Lock()
	room := f.d.room
	f.d.mu.Unlock()
	if room >= 0 && off+int64(len(b)) > room {
		n := max(room-off, 0)
		m, _ := f.File.WriteAt(b[:n], off)
		return m, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.WriteAt(b, off)
}

func (f faultFile) Sync() error {
	f.d.mu.Lock()
	fail := f.d.failSync != "" && strings.HasSuffix(f.Name(), f.d.failSync)
	delay := f.d.syncDelay
	f.d.syncs++
	f.d.mu.Unlock()
	time.Sleep(delay)
	if fail {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (d *faultDisk) set(f func(d *faultDisk)) {
	d.mu.Lock()
	f(d)
	d.mu.Unlock()
}

func onFaultDisk(t *testing.T) *faultDisk {
	d := &faultDisk{room: -1}
	old := openRaftFile
	openRaftFile = func(name string, flag int, perm os.FileMode) (raftFile, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return faultFile{f, d}, nil
	}
	t.Cleanup(func() { openRaftFile = old })
	return d
}

func TestRaftFsyncFailure(t *testing.T) {
	fd := onFaultDisk(t)
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	p.synced(t, l.Save(rhs(1, 1, 0), rents(1, 2, 1, "a"), nil))
	fd.set(func(d *faultDisk) { d.failSync = RaftLogName })
	s := l.Save(rhs(1, 1, 2), rents(3, 4, 1, "b"), nil)
	r := p.until(t, "of a failure", func(r RaftProgress) bool { return r.Err != nil })
	if r.Synced >= s || !errors.Is(r.Err, syscall.EIO) || !strings.Contains(r.Err.Error(), "fsync") {
		t.Fatalf("report %+v", r)
	}
	if f := l.Failing(); f != "Input/output error" {
		t.Fatalf("Failing() = %q", f)
	}
	if st := l.Stats(); !strings.Contains(st.LastErr, "fsync") || st.SyncedSeq >= s {
		t.Fatalf("stats %+v", st)
	}
	// Saves go on queueing meanwhile, and everything is written, once, when the disk is back.
	s2 := l.Save(rhs(1, 1, 4), rents(5, 5, 1, "c"), nil)
	time.Sleep(3 * logfile.RetryEvery)
	if r := p.last(); r.Synced >= s || r.Err == nil {
		t.Fatalf("synced %+v while fsync fails", r)
	}
	fd.set(func(d *faultDisk) { d.failSync = "" })
	r = p.synced(t, s2)
	if r.Err != nil || l.Failing() != "" || l.Stats().LastErr != "" {
		t.Fatalf("after recovery: %+v, failing %q", r, l.Failing())
	}
	l.Close()
	st := reopen(t, dir)
	want := RaftState{HardState: rhs(1, 1, 4), Entries: append(append(rents(1, 2, 1, "a"), rents(3, 4, 1, "b")...), rents(5, 5, 1, "c")...)}
	if describe(st) != describe(&want) {
		t.Fatalf("read back\n%s\nwant\n%s", describe(st), describe(&want))
	}
	// The file holds each record once: the failed batch was cut off before being written again.
	if b, _ := os.ReadFile(filepath.Join(dir, RaftLogName)); bytes.Count(b, []byte("b-3")) != 1 {
		t.Fatalf("entry 3 is in the file %d times", bytes.Count(b, []byte("b-3")))
	}
}

func TestRaftWriteFailure(t *testing.T) {
	fd := onFaultDisk(t)
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	p.synced(t, l.Save(rhs(1, 1, 0), rents(1, 2, 1, "a"), nil))
	size := l.Stats().LogSize
	fd.set(func(d *faultDisk) { d.room = size + 30 }) // part of the next record fits
	s := l.Save(rhs(1, 1, 2), rents(3, 4, 1, "b"), nil)
	r := p.until(t, "of a failure", func(r RaftProgress) bool { return r.Err != nil })
	if r.Synced >= s || !errors.Is(r.Err, syscall.ENOSPC) || l.Failing() != "No space left on device" {
		t.Fatalf("report %+v, failing %q", r, l.Failing())
	}
	if fi, _ := os.Stat(filepath.Join(dir, RaftLogName)); fi.Size() != size {
		t.Fatalf("the file is %d bytes after a failed write, want it cut back to %d", fi.Size(), size)
	}
	fd.set(func(d *faultDisk) { d.room = -1 })
	p.synced(t, s)
	if l.Failing() != "" {
		t.Fatalf("still failing: %q", l.Failing())
	}
	l.Close()
	if st := reopen(t, dir); len(st.Entries) != 4 || st.HardState.GetCommit() != 2 {
		t.Fatalf("read back\n%s", describe(st))
	}
}

func TestRaftCompactFailure(t *testing.T) {
	fd := onFaultDisk(t)
	for _, failing := range []string{RaftSnapName + raftTmp, RaftLogName + raftTmp} {
		dir := t.TempDir()
		l, _, p := openRaft(t, dir)
		l.Save(rhs(1, 1, 10), rents(1, 10, 1, "a"), nil)
		fd.set(func(d *faultDisk) { d.failSync = failing })
		c := l.Compact(rsnap(8, 1, "state-8", 1))
		s := l.Save(rhs(1, 1, 11), rents(11, 11, 1, "b"), nil)
		r := p.until(t, "of a failure", func(r RaftProgress) bool { return r.Err != nil })
		if r.Synced >= c || !strings.Contains(r.Err.Error(), "fsync") || l.Failing() == "" {
			t.Fatalf("%s fails: report %+v", failing, r)
		}
		// What is on disk meanwhile replays (the temporary files are removed, not used).
		l2dir := t.TempDir()
		for _, name := range []string{RaftLogName, RaftSnapName, RaftSnapName + raftTmp, RaftLogName + raftTmp} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
				os.WriteFile(filepath.Join(l2dir, name), b, logfile.FileMode)
			}
		}
		fd.set(func(d *faultDisk) { d.failSync = "" })
		if st := reopen(t, l2dir); len(st.Entries) == 0 || st.Entries[len(st.Entries)-1].GetIndex() != 10 {
			t.Fatalf("%s fails: meanwhile the directory reads back\n%s", failing, describe(st))
		}
		r = p.synced(t, s)
		l.Close()
		st := reopen(t, dir)
		want := RaftState{HardState: rhs(1, 1, 11), Snapshot: rsnap(8, 1, "state-8", 1),
			Entries: append(rents(9, 10, 1, "a"), rents(11, 11, 1, "b")...)}
		if describe(st) != describe(&want) {
			t.Fatalf("%s failed, then not: read back\n%s\nwant\n%s", failing, describe(st), describe(&want))
		}
	}
}

// While the writer fsyncs, Saves accumulate: one fsync covers them all.
func TestRaftGroupCommit(t *testing.T) {
	fd := onFaultDisk(t)
	fd.set(func(d *faultDisk) { d.syncDelay = 5 * time.Millisecond })
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	var s uint64
	const n = 2000
	for i := uint64(1); i <= n; i++ {
		s = l.Save(rhs(1, 1, i-1), []*raftpb.Entry{rent(i, 1, strings.Repeat("v", 200))}, nil)
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	p.synced(t, s)
	st := l.Stats()
	l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	ops := 0
	for _, r := range p.all {
		if r.Fsyncs != 1 || r.Err != nil {
			t.Fatalf("a batch with %d fsyncs: %+v", r.Fsyncs, r)
		}
		ops += r.Ops
	}
	if ops != n || st.Fsyncs != int64(len(p.all)) || len(p.all) > n/10 {
		t.Fatalf("%d saves in %d batches (%d fsyncs), %d ops reported", n, len(p.all), st.Fsyncs, ops)
	}
	t.Logf("%d saves in %d batches", n, len(p.all))
}

func TestRaftSaveAllocs(t *testing.T) {
	l, _, p := openRaft(t, t.TempDir())
	defer l.Close()
	hs := rhs(1, 1, 0)
	ents := []*raftpb.Entry{rent(1, 1, strings.Repeat("v", 200)), rent(2, 1, strings.Repeat("w", 200))}
	for range 1000 {
		l.Save(hs, ents, nil)
	}
	p.synced(t, l.Save(hs, ents, nil))
	allocs := testing.AllocsPerRun(1000, func() {
		l.Save(hs, ents, nil)
	})
	if allocs != 0 {
		t.Fatalf("Save allocates %.1f times a call", allocs)
	}
}

// Saves from the loop, Stats and Failing from elsewhere, reports on the writer: under -race.
func TestRaftConcurrent(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	synced := uint64(0)
	l, _, err := OpenRaft(dir, func(r RaftProgress) {
		mu.Lock()
		if r.Synced < synced || r.Err != nil {
			t.Errorf("report %+v after synced %d", r, synced)
		}
		synced = r.Synced
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = l.Stats()
				_ = l.Failing()
			}
		})
	}
	var last uint64
	for i := uint64(1); i <= 3000; i++ {
		last = l.Save(rhs(1, 1, i-1), []*raftpb.Entry{rent(i, 1, fmt.Sprint(i))}, nil)
		switch i % 1000 {
		case 500:
			l.SavePeers(map[uint64]string{1: fmt.Sprint(i)})
		case 0:
			l.Compact(rsnap(i-10, 1, fmt.Sprint("s", i), 1))
		}
	}
	l.Close()
	close(stop)
	wg.Wait()
	mu.Lock()
	if synced != last+1 { // the compaction after the last Save
		t.Errorf("synced %d at close, want %d", synced, last+1)
	}
	mu.Unlock()
	st := reopen(t, dir)
	if len(st.Entries) != 10 || st.Entries[9].GetIndex() != 3000 || st.Snapshot.GetMetadata().GetIndex() != 2990 ||
		st.Peers[1] != "2500" || st.HardState.GetCommit() != 2999 {
		t.Fatalf("read back\n%s", describe(st))
	}
}

// seedRaftLog is a raft.log of every kind of record, for the fuzzer's corpus.
func seedRaftLog() []byte {
	b := []byte(RaftHeader)
	b = appendPeers(b, []uint64{1, 2}, map[uint64]string{1: "a:1", 2: "b:2"})
	for _, e := range rents(1, 4, 1, "x") {
		b = appendEntry(b, e)
	}
	b = appendHardState(b, 1, 1, 3)
	s := rsnap(6, 2, "snapshot-data", 1, 2)
	conf := marshalConf(s)
	h := appendSnapHead(nil, 6, 2, conf, len(s.Data))
	finishSnap(h, s.Data)
	b = append(append(b, h...), s.Data...)
	for _, e := range rents(7, 8, 2, "y") {
		b = appendEntry(b, e)
	}
	return appendHardState(b, 2, 0, 8)
}

// FuzzRaftReplay: any bytes after the header read back without a panic to a state that
// holds together (entries in order right after the snapshot, commit in range), or to a
// clear error; what is kept reads back the same with nothing more to cut, and records
// appended after it read back on top of it.
func FuzzRaftReplay(f *testing.F) {
	seed := seedRaftLog()[len(RaftHeader):]
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	f.Add(append(bytes.Clone(seed[:40]), seed[50:]...))
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF))
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(b []byte) (*RaftState, int, error) {
			st, d := &RaftState{}, &raftDisk{}
			keep, _, err := readRaftLog("raft.log", b, st, d)
			if err == nil && (d.lastIndex() != st.Snapshot.GetMetadata().GetIndex()+uint64(len(st.Entries)) || d.size != int64(keep)) {
				t.Fatalf("the writer's view (last %d, size %d) differs from the state read (%d entries, kept %d)",
					d.lastIndex(), d.size, len(st.Entries), keep)
			}
			return st, keep, err
		}
		b := append([]byte(RaftHeader), data...)
		st, keep, err := read(b)
		if err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) || strings.Contains(err.Error(), "entries are missing") {
				return
			}
			t.Fatalf("replay: %v", err)
		}
		next := st.Snapshot.GetMetadata().GetIndex() + 1
		for _, e := range st.Entries {
			if e.GetIndex() != next {
				t.Fatalf("entry %d where %d belongs", e.GetIndex(), next)
			}
			next++
		}
		if c := st.HardState.GetCommit(); st.HardState != nil && (c < next-1-uint64(len(st.Entries)) || c > next-1) {
			t.Fatalf("commit %d out of [%d, %d]", c, next-1-uint64(len(st.Entries)), next-1)
		}
		again, keep2, err := read(b[:keep:keep])
		if err != nil || keep2 != keep || describe(again) != describe(st) {
			t.Fatalf("what was kept reads back as\n%s\n(%d of %d bytes, %v), first\n%s", describe(again), keep2, keep, err, describe(st))
		}
		more := appendEntry(bytes.Clone(b[:keep]), rent(next, 9, "z"))
		more = appendHardState(more, 9, 9, next)
		after, keep3, err := read(more)
		st.Entries = append(st.Entries, rent(next, 9, "z"))
		st.HardState = rhs(9, 9, next)
		if err != nil || keep3 != len(more) || describe(after) != describe(st) {
			t.Fatalf("with an entry appended reads back as\n%s\n(%v), want\n%s", describe(after), err, describe(st))
		}
	})
}

// benchRaft opens a raft log for a benchmark; wait blocks until the writer reports.
func benchRaft(b *testing.B) (l *RaftLog, synced *atomic.Uint64, wait chan struct{}) {
	synced = new(atomic.Uint64)
	wait = make(chan struct{}, 1)
	l, _, err := OpenRaft(b.TempDir(), func(r RaftProgress) {
		synced.Store(r.Synced)
		select {
		case wait <- struct{}{}:
		default:
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return l, synced, wait
}

// BenchmarkRaftSave saves a hard state and ents entries of 200 bytes a call, with at most
// window calls not yet on disk (as clients waiting for their replies bound what a loop
// has in flight; 1024 is 64 connections × 16 pipelined commands), and waits for the last:
// MB/s of entries, and how many calls one fsync covers. Each batch is one write and one
// fsync.
func BenchmarkRaftSave(b *testing.B) {
	for _, c := range []struct{ ents, window int }{{1, 1024}, {1, 64}, {16, 64}, {1, 1 << 30}} {
		name := fmt.Sprintf("ents=%d/window=%d", c.ents, c.window)
		if c.window == 1<<30 {
			name = fmt.Sprintf("ents=%d/unbounded", c.ents)
		}
		b.Run(name, func(b *testing.B) {
			l, synced, wait := benchRaft(b)
			hs := rhs(1, 1, 0)
			es := make([]*raftpb.Entry, c.ents)
			for i := range es {
				es[i] = rent(uint64(i+1), 1, strings.Repeat("v", 200))
			}
			b.SetBytes(int64(c.ents * len(appendEntry(nil, es[0]))))
			b.ReportAllocs()
			var s uint64
			for b.Loop() {
				for s-synced.Load() >= uint64(c.window) {
					<-wait
				}
				s = l.Save(hs, es, nil)
			}
			for synced.Load() < s {
				<-wait
			}
			b.StopTimer()
			st := l.Stats()
			l.Close()
			b.ReportMetric(float64(st.Fsyncs)/float64(st.Batches), "fsyncs/batch")
			b.ReportMetric(float64(st.OpsSaved)/float64(st.Fsyncs), "saves/fsync")
			b.ReportMetric(float64(st.LastFsyncTime.Microseconds()), "last-fsync-µs")
		})
	}
}

// BenchmarkRaftSaveWait waits for each Save to be on disk before the next: one fsync a
// Save, the cost group commit spreads.
func BenchmarkRaftSaveWait(b *testing.B) {
	l, synced, wait := benchRaft(b)
	defer l.Close()
	hs := rhs(1, 1, 0)
	es := []*raftpb.Entry{rent(1, 1, strings.Repeat("v", 200))}
	b.SetBytes(int64(len(appendEntry(nil, es[0]))))
	for b.Loop() {
		s := l.Save(hs, es, nil)
		for synced.Load() < s {
			<-wait
		}
	}
}

// BenchmarkRaftSaveQueue is what a Save costs the loop: marshalling and queueing a hard
// state and one entry of 200 bytes (no writer: the queue is emptied every 4096 calls).
func BenchmarkRaftSaveQueue(b *testing.B) {
	l := &RaftLog{wake: make(chan struct{}, 1)}
	hs := rhs(1, 1, 0)
	es := []*raftpb.Entry{rent(1, 1, strings.Repeat("v", 200))}
	b.SetBytes(int64(len(appendEntry(nil, es[0]))))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		l.Save(hs, es, nil)
		if n++; n%4096 == 0 {
			l.buf, l.ops = l.buf[:0], l.ops[:0]
		}
	}
}

// Close gives a log that cannot be written up after one more try, and says so.
func TestRaftCloseWhileFailing(t *testing.T) {
	fd := onFaultDisk(t)
	dir := t.TempDir()
	l, _, p := openRaft(t, dir)
	p.synced(t, l.Save(rhs(1, 1, 0), rents(1, 1, 1, "a"), nil))
	fd.set(func(d *faultDisk) { d.failSync = RaftLogName })
	s := l.Save(rhs(1, 1, 1), rents(2, 2, 1, "b"), nil)
	p.until(t, "of a failure", func(r RaftProgress) bool { return r.Err != nil })
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs on a failing disk")
	}
	if r := p.last(); r.Err == nil || r.Synced >= s {
		t.Fatalf("last report %+v", r)
	}
	fd.set(func(d *faultDisk) { d.failSync = "" })
	if st := reopen(t, dir); len(st.Entries) != 1 || st.HardState.GetCommit() != 0 {
		t.Fatalf("read back\n%s", describe(st))
	}
}
