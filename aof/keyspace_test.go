package aof

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/store"
)

// ksRecs encodes some keyspace records of every kind.
func ksRecs(n int) ([]byte, []store.Record) {
	var recs []store.Record
	for i := range n {
		k := []byte("key:" + strings.Repeat("x", i%7) + string(rune('a'+i%26)))
		switch i % 8 {
		case 0:
			recs = append(recs, store.Record{Op: store.RecSet, DB: uint8(i % 16), Kind: store.KindString, Key: k, Value: []byte("v"), At: int64(i)})
		case 1:
			recs = append(recs, store.Record{Op: store.RecSet, DB: 1, Kind: store.KindInt, Key: k, Int: -int64(i)})
		case 2:
			recs = append(recs, store.Record{Op: store.RecDel, DB: 2, Key: k})
		case 3:
			recs = append(recs, store.Record{Op: store.RecExpire, DB: 3, Key: k, At: 1 << 40})
		case 4:
			recs = append(recs, store.Record{Op: store.RecAppend, DB: 4, Key: k, Value: []byte("tail")})
		case 5:
			recs = append(recs, store.Record{Op: store.RecHSet, DB: 5, Key: k, Value: []byte{1, 'f', 1, 'v'}})
		case 6:
			recs = append(recs, store.Record{Op: store.RecFence, DB: 6, Key: k, Int: 77})
		case 7:
			recs = append(recs, store.Record{Op: store.RecFlush, DB: store.AllDBs})
		}
	}
	var b []byte
	for i := range recs {
		b = recs[i].Append(b)
	}
	return b, recs
}

func recString(r *store.Record) string { return string(r.Append(nil)) }

// TestKeyspaceRunRoundTrip: runs of keyspace records decode to the records given, in
// order, beside key states, peers and messages; a long run is split at record boundaries.
func TestKeyspaceRunRoundTrip(t *testing.T) {
	for _, n := range []int{1, 8, 1000} {
		b, want := ksRecs(n)
		st := state(1, "lock", "v", 1)
		var log []byte
		log = AppendState(log, &st)
		log = AppendKeyspace(log, b)
		log = AppendState(log, &st)
		var got []string
		states := 0
		err := DecodeAll(log, &Handlers{State: func(*store.KeyState) { states++ },
			Keyspace: func(r *store.Record) { got = append(got, recString(r)) }})
		if err != nil || states != 2 || len(got) != len(want) {
			t.Fatalf("n=%d: err %v, %d states, %d of %d records", n, err, states, len(got), len(want))
		}
		for i := range want {
			if got[i] != recString(&want[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
		// A reader of key states only is told, never given a partial answer silently.
		if err := DecodeRecords(log, func(*store.KeyState) {}, nil); !errors.Is(err, errNoKeyspace) {
			t.Fatalf("DecodeRecords of keyspace records: %v", err)
		}
	}
	// Split: records of 20 KiB values, 64 KiB runs.
	big := strings.Repeat("v", 20<<10)
	var b []byte
	for i := range 10 {
		r := store.Record{Op: store.RecSet, DB: 0, Kind: store.KindString, Key: []byte{byte('a' + i)}, Value: []byte(big)}
		b = r.Append(b)
	}
	log := AppendKeyspace(nil, b)
	runs, recs := 0, 0
	for off := 0; off < len(log); {
		p, n, err := next(log[off:])
		if err != nil || p[0] != kindKeyspace || !shaped(log[off:]) {
			t.Fatalf("run at %d: %v", off, err)
		}
		if len(p)-ksHead > KeyspaceRun {
			t.Fatalf("a run of %d bytes of records", len(p)-ksHead)
		}
		runs++
		off += n
	}
	if err := DecodeAll(log, &Handlers{Keyspace: func(*store.Record) { recs++ }}); err != nil || recs != 10 || runs < 3 {
		t.Fatalf("split: %d runs, %d records, %v", runs, recs, err)
	}
	if got := AppendKeyspace([]byte("x"), nil); string(got) != "x" {
		t.Fatal("no records appended something")
	}
}

// TestKeyspaceRunDamage: a run whose bytes are damaged, even with a checksum that matches
// (a writer's bug), is refused whole: none of its records is passed.
func TestKeyspaceRunDamage(t *testing.T) {
	b, _ := ksRecs(20)
	log := AppendKeyspace(nil, b)
	for i := recHead; i < len(log); i++ {
		bad := bytes.Clone(log)
		bad[i] ^= 0x55
		n := 0
		if err := DecodeAll(bad, &Handlers{Keyspace: func(*store.Record) { n++ }}); err == nil {
			t.Fatalf("a flip at %d passed", i)
		}
		if n != 0 {
			t.Fatalf("a flip at %d passed %d records", i, n)
		}
		// Resealed: the checksum matches, the shape (count, length, records) must not.
		p := bad[recHead:]
		if err := decodeKeyspace(p, nil); err == nil {
			// A flip inside a value or a key's bytes is a valid record: fine.
			continue
		}
		resealed := seal(bytes.Clone(bad), 0)
		if err := DecodeAll(resealed, &Handlers{Keyspace: func(*store.Record) { n++ }}); err == nil || n != 0 {
			t.Fatalf("resealed flip at %d: %v, %d records passed", i, err, n)
		}
	}
}

// TestReplayKeyspace: a log of key states and keyspace runs replays both in order; a torn
// keyspace run at the tail is cut off, one in the middle stops start-up, and a reader that
// takes no keyspace records refuses the log instead of cutting it.
func TestReplayKeyspace(t *testing.T) {
	dir := t.TempDir()
	b, want := ksRecs(50)
	st := state(0, "k", "v", 1)
	var first, second []byte
	n := 0
	for rb := b; len(rb) > 0; n++ {
		_, m, _ := store.ReadRecord(rb)
		if n < 25 {
			first = append(first, rb[:m]...)
		} else {
			second = append(second, rb[:m]...)
		}
		rb = rb[m:]
	}
	body := AppendState(nil, &st)
	body = AppendKeyspace(body, first)
	mid := len(body)
	body = AppendKeyspace(body, second)
	path := filepath.Join(dir, "a.aof")
	write := func(b []byte) {
		if err := os.WriteFile(path, append([]byte(Header), b...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	replay := func() ([]string, int, Replayed, error) {
		var got []string
		states := 0
		r, err := ReplayAll(path, func(*store.KeyState) { states++ }, func(r *store.Record) { got = append(got, recString(r)) })
		return got, states, r, err
	}
	write(body)
	got, states, r, err := replay()
	if err != nil || states != 1 || len(got) != 50 || r.Records != 3 || r.Truncated != 0 {
		t.Fatalf("whole: %v, %d states, %d records, %+v", err, states, len(got), r)
	}
	for i := range want {
		if got[i] != recString(&want[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
	// Torn inside the last run: cut off, the first run kept.
	write(body[:len(body)-3])
	got, _, r, err = replay()
	if err != nil || len(got) != 25 || r.Truncated == 0 || r.Size != int64(len(Header)+mid) {
		t.Fatalf("torn: %v, %d records, %+v", err, len(got), r)
	}
	// A flip in the first run, the second intact after it: corrupt, nothing cut.
	bad := bytes.Clone(body)
	bad[len(AppendState(nil, &st))+recHead+ksHead+2] ^= 0x40 // inside the first run's records
	write(bad)
	var ce *CorruptError
	if _, _, _, err = replay(); !errors.As(err, &ce) {
		t.Fatalf("a damaged run before a whole one: %v", err)
	}
	// A reader without a keyspace handler: an error, and the file left whole.
	write(body)
	if _, err := Replay(path, func(*store.KeyState) {}); err == nil || !strings.Contains(err.Error(), "keyspace") {
		t.Fatalf("Replay without a keyspace handler: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != int64(len(Header)+len(body)) {
		t.Fatalf("the log was cut to %d bytes", fi.Size())
	}
	// check-log sees no damage in a log with keyspace runs, and the torn one's tail only.
	chk, err := CheckLog(path)
	if err != nil || chk.Damaged() || chk.Records != 3 {
		t.Fatalf("CheckLog: %v, %+v", err, chk)
	}
	write(body[:len(body)-3])
	chk, err = CheckLog(path)
	if err != nil || !chk.TailOnly() {
		t.Fatalf("CheckLog of the torn log: %v, %+v", err, chk)
	}
}

// TestKeyspaceClaims: the length the scanner reads from a run's first bytes is its own.
func TestKeyspaceClaims(t *testing.T) {
	b, _ := ksRecs(30)
	log := AppendKeyspace(nil, b)
	p := log[recHead:]
	size := uint32(len(p))
	for i := 0; i <= len(p); i++ {
		want := logfile.Allows
		if i >= ksHead {
			want = logfile.Confirms
		}
		if f := aofClaims(p[:i], size); f != want {
			t.Fatalf("claims of %d bytes: %v, want %v", i, f, want)
		}
		if f := aofClaims(p[:i], size+1); i >= ksHead && f != logfile.Contradicts {
			t.Fatalf("a wrong size claimed by %d bytes: %v", i, f)
		}
	}
	if n, ok := aofFieldsLen(p); !ok || n != uint64(size) {
		t.Fatalf("FieldsLen %d %v, want %d", n, ok, size)
	}
}
