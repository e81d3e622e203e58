package store

import "encoding/binary"

// Moving old data over (issue 32): the Redis values a log or a backup of before the keyspace
// restores into the Locks (strings, counters, hashes, their expiries and fences) are moved
// into the keyspace by MoveValues, a bounded walk per call, after the replay or the restore
// and before the first request is served.
//
// Which Locks keys are Redis keys: a key with a value record naming it (its KEY property:
// every Redis command writes one), held by one holder under the key itself as LockId (SET,
// INCR, HSET, ... hold the key so) and waited on by nobody. What the Locks hold otherwise
// stays there: slock's own locks (a LOCK, a binary Lock, a SETNX with CLIENT SLOCK ON hold
// the key under another LockId), values without a name (a binary client's data record),
// ARRAY values (slock's PUSH), keys with several holders or waiters.
//
// A moved key is in the keyspace as it was: a NUMBER value as an integer, a KV value
// (locks_hash.go) as a hash, any other as a string; its expiry is when the Locks would have
// let the holder go (an exact expiry, LockCommand.ExpireAt, as it is; a deadline in ns
// rounded up to the ms), none if the holder never expires; its fence as the key's. In the
// Locks the key is then gone, as its holder's release leaves it: with LocksConfig.Persist
// its journal records it gone, and with KeyspaceConfig.Log the keyspace's records of it go
// in Log, so that the next journal writes both and a later replay finds it in the keyspace
// only. A name the keyspace has already keeps the keyspace's value (the newer family); the
// Locks' is dropped all the same (Moved.Clashed counts them).

// moveState is MoveValues' place: the database and the slots of its value table still to
// look at (once in it).
type moveState struct {
	db  int
	in  bool
	cur int
	rec Record
	buf []byte
}

// Moved says what a MoveValues call did.
type Moved struct {
	Moved   int  // keys moved into the keyspace
	Clashed int  // keys whose name the keyspace had: the Locks' value dropped
	Kept    int  // keys with a value looked at and left in the Locks (locks, unnamed, arrays)
	Done    bool // the walk is over: every database's value table was looked at
}

// MoveValues moves up to budget more of the Locks' Redis key/value entries into the
// keyspace (looking at budget keys at most, moved or kept), at now (Unix ns), and reports
// what it did. Call it until Done; a call after Done starts a new walk. Between calls the
// walk keeps SCAN's guarantee (locks_values.go): a key that had a value for the whole walk
// is looked at; one made meanwhile may not be, so call it before serving.
func (s *Store) MoveValues(budget int, now int64) Moved {
	l, ks := s.Locks, s.Keyspace
	mv := &s.mv
	var m Moved
	for budget > 0 {
		if mv.db > MaxLockDB {
			*mv = moveState{buf: mv.buf[:0]}
			m.Done = true
			return m
		}
		d := l.dbs[mv.db]
		if d != nil && (!mv.in || mv.cur > len(d.vals)) {
			mv.in, mv.cur = true, len(d.vals) // from its end, or after deletions meanwhile
		}
		if d == nil || mv.cur == 0 {
			mv.db, mv.in = mv.db+1, false
			continue
		}
		mv.cur--
		budget--
		k := d.vals[mv.cur]
		switch s.moveKey(l, ks, k, now) {
		case moveDone:
			m.Moved++
		case moveClash:
			m.Clashed++
		default:
			m.Kept++
		}
	}
	return m
}

// What moveKey did with a key.
const (
	moveKept = iota
	moveDone
	moveClash
)

// moveKey moves k into ks if it is a Redis key (the file's comment), and takes it out of l.
func (s *Store) moveKey(l *Locks, ks *Keyspace, k *lockKey, now int64) int {
	h := k.hold.head
	if !k.has || h == nil || k.hold.n != 1 || k.wait.n != 0 || h.cmd.LockID != k.key {
		return moveKept
	}
	v, ok := parseRecord(k.value)
	if !ok || v.cmd == dataUnset || v.flag&dataArray != 0 && v.flag&dataNumber == 0 {
		return moveKept
	}
	name, ok := recordName(v.props)
	if !ok {
		return moveKept
	}
	var at int64
	if h.dl.scheduled() {
		if at = h.cmd.ExpireAt; at == 0 {
			at = (h.dl.at + 999_999) / 1_000_000
		}
	}
	db := k.db.id
	mv := &s.mv
	r := &mv.rec
	clash := ks.Type(db, name, now/1e6) != KindNone
	if !clash {
		*r = Record{Op: RecSet, DB: db, Key: name, At: at}
		switch {
		case v.flag&dataNumber != 0:
			r.Kind, r.Int = KindInt, int64(leUint(v.value, 8))
		case isHash(v.flag):
			mv.buf = mv.buf[:0]
			for p := v.value; len(p) > 0; {
				f, val, rest, ok := nextPair(p)
				if !ok {
					break
				}
				mv.buf = packedAppend(mv.buf, f, val)
				p = rest
			}
			r.Op, r.Value = RecHSet, mv.buf
		default:
			r.Kind, r.Value = KindString, v.value
		}
		if r.Op == RecHSet && len(r.Value) == 0 {
			r.Op = RecDel // an empty hash is no key
		}
		if r.Op != RecDel {
			ks.moveRecord(r)
			if r.Op == RecHSet && at != 0 {
				*r = Record{Op: RecExpire, DB: db, Key: name, At: at}
				ks.moveRecord(r)
			}
			if k.fence != 0 {
				*r = Record{Op: RecFence, DB: db, Key: name, Int: int64(k.fence)}
				ks.moveRecord(r)
			}
		}
	}
	l.dropMoved(k)
	if clash {
		return moveClash
	}
	return moveDone
}

// dropMoved takes k, a key of one holder and no waiters, out of the Locks as its holder's
// release would: a backup in progress has it first (cow), the journal records it gone if
// the log had it, its value goes (a watch of it sees a change).
func (l *Locks) dropMoved(k *lockKey) {
	for h := k.hold.head; h != nil; h = k.hold.head {
		l.removeHolder(h)
		l.freeItem(h)
	}
	l.settle(k)
}

// moveRecord makes r's change in ks as a replay does, and records it (Log) as a change of
// its own would be.
func (ks *Keyspace) moveRecord(r *Record) {
	_ = ks.Apply(r) // a set, an expiry, a fence of a key it just made: nothing to refuse
	if ks.logging() {
		ks.log = r.Append(ks.log)
	}
}

// recordName returns the KEY property (code 1) of a data record's property area (u16 P,
// then entries of u8 code, u16 length, bytes), as proto/slock's Prop reads it.
func recordName(props []byte) ([]byte, bool) {
	if len(props) < 2 {
		return nil, false
	}
	p := props[2:]
	for len(p) >= 3 {
		n := 3 + int(binary.LittleEndian.Uint16(p[1:]))
		if n > len(p) {
			return nil, false
		}
		if p[0] == 1 {
			return p[3:n:n], true
		}
		p = p[n:]
	}
	return nil, false
}
