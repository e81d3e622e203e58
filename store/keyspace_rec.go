package store

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
)

// What a keyspace change emits: its record, for the append-only log and the raft entry
// (written with Keyspace.Log: each write appends its records to one buffer, so writing
// them allocates nothing once the buffer has grown), and its keyspace events, for
// notifications. A record is the change's effect, never the command: INCR is recorded as
// the value it made, an expiry as its absolute time, an expiry that deletes as a DEL, so
// replaying records (Apply) in order, from any state the log started at, gives the same
// keys on every member whatever the clocks say.
//
// Encoding (little-endian; uvarint and varint as encoding/binary):
//
//	op u8, db u8, then for every op but RecFlush: key (uvarint length, bytes), then
//	RecSet:    kind u8 (KindString: uvarint length, bytes; KindInt: 8 bytes), at varint (0: none)
//	RecDel:    nothing
//	RecExpire: at varint (0: persist)
//	RecAppend: uvarint length, bytes appended
//	RecHSet:   uvarint length, fields and values packed (as a small hash is: packedAppend)
//	RecHDel:   uvarint length, fields packed (each: uvarint length, bytes)
//	RecFence:  uvarint token

// RecOp is a record's kind.
type RecOp uint8

// Record kinds.
const (
	RecSet    RecOp = iota + 1 // the key is a string or an integer, with an expiry or none
	RecDel                     // the key is gone
	RecExpire                  // the key's expiry is At (0: none)
	RecAppend                  // Value appended to the key's string
	RecHSet                    // the hash's fields set, made if missing
	RecHDel                    // the hash's fields deleted; the key with its last
	RecFence                   // the key's fence is Int
	RecFlush                   // database DB (AllDBs: every one) flushed
)

// Record is one decoded record (ReadRecord); Key and Value are views into what it was
// read from.
type Record struct {
	Op    RecOp
	DB    uint8
	Kind  ValueKind // RecSet
	Key   []byte
	Value []byte // RecSet's string, RecAppend's bytes, RecHSet's pairs, RecHDel's fields (packed)
	Int   int64  // RecSet's integer, RecFence's token
	At    int64  // RecSet's and RecExpire's expiry, Unix ms
}

// Append appends r's encoding to dst.
func (r *Record) Append(dst []byte) []byte {
	dst = append(dst, byte(r.Op), r.DB)
	if r.Op == RecFlush {
		return dst
	}
	dst = appendBytes(dst, r.Key)
	switch r.Op {
	case RecSet:
		dst = append(dst, byte(r.Kind))
		if r.Kind == KindInt {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(r.Int))
		} else {
			dst = appendBytes(dst, r.Value)
		}
		dst = binary.AppendVarint(dst, r.At)
	case RecExpire:
		dst = binary.AppendVarint(dst, r.At)
	case RecAppend, RecHSet, RecHDel:
		dst = appendBytes(dst, r.Value)
	case RecFence:
		dst = binary.AppendUvarint(dst, uint64(r.Int))
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

var errRecord = errors.New("store: keyspace record: truncated or malformed")

// ReadRecord decodes the record at the start of b and returns it with its length.
func ReadRecord(b []byte) (r Record, n int, err error) {
	if len(b) < 2 {
		return r, 0, errRecord
	}
	r.Op, r.DB = RecOp(b[0]), b[1]
	p := 2
	if r.Op == RecFlush {
		return r, p, nil
	}
	if r.Op < RecSet || r.Op > RecFlush {
		return r, 0, errRecord
	}
	bytesAt := func() ([]byte, bool) {
		l, m := binary.Uvarint(b[p:])
		if m <= 0 || l > uint64(len(b)-p-m) {
			return nil, false
		}
		v := b[p+m : p+m+int(l) : p+m+int(l)]
		p += m + int(l)
		return v, true
	}
	var ok bool
	if r.Key, ok = bytesAt(); !ok {
		return r, 0, errRecord
	}
	switch r.Op {
	case RecSet:
		if p >= len(b) {
			return r, 0, errRecord
		}
		r.Kind = ValueKind(b[p])
		p++
		switch r.Kind {
		case KindInt:
			if len(b)-p < 8 {
				return r, 0, errRecord
			}
			r.Int = int64(binary.LittleEndian.Uint64(b[p:]))
			p += 8
		case KindString:
			if r.Value, ok = bytesAt(); !ok {
				return r, 0, errRecord
			}
		default:
			return r, 0, errRecord
		}
		fallthrough
	case RecExpire:
		at, m := binary.Varint(b[p:])
		if m <= 0 {
			return r, 0, errRecord
		}
		r.At, p = at, p+m
	case RecAppend, RecHSet, RecHDel:
		if r.Value, ok = bytesAt(); !ok {
			return r, 0, errRecord
		}
	case RecFence:
		t, m := binary.Uvarint(b[p:])
		if m <= 0 {
			return r, 0, errRecord
		}
		r.Int, p = int64(t), p+m
	}
	return r, p, nil
}

// Log returns the records of the changes since the last ClearLog, encoded one after
// another (KeyspaceConfig.Log). It is the Keyspace's buffer.
func (ks *Keyspace) Log() []byte { return ks.log }

// ClearLog empties the log, keeping its buffer (up to lockKeepBuf).
func (ks *Keyspace) ClearLog() {
	if cap(ks.log) > lockKeepBuf {
		ks.log = nil
	}
	ks.log = ks.log[:0]
}

func (ks *Keyspace) logging() bool { return ks.cfg.Log && !ks.replay }

func (ks *Keyspace) recKey(op RecOp, db uint8, key []byte) {
	if ks.logging() {
		ks.log = appendBytes(append(ks.log, byte(op), db), key)
	}
}

func (ks *Keyspace) recAt(op RecOp, db uint8, key []byte, at int64) {
	if ks.logging() {
		ks.log = binary.AppendVarint(appendBytes(append(ks.log, byte(op), db), key), at)
	}
}

func (ks *Keyspace) recBytes(op RecOp, db uint8, key, v []byte) {
	if ks.logging() {
		ks.log = appendBytes(appendBytes(append(ks.log, byte(op), db), key), v)
	}
}

func (ks *Keyspace) recFence(db uint8, key []byte, token uint64) {
	if ks.logging() {
		ks.log = binary.AppendUvarint(appendBytes(append(ks.log, byte(RecFence), db), key), token)
	}
}

func (ks *Keyspace) recFlush(db uint8) {
	if ks.logging() {
		ks.log = append(ks.log, byte(RecFlush), db)
	}
}

// recEntry records the string or integer key at slot s of d whole.
func (ks *Keyspace) recEntry(d *ksDB, s int) {
	if !ks.logging() {
		return
	}
	e := d.ent(s)
	ks.log = append(appendBytes(append(ks.log, byte(RecSet), d.id), e.key()), byte(e.kind))
	if e.kind == KindInt {
		ks.log = binary.LittleEndian.AppendUint64(ks.log, uint64(e.int()))
	} else {
		ks.log = appendBytes(ks.log, e.val())
	}
	ks.log = binary.AppendVarint(ks.log, d.expiryOf(s))
}

// EventName is a keyspace event, as Redis 7.0 names it.
type EventName uint8

// Keyspace events.
const (
	EvNew EventName = iota + 1
	EvSet
	EvExpire
	EvIncrBy
	EvIncrByFloat
	EvAppend
	EvDel
	EvExpired
	EvPersist
	EvHSet
	EvHDel
	EvHIncrBy
)

var eventNames = [...]string{EvNew: "new", EvSet: "set", EvExpire: "expire", EvIncrBy: "incrby",
	EvIncrByFloat: "incrbyfloat", EvAppend: "append", EvDel: "del", EvExpired: "expired",
	EvPersist: "persist", EvHSet: "hset", EvHDel: "hdel", EvHIncrBy: "hincrby"}

func (n EventName) String() string {
	if int(n) < len(eventNames) && eventNames[n] != "" {
		return eventNames[n]
	}
	return "EventName(" + strconv.Itoa(int(n)) + ")"
}

// Event is one keyspace event: its database, its name and its key (EventKey).
type Event struct {
	DB   uint8
	Name EventName
	off  uint32
	n    uint32
}

// Events returns the events since the last ClearEvents (KeyspaceConfig.Events), in order.
func (ks *Keyspace) Events() []Event { return ks.evs }

// EventKey returns ev's key: a view valid until ClearEvents.
func (ks *Keyspace) EventKey(ev Event) []byte { return ks.evbuf[ev.off : ev.off+ev.n] }

// ClearEvents empties the events, keeping their buffers.
func (ks *Keyspace) ClearEvents() {
	if cap(ks.evbuf) > lockKeepBuf {
		ks.evbuf, ks.evs = nil, nil
	}
	ks.evs, ks.evbuf = ks.evs[:0], ks.evbuf[:0]
}

func (ks *Keyspace) event(db uint8, name EventName, key []byte) {
	if !ks.cfg.Events || ks.replay {
		return
	}
	ks.evs = append(ks.evs, Event{DB: db, Name: name, off: uint32(len(ks.evbuf)), n: uint32(len(key))})
	ks.evbuf = append(ks.evbuf, key...)
}

// Apply replays a record (read back from a log, a raft entry or a backup): its change is
// made as it was, without records or events of its own. As Redis does while it loads a
// file, it expires nothing: a key whose expiry is past when it is applied keeps it, and
// goes at the next Advance or the next operation that finds it (later records of the
// key, an APPEND after its SET, apply to it as they did when they were made).
func (ks *Keyspace) Apply(r *Record) error {
	const now = math.MinInt64
	ks.replay = true
	defer func() { ks.replay = false }()
	switch r.Op {
	case RecFlush:
		if r.DB == AllDBs {
			ks.FlushAll()
		} else {
			ks.Flush(r.DB)
		}
		return nil
	case RecDel:
		ks.Del(r.DB, r.Key, now)
		return nil
	case RecExpire:
		if r.At == 0 {
			ks.Persist(r.DB, r.Key, now)
		} else {
			ks.Expire(r.DB, r.Key, r.At, ExpireAlways, now)
		}
		return nil
	case RecFence:
		ks.RaiseFence(r.DB, r.Key, uint64(r.Int), now)
		return nil
	case RecAppend:
		if _, st := ks.Append(r.DB, r.Key, r.Value, now); st != KeyspaceOK {
			return errors.New("store: keyspace record: APPEND: " + st.String())
		}
		return nil
	case RecHSet, RecHDel:
		return ks.applyHash(r, now)
	case RecSet:
	default:
		return errRecord
	}
	if len(r.Key) > MaxKeyLen {
		return errRecord
	}
	d, s, h := ks.lookup(r.DB, r.Key, now)
	if s = ks.put(d, r.DB, r.Key, h, s); s < 0 {
		return errors.New("store: keyspace record: SET: keyspace full")
	}
	d = ks.dbs[r.DB]
	if r.Kind == KindInt {
		ks.storeInt(d, d.ent(s), r.Int)
	} else {
		ks.store(d, d.ent(s), KindString, r.Value)
	}
	if r.At == 0 {
		if x := d.ent(s).x; x != 0 {
			ks.ttlCut(d, int(x)-1)
		}
	} else {
		ks.ttlSet(d, s, r.At)
	}
	return nil
}
