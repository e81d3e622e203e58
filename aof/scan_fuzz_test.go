package aof

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// scratchFile is a file path for a fuzz target's replays, on tmpfs where there is one:
// Replay fsyncs what it cuts, and a busy disk would make each run take a fsync's time.
func scratchFile(f *testing.F) string {
	dir, err := os.MkdirTemp("/dev/shm", "tallyd-fuzz")
	if err != nil {
		return filepath.Join(f.TempDir(), "f.aof")
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "f.aof")
}

// fuzzLog is a log of six records whose values (entries' data in a raft log) are the
// fuzzer's bytes, and where each record starts (the last start is the end).
func fuzzLog(raft bool, v1, v2 []byte) ([]byte, []int, logfile.Format, string) {
	head, f := Header, logfile.Format(&aofFormat{})
	if raft {
		head, f = raftlog.RaftHeader, raftlog.LogKind.Format
	}
	b := []byte(head)
	starts := []int{len(b)}
	for i := range 6 {
		v := v1
		if i%2 == 1 {
			v = v2
		}
		switch {
		case raft && i == 3:
			b = raftlog.AppendHardState(b, 1, 1, uint64(i))
		case raft:
			b = raftlog.AppendEntry(b, rent(uint64(i+1), 1, string(v)))
		case i == 3:
			s := state(0, "", "", 0)
			s.Ceil = 77
			b = AppendState(b, &s)
		default:
			s := state(uint8(i), "k", "", i%3)
			s.Value = v
			b = AppendState(b, &s)
		}
		starts = append(starts, len(b))
	}
	return b, starts, f, head
}

// FuzzLogDamage: a log whose values are the fuzzer's bytes (records inside values
// included), one bit flipped anywhere and the tail cut anywhere, in either log. Start-up
// cuts only after every intact record (one whole before the cut and without the flip);
// a repair keeps every intact record whole; with the flip in a record the cut left
// whole, a repair keeps only the log's own records (cut at their boundaries: none taken
// out of a value). Start-up and the scan agree on where to stop.
func FuzzLogDamage(f *testing.F) {
	inner := state(0, "in", "x", 1)
	rec := AppendState(nil, &inner)
	f.Add(false, []byte("v"), rec, uint16(40), uint8(3), uint16(10))
	f.Add(false, rec, append(bytes.Clone(rec), rec...), uint16(3), uint8(0), uint16(0))
	f.Add(true, raftlog.AppendHardState(nil, 1, 2, 3), []byte("data"), uint16(60), uint8(5), uint16(7))
	f.Add(true, []byte{}, raftlog.AppendEntry(nil, rent(9, 9, "x")), uint16(1), uint8(7), uint16(30))
	path := scratchFile(f)
	f.Fuzz(func(t *testing.T, raft bool, v1, v2 []byte, flip uint16, bit uint8, cut uint16) {
		full, starts, fm, head := fuzzLog(raft, v1, v2)
		c := len(full) - int(cut)%(len(full)-len(head)+1)
		if c <= len(head) {
			return
		}
		b := bytes.Clone(full[:c])
		at := len(head) + int(flip)%(c-len(head))
		b[at] ^= 1 << (bit % 8)
		tr := damageTrial{b: b, starts: starts, flips: []int{at}, cut: c}
		tr.keys = make([]string, len(starts)-1)
		var intact [][2]int
		for i := range tr.keys {
			if starts[i+1] <= c && (at < starts[i] || at >= starts[i+1]) {
				intact = append(intact, [2]int{starts[i], starts[i+1]})
			}
		}
		records, dmg, keep := logfile.Scan(fm, b, len(head))
		if len(dmg) == 0 {
			t.Fatalf("flip at %d, cut %d: no damage found", at, c)
		}
		if d := dmg[0]; d.Tail() {
			for _, r := range intact {
				if r[0] >= int(d.Offset) {
					t.Fatalf("flip at %d, cut %d: start-up would cut at %d, losing the intact record at %d", at, c, d.Offset, r[0])
				}
			}
		}
		for _, r := range intact {
			if !slices.ContainsFunc(keep, func(p logfile.Piece) bool { return !p.FixLen && p.Start <= r[0] && r[1] <= p.End }) {
				t.Fatalf("flip at %d, cut %d: a repair loses the intact record [%d, %d): keeps %v", at, c, r[0], r[1], keep)
			}
		}
		if tr.oneWholeFlip() {
			for _, p := range keep {
				if !slices.Contains(starts, p.Start) || !slices.Contains(starts, p.End) {
					t.Fatalf("flip at %d, cut %d: a repair keeps [%d, %d), not the log's own records %v", at, c, p.Start, p.End, starts)
				}
			}
		}
		out := logfile.Repair(b, head, keep)
		if again, more, _ := logfile.Scan(fm, out, len(head)); again != records || len(more) != 0 {
			t.Fatalf("flip at %d, cut %d: the repaired log has %d records and damage %+v, want %d and none", at, c, again, more, records)
		}
		if raft {
			return
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Replay(path, func(*store.KeyState) {})
		var ce *CorruptError
		switch {
		case dmg[0].Tail() && (err != nil || r.Size != dmg[0].Offset):
			t.Fatalf("flip at %d, cut %d: the scan cuts at %d, start-up says %+v, %v", at, c, dmg[0].Offset, r, err)
		case !dmg[0].Tail() && (!errors.As(err, &ce) || ce.Offset != dmg[0].Offset || ce.After != dmg[0].After):
			t.Fatalf("flip at %d, cut %d: the scan stops at %+v, start-up says %v", at, c, dmg[0], err)
		}
	})
}

// FuzzScanLog: any bytes after either header scan without a panic into valid records and
// damaged stretches that tile the file in order; the repaired log scans whole, with the
// same records; start-up agrees with the scan.
func FuzzScanLog(f *testing.F) {
	aofSeed, _ := setLog(8)
	f.Add(false, aofSeed[len(Header):])
	f.Add(false, aofSeed[len(Header):len(aofSeed)-9])
	f.Add(true, seedRaftLog()[len(raftlog.RaftHeader):])
	f.Add(true, []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5})
	path := scratchFile(f)
	f.Fuzz(func(t *testing.T, raft bool, data []byte) {
		head, fm := Header, logfile.Format(&aofFormat{})
		if raft {
			head, fm = raftlog.RaftHeader, raftlog.LogKind.Format
		}
		b := append([]byte(head), data...)
		records, dmg, keep := logfile.Scan(fm, b, len(head))
		// Pieces kept and damaged stretches cover the file once, in order (a record whole
		// but for its length is both).
		off, k, d := len(head), 0, 0
		for off < len(b) {
			switch {
			case d < len(dmg) && dmg[d].Offset == int64(off):
				if dmg[d].End <= int64(off) || dmg[d].End > int64(len(b)) {
					t.Fatalf("damage %+v at %d of %d", dmg[d], off, len(b))
				}
				if dmg[d].Repaired {
					if k >= len(keep) || !keep[k].FixLen || keep[k].Start != off || int64(keep[k].End) != dmg[d].End {
						t.Fatalf("repaired %+v is not kept", dmg[d])
					}
					k++
				}
				off = int(dmg[d].End)
				d++
			case k < len(keep) && keep[k].Start == off && !keep[k].FixLen:
				off = keep[k].End
				k++
			default:
				t.Fatalf("nothing covers offset %d: damage %+v, kept %v", off, dmg, keep)
			}
		}
		if k != len(keep) || d != len(dmg) {
			t.Fatalf("pieces past the end: damage %+v, kept %v", dmg, keep)
		}
		out := logfile.Repair(b, head, keep)
		if again, more, _ := logfile.Scan(fm, out, len(head)); again != records || len(more) != 0 {
			t.Fatalf("the repaired log has %d records and damage %+v, want %d and none", again, more, records)
		}
		if raft || len(dmg) == 0 {
			return
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Replay(path, func(*store.KeyState) {})
		var ce *CorruptError
		if dmg[0].Tail() != (err == nil) || err == nil && r.Size != dmg[0].Offset || err != nil && (!errors.As(err, &ce) || ce.Offset != dmg[0].Offset) {
			t.Fatalf("the scan finds %+v, start-up says %+v, %v", dmg[0], r, err)
		}
	})
}
