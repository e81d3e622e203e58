package aof

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/store"
)

// setLog is a log of n records as n SETs leave it (key i, a 64-byte value: 104 bytes a
// record), and where each record starts; starts[n] is the end.
func setLog(n int) ([]byte, []int) {
	b := []byte(Header)
	starts := []int{len(b)}
	for i := range n {
		s := state(0, fmt.Sprintf("key%d", i), fmt.Sprintf("%-64d", i), 0)
		b = AppendState(b, &s)
		starts = append(starts, len(b))
	}
	return b, starts
}

// replayKeys replays the log at path and returns its records' keys.
func replayKeys(path string) ([]string, Replayed, error) { return collect(path) }

// TestReplayFlipAndTornTail is issue 21 item 4's report: 200 acknowledged records, one bit
// flipped in record 6 and the last 10 bytes cut off. Start-up used to cut the file to 636
// bytes (6 records), destroying 192 whole records after the flip; it must stop instead,
// naming the offset and the valid records after it, and leave the file as it is.
func TestReplayFlipAndTornTail(t *testing.T) {
	full, starts := setLog(200)
	if starts[6] != 636 {
		t.Fatalf("record 6 starts at %d, not 636 as in the report", starts[6])
	}
	for _, at := range []int{starts[6] + 3, starts[6] + 5, starts[6] + 20, starts[6] + 60, starts[7] - 1} {
		b := bytes.Clone(full[:len(full)-10])
		b[at] ^= 0x08
		path := filepath.Join(t.TempDir(), "tallyd.aof")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := replayKeys(path)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Offset != 636 || ce.After != 192 {
			t.Fatalf("flip at %d: %v, want a CorruptError at 636 with 192 valid records after it", at, err)
		}
		if ce.Repaired != (at < starts[6]+4) || ce.Next != int64(starts[7]) {
			t.Fatalf("flip at %d: %+v", at, ce)
		}
		for _, want := range []string{"offset 636", "192 valid records", "tallyd check-log --fix " + path} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the message does not say %q: %v", want, err)
			}
		}
		if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
			t.Fatalf("flip at %d: the file was changed", at)
		}
	}
}

// TestFixLogFlipAndTornTail: check-log --fix on the reported log keeps the original aside,
// and the repaired log replays every valid record: 198 (the damaged record and the torn
// one are gone; a record whose length alone was flipped is kept).
func TestFixLogFlipAndTornTail(t *testing.T) {
	full, starts := setLog(200)
	for _, c := range []struct {
		at   int
		keys int
	}{{starts[6] + 20, 198}, {starts[6] + 1, 199}} {
		b := bytes.Clone(full[:len(full)-10])
		b[c.at] ^= 0x08
		path := filepath.Join(t.TempDir(), "tallyd.aof")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		chk, err := CheckLog(path)
		if err != nil || chk.Kind != KindAOF || len(chk.Damage) != 2 || chk.Records != c.keys || chk.TailOnly() {
			t.Fatalf("flip at %d: check %+v, %v", c.at, chk, err)
		}
		if d := chk.Damage[0]; d.Offset != 636 || d.End != int64(starts[7]) || d.After != 192 {
			t.Fatalf("flip at %d: first damage %+v", c.at, d)
		}
		if d := chk.Damage[1]; d.Offset != int64(starts[199]) || !d.Torn || !d.Tail() {
			t.Fatalf("flip at %d: second damage %+v", c.at, d)
		}
		now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		_, aside, err := FixLog(path, now)
		if err != nil || aside != path+".broken-20250301T120000Z" {
			t.Fatalf("fix: %q, %v", aside, err)
		}
		if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, b) {
			t.Fatal("the original was not kept aside as it was")
		}
		keys, r, err := replayKeys(path)
		if err != nil || len(keys) != c.keys || r.Truncated != 0 || r.Size != chk.Kept {
			t.Fatalf("after the fix: %d keys, %+v, %v", len(keys), r, err)
		}
		if slices.Contains(keys, "key199") || slices.Contains(keys, "key6") != (c.keys == 199) {
			t.Fatalf("after the fix: keys %v", keys)
		}
		// A second fix has nothing to do; a second damage gets its own name aside.
		if _, again, err := FixLog(path, now); err != nil || again != "" {
			t.Fatalf("fixing a whole log: %q, %v", again, err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, again, err := FixLog(path, now); err != nil || again != aside+"-2" {
			t.Fatalf("a second fix at the same second: %q, %v", again, err)
		}
		if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, b) {
			t.Fatal("the first file aside was replaced")
		}
	}
}

// TestReplayPureTornTail: a torn tail alone (a crash's leftover) is still cut at start
// with nothing to ask, at every cut, and check-log says it is only that.
func TestReplayPureTornTail(t *testing.T) {
	full, starts := setLog(20)
	path := filepath.Join(t.TempDir(), "tallyd.aof")
	for cut := starts[19] + 1; cut < len(full); cut++ {
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		chk, err := CheckLog(path)
		if err != nil || !chk.TailOnly() || chk.Records != 19 {
			t.Fatalf("cut at %d: check %+v, %v", cut, chk, err)
		}
		keys, r, err := replayKeys(path)
		if err != nil || len(keys) != 19 || r.Truncated != int64(cut-starts[19]) || r.TailWhy != "record cut off by the end of the file" {
			t.Fatalf("cut at %d: %d keys, %+v, %v", cut, len(keys), r, err)
		}
	}
}

// damageTrial is one random log: records with unique keys (values sometimes holding whole
// records, as a client may store), some bits flipped and the tail cut.
type damageTrial struct {
	b      []byte // the damaged file
	keys   []string
	starts []int // of each record in the undamaged log; the last is its end
	flips  []int
	cut    int
}

func newDamageTrial(rng *rand.Rand, flips int, tear bool) damageTrial {
	var tr damageTrial
	b := []byte(Header)
	tr.starts = []int{len(b)}
	n := 2 + rng.IntN(40)
	for i := range n {
		s := state(uint8(rng.IntN(3)), fmt.Sprintf("k%d", i), "", rng.IntN(3))
		s.Value = make([]byte, rng.IntN(80))
		for j := range s.Value {
			s.Value[j] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			in := state(0, fmt.Sprintf("inner%d", i), "x", rng.IntN(2))
			s.Value = AppendState(s.Value, &in)
		}
		if rng.IntN(8) == 0 {
			s = store.KeyState{Ceil: uint64(1 + rng.IntN(1000))}
		}
		tr.keys = append(tr.keys, keyOf(&s))
		b = AppendState(b, &s)
		tr.starts = append(tr.starts, len(b))
	}
	tr.cut = len(b)
	if tear {
		tr.cut -= 1 + rng.IntN(min(200, len(b)-len(Header)-1))
	}
	tr.b = bytes.Clone(b[:tr.cut])
	for range flips {
		at := len(Header) + rng.IntN(tr.cut-len(Header))
		tr.b[at] ^= 1 << rng.IntN(8)
		tr.flips = append(tr.flips, at)
	}
	return tr
}

// keyOf names a record for the trials: its key, or the reservation's ceiling.
func keyOf(s *store.KeyState) string {
	if s.Ceil != 0 {
		return fmt.Sprintf("ceil%d", s.Ceil)
	}
	return strings.TrimRight(string(s.Key[:]), "\x00")
}

// intact returns the keys of the records that are whole before the cut and have no
// flipped bit.
func (tr damageTrial) intact() []string {
	var keys []string
	for i, k := range tr.keys {
		if tr.starts[i+1] > tr.cut || slices.ContainsFunc(tr.flips, func(at int) bool { return at >= tr.starts[i] && at < tr.starts[i+1] }) {
			continue
		}
		keys = append(keys, k)
	}
	return keys
}

// oneWholeFlip reports whether the trial has one flipped bit, in a record the cut left
// whole.
func (tr damageTrial) oneWholeFlip() bool {
	if len(tr.flips) != 1 {
		return false
	}
	for i := range tr.keys {
		if tr.flips[0] >= tr.starts[i] && tr.flips[0] < tr.starts[i+1] {
			return tr.starts[i+1] <= tr.cut
		}
	}
	return false
}

// replayAll replays the log at path and returns the names of its records.
func replayAll(path string) ([]string, Replayed, error) {
	var keys []string
	r, err := Replay(path, func(s *store.KeyState) { keys = append(keys, keyOf(s)) })
	return keys, r, err
}

// isSubsequence reports whether every element of sub is in all, in order.
func isSubsequence(sub, all []string) bool {
	i := 0
	for _, s := range all {
		if i < len(sub) && s == sub[i] {
			i++
		}
	}
	return i == len(sub)
}

// checkTrial runs one trial: start-up either stops, leaving the file as it is, or replays
// every intact record; check-log --fix then keeps the original aside and leaves a log that
// replays every intact record (and, with one flip, only records of the log, none from a
// value).
func checkTrial(t *testing.T, tr damageTrial, dir string) {
	t.Helper()
	path := filepath.Join(dir, "tallyd.aof")
	if err := os.WriteFile(path, tr.b, 0o600); err != nil {
		t.Fatal(err)
	}
	intact := tr.intact()
	keys, _, err := replayAll(path)
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		if left, _ := os.ReadFile(path); !bytes.Equal(left, tr.b) {
			t.Fatalf("flips %v, cut %d: start-up stopped but changed the file", tr.flips, tr.cut)
		}
	case err != nil:
		t.Fatalf("flips %v, cut %d: %v", tr.flips, tr.cut, err)
	case !isSubsequence(intact, keys):
		t.Fatalf("flips %v, cut %d of %v: start-up replayed %v and lost intact records %v", tr.flips, tr.cut, tr.starts, keys, intact)
	default:
		return // started: nothing for check-log to do but what start-up did
	}
	if err := os.WriteFile(path, tr.b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, aside, err := FixLog(path, time.Now())
	if err != nil {
		t.Fatalf("flips %v, cut %d: fix: %v", tr.flips, tr.cut, err)
	}
	if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, tr.b) {
		t.Fatal("the original was not kept aside")
	}
	os.Remove(aside)
	keys, r, err := replayAll(path)
	if err != nil || r.Truncated != 0 || !isSubsequence(intact, keys) {
		t.Fatalf("flips %v, cut %d of %v: after the fix replayed %v (%+v, %v), intact %v", tr.flips, tr.cut, tr.starts, keys, r, err, intact)
	}
	if tr.oneWholeFlip() && !isSubsequence(keys, tr.keys) {
		t.Fatalf("flip %v, cut %d of %v: after the fix replayed %v: records that are not the log's", tr.flips, tr.cut, tr.starts, keys)
	}
}

// TestReplayRandomDamage: bits flipped and tails torn in random places never lose an intact
// record without the operator's --fix, and --fix loses none. (Start-up used to lose the
// middle of the log whenever a flip came with a torn tail.)
func TestReplayRandomDamage(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	dir := t.TempDir()
	for i := range 3000 {
		tr := newDamageTrial(rng, i%4, i%3 != 0)
		checkTrial(t, tr, dir)
	}
}

// TestScanEveryFlip: every single bit of a log whose values hold records, flipped with and
// without a torn tail: start-up loses nothing intact, and a fix loses nothing intact and
// takes no record out of a value (as checkTrial, in memory: start-up keeps the records
// before the first damage when that damage is a tail, and a fix keeps what scanLog keeps).
func TestScanEveryFlip(t *testing.T) {
	full, ends := embedLog()
	var keys []string
	names := func(b []byte) (names []string) {
		var ks store.KeyState
		for off := len(Header); off < len(b); {
			p, n, err := next(b[off:])
			if err != nil || decode(p, &ks) != nil {
				break
			}
			names = append(names, keyOf(&ks))
			off += n
		}
		return names
	}
	keys = names(full)
	starts := append([]int{len(Header)}, ends...)
	for _, cut := range []int{len(full), len(full) - 10} {
		for at := len(Header); at < cut; at++ {
			for bit := range 8 {
				tr := damageTrial{b: bytes.Clone(full[:cut]), keys: keys, starts: starts, flips: []int{at}, cut: cut}
				tr.b[at] ^= 1 << bit
				intact := tr.intact()
				_, dmg, keep := logfile.Scan(&aofFormat{}, tr.b, len(Header))
				if len(dmg) == 0 {
					t.Fatalf("flip at %d.%d: no damage found", at, bit)
				}
				if dmg[0].Tail() && !isSubsequence(intact, names(tr.b[:dmg[0].Offset])) {
					t.Fatalf("flip at %d.%d, cut %d: start-up would cut at %d and lose intact records", at, bit, cut, dmg[0].Offset)
				}
				fixed := names(logfile.Repair(tr.b, Header, keep))
				if !isSubsequence(intact, fixed) || tr.oneWholeFlip() && !isSubsequence(fixed, keys) {
					t.Fatalf("flip at %d.%d, cut %d: the fix keeps %v; intact %v (damage %+v)", at, bit, cut, fixed, intact, dmg)
				}
			}
		}
	}
}
