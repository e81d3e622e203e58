package aof

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/store"
)

func state(db uint8, key string, value string, holders int) store.KeyState {
	s := store.KeyState{DB: db}
	copy(s.Key[:], key)
	if value != "" {
		s.Value = []byte(value)
	}
	for i := range holders {
		h := store.HolderState{Levels: uint8(i + 1), Rcount: 3, Count: 0xFFFF, Start: int64(1e18 + i), Deadline: int64(2e18 + i),
			Token: uint64(1<<40 + i), Client: uint64(7<<50 + i)}
		lockwire.SetHolder(&h, lockwire.Words{Flag: 2, Timeout: 5, TimeoutFlag: 0x10, Expried: 120, ExpriedFlag: 0x4000})
		copy(h.LockID[:], key)
		h.LockID[15] = byte(i)
		s.Holders = append(s.Holders, h)
	}
	return s
}

func TestRecordRoundTrip(t *testing.T) {
	fenced := state(2, "f", "v", 1)
	fenced.Fence = 1 << 62
	for _, s := range []store.KeyState{state(0, "a", "", 0), state(3, "key", "value", 1), state(254, "k2", "", 3),
		state(1, "big", strings.Repeat("x", 70000), 2), fenced, {Ceil: 5 << 20}, {DB: 7, Flush: true},
		{DB: store.AllDBs, Flush: true}} {
		b := AppendState(nil, &s)
		if !shaped(b) {
			t.Fatalf("a record of %+v is not shaped", s)
		}
		p, n, err := next(b)
		if err != nil || n != len(b) {
			t.Fatalf("next: %d of %d, %v", n, len(b), err)
		}
		var got store.KeyState
		if err := decode(p, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Holders) == 0 {
			got.Holders = nil
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
		}
	}
}

func TestNextRejectsDamage(t *testing.T) {
	s := state(1, "k", "v", 1)
	b := AppendState(nil, &s)
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, _, err := next(c); err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
	}
	for i := range len(b) - 1 {
		if _, _, err := next(b[:i]); !errors.Is(err, errShort) {
			t.Fatalf("cut at %d: %v, want errShort", i, err)
		}
	}
}

// writeLog writes a log of n records, key i with value "v<i>", and returns its path and
// the offsets where each record starts.
func writeLog(t *testing.T, n int) (string, []int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.aof")
	b := []byte(Header)
	var offs []int
	for i := range n {
		offs = append(offs, len(b))
		s := state(0, "key"+string(rune('a'+i)), "v"+string(rune('a'+i)), 1)
		b = AppendState(b, &s)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, offs
}

func collect(path string) ([]string, Replayed, error) {
	var keys []string
	r, err := Replay(path, func(s *store.KeyState) { keys = append(keys, strings.TrimRight(string(s.Key[:]), "\x00")) })
	return keys, r, err
}

func TestReplayWholeLog(t *testing.T) {
	path, _ := writeLog(t, 5)
	keys, r, err := collect(path)
	if err != nil || len(keys) != 5 || r.Truncated != 0 || r.Records != 5 {
		t.Fatalf("keys %v, %+v, %v", keys, r, err)
	}
}

func TestReplayCutsTornTail(t *testing.T) {
	path, offs := writeLog(t, 5)
	full, _ := os.ReadFile(path)
	for _, cut := range []int{offs[4] + 1, offs[4] + 8, len(full) - 1} {
		if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		keys, r, err := collect(path)
		if err != nil || len(keys) != 4 || r.Truncated != int64(cut-offs[4]) || r.Size != int64(offs[4]) {
			t.Fatalf("cut at %d: keys %v, %+v, %v", cut, keys, r, err)
		}
		if st, _ := os.Stat(path); st.Size() != int64(offs[4]) {
			t.Fatalf("file is %d bytes after the cut, want %d", st.Size(), offs[4])
		}
	}
	// Garbage after the last record (a torn page) is a tail too.
	_ = os.WriteFile(path, append(bytes.Clone(full), 0, 0, 0, 0, 7, 7, 7, 7, 1, 2, 3), 0o644)
	keys, r, err := collect(path)
	if err != nil || len(keys) != 5 || r.Truncated != 11 {
		t.Fatalf("garbage tail: keys %v, %+v, %v", keys, r, err)
	}
}

func TestReplayStopsAtCorruptMiddle(t *testing.T) {
	path, offs := writeLog(t, 5)
	full, _ := os.ReadFile(path)
	for _, at := range []int{offs[2] + 3, offs[2] + 12, offs[3] - 1} {
		c := bytes.Clone(full)
		c[at] ^= 0x01
		_ = os.WriteFile(path, c, 0o644)
		_, _, err := collect(path)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Offset != int64(offs[2]) {
			t.Fatalf("flip at %d: %v, want a CorruptError at %d", at, err, offs[2])
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Fatalf("message does not name the offset: %v", err)
		}
		if st, _ := os.Stat(path); st.Size() != int64(len(full)) {
			t.Fatal("a corrupt middle must leave the file as it is")
		}
	}
}

func TestReplayNewAndForeignFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.aof")
	keys, r, err := collect(path)
	if err != nil || len(keys) != 0 || r.Size != int64(len(Header)) {
		t.Fatalf("new file: %v %+v %v", keys, r, err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != Header {
		t.Fatalf("new file holds %q", b)
	}
	_ = os.WriteFile(path, []byte("*1\r\n$4\r\nPING\r\n"), 0o644)
	if _, _, err := collect(path); err == nil || !strings.Contains(err.Error(), "not a tallyd append-only log") {
		t.Fatalf("foreign file: %v", err)
	}
}

func TestWriterAppendsAndRewrites(t *testing.T) {
	for _, pol := range []Policy{Always, EverySec, No} {
		t.Run(pol.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.aof")
			r, err := Replay(path, func(*store.KeyState) {})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var last Progress
			progress := make(chan struct{}, 100)
			w, err := Open(path, r.Size, pol, func(p Progress) {
				mu.Lock()
				last = p
				mu.Unlock()
				progress <- struct{}{}
			})
			if err != nil {
				t.Fatal(err)
			}
			a, b := state(0, "a", "1", 1), state(0, "b", "2", 1)
			seq := w.Append(ToLog, AppendState(nil, &a))
			waitFor(t, progress, &mu, &last, func(p Progress) bool {
				return p.Written >= seq && (pol != Always || p.Synced >= seq)
			})
			// A rewrite: the snapshot holds b only; a change made meanwhile goes to both.
			w.BeginRewrite()
			w.Append(ToRewrite, AppendState(nil, &b))
			c := state(0, "c", "3", 1)
			w.Append(ToBoth, AppendState(nil, &c))
			w.CommitRewrite()
			d := state(0, "d", "4", 1)
			seq = w.Append(ToLog, AppendState(nil, &d))
			waitFor(t, progress, &mu, &last, func(p Progress) bool { return p.Written >= seq })
			w.Close()
			keys, _, err := collect(path)
			if err != nil || strings.Join(keys, ",") != "b,c,d" {
				t.Fatalf("after rewrite: %v, %v", keys, err)
			}
			if st := w.Stats(); st.Rewrites != 1 || st.Size != st.BaseSize+int64(len(AppendState(nil, &d))) {
				t.Fatalf("stats %+v", st)
			}
			if _, err := os.Stat(path + ".rewrite"); !os.IsNotExist(err) {
				t.Fatal("the temporary file is left behind")
			}
		})
	}
}

func waitFor(t *testing.T, ch chan struct{}, mu *sync.Mutex, last *Progress, ok func(Progress) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		p := *last
		mu.Unlock()
		if ok(p) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("writer progress stuck at %+v", p)
		}
	}
}

func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"always", "everysec", "no"} {
		p, err := ParsePolicy(s)
		if err != nil || p.String() != s {
			t.Fatalf("%s: %v %v", s, p, err)
		}
	}
	if _, err := ParsePolicy("sometimes"); err == nil {
		t.Fatal("bad policy accepted")
	}
}

// A rewrite that cannot create its file (here a directory is in the way; EMFILE or ENOSPC
// the same) is abandoned and reported as a rewrite failure, not as a failed log write: the
// log goes on taking records, and with appendfsync always the server is not stopped for it.
func TestRewriteFailureIsNotALogFailure(t *testing.T) {
	for _, pol := range []Policy{Always, EverySec, No} {
		t.Run(pol.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "w.aof")
			if err := os.MkdirAll(filepath.Join(path+".rewrite", "in-the-way"), 0o700); err != nil {
				t.Fatal(err)
			}
			r, err := Replay(path, func(*store.KeyState) {})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var last Progress
			var logErr, rwErr error
			progress := make(chan struct{}, 100)
			w, err := Open(path, r.Size, pol, func(p Progress) {
				mu.Lock()
				last = p
				if p.Err != nil {
					logErr = p.Err
				}
				if p.RewriteErr != nil {
					rwErr = p.RewriteErr
				}
				mu.Unlock()
				progress <- struct{}{}
			})
			if err != nil {
				t.Fatal(err)
			}
			a, b, c, d := state(0, "a", "1", 1), state(0, "b", "2", 1), state(0, "c", "3", 1), state(0, "d", "4", 1)
			w.Append(ToLog, AppendState(nil, &a))
			w.BeginRewrite()
			w.Append(ToRewrite, AppendState(nil, &b))
			w.Append(ToBoth, AppendState(nil, &c))
			w.CommitRewrite()
			seq := w.Append(ToLog, AppendState(nil, &d))
			waitFor(t, progress, &mu, &last, func(p Progress) bool {
				return p.Written >= seq && (pol != Always || p.Synced >= seq)
			})
			w.Close()
			mu.Lock()
			defer mu.Unlock()
			if logErr != nil {
				t.Fatalf("a failed rewrite was reported as a log failure: %v", logErr)
			}
			if rwErr == nil || !strings.Contains(rwErr.Error(), "create rewrite file") {
				t.Fatalf("rewrite error: %v, want the failed create", rwErr)
			}
			keys, _, err := collect(path)
			if err != nil || strings.Join(keys, ",") != "a,c,d" {
				t.Fatalf("log after the failed rewrite: %v, %v", keys, err)
			}
			if st := w.Stats(); st.Rewrites != 0 || st.LastWriteErr != "" {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// appendState1 writes s as logs did before fencing tokens (kind 1): no fence, and holders
// without their token and client id.
func appendState1(s *store.KeyState) []byte {
	b := AppendState(nil, s)
	p := append([]byte{kindState1}, b[recHead+1:recHead+18]...) // db and key
	p = append(p, b[recHead+26:]...)                            // from the value length on
	head := 22 + 2 + len(s.Value)
	out := append(make([]byte, recHead), p[:head]...)
	for i := range s.Holders {
		at := head + i*holderLen
		out = append(out, p[at:at+holderLen1]...)
	}
	return seal(out, 0)
}

// Logs written before fencing tokens still replay: their holders have token 0.
func TestRecordKind1(t *testing.T) {
	s := state(3, "key", "value", 2)
	b := appendState1(&s)
	if !shaped(b) {
		t.Fatal("a kind 1 record is not shaped")
	}
	p, _, err := next(b)
	if err != nil {
		t.Fatal(err)
	}
	var got store.KeyState
	if err := decode(p, &got); err != nil {
		t.Fatal(err)
	}
	for i := range s.Holders {
		s.Holders[i].Token, s.Holders[i].Client = 0, 0
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("kind 1:\n got %+v\nwant %+v", got, s)
	}
}
