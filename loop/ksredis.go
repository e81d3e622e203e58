package loop

import (
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// This file is the Redis key/value path on store.Keyspace (issue 32, stage 2): with
// Config.RedisKeyspace the rows of the string, counter, key, hash, SCAN and fence commands
// run here instead of execs' handlers. The parse builds no lock frame (rediscmd.Text.Keyspace),
// the handler calls the Keyspace operation with the parsed arguments and appends the reply
// from its result: no slock frame, no lockwire, no LockReply. Values are appended by the
// store to a kept buffer (s.ks.tmp) and framed as RESP from it.

// ksState is the keyspace path's scratch, kept across commands so that it allocates nothing.
type ksState struct {
	tmp   []byte   // a value read from the store
	names [][]byte // KEYS and SCAN's names (views into the store, valid until it changes)
}

// ksExecs are the handlers of the rows that run on the keyspace, by rediscmd.Spec.Index;
// nil for the rows execs serves either way.
var ksExecs []execFn

func init() {
	ksExecs = make([]execFn, len(rediscmd.Commands()))
	for _, spec := range rediscmd.Commands() {
		var f execFn
		switch spec.Cmd {
		case rediscmd.CmdKV:
			f = ksKV
		case rediscmd.CmdMGet:
			f = ksMGet
		case rediscmd.CmdMSet, rediscmd.CmdMSetNX:
			f = ksMSet
		case rediscmd.CmdHash:
			f = ksHash
		case rediscmd.CmdScan:
			f = ksScan
		case rediscmd.CmdGetFence:
			f = ksGetFence
		}
		ksExecs[spec.Index] = f
	}
}

// ksEvents are the notification class of each keyspace event.
var ksEvents = [...]notifyFlags{store.EvNew: nNew, store.EvSet: nString, store.EvExpire: nGeneric,
	store.EvIncrBy: nString, store.EvIncrByFloat: nString, store.EvAppend: nString, store.EvDel: nGeneric,
	store.EvExpired: nExpired, store.EvPersist: nGeneric, store.EvHSet: nHash, store.EvHDel: nHash,
	store.EvHIncrBy: nHash}

// ksPublish publishes the keyspace's events since the last call as keyspace notifications
// (notify.go) and clears them.
func (s *Server) ksPublish() {
	ks := s.st.store.Keyspace
	evs := ks.Events()
	if len(evs) == 0 {
		return
	}
	if s.ps.notify&(nKeyspace|nKeyevent) != 0 {
		for _, ev := range evs {
			s.ps.notifyKey(ev.DB, ks.EventKey(ev), ksEvents[ev.Name], ev.Name.String())
		}
	}
	ks.ClearEvents()
}

// ksLockedByOther reports whether a LOCK holds the name key of db under a LockId that is
// not cs's (docs/redis.md "Locks and DEL", case 2): a Redis write to it is refused. It
// maps the name to its LockKey only while db has locks at all.
func (s *Server) ksLockedByOther(cs *conn, db uint8, key []byte) bool {
	if st, ok := s.st.locks.State(db); !ok || st.KeyCount == 0 {
		return false
	}
	return s.st.locks.LockedByOther(db, cs.slock.text.KeyID(key), cs.owner, s.clientOf(cs))
}

// ksHeld reports whether a LOCK holds the name key of db at all (MSET and MSETNX refuse
// it, whoever holds it, as they did on the Locks).
func (s *Server) ksHeld(db uint8, key []byte) bool {
	if st, ok := s.st.locks.State(db); !ok || st.KeyCount == 0 {
		return false
	}
	held, _ := s.st.locks.Holds(db, s.st.keys.KeyID(key), [16]byte{})
	return held
}

// ksTooLong answers the error of a string value longer than --slock-max-data with its key
// name (the store keeps no longer one, as the lock path did); true if it did.
func (s *Server) ksTooLong(cs *conn, n int) bool {
	if n <= int(s.cfg.SlockMaxData) {
		return false
	}
	s.textError(cs, rediscmd.ValueTooLong(n, int(s.cfg.SlockMaxData)))
	return true
}

// ksStatus answers an error status of the keyspace; true if st was one.
func (s *Server) ksStatus(cs *conn, st store.Status, hash bool) bool {
	var err error
	switch st {
	case store.KeyspaceOK, store.KeyspaceMissing:
		return false
	case store.KeyspaceWrongType:
		err = rediscmd.ErrWrongType
	case store.KeyspaceNotInt:
		err = rediscmd.ErrNotInteger
		if hash {
			err = rediscmd.ErrHashNotInt
		}
	case store.KeyspaceOverflow:
		err = rediscmd.ErrOverflow
	case store.KeyspaceFull:
		err = errKeyspaceFull
	case store.KeyspaceTooLong:
		err = &rediscmd.TextError{Msg: "key longer than 65535 bytes"}
	default:
		err = &rediscmd.TextError{Msg: "keyspace: " + st.String()}
	}
	s.textError(cs, err)
	return true
}

// errKeyspaceFull answers a write that would add a key past --max-objects keys.
var errKeyspaceFull = &rediscmd.TextError{Msg: "max number of keys reached (--max-objects): the key was not added"}

// ksValue appends GET's reply for the value in s.ks.tmp (st: how the read went): a bulk
// string, nil for no key; with numbers (CLIENT SLOCK ON) a counter as an integer.
func (s *Server) ksValue(b []byte, db uint8, key []byte, st store.Status, numbers bool, now int64) []byte {
	if st != store.KeyspaceOK {
		return resp.AppendNull(b)
	}
	if numbers && s.st.store.Keyspace.Kind(db, key, now) == store.KindInt {
		if n, ok := store.ParseInt(s.ks.tmp); ok {
			return resp.AppendInt(b, n)
		}
	}
	return resp.AppendBulk(b, s.ks.tmp)
}

// ksKV runs a key/value command (rediscmd.CmdKV) on the keyspace.
func ksKV(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	sc := cs.slock
	kv := &r.KV
	db := sc.text.DB
	ks := s.st.store.Keyspace
	ms := now / 1e6
	var key []byte
	if len(kv.Keys) > 0 {
		key = kv.Keys[0]
	}
	defer s.ksPublish()
	switch kv.Op {
	case rediscmd.OpGet:
		var st store.Status
		s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
		if st == store.KeyspaceWrongType {
			s.ksStatus(cs, st, false)
			return false
		}
		s.info.countLookup(st == store.KeyspaceOK)
		s.sendTo(cs, s.ksValue(s.scratchFor(cs), db, key, st, kv.Numbers, ms))
	case rediscmd.OpSet, rediscmd.OpGetSet, rediscmd.OpSetNX:
		s.ksSet(cs, kv, db, key, ms)
	case rediscmd.OpExists:
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(ks.Exists(db, kv.Keys, ms))))
	case rediscmd.OpType:
		name := "none"
		switch ks.Type(db, key, ms) {
		case store.KindString:
			name = "string"
		case store.KindHash:
			name = "hash"
		}
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), name))
	case rediscmd.OpStrlen:
		n, st := ks.StrLen(db, key, ms)
		if !s.ksStatus(cs, st, false) {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), n))
		}
	case rediscmd.OpIncr:
		if s.ksLockedByOther(cs, db, key) {
			s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
			return false
		}
		n, st := ks.IncrBy(db, key, kv.Delta, ms)
		if !s.ksStatus(cs, st, false) {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), n))
		}
	case rediscmd.OpAppend:
		if s.ksLockedByOther(cs, db, key) {
			s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
			return false
		}
		old, st := ks.StrLen(db, key, ms)
		if s.ksStatus(cs, st, false) || s.ksTooLong(cs, len(key)+int(old)+len(kv.Value)) {
			return false
		}
		n, st := ks.Append(db, key, kv.Value, ms)
		if !s.ksStatus(cs, st, false) {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), n))
		}
	case rediscmd.OpDel:
		n := 0
		for _, k := range kv.Keys {
			if !s.ksLockedByOther(cs, db, k) && ks.Del(db, k, ms) {
				n++
			}
		}
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(n)))
	case rediscmd.OpExpire:
		done := false
		if cur := ks.ExpireAt(db, key, ms); cur != -2 && !s.ksLockedByOther(cs, db, key) &&
			(kv.ExpIf == 0 || kv.ExpireApplies(cur)) {
			done = ks.Expire(db, key, kv.When, store.ExpireAlways, ms)
		}
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), b2i(done)))
	case rediscmd.OpPersist:
		done := !s.ksLockedByOther(cs, db, key) && ks.Persist(db, key, ms)
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), b2i(done)))
	case rediscmd.OpTTL, rediscmd.OpPTTL:
		t := ks.TTL(db, key, ms)
		if t >= 0 && kv.Op == rediscmd.OpTTL {
			t = (t + 500) / 1000 // rounded, as Redis does
		}
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), t))
	case rediscmd.OpKeys:
		s.ksKeys(cs, db, kv.Value, ms)
	case rediscmd.OpDBSize:
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(ks.Len(db))))
	case rediscmd.OpFlushDB, rediscmd.OpFlushAll:
		if kv.Op == rediscmd.OpFlushAll {
			ks.FlushAll()
		} else {
			ks.Flush(db)
		}
		kvFlush(s, cs, kv, db, now) // the locks of the database go too, as before; it answers +OK
	case rediscmd.OpDigest:
		var st store.Status
		s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
		switch {
		case s.ksStatus(cs, st, false):
		case st == store.KeyspaceMissing:
			s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
		default:
			s.sendTo(cs, rediscmd.AppendDigestOf(s.scratchFor(cs), s.ks.tmp))
		}
	case rediscmd.OpDelEx:
		done := false
		if kv.Cond == rediscmd.CondNone {
			done = !s.ksLockedByOther(cs, db, key) && ks.Del(db, key, ms)
		} else {
			var st store.Status
			s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
			if s.ksStatus(cs, st, false) {
				return false
			}
			// Compared and deleted in this one step of the loop: the native lock release.
			if st == store.KeyspaceOK && kv.CondHoldsValue(s.ks.tmp, true) && !s.ksLockedByOther(cs, db, key) {
				done = ks.Del(db, key, ms)
			}
		}
		s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), b2i(done)))
	case rediscmd.OpGetDel:
		var st store.Status
		if s.ksLockedByOther(cs, db, key) {
			s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
			if !s.ksStatus(cs, st, false) {
				s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
			}
			return false
		}
		s.ks.tmp, st = ks.GetDel(db, key, ms, s.ks.tmp[:0])
		if !s.ksStatus(cs, st, false) {
			s.sendTo(cs, s.ksValue(s.scratchFor(cs), db, key, st, false, ms))
		}
	case rediscmd.OpGetEx:
		var st store.Status
		s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
		switch {
		case st == store.KeyspaceMissing:
			s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
		case s.ksStatus(cs, st, false):
		case kv.Late != nil:
			s.textError(cs, kv.Late)
		default:
			b := s.ksValue(s.scratchFor(cs), db, key, st, kv.Numbers, ms)
			if !s.ksLockedByOther(cs, db, key) {
				switch {
				case kv.Persist:
					ks.Persist(db, key, ms)
				case kv.ExpireAt != 0:
					ks.Expire(db, key, kv.ExpireAt, store.ExpireAlways, ms)
				}
			}
			s.sendTo(cs, b)
		}
	default:
		s.textError(cs, &rediscmd.TextError{Msg: "unknown key/value command"})
	}
	return false
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ksSet runs SET (any options), SETEX, PSETEX, GETSET and SETNX.
func (s *Server) ksSet(cs *conn, kv *rediscmd.KV, db uint8, key []byte, ms int64) {
	ks := s.st.store.Keyspace
	get := kv.Op == rediscmd.OpGetSet
	notSet := func() {
		b := s.scratchFor(cs)
		switch kv.Op {
		case rediscmd.OpSetNX:
			b = resp.AppendInt(b, 0)
		default:
			b = resp.AppendNull(b)
		}
		s.sendTo(cs, b)
	}
	if kv.Fence != 0 {
		if seen := ks.KeyFence(db, key, ms); seen > kv.Fence {
			s.sendTo(cs, rediscmd.AppendFenced(s.scratchFor(cs), kv.Fence, seen))
			return
		}
	}
	if s.ksTooLong(cs, len(key)+len(kv.Value)) {
		return
	}
	if s.ksLockedByOther(cs, db, key) {
		notSet() // a LOCK under another LockId holds the name (docs/redis.md "Locks and DEL")
		return
	}
	o := store.SetOpts{KeepTTL: kv.KeepTTL, At: kv.ExpireAt, Get: get}
	switch {
	case kv.NX:
		o.Cond = store.SetNX
	case kv.XX:
		o.Cond = store.SetXX
	case kv.Cond != rediscmd.CondNone:
		// Compared and set in this one step: the value read, its condition decided here
		// (IFDEQ and IFDNE digest it), then set with nothing in between.
		var st store.Status
		s.ks.tmp, st = ks.Get(db, key, ms, s.ks.tmp[:0])
		if s.ksStatus(cs, st, false) {
			return
		}
		if !kv.CondHoldsValue(s.ks.tmp, st == store.KeyspaceOK) {
			if get {
				s.sendTo(cs, s.ksValue(s.scratchFor(cs), db, key, st, kv.Numbers, ms))
			} else {
				notSet()
			}
			return
		}
	}
	res, tmp := ks.Set(db, key, kv.Value, &o, ms, s.ks.tmp[:0])
	s.ks.tmp = tmp
	if s.ksStatus(cs, res.St, false) {
		return
	}
	if res.Done && kv.Fence != 0 {
		ks.RaiseFence(db, key, kv.Fence, ms) // older tokens are refused from now on
	}
	b := s.scratchFor(cs)
	switch {
	case get && res.Had:
		b = resp.AppendBulk(b, s.ks.tmp)
	case get:
		b = resp.AppendNull(b)
	case kv.Op == rediscmd.OpSetNX:
		b = resp.AppendInt(b, b2i(res.Done))
	case res.Done:
		b = resp.AppendSimple(b, "OK")
	default:
		b = resp.AppendNull(b)
	}
	s.sendTo(cs, b)
}

// ksKeys answers KEYS pattern from the keyspace. Past rediscmd.KeysLimit keys it refuses;
// past keysStep it walks them a step a turn (textcont.go), as on the Locks.
func (s *Server) ksKeys(cs *conn, db uint8, pattern []byte, ms int64) {
	ks := s.st.store.Keyspace
	n := ks.Len(db)
	if n > rediscmd.KeysLimit {
		s.textError(cs, rediscmd.KeysRefused(n, rediscmd.KeysLimit))
		return
	}
	if n > keysStep && !s.runsWhole(cs) {
		s.keysBegin(cs, db, pattern) // goes on across turns (textcont.go)
		return
	}
	all := len(pattern) == 1 && pattern[0] == '*'
	names := s.ks.names[:0]
	ks.Scan(db, 0, n, ms, func(key []byte, _ store.ValueKind) {
		if all || rediscmd.Match(pattern, key) {
			names = append(names, key)
		}
	})
	b := resp.AppendArray(s.scratchFor(cs), len(names))
	for _, k := range names {
		b = resp.AppendBulk(b, k)
	}
	s.sendTo(cs, b)
	clear(names)
	s.ks.names = names[:0]
}

// ksScan answers SCAN from the keyspace.
func ksScan(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	q := &r.Scan
	names := s.ks.names[:0]
	next := s.st.store.Keyspace.Scan(cs.slock.text.DB, q.Cursor, q.Count, now/1e6, func(key []byte, kind store.ValueKind) {
		if q.Type != nil && !resp.Is(q.Type, ksTypeName(kind)) {
			return
		}
		if q.Match != nil && !rediscmd.Match(q.Match, key) {
			return
		}
		names = append(names, key)
	})
	s.sendTo(cs, rediscmd.AppendScanReply(s.scratchFor(cs), next, names))
	clear(names)
	s.ks.names = names[:0]
	return false
}

func ksTypeName(k store.ValueKind) string {
	switch k {
	case store.KindString, store.KindInt:
		return "string"
	case store.KindHash:
		return "hash"
	}
	return "none"
}

// ksMGet answers MGET key...: what GET answers for each key (nil for a hash).
func ksMGet(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	ks := s.st.store.Keyspace
	db, ms := cs.slock.text.DB, now/1e6
	b := resp.AppendArray(s.scratchFor(cs), len(r.Args)-1)
	for _, k := range r.Args[1:] {
		var st store.Status
		s.ks.tmp, st = ks.Get(db, k, ms, s.ks.tmp[:0])
		s.info.countLookup(st == store.KeyspaceOK)
		b = s.ksValue(b, db, k, st, cs.slock.text.Slock, ms)
	}
	s.sendTo(cs, b)
	return false
}

// ksMSet answers MSET and MSETNX: every pair checked before any is set, so all are set or
// none.
func ksMSet(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	ks := s.st.store.Keyspace
	db, ms := cs.slock.text.DB, now/1e6
	nx := r.Spec.Cmd == rediscmd.CmdMSetNX
	args := r.Args
	if len(args)%2 != 1 {
		s.textError(cs, r.Spec.ArityError())
		return false
	}
	defer s.ksPublish()
	for i := 1; i < len(args); i += 2 {
		if len(args[i]) > store.MaxKeyLen {
			s.ksStatus(cs, store.KeyspaceTooLong, false)
			return false
		}
		if s.ksTooLong(cs, len(args[i])+len(args[i+1])) {
			return false
		}
		if s.ksHeld(db, args[i]) { // as on the Locks: any LOCK's holder, this connection's too
			if nx {
				s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), 0))
			} else {
				s.textError(cs, &rediscmd.TextError{Msg: "key '" + string(args[i]) + "' is held under another LockId (LOCK, SETNX): nothing was set"})
			}
			return false
		}
	}
	if nx {
		done, st := ks.MSetNX(db, args[1:], ms)
		if !s.ksStatus(cs, st, false) {
			s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), b2i(done)))
		}
		return false
	}
	if st := ks.MSet(db, args[1:], ms); !s.ksStatus(cs, st, false) {
		s.sendTo(cs, resp.AppendSimple(s.scratchFor(cs), "OK"))
	}
	return false
}

// ksGetFence answers GETFENCE key from the keyspace's fences.
func ksGetFence(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	f := s.st.store.Keyspace.KeyFence(cs.slock.text.DB, r.Args[1], now/1e6)
	s.sendTo(cs, resp.AppendInt(s.scratchFor(cs), int64(f)))
	return false
}
