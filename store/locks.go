package store

import (
	"encoding/binary"
	"math"
	"strconv"
)

// LockKind is what a LockCommand asks for; its values are slock's frame types.
type LockKind uint8

// The kinds of LockCommand the Locks run; any other is answered UNKNOWN_COMMAND.
const (
	KindLock       LockKind = 1
	KindUnlock     LockKind = 2
	KindWillLock   LockKind = 8 // run as KindLock
	KindWillUnlock LockKind = 9 // run as KindUnlock
)

// LockCommand is one Lock or Unlock as a client sent it (binary frame, or
// built from a text command).
type LockCommand struct {
	Kind        LockKind
	Opts        Opts
	DB          uint8
	Rcount      uint8
	RequestID   [16]byte
	LockID, Key [16]byte
	Wait        Wait
	Hold        Hold
	Echo        Echo
	Count       uint16

	// Add makes a Lock that carries a SET record an INCRBY of Delta (see
	// locks_add.go): the record's value becomes the key's integer value plus
	// Delta. Never set by a frame from the wire.
	Add bool

	// Data is the data record, whole (u32 N + N bytes, N >= 2), or nil. The
	// store copies what it keeps.
	Data []byte

	// Delta is what an Add adds.
	Delta int64

	// ExpireAt, when not 0, is when (Unix milliseconds) a hold this command
	// makes or updates expires, exactly, in place of what Hold says (which then only tell a hold from a probe): the Redis
	// expiries of key/value commands, which a 16-bit Hold.N cannot carry.
	// Never set by a frame from the wire.
	ExpireAt int64

	// Client is the connection's cluster-wide client id (0: none), which a
	// holder keeps: who made it, whatever connection number it has on the
	// member running it (LockedByOther). Never set by a frame from the wire.
	Client uint64
}

// LockReply is one reply frame owed to a connection: to the command's
// sender, or unasked (grant of a queued request, TIMEOUT, EXPRIED push,
// cancelled wait, second replies of reverse-key and requeue, tree-unlock
// chain).
type LockReply struct {
	Owner     Owner    // the connection the frame is for: the owner that sent the request, or last locked the holder
	Kind      LockKind // KindLock or KindUnlock, or the unknown kind of the command
	RequestID [16]byte
	Result    LockResult
	DB        uint8

	LockID, Key [16]byte

	Lcount  uint16
	Count   uint16
	Lrcount uint8
	Rcount  uint8

	// Value is the key's value record to attach (u32 N + N bytes), nil for
	// none: its value before the command, except after an Add, whose reply
	// carries the value it made. It is valid until the next call on the Locks.
	Value []byte

	// Token is the fencing token of the holder a LockOK made or reentered
	// (0 for anything else): see locks_fence.go.
	Token uint64

	// Gone is, with Locks.KeepGone, the value record a key held when this
	// expiry (LockExpried) emptied it, and so deleted it; nil otherwise. It is
	// valid until the next call on the Locks.
	Gone []byte
}

// Exec is an EXECUTE inner command to run as if Owner had sent it. Frame is
// the EXECUTE record's value as the client sent it, bytes the store does not
// look into: the caller decodes it (a 64-byte Lock or Unlock frame of DB,
// possibly followed by its data record), passes it to Do, or ignores it if
// it is not one. Frame is valid until the next call on the Locks.
type Exec struct {
	Owner Owner
	DB    uint8
	Frame []byte
}

// LockResult is the outcome of a Lock or Unlock. It is the store's own: the
// caller maps it to the protocol's result code.
type LockResult uint8

// Lock and Unlock outcomes.
const (
	LockOK             LockResult = iota // granted, released or cancelled as asked
	LockUnknownDB                        // no such database: DbId 255, or an Unlock in one never created
	LockUnknownCommand                   // neither a Lock nor an Unlock
	LockLockedError                      // reentry refused, an Update, a wait cancelled by its own Unlock
	LockUnlockError                      // nothing to unlock; the cancelled wait itself
	LockUnownError                       // held by someone else
	LockTimeout                          // a wait ran out, or a try-lock failed
	LockExpried                          // a hold ran out
	LockUnknownError                     // the key limit (MaxKeys) is reached
	LockNotInteger                       // an Add's key holds a value that is not an integer
	LockOverflow                         // an Add's sum does not fit an int64
	NumLockResults                       // the number of outcomes
)

var lockResultNames = [NumLockResults]string{
	LockOK:             "LockOK",
	LockUnknownDB:      "LockUnknownDB",
	LockUnknownCommand: "LockUnknownCommand",
	LockLockedError:    "LockLockedError",
	LockUnlockError:    "LockUnlockError",
	LockUnownError:     "LockUnownError",
	LockTimeout:        "LockTimeout",
	LockExpried:        "LockExpried",
	LockUnknownError:   "LockUnknownError",
	LockNotInteger:     "LockNotInteger",
	LockOverflow:       "LockOverflow",
}

func (r LockResult) String() string {
	if r < NumLockResults {
		return lockResultNames[r]
	}
	return "LockResult(" + strconv.Itoa(int(r)) + ")"
}

// MaxLockDB is the highest DbId; 255 is UNKNOWN_DB.
const MaxLockDB = 254

// LocksConfig configures a Locks.
type LocksConfig struct {
	MaxWaitersPerKey   int      // most queued requests on one key; beyond, a request times out at once; <= 0: no limit
	MaxWaitersPerOwner int      // most queued requests of one connection; beyond, likewise; <= 0: no limit
	MaxKeys            int      // most keys over all databases; a Lock that would add one gets UNKNOWN_ERROR; <= 0: no limit
	MaxValue           int      // longest value record (N) a key keeps; a data command that would make a longer one changes nothing; <= 0: DefaultMaxValue
	IDSeed             uint64   // keys server-generated RequestIds when IDKey is zero (tests: repeatable ids)
	IDKey              [16]byte // keys server-generated RequestIds (store.IDs): draw it at random

	// keyspace is the store's keyspace (Store.New sets it): a LOCK on a name it has waits
	// (locks_named.go). A method call, not a func value: the name, a view into the
	// command, must not escape.
	keyspace *Keyspace

	// Persist makes the Locks keep a journal of the keys whose persistent state
	// changed, for an append-only log (see Journal). A holder persists once it
	// has been held PersistAfter (ns), at once with HoldPersistNow or when
	// its key has a value, never with HoldPersistNever or HoldKept.
	Persist      bool
	PersistAfter int64
}

// DefaultMaxValue is the default LocksConfig.MaxValue: the longest data
// record a client may send (slock-protocol.md §2).
const DefaultMaxValue = 1 << 20

// LockState is a database's STATE counters.
type LockState struct {
	LockCount        uint64 // grants, including probes, reentries and less-version successes
	UnLockCount      uint64 // levels released by Unlocks, plus cancelled waits
	LockedCount      uint32 // levels held now
	WaitCount        uint32 // requests queued now
	TimeoutedCount   uint32 // queued requests that timed out
	ExpiredCount     uint32 // holders that expired
	UnlockErrorCount uint32 // Unlocks answered UNLOCK_ERROR or UNOWN_ERROR
	KeyCount         uint32 // keys with holders or waiters now
}

// Pieces kept for reuse so that lock/unlock pairs allocate nothing.
const (
	lockFreeItems = 4096
	lockFreeKeys  = 4096
	lockKeepBytes = 4096    // largest value or data buffer kept with a free key or item
	lockGoneRing  = 4096    // closed connections remembered with no locks or waits left
	lockIndexAt   = 8       // holders on a key beyond which they are indexed by LockId
	lockKeepBuf   = 4 << 20 // largest reply and work buffer kept between calls
)

// Where slock-protocol.md and NOTES.md §4 leave a choice, or describe a
// reference defect, Locks does this:
//
//   - HoldKept keeps a holder, WaitKept keeps
//     a wait, from running out while the owning connection is open; both
//     count down from Disconnected. A keep-alive item of a connection
//     already closed (a WILL command, an EXECUTE) counts down at once.
//   - A Lock that would add a key beyond MaxKeys gets UNKNOWN_ERROR (LockUnknownError);
//     probes (Hold.N 0), which keep no key, are exempt. Queued requests
//     beyond MaxWaitersPerKey or MaxWaitersPerOwner get TIMEOUT at once.
//   - An INCR whose delta is not exactly 8 bytes is ignored (the command
//     succeeds, the value is unchanged); SHIFT past the end empties the
//     value; a data command whose result would exceed MaxValue is ignored.
//   - Less-lock-version on a key with waiters but no holder queues or times
//     out as usual. REQUIRE_ACKED (0x1000) is a plain grant, whatever the
//     persistence flags: LOCK_ACK_WAITING is never answered.
//   - A queued request whose LockId has become a holder by the time the
//     queue reaches it is taken as a reentry (or Update) of that holder.
//   - Only a grant that adds a level wakes waiters: a probe on a free key
//     does not release wait-while-unlocked (0x0200) waiters.
//   - With both unit flags, milliseconds (0x0400) win over minutes (0x0040).
//   - Unlock flags 0x01|0x02: a queued request with the LockId is cancelled
//     if there is one, else the oldest holder is unlocked. With 0x02 alone
//     and nothing to cancel the answer is UNLOCK_ERROR with the key's
//     levels as Lcount.
//   - An Update with Hold.N 0xFFFF and HoldNever keeps the
//     holder's expiry and its Hold.
//   - An Unlock carrying a data record counts as a frame with flag 0x20 for
//     the holder's attached EXECUTEs.
//   - In a PIPELINE, elements that change nothing (SHIFT 0, POP of a
//     string, UNSET of no value, ...) do not replace an earlier element's
//     effect.
//   - STATE: TimeoutedCount counts queued requests that timed out, not
//     immediate TIMEOUTs; UnLockCount counts levels released by Unlocks and
//     cancelled waits, not expiries; UnlockErrorCount counts Unlocks
//     answered UNLOCK_ERROR or UNOWN_ERROR in an existing database.

// Locks is slock's lock namespace: databases by DbId, each a set of keys,
// each key with its holders (oldest first), its queue of waiting requests
// and its value record. A key exists while it has a holder or a waiter.
//
// Holders live until an Unlock or their expiry; a connection's close does
// not release them. Waits and expiries are deadlines in a deadline heap,
// the Locks' own driven by Expire, or in a Store the Store's, driven by
// Store.Advance; keep-alive ones (HoldKept, WaitKept) are not armed until their
// connection is Disconnected.
//
// Each call appends the replies it causes, in the order they must be sent,
// and the EXECUTE inner commands to run next. Value and Frame slices in
// them point into a buffer of the Locks that the next call reuses.
type Locks struct {
	// KeepGone asks for the value a key held when an expiry emptied it, in the expiry's
	// reply (LockReply.Gone): the caller names the key in a notification from it.
	KeepGone bool

	dbs     [MaxLockDB + 1]*lockDB
	nkeys   int
	dl      *deadlines // waits and holds, by when they are due
	shared  bool       // dl and aging are a Store's
	owners  map[Owner]*lockOwner
	gone    []Owner // recently closed connections, a ring
	goneAt  int
	changes uint64 // Changes: what the journal took, counted
	name    []byte // DoNamed's key name, during the call (locks_named.go)

	// The memory budget (Bytes, memcost.go).
	valueBytes int64 // the keys' value buffers, live and kept for reuse (lockKey.vbytes)
	itemBytes  int64 // the items' data and EXECUTE buffers, live and kept for reuse (lockItem.bufs)
	valsBytes  int64 // the databases' tables of keys with a value
	mapBytes   int64 // the databases' maps of keys, at their largest since built (lockDB.peak, oldGen.peak)
	nitems     int   // live holders and waiters
	nindexed   int   // holders in their key's index by LockId
	orphans    int   // waiters whose connection has closed
	shrinkDue  []*lockDB
	evictBuf   []*lockItem

	valueMoves uint64 // keys taken out of a value table (ValueRemovals)

	cfg LocksConfig
	ids *IDs
	seq uint32

	out   []LockReply
	ex    []Exec
	arena []byte // Value and Frame bytes of this call
	tmp   []byte // records being computed
	htmp  []byte // the record a hash command leaves (locks_hash.go)

	freeItems  *lockItem
	nfreeItems int
	freeKeys   *lockKey
	nfreeKeys  int
	freeOwners *lockOwner

	// Journal (persist.go).
	dirty      []*lockKey              // keys whose state changed since the last Journal: those still dirty (a key freed since is not, one reused since may be listed twice)
	ndirty     int                     // the keys in dirty still dirty: Journal has something to emit for them
	flushes    []uint8                 // databases flushed since the last Journal (AllDBs: all), in order
	goneKeys   []keyRef                // logged keys deleted since the last Journal
	loggedKeys list[lockKey, *lockKey] // keys whose latest log record has holders
	cursor     *lockKey                // the next key SnapshotNext writes, nil when done
	bk         saveState               // a backup being encoded (locks_save.go)
	aging      *deadlines              // holders that will persist once held PersistAfter, by when
	snap       KeyState

	// Fencing tokens (locks_fence.go).
	fence     uint64 // the last token issued
	fenceCeil uint64 // tokens up to this are reserved in the log
	ceilDirty bool   // fenceCeil changed since the last Journal
	all       bool   // every holder persists (PersistAll)
	snapCeil  bool   // SnapshotNext has yet to emit the ceiling

	// Warm (locks_warm.go).
	warmKeys  []*lockKey
	warmItems []*lockItem
	warmSum   uint64

	// WATCH (locks_add.go).
	watches map[keyRef]*watch
	wseq    uint64
	addBuf  []byte
}

// lockDB is one database.
type lockDB struct {
	id     uint8
	keys   map[[16]byte]*lockKey
	vals   []*lockKey // the keys with a value (locks_values.go)
	st     LockState
	peak   int  // most keys since keys was built: a Go map keeps its room (shrinkKeys)
	shrink bool // in Locks.shrinkDue

	// A flush (locks_flush.go): the keys of the generations before, freed a slice at a time.
	gen    uint32                      // the current generation: a key of another is flushed
	saved  uint32                      // gen when the backup being encoded began (locks_save.go)
	olds   []oldGen                    // the keys of generations flushed and not yet freed
	waited list[waitedKey, *waitedKey] // the keys with waiters, which a flush handles at once

	// The "Locks and DEL" link (locks_named.go): how many keys (of this generation) a LOCK
	// holds under another LockId; those of them with a long name (given), by name; the keys
	// whose waiters wait for the keyspace's key of a name.
	nothers          int
	named, waitNamed map[string]*lockKey
	lnames, wnames   map[*lockKey]string
}

// lockKey is one key of a database.
type lockKey struct {
	db       *lockDB
	key      [16]byte
	hold     itemList // holders, oldest first
	wait     itemList // waiters in queue order: by priority, then arrival
	levels   uint32
	byID     map[[16]byte]*lockItem // holders by LockId, once there are many
	value    []byte                 // the value record while has
	has      bool
	vslot    int32 // 1 + its index in db.vals while has
	vbytes   int   // the value buffer as counted in Locks.valueBytes: allocSize(cap(value))
	valueCmd uint8
	lflags   uint8    // the "Locks and DEL" link (locks_named.go): lfNamed, lfWaits
	others   uint32   // holders under a LockId other than the key (locks_named.go)
	next     *lockKey // free list
	logged   bool     // the log's latest record of the key has holders; then on Locks.loggedKeys
	ll       links[lockKey]
	dirty    bool             // in Locks.dirty
	saved    uint32           // the Locks.bk.epoch of the backup that has emitted it (locks_save.go)
	fence    uint64           // the highest fencing token a fenced write presented (locks_fence.go)
	gen      uint32           // its database's generation when it was made: another means flushed (locks_flush.go)
	wl       links[waitedKey] // on its database's waited list while it has waiters
}

// lockItem is one holder or one queued request.
type lockItem struct {
	dl              deadline
	k               *lockKey
	links[lockItem]                 // in the key's holders or waiters; next links the free list
	kl              links[keptItem] // in the owner's keep-alive list
	ko              *lockOwner
	cmd             LockCommand // the Lock (or Update) that made it, Data nil
	owner           Owner
	arrived         int64  // when the request that made it arrived
	start           int64  // holder: when it was granted
	data            []byte // waiter: its data record, applied at grant
	execs           []byte // holder: attached EXECUTEs, each stage u8, first-or-last u8, u32 len, frame
	levels          uint8
	prio            uint8
	waiting         bool
	hasData         bool     // waiter: data holds a record
	dataFrame       bool     // holder: the latest frame on it carried a data record (flag 0x20)
	waitsCounted    bool     // counted in its owner's waiters
	pdl             deadline // in Locks.aging
	token           uint64   // holder: its fencing token
}

func (it *lockItem) deadline() *deadline { return &it.dl }

// lockOwner is what the store knows of a connection: how many requests it
// has queued, its keep-alive holders and waiters, and whether it closed.
// Only connections with one of these (or closed recently) have one.
type lockOwner struct {
	id      Owner
	waiters int
	keep    list[keptItem, *keptItem]
	gone    bool
	inRing  bool
	next    *lockOwner // free list
}

// itemList is a key's holders or waiters, linked through prev and next.
type itemList = list[lockItem, *lockItem]

func (it *lockItem) link() *links[lockItem] { return &it.links }

// keptItem is an item as its owner's keep-alive list sees it.
type keptItem lockItem

func (k *keptItem) link() *links[keptItem] { return &k.kl }

// NewLocks returns an empty lock namespace.
func NewLocks(cfg LocksConfig) *Locks {
	if cfg.MaxValue <= 0 {
		cfg.MaxValue = DefaultMaxValue
	}
	return &Locks{
		dl:     new(deadlines),
		aging:  new(deadlines),
		owners: make(map[Owner]*lockOwner),
		cfg:    cfg,
		ids:    NewIDs(idKey(cfg)),
	}
}

// idKey is the key of cfg's RequestIds: IDKey, or one made from IDSeed.
func idKey(cfg LocksConfig) [16]byte {
	if cfg.IDKey == ([16]byte{}) {
		return seedKey(cfg.IDSeed)
	}
	return cfg.IDKey
}

// Do runs one Lock or Unlock that owner sent at now. The replies it causes,
// to owner and to others, are appended to replies and the EXECUTE inner
// commands to run next to execs, each in the order they must be sent or
// run. A command of another type is answered UNKNOWN_COMMAND.
//
// Do never blocks: a Lock that must wait is queued and answered later, by a
// Do or Expire whose replies include its grant or its TIMEOUT.
func (l *Locks) Do(owner Owner, cmd *LockCommand, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec) {
	l.begin(replies, execs)
	switch cmd.Kind {
	case KindLock, KindWillLock:
		c := *cmd
		c.Kind = KindLock
		if c.Add {
			l.add(owner, &c, now)
			break
		}
		l.lock(owner, &c, cmd.Data, now)
	case KindUnlock, KindWillUnlock:
		c := *cmd
		c.Kind = KindUnlock
		for l.unlock(owner, &c, now) {
		}
	default:
		l.out = append(l.out, LockReply{Owner: owner, Kind: cmd.Kind, RequestID: cmd.RequestID, Result: LockUnknownCommand})
	}
	return l.end()
}

// Expire times out the queued requests and expires the holders due at now,
// appending the replies and EXECUTEs that causes.
//
// Times: a value in Seconds (or Minutes) is due at the start
// of the second after base + value, base being the second of the grant (or
// of the request's arrival), so a lock lives between value and value + 1
// seconds; a value in Millis is due exactly base +
// value. The caller should call Expire every few milliseconds, or at
// NextDeadline. It panics on the Locks of a Store (see Store.Advance).
func (l *Locks) Expire(now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec) {
	alone(l.shared, "Locks.Expire")
	l.begin(replies, execs)
	for {
		if l.bk.on { // a holder's deadline is part of its key's state: the backup has it first
			if it, ok := l.dl.peek(now); ok {
				l.cow(it.(*lockItem).k)
			}
		}
		it, ok := l.dl.pop(now)
		if !ok {
			break
		}
		l.due(it.(*lockItem), now)
	}
	return l.end()
}

// due times out waiter it, or expires holder it, just taken off the deadline
// heap, within a call.
func (l *Locks) due(it *lockItem, now int64) {
	if k := it.k; k != nil && k.flushed() {
		l.flushedDue(k) // its flush frees it instead (locks_flush.go)
		return
	}
	if it.waiting {
		l.timedOut(it, now)
	} else {
		l.expired(it, now)
	}
}

// NextDeadline returns when the earliest wait or hold is due, and false if
// none is. It panics on the Locks of a Store (see Store.NextDeadline).
func (l *Locks) NextDeadline() (int64, bool) {
	alone(l.shared, "Locks.NextDeadline")
	return l.dl.next()
}

// Disconnected records that owner's connection closed at now. Its locks and
// queued requests stay; those kept alive by the connection (HoldKept for a
// holder, WaitKept for a wait) start
// counting down from now. Replies about them are still addressed to owner.
// The caller may run the connection's WILL commands before or after.
func (l *Locks) Disconnected(owner Owner, now int64) {
	o := l.owner(owner)
	if o.gone {
		return
	}
	o.gone = true
	l.orphans += o.waiters
	if len(l.gone) < lockGoneRing {
		l.gone = append(l.gone, owner)
	} else {
		old := l.owners[l.gone[l.goneAt]]
		old.inRing = false
		l.forget(old)
		l.gone[l.goneAt] = owner
		l.goneAt = (l.goneAt + 1) % lockGoneRing
	}
	o.inRing = true
	for o.keep.head != nil {
		it := (*lockItem)(o.keep.head)
		l.cow(it.k) // a holder's deadline is part of its key's state
		l.unkeep(it)
		if it.waiting {
			l.dl.add(it, dueAt(now, it.cmd.waitSpan()))
		} else {
			l.dl.add(it, dueAt(now, it.cmd.holdSpan()))
		}
	}
}

// State returns database db's STATE counters, and false if it does not
// exist (a Lock creates it).
func (l *Locks) State(db uint8) (LockState, bool) {
	if db > MaxLockDB || l.dbs[db] == nil {
		return LockState{}, false
	}
	return l.dbs[db].st, true
}

// TTL returns the milliseconds until the oldest holder of key in db is due
// to expire at now: -2 if the key has no holder, -1 if that holder never
// expires (or is kept alive by its open connection).
func (l *Locks) TTL(db uint8, key [16]byte, now int64) int64 {
	return l.key(db, key).ttl(now)
}

// ttl is TTL for k (nil: no such key).
func (k *lockKey) ttl(now int64) int64 {
	if k == nil || k.hold.head == nil {
		return -2
	}
	h := k.hold.head
	if !h.dl.scheduled() {
		return -1
	}
	if at := h.cmd.ExpireAt; at != 0 {
		return max(at-now/1e6, 0)
	}
	return max(h.dl.at-now, 0) / 1e6
}

// TTLAsked returns how long, in milliseconds, the oldest holder of key in db
// asked to be held: second and minute expiries run on to the end of the
// second they fall in, so TTL may exceed it by up to a second. -1 if the key
// has no holder.
func (l *Locks) TTLAsked(db uint8, key [16]byte) int64 {
	k := l.key(db, key)
	if k == nil || k.hold.head == nil {
		return -1
	}
	c := &k.hold.head.cmd
	switch {
	case c.ExpireAt != 0:
		return math.MaxInt64 // exact: TTL is what was asked
	}
	return c.holdSpan().millis()
}

// begin starts a call that appends to replies and execs.
func (l *Locks) begin(replies []LockReply, execs []Exec) {
	l.out, l.ex = replies, execs
	if len(l.shrinkDue) > 0 {
		l.shrinkKeys()
	}
	l.arena = l.arena[:0]
	if cap(l.arena) > lockKeepBuf {
		l.arena = nil
	}
}

// end finishes a call, returning what it appended.
func (l *Locks) end() ([]LockReply, []Exec) {
	r, e := l.out, l.ex
	l.out, l.ex = nil, nil
	return r, e
}

// key returns key in database db, or nil.
func (l *Locks) key(db uint8, key [16]byte) *lockKey {
	if db > MaxLockDB || l.dbs[db] == nil {
		return nil
	}
	return l.dbs[db].keys[key]
}

// version is the less-lock-version of a LockId: its bytes 0–7, little-endian.
func version(id *[16]byte) uint64 { return binary.LittleEndian.Uint64(id[:8]) }

// reversed returns key with its bytes in reverse order.
func reversed(key [16]byte) [16]byte {
	for i := 0; i < 8; i++ {
		key[i], key[15-i] = key[15-i], key[i]
	}
	return key
}

// requestID returns a server-generated RequestId in the protocol's form: 6
// bytes of milliseconds (big-endian), 6 random bytes, a 4-byte counter. The
// random bytes come from IDs (AES under a random key): unguessable.
func (l *Locks) requestID(now int64) (id [16]byte) {
	ms := uint64(now / 1e6)
	binary.BigEndian.PutUint64(id[0:8], ms<<16)
	r := l.ids.Next()
	copy(id[6:12], r[:6])
	l.seq++
	binary.BigEndian.PutUint32(id[12:16], l.seq)
	return id
}

// save copies v into this call's arena; nil stays nil.
func (l *Locks) save(v []byte) []byte {
	if v == nil {
		return nil
	}
	i := len(l.arena)
	l.arena = append(l.arena, v...)
	return l.arena[i:len(l.arena):len(l.arena)]
}

// current returns k's value for a reply, copied; nil if it has none.
func (l *Locks) current(k *lockKey) []byte {
	if k == nil || !k.has {
		return nil
	}
	return l.save(k.value)
}

// reply appends a reply to c by its sender o.
func (l *Locks) reply(o Owner, c *LockCommand, result LockResult, lockID [16]byte, levels uint32, lr uint8, value []byte) {
	l.out = append(l.out, LockReply{
		Owner: o, Kind: c.Kind, RequestID: c.RequestID, Result: result, DB: c.DB,
		LockID: lockID, Key: c.Key, Lcount: uint16(levels), Count: c.Count, Lrcount: lr, Rcount: c.Rcount,
		Value: value,
	})
}

// levelsOf returns the levels held on k, 0 for nil.
func (k *lockKey) levelsOf() uint32 {
	if k == nil {
		return 0
	}
	return k.levels
}

// db returns database id, creating it.
func (l *Locks) db(id uint8) *lockDB {
	d := l.dbs[id]
	if d == nil {
		d = &lockDB{id: id, keys: make(map[[16]byte]*lockKey)}
		l.dbs[id] = d
	}
	return d
}

// getKey returns key in d, creating it empty.
func (l *Locks) getKey(d *lockDB, key [16]byte) *lockKey {
	if k := l.live(d, key); k != nil {
		return k
	}
	return l.addKey(d, key)
}

// addKey creates key in d, empty: a caller that just found no live key of that name (live)
// adds it without looking it up again.
func (l *Locks) addKey(d *lockDB, key [16]byte) *lockKey {
	k := l.freeKeys
	if k != nil {
		l.freeKeys = k.next
		k.next = nil
		l.nfreeKeys--
	} else {
		k = new(lockKey)
	}
	k.db, k.key, k.gen = d, key, d.gen
	k.saved = l.bk.epoch // made after a backup began: not in it
	d.keys[key] = k
	d.st.KeyCount++
	l.nkeys++
	if len(d.keys) > d.peak {
		d.peak = len(d.keys)
		l.mapBytes += lockKeyEntry
	}
	return k
}

// settle deletes k if it has neither holders nor waiters; its value goes
// with it.
func (l *Locks) settle(k *lockKey) {
	if k.hold.n != 0 || k.wait.n != 0 {
		return
	}
	d := k.db
	if k.lflags&lfWaits != 0 {
		l.unwaitKeyspace(k)
	}
	if k.has {
		l.modified(k)
	}
	if k.logged {
		if k.gen == d.gen { // a flushed key's is in the flush's record
			l.goneKeys = append(l.goneKeys, keyRef{d.id, k.key})
			l.changes++
		}
		l.setLogged(k, false)
	}
	k.has = false
	l.syncValue(k)
	d.st.KeyCount--
	l.nkeys--
	if k.gen == d.gen { // a flushed key is no longer in the table (freeOld)
		delete(d.keys, k.key)
		if d.peak >= shrinkKeysMin && len(d.keys) <= d.peak/4 && !d.shrink {
			d.shrink = true
			l.shrinkDue = append(l.shrinkDue, d)
		}
	}
	if k.dirty {
		l.ndirty-- // its record would say it is gone: goneKeys has it if it ever persisted
	}
	l.valueBytes -= int64(k.vbytes)
	v := k.value[:0]
	if cap(v) > lockKeepBytes || l.nfreeKeys >= lockFreeKeys {
		v = nil
	}
	*k = lockKey{value: v, vbytes: int(allocSize(cap(v)))}
	if l.nfreeKeys < lockFreeKeys {
		l.valueBytes += int64(k.vbytes)
		k.next = l.freeKeys
		l.freeKeys = k
		l.nfreeKeys++
	}
}

// shrinkKeysMin is the fewest keys a database's map must have held to be rebuilt smaller.
const shrinkKeysMin = 1024

// shrinkKeys rebuilds the key maps of the databases that have lost three quarters of
// their keys since they were built: a Go map never gives back its room. It runs at the
// start of a call, never while a map is being walked; its cost, O(keys left), is a third
// of the deletions that made it due.
func (l *Locks) shrinkKeys() {
	for _, d := range l.shrinkDue {
		d.shrink = false
		if len(d.keys) > d.peak/4 {
			continue
		}
		m := make(map[[16]byte]*lockKey, len(d.keys))
		for name, k := range d.keys {
			m[name] = k
		}
		l.mapBytes -= int64(d.peak-len(m)) * lockKeyEntry
		d.keys, d.peak = m, len(m)
	}
	clear(l.shrinkDue)
	l.shrinkDue = l.shrinkDue[:0]
}

// overKeys reports whether k, about to get its first holder or waiter,
// would exceed MaxKeys.
func (l *Locks) overKeys(k *lockKey) bool {
	return l.cfg.MaxKeys > 0 && k.hold.n == 0 && k.wait.n == 0 && l.nkeys > l.cfg.MaxKeys
}

// newItem returns a cleared item on k for owner o made by c.
func (l *Locks) newItem(k *lockKey, o Owner, c *LockCommand, now int64) *lockItem {
	it := l.freeItems
	if it != nil {
		l.freeItems = it.next
		it.next = nil
		l.nfreeItems--
	} else {
		it = new(lockItem)
	}
	it.k, it.owner, it.cmd, it.arrived = k, o, *c, now
	it.cmd.Data = nil
	l.nitems++
	return it
}

// bufs is what it's buffers take (memcost.go).
func (it *lockItem) bufs() int64 { return allocSize(cap(it.data)) + allocSize(cap(it.execs)) }

// freeItem clears it, no longer anywhere, and keeps it for reuse.
func (l *Locks) freeItem(it *lockItem) {
	l.nitems--
	l.itemBytes -= it.bufs()
	if l.nfreeItems >= lockFreeItems {
		*it = lockItem{}
		return
	}
	data, execs := it.data[:0], it.execs[:0]
	if cap(data) > lockKeepBytes {
		data = nil
	}
	if cap(execs) > lockKeepBytes {
		execs = nil
	}
	*it = lockItem{data: data, execs: execs}
	l.itemBytes += it.bufs()
	it.next = l.freeItems
	l.freeItems = it
	l.nfreeItems++
}

// owner returns o's record, creating it.
func (l *Locks) owner(o Owner) *lockOwner {
	r := l.owners[o]
	if r == nil {
		r = l.freeOwners
		if r != nil {
			l.freeOwners = r.next
			r.next = nil
		} else {
			r = new(lockOwner)
		}
		r.id = o
		l.owners[o] = r
	}
	return r
}

// forget drops r if nothing needs it any more.
func (l *Locks) forget(r *lockOwner) {
	if r.waiters != 0 || r.keep.n != 0 || r.inRing {
		return
	}
	delete(l.owners, r.id)
	*r = lockOwner{next: l.freeOwners}
	l.freeOwners = r
}

// Tied reports whether o's connection has requests queued or holds keep-alive locks
// (HoldKept), which its close would end.
func (l *Locks) Tied(o Owner) bool {
	r := l.owners[o]
	return r != nil && !r.gone && (r.waiters != 0 || r.keep.n != 0)
}

// closed reports whether o's connection is known to have closed.
func (l *Locks) closed(o Owner) bool {
	r := l.owners[o]
	return r != nil && r.gone
}

// unkeep takes it off its owner's keep-alive list, if it is on one.
func (l *Locks) unkeep(it *lockItem) {
	r := it.ko
	if r == nil {
		return
	}
	r.keep.remove((*keptItem)(it))
	it.ko = nil
	l.forget(r)
}

// keep puts it, not scheduled, on its owner's keep-alive list.
func (l *Locks) keep(it *lockItem) {
	r := l.owner(it.owner)
	r.keep.push((*keptItem)(it))
	it.ko = r
}

// armHold sets holder h's expiry from its command, counted from base: none
// for HoldNever, none while its owner is connected for HoldKept.
func (l *Locks) armHold(h *lockItem, base int64) {
	l.cow(h.k)
	l.unkeep(h)
	l.dl.remove(h)
	l.touch(h)
	c := &h.cmd
	switch {
	case c.neverExpires():
	case c.holdKept() && !l.closed(h.owner):
		l.keep(h)
	case c.ExpireAt != 0:
		l.dl.add(h, msDeadline(c.ExpireAt))
	default:
		l.dl.add(h, dueAt(base, c.holdSpan()))
	}
}

// msDeadline is the deadline (Unix ns) of Unix millisecond ms: past the year
// 2262, which Unix ns cannot express, never due in practice.
func msDeadline(ms int64) int64 {
	if ms > math.MaxInt64/1_000_000 {
		return math.MaxInt64
	}
	return ms * 1e6
}

// find returns the holder of k with LockId id, or nil.
func (k *lockKey) find(id [16]byte) *lockItem {
	if k.byID != nil {
		return k.byID[id]
	}
	for h := k.hold.head; h != nil; h = h.next {
		if h.cmd.LockID == id {
			return h
		}
	}
	return nil
}

// addHolder makes h, not in any list, the newest holder of k with one level.
func (l *Locks) addHolder(k *lockKey, h *lockItem) {
	l.cow(k)
	k.hold.push(h)
	h.levels = 1
	k.levels++
	if h.cmd.LockID != k.key {
		if k.others++; k.others == 1 {
			l.heldByOther(k)
		}
	}
	l.held(h)
	k.db.st.LockedCount++
	switch {
	case k.byID != nil:
		k.byID[h.cmd.LockID] = h
		l.nindexed++
	case k.hold.n > lockIndexAt:
		k.byID = make(map[[16]byte]*lockItem, 2*k.hold.n)
		for x := k.hold.head; x != nil; x = x.next {
			k.byID[x.cmd.LockID] = x
		}
		l.nindexed += k.hold.n
	}
}

// removeHolder takes holder h off its key, its deadline and keep list,
// dropping its remaining levels.
func (l *Locks) removeHolder(h *lockItem) {
	k := h.k
	l.cow(k)
	k.hold.remove(h)
	if h.cmd.LockID != k.key {
		if k.others--; k.others == 0 {
			l.notHeldByOther(k)
		}
	}
	if k.byID != nil {
		delete(k.byID, h.cmd.LockID)
		l.nindexed--
		if k.hold.n == 0 {
			k.byID = nil
		}
	}
	k.levels -= uint32(h.levels)
	k.db.st.LockedCount -= uint32(h.levels)
	h.levels = 0
	l.dl.remove(h)
	l.unkeep(h)
	l.released(h)
}

// admits reports whether the grant rule admits c to k, which is held: the
// request's Count and the oldest holder's Count both allow the levels held,
// and with WaitLessVersion the request's version is not greater than the
// oldest holder's.
func admits(k *lockKey, c *LockCommand) bool {
	if k.levels == 0 {
		return true
	}
	head := k.hold.head
	if c.Count == 0 || head == nil {
		return false
	}
	if c.Count != 0xFFFF && k.levels > uint32(c.Count) || head.cmd.Count != 0xFFFF && k.levels > uint32(head.cmd.Count) {
		return false
	}
	return !c.lessVersion() || version(&c.LockID) <= version(&head.cmd.LockID)
}

// lock runs Lock c (data: its record or nil) from o, arrived at now.
func (l *Locks) lock(o Owner, c *LockCommand, data []byte, now int64) {
	if c.DB > MaxLockDB {
		l.reply(o, c, LockUnknownDB, c.LockID, 0, 0, nil)
		return
	}
	d := l.db(c.DB)
	k := l.live(d, c.Key)
	levels := k.levelsOf()

	if c.checks() && c.Wait.N == 0 {
		if c.Count < 0xFFFF && levels > uint32(c.Count) || c.whileUnlocked() && levels == 0 {
			l.reply(o, c, LockTimeout, c.LockID, levels, 0, l.current(k))
			return
		}
	}
	if levels > 0 {
		var h *lockItem
		if c.shows() {
			head := k.hold.head
			if !c.updates() {
				l.out = append(l.out, LockReply{
					Owner: o, Kind: KindLock, RequestID: c.RequestID, Result: LockUnownError, DB: c.DB,
					LockID: head.cmd.LockID, Key: c.Key, Lcount: uint16(levels), Count: head.cmd.Count,
					Lrcount: head.levels, Rcount: head.cmd.Rcount, Value: l.current(k),
				})
				return
			}
			h = head
			c.LockID = head.cmd.LockID
		} else {
			h = k.find(c.LockID)
		}
		if h != nil {
			l.relock(o, h, c, data, now)
			return
		}
	}
	if levels == 0 && c.whileUnlocked() {
		if k != nil && k.wait.n > 0 && c.Count == 0 {
			l.reply(o, c, LockUnownError, c.LockID, 0, 0, l.current(k))
			return
		}
		l.refuse(o, d, k, c, data, now)
		return
	}
	if levels == 0 && l.cfg.keyspace != nil && l.cfg.keyspace.nkeys > 0 && c.LockID != c.Key && !c.probes() {
		// The "Locks and DEL" rule's case 3: a LOCK on a name the keyspace has waits.
		if name, ok := l.cmdName(c); ok && l.cfg.keyspace.Has(c.DB, name, now/1e6) {
			l.refuse(o, d, k, c, data, now)
			l.waitKeyspace(d, c, name)
			return
		}
	}
	admitted := levels == 0
	if !admitted {
		if k.wait.n == 0 {
			admitted = admits(k, c)
		} else if c.byPriority() && c.Rcount > k.wait.head.prio {
			admitted = admits(k, c)
		}
	}
	if !admitted {
		l.refuse(o, d, k, c, data, now)
		return
	}
	if k == nil {
		k = l.addKey(d, c.Key) // live found none above
	}
	if !c.probes() && l.overKeys(k) {
		l.reply(o, c, LockUnknownError, c.LockID, 0, 0, nil)
		l.settle(k)
		return
	}
	l.grant(o, k, c, data, nil, now, now)
	if k.wait.n > 0 && !c.probes() {
		l.wake(k, now)
	}
	l.settle(k)
}

// relock runs Lock c from o on a key its LockId holds as h: an Update
// (OptUpdate) or a reentry.
func (l *Locks) relock(o Owner, h *lockItem, c *LockCommand, data []byte, now int64) {
	k := h.k
	l.cow(k)
	if c.updates() {
		before := l.current(k)
		l.modified(k) // an Update sets the value or the expiry
		if data != nil {
			h.execs = h.execs[:0]
			l.applyData(k, h, o, c.DB, data, k.levels == 1)
		}
		// Hold.N 0xFFFF with HoldNever keeps the holder's expiry as it is.
		keep := c.keepsHold()
		old, at, was := h.cmd.holdOf(), h.cmd.ExpireAt, h.owner
		l.setParams(h, o, c, data != nil, now)
		if !keep {
			l.armHold(h, now)
		} else {
			h.cmd.setHold(old)
			h.cmd.ExpireAt = at
			// A keep-alive holder follows its new owner's connection.
			if h.cmd.holdKept() && !h.cmd.neverExpires() && was != o && (h.ko != nil || !l.closed(o)) {
				l.armHold(h, now)
			}
		}
		l.reply(o, c, LockLockedError, c.LockID, k.levels, h.levels, before)
		l.out[len(l.out)-1].Token = h.token // a refresh keeps its token
		return
	}
	if h.levels >= 255 || uint32(h.levels) > uint32(c.Rcount) || c.byPriority() {
		l.reply(o, c, LockLockedError, c.LockID, k.levels, h.levels, l.current(k))
		return
	}
	k.db.st.LockCount++
	if c.probes() {
		l.reply(o, c, LockOK, c.LockID, k.levels, h.levels, l.current(k))
		l.out[len(l.out)-1].Token = h.token
		return
	}
	before := l.current(k)
	h.levels++
	k.levels++
	k.db.st.LockedCount++
	l.setParams(h, o, c, data != nil, now)
	if data != nil {
		l.applyData(k, h, o, c.DB, data, k.levels == 1)
	}
	l.armHold(h, now)
	l.reply(o, c, LockOK, c.LockID, k.levels, h.levels, before)
	l.out[len(l.out)-1].Token = h.token
}

// setParams replaces holder h's parameters by those of c from o.
// data tells whether c carried a data record.
func (l *Locks) setParams(h *lockItem, o Owner, c *LockCommand, data bool, now int64) {
	l.cow(h.k)
	h.cmd = *c
	h.cmd.Data = nil
	h.owner = o
	h.arrived = now
	h.dataFrame = data
	l.touch(h)
}

// grant makes the request c from o a holder of k (a probe, Hold.N 0,
// holds nothing), applies its data and replies OK. w is the queued item
// being granted, or nil for a request granted on arrival.
func (l *Locks) grant(o Owner, k *lockKey, c *LockCommand, data []byte, w *lockItem, arrived, now int64) {
	before := l.current(k)
	k.db.st.LockCount++
	if c.probes() {
		if data != nil {
			l.applyData(k, nil, o, c.DB, data, k.levels == 1)
		}
		l.reply(o, c, LockOK, c.LockID, k.levels, 0, before)
		if w != nil {
			l.freeItem(w)
		}
		return
	}
	h := w
	if h == nil {
		h = l.newItem(k, o, c, arrived)
	}
	h.waiting, h.hasData, h.prio = false, false, 0
	h.start = now
	h.dataFrame = data != nil
	h.token = l.nextToken()
	l.addHolder(k, h)
	if l.name != nil && k.others > 0 && k.lflags&lfNamed == 0 && k.key[0] != 0 {
		l.nameKey(k, l.name) // a long name, which the key does not tell
	}
	if data != nil {
		l.applyData(k, h, o, c.DB, data, k.levels == 1)
	}
	base := now
	if c.fromArrival() {
		base = arrived
	}
	l.armHold(h, base)
	l.reply(o, c, LockOK, c.LockID, k.levels, 1, before)
	l.out[len(l.out)-1].Token = h.token
}

// refuse handles Lock c from o that is not admitted to key k of d (nil if
// the key does not exist): a less-version success, a queued wait, or a
// TIMEOUT at once.
func (l *Locks) refuse(o Owner, d *lockDB, k *lockKey, c *LockCommand, data []byte, now int64) {
	levels := k.levelsOf()
	if c.lessVersion() && k != nil && k.hold.head != nil && version(&c.LockID) < version(&k.hold.head.cmd.LockID) {
		before := l.current(k)
		d.st.LockCount++
		if data != nil {
			l.applyData(k, nil, o, c.DB, data, k.levels == 1)
		}
		l.reply(o, c, LockOK, k.hold.head.cmd.LockID, levels, 0, before)
		return
	}
	if c.Wait.N == 0 || c.failsOnValue() && k != nil && k.has || l.waitersFull(k, o) {
		l.reply(o, c, LockTimeout, c.LockID, levels, 0, l.current(k))
		return
	}
	if k == nil {
		k = l.addKey(d, c.Key) // the caller's live found none
	}
	if l.overKeys(k) {
		l.reply(o, c, LockUnknownError, c.LockID, 0, 0, nil)
		l.settle(k)
		return
	}
	w := l.newItem(k, o, c, now)
	if data != nil {
		was := w.bufs()
		w.data = append(w.data[:0], data...)
		w.hasData = true
		l.itemBytes += w.bufs() - was
	}
	l.enqueue(w)
}

// enqueue puts w, a new item with its command set, in its key's queue: after
// every waiter of the same or a higher priority. Its wait is armed, or kept
// alive by its connection.
func (l *Locks) enqueue(w *lockItem) {
	k := w.k
	w.waiting = true
	if w.cmd.byPriority() {
		w.prio = w.cmd.Rcount
	}
	at := k.wait.tail
	for at != nil && at.prio < w.prio {
		at = at.prev
	}
	k.wait.insertAfter(at, w)
	if k.wait.n == 1 {
		k.db.waited.push((*waitedKey)(k))
	}
	k.db.st.WaitCount++
	r := l.owner(w.owner)
	r.waiters++
	w.waitsCounted = true
	if r.gone {
		l.orphans++
	}
	if w.cmd.waitKept() && !r.gone {
		l.keep(w)
	} else {
		l.dl.add(w, dueAt(w.arrived, w.cmd.waitSpan()))
	}
}

// unqueue takes waiter w off its queue, its deadline and keep list and its
// owner's count.
func (l *Locks) unqueue(w *lockItem) {
	k := w.k
	k.wait.remove(w)
	if k.wait.n == 0 {
		k.db.waited.remove((*waitedKey)(k))
	}
	k.db.st.WaitCount--
	l.dl.remove(w)
	l.unkeep(w)
	if w.waitsCounted {
		w.waitsCounted = false
		r := l.owners[w.owner]
		r.waiters--
		if r.gone {
			l.orphans--
		}
		l.forget(r)
	}
	w.waiting = false
}

// wake grants k's waiters, head first, while the grant rule admits them. A
// waiter whose LockId holds the key by then is taken as a reentry.
func (l *Locks) wake(k *lockKey, now int64) {
	if k.lflags&lfWaits != 0 && l.cfg.keyspace != nil && l.cfg.keyspace.Has(k.db.id, unsafeBytes(k.db.wnames[k]), now/1e6) {
		return // its waiters wait for the keyspace's key (locks_named.go): KeyGone wakes them
	}
	for w := k.wait.head; w != nil; w = k.wait.head {
		if !admits(k, &w.cmd) {
			return
		}
		l.unqueue(w)
		var data []byte
		if w.hasData {
			data = w.data
		}
		c := w.cmd
		if h := k.find(c.LockID); h != nil {
			// Its LockId took the key meanwhile: it is a reentry (or an
			// Update) now.
			l.relock(w.owner, h, &c, data, now)
			l.freeItem(w)
			continue
		}
		l.grant(w.owner, k, &c, data, w, w.arrived, now)
	}
}

// timedOut answers waiter w, due, TIMEOUT; with WaitReverses its
// request is then run again on the reversed key.
func (l *Locks) timedOut(w *lockItem, now int64) {
	k := w.k
	l.unqueue(w)
	k.db.st.TimeoutedCount++
	l.reply(w.owner, &w.cmd, LockTimeout, w.cmd.LockID, k.levels, 0, l.current(k))
	l.settle(k)
	if w.cmd.waitReverses() {
		c := w.cmd
		c.Key = reversed(c.Key)
		c.plainWait()
		var data []byte
		if w.hasData {
			data = w.data
		}
		l.lock(w.owner, &c, data, now)
	}
	l.freeItem(w)
}

// expired ends holder h, due: the EXPRIED push, its stage-3 EXECUTEs, the
// wake-up of waiters, and with HoldReverses its request again on the
// reversed key.
func (l *Locks) expired(h *lockItem, now int64) {
	k := h.k
	l.removeHolder(h)
	k.db.st.ExpiredCount++
	empty := k.hold.n == 0 && k.wait.n == 0
	var v, gone []byte
	if !empty {
		v = l.current(k)
	} else if l.KeepGone {
		gone = l.current(k)
	}
	l.out = append(l.out, LockReply{
		Owner: h.owner, Kind: KindLock, RequestID: h.cmd.RequestID, Result: LockExpried, DB: k.db.id,
		LockID: h.cmd.LockID, Key: k.key, Lcount: uint16(k.levels), Count: h.cmd.Count, Rcount: h.cmd.Rcount,
		Value: v, Gone: gone,
	})
	l.fire(h, stageExpired, empty)
	l.wake(k, now)
	l.settle(k)
	if h.cmd.holdReverses() {
		c := h.cmd
		c.Key = reversed(c.Key)
		c.holdAsWait()
		l.lock(h.owner, &c, nil, now)
	}
	l.freeItem(h)
}

// fire appends the EXECUTEs of stage attached to holder h, which has just
// been released fully (or expired), and drops the others. They run only if
// the latest frame on h had flag 0x20, and those with PROCESS_FIRST_OR_LAST
// only if the key is empty.
func (l *Locks) fire(h *lockItem, stage uint8, empty bool) {
	b := h.execs
	h.execs = h.execs[:0]
	if !h.dataFrame {
		return
	}
	for len(b) >= 6 {
		n := int(binary.LittleEndian.Uint32(b[2:]))
		if b[0] == stage && (b[1] == 0 || empty) {
			l.ex = append(l.ex, Exec{Owner: h.owner, DB: h.k.db.id, Frame: l.save(b[6 : 6+n])})
		}
		b = b[6+n:]
	}
}

// unlock runs Unlock c from o. It reports whether a tree-unlock chain goes
// on, with c set to the next step.
func (l *Locks) unlock(o Owner, c *LockCommand, now int64) bool {
	if c.DB > MaxLockDB || l.dbs[c.DB] == nil {
		l.reply(o, c, LockUnknownDB, c.LockID, 0, 0, nil)
		return false
	}
	d := l.dbs[c.DB]
	k := l.live(d, c.Key)
	if k == nil {
		d.st.UnlockErrorCount++
		l.reply(o, c, LockUnlockError, c.LockID, 0, 0, nil)
		return false
	}
	h := k.find(c.LockID)
	if h == nil {
		if c.cancels() {
			if w := k.findWaiter(c.LockID); w != nil {
				l.unqueue(w)
				d.st.UnLockCount++
				v := l.current(k)
				l.reply(o, c, LockLockedError, c.LockID, k.levels, 0, v)
				l.reply(w.owner, &w.cmd, LockUnlockError, w.cmd.LockID, k.levels, 0, v)
				l.settle(k)
				l.freeItem(w)
				return false
			}
		}
		switch {
		case k.hold.head == nil:
			d.st.UnlockErrorCount++
			l.reply(o, c, LockUnlockError, c.LockID, 0, 0, l.current(k))
			return false
		case !c.unlocksHead() && c.cancels():
			d.st.UnlockErrorCount++
			l.reply(o, c, LockUnlockError, c.LockID, k.levels, 0, l.current(k))
			return false
		case !c.unlocksHead():
			d.st.UnlockErrorCount++
			l.reply(o, c, LockUnownError, c.LockID, k.levels, 0, l.current(k))
			return false
		}
		h = k.hold.head
		hc := &h.cmd
		c.LockID = hc.LockID
		c.copyTimes(hc)
		c.Count, c.Rcount = hc.Count, hc.Rcount
	}
	return l.unhold(o, h, c, now)
}

// findWaiter returns the first waiter of k with LockId id, or nil.
func (k *lockKey) findWaiter(id [16]byte) *lockItem {
	for w := k.wait.head; w != nil; w = w.next {
		if w.cmd.LockID == id {
			return w
		}
	}
	return nil
}
