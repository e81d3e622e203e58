package loop

import (
	"errors"
	"strconv"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// slockKV serves the key/value command parsed into cs's request: most run as a Lock or
// Unlock on the key (slock-protocol.md §8.2) and answer when it resolves; TTL, KEYS,
// SCAN, DBSIZE and FLUSHDB read or reset the store directly. Its command's own check
// (kvChecks) runs first; the lock command after it, unless the check answered.
func (s *Server) slockKV(cs *conn, now int64) {
	sc := cs.slock
	kv := &sc.req.KV
	db := sc.text.DB
	for i, k := range kv.Keys {
		id := kv.Frame.Key // the first key's, mapped by the parse (TTL builds no frame)
		if i > 0 || kv.Frame.Type == 0 {
			id = sc.text.KeyID(k)
		}
		if err := s.nameClash(db, id, k); err != nil {
			s.textError(cs, err)
			kv.Keys = nil
			return
		}
	}
	if check := kvChecks[kv.Op]; check != nil && check(s, cs, kv, db, now) {
		return
	}
	if kv.Op == rediscmd.OpDel && s.st.locks.LockedByOther(db, kv.Frame.Key, cs.owner, s.clientOf(cs)) {
		// Another connection's LOCK (or SETNX) holds the key: DEL would break it. As SET
		// on that key answers nil (not set), DEL answers 0 (not deleted).
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0))
		kv.Keys = nil
		return
	}
	if err := s.kvFits(kv, db); err != nil {
		s.textError(cs, err)
		return
	}
	sc.kvName, sc.kvPast = kv.Keys[0], kvPast(kv, now)
	if sc.kvPast && s.ps.notify != 0 && s.st.locks.Value(db, kv.Frame.Key) != nil {
		s.ps.muteExpiry(db, kv.Frame.Key) // its deletion is published as the command's (notify.go)
	}
	s.runKV(cs, now)
	kv.Keys, kv.Value = nil, nil // views into the request: gone once it is served
}

// kvCheck is a key/value command's own check before its lock command runs; true means it
// has answered (or refused) and nothing more runs.
type kvCheck func(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) (done bool)

// kvChecks are the key/value commands' own checks, by rediscmd.Op (SET ... GET is OpGetSet's);
// nil: the lock command runs at once (GET, SETNX, TYPE, STRLEN).
var kvChecks [rediscmd.OpGetEx + 1]kvCheck

func init() {
	kvChecks = [...]kvCheck{
		rediscmd.OpTTL: kvTTL, rediscmd.OpPTTL: kvTTL,
		rediscmd.OpKeys: func(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
			s.kvKeys(cs, db, kv.Value)
			return true
		},
		rediscmd.OpDBSize: func(s *Server, cs *conn, _ *rediscmd.KV, db uint8, _ int64) bool {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(s.st.locks.ValueCount(db))))
			return true
		},
		rediscmd.OpSet:    kvSetCheck,
		rediscmd.OpGetSet: kvWriteCheck, rediscmd.OpAppend: kvWriteCheck, rediscmd.OpIncr: kvWriteCheck,
		rediscmd.OpExpire: kvExpireCheck, rediscmd.OpPersist: kvExpireCheck,
		rediscmd.OpFlushDB: kvFlush, rediscmd.OpFlushAll: kvFlush,
		rediscmd.OpDigest: func(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
			v := s.st.locks.Value(db, cs.slock.text.KeyID(kv.Keys[0]))
			if hash, _ := rediscmd.IsHash(v); hash {
				s.textError(cs, rediscmd.ErrWrongType)
				return true
			}
			s.sendTo(cs, rediscmd.AppendDigest(s.scratchFor(cs), v))
			return true
		},
		// Compared (or read) and run in this one loop step: nothing of another client between.
		rediscmd.OpDelEx: casDelEx, rediscmd.OpGetDel: casGetDel, rediscmd.OpGetEx: casGetEx,
		rediscmd.OpDel: kvMany, rediscmd.OpExists: kvMany,
	}
}

// kvTTL answers TTL and PTTL.
func kvTTL(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) bool {
	id := cs.slock.text.KeyID(kv.Keys[0])
	ms := int64(-2) // a lock without a value (LOCK) is no key, as EXISTS says
	if s.st.locks.Value(db, id) != nil {
		ms = s.st.locks.TTL(db, id, now)
	}
	if ms >= 0 {
		ms = min(ms, s.st.locks.TTLAsked(db, id)) // never more than was asked, as in Redis
	}
	if ms >= 0 && kv.Op == rediscmd.OpTTL {
		ms = (ms + 500) / 1000 // rounded, as Redis does
	}
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), ms))
	return true
}

// kvFenced answers a write whose FENCE token is older than one the key has seen; true if
// it did.
func (s *Server) kvFenced(cs *conn, kv *rediscmd.KV, db uint8) bool {
	if seen := s.st.locks.KeyFence(db, kv.Frame.Key); kv.Fence != 0 && seen > kv.Fence {
		s.sendTo(cs, rediscmd.AppendFenced(s.scratchFor(cs), kv.Fence, seen))
		kv.Keys = nil
		return true
	}
	return false
}

// kvSetCheck checks SET's fence and its IF* condition.
func kvSetCheck(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
	if s.kvFenced(cs, kv, db) {
		return true
	}
	if kv.Cond != rediscmd.CondNone && !s.casSet(cs, kv, db) {
		kv.Keys = nil
		return true
	}
	return false
}

// kvWriteCheck checks GETSET's (SET ... GET's), APPEND's and the INCR family's fence, the
// key's type and SET ... IF* GET's condition; APPEND to a counter appends to its digits.
func kvWriteCheck(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
	if s.kvFenced(cs, kv, db) {
		return true
	}
	v := s.st.locks.Value(db, kv.Frame.Key)
	if hash, _ := rediscmd.IsHash(v); hash {
		s.textError(cs, rediscmd.ErrWrongType)
		return true
	}
	if kv.Op == rediscmd.OpGetSet && kv.Cond != rediscmd.CondNone && !kv.CondHolds(v) {
		s.sendTo(cs, rediscmd.AppendValue(s.scratchFor(cs), v, kv.Numbers)) // SET ... IF* GET: the old value, nothing set
		kv.Keys = nil
		return true
	}
	if kv.Op == rediscmd.OpAppend { // to a counter: to its digits
		var err error
		if s.sl.dataBuf, err = kv.NumberAppend(v, s.sl.dataBuf); err != nil {
			s.textError(cs, err)
			return true
		}
	}
	return false
}

// kvExpireCheck answers the EXPIRE family and PERSIST at once when there is nothing to do.
func kvExpireCheck(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) bool {
	if s.st.locks.Value(db, kv.Frame.Key) == nil {
		// No such key: 0, as in Redis (an Update of a key with no holder would take
		// a lock on it instead).
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0))
		kv.Keys = nil
		return true
	}
	ttl := s.st.locks.TTL(db, kv.Frame.Key, now)
	if kv.Op == rediscmd.OpPersist && ttl == -1 || kv.Op == rediscmd.OpExpire && kv.ExpIf != 0 && !kv.ExpireApplies(expiresAt(s, db, kv.Frame.Key, ttl, now)) {
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0)) // as in Redis: no expiry to remove, or an option says no
		kv.Keys = nil
		return true
	}
	return false
}

// kvFlush answers FLUSHDB and FLUSHALL. The database is empty at once for every client;
// its keys are freed a slice at a time (freeFlushed), as Redis's FLUSHALL ASYNC does.
// ASYNC and SYNC alike: the loop never stalls, and the log has the flush before this reply
// goes out.
func kvFlush(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) bool {
	which := db
	if kv.Op == rediscmd.OpFlushAll {
		which = store.AllDBs
	}
	s.sl.replies, s.sl.execs, _ = s.st.locks.Flush(which, now, s.sl.replies[:0], s.sl.execs[:0])
	s.drainLocks(now)
	s.freeFlushed()
	s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	return true
}

// kvMany runs DEL and EXISTS of several keys, a lock command each, and answers the count.
func kvMany(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) bool {
	if len(kv.Keys) <= 1 {
		return false
	}
	sc := cs.slock
	sc.kvMulti, sc.kvN = true, 0
	for i := range kv.Keys {
		kv.KeyFrame(&sc.text, func() [16]byte { return s.textID(cs) }, i)
		sc.kvName = kv.Keys[i]
		if kv.Op == rediscmd.OpDel && s.st.locks.LockedByOther(db, kv.Frame.Key, cs.owner, s.clientOf(cs)) {
			continue // another's lock: not deleted, not counted
		}
		s.runKV(cs, now)
	}
	sc.kvMulti = false
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), sc.kvN))
	kv.Keys = nil
	return true
}

// kvMGet answers MGET key...: an array of what GET answers for each key.
func (s *Server) kvMGet(cs *conn, args [][]byte, now int64) {
	sc := cs.slock
	if !s.runsWhole(cs) {
		s.mgetBegin(cs, args, now) // may go on across turns (textcont.go)
		return
	}
	for _, k := range args[1:] {
		if err := s.nameClash(sc.text.DB, sc.text.KeyID(k), k); err != nil {
			s.textError(cs, err)
			return
		}
	}
	s.sendTo(cs, resp.AppendArray(s.scratchFor(cs), len(args)-1))
	for i := 1; i < len(args); i++ {
		sc.req.KV.GetKey(args, i, &sc.text, func() [16]byte { return s.textID(cs) })
		s.runKV(cs, now) // a probe: answered at once
	}
	sc.req.KV.Keys = nil
}

// kvMSet answers MSET key value... (or with nx MSETNX: only if none of the keys exists):
// every key is checked before any is set, so all are set or none.
func (s *Server) kvMSet(cs *conn, args [][]byte, nx bool, now int64) {
	sc := cs.slock
	kv := &sc.req.KV
	db := sc.text.DB
	newID := func() [16]byte { return s.textID(cs) }
	defer func() { kv.Keys, kv.Value = nil, nil }()
	var err error
	for i := 1; i < len(args); i += 2 {
		if s.sl.dataBuf, err = kv.SetPair(args, i, &sc.text, newID, s.sl.dataBuf[:0]); err == nil {
			err = s.kvFits(kv, db)
		}
		if err == nil {
			err = s.nameClash(db, kv.Frame.Key, args[i])
		}
		if err != nil {
			s.textError(cs, err)
			return
		}
		held, mine := s.st.locks.Holds(db, kv.Frame.Key, kv.Frame.LockID)
		switch {
		case nx && held: // MSETNX: a key that exists (or is locked) sets nothing
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0))
			return
		case held && !mine:
			s.textError(cs, &rediscmd.TextError{Msg: "key '" + string(args[i]) + "' is held under another LockId (LOCK, SETNX): nothing was set"})
			return
		}
	}
	sc.kvMulti, sc.kvN = true, 0
	for i := 1; i < len(args); i += 2 {
		s.sl.dataBuf, _ = kv.SetPair(args, i, &sc.text, newID, s.sl.dataBuf[:0])
		sc.kvName = args[i]
		s.runKV(cs, now)
	}
	sc.kvMulti = false
	switch want := int64(len(args)-1) / 2; {
	case sc.kvN < want:
		s.textError(cs, &rediscmd.TextError{Msg: strconv.FormatInt(want-sc.kvN, 10) + " of the keys could not be set"})
	case nx:
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 1))
	default:
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	}
}

// kvFits answers an error if the value record kv would leave is longer than the store keeps.
func (s *Server) kvFits(kv *rediscmd.KV, db uint8) error {
	if n := s.kvSize(kv, db); n > int(s.cfg.SlockMaxData) {
		return &rediscmd.TextError{Msg: "value too long: " + strconv.Itoa(n) + " bytes with its key name, limit " +
			strconv.Itoa(int(s.cfg.SlockMaxData)) + " (--slock-max-data)"}
	}
	return nil
}

// kvSize is the length of the value record kv would leave (for APPEND, with the value it
// appends to), which the store keeps only up to --slock-max-data.
func (s *Server) kvSize(kv *rediscmd.KV, db uint8) int {
	if kv.Frame.Data == nil {
		return 0
	}
	if kv.Op == rediscmd.OpAppend {
		if old := s.st.locks.Value(db, kv.Frame.Key); len(old) > 4 {
			return len(old) - 4 + len(kv.Value)
		}
	}
	return len(kv.Frame.Data) - 4
}

// runKV runs kv.Frame for cs, which waits for its reply (kvReply renders it).
func (s *Server) runKV(cs *conn, now int64) {
	sc := cs.slock
	kv := &sc.req.KV
	cmd := frameCommand(&kv.Frame)
	cmd.ExpireAt = kv.ExpireAt // a Redis expiry, exact (the frame's 16-bit Expried cannot carry it)
	if kv.Op == rediscmd.OpIncr {
		cmd.Add, cmd.Delta = true, kv.Delta // the store adds (and checks) the delta
	}
	sc.waiting, sc.waitID, sc.waitLock, sc.kvActive = true, cmd.RequestID, false, true
	s.runLock(cs, &cmd, now)
	if sc.waiting && sc.kvActive { // it waits for a lock: its key's name outlives the request
		sc.kvKeep = append(sc.kvKeep[:0], sc.kvName...)
		sc.kvName = sc.kvKeep
	}
}

// kvReply answers the key/value command cs waited for with the reply to its lock command.
func (s *Server) kvReply(cs *conn, r *slock.LockReply, res store.LockResult) {
	sc := cs.slock
	sc.kvActive = false // also after one key of several: a later LOCK's reply is not the key's
	if sc.kvMulti {
		if rediscmd.KVCount(sc.req.KV.Op, r.Result, r.Value) {
			sc.kvN++
		}
		s.ps.notifyKV(cs, r) // notify.go
		return
	}
	switch res {
	case store.LockNotInteger:
		s.textError(cs, rediscmd.ErrNotInteger)
	case store.LockOverflow:
		s.textError(cs, rediscmd.ErrOverflow)
	default:
		if sc.req.KV.Op == rediscmd.OpGet {
			s.info.countLookup(r.Value != nil)
		}
		if f := sc.req.KV.Fence; f != 0 && (r.Result == slock.ResultOK || r.Result == slock.ResultLockedError) {
			s.st.locks.RaiseFence(r.DB, r.Key, f) // the fenced write is done: older tokens are refused from now on
		}
		if kv := &sc.req.KV; kv.Op == rediscmd.OpSet && kv.NX && kv.ExpireAt != 0 && r.Result == slock.ResultOK {
			s.m.hot.redisLock(r.DB, r.Key, sc.kvName) // a Redis lock taken: the status page lists it (ui.go)
		}
		s.sendTo(cs, rediscmd.AppendKVReply(s.scratchFor(cs), &sc.req.KV, r.Result, r.Value))
		s.ps.notifyKV(cs, r) // notify.go
	}
}

// kvKeys answers KEYS pattern with the names of db's keys that have a value, in no order.
// Its reply starts with the count, so it looks at every key at once: past rediscmd.KeysLimit
// keys it refuses (SCAN lists any number, a bounded step at a time), so that it never
// stalls the loop.
func (s *Server) kvKeys(cs *conn, db uint8, pattern []byte) {
	n := s.st.locks.ValueCount(db)
	if n > rediscmd.KeysLimit {
		s.textError(cs, rediscmd.KeysRefused(n, rediscmd.KeysLimit))
		return
	}
	if n > keysStep && !s.runsWhole(cs) {
		s.keysBegin(cs, db, pattern) // goes on across turns (textcont.go)
		return
	}
	q := rediscmd.Scan{Match: pattern}
	if len(pattern) == 1 && pattern[0] == '*' {
		q.Match = nil
	}
	names := s.sl.names[:0]
	s.st.locks.ScanValues(db, 0, n, func(_ [16]byte, v []byte) {
		if name, ok := q.Wants(v); ok {
			names = append(names, name)
		}
	})
	s.keysReply(cs, names)
}

// keysReply answers KEYS with names, which it then empties into s.sl.names for reuse.
func (s *Server) keysReply(cs *conn, names [][]byte) {
	b := resp.AppendArray(s.scratchFor(cs), len(names))
	for _, n := range names {
		b = resp.AppendBulk(b, n)
	}
	s.sendTo(cs, b)
	clear(names)
	s.sl.names = names[:0]
}

// kvScan answers SCAN cursor [MATCH p] [COUNT n] [TYPE t]: the next step of a walk over
// db's keys with a value, at most COUNT keys looked at.
func (s *Server) kvScan(cs *conn, db uint8, q *rediscmd.Scan) {
	names := s.sl.names[:0]
	next := s.st.locks.ScanValues(db, q.Cursor, q.Count, func(_ [16]byte, v []byte) {
		if name, ok := q.Wants(v); ok {
			names = append(names, name)
		}
	})
	s.sendTo(cs, rediscmd.AppendScanReply(s.scratchFor(cs), next, names))
	clear(names)
	s.sl.names = names[:0]
}

// kvHash answers a hash command: a read renders from the key's value record, a write runs
// in the store as a lock command on the key that never waits.
func (s *Server) kvHash(cs *conn, h *rediscmd.Hash, now int64) {
	db := cs.slock.text.DB
	if !h.Writes() {
		id := cs.slock.text.KeyID(h.Key)
		if err := s.nameClash(db, id, h.Key); err != nil {
			s.textError(cs, err)
			return
		}
		s.sendTo(cs, rediscmd.AppendHashRead(s.scratchFor(cs), h, s.st.locks.Value(db, id)))
		return
	}
	if err := s.nameClash(db, h.Frame.Key, h.Key); err != nil {
		s.textError(cs, err)
		return
	}
	cmd := frameCommand(&h.Frame)
	op := store.HashOp{Kind: hashKinds[h.Op], Args: h.Args, Delta: h.Delta}
	s.m.lockBegin(cs.owner, &cmd, false)
	var n int64
	var err error
	s.sl.replies, s.sl.execs, n, err = s.st.locks.Hash(cs.owner, &cmd, &op, now, s.sl.replies[:0], s.sl.execs[:0])
	if err != nil {
		s.textError(cs, hashError(err))
		return
	}
	result := slock.ResultTimeout
	for i := range s.sl.replies {
		if r := &s.sl.replies[i]; r.Owner == cs.owner && r.RequestID == cmd.RequestID {
			result = slockResults[r.Result]
		}
	}
	s.drainLocks(now) // what the write led to for others (the text connection waits for nothing)
	s.sendTo(cs, rediscmd.AppendHashWrite(s.scratchFor(cs), h, result, n))
	if result == slock.ResultOK || result == slock.ResultLockedError {
		s.ps.notifyHash(db, h, n, s.st.locks.Value(db, h.Frame.Key) == nil) // notify.go
	}
}

// hashKinds maps hash writes to the store's.
var hashKinds = [...]store.HashKind{rediscmd.HashSet: store.HashSet, rediscmd.HashDel: store.HashDel,
	rediscmd.HashIncr: store.HashIncr}

// hashError is the Redis error of a hash write the store refused.
func hashError(err error) error {
	var tl *store.ValueTooLongError
	switch {
	case errors.Is(err, store.ErrWrongType):
		return rediscmd.ErrWrongType
	case errors.Is(err, store.ErrHashNotInteger):
		return rediscmd.ErrHashNotInt
	case errors.Is(err, store.ErrHashOverflow):
		return rediscmd.ErrHashOverflow
	case errors.As(err, &tl):
		return rediscmd.ValueTooLong(tl.Size, tl.Limit)
	}
	return err
}

// expiresAt is when (Unix ms) key expires, -1 for never, from its ttl (Locks.TTL at now).
func expiresAt(s *Server, db uint8, key [16]byte, ttl, now int64) int64 {
	if ttl < 0 {
		return -1
	}
	return now/1e6 + min(ttl, s.st.locks.TTLAsked(db, key))
}
