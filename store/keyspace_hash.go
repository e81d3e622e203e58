package store

import (
	"bytes"
	"encoding/binary"
	"math"
	"strconv"
)

// Hashes of the keyspace. A small hash (at most packedMaxFields fields, each field and
// value at most packedMaxLen bytes: Redis's hash-max-listpack-entries and -value) is its
// fields and values packed one after another in the key's own allocation, each a uvarint
// length and its bytes, as Redis's listpack keeps them: a field of a few bytes costs those
// bytes and two. A field is found by a walk, as in a listpack. A hash that outgrows the
// limits becomes a Go map (bigHash) for good, as Redis's turns into a dict.

const (
	packedMaxFields = 128
	packedMaxLen    = 64
)

// packedNext reads the pair (or, for a fields list, the field) at the start of p.
func packedNext(p []byte) (field, rest []byte) {
	l, m := binary.Uvarint(p)
	return p[m : m+int(l)], p[m+int(l):]
}

// packedFind returns where field's pair starts and ends in p, and where its value's
// length starts: -1s when it has none.
func packedFind(p, field []byte) (start, vat, end int) {
	for i := 0; i < len(p); {
		f, rest := packedNext(p[i:])
		vat = len(p) - len(rest)
		_, rest = packedNext(rest)
		end = len(p) - len(rest)
		if bytes.Equal(f, field) {
			return i, vat, end
		}
		i = end
	}
	return -1, -1, -1
}

func packedCount(p []byte) int {
	n := 0
	for len(p) > 0 {
		_, p = packedNext(p)
		_, p = packedNext(p)
		n++
	}
	return n
}

func packedAppend(dst, f, v []byte) []byte {
	return appendBytes(appendBytes(dst, f), v)
}

// splice replaces b[i:j] with r.
func splice(b []byte, i, j int, r []byte) []byte {
	n := len(b) - (j - i) + len(r)
	old := len(b)
	if n > old {
		b = append(b, make([]byte, n-old)...)
	}
	copy(b[i+len(r):], b[j:old])
	copy(b[i:], r)
	return b[:n]
}

// hashOf returns the hash at slot s: its packed bytes, or its map.
func (d *ksDB) hashOf(s int) (packed []byte, big *bigHash) {
	e := d.ent(s)
	if e.kind == kindBig {
		return nil, d.bigs[e.vlen]
	}
	return e.val(), nil
}

// hashSlot returns the slot of the hash key, made if missing and mk (-1 for none, or a
// full keyspace), or the WrongType of a string.
func (ks *Keyspace) hashSlot(db uint8, key []byte, mk bool, now int64) (*ksDB, int, Status) {
	if len(key) > MaxKeyLen {
		return nil, -1, KeyspaceTooLong
	}
	d, s, h := ks.lookup(db, key, now)
	if s >= 0 {
		if d.ent(s).kind < KindHash {
			return d, -1, KeyspaceWrongType
		}
		return d, s, KeyspaceOK
	}
	if !mk {
		return d, -1, KeyspaceMissing
	}
	if d == nil {
		d = ks.db(db, true)
	}
	if s = ks.add(d, key, h); s < 0 {
		return d, -1, KeyspaceFull
	}
	d.ent(s).kind = KindHash
	return d, s, KeyspaceOK
}

// HSet sets the fields of key's hash to their values (pairs: field, value, ...), making
// the hash if missing, and returns how many fields it added. Event "hset".
func (ks *Keyspace) HSet(db uint8, key []byte, pairs [][]byte, now int64) (int, Status) {
	d, s, st := ks.hashSlot(db, key, true, now)
	if s < 0 {
		return 0, st
	}
	ks.cow(d, s)
	ks.touched(d, d.ent(s))
	added := ks.hset(d, s, pairs)
	ks.event(db, EvHSet, key)
	if ks.logging() {
		ks.tmp = ks.tmp[:0]
		for i := 0; i+1 < len(pairs); i += 2 {
			ks.tmp = packedAppend(ks.tmp, pairs[i], pairs[i+1])
		}
		ks.recBytes(RecHSet, db, key, ks.tmp)
	}
	return added, KeyspaceOK
}

// hset sets pairs in the hash at slot s, which exists (possibly empty), and returns how
// many fields it added.
func (ks *Keyspace) hset(d *ksDB, s int, pairs [][]byte) int {
	e := d.ent(s)
	added := 0
	if e.kind == KindHash {
		fit := true
		p := append(ks.tmp[:0], e.val()...)
		for i := 0; fit && i+1 < len(pairs); i += 2 {
			f, v := pairs[i], pairs[i+1]
			if len(f) > packedMaxLen || len(v) > packedMaxLen {
				fit = false
				break
			}
			if start, vat, end := packedFind(p, f); start >= 0 {
				var rb [packedMaxLen + 2]byte
				p = splice(p, vat, end, appendBytes(rb[:0], v))
				continue
			}
			p = packedAppend(p, f, v)
			added++
		}
		ks.tmp = p[:0]
		if fit && packedCount(p) <= packedMaxFields {
			ks.store(d, e, KindHash, p)
			return added
		}
		ks.toBig(d, e)
		added = 0
	}
	b := d.bigs[e.vlen]
	for i := 0; i+1 < len(pairs); i += 2 {
		f, v := pairs[i], pairs[i+1]
		if old, ok := b.m[string(f)]; ok {
			c := bigFieldCost(len(f), len(v)) - bigFieldCost(len(f), len(old))
			b.bytes += c
			ks.acct(d, c)
			b.m[string(f)] = string(v)
			continue
		}
		b.m[string(f)] = string(v)
		c := bigFieldCost(len(f), len(v))
		b.bytes += c
		ks.acct(d, c)
		added++
	}
	return added
}

// toBig turns e's packed hash into a map.
func (ks *Keyspace) toBig(d *ksDB, e *ksEntry) {
	i := ks.newBig(d)
	b := d.bigs[i]
	for p := e.val(); len(p) > 0; {
		var f, v []byte
		f, p = packedNext(p)
		v, p = packedNext(p)
		b.m[string(f)] = string(v)
		c := bigFieldCost(len(f), len(v))
		b.bytes += c
		ks.acct(d, c)
	}
	ks.store(d, e, KindString, nil)
	e.kind, e.vlen = kindBig, i
}

// HDel deletes fields of key's hash and returns how many it had; the last field takes
// the key with it. Events "hdel", and "del" for the key.
func (ks *Keyspace) HDel(db uint8, key []byte, fields [][]byte, now int64) (int, Status) {
	d, s, st := ks.hashSlot(db, key, false, now)
	if s < 0 {
		if st == KeyspaceMissing {
			st = KeyspaceOK
		}
		return 0, st
	}
	n := 0
	packed, big := d.hashOf(s)
	if big == nil {
		p := ks.tmp[:0]
		p = append(p, packed...)
		for _, f := range fields {
			if start, _, end := packedFind(p, f); start >= 0 {
				p = splice(p, start, end, nil)
				n++
			}
		}
		ks.tmp = p[:0]
		if n > 0 {
			ks.cow(d, s)
			ks.touched(d, d.ent(s))
			ks.store(d, d.ent(s), KindHash, p)
		}
	} else {
		for _, f := range fields {
			if v, ok := big.m[string(f)]; ok {
				if n == 0 {
					ks.cow(d, s)
					ks.touched(d, d.ent(s))
				}
				delete(big.m, string(f))
				c := bigFieldCost(len(f), len(v))
				big.bytes -= c
				ks.acct(d, -c)
				n++
			}
		}
	}
	if n == 0 {
		return 0, KeyspaceOK
	}
	ks.event(db, EvHDel, key)
	if ks.logging() {
		ks.tmp = ks.tmp[:0]
		for _, f := range fields {
			ks.tmp = appendBytes(ks.tmp, f)
		}
		ks.recBytes(RecHDel, db, key, ks.tmp)
	}
	if ks.hashLen(d, s) == 0 {
		ks.event(db, EvDel, key)
		ks.remove(d, s)
	}
	return n, KeyspaceOK
}

func (ks *Keyspace) hashLen(d *ksDB, s int) int {
	packed, big := d.hashOf(s)
	if big != nil {
		return len(big.m)
	}
	return packedCount(packed)
}

// HIncrBy adds delta to the integer in a field of key's hash (a missing field, or hash,
// is 0) and returns the sum. KeyspaceNotInt: "hash value is not an integer". Event
// "hincrby".
func (ks *Keyspace) HIncrBy(db uint8, key, field []byte, delta int64, now int64) (int64, Status) {
	d, s, st := ks.hashSlot(db, key, false, now)
	var n int64
	switch st {
	case KeyspaceOK:
		v, ok := ks.hfield(d, s, field)
		if ok {
			if n, ok = ParseInt(v); !ok {
				return 0, KeyspaceNotInt
			}
		}
	case KeyspaceMissing:
	default:
		return 0, st
	}
	if delta > 0 && n > math.MaxInt64-delta || delta < 0 && n < math.MinInt64-delta {
		return 0, KeyspaceOverflow
	}
	n += delta
	var b [20]byte
	var pair [2][]byte
	pair[0], pair[1] = field, strconv.AppendInt(b[:0], n, 10)
	save := ks.cfg.Events
	ks.cfg.Events = false
	_, st = ks.HSet(db, key, pair[:], now)
	ks.cfg.Events = save
	if st != KeyspaceOK {
		return 0, st
	}
	ks.event(db, EvHIncrBy, key)
	return n, KeyspaceOK
}

// hfield returns field's value in the hash at slot s.
func (ks *Keyspace) hfield(d *ksDB, s int, field []byte) ([]byte, bool) {
	packed, big := d.hashOf(s)
	if big != nil {
		v, ok := big.m[string(field)]
		return unsafeBytes(v), ok
	}
	if _, vat, end := packedFind(packed, field); vat >= 0 {
		v, _ := packedNext(packed[vat:end])
		return v, true
	}
	return nil, false
}

// HGet appends field's value in key's hash to dst: KeyspaceMissing for no key or field.
func (ks *Keyspace) HGet(db uint8, key, field []byte, now int64, dst []byte) ([]byte, Status) {
	d, s, st := ks.hashSlot(db, key, false, now)
	if s < 0 {
		return dst, st
	}
	v, ok := ks.hfield(d, s, field)
	if !ok {
		return dst, KeyspaceMissing
	}
	return append(dst, v...), KeyspaceOK
}

// HExists reports whether key's hash has field.
func (ks *Keyspace) HExists(db uint8, key, field []byte, now int64) (bool, Status) {
	d, s, st := ks.hashSlot(db, key, false, now)
	if s < 0 {
		if st == KeyspaceMissing {
			st = KeyspaceOK
		}
		return false, st
	}
	_, ok := ks.hfield(d, s, field)
	return ok, KeyspaceOK
}

// HLen returns the number of fields of key's hash.
func (ks *Keyspace) HLen(db uint8, key []byte, now int64) (int, Status) {
	d, s, st := ks.hashSlot(db, key, false, now)
	if s < 0 {
		if st == KeyspaceMissing {
			st = KeyspaceOK
		}
		return 0, st
	}
	return ks.hashLen(d, s), KeyspaceOK
}

// HRange calls fn with each field of key's hash and its value (views valid during the
// call; fn must not change the keyspace), in no promised order (HGETALL, HKEYS, HVALS).
func (ks *Keyspace) HRange(db uint8, key []byte, now int64, fn func(field, value []byte)) Status {
	d, s, st := ks.hashSlot(db, key, false, now)
	if s < 0 {
		if st == KeyspaceMissing {
			st = KeyspaceOK
		}
		return st
	}
	packed, big := d.hashOf(s)
	if big != nil {
		for f, v := range big.m {
			fn(unsafeBytes(f), unsafeBytes(v))
		}
		return KeyspaceOK
	}
	for p := packed; len(p) > 0; {
		var f, v []byte
		f, p = packedNext(p)
		v, p = packedNext(p)
		fn(f, v)
	}
	return KeyspaceOK
}

// applyHash replays a RecHSet or RecHDel.
func (ks *Keyspace) applyHash(r *Record, now int64) error {
	args := ks.args[:0]
	for p := r.Value; len(p) > 0; {
		var f []byte
		f, p = packedNext(p)
		args = append(args, f)
	}
	ks.args = args[:0]
	var st Status
	if r.Op == RecHSet {
		_, st = ks.HSet(r.DB, r.Key, args, now)
	} else {
		_, st = ks.HDel(r.DB, r.Key, args, now)
	}
	clear(args)
	if st != KeyspaceOK {
		return errRecord
	}
	return nil
}
