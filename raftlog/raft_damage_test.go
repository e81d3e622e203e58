package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/logfile"
)

// raftRecs is a raft log built record by record: where each record starts (the last
// start is the end) and, for entries, their index.
type raftRecs struct {
	b      []byte
	starts []int
	index  []uint64 // 0: not an entry
}

func (r *raftRecs) add(b []byte, index uint64) {
	r.b = b
	r.starts = append(r.starts, len(b))
	r.index = append(r.index, index)
}

// stateRecord appends to dst a record framed and laid out as the append-only log's key state
// (aof.AppendState), of key, value and holders holders: what an entry's data holds.
func stateRecord(dst []byte, key, value string, holders int) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, logfile.RecHead)...)
	dst = append(dst, 2, 0)
	var k [16]byte
	copy(k[:], key)
	dst = append(dst, k[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(value)))
	dst = append(dst, value...)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(holders))
	for i := range holders {
		dst = append(dst, bytes.Repeat([]byte{byte(i + 1)}, 61)...)
	}
	return logfile.Seal(dst, start)
}

// checkKinds are the raft directory's kinds of file, for the check-log tool.
var checkKinds = []logfile.Kind{LogKind, SnapKind}

// CheckLog is the check-log tool on a raft directory's file.
func CheckLog(path string) (*logfile.LogCheck, error) { return logfile.CheckLog(path, checkKinds) }

// FixLog is check-log --fix on a raft directory's file.
func FixLog(path string, now time.Time) (*logfile.LogCheck, string, error) {
	return logfile.FixLog(path, now, checkKinds)
}

// raftLogOf is a raft log of n batches as a leader writes them: entries (of the append-only
// log's records, as loop/ proposes them) and a hard state after each batch.
func raftLogOf(rng *rand.Rand, n int) *raftRecs {
	r := &raftRecs{b: []byte(RaftHeader), starts: []int{len(RaftHeader)}}
	r.add(appendPeers(r.b, []uint64{1, 2, 3}, map[uint64]string{1: "a:1", 2: "b:2", 3: "c:3"}), 0)
	i := uint64(0)
	for range n {
		for range 1 + rng.IntN(3) {
			i++
			data := stateRecord([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, fmt.Sprintf("k%d", i), strings.Repeat("v", rng.IntN(60)), rng.IntN(2))
			if rng.IntN(5) == 0 { // a value holding a raft record
				data = appendHardState(data, 9, 9, 9)
			}
			r.add(appendEntry(r.b, rent(i, 1, string(data))), i)
		}
		r.add(appendHardState(r.b, 1, 1, i), 0)
	}
	r.starts = r.starts[:len(r.starts)-1]
	r.starts = append(r.starts, len(r.b))
	return r
}

// TestRaftFlipAndTornTail is issue 21 item 4 on the raft log: a flipped bit in an entry in
// the middle and the last 10 bytes cut off. Start-up used to cut the log at the flip,
// dropping every entry after it; it must stop, name the offset, and change nothing.
func TestRaftFlipAndTornTail(t *testing.T) {
	src := t.TempDir()
	var calls []func(l *RaftLog) uint64
	for i := uint64(1); i <= 40; i++ {
		calls = append(calls, func(l *RaftLog) uint64 { return l.Save(rhs(1, 1, i-1), rents(i, i, 1, "entry-data"), nil) })
	}
	full, ends := writeRaftLog(t, src, calls...)
	at := int(ends[5]) + 30 // in the hard state record or the entry of call 7
	b := bytes.Clone(full[:len(full)-10])
	b[at] ^= 0x04
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RaftLogName), b, logfile.FileMode); err != nil {
		t.Fatal(err)
	}
	_, _, err := OpenRaft(dir, func(RaftProgress) {})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Kind != KindRaft || ce.Offset > int64(at) || ce.Offset < ends[5] || ce.After < 60 {
		t.Fatalf("flip at %d: %v, want a CorruptError before it with the records after it counted", at, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("offset %d", ce.Offset)) || !strings.Contains(err.Error(), "tallyd check-log --fix") {
		t.Fatalf("the message names neither the offset nor check-log: %v", err)
	}
	if left, _ := os.ReadFile(filepath.Join(dir, RaftLogName)); !bytes.Equal(left, b) {
		t.Fatal("the file was changed")
	}
}

// TestRaftFixLog: check-log --fix on a raft log drops a damaged hard state and keeps every
// entry (and a record whose length alone was damaged); a damaged entry in the middle cannot
// be dropped without a gap, so the fix refuses and changes nothing; a torn tail alone is
// still cut at start.
func TestRaftFixLog(t *testing.T) {
	r := raftLogOf(rand.New(rand.NewPCG(1, 2)), 30)
	hs, ent := -1, -1 // a hard state record and an entry in the middle
	for k := 10; k < len(r.index); k++ {
		if r.index[k] == 0 && hs < 0 {
			hs = k
		}
		if r.index[k] != 0 && ent < 0 {
			ent = k
		}
	}
	entries := 0
	for _, i := range r.index {
		if i != 0 {
			entries++
		}
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		at      int
		fixable bool
	}{
		{"hard state", r.starts[hs] + 12, true},
		{"entry's length", r.starts[ent] + 1, true},
		{"entry", r.starts[ent] + 20, false},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, RaftLogName)
		b := bytes.Clone(r.b[:len(r.b)-10])
		b[c.at] ^= 0x10
		if err := os.WriteFile(path, b, logfile.FileMode); err != nil {
			t.Fatal(err)
		}
		if _, _, err := replayRaft(dir); !errors.As(err, new(*CorruptError)) {
			t.Fatalf("%s damaged: %v", c.name, err)
		}
		chk, err := CheckLog(path)
		if err != nil || chk.Kind != KindRaft || len(chk.Damage) != 2 || !chk.Damage[1].Tail() {
			t.Fatalf("%s damaged: %+v, %v", c.name, chk, err)
		}
		_, aside, err := FixLog(path, now)
		if !c.fixable {
			if err == nil || !strings.Contains(err.Error(), "entries are missing") || aside != "" {
				t.Fatalf("%s damaged: the fix says %q, %v", c.name, aside, err)
			}
			if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
				t.Fatalf("%s damaged: a fix that refused changed the file", c.name)
			}
			continue
		}
		if err != nil || aside != path+".broken-20250301T120000Z" {
			t.Fatalf("%s damaged: fix %q, %v", c.name, aside, err)
		}
		if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, b) {
			t.Fatalf("%s damaged: the original was not kept aside", c.name)
		}
		st, _, err := replayRaft(dir)
		if err != nil || st.TruncatedBytes != 0 || len(st.Entries) != entries || st.Peers[3] != "c:3" {
			t.Fatalf("%s damaged: after the fix %d entries of %d (%v)\n%s", c.name, len(st.Entries), entries, err, describe(st))
		}
	}
	// A torn tail alone: cut at start, every entry before it kept.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RaftLogName), r.b[:len(r.b)-10], logfile.FileMode); err != nil {
		t.Fatal(err)
	}
	st, _, err := replayRaft(dir)
	if err != nil || st.TruncatedBytes != int64(r.starts[len(r.starts)-1]-r.starts[len(r.starts)-2]-10) || len(st.Entries) != entries {
		t.Fatalf("torn tail: %v, truncated %d (%q), %d entries", err, st.TruncatedBytes, st.TailWhy, len(st.Entries))
	}
}

// TestRaftRandomDamage: bits flipped and tails torn in random places of a raft log never
// lose an intact entry without the operator's --fix, and a fix that goes ahead loses none.
func TestRaftRandomDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 5))
	for trial := range 600 {
		r := raftLogOf(rng, 3+rng.IntN(15))
		cut := len(r.b)
		if trial%3 != 0 {
			cut -= 1 + rng.IntN(min(120, len(r.b)-len(RaftHeader)-1))
		}
		b := bytes.Clone(r.b[:cut])
		var flips []int
		for range trial % 4 {
			at := len(RaftHeader) + rng.IntN(cut-len(RaftHeader))
			b[at] ^= 1 << rng.IntN(8)
			flips = append(flips, at)
		}
		intact := map[uint64]bool{}
		for k, i := range r.index {
			hit := false
			for _, at := range flips {
				hit = hit || at >= r.starts[k] && at < r.starts[k+1]
			}
			if i != 0 && !hit && r.starts[k+1] <= cut {
				intact[i] = true
			}
		}
		check := func(st *RaftState, when string) {
			t.Helper()
			got := map[uint64]bool{}
			for _, e := range st.Entries {
				got[e.GetIndex()] = true
			}
			for i := range intact {
				if !got[i] {
					t.Fatalf("trial %d (flips %v, cut %d of %d) %s: intact entry %d lost\n%s", trial, flips, cut, len(r.b), when, i, describe(st))
				}
			}
		}
		dir := t.TempDir()
		path := filepath.Join(dir, RaftLogName)
		if err := os.WriteFile(path, b, logfile.FileMode); err != nil {
			t.Fatal(err)
		}
		st, _, err := replayRaft(dir)
		if err == nil {
			check(st, "at start")
			continue
		}
		if !errors.As(err, new(*CorruptError)) {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
			t.Fatalf("trial %d: start-up stopped but changed the file", trial)
		}
		if _, _, err := FixLog(path, time.Now()); err != nil {
			if !strings.Contains(err.Error(), "entries are missing") {
				t.Fatalf("trial %d: fix: %v", trial, err)
			}
			continue
		}
		st, _, err = replayRaft(dir)
		if err != nil || st.TruncatedBytes != 0 {
			t.Fatalf("trial %d: after the fix: %v, truncated %d", trial, err, st.TruncatedBytes)
		}
		check(st, "after the fix")
	}
}
