package loop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// persistState is the loop's side of the append-only log: what it has handed to the
// writer, what the writer has acknowledged, the replies held until then, and a
// rewrite in progress.
type persistState struct {
	w     *aof.Writer
	path  string
	seq   uint64                // stream bytes handed to the writer
	ack   uint64                // stream bytes written (or, with always, fsynced)
	buf   []byte                // records being encoded
	held  []*conn               // connections with replies waiting for the log (gateMark)
	emit  func(*store.KeyState) // appendRecord, bound once so that passing it allocates nothing
	fatal atomic.Pointer[error]

	rewriting bool
	// committing: the last rewrite is handed to the writer to commit (fsync, rename), and the
	// writer has not yet said how it went (Progress.Rewrote or RewriteErr). The size trigger
	// waits for it: the log's size is the old file's until the rename, so the next tick
	// started a second rewrite of the whole store at once (every rewrite ran twice).
	committing bool
	rwStarted  time.Time
	rwRetry    int64 // Unix ns before which a rewrite that failed is not tried again by itself
	lastNow    int64
	errLog     rateLog
	replayed   aof.Replayed
	keys       int   // keys restored at start
	ks         ksRun // a rewrite's keyspace records (keyspace_persist.go)
}

// rewriteRetry is how long after a failed rewrite the size trigger waits to try again.
const rewriteRetry = time.Minute

// DataDirMode is the mode tallyd creates its data directory with: the values stored are
// its user's only (the log itself is aof.FileMode).
const DataDirMode = 0o700

// logFailing says why the log cannot take writes now (the writer's last write or fsync
// failed, and none has succeeded since), or "" when it can or there is no log.
func (s *Server) logFailing() string { return s.replies.failing() }

// diskGuarded says whether a Redis-text command is refused while the log cannot be
// written: as in Redis, the commands that may write, and PING.
func diskGuarded(spec *rediscmd.Spec) bool {
	return spec != nil && (spec.Flags&rediscmd.CmdWrite != 0 || spec.Cmd == rediscmd.CmdPing)
}

// misconf is Redis's error for a command refused while the log cannot be written.
func misconf(why string) string { return "MISCONF Errors writing to the AOF file: " + why }

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
	if err := os.MkdirAll(s.cfg.DataDir, DataDirMode); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	p.path = filepath.Join(s.cfg.DataDir, logName)
	for _, f := range []string{s.cfg.DataDir, p.path} {
		if st, err := os.Stat(f); err == nil && st.Mode().Perm()&0o077 != 0 {
			s.log.Warn().Str("path", f).Stringer("mode", st.Mode().Perm()).
				Msg("others may read stored values here: tallyd creates its data directory 0700 and its log 0600")
		}
	}
	now := s.now().UnixNano()
	start := time.Now()
	if err := s.loadKeySecret(); err != nil {
		return err
	}
	rk := rekeyer{keys: s.st.keys}
	ka := ksApplier{ks: s.st.store.Keyspace}
	r, err := aof.ReplayAll(p.path, func(ks *store.KeyState) { rk.rekey(ks); s.st.locks.Restore(ks, now) }, ka.apply)
	if err != nil {
		return err
	}
	if ka.errs > 0 {
		s.log.Error().Err(ka.first).Int("records", ka.errs).Str("file", p.path).Msg("append-only log: keyspace records that do not apply, skipped")
	}
	s.st.locks.ForgetJournal()
	s.st.store.Keyspace.ClearLog()
	if s.cfg.RedisKeyspace {
		// A log written before the keyspace holds Redis values as the Locks' key states:
		// they move into the keyspace now, before serving. Their records (the keys in the
		// keyspace, gone from the Locks) go to the log at the first journal, so the next
		// start replays them where they are; a crash before that moves them again.
		var mv store.Moved
		for mv = s.st.store.MoveValues(1<<16, now); !mv.Done; {
			next := s.st.store.MoveValues(1<<16, now)
			mv.Moved, mv.Clashed, mv.Done = mv.Moved+next.Moved, mv.Clashed+next.Clashed, next.Done
		}
		if mv.Moved+mv.Clashed > 0 {
			s.log.Info().Int("moved", mv.Moved).Int("clashed", mv.Clashed).Msg("append-only log: Redis values of an older log moved into the keyspace")
		}
	}
	p.replayed = r
	for db := 0; db <= store.MaxLockDB; db++ {
		if st, ok := s.st.locks.State(uint8(db)); ok {
			p.keys += int(st.KeyCount)
		}
	}
	p.keys += s.st.store.Keyspace.Keys()
	if r.Truncated > 0 {
		s.log.Warn().Str("file", p.path).Int64("offset", r.Size).Int64("bytes_cut", r.Truncated).Str("why", r.TailWhy).
			Msg("append-only log: torn or corrupt tail cut off")
	}
	s.log.Info().Str("file", p.path).Int("records", r.Records).Int("keys", p.keys).Int64("bytes", r.Size).
		Stringer("appendfsync", s.cfg.AppendFsync).Dur("took_ms", time.Since(start)).Msg("append-only log replayed")
	p.emit = s.appendRecord
	p.w, err = aof.Open(p.path, r.Size, s.cfg.AppendFsync, s.logProgress)
	if err == nil {
		s.replies = logGate{s}
	}
	return err
}

// closeLog writes out what is queued and stops the writer (after the engine stopped). A
// graceful stop first journals every held lock, however young, so that a restart loses none
// (a crash still loses those held less than --lock-persist-after).
func (s *Server) closeLog() {
	if s.persist.w != nil {
		now := s.now().UnixNano()
		s.st.locks.PersistAll(now)
		s.journal(now)
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
	el, ok := s.run.el.Load().(gnet.EventLoop)
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
	if pr.Rewrote || pr.RewriteErr != nil {
		p.committing = false
	}
	if pr.RewriteErr != nil {
		p.rwRetry = s.now().Add(rewriteRetry).UnixNano()
		s.log.Error().Err(pr.RewriteErr).Dur("retry_in_ms", rewriteRetry).Msg("append-only log rewrite failed; the log is intact")
	}
	ack := pr.Written
	if s.cfg.AppendFsync == aof.Always {
		ack = pr.Synced
	}
	if ack > p.ack {
		p.ack = ack
	}
	if pr.Rewrote {
		s.log.Info().Str("file", p.path).Dur("took_ms", time.Since(p.rwStarted)).Int64("bytes", p.w.Stats().Size).
			Msg("append-only log rewritten")
	}
	s.pendHeld()
	s.flush()
	s.unpark() // connections that waited for their held replies to go out
	s.flush()
}

// appendRecord encodes one record of the journal or of a rewrite.
func (s *Server) appendRecord(ks *store.KeyState) { s.persist.buf = aof.AppendState(s.persist.buf, ks) }

// journaled reports whether the store has changes not yet handed to the log: store.Locks'
// journal, or the keyspace's records (Keyspace.Log: the Redis path on the keyspace).
func (s *Server) journaled() bool {
	return s.st.locks.Journaled() || len(s.st.store.Keyspace.Log()) > 0
}

// journal hands the records of the store's changes so far to the writer.
func (s *Server) journal(now int64) {
	p := &s.persist
	if p.w == nil || !s.journaled() {
		return
	}
	p.buf = p.buf[:0]
	s.st.locks.Journal(now, p.emit)
	if ks := s.st.store.Keyspace; len(ks.Log()) > 0 {
		p.buf = aof.AppendKeyspace(p.buf, ks.Log()) // runs of aof kind 6
		ks.ClearLog()
	}
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

// gateMark says that the bytes of a connection's output from at on must wait until the log
// has acknowledged the stream up to seq: they report a change (or something a change
// before them made visible) that the log has not yet written, or fsynced with always.
type gateMark struct {
	at  int
	seq uint64

	// Cluster mode: the level the reply waits for, the read barrier it waits for, whether
	// seq and rd are settled, and when it was made (Unix ns).
	lvl     Level
	settled bool
	rd      uint64
	since   int64
	after   uint64 // the leader's proposal count when its command ran: a later one proves leadership
}

// logGate is the reply gate of the append-only log: a reply waits until the log has
// acknowledged the changes made before it.
type logGate struct{ s *Server }

func (g logGate) turn() {}

func (g logGate) failing() string { return g.s.persist.w.Failing() }

// mark runs as a reply is added to slock connection cs's output at offset from: while the
// store has changes the log has not yet acknowledged (or not even been handed), the reply
// waits for them. Which log position it waits for is settled at the flush, after the changes
// made so far are handed to the log in one batch (writable). This is how a reply never
// overtakes the change it reports (nor one it saw).
func (g logGate) mark(cs *conn, from int) {
	s := g.s
	p := &s.persist
	if (p.seq <= p.ack || p.w.Failing() != "") && !s.journaled() {
		// While the log cannot be written, what it holds back waits (and the replies marked
		// for it), but a reply that reports no change (a read, an error) goes out: the
		// writes it may see are still unacknowledged to their writers.
		return
	}
	if n := len(cs.gates); n > 0 && (cs.gates[n-1].seq == 0 || cs.gates[n-1].seq == p.seq && !s.journaled()) {
		return // the mark before covers it
	}
	cs.gates = append(cs.gates, gateMark{at: from})
	s.hold(cs)
}

// writable returns how much of cs's output may be written now: up to the first mark the log
// has not yet passed. Marks still unsettled wait for everything handed to the log so far.
func (g logGate) writable(cs *conn) int {
	s := g.s
	p := &s.persist
	s.journal(p.lastNow)
	gs := cs.gates
	for j := range gs {
		if gs[j].seq == 0 {
			gs[j].seq = p.seq
		}
	}
	i := 0
	for i < len(gs) && gs[i].seq <= p.ack {
		i++
	}
	cs.gates = gs[:copy(gs, gs[i:])]
	if len(cs.gates) == 0 {
		return len(cs.out)
	}
	s.hold(cs)
	return cs.gates[0].at
}

// pendHeld marks every connection whose replies wait for the log for the next flush, which
// writes what the log has acknowledged since and holds the rest again.
func (s *Server) pendHeld() {
	p := &s.persist
	for i, cs := range p.held {
		p.held[i] = nil
		cs.inHeld = false
		s.pend(cs)
	}
	p.held = p.held[:0]
}

// hold lists cs among the connections whose replies wait for the log.
func (s *Server) hold(cs *conn) {
	if !cs.inHeld {
		cs.inHeld = true
		s.persist.held = append(s.persist.held, cs)
	}
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
	if st.Size > s.cfg.AOFRewriteSize && p.w.Failing() == "" && st.Size >= 2*st.BaseSize && ns >= p.rwRetry && !p.committing {
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
	s.st.locks.BeginSnapshot()
	s.st.store.Keyspace.BeginRewrite()
	p.w.BeginRewrite()
	s.log.Info().Int("keys", s.st.locks.LoggedKeys()).Int64("bytes", p.w.Stats().Size).Msg("append-only log rewrite started")
	return true
}

// rewriteStep snapshots the next slice of keys, the Locks' then the keyspace's; after the
// last it commits the rewrite. The journal must have written every change made before it
// (persistTick journals first): the keyspace's walk emits a key as it is now, and a record
// of an earlier change written after it would apply twice (keyspace_persist.go).
func (s *Server) rewriteStep(now int64) {
	p := &s.persist
	p.buf = p.buf[:0]
	done := s.st.locks.SnapshotNext(rewriteSlice, now, p.emit)
	if done {
		done = s.st.store.Keyspace.RewriteNext(rewriteSlice, p.ks.bind())
		p.buf = p.ks.flush(p.buf)
	}
	if len(p.buf) > 0 {
		p.seq = p.w.Append(aof.ToRewrite, p.buf)
	}
	if done {
		p.w.CommitRewrite()
		p.rewriting, p.committing = false, true
	}
}

// persistInfo gathers INFO's Persistence figures; nil when the log is off.
func (s *Server) persistInfo() *resp.InfoAOF {
	p := &s.persist
	if p.w == nil {
		return nil
	}
	st := p.w.Stats()
	now := s.now()
	a := &resp.InfoAOF{File: p.path, FsyncPolicy: st.Policy.String(), RewriteInProgress: p.rewriting,
		Rewrites: st.Rewrites, Rewritten: !st.LastRewrite.IsZero(), CurrentSize: st.Size, BaseSize: st.BaseSize,
		RewriteSize: s.cfg.AOFRewriteSize, PendingBytes: st.Pending, UnsyncedBytes: st.Unsynced,
		LastFsyncAgo: int64(now.Sub(st.LastSync).Seconds()), HeldRepliesConns: len(p.held),
		LastWriteError: st.LastWriteErr, LoadedRecords: int64(p.replayed.Records), LoadedKeys: int64(p.keys),
		LoggedKeys: int64(s.st.locks.LoggedKeys()), PersistAfterMS: s.cfg.LockPersistAfter.Milliseconds()}
	if a.Rewritten {
		a.LastRewriteTime = st.LastRewriteTime.Seconds()
		a.LastRewriteAgo = int64(now.Sub(st.LastRewrite).Seconds())
	}
	if st.Unsynced > 0 {
		a.FsyncLag = now.Sub(st.LastSync).Seconds()
	}
	return a
}
