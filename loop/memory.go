package loop

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// The memory budget (--max-memory), after Redis's maxmemory and its client buffer limits.
// It covers what the clients make the server hold:
//
//   - buffered input: each connection's unparsed bytes (gnet's InboundBuffered) times
//     inputCost, noted at the end of each of its turns, and its MULTI queue;
//   - buffered output: each connection's unwritten replies (cap of conn.out) plus what gnet
//     still has to send (OutboundBuffered), noted at each write;
//   - pending WILL commands, noted as they are queued;
//   - the file of a SNAPSHOT in progress (backupState.size, backup.go);
//   - stored state, as each family keeps it (store.Store.Bytes, store/memcost.go): counters
//     and semaphores with their names and the connections' shares, PoolCounter keys and
//     entries, slock keys, holders and queued requests with their values, data records and
//     attached EXECUTEs, and what the store keeps for reuse;
//   - cached scripts, compiled (script.Engine.Memory: several times their bodies).
//
// Each total is updated where its bytes change; nothing is scanned per request. Beyond the
// budget tallyd does what fits each kind:
//
//   - What no client is owed gives way first (makeRoom): what the store keeps for reuse,
//     released counters (their names and interval maximum, kept for Dump until the interval
//     ends) and idle semaphores, oldest first, then requests queued by connections that have
//     closed, which time out, oldest first.
//   - What would grow the store is refused with the protocol's own error, as Redis refuses
//     commands flagged denyoom (noeviction): Redis-text writes that add data answer
//     "-OOM command not allowed when used memory > 'maxmemory'.", a yrmcds Acquire that would
//     create a counter or semaphore, or the connection's first share of one, answers 0x82
//     Out of memory, a binary slock Lock answers
//     UNKNOWN_ERROR, a WILL is refused, and so is an Unlock carrying a data record that may
//     add data (unlockOOM). Reads, releases, plain unlocks and deletes still work, so
//     clients can give memory back.
//   - Buffers are not refusable (a partial request is already in memory; output is owed): the
//     connections buffering the most are closed, largest first (Redis's client buffer
//     limits), until usage is an eighth below the budget or the buffers are down to their
//     slack (bufSlack: a sixteenth of the budget, and at least a few of the largest requests,
//     so that a client writing a large value while the store is full gets its -OOM rather
//     than a close). Connections buffering less than shedFloor are never closed for it.
//
// Per connection, --max-input and --max-output cap the buffers and --slock-max-wills and
// --slock-max-will-bytes the pending WILL commands, whatever the budget.

// inputCost is what a byte of parked input costs: gnet's ring buffer grows by doubling,
// and each turn that finds the request still partial copies it whole to parse it again
// (Conn.Peek), garbage that lives until the next collection.
const inputCost = 2

// shedFloor is the least a connection must buffer to be closed for the budget.
const shedFloor = 4 << 10

// bufSlack is what the buffers may hold while memory is over the budget without anyone
// being closed for it: a sixteenth of the budget, and at least four of the largest requests.
func (s *Server) bufSlack() int64 {
	big := int64(max(s.cfg.MaxBody, s.cfg.SlockMaxData)) + 1<<10
	return max(s.cfg.MaxMemory/16, 4*inputCost*big)
}

// memState is the budget's running totals (bytes).
type memState struct {
	in    int64 // parked input and MULTI queues of every connection (conn.memIn, conn.memTx)
	out   int64 // output of every connection (conn.memOut)
	wills int64 // pending WILL commands of every connection (slockConn.willBytes)

	// room is what binary slock frames may still add before the budget is read again
	// (lockOOM): the headroom at the last reading, less frameGrowth for each plain Lock
	// or Unlock since. 0: read it at the next Lock. Each connection's turn starts at 0.
	room int64

	shedAt    int64 // in+out after the last shedding scan
	shedTicks uint64
	ticks     uint64 // ticks so far: a scan runs at most once a tick unless buffers grew a lot
	shed      []*conn
	log       rateLog
	evictLog  rateLog
}

// memUsed is what the budget counts now.
func (s *Server) memUsed() int64 {
	return s.mem.in + s.mem.out + s.mem.wills + s.st.store.Bytes() + s.scriptMem() + s.bk.size + s.installBytes()
}

// overBudget reports whether the budget is set and exceeded, once what no client is owed
// has given way (makeRoom): writes that would grow the store are refused.
func (s *Server) overBudget() bool {
	if s.cfg.MaxMemory <= 0 || s.memUsed() <= s.cfg.MaxMemory {
		return false
	}
	s.makeRoom()
	return s.memUsed() > s.cfg.MaxMemory
}

// makeRoom lets what no client is owed give way while memory is over the budget, until it
// is a 32nd below it (so that not every write near the budget evicts) or nothing such is
// left, in this order: what the store keeps for reuse; scripts only EVAL sent, least
// recently used first (not while a script runs); released counters, their names and
// interval maximum (Dump lists them until the interval ends), and semaphores nobody holds
// (their collection is due anyway), those idle longest first; then requests still queued by
// connections that have closed, oldest first, which time out as at their Timeout (the
// TIMEOUT goes to a later connection with the same ClientId, if one came). Each costs
// O(what it frees); the queued requests cost a walk of the deadline heap, and only while
// some are orphaned.
func (s *Server) makeRoom() {
	budget := s.cfg.MaxMemory
	need := s.memUsed() - budget + budget/32
	freed := s.st.locks.Trim() + s.st.pools.Trim()
	if freed < need {
		freed += s.freeFlushedFor(need - freed) // keys FLUSHALL already took from every client (fair.go)
	}
	if freed < need && s.scr.eng != nil && !s.scr.running {
		freed += s.scr.eng.EvictEval(need - freed) // scripts only EVAL sent: the client sends them again
	}
	var counters, semaphores, waits int
	if freed < need {
		var f int64
		f, counters = s.st.counters.Evict(need - freed)
		freed += f
	}
	if freed < need {
		var f int64
		f, semaphores = s.st.semaphores.Evict(need - freed)
		freed += f
	}
	if freed < need && s.st.locks.Orphans() > 0 {
		now := s.now().UnixNano()
		var f int64
		s.sl.replies, s.sl.execs, f, waits = s.st.locks.EvictOrphans(need-freed, now, s.sl.replies[:0], s.sl.execs[:0])
		freed += f
		s.drainLocks(now)
	}
	if n := counters + semaphores + waits; n > 0 {
		s.m.memEvicted += uint64(n)
		if missed, ok := s.mem.evictLog.allow(s.now()); ok {
			s.log.Warn().Int("counters", counters).Int("semaphores", semaphores).Int("queued_requests", waits).
				Int64("freed", freed).Int64("used", s.memUsed()).Int64("limit", budget).
				Uint64("more_since_last_line", missed).
				Msg("memory over the budget (max-memory): released counters, idle semaphores and closed connections' queued requests gave way")
		}
	}
}

// noteIn records that cs has n bytes of unparsed input, and sheds if that took memory over
// the budget.
func (s *Server) noteIn(cs *conn, n int) {
	grew := n > cs.memIn
	s.mem.in += int64(n - cs.memIn)
	cs.memIn = n
	if grew && s.cfg.MaxMemory > 0 {
		s.shedIfOver()
	}
}

// noteOut records cs's output (its buffer and what gnet still has to send), and sheds if
// that took memory over the budget.
func (s *Server) noteOut(cs *conn) {
	n := cap(cs.out) + cs.sent
	grew := n > cs.memOut
	s.mem.out += int64(n - cs.memOut)
	cs.memOut = n
	if grew && s.cfg.MaxMemory > 0 {
		s.shedIfOver()
	}
}

// noteTx records the size of cs's MULTI queue, and sheds if that took memory over the
// budget.
func (s *Server) noteTx(cs *conn) {
	n := cap(cs.slock.tx.queue)
	grew := n > cs.memTx
	s.mem.in += int64(n - cs.memTx)
	cs.memTx = n
	if grew && s.cfg.MaxMemory > 0 {
		s.shedIfOver()
	}
}

// buffered is what cs buffers, as the budget counts it.
func (cs *conn) buffered() int { return cs.memIn + cs.memOut + cs.memTx }

// forgetMem takes a closed connection's buffers and WILLs out of the totals.
func (ms *memState) forgetMem(cs *conn) {
	ms.in -= int64(cs.memIn + cs.memTx)
	ms.out -= int64(cs.memOut)
	cs.memIn, cs.memOut, cs.memTx = 0, 0, 0
	if cs.slock != nil {
		ms.wills -= int64(cs.slock.willBytes)
		cs.slock.willBytes = 0
	}
}

// shedIfOver closes the connections buffering the most while memory is over the budget
// because of buffers. The scan runs at most once a tick, or again when buffers grew by a
// sixteenth of the budget since the last one, so its cost is amortized over the bytes that
// made it necessary.
func (s *Server) shedIfOver() {
	budget := s.cfg.MaxMemory
	bufs := s.mem.in + s.mem.out
	used := s.memUsed()
	slack := s.bufSlack()
	if used <= budget || bufs <= slack {
		return
	}
	if s.mem.shedTicks == s.mem.ticks && bufs < s.mem.shedAt+budget/16 {
		return
	}
	need := min(used-budget+budget/8, bufs-slack)
	cand := s.mem.shed[:0]
	for _, cs := range s.ct.conns {
		if !cs.closed && !cs.closing && !cs.quit && cs.buffered() >= shedFloor {
			cand = append(cand, cs)
		}
	}
	slices.SortFunc(cand, func(a, b *conn) int { return cmp.Compare(b.buffered(), a.buffered()) })
	var freed int64
	closed := 0
	for _, cs := range cand {
		if freed >= need {
			break
		}
		freed += int64(cs.buffered())
		closed++
		if missed, ok := s.mem.log.allow(s.now()); ok {
			s.log.Warn().Uint64("conn", uint64(cs.owner)).Stringer("proto", cs.proto).
				Str("remote", remoteAddr(cs.c).String()).Int("input", cs.memIn+cs.memTx).Int("output", cs.memOut).
				Int64("used", used).Int64("limit", budget).Uint64("more_since_last_line", missed).
				Msg("closing connection: memory over the budget (max-memory), it buffers the most")
		}
		s.m.memClosed++
		if cs == s.cur {
			cs.quit = true
		} else {
			s.closeLater(cs)
		}
	}
	clear(cand)
	s.mem.shed = cand[:0]
	s.mem.shedAt, s.mem.shedTicks = bufs-freed, s.mem.ticks
}

// oomText is Redis's reply to a denyoom command beyond maxmemory.
const oomText = "OOM command not allowed when used memory > 'maxmemory'."

// refuseOOM logs (rate-limited) a write refused for the budget.
func (s *Server) refuseOOM(cs *conn, what string) {
	s.m.memRefused++
	if missed, ok := s.logs.oom.allow(s.now()); ok {
		s.log.Warn().Stringer("proto", cs.proto).Str("refused", what).Int64("used", s.memUsed()).
			Int64("limit", s.cfg.MaxMemory).Uint64("more_since_last_line", missed).
			Msg("write refused: memory over the budget (max-memory)")
	}
}

// yrmcdsOOM reports whether an Acquire of name must be refused with Out of memory: memory is
// over the budget and the Acquire would add to it, creating the counter (or semaphore) or
// the connection's first share of it (an entry of its ledger). A connection adding to what
// it holds is served.
func (s *Server) yrmcdsOOM(cs *conn, name []byte) bool {
	if !s.overBudget() || cs.ledger.Held(name) != 0 {
		return false
	}
	var exists bool
	if cs.proto == ProtoCounter {
		_, exists = s.st.counters.Get(name)
	} else {
		_, exists = s.st.semaphores.Get(name)
	}
	if exists {
		s.refuseOOM(cs, "acquire: a connection's first share of a name")
	} else {
		s.refuseOOM(cs, "acquire of a new name")
	}
	return true
}

// willRefusal says why a WILL command of size bytes cannot be queued on cs ("" if it can).
func (s *Server) willRefusal(cs *conn, size int) string {
	sc := cs.slock
	switch {
	case s.cfg.SlockMaxWills > 0 && len(sc.wills) >= s.cfg.SlockMaxWills:
		return "too many WILL commands on this connection: " + strconv.Itoa(len(sc.wills)) +
			" queued, limit " + strconv.Itoa(s.cfg.SlockMaxWills) + " (slock-max-wills)"
	case s.cfg.SlockMaxWillBytes > 0 && sc.willBytes+size > s.cfg.SlockMaxWillBytes:
		return "WILL commands on this connection over " + strconv.Itoa(s.cfg.SlockMaxWillBytes) +
			" bytes: " + strconv.Itoa(sc.willBytes) + " queued, this one " + strconv.Itoa(size) + " (slock-max-will-bytes)"
	case s.overBudget():
		s.refuseOOM(cs, "WILL")
		return oomText
	}
	return ""
}

// queueWill queues cmd (its data copied) as one of cs's WILL commands.
func (s *Server) queueWill(cs *conn, cmd store.LockCommand) {
	cmd.Data = append([]byte(nil), cmd.Data...)
	s.stampLock(cs, &cmd)
	n := willCost + len(cmd.Data)
	cs.slock.wills = append(cs.slock.wills, cmd)
	cs.slock.willBytes += n
	s.mem.wills += int64(n)
}

// willCost is what a WILL command costs besides its data.
const willCost = 128

// frameGrowth is more than a Lock or Unlock without data adds to what the budget counts: a
// new key, a new holder or waiter, their map entries, and twice their deadline slots (a
// hold's and an aging one), which pays for the heap's doublings after the first (the
// first is held in reserve: Store.HeapGrowth).
const frameGrowth = 1 << 10

// roomMax is the most headroom lockOOM counts down from before it reads the budget again
// (at most a 32nd of the budget): one reading per read of 64 KiB of frames at most.
const roomMax = 1 << 20

// lockOOM reports whether a binary slock Lock, or an Unlock carrying data that may add
// data, must be refused for the budget, and then answers it. The budget is read (memUsed)
// only once frames without data have used up the headroom of the last reading, each
// counted at frameGrowth, so a Lock is never let in that the reading at its arrival
// would refuse: the turn that may have grown memory otherwise starts over at 0.
func (s *Server) lockOOM(cs *conn, f *slock.Frame) bool {
	plain := f.Data == nil
	if plain && s.mem.room >= frameGrowth {
		s.mem.room -= frameGrowth
		return false
	}
	s.mem.room = 0
	if f.Type != slock.TypeLock && (f.Type != slock.TypeUnlock || !mayAddData(f.Data)) || !s.overBudget() {
		if plain && f.Type == slock.TypeLock {
			if used := s.memUsed(); used < s.cfg.MaxMemory {
				// The deadline heap's next doubling comes at once, not a slot a Lock.
				free := s.cfg.MaxMemory - used - s.st.store.HeapGrowth()
				s.mem.room = min(free, s.cfg.MaxMemory/32, roomMax) - frameGrowth
			}
		}
		return false
	}
	s.refuseOOM(cs, "slock "+f.Type.String())
	s.put(cs, slock.AppendLockReply(s.out(cs), &slock.LockReply{Type: f.Type, RequestID: f.RequestID,
		Result: slock.ResultUnknownError, DB: f.DB, LockID: f.LockID, Key: f.Key}))
	return true
}

// mayAddData reports whether data record rec may make the store keep more: anything but a
// stage-0 UNSET, SHIFT or POP (which only shrink a value), or a record the store ignores.
// An Unlock carrying such a record is refused beyond the budget: each one could otherwise
// add a 1 MiB value to a key kept by another holder, or attach an EXECUTE to a holder kept
// by another level.
func mayAddData(rec []byte) bool {
	if len(rec) < 6 {
		return false
	}
	switch b := rec[4]; {
	case b>>6 != slock.StageCurrent:
		return true
	case b&0x3f == slock.DataUnset, b&0x3f == slock.DataShift, b&0x3f == slock.DataPop:
		return false
	}
	return true
}

// textUnlockOOM reports whether a text UNLOCK must be refused for the budget (lockOOM), and
// then answers it with Redis's -OOM.
func (s *Server) textUnlockOOM(cs *conn, cmd *store.LockCommand) bool {
	if s.cfg.MaxMemory <= 0 || cmd.Kind != store.KindUnlock || !mayAddData(cmd.Data) || !s.overBudget() {
		return false
	}
	s.refuseOOM(cs, "UNLOCK with data")
	s.sendTo(cs, resp.AppendError(s.scratchFor(cs), oomText))
	return true
}

// willLog logs (rate-limited) a refused WILL command.
func (s *Server) willLog(cs *conn, why string) {
	if missed, ok := s.logs.oom.allow(s.now()); ok {
		s.log.Warn().Uint64("conn", uint64(cs.owner)).Str("why", why).
			Uint64("more_since_last_line", missed).Msg("WILL command refused")
	}
}
