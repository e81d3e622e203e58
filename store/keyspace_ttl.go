package store

// Expiries of the keyspace: each database keeps a binary min-heap (in chunks) of (deadline, slot) of
// its keys with an expiry, the entry knowing its place (entry.x), so setting, moving and
// removing an expiry is O(log n) without a search and a key without one pays nothing. A
// heap slot is 16 bytes (Redis keeps an expiry as a second dict entry, 24 bytes and a
// bucket). Lazy expiry: lookup deletes a key found past its deadline. Active expiry:
// Advance pops what is due, a bounded number at a time.

// chunked is a slice in chunks, as the entries are (ent): chunk 0 doubles up to entChunk
// elements, later chunks are entChunk long, and one empty chunk is kept past the last, so
// growing never copies more than a chunk.
type chunked[T any] struct {
	c [][]T
	n int
}

func (s *chunked[T]) at(i int) *T { return &s.c[i>>entShift][i&entMask] }

// push appends v and returns the bytes that took (size: one element's).
func (s *chunked[T]) push(v T, size int64) int64 {
	var grew int64
	c := s.n >> entShift
	if c == len(s.c) {
		was, n := cap(s.c), entChunk
		if c == 0 {
			n = 8
		}
		s.c = append(s.c, make([]T, 0, n))
		grew += int64(cap(s.c)-was)*24 + int64(n)*size
	}
	ch := &s.c[c]
	if len(*ch) == cap(*ch) {
		n := min(entChunk, 2*cap(*ch))
		grew += int64(n-cap(*ch)) * size
		*ch = append(make([]T, 0, n), *ch...)
	}
	*ch = append(*ch, v)
	s.n++
	return grew
}

// pop removes the last element and returns the bytes given back.
func (s *chunked[T]) pop(size int64) int64 {
	last := s.n - 1
	var zero T
	*s.at(last) = zero
	c := last >> entShift
	s.c[c] = s.c[c][:last&entMask]
	s.n--
	if n := len(s.c); n > c+2 {
		g := int64(cap(s.c[n-1])) * size
		s.c[n-1] = nil
		s.c = s.c[:n-1]
		return g
	}
	return 0
}

// bytes is what s takes.
func (s *chunked[T]) bytes(size int64) int64 {
	n := int64(cap(s.c)) * 24
	for _, ch := range s.c {
		n += int64(cap(ch)) * size
	}
	return n
}

// ttlSet gives the key at slot s of d the expiry at (Unix ms).
func (ks *Keyspace) ttlSet(d *ksDB, s int, at int64) {
	e := d.ent(s)
	if e.x != 0 {
		i := int(e.x) - 1
		d.ttl.at(i).at = at
		if !d.ttlUp(i) {
			d.ttlDown(i)
		}
		return
	}
	ks.acct(d, d.ttl.push(ttlSlot{at: at, slot: uint32(s)}, ttlSlotSize))
	i := d.ttl.n - 1
	e.x = uint32(i + 1)
	d.ttlUp(i)
}

// ttlCut removes heap slot i (its key's expiry).
func (ks *Keyspace) ttlCut(d *ksDB, i int) {
	h := &d.ttl
	d.ent(int(h.at(i).slot)).x = 0
	last := h.n - 1
	if i != last {
		*h.at(i) = *h.at(last)
		d.ent(int(h.at(i).slot)).x = uint32(i + 1)
	}
	ks.acct(d, -h.pop(ttlSlotSize))
	if i != last && !d.ttlUp(i) {
		d.ttlDown(i)
	}
}

func (d *ksDB) ttlUp(i int) bool {
	h := &d.ttl
	t := *h.at(i)
	start := i
	for i > 0 {
		p := (i - 1) / 2
		pp := h.at(p)
		if pp.at <= t.at {
			break
		}
		*h.at(i) = *pp
		d.ent(int(pp.slot)).x = uint32(i + 1)
		i = p
	}
	*h.at(i) = t
	d.ent(int(t.slot)).x = uint32(i + 1)
	return i != start
}

func (d *ksDB) ttlDown(i int) {
	h := &d.ttl
	n := h.n
	t := *h.at(i)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.at(r).at < h.at(c).at {
			c = r
		}
		cc := h.at(c)
		if cc.at >= t.at {
			break
		}
		*h.at(i) = *cc
		d.ent(int(cc.slot)).x = uint32(i + 1)
		i = c
	}
	*h.at(i) = t
	d.ent(int(t.slot)).x = uint32(i + 1)
}

// expiryOf returns the expiry of the key at slot s (0: none).
func (d *ksDB) expiryOf(s int) int64 {
	if x := d.ent(s).x; x != 0 {
		return d.ttl.at(int(x) - 1).at
	}
	return 0
}

// ExpireCond is EXPIRE's condition.
type ExpireCond uint8

// EXPIRE's conditions (Redis 7).
const (
	ExpireAlways ExpireCond = iota
	ExpireNX                // only a key without an expiry
	ExpireXX                // only a key with one
	ExpireGT                // only a later one (no expiry is infinite)
	ExpireLT                // only an earlier one
)

// Expire sets key's expiry to at (Unix ms; the caller has turned EXPIRE's seconds or
// PEXPIRE's milliseconds into a time and checked them) if cond allows: true if it did
// (EXPIRE's :1). A time at or before now deletes the key (event "del"), else event
// "expire".
func (ks *Keyspace) Expire(db uint8, key []byte, at int64, cond ExpireCond, now int64) bool {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return false
	}
	old := d.expiryOf(s)
	switch cond {
	case ExpireNX:
		if old != 0 {
			return false
		}
	case ExpireXX:
		if old == 0 {
			return false
		}
	case ExpireGT:
		if old == 0 || at <= old {
			return false
		}
	case ExpireLT:
		if old != 0 && at >= old {
			return false
		}
	}
	if at <= now {
		ks.event(db, EvDel, key)
		ks.recKey(RecDel, db, key)
		ks.remove(d, s)
		return true
	}
	ks.cow(d, s)
	ks.touched(d, d.ent(s))
	ks.ttlSet(d, s, at)
	ks.event(db, EvExpire, key)
	ks.recAt(RecExpire, db, key, at)
	return true
}

// TTL returns key's time to live in ms (PTTL), -2 for no key, -1 for no expiry.
func (ks *Keyspace) TTL(db uint8, key []byte, now int64) int64 {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return -2
	}
	at := d.expiryOf(s)
	if at == 0 {
		return -1
	}
	return at - now
}

// ExpireAt returns key's expiry (Unix ms), -2 for no key, -1 for no expiry (EXPIRETIME).
func (ks *Keyspace) ExpireAt(db uint8, key []byte, now int64) int64 {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 {
		return -2
	}
	if at := d.expiryOf(s); at != 0 {
		return at
	}
	return -1
}

// Persist removes key's expiry: true if it had one (event "persist").
func (ks *Keyspace) Persist(db uint8, key []byte, now int64) bool {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 || d.ent(s).x == 0 {
		return false
	}
	ks.cow(d, s)
	ks.touched(d, d.ent(s))
	ks.ttlCut(d, int(d.ent(s).x)-1)
	ks.event(db, EvPersist, key)
	ks.recAt(RecExpire, db, key, 0)
	return true
}

// NextDeadline returns the earliest expiry (Unix ms) of any key, and false if no key has
// one.
func (ks *Keyspace) NextDeadline() (int64, bool) {
	var at int64
	ok := false
	for _, n := range ks.live {
		if d := ks.dbs[n]; d.ttl.n > 0 && (!ok || d.ttl.at(0).at < at) {
			at, ok = d.ttl.at(0).at, true
		}
	}
	return at, ok
}

// Advance deletes up to budget keys whose expiry is at or before now, earliest first
// within each database (event "expired", a RecDel record each), and reports how many it
// deleted and whether more are due.
func (ks *Keyspace) Advance(now int64, budget int) (n int, more bool) {
	for _, db := range ks.live {
		d := ks.dbs[db]
		for d.ttl.n > 0 && d.ttl.at(0).at <= now {
			if n == budget {
				return n, true
			}
			ks.expire(d, int(d.ttl.at(0).slot))
			n++
		}
	}
	return n, false
}
