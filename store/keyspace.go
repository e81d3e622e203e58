package store

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"unsafe"
)

// Keyspace is the family of Redis data: strings, integers, hashes, their expiries and
// fences, in up to MaxLockDB+1 databases, stored as compactly as Redis stores them (issue
// 32). It is pure: no I/O, no clock (every operation takes now, Unix milliseconds), one
// goroutine (the loop's). See docs/architecture.md, "A keyspace of its own".
//
// A database is three structures, none with a pointer per key but one:
//
//   - ents, the keys, dense, in no order, in chunks of 4096 (ent): one 24-byte entry each
//     (ksEntry), whose p points
//     at a single allocation holding the key's name and then its value: a string's bytes,
//     an integer's 8 (INCR adds in place, no formatting), a small hash packed as
//     Redis's listpack is (field and value pairs, length-prefixed). A large hash keeps its
//     fields in a Go map (bigHash) the entry finds by index. A value of the same allocator
//     size class as the one it replaces is written in place: SET of an existing key to a
//     value of the same size, INCR, HINCRBY allocate nothing.
//   - the index: open-addressed tables (linear probing, backward-shift deletion, load at
//     most 4/5) of uint32s: 1 + the entry's slot in ents, and above it 6 bits of the key's
//     hash, so that a probe reads an entry only when those bits match; the tables hang
//     off a directory by the hash's top bits (extendible hashing: see ksTab), so growth
//     is one table's work. Keys are found by their name, any length up to MaxKeyLen: no
//     LockKey, no hashing of long names into ids.
//   - ttl, a binary min-heap of (deadline, slot) of the keys with an expiry, in chunks;
//     the entry knows its heap index (x). Expiry is lazy (an operation that finds a key
//     past its deadline deletes it first, as Redis does) and active (Advance pops what is
//     due, a budget at a time).
//
// A key removed takes the last entry's place (swap-remove), so ents stays dense, and a
// SCAN walking ents from the end down with a cursor of the slots still to visit returns
// every key present for the whole walk at least once (the guarantee locks_values.go
// gives). DBSIZE is the number of entries. Bytes is kept as the state changes, never by
// a scan.
type Keyspace struct {
	cfg   KeyspaceConfig
	seed  maphash.Seed
	dbs   [MaxLockDB + 1]*ksDB
	live  []uint8 // the databases made so far, in order made
	nkeys int
	bytes int64 // everything but the buffers of the call (Bytes adds those)

	// What the operations emit (keyspace_rec.go).
	log    []byte   // encoded records since the last ClearLog
	evs    []Event  // keyspace events since the last ClearEvents
	evbuf  []byte   // the events' key names
	replay bool     // Apply is running: no records, no events
	tmp    []byte   // scratch: a packed hash being rebuilt, a number formatted
	args   [][]byte // scratch: a record's fields

	free    [len(sizeClasses)][]*byte // allocations kept for reuse (alloc, release)
	wseq    uint64                    // the last watch version handed out
	expired uint64                    // keys deleted by expiry, lazily or actively
	sv      ksSave                    // a backup being encoded (keyspace_save.go)
	rw      ksWalk                    // a log rewrite's walk (keyspace_persist.go)
}

// KeyspaceConfig configures a Keyspace.
type KeyspaceConfig struct {
	MaxKeys int  // most keys over all databases; an operation that would add one answers KeyspaceFull; <= 0: no limit
	Log     bool // write each change's record to Log (keyspace_rec.go)
	Events  bool // note each change's keyspace event in Events
}

// MaxKeyLen is the longest key name a Keyspace keeps (the text side refuses longer ones,
// as it does today: "key longer than 65535 bytes").
const MaxKeyLen = 1<<16 - 1

// ValueKind is what a key holds.
type ValueKind uint8

// The kinds of value. KindNone is no key.
const (
	KindNone   ValueKind = iota
	KindString           // bytes
	KindInt              // a string that INCR made an integer: an int64, shown in decimal
	KindHash             // a hash, packed (small) or a map (large)
	kindBig              // internal: a hash in a bigHash
)

// Status is how an operation went.
type Status uint8

// Outcomes of Keyspace operations.
const (
	KeyspaceOK        Status = iota // done, or found
	KeyspaceMissing                 // no such key (or field); for conditional writes: condition not met
	KeyspaceWrongType               // -WRONGTYPE Operation against a key holding the wrong kind of value
	KeyspaceNotInt                  // the value is not an integer (or a float, for INCRBYFLOAT)
	KeyspaceOverflow                // increment or decrement would overflow
	KeyspaceNaN                     // INCRBYFLOAT: increment would produce NaN or Infinity
	KeyspaceFull                    // MaxKeys reached: the key was not added
	KeyspaceTooLong                 // a key name over MaxKeyLen
)

var statusNames = [...]string{"OK", "Missing", "WrongType", "NotInt", "Overflow", "NaN", "Full", "TooLong"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// entry is one key. Its name and value share one allocation of ksAlloc(size()) bytes,
// which p points at (nil when both are empty).
type ksEntry struct {
	p     *byte
	hash  uint32
	vlen  uint32 // KindString, KindHash: the value's bytes; KindInt: 8; kindBig: index in ksDB.bigs
	x     uint32 // 1 + its index in ksDB.ttl; 0: no expiry
	klen  uint16
	kind  ValueKind
	flags uint8
}

// entry flags.
const (
	fWatched = 1 << iota // in ksDB.watch: a change bumps its version
	fFenced              // in ksDB.fences
	fSaved               // compared with ksSave.mark: emitted by the backup in progress (or made since)
)

// The index's words: the slot (1 + index in ents) in the low slotBits, hash bits above.
const (
	slotBits = 26
	slotMask = 1<<slotBits - 1
	// MaxKeysPerDB is the most keys one database holds.
	MaxKeysPerDB = slotMask - 1
)

func (e *ksEntry) size() int {
	switch e.kind {
	case kindBig:
		return int(e.klen)
	case KindInt:
		return int(e.klen) + 8
	}
	return int(e.klen) + int(e.vlen)
}

func (e *ksEntry) key() []byte { return unsafe.Slice(e.p, e.size())[:e.klen:e.klen] }
func (e *ksEntry) val() []byte { return unsafe.Slice(e.p, e.size())[e.klen:] }

func (e *ksEntry) int() int64 { return int64(le64(e.val())) }

// Allocations of keys deleted or values replaced are kept for reuse, up to keepAllocs of
// each size class up to keepAllocMax bytes, so that a DEL and a SET, or a value changing
// size and back, allocate nothing in steady state. They count in Bytes.
const (
	keepAllocs   = 64
	keepAllocMax = 256
)

// smallClass is the size class index (in sizeClasses) of n bytes for n up to
// keepAllocMax, by n's eighth: allocSize without its search on the keyspace's hot path.
var smallClass = func() (t [keepAllocMax/8 + 1]uint8) {
	for i := range t {
		t[i] = uint8(classIndex(allocSize(max(1, 8*i))))
	}
	return t
}()

// ksAlloc is allocSize(n).
func ksAlloc(n int) int64 {
	if n <= keepAllocMax {
		if n <= 0 {
			return 0
		}
		return int64(sizeClasses[smallClass[(n+7)>>3]])
	}
	return allocSize(n)
}

// alloc returns an allocation for n bytes (n > 0), ksAlloc(n) long, reused if it can.
func (ks *Keyspace) alloc(n int) *byte {
	c := ksAlloc(n)
	if c <= keepAllocMax {
		i := int(smallClass[(n+7)>>3])
		if f := ks.free[i]; len(f) > 0 {
			p := f[len(f)-1]
			f[len(f)-1] = nil
			ks.free[i] = f[:len(f)-1]
			ks.bytes -= c
			return p
		}
	}
	b := make([]byte, c)
	return &b[0]
}

// release gives back p, an allocation for n bytes.
func (ks *Keyspace) release(p *byte, n int) {
	c := ksAlloc(n)
	if p == nil || c > keepAllocMax {
		return
	}
	i := int(smallClass[(n+7)>>3])
	if len(ks.free[i]) < keepAllocs {
		ks.free[i] = append(ks.free[i], p)
		ks.bytes += c
	}
}

// classIndex is the index of size class c in sizeClasses.
func classIndex(c int64) int {
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		m := (lo + hi) / 2
		if int64(sizeClasses[m]) < c {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// unsafeBytes is s's bytes, not to be changed.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func put64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// ksDB is one database.
type ksDB struct {
	id      uint8
	ents    [][]ksEntry // in chunks (ent)
	n       int         // keys
	dir     []*ksTab    // the index's directory: 2^gd tables by the hash's top gd bits
	gd      uint8
	ttl     chunked[ttlSlot] // the expiry heap (keyspace_ttl.go)
	bigs    []*bigHash
	freeBig []uint32
	fences  map[string]uint64 // keys with fFenced: the highest token a fenced write presented
	watch   map[string]*ksWatch
	bytes   int64 // what its keys and arrays cost, watches aside (part of Keyspace.bytes)
}

// acct adds n to what d costs.
func (ks *Keyspace) acct(d *ksDB, n int64) {
	d.bytes += n
	ks.bytes += n
}

// ttlSlot is one key with an expiry, in its database's heap.
type ttlSlot struct {
	at   int64 // Unix ms
	slot uint32
}

// bigHash is a hash past the packed limits.
type bigHash struct {
	m     map[string]string
	bytes int64 // what its fields cost (bigFieldCost each)
}

// ksWatch is a watched key.
type ksWatch struct {
	ver  uint64
	refs int
}

// Per-item costs (memcost.go's figures).
var (
	entrySize   = int64(unsafe.Sizeof(ksEntry{}))
	ttlSlotSize = int64(unsafe.Sizeof(ttlSlot{}))
	bigHashObj  = ksAlloc(int(unsafe.Sizeof(bigHash{}))) + 48 // the object and its map's header
	ksWatchCost = ksAlloc(int(unsafe.Sizeof(ksWatch{}))) + mapEntry(16+8)
	ksFenceCost = mapEntry(16 + 8)
)

func bigFieldCost(f, v int) int64 { return mapEntry(32) + ksAlloc(f) + ksAlloc(v) }

// NewKeyspace returns an empty keyspace.
func NewKeyspace(cfg KeyspaceConfig) *Keyspace {
	return &Keyspace{cfg: cfg, seed: maphash.MakeSeed()}
}

// Len returns the number of keys of db (DBSIZE), expired ones not yet deleted included,
// as Redis counts them.
func (ks *Keyspace) Len(db uint8) int {
	if d := ks.dbs[db]; d != nil {
		return d.n
	}
	return 0
}

// Keys returns the number of keys in every database.
func (ks *Keyspace) Keys() int { return ks.nkeys }

// Expires returns the number of keys of db with an expiry (INFO keyspace's expires=).
func (ks *Keyspace) Expires(db uint8) int {
	if d := ks.dbs[db]; d != nil {
		return d.ttl.n
	}
	return 0
}

// Expired returns how many keys expiry has deleted (INFO's expired_keys).
func (ks *Keyspace) Expired() uint64 { return ks.expired }

// Bytes estimates the memory the keyspace takes: its arrays, each key's allocation by its
// size class, large hashes, fences and watches, and the buffers of the call. It is kept
// as the state changes; reading it never scans.
func (ks *Keyspace) Bytes() int64 {
	return ks.bytes + int64(cap(ks.log)+cap(ks.evbuf)+cap(ks.tmp)) + int64(cap(ks.evs))*int64(unsafe.Sizeof(Event{}))
}

func (ks *Keyspace) hash(key []byte) uint32 {
	return uint32(maphash.Bytes(ks.seed, key))
}

// db returns database n, made if make is true (nil otherwise when it has none).
func (ks *Keyspace) db(n uint8, mk bool) *ksDB {
	d := ks.dbs[n]
	if d == nil && mk {
		d = ks.newDB(n, nil)
		ks.dbs[n] = d
		ks.live = append(ks.live, n)
	}
	return d
}

// The index is split by the top bits of the hash (extendible hashing): the directory
// dir has 2^gd entries, each pointing at the table of the keys whose hash starts with its
// number; a table of depth t serves 2^(gd-t) of them. A table grows by doubling up to
// tabMaxSlots, then splits in two by one more bit (the directory doubling if needed), so
// growing the index is at most one table's work (about 52k keys), never the database's.
// Within a table a key's place is its hash's low bits, its index word's tag bits 16 to 21.
const (
	maxDirBits = 10 // 1024 tables of 64k: past 53M keys a database's tables grow beyond 64k
	tagShift   = 16
	tagMask    = 1<<(32-slotBits) - 1
)

// tabMaxSlots is the size past which a table splits (a variable for the tests, which
// split tables of a few keys).
var tabMaxSlots = 1 << 16

// ksTab is one table of a database's index.
type ksTab struct {
	idx   []uint32 // 1 + slot | tag << slotBits; 0: empty
	n     int      // keys in it
	depth uint8    // the top bits of the hash its keys share
}

var ksTabObj = ksAlloc(int(unsafe.Sizeof(ksTab{})))

func tagOf(h uint32) uint32 { return h >> tagShift & tagMask }

func word(s int, h uint32) uint32 { return uint32(s+1) | tagOf(h)<<slotBits }

// tab returns the table of hash h.
func (d *ksDB) tab(h uint32) *ksTab { return d.dir[h>>(32-uint32(d.gd))] }

// The entries are chunked: chunk 0 grows by doubling up to entChunk entries, then each
// chunk is entChunk long, so adding a key never copies the others.
const (
	entShift = 12
	entChunk = 1 << entShift // 4096 entries, 96 KiB
	entMask  = entChunk - 1
)

// ent returns the entry at slot s.
func (d *ksDB) ent(s int) *ksEntry { return &d.ents[s>>entShift][s&entMask] }

// newDB returns an empty database n, its cost counted.
func (ks *Keyspace) newDB(n uint8, watch map[string]*ksWatch) *ksDB {
	d := &ksDB{id: n, watch: watch, dir: []*ksTab{{}}}
	ks.acct(d, 8+ksTabObj)
	return d
}

// find returns the slot of key in d, its table and the index position holding it, or -1
// and the empty position where it would go.
func (d *ksDB) find(key []byte, h uint32) (t *ksTab, slot, pos int) {
	t = d.tab(h)
	if len(t.idx) == 0 {
		return t, -1, -1
	}
	mask := uint32(len(t.idx) - 1)
	tag := tagOf(h)
	for i := h & mask; ; i = (i + 1) & mask {
		v := t.idx[i]
		if v == 0 {
			return t, -1, int(i)
		}
		if v>>slotBits == tag {
			s := int(v&slotMask) - 1
			e := d.ent(s)
			if e.hash == h && int(e.klen) == len(key) && bytes.Equal(e.key(), key) {
				return t, s, int(i)
			}
		}
	}
}

// posOf returns the table and index position holding slot s.
func (d *ksDB) posOf(s int) (*ksTab, int) {
	h := d.ent(s).hash
	t := d.tab(h)
	mask := uint32(len(t.idx) - 1)
	want := uint32(s + 1)
	for i := h & mask; ; i = (i + 1) & mask {
		if t.idx[i]&slotMask == want {
			return t, int(i)
		}
	}
}

// place puts word w of a key with hash h into idx, which has room.
func place(idx []uint32, w, h uint32) {
	mask := uint32(len(idx) - 1)
	i := h & mask
	for idx[i] != 0 {
		i = (i + 1) & mask
	}
	idx[i] = w
}

// rebuild gives table t n positions (a power of two).
func (ks *Keyspace) rebuild(d *ksDB, t *ksTab, n int) {
	ks.acct(d, int64(n-len(t.idx))*4)
	idx := make([]uint32, n)
	for _, w := range t.idx {
		if w != 0 {
			place(idx, w, d.ent(int(w&slotMask)-1).hash)
		}
	}
	t.idx = idx
}

// grow makes room in table t for one more key: it doubles it, or splits it in two.
func (ks *Keyspace) grow(d *ksDB, t *ksTab) {
	if len(t.idx) < tabMaxSlots || t.depth == maxDirBits {
		ks.rebuild(d, t, max(8, 2*len(t.idx)))
		return
	}
	if t.depth == d.gd {
		dir := make([]*ksTab, 2*len(d.dir))
		for i, x := range d.dir {
			dir[2*i], dir[2*i+1] = x, x
		}
		ks.acct(d, int64(len(dir)-len(d.dir))*8)
		d.dir = dir
		d.gd++
	}
	t0 := &ksTab{idx: make([]uint32, len(t.idx)), depth: t.depth + 1}
	t1 := &ksTab{idx: make([]uint32, len(t.idx)), depth: t.depth + 1}
	ks.acct(d, int64(len(t.idx))*4+ksTabObj)
	bit := 31 - uint32(t.depth)
	for _, w := range t.idx {
		if w == 0 {
			continue
		}
		h := d.ent(int(w&slotMask) - 1).hash
		nt := t0
		if h>>bit&1 == 1 {
			nt = t1
		}
		place(nt.idx, w, h)
		nt.n++
	}
	for i := range d.dir {
		if d.dir[i] == t {
			if uint32(i)>>(d.gd-1-t.depth)&1 == 1 {
				d.dir[i] = t1
			} else {
				d.dir[i] = t0
			}
		}
	}
}

// unindex empties position pos of table t, moving back the words after it that may fill
// it (backward-shift deletion: no tombstones).
func (d *ksDB) unindex(t *ksTab, pos int) {
	mask := len(t.idx) - 1
	i := pos
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		v := t.idx[j]
		if v == 0 {
			break
		}
		home := int(d.ent(int(v&slotMask)-1).hash) & mask
		// v may move to i unless its home lies cyclically in (i, j].
		if i <= j {
			if i < home && home <= j {
				continue
			}
		} else if i < home || home <= j {
			continue
		}
		t.idx[i] = v
		i = j
	}
	t.idx[i] = 0
	t.n--
}

// add makes a key in d with an empty string value and returns its slot, or -1 when the
// keyspace is full.
func (ks *Keyspace) add(d *ksDB, key []byte, h uint32) int {
	if ks.cfg.MaxKeys > 0 && ks.nkeys >= ks.cfg.MaxKeys || d.n >= MaxKeysPerDB {
		return -1
	}
	t := d.tab(h)
	for (t.n+1)*5 > len(t.idx)*4 { // a split may leave every key on the side of this one
		ks.grow(d, t)
		t = d.tab(h)
	}
	s := d.n
	c := s >> entShift
	if c == len(d.ents) {
		was := cap(d.ents)
		d.ents = append(d.ents, make([]ksEntry, 0, min(8, entChunk)))
		if c > 0 {
			d.ents[c] = make([]ksEntry, 0, entChunk)
		}
		ks.acct(d, int64(cap(d.ents)-was)*24+int64(cap(d.ents[c]))*entrySize)
	}
	ch := &d.ents[c]
	if len(*ch) == cap(*ch) {
		n := min(entChunk, 2*cap(*ch))
		ks.acct(d, int64(n-cap(*ch))*entrySize)
		*ch = append(make([]ksEntry, 0, n), *ch...)
	}
	*ch = append(*ch, ksEntry{hash: h, klen: uint16(len(key)), kind: KindString})
	d.n++
	e := d.ent(s)
	if len(key) > 0 {
		e.p = ks.alloc(len(key))
		copy(unsafe.Slice(e.p, len(key)), key)
		ks.acct(d, ksAlloc(len(key)))
	}
	place(t.idx, word(s, h), h)
	t.n++
	ks.nkeys++
	// The mark of the backup in progress (made since its instant: not in it), or of the
	// last one (which the next one's flips to "not emitted").
	e.flags |= ks.sv.mark
	if len(d.watch) > 0 {
		if w := d.watch[string(key)]; w != nil {
			e.flags |= fWatched
			ks.wseq++
			w.ver = ks.wseq
		}
	}
	return s
}

// remove deletes the key at slot s of d, the last key taking its place.
func (ks *Keyspace) remove(d *ksDB, s int) {
	ks.cow(d, s)
	e := d.ent(s)
	ks.touched(d, e)
	if e.x != 0 {
		ks.ttlCut(d, int(e.x)-1)
	}
	if e.kind == kindBig {
		ks.freeBig(d, e.vlen)
	}
	if e.flags&fFenced != 0 {
		delete(d.fences, string(e.key()))
		ks.acct(d, -ksFenceCost-ksAlloc(int(e.klen)))
	}
	ks.acct(d, -ksAlloc(e.size()))
	ks.release(e.p, e.size())
	t, pos := d.posOf(s)
	d.unindex(t, pos)
	last := d.n - 1
	if s != last {
		m := d.ent(last)
		lt, lp := d.posOf(last)
		lt.idx[lp] = word(s, m.hash)
		if m.x != 0 {
			d.ttl.at(int(m.x) - 1).slot = uint32(s)
		}
		*d.ent(s) = *m
	}
	*d.ent(last) = ksEntry{}
	c := last >> entShift
	d.ents[c] = d.ents[c][:last&entMask]
	d.n--
	ks.nkeys--
	// One empty chunk is kept, so that a key added and deleted at a chunk's edge does not
	// make and drop one each time.
	if n := len(d.ents); n > c+2 {
		ks.acct(d, -int64(cap(d.ents[n-1]))*entrySize)
		d.ents[n-1] = nil
		d.ents = d.ents[:n-1]
	}
	if n := len(t.idx); n > 64 && t.n*8 < n {
		ks.rebuild(d, t, n/4)
	}
}

// touched notes a change of e's value or expiry for WATCH.
func (ks *Keyspace) touched(d *ksDB, e *ksEntry) {
	if e.flags&fWatched != 0 {
		ks.wseq++
		d.watch[string(e.key())].ver = ks.wseq
	}
}

// store makes e's value v, of kind k (KindString or KindHash, packed), in place when it
// takes the same size class.
func (ks *Keyspace) store(d *ksDB, e *ksEntry, k ValueKind, v []byte) {
	if e.kind == kindBig {
		panic("store: keyspace: store over a large hash")
	}
	old, n := e.size(), int(e.klen)+len(v)
	if ksAlloc(n) == ksAlloc(old) {
		if n > 0 {
			copy(unsafe.Slice(e.p, n)[e.klen:], v)
		}
	} else {
		var p *byte
		if n > 0 {
			p = ks.alloc(n)
			b := unsafe.Slice(p, n)
			copy(b, e.key())
			copy(b[e.klen:], v)
		}
		ks.acct(d, ksAlloc(n)-ksAlloc(old))
		ks.release(e.p, old)
		e.p = p
	}
	e.kind, e.vlen = k, uint32(len(v))
}

// storeInt makes e's value the integer n.
func (ks *Keyspace) storeInt(d *ksDB, e *ksEntry, n int64) {
	if e.kind != KindInt {
		var b [8]byte
		ks.store(d, e, KindString, b[:])
		e.kind = KindInt
	}
	put64(e.val(), uint64(n))
}

// dropBig turns e, a large hash, back into an empty string, freeing its map.
func (ks *Keyspace) dropBig(d *ksDB, e *ksEntry) {
	ks.freeBig(d, e.vlen)
	e.kind, e.vlen = KindString, 0
}

func (ks *Keyspace) newBig(d *ksDB) uint32 {
	b := &bigHash{m: make(map[string]string)}
	ks.acct(d, bigHashObj)
	if n := len(d.freeBig); n > 0 {
		i := d.freeBig[n-1]
		d.freeBig = d.freeBig[:n-1]
		d.bigs[i] = b
		return i
	}
	was := cap(d.bigs)
	d.bigs = append(d.bigs, b)
	ks.acct(d, int64(cap(d.bigs)-was)*8)
	return uint32(len(d.bigs) - 1)
}

func (ks *Keyspace) freeBig(d *ksDB, i uint32) {
	ks.acct(d, -d.bigs[i].bytes-bigHashObj)
	d.bigs[i] = nil
	was := cap(d.freeBig)
	d.freeBig = append(d.freeBig, i)
	ks.acct(d, int64(cap(d.freeBig)-was)*4)
}

// lookup returns db's database and the slot of key in it, -1 for none; a key past its
// expiry is deleted first (lazy expiry).
func (ks *Keyspace) lookup(db uint8, key []byte, now int64) (*ksDB, int, uint32) {
	h := ks.hash(key)
	d := ks.dbs[db]
	if d == nil {
		return nil, -1, h
	}
	_, s, _ := d.find(key, h)
	if s >= 0 {
		if x := d.ent(s).x; x != 0 && d.ttl.at(int(x)-1).at <= now {
			ks.expire(d, s)
			return d, -1, h
		}
	}
	return d, s, h
}

// expire deletes the key at slot s, past its deadline.
func (ks *Keyspace) expire(d *ksDB, s int) {
	ks.expired++
	ks.event(d.id, EvExpired, d.ent(s).key())
	ks.recKey(RecDel, d.id, d.ent(s).key())
	ks.remove(d, s)
}

// Flush empties db (FLUSHDB): at once for every later operation; its memory goes back as
// the garbage collector frees its arrays. A backup in progress keeps what it had.
func (ks *Keyspace) Flush(db uint8) {
	d := ks.dbs[db]
	ks.recFlush(db)
	if d == nil {
		return
	}
	ks.bytes -= d.bytes
	ks.nkeys -= d.n
	nd := ks.newDB(db, d.watch)
	for _, w := range d.watch {
		ks.wseq++
		w.ver = ks.wseq
	}
	ks.dbs[db] = nd
}

// FlushAll empties every database.
func (ks *Keyspace) FlushAll() {
	for _, n := range ks.live {
		ks.Flush(n)
	}
}

// dbBytes is what d's keys and arrays cost (not its watches).
func (ks *Keyspace) dbBytes(d *ksDB) int64 {
	n := int64(cap(d.ents))*24 + int64(len(d.dir))*8 + d.ttl.bytes(ttlSlotSize) +
		int64(cap(d.bigs))*8 + int64(cap(d.freeBig))*4
	for c := range d.ents {
		n += int64(cap(d.ents[c])) * entrySize
	}
	for i := 0; i < len(d.dir); i += 1 << (d.gd - d.dir[i].depth) {
		n += ksTabObj + int64(len(d.dir[i].idx))*4
	}
	for i := range d.n {
		e := d.ent(i)
		n += ksAlloc(e.size())
		if e.flags&fFenced != 0 {
			n += ksFenceCost + ksAlloc(int(e.klen))
		}
	}
	for _, b := range d.bigs {
		if b != nil {
			n += b.bytes + bigHashObj
		}
	}
	return n
}

// Watch starts one watch of key in db (Redis's WATCH) and returns its version, which
// WatchVersion changes once the key is set, changed, deleted, expired or flushed. Each
// Watch needs an Unwatch. Only watched keys pay for it.
func (ks *Keyspace) Watch(db uint8, key []byte) uint64 {
	d := ks.db(db, true)
	if d.watch == nil {
		d.watch = make(map[string]*ksWatch)
	}
	w := d.watch[string(key)]
	if w == nil {
		ks.wseq++
		w = &ksWatch{ver: ks.wseq}
		d.watch[string(key)] = w
		ks.bytes += ksWatchCost + ksAlloc(len(key))
		if _, s, _ := d.find(key, ks.hash(key)); s >= 0 {
			d.ent(s).flags |= fWatched
		}
	}
	w.refs++
	return w.ver
}

// Unwatch ends one Watch of key in db.
func (ks *Keyspace) Unwatch(db uint8, key []byte) {
	d := ks.dbs[db]
	if d == nil || d.watch[string(key)] == nil {
		return
	}
	w := d.watch[string(key)]
	if w.refs--; w.refs > 0 {
		return
	}
	delete(d.watch, string(key))
	ks.bytes -= ksWatchCost + ksAlloc(len(key))
	if _, s, _ := d.find(key, ks.hash(key)); s >= 0 {
		d.ent(s).flags &^= fWatched
	}
}

// WatchVersion returns the version of key in db, which must be watched (0 if not).
func (ks *Keyspace) WatchVersion(db uint8, key []byte) uint64 {
	if d := ks.dbs[db]; d != nil {
		if w := d.watch[string(key)]; w != nil {
			return w.ver
		}
	}
	return 0
}

// KeyFence returns the highest token a fenced write presented to key (0 for none, or no
// such key).
func (ks *Keyspace) KeyFence(db uint8, key []byte, now int64) uint64 {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 || d.ent(s).flags&fFenced == 0 {
		return 0
	}
	return d.fences[string(key)]
}

// RaiseFence records that a fenced write presenting token succeeded on key, which
// exists: later writes presenting a lower one are refused by the caller (KeyFence). The
// fence lives as long as the key.
func (ks *Keyspace) RaiseFence(db uint8, key []byte, token uint64, now int64) {
	d, s, _ := ks.lookup(db, key, now)
	if s < 0 || token == 0 {
		return
	}
	e := d.ent(s)
	if e.flags&fFenced != 0 && d.fences[string(key)] >= token {
		return
	}
	ks.cow(d, s)
	if e.flags&fFenced == 0 {
		if d.fences == nil {
			d.fences = make(map[string]uint64)
		}
		e.flags |= fFenced
		ks.acct(d, ksFenceCost+ksAlloc(int(e.klen)))
	}
	d.fences[string(key)] = token
	ks.recFence(d.id, key, token)
}
