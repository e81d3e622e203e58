package loop

import (
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// The hash commands of the Redis path on store.Keyspace (ksredis.go).

// ksHash runs a hash command on the keyspace.
func ksHash(s *Server, cs *conn, r *rediscmd.Request, now int64) bool {
	ks := s.st.store.Keyspace
	h := &r.Hash
	db, ms := cs.slock.text.DB, now/1e6
	defer s.ksPublish()
	var st store.Status
	b := s.scratchFor(cs)
	switch h.Op {
	case rediscmd.HashSet:
		if s.ksLockedByOther(cs, db, h.Key) {
			s.sendTo(cs, resp.AppendNull(b))
			return false
		}
		var n int
		if n, st = ks.HSet(db, h.Key, h.Args, ms); st == store.KeyspaceOK {
			if h.Name == "HMSET" {
				b = resp.AppendSimple(b, "OK")
			} else {
				b = resp.AppendInt(b, int64(n))
			}
		}
	case rediscmd.HashDel:
		if s.ksLockedByOther(cs, db, h.Key) {
			s.sendTo(cs, resp.AppendInt(b, 0))
			return false
		}
		var n int
		if n, st = ks.HDel(db, h.Key, h.Args, ms); st == store.KeyspaceOK || st == store.KeyspaceMissing {
			b = resp.AppendInt(b, int64(n))
		}
	case rediscmd.HashIncr:
		if s.ksLockedByOther(cs, db, h.Key) {
			s.sendTo(cs, resp.AppendNull(b))
			return false
		}
		var n int64
		if n, st = ks.HIncrBy(db, h.Key, h.Args[0], h.Delta, ms); st == store.KeyspaceOK {
			b = resp.AppendInt(b, n)
		}
	case rediscmd.HashGet:
		s.ks.tmp, st = ks.HGet(db, h.Key, h.Args[0], ms, s.ks.tmp[:0])
		b = s.ksField(b, st)
	case rediscmd.HashMGet:
		if st = ksHashKind(ks, db, h.Key, ms); st == store.KeyspaceOK || st == store.KeyspaceMissing {
			b = resp.AppendArray(b, len(h.Args))
			for _, f := range h.Args {
				var fst store.Status
				s.ks.tmp, fst = ks.HGet(db, h.Key, f, ms, s.ks.tmp[:0])
				b = s.ksField(b, fst)
			}
		}
	case rediscmd.HashLen:
		var n int
		if n, st = ks.HLen(db, h.Key, ms); st != store.KeyspaceWrongType {
			b = resp.AppendInt(b, int64(n))
		}
	case rediscmd.HashExists:
		var ok bool
		if ok, st = ks.HExists(db, h.Key, h.Args[0], ms); st != store.KeyspaceWrongType {
			b = resp.AppendInt(b, b2i(ok))
		}
	case rediscmd.HashGetAll, rediscmd.HashKeys, rediscmd.HashVals:
		var n int
		if n, st = ks.HLen(db, h.Key, ms); st == store.KeyspaceWrongType {
			break
		}
		if h.Op == rediscmd.HashGetAll {
			n *= 2
		}
		b = resp.AppendArray(b, n)
		if n > 0 {
			ks.HRange(db, h.Key, ms, func(f, v []byte) {
				if h.Op != rediscmd.HashVals {
					b = resp.AppendBulk(b, f)
				}
				if h.Op != rediscmd.HashKeys {
					b = resp.AppendBulk(b, v)
				}
			})
		}
	}
	if s.ksStatus(cs, st, h.Op == rediscmd.HashIncr) {
		return false
	}
	s.sendTo(cs, b)
	return false
}

// ksField appends a field's value read into s.ks.tmp, nil for none.
func (s *Server) ksField(b []byte, st store.Status) []byte {
	if st != store.KeyspaceOK {
		return resp.AppendNull(b)
	}
	return resp.AppendBulk(b, s.ks.tmp)
}

// ksHashKind is KeyspaceWrongType for a key that holds no hash, KeyspaceMissing for none.
func ksHashKind(ks *store.Keyspace, db uint8, key []byte, ms int64) store.Status {
	switch ks.Type(db, key, ms) {
	case store.KindNone:
		return store.KeyspaceMissing
	case store.KindHash:
		return store.KeyspaceOK
	}
	return store.KeyspaceWrongType
}
