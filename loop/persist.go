package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"tallyd/aof"
	"tallyd/store"
)

// persistState is the loop's side of the append-only log: what it has handed to the
// writer, what the writer has acknowledged, the replies held until then, and a
// rewrite in progress.
type persistState struct {
	w     *aof.Writer
	path  string
	seq   uint64 // stream bytes handed to the writer
	ack   uint64 // stream bytes written (or, with always, fsynced)
	buf   []byte // records being encoded
	held  []*conn
	emit  func(*store.KeyState) // appendRecord, bound once so that passing it allocates nothing
	fatal atomic.Pointer[error]

	rewriting bool
	rwStarted time.Time
	lastNow   int64
	errLog    rateLog
	replayed  aof.Replayed
	keys      int // keys restored at start
}

// logName is the log's file name in the data directory.
const logName = "tallyd.aof"

// rewriteSlice is how many keys a rewrite snapshots per tick: about 0.5 ms of the loop's
// time (BenchmarkRewriteSnapshot: ~50 ns a key), so 1M keys are rewritten in ~120 ticks.
const rewriteSlice = 8192

// openLog replays the log into the store and starts its writer; nothing to do without a
// data directory.
func (s *Server) openLog() error {
	if s.cfg.DataDir == "" {
		return nil
	}
	p := &s.persist
	if err := os.MkdirAll(s.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	p.path = filepath.Join(s.cfg.DataDir, logName)
	now := s.now().UnixNano()
	start := time.Now()
	r, err := aof.Replay(p.path, func(ks *store.KeyState) { s.locks.Restore(ks, now) })
	if err != nil {
		return err
	}
	s.locks.ForgetJournal()
	p.replayed = r
	for db := 0; db <= store.MaxLockDB; db++ {
		if st, ok := s.locks.State(uint8(db)); ok {
			p.keys += int(st.KeyCount)
		}
	}
	if r.Truncated > 0 {
		s.log.Warn().Str("file", p.path).Int64("offset", r.Size).Int64("bytes_cut", r.Truncated).Str("why", r.TailWhy).
			Msg("append-only log: torn or corrupt tail cut off")
	}
	s.log.Info().Str("file", p.path).Int("records", r.Records).Int("keys", p.keys).Int64("bytes", r.Size).
		Stringer("appendfsync", s.cfg.AppendFsync).Dur("took", time.Since(start)).Msg("append-only log replayed")
	p.emit = s.appendRecord
	p.w, err = aof.Open(p.path, r.Size, s.cfg.AppendFsync, s.logProgress)
	return err
}

// closeLog writes out what is queued and stops the writer (after the engine stopped).
func (s *Server) closeLog() {
	if s.persist.w != nil {
		s.persist.w.Close()
	}
}

// logProgress runs on the writer's goroutine after each batch: it hands the news to the
// loop.
func (s *Server) logProgress(pr aof.Progress) {
	if pr.Err != nil && s.cfg.AppendFsync == aof.Always {
		// As Redis: with always, a write that cannot be made durable stops the server
		// rather than acknowledge what is not on disk.
		err := fmt.Errorf("stopping: %w", pr.Err)
		s.persist.fatal.CompareAndSwap(nil, &err)
		s.log.Error().Err(pr.Err).Msg("append-only log failed with appendfsync always")
		go func() { _ = s.Stop(context.Background()) }()
		return
	}
	el, ok := s.el.Load().(gnet.EventLoop)
	if !ok {
		return
	}
	_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		s.logged(pr)
		return nil
	}))
}

// logged takes the writer's progress on the loop: held replies whose records are now
// written (fsynced, with always) go out.
func (s *Server) logged(pr aof.Progress) {
	p := &s.persist
	if pr.Err != nil {
		if missed, ok := p.errLog.allow(s.now()); ok {
			s.log.Error().Err(pr.Err).Uint64("more_since_last_line", missed).Msg("append-only log")
		}
	}
	ack := pr.Written
	if s.cfg.AppendFsync == aof.Always {
		ack = pr.Synced
	}
	if ack > p.ack {
		p.ack = ack
	}
	if pr.Rewrote {
		s.log.Info().Str("file", p.path).Dur("took", time.Since(p.rwStarted)).Int64("bytes", p.w.Stats().Size).
			Msg("append-only log rewritten")
	}
	kept := p.held[:0]
	for _, cs := range p.held {
		sc := cs.slock
		if cs.closed {
			sc.held, sc.inHeld = nil, false
			continue
		}
		if sc.heldSeq > p.ack {
			kept = append(kept, cs)
			continue
		}
		b := sc.held
		sc.held, sc.inHeld = sc.held[:0], false
		if cap(sc.held) > keepOut {
			sc.held = nil
		}
		if _, err := cs.c.Write(b); err != nil || cs.closed {
			continue
		}
		if n := cs.c.OutboundBuffered(); n > s.cfg.MaxOutput {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Int("unsent", n).Int("limit", s.cfg.MaxOutput).
				Msg("closing connection: too many unsent replies (max-output)")
			_ = cs.c.Close()
			continue
		}
		if cs.c.InboundBuffered() > 0 {
			_ = cs.c.Wake(nil) // requests that waited behind the held replies
		}
	}
	clear(p.held[len(kept):])
	p.held = kept
}

// appendRecord encodes one record of the journal or of a rewrite.
func (s *Server) appendRecord(ks *store.KeyState) { s.persist.buf = aof.AppendState(s.persist.buf, ks) }

// journal hands the records of the store's changes so far to the writer.
func (s *Server) journal(now int64) {
	p := &s.persist
	if p.w == nil || !s.locks.Journaled() {
		return
	}
	p.buf = p.buf[:0]
	s.locks.Journal(now, p.emit)
	if len(p.buf) == 0 {
		return
	}
	dest := aof.ToLog
	if p.rewriting {
		dest = aof.ToBoth
	}
	p.seq = p.w.Append(dest, p.buf)
	if cap(p.buf) > keepOut {
		p.buf = nil
	}
}

// holdReply keeps b, a reply for slock connection cs, until the log has its records: it
// reports false when b can be written now. Every reply to a slock connection passes here,
// so one never overtakes the change it reports (nor one it saw).
func (s *Server) holdReply(cs *conn, b []byte) bool {
	p := &s.persist
	if p.w == nil || cs.slock == nil {
		return false
	}
	s.journal(p.lastNow)
	sc := cs.slock
	if p.seq <= p.ack && len(sc.held) == 0 {
		return false
	}
	sc.held = append(sc.held, b...)
	sc.heldSeq = p.seq
	if !sc.inHeld {
		sc.inHeld = true
		p.held = append(p.held, cs)
	}
	return true
}

// persistTick runs on each tick: locks that have now been held long enough (the tick's
// Advance found them) are logged, and a rewrite starts or goes on.
func (s *Server) persistTick(now time.Time) {
	p := &s.persist
	if p.w == nil {
		return
	}
	ns := now.UnixNano()
	p.lastNow = ns
	s.journal(ns)
	if p.rewriting {
		s.rewriteStep(ns)
		return
	}
	st := p.w.Stats()
	if st.Size > s.cfg.AOFRewriteSize && st.Size >= 2*st.BaseSize {
		s.Rewrite()
	}
}

// Rewrite starts compacting the log (on the loop): the live state is written to a new
// file a slice per tick, beside the changes made meanwhile, and replaces the log.
func (s *Server) Rewrite() bool {
	p := &s.persist
	if p.w == nil || p.rewriting {
		return false
	}
	p.rewriting = true
	p.rwStarted = time.Now()
	s.locks.BeginSnapshot()
	p.w.BeginRewrite()
	s.log.Info().Int("keys", s.locks.LoggedKeys()).Int64("bytes", p.w.Stats().Size).Msg("append-only log rewrite started")
	return true
}

// rewriteStep snapshots the next slice of keys; after the last it commits the rewrite.
func (s *Server) rewriteStep(now int64) {
	p := &s.persist
	p.buf = p.buf[:0]
	done := s.locks.SnapshotNext(rewriteSlice, now, p.emit)
	if len(p.buf) > 0 {
		p.seq = p.w.Append(aof.ToRewrite, p.buf)
	}
	if done {
		p.w.CommitRewrite()
		p.rewriting = false
	}
}

// appendPersistInfo adds INFO's Persistence section.
func (s *Server) appendPersistInfo(b []byte) []byte {
	p := &s.persist
	b = append(b, "# Persistence\r\naof_enabled:"...)
	if p.w == nil {
		return append(b, "0\r\n\r\n"...)
	}
	st := p.w.Stats()
	now := s.now()
	b = append(b, "1\r\naof_file:"...)
	b = append(b, p.path...)
	b = append(b, "\r\naof_fsync_policy:"...)
	b = append(b, st.Policy.String()...)
	b = append(b, "\r\naof_rewrite_in_progress:"...)
	b = appendBool(b, p.rewriting)
	b = append(b, "\r\naof_rewrites:"...)
	b = strconv.AppendInt(b, st.Rewrites, 10)
	b = append(b, "\r\naof_last_rewrite_time_sec:"...)
	if st.LastRewrite.IsZero() {
		b = append(b, "-1"...)
	} else {
		b = strconv.AppendFloat(b, st.LastRewriteTime.Seconds(), 'f', 3, 64)
	}
	b = append(b, "\r\naof_last_rewrite_ago_sec:"...)
	if st.LastRewrite.IsZero() {
		b = append(b, "-1"...)
	} else {
		b = strconv.AppendInt(b, int64(now.Sub(st.LastRewrite).Seconds()), 10)
	}
	b = append(b, "\r\naof_current_size:"...)
	b = strconv.AppendInt(b, st.Size, 10)
	b = append(b, "\r\naof_base_size:"...)
	b = strconv.AppendInt(b, st.BaseSize, 10)
	b = append(b, "\r\naof_rewrite_size:"...)
	b = strconv.AppendInt(b, s.cfg.AOFRewriteSize, 10)
	b = append(b, "\r\naof_pending_bytes:"...)
	b = strconv.AppendInt(b, st.Pending, 10)
	b = append(b, "\r\naof_unsynced_bytes:"...)
	b = strconv.AppendInt(b, st.Unsynced, 10)
	b = append(b, "\r\naof_fsync_lag_sec:"...)
	lag := 0.0
	if st.Unsynced > 0 {
		lag = now.Sub(st.LastSync).Seconds()
	}
	b = strconv.AppendFloat(b, lag, 'f', 3, 64)
	b = append(b, "\r\naof_last_fsync_ago_sec:"...)
	b = strconv.AppendInt(b, int64(now.Sub(st.LastSync).Seconds()), 10)
	b = append(b, "\r\naof_held_replies_conns:"...)
	b = strconv.AppendInt(b, int64(len(p.held)), 10)
	b = append(b, "\r\naof_last_write_status:"...)
	if st.LastWriteErr == "" {
		b = append(b, "ok"...)
	} else {
		b = append(b, "err\r\naof_last_write_error:"...)
		b = append(b, st.LastWriteErr...)
	}
	b = append(b, "\r\naof_loaded_records:"...)
	b = strconv.AppendInt(b, int64(p.replayed.Records), 10)
	b = append(b, "\r\naof_loaded_keys:"...)
	b = strconv.AppendInt(b, int64(p.keys), 10)
	b = append(b, "\r\naof_logged_keys:"...)
	b = strconv.AppendInt(b, int64(s.locks.LoggedKeys()), 10)
	b = append(b, "\r\naof_lock_persist_after_ms:"...)
	b = strconv.AppendInt(b, s.cfg.LockPersistAfter.Milliseconds(), 10)
	return append(b, "\r\n\r\n"...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}
