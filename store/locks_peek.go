package store

// This file is what the status page (/ui) reads of one lock key: its holders with their
// fencing tokens and leases, its waiters, its value. A look at one key, in time bounded by
// the holders and waiters it lists: never a walk of the store.

// HolderPeek is one holder of a key as Peek reports it.
type HolderPeek struct {
	LockID [16]byte
	Token  uint64 // its fencing token
	TTL    int64  // milliseconds until it expires at now; -1: it does not (or is kept alive by its connection)
	Levels uint8
	Client uint64 // the cluster-wide client id that made it, 0 if none
}

// KeyPeek is one lock key as Peek reports it.
type KeyPeek struct {
	Holders     []HolderPeek // oldest first, at most what Peek was asked for
	MoreHolders int          // holders not listed
	Waiters     int          // requests queued on it
	LongestWait int64        // nanoseconds the longest waiter of the first peekWaiters has waited
	Value       []byte       // its value record (a view valid until the next call that changes the Locks), nil if none
}

// peekWaiters is how many of a key's waiters Peek looks at for the longest wait.
const peekWaiters = 64

// Peek appends to hs (up to maxHolders) the holders of key in db and reports its waiters
// and value at now; false if the key does not exist (no holder, waiter or value).
func (l *Locks) Peek(db uint8, key [16]byte, now int64, hs []HolderPeek, maxHolders int) (KeyPeek, bool) {
	k := l.key(db, key)
	if k == nil {
		return KeyPeek{Holders: hs}, false
	}
	p := KeyPeek{Holders: hs, Waiters: k.wait.n}
	for h := k.hold.head; h != nil; h = h.next {
		if len(p.Holders)-len(hs) >= maxHolders {
			p.MoreHolders++
			continue
		}
		ttl := int64(-1)
		if h.dl.scheduled() {
			if at := h.cmd.ExpireAt; at != 0 {
				ttl = max(at-now/1e6, 0)
			} else {
				ttl = max(h.dl.at-now, 0) / 1e6
			}
		}
		p.Holders = append(p.Holders, HolderPeek{LockID: h.cmd.LockID, Token: h.token, TTL: ttl, Levels: h.levels, Client: h.cmd.Client})
	}
	n := 0
	for w := k.wait.head; w != nil && n < peekWaiters; w = w.next {
		p.LongestWait = max(p.LongestWait, now-w.arrived)
		n++
	}
	if k.has {
		p.Value = k.value
	}
	return p, true
}
