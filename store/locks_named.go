package store

import "fmt"

// The "Locks and DEL" link (docs/redis.md "Locks and DEL"; docs/architecture.md "How the next
// stage wires it"): once Redis data lives in the keyspace by name and slock's locks in the
// Locks by LockKey, the rule for a name both touch needs each family to ask the other.
//
//   - Case 2, a key held by a LOCK under another LockId: the Locks keep, per database, the
//     names of the keys a holder holds under a LockId other than the key (a LOCK; a SETNX with
//     CLIENT SLOCK ON), a map filled on grant and emptied on the last such release, consulted
//     only while it is not empty (LockedName: a Redis write to such a name answers as case 2
//     says, and its holder may DEL it). The name is the command's (DoNamed, which a text
//     LOCK calls) or, for a binary Lock (or a LOCK restored from the log), recovered
//     from the LockKey: rediscmd.KeyID pads a name of 1 to 15 bytes whose first byte is not
//     0 on the left with zero bytes, so a LockKey whose first byte is 0 is that name (16 zero
//     bytes: the empty name). A longer name is hashed, which no binary client reaches; a
//     text LOCK gives it.
//   - Case 3, a LOCK on a name the keyspace has waits: the Locks ask the keyspace (Has)
//     before they grant a key no one holds; the LOCK is then refused as a held key refuses
//     it (TIMEOUT at once with TIMEOUT 0, else queued), and its key listed in waitNamed by
//     name, until Store.KeyGone (the keyspace's key deleted, expired or flushed) wakes it.

// The link's flags of a key (lockKey.lflags).
const (
	lfNamed = 1 << iota // listed by its long name in named (and lnames)
	lfWaits             // its waiters wait for the keyspace's key of its name: in waitNamed (and wnames)
)

// DoNamed is Do of a command from a text client that knows the key's name: a LOCK granted
// under another LockId is then found by it (LockedName) even if it is long (hashed into the
// LockKey). name is read during the call only.
func (l *Locks) DoNamed(owner Owner, cmd *LockCommand, name []byte, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec) {
	l.name = name
	r, e := l.Do(owner, cmd, now, replies, execs)
	l.name = nil
	return r, e
}

// heldByOther notes that k is now held under another LockId.
func (l *Locks) heldByOther(k *lockKey) {
	if k.gen == k.db.gen {
		k.db.nothers++
	}
}

// notHeldByOther notes that k is no longer held under another LockId.
func (l *Locks) notHeldByOther(k *lockKey) {
	if k.gen == k.db.gen {
		k.db.nothers--
	}
	if k.lflags&lfNamed != 0 {
		l.unnameKey(k)
	}
}

// nameKey lists k, held under another LockId, by its long name (a text LOCK's: a short name
// is its LockKey, which finds it).
func (l *Locks) nameKey(k *lockKey, name []byte) {
	d := k.db
	if k.gen != d.gen {
		return // flushed
	}
	if d.named == nil {
		d.named, d.lnames = make(map[string]*lockKey), make(map[*lockKey]string)
	}
	n := string(name)
	d.named[n], d.lnames[k] = k, n
	k.lflags |= lfNamed
}

// unnameKey takes k out of its database's named keys.
func (l *Locks) unnameKey(k *lockKey) {
	d := k.db
	if n, ok := d.lnames[k]; ok {
		delete(d.lnames, k)
		if d.named[n] == k {
			delete(d.named, n)
		}
		if len(d.lnames) == 0 {
			d.named, d.lnames = nil, nil
		}
	}
	k.lflags &^= lfNamed
}

// renamed rebuilds d's part of the link after a flush set its keys aside but waited, the
// keys of the new generation.
func (l *Locks) renamed(d *lockDB, waited []*lockKey) {
	lnames, wnames := d.lnames, d.wnames
	d.nothers, d.named, d.waitNamed, d.lnames, d.wnames = 0, nil, nil, nil, nil
	for _, k := range waited {
		if k.others > 0 {
			d.nothers++
		}
		if n, ok := lnames[k]; ok && k.others > 0 {
			if d.named == nil {
				d.named, d.lnames = make(map[string]*lockKey), make(map[*lockKey]string)
			}
			d.named[n], d.lnames[k] = k, n
		} else {
			k.lflags &^= lfNamed
		}
		if n, ok := wnames[k]; ok {
			if d.waitNamed == nil {
				d.waitNamed, d.wnames = make(map[string]*lockKey), make(map[*lockKey]string)
			}
			d.waitNamed[n], d.wnames[k] = k, n
		} else {
			k.lflags &^= lfWaits
		}
	}
}

// keyOfName returns the key named name in d held under another LockId, if any: a short
// name's by its LockKey, a long one's by name.
func (d *lockDB) keyOfName(name []byte) *lockKey {
	if d.nothers == 0 {
		return nil
	}
	var k *lockKey
	if len(name) >= 16 || len(name) > 0 && name[0] == 0 {
		k = d.named[string(name)]
	} else {
		var key [16]byte
		copy(key[16-len(name):], name)
		k = d.keys[key]
	}
	if k == nil || k.others == 0 {
		return nil
	}
	return k
}

// shortName returns the name whose LockKey (rediscmd.KeyID) key is, if it is a short name's.
func shortName(key *[16]byte) ([]byte, bool) {
	if key[0] != 0 {
		return nil, false // a hashed name's (0x80 or more), or a binary client's own key
	}
	for i := 1; i < 16; i++ {
		if key[i] != 0 {
			return key[i:], true
		}
	}
	return key[16:], true // the empty name
}

// cmdName returns c's key name: DoNamed's, or the one its Key tells.
func (l *Locks) cmdName(c *LockCommand) ([]byte, bool) {
	if l.name != nil {
		return l.name, true
	}
	return shortName(&c.Key)
}

// waitKeyspace lists c's key, if c is queued on it, as waiting for the keyspace's key name.
func (l *Locks) waitKeyspace(d *lockDB, c *LockCommand, name []byte) {
	k := l.live(d, c.Key)
	if k == nil || k.wait.n == 0 || k.lflags&lfWaits != 0 {
		return
	}
	if d.waitNamed == nil {
		d.waitNamed, d.wnames = make(map[string]*lockKey), make(map[*lockKey]string)
	}
	n := string(name)
	d.waitNamed[n], d.wnames[k] = k, n
	k.lflags |= lfWaits
}

// unwaitKeyspace takes k out of its database's keys waiting for the keyspace.
func (l *Locks) unwaitKeyspace(k *lockKey) {
	d := k.db
	if n, ok := d.wnames[k]; ok {
		delete(d.wnames, k)
		if d.waitNamed[n] == k {
			delete(d.waitNamed, n)
		}
		if len(d.wnames) == 0 {
			d.waitNamed, d.wnames = nil, nil
		}
	}
	k.lflags &^= lfWaits
}

// LockHolder is who holds a key under a LockId of its own.
type LockHolder struct {
	LockID [16]byte
	Owner  Owner  // the connection that last locked it
	Client uint64 // its cluster-wide client id (LockCommand.Client)
}

// LockedName reports whether a holder holds the key named name in db under a LockId other
// than the key (a LOCK: the "Locks and DEL" rule's case 2), and the oldest such holder.
// O(1), and a map lookup only while some key of db is so held.
func (l *Locks) LockedName(db uint8, name []byte) (LockHolder, bool) {
	if db > MaxLockDB {
		return LockHolder{}, false
	}
	d := l.dbs[db]
	if d == nil {
		return LockHolder{}, false
	}
	k := d.keyOfName(name)
	if k == nil {
		return LockHolder{}, false
	}
	for h := k.hold.head; h != nil; h = h.next {
		if h.cmd.LockID != k.key {
			return LockHolder{LockID: h.cmd.LockID, Owner: h.owner, Client: h.cmd.Client}, true
		}
	}
	return LockHolder{}, false
}

// NamedLocks returns how many keys of db a LOCK holds under another LockId (LockedName has
// nothing to find while it is 0).
func (l *Locks) NamedLocks(db uint8) int {
	if db > MaxLockDB || l.dbs[db] == nil {
		return 0
	}
	return l.dbs[db].nothers
}

// WaitsOnKeyspace reports whether any LOCK waits for a keyspace key to go (KeyGone has
// something to do).
func (l *Locks) WaitsOnKeyspace() bool {
	for _, d := range l.dbs {
		if d != nil && len(d.waitNamed) > 0 {
			return true
		}
	}
	return false
}

// LockedName is the Locks' LockedName: the keyspace's Redis writes ask it (case 2).
func (s *Store) LockedName(db uint8, name []byte) (LockHolder, bool) {
	return s.Locks.LockedName(db, name)
}

// KeyGone tells the Locks that the keyspace's key name of db is gone (deleted, expired,
// flushed) at now (Unix ns): the LOCKs waiting for it (case 3) are granted, head first, as
// a release would grant them. Their replies are appended to replies (and the EXECUTEs of
// their data to execs), as Locks.Do does. Cheap when no LOCK waits (WaitsOnKeyspace).
func (s *Store) KeyGone(db uint8, name []byte, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec) {
	l := s.Locks
	if db > MaxLockDB || l.dbs[db] == nil || len(l.dbs[db].waitNamed) == 0 {
		return replies, execs
	}
	k := l.dbs[db].waitNamed[string(name)]
	if k == nil || k.levels != 0 {
		return replies, execs
	}
	l.unwaitKeyspace(k)
	l.begin(replies, execs)
	l.wake(k, now)
	l.settle(k)
	return l.end()
}

// Has reports whether db has a key named name at now (Unix ms), without the side effects of
// a lookup (a key past its time counts as gone; nothing is deleted, recorded or noted).
func (ks *Keyspace) Has(db uint8, name []byte, now int64) bool {
	d := ks.dbs[db]
	if d == nil || d.n == 0 || len(name) > MaxKeyLen {
		return false
	}
	_, s, _ := d.find(name, ks.hash(name))
	if s < 0 {
		return false
	}
	at := d.expiryOf(s)
	return at == 0 || at > now
}

// checkNamed checks k's part in the "Locks and DEL" link (Check): its count of holders under
// another LockId, and its listings by name.
func checkNamed(d *lockDB, k *lockKey, old bool) error {
	var others uint32
	for h := k.hold.head; h != nil; h = h.next {
		if h.cmd.LockID != k.key {
			others++
		}
	}
	_, named := d.lnames[k]
	_, waits := d.wnames[k]
	switch {
	case others != k.others:
		return fmt.Errorf("store: lock key %x of db %d: %d holders under another LockId, %d counted", k.key, d.id, others, k.others)
	case old:
		return nil
	case named != (k.lflags&lfNamed != 0) || named && (others == 0 || k.key[0] == 0 || d.named[d.lnames[k]] != k):
		return fmt.Errorf("store: lock key %x of db %d: flags %#x, named %v %q (held by %d others)", k.key, d.id, k.lflags, named, d.lnames[k], others)
	case waits != (k.lflags&lfWaits != 0) || waits && d.waitNamed[d.wnames[k]] != k:
		return fmt.Errorf("store: lock key %x of db %d: flags %#x, waiting for the keyspace's %q", k.key, d.id, k.lflags, d.wnames[k])
	}
	return nil
}

// checkNamedDB checks d's count of keys held under another LockId and its listings.
func checkNamedDB(d *lockDB) error {
	n := 0
	for _, k := range d.keys {
		if k.others > 0 {
			n++
		}
	}
	if n != d.nothers {
		return fmt.Errorf("store: lock db %d: %d keys held under another LockId, %d counted", d.id, n, d.nothers)
	}
	if len(d.named) != len(d.lnames) || len(d.waitNamed) != len(d.wnames) {
		return fmt.Errorf("store: lock db %d: %d names of %d keys, %d waiting names of %d keys", d.id, len(d.named), len(d.lnames), len(d.waitNamed), len(d.wnames))
	}
	for k, n := range d.lnames {
		if d.named[n] != k || k.db != d || k.gen != d.gen {
			return fmt.Errorf("store: lock db %d: key %x listed as %q", d.id, k.key, n)
		}
	}
	for k, n := range d.wnames {
		if d.waitNamed[n] != k || k.db != d {
			return fmt.Errorf("store: lock db %d: key %x listed waiting for %q", d.id, k.key, n)
		}
	}
	return nil
}
