package aof

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/logfile"
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

// logFile is what the writer needs of a file: an *os.File, or a test's stand-in that fails
// on cue.
type logFile interface {
	Write(b []byte) (int, error)
	Truncate(size int64) error
	Sync() error
	Close() error
}

// openFile opens the log and the rewrite file (tests replace it to inject failures).
var openFile = func(name string, flag int, perm os.FileMode) (logFile, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// FileMode is the mode of the log and the rewrite file: only tallyd's user reads the values.
const FileMode = logfile.FileMode

// retryEvery is how soon after a failed write the writer tries again when more records
// come (it tries at least once a second anyway).
const retryEvery = logfile.RetryEvery

// Progress is what the writer has done, in bytes of the stream Append numbers.
type Progress struct {
	Written uint64 // handed to the kernel
	Synced  uint64 // on disk
	Err     error  // a write or fsync of the log failed in this batch
	// RewriteErr is a rewrite that failed in this batch and was dropped: the log is whole
	// and goes on.
	RewriteErr error
	Rewrote    bool // a rewrite was committed in this batch
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
	failW     atomic.Pointer[string] // the last write to the log failed (why, Redis-style); nil once one succeeds
	failS     atomic.Pointer[string] // the last fsync failed; nil once one succeeds
	rwStart   time.Time              // writer goroutine only
	fsyncs    logfile.FsyncHist      // the log's fsyncs, and its failed writes and fsyncs (metrics)
}

// FsyncHist is the histogram of the log's fsyncs and the count of its failed writes; safe
// from any goroutine.
func (w *Writer) FsyncHist() *logfile.FsyncHist { return &w.fsyncs }

// Failing returns why the log cannot take writes now, as Redis says it after "Errors
// writing to the AOF file: " (strerror's text, e.g. "No space left on device"), or "" when
// the last write and fsync succeeded. Safe from any goroutine.
func (w *Writer) Failing() string {
	if e := w.failW.Load(); e != nil {
		return *e
	}
	if e := w.failS.Load(); e != nil {
		return *e
	}
	return ""
}

// Open starts a writer appending to the log at path, which Replay has prepared
// (size bytes long). done is called on the writer's goroutine after each batch.
func Open(path string, size int64, policy Policy, done func(Progress)) (*Writer, error) {
	f, err := openFile(path, os.O_WRONLY|os.O_APPEND, FileMode)
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
	go w.run(f, size)
	return w, nil
}

// syncJob asks the syncer to fsync f, whose first upto bytes (since generation gen
// began) are written.
type syncJob struct {
	f    logFile
	upto int64
	gen  int64
}

// syncer runs everysec's fsyncs, so that writes, and the replies waiting for them, do
// not stall behind the disk as Redis's background fsync thread does.
func (w *Writer) syncer() {
	defer close(w.syncDone)
	for j := range w.syncReq {
		err := w.fsyncs.Time(j.f.Sync)
		if j.gen == w.gen.Load() {
			if err != nil {
				w.fsyncs.Error()
				msg := fmt.Sprintf("append-only log %s: fsync: %v", w.path, err)
				w.writeErr.Store(&msg)
				why := logfile.Reason(err)
				w.failS.Store(&why)
			} else {
				w.markSynced(j.upto)
				w.failS.Store(nil)
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
	LastWriteErr    string // the last error while writes or fsyncs fail; "" once one succeeds
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
	if e := w.writeErr.Load(); e != nil && w.Failing() != "" {
		s.LastWriteErr = *e // shown while the log fails, as Redis's aof_last_write_status
	}
	return s
}

// run is the writer goroutine. A write to the log that fails (ENOSPC, EIO, a short write)
// leaves no torn record: the file is cut back to the end of the last whole batch, and what
// was not written goes back to the front of the queue, to be written again, in order,
// before anything appended later. Progress.Written never passes what is in the file.
func (w *Writer) run(f logFile, fsize int64) {
	defer close(w.stopped)
	var (
		tmp       logFile
		tmpSize   int64
		spare     []byte
		spareSegs []seg
		written   uint64
		synced    uint64
		lastFail  time.Time
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
		if !timed && !w.closing && w.failW.Load() != nil && time.Since(lastFail) < retryEvery {
			w.mu.Unlock()
			continue // do not spin on a full disk: the tick tries again
		}
		buf, segs, end, closing := w.buf, w.segs, w.seq, w.closing
		w.buf, w.segs = spare[:0], spareSegs[:0]
		w.mu.Unlock()

		var p Progress
		fail := func(what string, err error) {
			if err != nil {
				w.fsyncs.Error()
			}
			if err != nil && p.Err == nil {
				p.Err = fmt.Errorf("append-only log %s: %s: %w", w.path, what, err)
				s := p.Err.Error()
				w.writeErr.Store(&s)
			}
		}
		abandon := func(what string, err error) { // a rewrite that cannot be written is dropped
			if err != nil && p.RewriteErr == nil {
				p.RewriteErr = fmt.Errorf("append-only log %s: %s (rewrite dropped, the log kept): %w", w.tempPath(), what, err)
			}
			if tmp != nil {
				tmp.Close()
				tmp = nil
			}
			_ = os.Remove(w.tempPath())
		}
		start := 0
		stopped := -1     // index of the segment the log stopped taking, if any
		stoppedAt := 0    // where in buf its unwritten bytes start
		wroteLog := false // something reached the log in this batch
		for i, sg := range segs {
			b := buf[start:sg.end]
			segStart := start
			start = sg.end
			switch {
			case sg.dest == begin:
				if tmp != nil {
					tmp.Close()
				}
				var err error
				tmp, err = openFile(w.tempPath(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, FileMode)
				if err != nil {
					abandon("create rewrite file", err)
				} else if _, err = tmp.Write([]byte(Header)); err != nil {
					abandon("write rewrite file", err)
				}
				tmpSize = int64(len(Header))
				w.rwStart = time.Now()
			case sg.dest == commit:
				if tmp == nil {
					break
				}
				err := tmp.Sync()
				if err == nil {
					err = os.Rename(w.tempPath(), w.path)
				}
				if err != nil {
					abandon("fsync or rename rewrite file", err)
					break
				}
				fail("fsync directory", w.dir.Sync())
				f.Close()
				f, tmp, fsize = tmp, nil, tmpSize
				w.size.Store(fsize)
				w.baseSize.Store(fsize)
				w.rewrites.Add(1)
				w.lastRW.Store(time.Now().UnixNano())
				w.lastRWDur.Store(int64(time.Since(w.rwStart)))
				w.gen.Add(1)
				w.written.Store(0)
				w.synced.Store(0)
				w.lastSync.Store(time.Now().UnixNano())
				p.Rewrote = true
			default:
				if len(b) == 0 {
					break
				}
				if sg.dest&ToLog != 0 {
					n, err := f.Write(b)
					if err == nil && n < len(b) {
						err = errors.New("short write")
					}
					if err != nil {
						fail("write", err)
						why := logfile.Reason(err)
						w.failW.Store(&why)
						lastFail = time.Now()
						// Cut the file back to its last whole record; if even that fails, keep
						// the part written and go on from there, so the log stays a run of
						// whole records either way (as Redis does).
						if n > 0 {
							if terr := f.Truncate(fsize); terr != nil {
								fail("truncate after a failed write", terr)
							} else {
								n = 0
							}
						}
						if n > 0 {
							fsize += int64(n)
							w.size.Store(fsize)
							w.written.Add(int64(n))
							if sg.dest&ToRewrite != 0 && tmp != nil {
								if _, err := tmp.Write(b[:n]); err != nil {
									abandon("write rewrite file", err)
								}
								tmpSize += int64(n)
							}
						}
						stopped, stoppedAt = i, segStart+n
						break
					}
					fsize += int64(n)
					w.size.Store(fsize)
					w.written.Add(int64(n))
					wroteLog = true
				}
				if sg.dest&ToRewrite != 0 && tmp != nil {
					if _, err := tmp.Write(b); err != nil {
						abandon("write rewrite file", err)
					}
					tmpSize += int64(len(b))
				}
			}
			if stopped >= 0 {
				break
			}
		}
		written = end
		if stopped >= 0 {
			// Put back what the log did not take, in front of what came meanwhile.
			left := buf[stoppedAt:]
			written = end - uint64(len(left))
			w.mu.Lock()
			nb := make([]byte, 0, len(left)+len(w.buf))
			nb = append(append(nb, left...), w.buf...)
			ns := make([]seg, 0, len(segs)-stopped+len(w.segs))
			for _, sg := range segs[stopped:] {
				ns = append(ns, seg{sg.dest, sg.end - stoppedAt})
			}
			for _, sg := range w.segs {
				ns = append(ns, seg{sg.dest, sg.end + len(left)})
			}
			w.buf, w.segs = nb, ns
			w.mu.Unlock()
			buf, segs = nil, nil // handed back: not to be reused
		} else if wroteLog {
			w.failW.Store(nil)
		}
		switch {
		case w.unsynced() == 0:
		case w.policy == Always || closing:
			upto := w.written.Load()
			err := w.fsyncs.Time(f.Sync)
			fail("fsync", err)
			if err == nil {
				w.markSynced(upto)
				w.failS.Store(nil)
			} else {
				why := logfile.Reason(err)
				w.failS.Store(&why)
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
		if len(segs) > 0 || p.Err != nil || p.RewriteErr != nil || stopped >= 0 {
			w.done(p)
		}
		if closing {
			w.mu.Lock()
			more := len(w.buf) > 0 || len(w.segs) > 0
			w.mu.Unlock()
			if !more || stopped >= 0 { // a log that cannot be written is given up at close
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
