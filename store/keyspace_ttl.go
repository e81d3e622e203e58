package store

// Expiries of the keyspace: each database keeps a binary min-heap of (deadline, slot) of
// its keys with an expiry, the entry knowing its place (entry.x), so setting, moving and
// removing an expiry is O(log n) without a search and a key without one pays nothing. A
// heap slot is 16 bytes (Redis keeps an expiry as a second dict entry, 24 bytes and a
// bucket). Lazy expiry: lookup deletes a key found past its deadline. Active expiry:
// Advance pops what is due, a bounded number at a time.

// ttlSet gives the key at slot s of d the expiry at (Unix ms).
func (ks *Keyspace) ttlSet(d *ksDB, s int, at int64) {
	e := d.ent(s)
	if e.x != 0 {
		i := int(e.x) - 1
		d.ttl[i].at = at
		if !d.ttlUp(i) {
			d.ttlDown(i)
		}
		return
	}
	was := cap(d.ttl)
	d.ttl = append(d.ttl, ttlSlot{at: at, slot: uint32(s)})
	ks.acct(d, int64(cap(d.ttl)-was)*ttlSlotSize)
	i := len(d.ttl) - 1
	e.x = uint32(i + 1)
	d.ttlUp(i)
}

// ttlCut removes heap slot i (its key's expiry).
func (ks *Keyspace) ttlCut(d *ksDB, i int) {
	d.ent(int(d.ttl[i].slot)).x = 0
	last := len(d.ttl) - 1
	if i != last {
		d.ttl[i] = d.ttl[last]
		d.ent(int(d.ttl[i].slot)).x = uint32(i + 1)
	}
	d.ttl = d.ttl[:last]
	if i != last && !d.ttlUp(i) {
		d.ttlDown(i)
	}
	if c := cap(d.ttl); c > 1024 && last < c/4 {
		d.ttl = append(make([]ttlSlot, 0, 2*last), d.ttl...)
		ks.acct(d, int64(cap(d.ttl)-c)*ttlSlotSize)
	}
}

func (d *ksDB) ttlUp(i int) bool {
	h := d.ttl
	t := h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= t.at {
			break
		}
		h[i] = h[p]
		d.ent(int(h[i].slot)).x = uint32(i + 1)
		i = p
	}
	h[i] = t
	d.ent(int(t.slot)).x = uint32(i + 1)
	return i != start
}

func (d *ksDB) ttlDown(i int) {
	h := d.ttl
	n := len(h)
	t := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].at < h[c].at {
			c = r
		}
		if h[c].at >= t.at {
			break
		}
		h[i] = h[c]
		d.ent(int(h[i].slot)).x = uint32(i + 1)
		i = c
	}
	h[i] = t
	d.ent(int(t.slot)).x = uint32(i + 1)
}

// expiryOf returns the expiry of the key at slot s (0: none).
func (d *ksDB) expiryOf(s int) int64 {
	if x := d.ent(s).x; x != 0 {
		return d.ttl[x-1].at
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
		if d := ks.dbs[n]; len(d.ttl) > 0 && (!ok || d.ttl[0].at < at) {
			at, ok = d.ttl[0].at, true
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
		for len(d.ttl) > 0 && d.ttl[0].at <= now {
			if n == budget {
				return n, true
			}
			ks.expire(d, int(d.ttl[0].slot))
			n++
		}
	}
	return n, false
}
