package store

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
)

// The string commands of the keyspace. Values are appended to the caller's dst (its
// reply buffer): no result struct, no copy the caller did not ask for.

// appendValue appends the string value of e to dst, WrongType for a hash.
func appendValue(dst []byte, e *ksEntry) ([]byte, Status) {
	switch e.kind {
	case KindString:
		return append(dst, e.val()...), KeyspaceOK
	case KindInt:
		return strconv.AppendInt(dst, e.int(), 10), KeyspaceOK
	}
	return dst, KeyspaceWrongType
}

// equalValue reports whether e's string value is m.
func equalValue(e *ksEntry, m []byte) bool {
	if e.kind == KindInt {
		var b [20]byte
		return bytes.Equal(strconv.AppendInt(b[:0], e.int(), 10), m)
	}
	return bytes.Equal(e.val(), m)
}

// Get appends key's value to dst: KeyspaceOK, KeyspaceMissing, or KeyspaceWrongType
// for a hash.
func (ks *Keyspace) Get(db uint8, key []byte, now int64, dst []byte) ([]byte, Status) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return dst, KeyspaceMissing
	}
	return appendValue(dst, d.ent(s))
}

// Type returns what key holds (KindNone for no key; an integer is a KindString to TYPE).
func (ks *Keyspace) Type(db uint8, key []byte, now int64) ValueKind {
	d, s, _ := ks.lookup(db, key, now)
	switch {
	case s < 0:
		return KindNone
	case d.ent(s).kind == KindInt:
		return KindString
	case d.ent(s).kind == kindBig:
		return KindHash
	}
	return d.ent(s).kind
}

// Kind returns what key holds as stored: KindInt for a counter (slock's text GET answers
// it as an integer), KindHash for any hash, KindNone for no key.
func (ks *Keyspace) Kind(db uint8, key []byte, now int64) ValueKind {
	d, s, _ := ks.lookup(db, key, now)
	switch {
	case s < 0:
		return KindNone
	case d.ent(s).kind == kindBig:
		return KindHash
	}
	return d.ent(s).kind
}

// SetCond is SET's condition.
type SetCond uint8

// SET's conditions.
const (
	SetAlways SetCond = iota
	SetNX             // only a missing key
	SetXX             // only an existing key
	SetIfEq           // only a key whose value is Match (Redis 8.4's IFEQ)
	SetIfNe           // a missing key, or one whose value is not Match (IFNE)
)

// SetOpts are SET's options. The caller has checked them (Redis's syntax errors) and
// turned EX, PX, EXAT, PXAT into At.
type SetOpts struct {
	Cond    SetCond
	Match   []byte // IFEQ/IFNE's value
	Get     bool   // GET: the old value is appended to dst
	KeepTTL bool   // KEEPTTL: an existing key keeps its expiry
	At      int64  // Unix ms the key expires; 0: none (the key loses any it had, unless KeepTTL)
}

// SetResult is how a SET went.
type SetResult struct {
	Done bool   // the key was set
	Had  bool   // with Get: the key had a value, appended to dst (else GET answers nil)
	St   Status // KeyspaceOK, or KeyspaceWrongType (GET or IFEQ/IFNE on a hash: nothing done), KeyspaceFull, KeyspaceTooLong
}

// Set is SET key val with o's options. Events: "new" for a key made, "set", and
// "expire" with At ("expired" too for an At at or before now, which deletes the key at
// once, as a PXAT in the past does).
func (ks *Keyspace) Set(db uint8, key, val []byte, o *SetOpts, now int64, dst []byte) (SetResult, []byte) {
	var r SetResult
	if len(key) > MaxKeyLen {
		r.St = KeyspaceTooLong
		return r, dst
	}
	d, s, h := ks.lookup(db, key, now)
	if s >= 0 {
		e := d.ent(s)
		if (o.Get || o.Cond == SetIfEq || o.Cond == SetIfNe) && e.kind >= KindHash {
			r.St = KeyspaceWrongType
			return r, dst
		}
		if o.Get {
			dst, _ = appendValue(dst, e)
			r.Had = true
		}
	}
	switch o.Cond {
	case SetNX:
		if s >= 0 {
			return r, dst
		}
	case SetXX:
		if s < 0 {
			return r, dst
		}
	case SetIfEq:
		if s < 0 || !equalValue(d.ent(s), o.Match) {
			return r, dst
		}
	case SetIfNe:
		if s >= 0 && equalValue(d.ent(s), o.Match) {
			return r, dst
		}
	}
	if s = ks.put(d, db, key, h, s); s < 0 {
		r.St = KeyspaceFull
		return r, dst
	}
	d = ks.dbs[db]
	e := d.ent(s)
	ks.store(d, e, KindString, val)
	r.Done = true
	ks.event(db, EvSet, key)
	ks.setTTL(d, s, key, o.KeepTTL, o.At, now)
	return r, dst
}

// put readies key for a new string value: an existing one (slot s) is copied for a
// backup in progress, noted for WATCH and stripped of a large hash; a missing one is made
// (event "new"). It returns the slot, -1 when the keyspace is full.
func (ks *Keyspace) put(d *ksDB, db uint8, key []byte, h uint32, s int) int {
	if s < 0 {
		if d == nil {
			d = ks.db(db, true)
		}
		if s = ks.add(d, key, h); s >= 0 {
			ks.event(db, EvNew, key)
		}
		return s
	}
	ks.cow(d, s)
	e := d.ent(s)
	ks.touched(d, e)
	if e.kind == kindBig {
		ks.dropBig(d, e)
	}
	return s
}

// setTTL finishes a SET of the key at slot s: its expiry, then its record.
func (ks *Keyspace) setTTL(d *ksDB, s int, key []byte, keep bool, at, now int64) {
	switch {
	case keep:
	case at == 0:
		if x := d.ent(s).x; x != 0 {
			ks.ttlCut(d, int(x)-1)
		}
	default:
		ks.event(d.id, EvExpire, key)
		if at <= now {
			ks.expire(d, s)
			return
		}
		ks.ttlSet(d, s, at)
	}
	ks.recEntry(d, s)
}

// MSet sets each key to its value (kv: key, value, ...), dropping their expiries:
// KeyspaceFull (nothing set) if the keys it would add do not fit.
func (ks *Keyspace) MSet(db uint8, kv [][]byte, now int64) Status {
	if st := ks.room(db, kv, now); st != KeyspaceOK {
		return st
	}
	o := SetOpts{}
	for i := 0; i+1 < len(kv); i += 2 {
		ks.Set(db, kv[i], kv[i+1], &o, now, nil)
	}
	return KeyspaceOK
}

// MSetNX is MSet if none of the keys exists: false, and nothing set, if one does.
func (ks *Keyspace) MSetNX(db uint8, kv [][]byte, now int64) (bool, Status) {
	for i := 0; i+1 < len(kv); i += 2 {
		if _, s, _ := ks.lookup(db, kv[i], now); s >= 0 {
			return false, KeyspaceOK
		}
	}
	if st := ks.MSet(db, kv, now); st != KeyspaceOK {
		return false, st
	}
	return true, KeyspaceOK
}

// room checks that MSet's keys fit: names not too long, and MaxKeys.
func (ks *Keyspace) room(db uint8, kv [][]byte, now int64) Status {
	add := 0
	for i := 0; i+1 < len(kv); i += 2 {
		if len(kv[i]) > MaxKeyLen {
			return KeyspaceTooLong
		}
		if ks.cfg.MaxKeys > 0 {
			if _, s, _ := ks.lookup(db, kv[i], now); s < 0 {
				add++
			}
		}
	}
	if ks.cfg.MaxKeys > 0 && ks.nkeys+add > ks.cfg.MaxKeys {
		return KeyspaceFull
	}
	return KeyspaceOK
}

// ParseInt reads b as Redis's string2ll does: decimal, an optional '-', no '+', no
// spaces, no leading zeros, no "-0", within int64.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// IncrBy adds delta to key's integer (a missing key is 0) and returns the sum: the key
// keeps its expiry and becomes a KindInt, which later INCRs add to in place. Event
// "incrby".
func (ks *Keyspace) IncrBy(db uint8, key []byte, delta int64, now int64) (int64, Status) {
	if len(key) > MaxKeyLen {
		return 0, KeyspaceTooLong
	}
	d, s, h := ks.lookup(db, key, now)
	var n int64
	if s >= 0 {
		e := d.ent(s)
		switch e.kind {
		case KindInt:
			n = e.int()
		case KindString:
			v, ok := ParseInt(e.val())
			if !ok {
				return 0, KeyspaceNotInt
			}
			n = v
		default:
			return 0, KeyspaceWrongType
		}
		if delta > 0 && n > math.MaxInt64-delta || delta < 0 && n < math.MinInt64-delta {
			return 0, KeyspaceOverflow
		}
		ks.cow(d, s)
		ks.touched(d, e)
	} else {
		if d == nil {
			d = ks.db(db, true)
		}
		if s = ks.add(d, key, h); s < 0 {
			return 0, KeyspaceFull
		}
	}
	n += delta
	ks.storeInt(d, d.ent(s), n)
	ks.event(db, EvIncrBy, key)
	ks.recEntry(d, s)
	return n, KeyspaceOK
}

// INCRBYFLOAT computes as Redis does on x86-64: in a long double (a 64-bit mantissa),
// shown with 17 decimals and no trailing zeros ("%.17Lf"), so that its replies are
// Redis's digit for digit (10.5 + 0.1 is 10.6, 0.1 + 0.2 is 0.3, 1e300 + 1 every digit of
// the long double). big.Float at 64 bits of precision rounds as the x87 does.
const longDoublePrec = 64

// longDoubleMaxExp is the long double's largest binary exponent: past it, infinity.
const longDoubleMaxExp = 16384

// ParseLongDouble reads b as INCRBYFLOAT reads a number (strtold, without spaces, hex,
// infinities or NaN) into f; false if it is not one.
func ParseLongDouble(b []byte, f *big.Float) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
			return false
		}
	}
	f.SetPrec(longDoublePrec).SetMode(big.ToNearestEven)
	if _, ok := f.SetString(string(b)); !ok || f.IsInf() || f.MantExp(nil) > longDoubleMaxExp {
		return false
	}
	return true
}

// AppendLongDouble appends f as INCRBYFLOAT shows it.
func AppendLongDouble(dst []byte, f *big.Float) []byte {
	at := len(dst)
	dst = f.Append(dst, 'f', 17)
	if bytes.IndexByte(dst[at:], '.') >= 0 {
		dst = bytes.TrimRight(dst, "0")
		dst = bytes.TrimSuffix(dst, []byte("."))
	}
	if string(dst[at:]) == "-0" {
		dst = append(dst[:at], '0')
	}
	return dst
}

// IncrByFloat adds delta (INCRBYFLOAT's argument, which the caller has checked with
// ParseLongDouble) to key's number and appends the sum, as INCRBYFLOAT shows it, to dst;
// the key keeps its expiry and holds the sum as that string. KeyspaceNotInt: "value is not
// a valid float"; KeyspaceNaN: "increment would produce NaN or Infinity". Event
// "incrbyfloat". It allocates (big.Float), as a rare command may.
func (ks *Keyspace) IncrByFloat(db uint8, key, delta []byte, now int64, dst []byte) ([]byte, Status) {
	if len(key) > MaxKeyLen {
		return dst, KeyspaceTooLong
	}
	var f, inc big.Float
	if !ParseLongDouble(delta, &inc) {
		return dst, KeyspaceNotInt
	}
	f.SetPrec(longDoublePrec).SetMode(big.ToNearestEven)
	d, s, h := ks.lookup(db, key, now)
	if s >= 0 {
		e := d.ent(s)
		switch e.kind {
		case KindInt:
			f.SetInt64(e.int())
		case KindString:
			if !ParseLongDouble(e.val(), &f) {
				return dst, KeyspaceNotInt
			}
		default:
			return dst, KeyspaceWrongType
		}
	}
	f.Add(&f, &inc)
	if f.IsInf() || f.MantExp(nil) > longDoubleMaxExp {
		return dst, KeyspaceNaN
	}
	if s >= 0 {
		ks.cow(d, s)
		ks.touched(d, d.ent(s))
	} else {
		if d == nil {
			d = ks.db(db, true)
		}
		if s = ks.add(d, key, h); s < 0 {
			return dst, KeyspaceFull
		}
	}
	ks.tmp = AppendLongDouble(ks.tmp[:0], &f)
	ks.store(d, d.ent(s), KindString, ks.tmp)
	ks.event(db, EvIncrByFloat, key)
	ks.recEntry(d, s)
	return append(dst, ks.tmp...), KeyspaceOK
}

// Append appends v to key's string (a missing key is made: events "new", "append") and
// returns its new length.
func (ks *Keyspace) Append(db uint8, key, v []byte, now int64) (int64, Status) {
	if len(key) > MaxKeyLen {
		return 0, KeyspaceTooLong
	}
	d, s, h := ks.lookup(db, key, now)
	if s >= 0 {
		e := d.ent(s)
		if e.kind >= KindHash {
			return 0, KeyspaceWrongType
		}
		ks.cow(d, s)
		ks.touched(d, e)
		ks.tmp, _ = appendValue(ks.tmp[:0], e)
	} else {
		if s = ks.put(d, db, key, h, -1); s < 0 {
			return 0, KeyspaceFull
		}
		d = ks.dbs[db]
		ks.tmp = ks.tmp[:0]
	}
	ks.tmp = append(ks.tmp, v...)
	ks.store(d, d.ent(s), KindString, ks.tmp)
	ks.event(db, EvAppend, key)
	ks.recBytes(RecAppend, db, key, v)
	return int64(len(ks.tmp)), KeyspaceOK
}

// StrLen returns the length of key's string (0 for no key).
func (ks *Keyspace) StrLen(db uint8, key []byte, now int64) (int64, Status) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return 0, KeyspaceOK
	}
	e := d.ent(s)
	switch e.kind {
	case KindString:
		return int64(e.vlen), KeyspaceOK
	case KindInt:
		var b [20]byte
		return int64(len(strconv.AppendInt(b[:0], e.int(), 10))), KeyspaceOK
	}
	return 0, KeyspaceWrongType
}

// GetDel appends key's value to dst and deletes the key (event "del").
func (ks *Keyspace) GetDel(db uint8, key []byte, now int64, dst []byte) ([]byte, Status) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return dst, KeyspaceMissing
	}
	dst, st := appendValue(dst, d.ent(s))
	if st == KeyspaceOK {
		ks.del(d, s, key)
	}
	return dst, st
}

// GetExMode is what GETEX does to the expiry.
type GetExMode uint8

// GETEX's options.
const (
	GetExKeep    GetExMode = iota // no option: the expiry stays
	GetExAt                       // EX, PX, EXAT, PXAT: expire at the time given
	GetExPersist                  // PERSIST
)

// GetEx appends key's value to dst and changes its expiry as mode says: a time at or
// before now deletes the key (event "del"), a later one sets it ("expire"); PERSIST
// removes one ("persist").
func (ks *Keyspace) GetEx(db uint8, key []byte, mode GetExMode, at, now int64, dst []byte) ([]byte, Status) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return dst, KeyspaceMissing
	}
	dst, st := appendValue(dst, d.ent(s))
	if st != KeyspaceOK {
		return dst, st
	}
	switch mode {
	case GetExAt:
		ks.Expire(db, key, at, ExpireAlways, now)
	case GetExPersist:
		ks.Persist(db, key, now)
	}
	return dst, st
}

// del deletes the key at slot s (event "del").
func (ks *Keyspace) del(d *ksDB, s int, key []byte) {
	ks.event(d.id, EvDel, key)
	ks.recKey(RecDel, d.id, key)
	ks.remove(d, s)
}

// Del deletes key (DEL, UNLINK): true if it existed. Event "del".
func (ks *Keyspace) Del(db uint8, key []byte, now int64) bool {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return false
	}
	ks.del(d, s, key)
	return true
}

// DelKeys deletes keys and returns how many existed (DEL k k counts 1).
func (ks *Keyspace) DelKeys(db uint8, keys [][]byte, now int64) int {
	n := 0
	for _, k := range keys {
		if ks.Del(db, k, now) {
			n++
		}
	}
	return n
}

// Exists returns how many of keys exist (EXISTS k k counts 2).
func (ks *Keyspace) Exists(db uint8, keys [][]byte, now int64) int {
	n := 0
	for _, k := range keys {
		if _, s, _ := ks.lookup(db, k, now); s >= 0 {
			n++
		}
	}
	return n
}

// DelIf deletes key if its value is (SetIfEq) or is not (SetIfNe) match, as DELEX
// IFEQ/IFNE and DELIFEQ do, in one step: the native lock release. WrongType for a hash.
func (ks *Keyspace) DelIf(db uint8, key []byte, cond SetCond, match []byte, now int64) (bool, Status) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return false, KeyspaceOK
	}
	e := d.ent(s)
	if e.kind >= KindHash {
		return false, KeyspaceWrongType
	}
	if eq := equalValue(e, match); eq != (cond == SetIfEq) {
		return false, KeyspaceOK
	}
	ks.del(d, s, key)
	return true, KeyspaceOK
}

// Scan calls fn with up to count keys of db and their kinds (views valid during the call;
// fn must not change the keyspace), skipping keys past their expiry, and returns the
// cursor to pass next: 0 when the walk is over. A key present from the first call of a
// walk to its last is passed at least once, whatever is added and removed meanwhile.
// Any cursor is safe.
func (ks *Keyspace) Scan(db uint8, cursor uint64, count int, now int64, fn func(key []byte, kind ValueKind)) uint64 {
	d := ks.dbs[db]
	if d == nil {
		return 0
	}
	c := uint64(d.n)
	if cursor != 0 && cursor < c {
		c = cursor
	}
	for ; count > 0 && c > 0; count-- {
		c--
		e := d.ent(int(c))
		if e.x != 0 && d.ttl.at(int(e.x)-1).at <= now {
			continue
		}
		k := e.kind
		switch k {
		case KindInt:
			k = KindString
		case kindBig:
			k = KindHash
		}
		fn(e.key(), k)
	}
	return c
}
