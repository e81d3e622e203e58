package loop

import (
	"encoding/hex"
	"strconv"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// This file is keyspace notifications (notify-keyspace-events), published through pub/sub
// (pubsub.go) by the change sites: their classes, events and names.

// notifyFlags are notify-keyspace-events' classes, as Redis's.
type notifyFlags uint32

// The classes, as Redis's letters, and tallyd's own: L, slock's locks.
const (
	nGeneric  notifyFlags = 1 << iota // g
	nString                           // $
	nList                             // l
	nSet                              // s
	nHash                             // h
	nZset                             // z
	nExpired                          // x
	nEvicted                          // e
	nStream                           // t
	nModule                           // d
	nNew                              // n
	nKeyMiss                          // m
	nKeyspace                         // K
	nKeyevent                         // E
	nLock                             // L: tallyd's lock and unlock events (not in A)
	nAll      = nGeneric | nString | nList | nSet | nHash | nZset | nExpired | nEvicted | nStream | nModule
)

// classLetters are the classes in the order CONFIG GET writes them.
var classLetters = []struct {
	f notifyFlags
	c byte
}{{nGeneric, 'g'}, {nString, '$'}, {nList, 'l'}, {nSet, 's'}, {nHash, 'h'}, {nZset, 'z'},
	{nExpired, 'x'}, {nEvicted, 'e'}, {nStream, 't'}, {nModule, 'd'}, {nNew, 'n'}}

// parseNotify parses a notify-keyspace-events value; false if it has a character that is no
// class.
func parseNotify(v string) (notifyFlags, bool) {
	var f notifyFlags
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case 'A':
			f |= nAll
		case 'K':
			f |= nKeyspace
		case 'E':
			f |= nKeyevent
		case 'm':
			f |= nKeyMiss
		case 'L':
			f |= nLock
		default:
			ok := false
			for _, l := range classLetters {
				if l.c == c {
					f |= l.f
					ok = true
				}
			}
			if !ok {
				return 0, false
			}
		}
	}
	return f, true
}

// String is the value as CONFIG GET answers it, normalised as Redis 7.0 does (A for all
// its classes, then K, E, m); tallyd's L follows the classes.
func (f notifyFlags) String() string {
	var b []byte
	if f&nAll == nAll {
		b = append(b, 'A')
	} else {
		for _, l := range classLetters {
			if f&l.f != 0 {
				b = append(b, l.c)
			}
		}
	}
	if f&nLock != 0 {
		b = append(b, 'L')
	}
	if f&nKeyspace != 0 {
		b = append(b, 'K')
	}
	if f&nKeyevent != 0 {
		b = append(b, 'E')
	}
	if f&nKeyMiss != 0 {
		b = append(b, 'm')
	}
	return string(b)
}

// notifyErr is Redis 7.0's CONFIG SET error for a notify-keyspace-events value.
const notifyErr = "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."

// notifying reports whether an event of class would be published at all: the class is on,
// one of K and E is, and someone listens.
func (ps *pubsub) notifying(class notifyFlags) bool {
	f := ps.notify
	if f&class == 0 || f&(nKeyspace|nKeyevent) == 0 {
		return false
	}
	if r := ps.h.pubsubRole(); r != psSingle {
		// In a cluster the leader publishes every change's events, for the other members'
		// subscribers too; a follower publishes only what the leader's entries carry (relayed).
		return r == psLeader
	}
	return len(ps.channels) > 0 || len(ps.patIdx) > 0
}

// notifyKey publishes event on key of db, of class, as Redis's notifyKeyspaceEvent: on
// __keyspace@<db>__:<key> the event, on __keyevent@<db>__:<event> the key. Every change
// site calls it once the change is made (GETDEL: del, nGeneric; GETEX: expire or persist,
// nGeneric, as Redis's); it costs nothing while notifications are off or nobody listens.
func (ps *pubsub) notifyKey(db uint8, key []byte, class notifyFlags, event string) {
	if !ps.notifying(class) {
		return
	}
	ps.ev = append(ps.ev[:0], event...)
	if ps.notify&nKeyspace != 0 {
		ps.ch = append(ps.ch[:0], "__keyspace@"...)
		ps.ch = strconv.AppendUint(ps.ch, uint64(db), 10)
		ps.ch = append(append(ps.ch, "__:"...), key...)
		ps.publish(ps.ch, ps.ev)
	}
	if ps.notify&nKeyevent != 0 {
		ps.ch = append(ps.ch[:0], "__keyevent@"...)
		ps.ch = strconv.AppendUint(ps.ch, uint64(db), 10)
		ps.ch = append(append(ps.ch, "__:"...), event...)
		ps.publish(ps.ch, key)
	}
}

// lockKeyName is the name a lock key has in notifications: the text name of a key whose
// LockKey is a short text name's (1 to 15 bytes, right-aligned after zero bytes), else its 32
// hex digits (a binary key, or a long text name, which is hashed).
func lockKeyName(dst []byte, key [16]byte) []byte {
	i := 0
	for i < len(key) && key[i] == 0 {
		i++
	}
	if i > 0 {
		return append(dst, key[i:]...)
	}
	return hex.AppendEncode(dst, key[:])
}

// notifyLock publishes a lock event (class L) on a lock key.
func (ps *pubsub) notifyLock(db uint8, key [16]byte, event string) {
	if !ps.notifying(nLock) {
		return
	}
	ps.name = lockKeyName(ps.name[:0], key)
	ps.notifyKey(db, ps.name, nLock, event)
}

// notifyKV publishes the events of a key/value command's reply r (one key of it): Redis's
// event names, set (SET, SETEX, SETNX, GETSET, MSET...) then expire when it set an expiry,
// incrby for the whole INCR family, append, del (DEL, DELEX, DELIFEQ, GETDEL), expire (del for a
// time past), persist, and GETEX's expire, persist or del.
func (ps *pubsub) notifyKV(cs *conn, r *slock.LockReply) {
	if ps.notify&(nKeyspace|nKeyevent) == 0 {
		return // (notifyKey checks the rest)
	}
	sc := cs.slock
	kv := &sc.req.KV
	name, db := sc.kvName, r.DB
	if !kv.Applied(r.Result) {
		return
	}
	switch kv.Op {
	case rediscmd.OpSet, rediscmd.OpGetSet, rediscmd.OpSetNX:
		if !rediscmd.HasValue(r.Value) {
			ps.notifyKey(db, name, nNew, "new")
		}
		ps.notifyKey(db, name, nString, "set")
		if kv.ExpireAt != 0 && !kv.KeepTTL || sc.kvPast {
			ps.notifyKey(db, name, nGeneric, "expire")
		}
		if sc.kvPast { // EXAT or PXAT past: the key is gone at once, where Redis's goes at its next look
			ps.notifyKey(db, name, nExpired, "expired")
		}
	case rediscmd.OpIncr:
		ps.notifyKey(db, name, nString, "incrby")
	case rediscmd.OpAppend:
		if !rediscmd.HasValue(r.Value) {
			ps.notifyKey(db, name, nNew, "new")
		}
		ps.notifyKey(db, name, nString, "append")
	case rediscmd.OpDel, rediscmd.OpDelEx, rediscmd.OpGetDel:
		if r.Result == slock.ResultOK {
			ps.notifyKey(db, name, nGeneric, "del")
		}
	case rediscmd.OpGetEx: // as Redis 7's GETEX: del for a time past, else persist or expire
		switch {
		case sc.kvPast:
			ps.notifyKey(db, name, nGeneric, "del")
		case kv.Persist:
			ps.notifyKey(db, name, nGeneric, "persist")
		default:
			ps.notifyKey(db, name, nGeneric, "expire")
		}
	case rediscmd.OpExpire:
		if sc.kvPast {
			ps.notifyKey(db, name, nGeneric, "del")
		} else {
			ps.notifyKey(db, name, nGeneric, "expire")
		}
	case rediscmd.OpPersist:
		ps.notifyKey(db, name, nGeneric, "persist")
	}
}

// notifyHash publishes the events of a hash write that succeeded: hset, hincrby, hdel (when
// it removed a field, n) and del when the last field went (gone).
func (ps *pubsub) notifyHash(db uint8, h *rediscmd.Hash, n int64, gone bool) {
	switch h.Op {
	case rediscmd.HashSet:
		ps.notifyKey(db, h.Key, nHash, "hset")
	case rediscmd.HashIncr:
		ps.notifyKey(db, h.Key, nHash, "hincrby")
	case rediscmd.HashDel:
		if n > 0 {
			ps.notifyKey(db, h.Key, nHash, "hdel")
		}
		if gone {
			ps.notifyKey(db, h.Key, nGeneric, "del")
		}
	}
}

// notifyExpiry publishes an expiry the store reported: expired (class x) for a key whose value
// went with it, named by its value record, as Redis's; else lock-expired (class L) for a lock.
func (ps *pubsub) notifyExpiry(r *store.LockReply) {
	if len(ps.muted) > 0 {
		w := watchKey{r.DB, r.Key}
		if _, ok := ps.muted[w]; ok {
			delete(ps.muted, w)
			return
		}
	}
	if r.Gone != nil {
		name, ok := rediscmd.KeyName(r.Gone)
		if !ok {
			ps.name = lockKeyName(ps.name[:0], r.Key)
			name = ps.name
		}
		ps.notifyKey(r.DB, name, nExpired, "expired")
		return
	}
	ps.notifyLock(r.DB, r.Key, "lock-expired")
}

// notifyLockReply publishes a lock or unlock (class L) that a LOCK or UNLOCK (text or binary,
// a WILL, an EXECUTE) made.
func (ps *pubsub) notifyLockReply(r *store.LockReply) {
	if r.Result != store.LockOK || !ps.notifying(nLock) {
		return
	}
	if r.Kind == store.KindUnlock {
		ps.notifyLock(r.DB, r.Key, "unlock")
	} else {
		ps.notifyLock(r.DB, r.Key, "lock")
	}
}

// kvPast reports whether kv, a key/value command, deletes its key by a time already past:
// EXPIRE and its kin to a time past, SET or GETEX with EXAT or PXAT past.
func kvPast(kv *rediscmd.KV, now int64) bool {
	switch kv.Op {
	case rediscmd.OpExpire:
		return kv.When <= now/1e6
	case rediscmd.OpSet:
		return kv.Frame.Expried == 0 && kv.ExpireAt == 0 && !kv.KeepTTL
	case rediscmd.OpGetEx:
		return kv.Frame.Type != 0 && !kv.Persist && kv.ExpireAt == 0
	}
	return false
}

// muteExpiry keeps the store's expiry of key, which a command is deleting by a time past, from
// being published as expired: the command publishes its own event. Each tick forgets what
// is left (the expiry comes at the next advance).
func (ps *pubsub) muteExpiry(db uint8, key [16]byte) {
	if ps.muted == nil {
		ps.muted = make(map[watchKey]struct{})
	}
	ps.muted[watchKey{db, key}] = struct{}{}
}
