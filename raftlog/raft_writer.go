package raftlog

import (
	"github.com/tallyd/tallyd/logfile"

	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// maxSpare is the largest queue buffer the writer hands back for reuse: a busy loop fills
// buffers of megabytes while an fsync runs, and fresh ones cost page faults.
const maxSpare = 64 << 20

// raftBatch is work taken off the queue: records in buf, described by ops.
type raftBatch struct {
	buf []byte
	ops []raftOp
}

// raftOpError is a failed step of a batch, with what failed.
type raftOpError struct {
	what string
	err  error
}

func (e *raftOpError) Error() string { return e.what + ": " + e.err.Error() }
func (e *raftOpError) Unwrap() error { return e.err }

func fail(what string, err error) error {
	if err == nil {
		return nil
	}
	return &raftOpError{what, err}
}

// run is the writer goroutine. Each round it takes everything queued, writes it at the end
// of raft.log with one write (a snapshot's data is written beside the bytes around it) and
// fsyncs once; a compaction splits the round in two. A write, fsync or compaction that
// fails is reported (RaftProgress.Err, Failing) and retried, in order, before anything queued
// after it, logfile.RetryEvery later: the file is cut back to its last synced size first, so a
// failed fsync's pages are written again rather than trusted.
func (l *RaftLog) run(d *raftDisk) {
	defer close(l.stopped)
	var (
		held     *raftBatch // a batch whose tail failed, to be tried again
		spare    raftBatch
		lastFail time.Time
	)
	for {
		if held != nil {
			time.Sleep(time.Until(lastFail.Add(logfile.RetryEvery)))
		} else {
			<-l.wake
		}
		l.mu.Lock()
		b := raftBatch{l.buf, l.ops}
		closing := l.closing
		l.buf, l.ops = spare.buf[:0], spare.ops[:0]
		l.mu.Unlock()
		spare = raftBatch{}
		if held != nil {
			for _, op := range b.ops {
				op.end += len(held.buf)
				held.ops = append(held.ops, op)
			}
			held.buf = append(held.buf, b.buf...)
			clear(b.ops)
			spare, b, held = b, *held, nil
		}
		if e := l.fatal.Load(); e != nil {
			l.done(RaftProgress{Synced: l.synced.Load(), Err: errors.New(*e)})
			if closing {
				l.shut(d)
				return
			}
			continue // nothing more is written: what follows the lost call must not pass for durable
		}
		if len(b.ops) == 0 {
			if closing {
				l.shut(d)
				return
			}
			continue
		}
		prev := l.synced.Load()
		p := RaftProgress{Synced: prev}
		k, at, err := l.process(d, b, &p)
		l.batches.Add(1)
		l.publish(d)
		if err != nil {
			p.Err = fmt.Errorf("raft log %s: %w", l.dir, err)
			l.fsyncHist.Error()
			msg := p.Err.Error()
			l.lastErr.Store(&msg)
			why := logfile.Reason(err)
			l.fail.Store(&why)
			lastFail = time.Now()
			h := &raftBatch{buf: bytes.Clone(b.buf[at:]), ops: make([]raftOp, 0, len(b.ops)-k)}
			for _, op := range b.ops[k:] {
				op.end -= at
				h.ops = append(h.ops, op)
			}
			held = h
		} else {
			l.fail.Store(nil)
		}
		p.Ops = int(p.Synced - prev)
		l.synced.Store(p.Synced)
		l.opsSaved.Add(int64(p.Ops))
		if held == nil {
			clear(b.ops) // drop the snapshots' data
			if cap(b.buf) <= maxSpare && spare.buf == nil {
				spare = b
			}
		}
		l.done(p)
		if closing {
			l.mu.Lock()
			more := len(l.ops) > 0
			l.mu.Unlock()
			if held != nil || !more {
				l.shut(d)
				return
			}
		}
	}
}

// shut closes the files.
func (l *RaftLog) shut(d *raftDisk) {
	d.f.Close()
	d.dir.Close()
}

// publish makes the writer's view of the files visible to Stats.
func (l *RaftLog) publish(d *raftDisk) {
	l.logSize.Store(d.size)
	l.snapSize.Store(d.snapSize)
	l.entries.Store(int64(len(d.ents)))
	l.snapIndex.Store(d.snapIdx)
	first := d.base + 1
	if len(d.ents) == 0 {
		first = 0
	}
	l.firstIndex.Store(first)
	l.lastIndex.Store(d.lastIndex())
}

// process writes a batch. On failure it returns the first op not done and where its bytes
// start in b.buf.
func (l *RaftLog) process(d *raftDisk, b raftBatch, p *RaftProgress) (int, int, error) {
	runOp, runStart, start := 0, 0, 0
	for i := range b.ops {
		op := &b.ops[i]
		opStart := start
		start = op.end
		if op.kind != opCompact {
			continue
		}
		if err := l.flush(d, b.buf, b.ops[runOp:i], runStart, p); err != nil {
			return runOp, runStart, err
		}
		if err := l.compact(d, b.buf[opStart:op.end], op.data, p); err != nil {
			return i, opStart, err
		}
		p.Synced = op.seq
		runOp, runStart = i+1, op.end
	}
	if err := l.flush(d, b.buf, b.ops[runOp:], runStart, p); err != nil {
		return runOp, runStart, err
	}
	return len(b.ops), len(b.buf), nil
}

// flush appends ops (whose bytes start at buf[start:]) to raft.log and fsyncs it.
func (l *RaftLog) flush(d *raftDisk, buf []byte, ops []raftOp, start int, p *RaftProgress) error {
	if len(ops) == 0 {
		return nil
	}
	at, w := d.size, d.size
	write := func(b []byte) error {
		if len(b) == 0 {
			return nil
		}
		n, err := d.f.WriteAt(b, w)
		w += int64(n)
		if err == nil && n < len(b) {
			err = errors.New("short write")
		}
		return err
	}
	cut := func(what string, err error) error {
		// Leave no part of the batch behind: it is written again, whole, later.
		if terr := d.f.Truncate(at); terr != nil {
			err = errors.Join(err, fmt.Errorf("truncate after it: %w", terr))
		}
		return fail(what, err)
	}
	pending, pos := start, start
	for i := range ops {
		op := &ops[i]
		if op.kind == opSnap {
			finishSnap(buf[pos:op.end], op.data)
			if err := write(buf[pending:op.end]); err != nil {
				return cut("write", err)
			}
			if err := write(op.data); err != nil {
				return cut("write", err)
			}
			pending = op.end
		}
		pos = op.end
	}
	if err := write(buf[pending:pos]); err != nil {
		return cut("write", err)
	}
	if err := l.sync(d.f, p); err != nil {
		return cut("fsync", err)
	}
	// On disk: now the writer's view follows.
	fo, pos := at, start
	for i := range ops {
		op := &ops[i]
		if op.kind == opSnap {
			h := buf[pos:op.end]
			d.received(binary.LittleEndian.Uint64(h[logfile.RecHead+1:]), binary.LittleEndian.Uint64(h[logfile.RecHead+9:]))
			fo += int64(len(h) + len(op.data))
			pos = op.end
			continue
		}
		for pos < op.end {
			n := logfile.RecHead + int(binary.LittleEndian.Uint32(buf[pos:]))
			rec := buf[pos : pos+n]
			switch rec[logfile.RecHead] {
			case kindHardState:
				d.hs = append(d.hs[:0], rec...)
			case kindPeers:
				d.peers = append(d.peers[:0:0], rec...)
			case kindEntry:
				d.add(binary.LittleEndian.Uint64(rec[logfile.RecHead+2:]), entLoc{fo, uint32(n)})
			}
			fo += int64(n)
			pos += n
		}
	}
	d.size = w
	p.Bytes += w - at
	l.bytesWritten.Add(w - at)
	p.Synced = ops[len(ops)-1].seq
	return nil
}

// sync fsyncs f and counts it.
func (l *RaftLog) sync(f raftFile, p *RaftProgress) error {
	t := time.Now()
	err := f.Sync()
	dt := time.Since(t)
	l.fsyncHist.Observe(dt)
	p.Fsyncs++
	p.FsyncTime += dt
	l.fsyncs.Add(1)
	l.lastFsyncDur.Store(int64(dt))
	if err == nil {
		l.lastSync.Store(time.Now().UnixNano())
	}
	return err
}

// fileWriter writes a new file in large pieces.
type fileWriter struct {
	f   raftFile
	off int64
	buf []byte
}

func (w *fileWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.WriteAt(w.buf, w.off)
	w.off += int64(n)
	if err == nil && n < len(w.buf) {
		err = errors.New("short write")
	}
	w.buf = w.buf[:0]
	return err
}

func (w *fileWriter) write(b []byte) error {
	if len(w.buf)+len(b) > 4<<20 {
		if err := w.flush(); err != nil {
			return err
		}
		if len(b) > 4<<20 {
			n, err := w.f.WriteAt(b, w.off)
			w.off += int64(n)
			if err == nil && n < len(b) {
				err = errors.New("short write")
			}
			return err
		}
	}
	w.buf = append(w.buf, b...)
	return nil
}

// size is the file's length once flushed.
func (w *fileWriter) size() int64 { return w.off + int64(len(w.buf)) }

// compact replaces raft.snap by the snapshot record whose head is h and data is data,
// then raft.log by one holding the peer table, the entries after the snapshot and the hard
// state. Each file is written to a temporary file, fsynced, renamed into place, and the
// directory fsynced, so a crash leaves either file old or new: every pair replays the same.
func (l *RaftLog) compact(d *raftDisk, h, data []byte, p *RaftProgress) error {
	index, term := binary.LittleEndian.Uint64(h[logfile.RecHead+1:]), binary.LittleEndian.Uint64(h[logfile.RecHead+9:])
	if index < d.snapIdx || index <= d.fileSnap && index <= d.logStart {
		return nil // older than a snapshot received since, or done
	}
	t0 := time.Now()
	if index > d.fileSnap {
		finishSnap(h, data)
		path := filepath.Join(l.dir, RaftSnapName)
		tmp := path + raftTmp
		f, err := openRaftFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, logfile.FileMode)
		if err != nil {
			return fail("create snapshot file", err)
		}
		w := &fileWriter{f: f}
		err = w.write([]byte(RaftSnapHeader))
		if err == nil {
			err = w.write(h)
		}
		if err == nil {
			err = w.write(data)
		}
		if err == nil {
			err = w.flush()
		}
		what := "write snapshot file"
		if err == nil {
			what = "fsync snapshot file"
			err = l.sync(f, p)
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			what, err = "close snapshot file", cerr
		}
		if err == nil {
			what, err = "rename snapshot file", os.Rename(tmp, path)
		}
		if err != nil {
			_ = os.Remove(tmp)
			return fail(what, err)
		}
		if err := d.dir.Sync(); err != nil {
			return fail("fsync directory", err)
		}
		d.fileSnap, d.snapSize = index, w.size()
		if index > d.snapIdx {
			d.snapIdx, d.snapTerm = index, term
		}
	}

	path := filepath.Join(l.dir, RaftLogName)
	tmp := path + raftTmp
	nf, err := openRaftFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, logfile.FileMode)
	if err != nil {
		return fail("create log file", err)
	}
	abandon := func(what string, err error) error {
		nf.Close()
		_ = os.Remove(tmp)
		return fail(what, err)
	}
	w := &fileWriter{f: nf}
	if err := w.write([]byte(RaftHeader)); err != nil {
		return abandon("write log file", err)
	}
	if d.peers != nil {
		if err := w.write(d.peers); err != nil {
			return abandon("write log file", err)
		}
	}
	drop := uint64(len(d.ents))
	if index >= d.base {
		drop = min(index-d.base, drop)
	} else {
		drop = 0
	}
	keep := d.ents[drop:]
	moved := make([]entLoc, 0, len(keep))
	for i := 0; i < len(keep); {
		// A run of records next to each other in the old file, read at once.
		j, n := i+1, int64(keep[i].n)
		for j < len(keep) && keep[j].off == keep[i].off+n && n < 4<<20 {
			n += int64(keep[j].n)
			j++
		}
		if err := w.flush(); err != nil {
			return abandon("write log file", err)
		}
		at := w.off
		w.buf = append(w.buf[:0], make([]byte, n)...)
		if _, err := d.f.ReadAt(w.buf, keep[i].off); err != nil {
			return abandon("read log file", err)
		}
		for k := i; k < j; k++ {
			moved = append(moved, entLoc{at + keep[k].off - keep[i].off, keep[k].n})
		}
		i = j
	}
	if d.hs != nil {
		if err := w.write(d.hs); err != nil {
			return abandon("write log file", err)
		}
	}
	if err := w.flush(); err != nil {
		return abandon("write log file", err)
	}
	if err := l.sync(nf, p); err != nil {
		return abandon("fsync log file", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return abandon("rename log file", err)
	}
	// From here on the new file is raft.log, whatever happens to the directory's fsync.
	d.f.Close()
	d.f, d.size, d.ents, d.base, d.logStart = nf, w.size(), moved, max(index, d.base), index
	if err := d.dir.Sync(); err != nil {
		return fail("fsync directory", err)
	}
	p.Compacted = true
	l.compactions.Add(1)
	l.lastCompact.Store(time.Now().UnixNano())
	l.compactNs.Store(int64(time.Since(t0)))
	return nil
}
