package aof

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Policy is when the writer fsyncs the log, with Redis's appendfsync meanings.
type Policy uint8

// Policies.
const (
	Always   Policy = iota // fsync after every batch, before its replies are released
	EverySec               // fsync once a second
	No                     // leave it to the kernel
)

// ParsePolicy reads "always", "everysec" or "no".
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "always":
		return Always, nil
	case "everysec":
		return EverySec, nil
	case "no":
		return No, nil
	}
	return 0, fmt.Errorf("appendfsync %q: want always, everysec or no", s)
}

func (p Policy) String() string {
	return [...]string{"always", "everysec", "no"}[p]
}

// Dest is where appended bytes go.
type Dest uint8

// Destinations. While a rewrite runs, changes go to both files, and the
// snapshot of the live state to the new one only.
const (
	ToLog     Dest = 1
	ToRewrite Dest = 2
	ToBoth    Dest = ToLog | ToRewrite
	begin     Dest = 4 // start a rewrite: create the temporary file
	commit    Dest = 8 // finish it: fsync, rename over the log, fsync the directory
)

type seg struct {
	dest Dest
	end  int // in the pending buffer
}

// Progress is what the writer has done, in bytes of the stream Append numbers.
type Progress struct {
	Written uint64 // handed to the kernel
	Synced  uint64 // on disk
	Err     error  // a write or fsync failed in this batch
	Rewrote bool   // a rewrite was committed in this batch
	// RewriteErr says a rewrite failed in this batch and was abandoned (the rewrite file
	// could not be created, written, fsynced or renamed: EMFILE, ENOSPC...); the log itself
	// is intact, and nothing acknowledged depends on it.
	RewriteErr error
}

// Writer owns a log file on its own goroutine: the event loop appends bytes
// without touching the disk, and the writer writes them out in batches (a
// group commit), fsyncs per its policy, and reports its progress.
type Writer struct {
	path   string
	dir    *os.File // the log's directory, opened once: fsyncing it after a rewrite needs no new descriptor
	policy Policy
	done   func(Progress) // called on the writer goroutine after each batch

	mu      sync.Mutex
	buf     []byte
	segs    []seg
	seq     uint64 // bytes appended so far
	closing bool

	wake    chan struct{}
	stopped chan struct{}

	// Published for INFO and the rewrite trigger.
	size      atomic.Int64 // bytes of the log file
	baseSize  atomic.Int64 // its size after the last rewrite (or at start)
	lastSync  atomic.Int64 // Unix ns of the last fsync
	written   atomic.Int64 // bytes written to the current file since it was opened or switched to
	synced    atomic.Int64 // of those, bytes known to be on disk
	gen       atomic.Int64 // bumped when the file is switched: a late fsync of the old one counts for nothing
	syncing   atomic.Bool  // a background fsync (everysec) is running
	syncReq   chan syncJob
	syncDone  chan struct{}
	rewrites  atomic.Int64
	lastRW    atomic.Int64 // Unix ns the last rewrite finished
	lastRWDur atomic.Int64 // its length, ns
	writeErr  atomic.Pointer[string]
	rwStart   time.Time // writer goroutine only
}

// Open starts a writer appending to the log at path, which Replay has prepared
// (size bytes long). done is called on the writer's goroutine after each batch.
func Open(path string, size int64, policy Policy, done func(Progress)) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &Writer{path: path, dir: dir, policy: policy, done: done, wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		syncReq: make(chan syncJob, 1), syncDone: make(chan struct{})}
	w.size.Store(size)
	w.baseSize.Store(size)
	w.lastSync.Store(time.Now().UnixNano())
	_ = os.Remove(w.tempPath()) // a rewrite that a crash interrupted
	go w.syncer()
	go w.run(f)
	return w, nil
}

// syncJob asks the syncer to fsync f, whose first upto bytes (since generation gen
// began) are written.
type syncJob struct {
	f    *os.File
	upto int64
	gen  int64
}

// syncer runs everysec's fsyncs, so that writes, and the replies waiting for them, do
// not stall behind the disk as Redis's background fsync thread does.
func (w *Writer) syncer() {
	defer close(w.syncDone)
	for j := range w.syncReq {
		err := j.f.Sync()
		if j.gen == w.gen.Load() {
			if err != nil {
				msg := fmt.Sprintf("append-only log %s: fsync: %v", w.path, err)
				w.writeErr.Store(&msg)
			} else {
				w.markSynced(j.upto)
			}
		}
		w.syncing.Store(false)
	}
}

// markSynced records that the first upto bytes of the current file are on disk.
func (w *Writer) markSynced(upto int64) {
	for {
		old := w.synced.Load()
		if upto <= old || w.synced.CompareAndSwap(old, upto) {
			break
		}
	}
	w.lastSync.Store(time.Now().UnixNano())
}

func (w *Writer) unsynced() int64 { return w.written.Load() - w.synced.Load() }

func (w *Writer) tempPath() string { return w.path + ".rewrite" }

// Append queues b for dest and returns the stream position after it. It is the
// loop's only call on the hot path: a copy under a mutex the writer holds only
// to swap buffers.
func (w *Writer) Append(dest Dest, b []byte) uint64 {
	w.mu.Lock()
	w.buf = append(w.buf, b...)
	if n := len(w.segs); n > 0 && w.segs[n-1].dest == dest {
		w.segs[n-1].end = len(w.buf)
	} else {
		w.segs = append(w.segs, seg{dest, len(w.buf)})
	}
	w.seq += uint64(len(b))
	seq := w.seq
	w.mu.Unlock()
	w.signal()
	return seq
}

// BeginRewrite starts a rewrite; CommitRewrite finishes it once the snapshot
// has been appended ToRewrite.
func (w *Writer) BeginRewrite()  { w.mark(begin) }
func (w *Writer) CommitRewrite() { w.mark(commit) }

func (w *Writer) mark(d Dest) {
	w.mu.Lock()
	w.segs = append(w.segs, seg{d, len(w.buf)})
	w.mu.Unlock()
	w.signal()
}

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Close writes what is queued, fsyncs, and stops the writer.
func (w *Writer) Close() {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.signal()
	<-w.stopped
}

// Stats is what INFO shows of the log.
type Stats struct {
	Size, BaseSize  int64
	Pending         int64 // bytes queued, not yet written
	Unsynced        int64 // bytes written since the last fsync
	LastSync        time.Time
	Rewrites        int64
	LastRewrite     time.Time
	LastRewriteTime time.Duration
	LastWriteErr    string
	Policy          Policy
}

// Stats returns the writer's counters; safe from any goroutine.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	pending := len(w.buf)
	w.mu.Unlock()
	s := Stats{Size: w.size.Load(), BaseSize: w.baseSize.Load(), Pending: int64(pending),
		Unsynced: w.unsynced(), LastSync: time.Unix(0, w.lastSync.Load()), Rewrites: w.rewrites.Load(),
		LastRewriteTime: time.Duration(w.lastRWDur.Load()), Policy: w.policy}
	if t := w.lastRW.Load(); t != 0 {
		s.LastRewrite = time.Unix(0, t)
	}
	if e := w.writeErr.Load(); e != nil {
		s.LastWriteErr = *e
	}
	return s
}

func (w *Writer) run(f *os.File) {
	defer close(w.stopped)
	var (
		tmp       *os.File
		spare     []byte
		spareSegs []seg
		written   uint64
		synced    uint64
		tick      = time.NewTicker(time.Second)
	)
	defer tick.Stop()
	for {
		timed := false
		select {
		case <-w.wake:
		case <-tick.C:
			timed = true
		}
		w.mu.Lock()
		buf, segs, end, closing := w.buf, w.segs, w.seq, w.closing
		w.buf, w.segs = spare[:0], spareSegs[:0]
		w.mu.Unlock()

		var p Progress
		fail := func(what string, err error) {
			if err != nil && p.Err == nil {
				p.Err = fmt.Errorf("append-only log %s: %s: %w", w.path, what, err)
				s := p.Err.Error()
				w.writeErr.Store(&s)
			}
		}
		failRW := func(what string, err error) {
			if err != nil && p.RewriteErr == nil {
				p.RewriteErr = fmt.Errorf("append-only log %s: %s: %w", w.path, what, err)
			}
		}
		start := 0
		for _, sg := range segs {
			b := buf[start:sg.end]
			start = sg.end
			switch {
			case sg.dest == begin:
				if tmp != nil {
					tmp.Close()
				}
				var err error
				tmp, err = os.OpenFile(w.tempPath(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				failRW("create rewrite file", err)
				if tmp != nil {
					_, err = tmp.Write([]byte(Header))
					failRW("write rewrite file", err)
				}
				w.rwStart = time.Now()
			case sg.dest == commit:
				if tmp == nil {
					break
				}
				err := tmp.Sync()
				failRW("fsync rewrite file", err)
				if err == nil {
					err = os.Rename(w.tempPath(), w.path)
					failRW("rename rewrite file", err)
				}
				if err == nil {
					fail("fsync directory", w.dir.Sync())
					f.Close()
					f, tmp = tmp, nil
					st, _ := f.Stat()
					if st != nil {
						w.size.Store(st.Size())
						w.baseSize.Store(st.Size())
					}
					w.rewrites.Add(1)
					w.lastRW.Store(time.Now().UnixNano())
					w.lastRWDur.Store(int64(time.Since(w.rwStart)))
					w.gen.Add(1)
					w.written.Store(0)
					w.synced.Store(0)
					w.lastSync.Store(time.Now().UnixNano())
					p.Rewrote = true
				} else {
					tmp.Close()
					tmp = nil
					_ = os.Remove(w.tempPath())
				}
			default:
				if len(b) == 0 {
					break
				}
				if sg.dest&ToLog != 0 {
					_, err := f.Write(b)
					fail("write", err)
					w.size.Add(int64(len(b)))
					w.written.Add(int64(len(b)))
				}
				if sg.dest&ToRewrite != 0 && tmp != nil {
					_, err := tmp.Write(b)
					failRW("write rewrite file", err)
				}
			}
		}
		written = end
		switch {
		case w.unsynced() == 0:
		case w.policy == Always || closing:
			upto := w.written.Load()
			err := f.Sync()
			fail("fsync", err)
			if err == nil {
				w.markSynced(upto)
			}
		case w.policy == EverySec && (timed || time.Since(time.Unix(0, w.lastSync.Load())) >= time.Second) &&
			w.syncing.CompareAndSwap(false, true):
			w.syncReq <- syncJob{f: f, upto: w.written.Load(), gen: w.gen.Load()}
		}
		if w.unsynced() == 0 {
			synced = written
		}
		p.Written, p.Synced = written, synced
		spare, spareSegs = buf, segs
		if cap(spare) > 4<<20 {
			spare = nil
		}
		if len(segs) > 0 || p.Err != nil || p.RewriteErr != nil {
			w.done(p)
		}
		if closing {
			w.mu.Lock()
			more := len(w.buf) > 0 || len(w.segs) > 0
			w.mu.Unlock()
			if !more {
				if tmp != nil {
					tmp.Close()
					_ = os.Remove(w.tempPath())
				}
				close(w.syncReq)
				<-w.syncDone
				f.Close()
				w.dir.Close()
				return
			}
		}
	}
}
