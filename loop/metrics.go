package loop

import (
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/pool"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/stats"
	"github.com/tallyd/tallyd/store"
)

// What the loop counts for /metrics, and how it publishes it.
//
// Counting is plain integer arithmetic on arrays the loop alone owns: no atomics, no
// allocation, no clock reads per request. Latency is measured once per read batch (one
// OnTraffic): every reply of a batch goes out with one Write at its end, so the time a request
// spends in the loop is the batch's duration, and the batch is observed once with a weight of
// its number of requests. A clock read costs about 55 ns on the machines we measured, as much
// as a whole acquire+release pair; one per batch is noise, one per request would not be.
//
// Publishing copies the counters into a fresh stats.Snapshot on the loop, at a tick: every
// publishEvery, or at the next tick after a reader asked for one (a scrape). Readers get it
// through an atomic pointer (stats.Publisher) and never touch the loop's state.

// DefaultPublishEvery is how often the loop publishes a snapshot when nobody asks for one.
const DefaultPublishEvery = 250 * time.Millisecond

// Commands and outcomes of the yrmcds protocols (counter and semaphore).
const (
	ycOther   = 6 // commands 0-5 are counter.StatCmd's order: noop, get, acquire, release, stats, dump
	yoOther   = 7
	poStats   = uint8(store.Waiting) + 1 // PoolCounter outcomes 0-9 are store.Outcome's
	poWrong   = poStats + 1
	poBadCmd  = poStats + 2
	scOther   = 12 // slock commands 0-11 are the frame types
	soQueued  = 13 // slock outcomes 0-12 are the frame results
	soError   = 14 // a Redis-text command answered with an error
	soNoReply = 15
)

var commandNames = [numProtos][]string{
	ProtoCounter:   {"noop", "get", "acquire", "release", "stats", "dump", "other"},
	ProtoSemaphore: {"noop", "get", "acquire", "release", "stats", "dump", "other"},
	ProtoPool:      {"other", "acq4me", "acq4any", "release", "stats"},
	ProtoSlock: {"init", "lock", "unlock", "state", "admin", "ping", "quit", "call", "will_lock",
		"will_unlock", "leader", "subscribe", "other",
		// Redis-text commands that have no frame type (LOCK, UNLOCK, PUSH, PING, QUIT count as theirs).
		"echo", "select", "timeout", "info", "config", "client", "command",
		"set", "getset", "setnx", "setex", "psetex", "get", "exists", "type", "strlen", "incr", "incrby",
		"decr", "decrby", "append", "del", "unlink", "expire", "pexpire", "expireat", "pexpireat",
		"persist", "ttl", "pttl", "keys", "scan", "dbsize", "flushdb", "flushall"},
}

var outcomeNames = [numProtos][]string{
	ProtoCounter:   yrmcdsOutcomes,
	ProtoSemaphore: yrmcdsOutcomes,
	ProtoPool: {"locked", "done", "queue_full", "timeout", "lock_held", "not_locked", "released",
		"wait_for_response", "bad_syntax", "queued", "ok", "wrong_stat", "bad_command"},
	ProtoSlock: {"ok", "unknown_magic", "unknown_version", "unknown_db", "unknown_command", "locked_error",
		"unlock_error", "unown_error", "timeout", "expried", "state_error", "unknown_error", "ack_waiting",
		"queued", "error", "no_reply"},
}

var yrmcdsOutcomes = []string{"ok", "not_found", "invalid", "not_available", "not_acquired",
	"unknown_command", "out_of_memory", "other"}

// textCommands maps Redis-text command names to slock command indexes, by length for speed.
var textCommands = func() (m [16][]textCommand) {
	for i, name := range commandNames[ProtoSlock] {
		switch name {
		case "other", "init", "state", "admin", "call", "will_lock", "will_unlock", "leader", "subscribe":
			continue
		}
		m[len(name)] = append(m[len(name)], textCommand{name, uint8(i)})
	}
	m[4] = append(m[4], textCommand{"push", uint8(slock.TypeLock)})
	return m
}()

type textCommand struct {
	name string
	idx  uint8
}

// Ways a wait ends.
const (
	waitGranted = iota
	waitTimedOut
	waitDone
	waitOther
	numWaitEnds
)

var waitEndNames = [numWaitEnds]string{"granted", "timed_out", "done", "other"}

// Histogram bucket bounds in nanoseconds.
var (
	latencyBounds = []int64{1e3, 2.5e3, 5e3, 10e3, 25e3, 50e3, 100e3, 250e3, 500e3,
		1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 1e9}
	lagBounds = []int64{10e3, 25e3, 50e3, 100e3, 250e3, 500e3, 1e6, 2.5e6, 5e6, 10e6,
		25e6, 50e6, 100e6, 250e6, 500e6, 1e9, 2.5e9}
	latencySeconds = seconds(latencyBounds)
	lagSeconds     = seconds(lagBounds)
)

func seconds(ns []int64) []float64 {
	s := make([]float64, len(ns))
	for i, v := range ns {
		s[i] = float64(v) / 1e9
	}
	return s
}

// hist is a fixed-bucket histogram the loop owns; 20 buckets cover both kinds.
type hist struct {
	counts [20]uint64 // counts[i]: at most bounds[i]; counts[len(bounds)]: the rest
	count  uint64
	sumNs  uint64
}

// observe adds n observations of d nanoseconds.
func (h *hist) observe(bounds []int64, d int64, n uint64) {
	d = max(d, 0)
	i := 0
	for i < len(bounds) && d > bounds[i] {
		i++
	}
	h.counts[i] += n
	h.count += n
	h.sumNs += uint64(d) * n
}

func (h *hist) snapshot(bounds []float64) stats.Histogram {
	return stats.Histogram{Bounds: bounds, Counts: append([]uint64(nil), h.counts[:len(bounds)+1]...),
		Count: h.count, Sum: float64(h.sumNs) / 1e9}
}

// metrics is everything the loop counts for /metrics beyond what listenerStats and the
// store keep. Only the loop touches it, except the fields marked otherwise.
type metrics struct {
	memClosed  uint64          // connections closed for the memory budget
	memRefused uint64          // writes refused for the memory budget
	memEvicted uint64          // released counters, idle semaphores and orphaned slock requests evicted for the memory budget
	requests   [4 << 10]uint64 // by protocol (4), command (64) and outcome (16): see count
	bytesIn    [numProtos]uint64
	bytesOut   [numProtos]uint64
	waitsIn    [numProtos]uint64
	waitsOut   [numProtos][numWaitEnds]uint64
	latency    [numProtos]hist
	tickLag    hist
	ticks      uint64
	batch      uint64         // requests counted in the current OnTraffic
	cl         clusterMetrics // leader changes, proposal-to-commit times, -CLUSTERDOWN answers (health_metrics.go)
	hot        hotState       // the keys the status page lists (ui.go)

	lk         lockRun // the slock command being run
	inText     bool    // a Redis-text command is being served
	lockRan    bool    // it ran a lock command, whose result is textResult
	textResult uint8

	protos    []Proto // those with a listener, in Config order
	every     time.Duration
	published int64 // Unix ns of the last publication (loop's clock)

	pub      stats.Publisher
	boot     *stats.Snapshot // taken before the loop started: republished while it has no work
	idleAt   int64           // when the ticker last republished boot; the ticker goroutine owns it
	tickSent atomic.Int64    // Unix ns when the ticker handed over the turn not yet run; 0 = none
}

// lockRun follows one slock lock or unlock command through the store: whether its own reply
// came back at once (and with which result) or it waits.
type lockRun struct {
	owner   store.Owner
	id      [16]byte
	key     [16]byte // and db: the key, for the status page's list of waits
	db      uint8
	typ     uint8
	inner   bool // an EXECUTE or will command: counts waits, not requests
	text    bool // run by a Redis-text command: textDone counts it
	pending bool
	matched bool
	result  uint8
}

// Metrics returns where the loop publishes its snapshots, for the metrics HTTP server.
func (s *Server) Metrics() *stats.Publisher { return &s.m.pub }

// initMetrics runs in New, before the loop starts: it takes and publishes the first snapshot.
func (s *Server) initMetrics() {
	s.m.every = s.cfg.MetricsEvery
	if s.m.every <= 0 {
		s.m.every = DefaultPublishEvery
	}
	for _, l := range s.cfg.Listeners {
		if l.Proto >= numProtos {
			continue // the cluster's peer port: not a client protocol
		}
		seen := false
		for _, p := range s.m.protos {
			seen = seen || p == l.Proto
		}
		if !seen {
			s.m.protos = append(s.m.protos, l.Proto)
		}
	}
	s.m.boot = s.snapshot(time.Now())
	s.m.pub.Publish(s.m.boot)
}

// count records one request of protocol p. The index is masked into range: no bounds check.
func (m *metrics) count(p Proto, cmd, outcome uint8) {
	m.requests[int(p&3)<<10|int(cmd&63)<<4|int(outcome&15)]++
	m.batch++
}

// requestCount reads what count recorded.
func (m *metrics) requestCount(p Proto, cmd, outcome int) uint64 {
	return m.requests[int(p&3)<<10|(cmd&63)<<4|outcome&15]
}

// endTraffic runs when OnTraffic returns: it counts the bytes read and observes the batch's
// duration once per request it carried.
func (s *Server) endTraffic(cs *conn, inbound int, start int64) {
	s.m.lockFinish()
	if cs.proto >= numProtos {
		return // a peer link: not a client protocol
	}
	s.m.bytesIn[cs.proto] += uint64(max(inbound-cs.inLeft, 0))
	cs.inLeft = 0
	if !cs.closed {
		cs.inLeft = cs.c.InboundBuffered()
	}
	if n := s.m.batch; n > 0 {
		s.m.batch = 0
		s.m.latency[cs.proto].observe(latencyBounds, s.now().UnixNano()-start, n)
	}
}

// countYrmcds counts a yrmcds request answered with status st.
func (m *metrics) countYrmcds(p Proto, op counter.Opcode, st counter.Status) {
	m.count(p, yrmcdsCommand[op], yrmcdsOutcome[st])
}

// yrmcdsCommand and yrmcdsOutcome map opcodes and reply statuses to label indexes.
var yrmcdsCommand, yrmcdsOutcome = func() (cmd, outcome [256]uint8) {
	for op := range 256 {
		cmd[op] = ycOther
		if c, ok := counter.StatCmdOf(counter.Opcode(op)); ok {
			cmd[op] = uint8(c)
		}
		outcome[op] = yoOther
	}
	for i, st := range []counter.Status{counter.StatusOK, counter.StatusNotFound, counter.StatusInvalid,
		counter.StatusNotAvailable, counter.StatusNotAcquired, counter.StatusUnknownCommand, counter.StatusOutOfMemory} {
		outcome[st] = uint8(i)
	}
	return cmd, outcome
}()

// countPool counts a PoolCounter request answered (or queued) with o.
func (m *metrics) countPool(cmd pool.Cmd, o store.Outcome) {
	if o == store.Waiting {
		m.waitsIn[ProtoPool]++
	}
	m.count(ProtoPool, uint8(cmd), uint8(o))
}

// countPoolOther counts a STATS (ok tells whether it was understood) or a bad command.
func (m *metrics) countPoolOther(cmd pool.Cmd, ok bool) {
	switch {
	case cmd != pool.CmdStats:
		m.count(ProtoPool, uint8(pool.CmdBad), poBadCmd)
	case ok:
		m.count(ProtoPool, uint8(cmd), poStats)
	default:
		m.count(ProtoPool, uint8(cmd), poWrong)
	}
}

// poolWake counts a PoolCounter wait that ended.
func (m *metrics) poolWake(o store.Outcome) {
	switch o {
	case store.Locked:
		m.waitsOut[ProtoPool][waitGranted]++
	case store.Timeout:
		m.waitsOut[ProtoPool][waitTimedOut]++
	case store.Done:
		m.waitsOut[ProtoPool][waitDone]++
	default:
		m.waitsOut[ProtoPool][waitOther]++
	}
}

// slockFrame counts a binary slock frame other than a lock or unlock (those are counted when
// their result is known, by lockFinish).
func (m *metrics) slockFrame(t slock.Type) {
	switch t {
	case slock.TypeLock, slock.TypeUnlock:
	case slock.TypeInit, slock.TypeState, slock.TypeAdmin, slock.TypePing, slock.TypeQuit, slock.TypeCall,
		slock.TypeWillLock, slock.TypeWillUnlock, slock.TypeLeader:
		m.count(ProtoSlock, uint8(t), uint8(slock.ResultOK))
	default:
		m.count(ProtoSlock, scOther, uint8(slock.ResultUnknownCommand))
	}
}

// textMark is a Redis-text command being served: its command index and where its reply
// starts in s.out.
type textMark struct {
	cs   *conn
	cmd  uint8
	mark int
}

// textBegin starts counting a Redis-text command of cs; textDone, deferred, finishes.
func (m *metrics) textBegin(cs *conn, name []byte) textMark {
	m.inText, m.lockRan = true, false
	cmd := uint8(scOther)
	if len(name) < len(textCommands) {
		for _, tc := range textCommands[len(name)] {
			if resp.Is(name, tc.name) {
				cmd = tc.idx
				break
			}
		}
	}
	return textMark{cs, cmd, len(cs.out)}
}

// textDone counts a Redis-text command. A LOCK, UNLOCK or PUSH that ran has its lock result
// (or queued) as outcome; any other command, or one that did not run, error when it was
// answered with an error and ok otherwise (queued for a key/value command whose lock
// command waits).
func (m *metrics) textDone(t textMark) {
	m.inText = false
	outcome := uint8(slock.ResultOK)
	switch {
	case m.lockRan && (t.cmd == uint8(slock.TypeLock) || t.cmd == uint8(slock.TypeUnlock)):
		outcome = m.textResult
	case t.mark < len(t.cs.out) && t.cs.out[t.mark] == '-':
		outcome = soError
	case m.lockRan && m.textResult == soQueued:
		outcome = soQueued
	}
	m.count(ProtoSlock, t.cmd, outcome)
}

// lockBegin finishes the slock command followed so far and starts following cmd (nil: none,
// for expiries). inner marks EXECUTE and will commands, which are not requests of their own.
func (m *metrics) lockBegin(owner store.Owner, cmd *store.LockCommand, inner bool) {
	m.lockFinish()
	if cmd == nil {
		return
	}
	m.lk = lockRun{owner: owner, id: cmd.RequestID, key: cmd.Key, db: cmd.DB, typ: uint8(cmd.Kind), inner: inner,
		text: m.inText && !inner, pending: true}
}

// lockFinish ends following a command: its result is that of its own reply, or queued (a
// wait started) when no reply came. A frame's is counted here; a text command's is left
// for textDone.
func (m *metrics) lockFinish() {
	lk := &m.lk
	if !lk.pending {
		return
	}
	lk.pending = false
	outcome := uint8(soNoReply)
	switch {
	case lk.matched:
		outcome = min(lk.result, uint8(slock.ResultAckWaiting))
	case lk.typ == uint8(slock.TypeLock):
		outcome = soQueued
		m.waitsIn[ProtoSlock]++
		m.hot.waited(lk.db, lk.key)
	}
	switch {
	case lk.text:
		m.lockRan, m.textResult = true, outcome
	case !lk.inner:
		m.count(ProtoSlock, min(lk.typ, scOther), outcome)
	}
}

// lockReply sees every reply the lock store produces, before it is delivered or dropped: the
// followed command's own reply gives its result; any other reply to a lock ends a wait.
func (m *metrics) lockReply(r *store.LockReply) {
	lk := &m.lk
	if lk.pending && !lk.matched && r.Owner == lk.owner && r.RequestID == lk.id && uint8(r.Kind) == lk.typ {
		lk.matched, lk.result = true, uint8(slockResults[r.Result])
		return
	}
	if r.Kind != store.KindLock {
		return
	}
	switch r.Result {
	case store.LockOK:
		m.waitsOut[ProtoSlock][waitGranted]++
	case store.LockTimeout:
		m.waitsOut[ProtoSlock][waitTimedOut]++
	case store.LockExpried: // a hold ran out: not a wait (the store counts expiries)
	default:
		m.waitsOut[ProtoSlock][waitOther]++
	}
}

// tickHook runs at the start of every OnTick, on the ticker goroutine. Once the loop has
// a connection it notes when this turn is handed over (for the lag); before that the loop
// has no work and cannot be reached, so the ticker keeps the snapshot taken at start current.
func (s *Server) tickHook() {
	if _, ok := s.run.el.Load().(gnet.EventLoop); ok {
		s.m.tickSent.CompareAndSwap(0, s.now().UnixNano())
		return
	}
	now := time.Now()
	if s.run.stopping.Load() || (now.UnixNano()-s.m.idleAt < int64(s.m.every) && !s.m.pub.Asked()) {
		return
	}
	s.m.idleAt = now.UnixNano()
	snap := *s.m.boot // nothing it counts has changed: the loop has seen no connection
	snap.At = now
	snap.Logs = s.logsSnapshot() // what the log writers publish may be read from any goroutine
	snap.Unready = s.idleUnready()
	s.m.pub.Publish(&snap)
}

// metricsTick runs at the start of every tick on the loop: it observes the tick's lag and
// publishes a snapshot when one is due or asked for.
func (s *Server) metricsTick(now time.Time) {
	s.m.ticks++
	s.m.hot.on = s.m.pub.HotWanted(now.UnixNano())
	if sent := s.m.tickSent.Swap(0); sent != 0 {
		s.m.tickLag.observe(lagBounds, now.UnixNano()-sent, 1)
	}
	if s.m.pub.Asked() || now.UnixNano()-s.m.published >= int64(s.m.every) {
		s.m.published = now.UnixNano()
		s.m.pub.Publish(s.snapshot(time.Now()))
	}
}

// snapshot copies everything /metrics shows; it runs on the loop (or in New, before it).
func (s *Server) snapshot(at time.Time) *stats.Snapshot {
	m := &s.m
	snap := &stats.Snapshot{At: at, Started: time.Unix(0, s.info.started), Version: s.cfg.Version,
		Ticks: m.ticks, TickLag: m.tickLag.snapshot(lagSeconds), Protos: make([]stats.Proto, len(m.protos)),
		Memory: stats.Memory{Budget: uint64(s.cfg.MaxMemory), Input: uint64(s.mem.in), Output: uint64(s.mem.out),
			Wills: uint64(s.mem.wills), Store: uint64(s.st.store.Bytes()), Closed: m.memClosed, Refused: m.memRefused, Evicted: m.memEvicted},
		Loop: stats.Loop{Turns: s.fair.turnHist.snapshot(latencySeconds), MaxTurn: float64(s.fair.maxTurn) / 1e9,
			Yields: s.fair.yields, Slowlog: s.slow.total,
			PubsubChannels: len(s.ps.channels), PubsubPatterns: len(s.ps.patIdx), PubsubMessages: s.ps.received, PubsubCut: s.ps.cut}}
	for i, p := range m.protos {
		st := &s.ct.stats[p]
		ps := &snap.Protos[i]
		*ps = stats.Proto{Name: p.String(), Connections: st.CurrConnections, ConnectionsTotal: st.TotalConnections,
			Rejected: st.Rejected, BytesIn: m.bytesIn[p], BytesOut: m.bytesOut[p],
			Latency: m.latency[p].snapshot(latencySeconds)}
		nonzero := 0
		for c := range commandNames[p] {
			for o := range outcomeNames[p] {
				if m.requestCount(p, c, o) > 0 {
					nonzero++
				}
			}
		}
		ps.Requests = make([]stats.RequestCount, 0, nonzero)
		for c := range commandNames[p] {
			for o := range outcomeNames[p] {
				if n := m.requestCount(p, c, o); n > 0 {
					ps.Requests = append(ps.Requests, stats.RequestCount{Command: commandNames[p][c],
						Outcome: outcomeNames[p][o], N: n})
				}
			}
		}
		switch p {
		case ProtoCounter, ProtoSemaphore:
			info := s.st.counters.Info()
			if p == ProtoSemaphore {
				info = s.st.semaphores.Info()
			}
			ps.Objects, ps.Memory = info.Objects, info.UsedMemory
			ps.GCRuns, ps.GCSeconds = st.GCCount, float64(st.TotalGCElapsed)/1e6
		case ProtoPool:
			ps.Objects, ps.Held, ps.Waiting = s.st.pools.Gauges()
		case ProtoSlock:
			for db := 0; db <= store.MaxLockDB; db++ {
				if ls, ok := s.st.locks.State(uint8(db)); ok {
					ps.Objects += uint64(ls.KeyCount)
					ps.Held += uint64(ls.LockedCount)
					ps.Waiting += uint64(ls.WaitCount)
					ps.Expired += uint64(ls.ExpiredCount)
				}
			}
		}
		if p == ProtoPool || p == ProtoSlock {
			ps.HasWaits, ps.WaitsIn = true, m.waitsIn[p]
			ps.WaitsOut = make([]stats.WaitCount, 0, numWaitEnds)
			for w := range numWaitEnds {
				if w == waitDone && p != ProtoPool {
					continue
				}
				ps.WaitsOut = append(ps.WaitsOut, stats.WaitCount{Outcome: waitEndNames[w], N: m.waitsOut[p][w]})
			}
		}
	}
	if s.run.el.Load() == nil {
		snap.Unready = s.idleUnready() // in New, or before the loop runs: its state is not to be read
		snap.Logs = s.logsSnapshot()
		return snap
	}
	s.healthSnapshot(snap)
	if s.m.pub.HotWanted(at.UnixNano()) {
		snap.Hot = s.hotSnapshot(s.now().UnixNano())
	}
	return snap
}

// bytesSent counts reply bytes handed to a connection's socket.
func (m *metrics) bytesSent(p Proto, n int) {
	if p < numProtos {
		m.bytesOut[p] += uint64(n)
	}
}
