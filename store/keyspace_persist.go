package store

// The keyspace's part in what carries the store's state besides its log records (issue 32):
// a log rewrite's walk, and a keyspace rebuilt beside the one serving then swapped in (a
// follower installing a raft snapshot) or emptied (a member rebuilding from its raft log).

// ksWalk is a log rewrite's walk of the keyspace (BeginRewrite).
type ksWalk struct {
	on  bool
	db  int // the database being walked
	cur int // its slots still to walk; -1: from its end
	rec Record
	buf []byte
}

// BeginRewrite starts a walk of every key for a log rewrite: RewriteNext emits each key's
// records as the key is when the walk reaches it (not one instant: a rewrite's log has the
// changes made meanwhile after what it walked, as the Locks' SnapshotNext does). A walk in
// progress starts over. It runs beside a backup (BeginSave), which it does not disturb.
func (ks *Keyspace) BeginRewrite() {
	ks.rw = ksWalk{on: true, cur: -1, buf: ks.rw.buf[:0]}
}

// RewriteNext emits the records of up to n more keys, fewer once they take about
// saveStepBytes, and reports whether the walk is over. Each key is emitted whole (RecSet,
// or RecHSet and RecExpire, and RecFence), its expiry included even if past (a replay
// expires nothing; the key goes at the next Advance), so that the records of changes made
// to it before (appended to the new log before the walk reached it: an APPEND, an HSET
// that made it there) are overwritten. Every key present for the whole walk is emitted at
// least once (the SCAN guarantee); a key moved by a deletion may be emitted twice, which
// changes nothing. The caller must have written the records of every change made before
// the call (Log) where the walk's go: a record written after the walk's of its key would
// apply to the whole state again (an APPEND twice).
func (ks *Keyspace) RewriteNext(n int, emit func(*Record)) bool {
	w := &ks.rw
	if !w.on {
		return true
	}
	bytes := 0
	for {
		if w.db > MaxLockDB {
			w.on = false
			if cap(w.buf) > lockKeepBuf {
				w.buf = nil
			}
			return true
		}
		d := ks.dbs[w.db]
		if d == nil {
			w.db, w.cur = w.db+1, -1
			continue
		}
		if w.cur < 0 || w.cur > d.n {
			w.cur = d.n // from the end, or a flush (new arrays) or deletions meanwhile
		}
		if w.cur == 0 {
			w.db, w.cur = w.db+1, -1
			continue
		}
		if n == 0 || bytes >= saveStepBytes {
			return false
		}
		w.cur--
		bytes += ks.emitKey(d, w.cur, d.expiryOf(w.cur), &w.rec, &w.buf, emit)
		n--
	}
}

// StagingKeyspace returns an empty keyspace configured as s's, to restore a snapshot into
// a slice at a time beside the one serving (as StagingLocks), then SwapKeyspace it in.
func (s *Store) StagingKeyspace() *Keyspace { return NewKeyspace(s.Keyspace.cfg) }

// StagedKeyspaceBytes is what a staging keyspace takes so far (the memory budget counts it
// while it is built).
func StagedKeyspaceBytes(n *Keyspace) int64 {
	if n == nil {
		return 0
	}
	return n.Bytes()
}

// SwapKeyspace makes n, from StagingKeyspace and restored since, the keyspace in place of
// the one serving, whose keys go: s.Keyspace keeps its address (n must not be used
// after). O(watched keys): the keys being watched (WATCH) stay watched, each with a new
// version, as a change would give it; the watch versions, the expired count, and the
// records and events not yet taken (Log, Events) carry over; a backup begun on the old
// keyspace is over (Saving false, SaveEpoch 0, and a later one has a number no earlier
// one had), and so is a rewrite's walk (the log's new file must begin again: it was the
// old keys').
func (s *Store) SwapKeyspace(n *Keyspace) {
	old := s.Keyspace
	n.wseq = max(n.wseq, old.wseq)
	for _, id := range old.live {
		od := old.dbs[id]
		if len(od.watch) == 0 {
			continue
		}
		nd := n.db(id, true)
		nd.watch = od.watch
		for k, w := range od.watch {
			n.wseq++
			w.ver = n.wseq
			n.bytes += ksWatchCost + ksAlloc(len(k))
			if _, sl, _ := nd.find(unsafeBytes(k), n.hash(unsafeBytes(k))); sl >= 0 {
				nd.ent(sl).flags |= fWatched
			}
		}
	}
	n.expired += old.expired
	n.log, n.evs, n.evbuf = old.log, old.evs, old.evbuf // n's restore (Apply) noted none
	n.sv = ksSave{epoch: old.sv.epoch + 1, mark: n.sv.mark, partial: n.sv.partial}
	*old = *n
	*n = Keyspace{}
}

// ResetKeyspace empties the keyspace as New makes it, as SwapKeyspace with an empty one
// does (watched keys stay watched, with new versions): a member rebuilding its store from
// its raft log (ResetLocks) rebuilds the keyspace too.
func (s *Store) ResetKeyspace() { s.SwapKeyspace(s.StagingKeyspace()) }
