package store

import "fmt"

// Check verifies the keyspace's invariants: each database's index finds exactly its
// entries (hash bits, probe chains unbroken, no name twice), entries are well formed
// (hashes, sizes, packed hashes parse and are within the packed limits, large hashes
// non-empty), the expiry heaps are ordered and point back and forth with their entries,
// fences and watches are flagged exactly, the key count is the sum, and Bytes is what the
// state costs, recomputed. It scans everything; it is meant for tests.
func (ks *Keyspace) Check() error {
	n := 0
	var total int64
	seenDB := map[uint8]bool{}
	for _, id := range ks.live {
		if seenDB[id] {
			return fmt.Errorf("store: keyspace: db %d listed twice", id)
		}
		seenDB[id] = true
		d := ks.dbs[id]
		if d == nil || d.id != id {
			return fmt.Errorf("store: keyspace: db %d listed, not there", id)
		}
		if err := ks.checkDB(d); err != nil {
			return err
		}
		n += d.n
		total += d.bytes
		for k := range d.watch {
			total += ksWatchCost + ksAlloc(len(k))
		}
	}
	for i, d := range ks.dbs {
		if d != nil && !seenDB[uint8(i)] {
			return fmt.Errorf("store: keyspace: db %d not listed", i)
		}
	}
	for i, f := range ks.free {
		total += int64(len(f)) * int64(sizeClasses[i])
	}
	if n != ks.nkeys {
		return fmt.Errorf("store: keyspace: %d keys counted, %d in the databases", ks.nkeys, n)
	}
	if total != ks.bytes {
		return fmt.Errorf("store: keyspace: Bytes counts %d, the databases and watches cost %d", ks.bytes, total)
	}
	return nil
}

func (ks *Keyspace) checkDB(d *ksDB) error {
	if want := ks.dbBytes(d); want != d.bytes {
		return fmt.Errorf("store: keyspace db %d: counts %d bytes, its state costs %d", d.id, d.bytes, want)
	}
	if len(d.dir) != 1<<d.gd || d.gd > maxDirBits {
		return fmt.Errorf("store: keyspace db %d: a directory of %d at depth %d", d.id, len(d.dir), d.gd)
	}
	found := 0
	for di := 0; di < len(d.dir); {
		t := d.dir[di]
		if t.depth > d.gd {
			return fmt.Errorf("store: keyspace db %d: table at %d of depth %d, directory %d", d.id, di, t.depth, d.gd)
		}
		run := 1 << (d.gd - t.depth)
		if di%run != 0 {
			return fmt.Errorf("store: keyspace db %d: table of depth %d starts at %d", d.id, t.depth, di)
		}
		for j := di; j < di+run; j++ {
			if d.dir[j] != t {
				return fmt.Errorf("store: keyspace db %d: directory %d should be the table at %d", d.id, j, di)
			}
		}
		di += run
		if len(t.idx)&(len(t.idx)-1) != 0 || t.n*5 > len(t.idx)*4 && t.n > 0 {
			return fmt.Errorf("store: keyspace db %d: %d keys in a table of %d", d.id, t.n, len(t.idx))
		}
		mask := len(t.idx) - 1
		n := 0
		for i, v := range t.idx {
			if v == 0 {
				continue
			}
			n++
			s := int(v&slotMask) - 1
			if s < 0 || s >= d.n {
				return fmt.Errorf("store: keyspace db %d: index %d points at slot %d of %d", d.id, i, s, d.n)
			}
			e := d.ent(s)
			if v>>slotBits != tagOf(e.hash) || d.tab(e.hash) != t {
				return fmt.Errorf("store: keyspace db %d: index %d has the wrong hash bits for slot %d", d.id, i, s)
			}
			// Every position from the key's home to i is taken (the probe reaches it).
			for j := int(e.hash) & mask; j != i; j = (j + 1) & mask {
				if t.idx[j] == 0 {
					return fmt.Errorf("store: keyspace db %d: slot %d at index %d, past an empty index %d", d.id, s, i, j)
				}
			}
			if _, got, _ := d.find(e.key(), e.hash); got != s {
				return fmt.Errorf("store: keyspace db %d: key %q at slot %d is found at %d", d.id, e.key(), s, got)
			}
		}
		if n != t.n {
			return fmt.Errorf("store: keyspace db %d: a table counts %d keys, holds %d", d.id, t.n, n)
		}
		found += n
	}
	if found != d.n {
		return fmt.Errorf("store: keyspace db %d: %d keys, %d indexed", d.id, d.n, found)
	}
	for c, ch := range d.ents {
		want := entChunk
		if c == 0 {
			want = cap(ch)
		}
		if cap(ch) != want || c < len(d.ents)-1 && len(ch) != entChunk && d.n > (c+1)*entChunk {
			return fmt.Errorf("store: keyspace db %d: entry chunk %d of %d/%d", d.id, c, len(ch), cap(ch))
		}
	}
	nx, nf, nw := 0, 0, 0
	for s := range d.n {
		e := d.ent(s)
		k := e.key()
		if e.hash != ks.hash(k) {
			return fmt.Errorf("store: keyspace db %d: key %q has hash %x, not %x", d.id, k, e.hash, ks.hash(k))
		}
		if e.p == nil && e.size() != 0 {
			return fmt.Errorf("store: keyspace db %d: key %q has no bytes", d.id, k)
		}
		switch e.kind {
		case KindString, KindInt:
		case KindHash:
			p, c := e.val(), 0
			for len(p) > 0 {
				for range 2 {
					l, m := uvarintLen(p)
					if m <= 0 || l > len(p)-m || l > packedMaxLen {
						return fmt.Errorf("store: keyspace db %d: hash %q: bad packed bytes %x", d.id, k, e.val())
					}
					p = p[m+l:]
				}
				c++
			}
			if c == 0 || c > packedMaxFields {
				return fmt.Errorf("store: keyspace db %d: hash %q has %d packed fields", d.id, k, c)
			}
		case kindBig:
			if int(e.vlen) >= len(d.bigs) || d.bigs[e.vlen] == nil || len(d.bigs[e.vlen].m) == 0 {
				return fmt.Errorf("store: keyspace db %d: large hash %q has no map", d.id, k)
			}
		default:
			return fmt.Errorf("store: keyspace db %d: key %q of kind %d", d.id, k, e.kind)
		}
		if e.x != 0 {
			nx++
			if int(e.x) > d.ttl.n || d.ttl.at(int(e.x)-1).slot != uint32(s) {
				return fmt.Errorf("store: keyspace db %d: key %q at heap %d, which is not its", d.id, k, e.x)
			}
		}
		if (e.flags&fFenced != 0) != (d.fences != nil && d.fences[string(k)] != 0) {
			return fmt.Errorf("store: keyspace db %d: key %q fence flag %v", d.id, k, e.flags&fFenced != 0)
		}
		if e.flags&fFenced != 0 {
			nf++
		}
		if (e.flags&fWatched != 0) != (d.watch[string(k)] != nil) {
			return fmt.Errorf("store: keyspace db %d: key %q watch flag %v", d.id, k, e.flags&fWatched != 0)
		}
		if e.flags&fWatched != 0 {
			nw++
		}
	}
	if nx != d.ttl.n {
		return fmt.Errorf("store: keyspace db %d: %d keys with an expiry, %d in the heap", d.id, nx, d.ttl.n)
	}
	for i := 1; i < d.ttl.n; i++ {
		if d.ttl.at(i).at < d.ttl.at((i-1)/2).at {
			return fmt.Errorf("store: keyspace db %d: expiry heap out of order at %d", d.id, i)
		}
	}
	if nf != len(d.fences) {
		return fmt.Errorf("store: keyspace db %d: %d fenced keys, %d fences", d.id, nf, len(d.fences))
	}
	bigs := 0
	for _, b := range d.bigs {
		if b != nil {
			bigs++
			var c int64
			for f, v := range b.m {
				c += bigFieldCost(len(f), len(v))
			}
			if c != b.bytes {
				return fmt.Errorf("store: keyspace db %d: a large hash counts %d bytes, its fields cost %d", d.id, b.bytes, c)
			}
		}
	}
	if bigs+len(d.freeBig) != len(d.bigs) {
		return fmt.Errorf("store: keyspace db %d: %d large hashes and %d free of %d", d.id, bigs, len(d.freeBig), len(d.bigs))
	}
	seen := map[uint32]bool{}
	for s := range d.n {
		if e := d.ent(s); e.kind == kindBig {
			if seen[e.vlen] {
				return fmt.Errorf("store: keyspace db %d: two keys share large hash %d", d.id, e.vlen)
			}
			seen[e.vlen] = true
		}
	}
	return nil
}

func uvarintLen(p []byte) (int, int) {
	var l uint64
	var s uint
	for i, c := range p {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			return int(l | uint64(c)<<s), i + 1
		}
		l |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, -1
}
