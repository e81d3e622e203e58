package loop

import (
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// This file serves the compare-and-set commands (DELEX, DELIFEQ, SET ... IF*) and GETDEL,
// GETEX: each reads the key's value and, in the same loop step, answers at once or goes on
// to run its lock command (a DEL's Unlock, an expiry Update, a SET), which is journaled,
// replicated and gated as any other.

// The checks of DELEX, DELIFEQ, GETDEL and GETEX (kvChecks): each reads the key's value and
// answers at once (no key, a condition that does not hold, a wrong type, nothing to change),
// or returns false: kv.Frame is to run.

// casDelEx checks DELEX and DELIFEQ.
func casDelEx(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
	if kv.Cond == rediscmd.CondNone {
		return false // as DEL of one key
	}
	key, v, hash := casValue(s, cs, kv, db)
	b := s.scratchFor(cs)
	switch {
	case hash:
		s.textError(cs, rediscmd.ErrWrongType)
	case !rediscmd.HasValue(v) || !kv.CondHolds(v):
		s.sendTo(cs, resp.AppendInt(b, 0))
	case s.st.locks.LockedByOther(db, key, cs.owner, s.clientOf(cs)):
		s.sendTo(cs, resp.AppendInt(b, 0)) // a LOCK under another LockId: not deleted, as DEL
	default:
		return false
	}
	kv.Keys = nil
	return true
}

// casGetDel checks GETDEL.
func casGetDel(s *Server, cs *conn, kv *rediscmd.KV, db uint8, _ int64) bool {
	key, v, hash := casValue(s, cs, kv, db)
	switch {
	case hash:
		s.textError(cs, rediscmd.ErrWrongType)
	case !rediscmd.HasValue(v), s.st.locks.LockedByOther(db, key, cs.owner, s.clientOf(cs)):
		s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
	default:
		return false
	}
	kv.Keys = nil
	return true
}

// casGetEx checks GETEX.
func casGetEx(s *Server, cs *conn, kv *rediscmd.KV, db uint8, now int64) bool {
	key, v, hash := casValue(s, cs, kv, db)
	b := s.scratchFor(cs)
	switch {
	case !rediscmd.HasValue(v):
		s.sendTo(cs, resp.AppendNull(b))
	case hash:
		s.textError(cs, rediscmd.ErrWrongType)
	case kv.Late != nil:
		s.textError(cs, kv.Late)
	case kv.Frame.Type == 0, kv.Persist && s.st.locks.TTL(db, key, now) == -1:
		s.sendTo(cs, rediscmd.AppendValue(b, v, kv.Numbers)) // nothing to change: a GET
	default:
		return false
	}
	kv.Keys = nil
	return true
}

// casValue is the key of kv (GETEX without options builds no frame), its value record and
// whether that is a hash.
func casValue(s *Server, cs *conn, kv *rediscmd.KV, db uint8) (key [16]byte, v []byte, hash bool) {
	key = cs.slock.text.KeyID(kv.Keys[0])
	v = s.st.locks.Value(db, key)
	hash, _ = rediscmd.IsHash(v)
	return key, v, hash
}

// casSet checks SET ... IF* kv (without GET) against the key's value: false when it has
// answered (a wrong type, or the condition does not hold: not set), true when the SET is to
// run.
func (s *Server) casSet(cs *conn, kv *rediscmd.KV, db uint8) bool {
	v := s.st.locks.Value(db, kv.Frame.Key)
	if hash, _ := rediscmd.IsHash(v); hash {
		s.textError(cs, rediscmd.ErrWrongType)
		return false
	}
	if !kv.CondHolds(v) {
		s.sendTo(cs, resp.AppendNull(s.scratchFor(cs)))
		return false
	}
	return true
}
