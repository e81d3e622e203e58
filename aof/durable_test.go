package aof

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// fullDisk is a log file on a disk with room for only so many bytes: a write past that
// writes what fits and fails with ENOSPC, as write(2) does.
type fullDisk struct {
	*os.File
	d *disk
}

type disk struct {
	mu        sync.Mutex
	room      int64 // bytes the file may hold
	failSync  bool
	truncates int
}

func (f fullDisk) Write(b []byte) (int, error) {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := int64(len(b))
	if left := f.d.room - st.Size(); n > left {
		n = max(left, 0)
		m, _ := f.File.Write(b[:n])
		return m, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(b)
}

func (f fullDisk) Truncate(size int64) error {
	f.d.mu.Lock()
	f.d.truncates++
	f.d.mu.Unlock()
	return f.File.Truncate(size)
}

func (f fullDisk) Sync() error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	if f.d.failSync {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func (d *disk) set(room int64) {
	d.mu.Lock()
	d.room = room
	d.mu.Unlock()
}

// onDisk makes the writer's files live on d for the test.
func onDisk(t *testing.T, d *disk) {
	old := openFile
	openFile = func(name string, flag int, perm os.FileMode) (logFile, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return fullDisk{f, d}, nil
	}
	t.Cleanup(func() { openFile = old })
}

type progressLog struct {
	mu         sync.Mutex
	last       Progress
	errs       int // batches whose log write or fsync failed
	rewriteErr error
	ch         chan struct{}
}

func (p *progressLog) done(pr Progress) {
	p.mu.Lock()
	p.last = pr
	if pr.Err != nil {
		p.errs++
	}
	if pr.RewriteErr != nil {
		p.rewriteErr = pr.RewriteErr
	}
	p.mu.Unlock()
	select {
	case p.ch <- struct{}{}:
	default:
	}
}

func (p *progressLog) wait(t *testing.T, ok func(Progress) bool) Progress {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		pr := p.last
		p.mu.Unlock()
		if ok(pr) {
			return pr
		}
		select {
		case <-p.ch:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("writer progress stuck at %+v", pr)
		}
	}
}

// TestWriterFullDiskLeavesNoTornRecord is issue 12 items 2 and 3: a write that runs out of
// space is cut back to the last whole record, nothing it did not write is reported
// written, the writer says it is failing (as Redis's MISCONF words it), and when space
// comes back the records it could not write are written, in order, before later ones, so
// the log replays whole.
func TestWriterFullDiskLeavesNoTornRecord(t *testing.T) {
	for _, pol := range []Policy{EverySec, No} {
		t.Run(pol.String(), func(t *testing.T) {
			d := &disk{room: 1 << 30}
			onDisk(t, d)
			path := filepath.Join(t.TempDir(), "w.aof")
			r, err := Replay(path, func(*store.KeyState) {})
			if err != nil {
				t.Fatal(err)
			}
			pl := &progressLog{ch: make(chan struct{}, 1)}
			w, err := Open(path, r.Size, pol, pl.done)
			if err != nil {
				t.Fatal(err)
			}
			rec := func(i int) []byte {
				s := state(0, fmt.Sprintf("k%03d", i), strings.Repeat("v", 100+i), 1)
				return AppendState(nil, &s)
			}
			var seq uint64
			for i := range 5 {
				seq = w.Append(ToLog, rec(i))
			}
			pl.wait(t, func(p Progress) bool { return p.Written == seq })
			good := seq // the stream position of the file's end
			st, _ := os.Stat(path)
			// Room for one and a half more records: the second is cut short by ENOSPC.
			d.set(st.Size() + int64(len(rec(5))) + int64(len(rec(6)))/2)
			seq = w.Append(ToLog, append(rec(5), rec(6)...))
			pl.wait(t, func(p Progress) bool { return p.Err != nil })
			if why := w.Failing(); why != "No space left on device" {
				t.Fatalf("Failing() = %q, want Redis's strerror text", why)
			}
			if p := pl.wait(t, func(Progress) bool { return true }); p.Written > good {
				t.Fatalf("written %d reported past the file's last whole batch %d", p.Written, good)
			}
			if st, _ := os.Stat(path); st.Size() != int64(len(Header))+int64(good) {
				t.Fatalf("file is %d bytes, want %d: a torn record was left", st.Size(), int64(len(Header))+int64(good))
			}
			// Replay now (a crash here) must find whole records only, no torn one.
			keys, rr, err := collect(path)
			if err != nil || rr.Truncated != 0 || len(keys) != 5 {
				t.Fatalf("log while the disk is full: keys %v, %+v, %v", keys, rr, err)
			}
			// More records come while the disk is full; then space is freed.
			for i := 7; i < 10; i++ {
				seq = w.Append(ToLog, rec(i))
			}
			time.Sleep(150 * time.Millisecond)
			d.set(1 << 30)
			pl.wait(t, func(p Progress) bool { return p.Written == seq && p.Err == nil })
			if why := w.Failing(); why != "" {
				t.Fatalf("still failing after a write succeeded: %q", why)
			}
			w.Close()
			keys, rr, err = collect(path)
			if err != nil || rr.Truncated != 0 {
				t.Fatalf("replay after space came back: %+v, %v", rr, err)
			}
			var want []string
			for i := range 10 {
				want = append(want, fmt.Sprintf("k%03d", i))
			}
			if strings.Join(keys, ",") != strings.Join(want, ",") {
				t.Fatalf("records %v, want %v in order", keys, want)
			}
		})
	}
}

// TestWriterFsyncFailureIsFailing: a failed fsync (everysec's background one) makes the
// writer report failing until an fsync succeeds.
func TestWriterFsyncFailureIsFailing(t *testing.T) {
	d := &disk{room: 1 << 30, failSync: true}
	onDisk(t, d)
	path := filepath.Join(t.TempDir(), "w.aof")
	r, _ := Replay(path, func(*store.KeyState) {})
	pl := &progressLog{ch: make(chan struct{}, 1)}
	w, err := Open(path, r.Size, EverySec, pl.done)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := state(0, "a", "1", 0)
	w.Append(ToLog, AppendState(nil, &s))
	deadline := time.Now().Add(5 * time.Second)
	for w.Failing() != "Input/output error" {
		if time.Now().After(deadline) {
			t.Fatalf("Failing() = %q after a failed fsync", w.Failing())
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.mu.Lock()
	d.failSync = false
	d.mu.Unlock()
	w.Append(ToLog, AppendState(nil, &s))
	for w.Failing() != "" {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("Failing() = %q after fsync works again", w.Failing())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWriterRewriteOnFullDisk: a rewrite whose file runs out of space is dropped, and the
// log it would have replaced stays whole.
func TestWriterRewriteOnFullDisk(t *testing.T) {
	d := &disk{room: 1 << 30}
	onDisk(t, d)
	path := filepath.Join(t.TempDir(), "w.aof")
	r, _ := Replay(path, func(*store.KeyState) {})
	pl := &progressLog{ch: make(chan struct{}, 1)}
	w, err := Open(path, r.Size, No, pl.done)
	if err != nil {
		t.Fatal(err)
	}
	a := state(0, "a", "1", 0)
	seq := w.Append(ToLog, AppendState(nil, &a))
	pl.wait(t, func(p Progress) bool { return p.Written == seq })
	st, _ := os.Stat(path)
	d.set(st.Size()) // every file is capped at this size: the rewrite's snapshot does not fit
	w.BeginRewrite()
	big := state(0, "b", strings.Repeat("x", 1000), 0)
	w.Append(ToRewrite, AppendState(nil, &big))
	w.CommitRewrite()
	w.Close()
	keys, rr, err := collect(path)
	if err != nil || rr.Truncated != 0 || strings.Join(keys, ",") != "a" || w.Stats().Rewrites != 0 {
		t.Fatalf("after a failed rewrite: keys %v, %+v, %v, stats %+v", keys, rr, err, w.Stats())
	}
	// It is reported as a dropped rewrite, not as a failed log (which would refuse writes,
	// or stop the server with always).
	if pl.rewriteErr == nil || pl.errs != 0 || w.Failing() != "" {
		t.Fatalf("rewrite error %v, log errors %d, failing %q", pl.rewriteErr, pl.errs, w.Failing())
	}
	if _, err := os.Stat(path + ".rewrite"); !os.IsNotExist(err) {
		t.Fatal("the dropped rewrite's file is left behind")
	}
}

// TestFileModes is issue 12 item 10: the log and the rewrite file are 0600.
func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.aof")
	if _, err := Replay(path, func(*store.KeyState) {}); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("log created %v, want 0600", st.Mode().Perm())
	}
	// The rewrite file is looked at while it exists: the disk refuses its snapshot's bytes,
	// so the test sees the file the writer created before it is removed.
	var mode os.FileMode
	old := openFile
	openFile = func(name string, flag int, perm os.FileMode) (logFile, error) {
		f, err := old(name, flag, perm)
		if err == nil && strings.HasSuffix(name, ".rewrite") {
			st, _ := os.Stat(name)
			mode = st.Mode().Perm()
		}
		return f, err
	}
	t.Cleanup(func() { openFile = old })
	pl := &progressLog{ch: make(chan struct{}, 1)}
	w, err := Open(path, int64(len(Header)), No, pl.done)
	if err != nil {
		t.Fatal(err)
	}
	w.BeginRewrite()
	w.CommitRewrite()
	w.Close()
	if mode != 0o600 {
		t.Fatalf("rewrite file created %v, want 0600", mode)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("log after a rewrite %v, want 0600", st.Mode().Perm())
	}
}

// embedLog is a log whose values hold whole records (and runs of them), as a client can
// make them: the bytes a torn tail leaves can look like records.
func embedLog() (b []byte, ends []int) {
	b = []byte(Header)
	inner := func(i int) []byte {
		var v []byte
		for j := range i%3 + 1 {
			s := state(0, fmt.Sprintf("in%d.%d", i, j), fmt.Sprintf("x%d", j), j%2)
			v = AppendState(v, &s)
		}
		return v
	}
	for i := range 8 {
		s := state(0, fmt.Sprintf("key%d", i), "", i%2)
		v := append([]byte("pre"), inner(i)...)
		if i%2 == 0 {
			v = append(v, "post"...)
		}
		s.Value = v
		b = AppendState(b, &s)
		ends = append(ends, len(b))
	}
	return b, ends
}

// TestReplayTornTailAtEveryOffset is issue 12 item 4: a log whose values embed valid
// records, cut at every offset, replays the whole records before the cut and cuts the
// rest; start-up never stops.
func TestReplayTornTailAtEveryOffset(t *testing.T) {
	full, ends := embedLog()
	path := filepath.Join(t.TempDir(), "t.aof")
	for cut := len(Header); cut <= len(full); cut++ {
		whole, keep := 0, len(Header)
		for _, e := range ends {
			if e <= cut {
				whole, keep = whole+1, e
			}
		}
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		keys, r, err := collect(path)
		if err != nil {
			t.Fatalf("cut at %d: start-up stops: %v", cut, err)
		}
		if len(keys) != whole || r.Size != int64(keep) || r.Truncated != int64(cut-keep) {
			t.Fatalf("cut at %d: %d records (%v), %+v; want %d records, %d bytes kept", cut, len(keys), keys, r, whole, keep)
		}
		for i, k := range keys {
			if k != fmt.Sprintf("key%d", i) {
				t.Fatalf("cut at %d: record %d is %q: a record inside a value was replayed", cut, i, k)
			}
		}
	}
}

// TestReplayDamagedMiddleWithEmbeddedRecords: damage to any byte of a record with whole
// records after it still stops start-up (and leaves the file alone), values that look like
// records or not; damage to the last record only is a tail, unless only its length field
// was damaged: the record is whole then (its payload matches its checksum), and start-up
// stops rather than destroy it.
func TestReplayDamagedMiddleWithEmbeddedRecords(t *testing.T) {
	full, ends := embedLog()
	path := filepath.Join(t.TempDir(), "d.aof")
	start := len(Header)
	for r, end := range ends {
		for at := start; at < end; at++ {
			for _, dmg := range []func(byte) byte{func(c byte) byte { return c ^ 0x01 }, func(c byte) byte { return c ^ 0x80 }} {
				c := bytes.Clone(full)
				c[at] = dmg(c[at])
				if err := os.WriteFile(path, c, 0o600); err != nil {
					t.Fatal(err)
				}
				keys, rr, err := collect(path)
				if r == len(ends)-1 && at >= start+4 {
					if err != nil || len(keys) != r || rr.Size != int64(start) {
						t.Fatalf("damage at %d of the last record: keys %v, %+v, %v", at, keys, rr, err)
					}
					continue
				}
				var ce *CorruptError
				if !errors.As(err, &ce) || ce.Offset != int64(start) || ce.Repaired != (at < start+4) {
					t.Fatalf("damage at %d of record %d: %v (keys %v), want a CorruptError at %d", at, r, err, keys, start)
				}
				if ce.Repaired && ce.Next != int64(end) {
					t.Fatalf("damage at %d of record %d: the record is whole to %d, not %d", at, r, end, ce.Next)
				}
				if st, _ := os.Stat(path); st.Size() != int64(len(full)) {
					t.Fatal("a damaged middle must leave the file as it is")
				}
			}
		}
		start = end
	}
}

// TestShaped: every whole record is shaped, and shaped rejects what decode would.
func TestShaped(t *testing.T) {
	for _, s := range []store.KeyState{state(0, "a", "", 0), state(3, "key", "value", 1), state(1, "b", "xy", 3)} {
		b := AppendState(nil, &s)
		if !shaped(b) {
			t.Fatalf("%+v: a whole record is not shaped", s)
		}
		for i := range len(b) - 1 {
			if shaped(b[:i]) {
				t.Fatalf("cut at %d still shaped", i)
			}
		}
		for i := 8; i < len(b); i++ { // payload bytes: a shaped record with a bad checksum must still decode
			c := bytes.Clone(b)
			c[i] ^= 0xff
			if shaped(c) {
				var ks store.KeyState
				if err := decode(c[recHead:], &ks); err != nil {
					t.Fatalf("flip at %d: shaped but decode says %v", i, err)
				}
			}
		}
	}
}
