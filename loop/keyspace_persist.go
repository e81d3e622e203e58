package loop

import (
	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/store"
)

// The keyspace's state (store.Keyspace: Redis data in a family of its own, issue 32) in
// everything that carries the store besides the journal: the log's replay and rewrite
// (persist.go), SNAPSHOT's file (backup.go), the raft snapshot (cluster_snap.go) and a
// follower's install of one (cluster_install.go), restore. Its records travel as runs of
// aof kind 6 (aof.AppendKeyspace), beside the Locks' key states, and are applied with
// Keyspace.Apply. The journal of its changes (Keyspace.Log, aof.AppendKeyspace into the
// log and into raft proposals) is the Redis path's.

// ksApplier applies keyspace records read back to a keyspace, counting those it refused
// (a record that does not apply: a log written by a keyspace with a bug, never by a
// damaged file, whose records are checked before).
type ksApplier struct {
	ks    *store.Keyspace
	errs  int
	first error
}

func (a *ksApplier) apply(r *store.Record) {
	if err := a.ks.Apply(r); err != nil {
		if a.errs++; a.first == nil {
			a.first = err
		}
	}
}

// ksRun gathers keyspace records as a backup or a rewrite emits them, then wraps them as
// runs (aof.AppendKeyspace) into a buffer.
type ksRun struct {
	recs []byte
	emit func(*store.Record) // add, bound once: passing it allocates nothing
}

func (k *ksRun) add(r *store.Record) { k.recs = r.Append(k.recs) }

// bind sets emit (once).
func (k *ksRun) bind() func(*store.Record) {
	if k.emit == nil {
		k.emit = k.add
	}
	return k.emit
}

// flush appends the records gathered to dst as runs, and forgets them.
func (k *ksRun) flush(dst []byte) []byte {
	if len(k.recs) == 0 {
		return dst
	}
	dst = aof.AppendKeyspace(dst, k.recs)
	k.recs = k.recs[:0]
	if cap(k.recs) > keepOut {
		k.recs = nil
	}
	return dst
}

// ksKeys counts the keys among a backup's records (a RecSet or a RecHSet starts each key).
func ksKeys(r *store.Record) bool { return r.Op == store.RecSet || r.Op == store.RecHSet }

// famSave is a backup of both families (SNAPSHOT's file, the raft snapshot) begun at one
// instant: the Locks' BeginSave and the keyspace's in the same turn, then stepped the
// Locks' first, then the keyspace's, each step bounded (saveStep keys, ~256 KiB). The
// keyspace's records (those its copy-on-write emits between steps too) gather in ks until
// the caller puts them in its file (ksRun.flush).
type famSave struct {
	lEpoch, kEpoch uint32 // the two saves' numbers: another means dropped (SaveEpoch)
	locksDone      bool
	ks             ksRun
	keys           uint64 // keyspace keys emitted
}

// famSaveBegin begins fs at now (Unix ns), the Locks' key states going to emit.
func (s *Server) famSaveBegin(fs *famSave, now int64, emit func(*store.KeyState)) {
	*fs = famSave{ks: ksRun{recs: fs.ks.recs[:0]}}
	s.st.locks.BeginSave(now, emit)
	fs.lEpoch = s.st.locks.SaveEpoch()
	ks := s.st.store.Keyspace
	ks.BeginSave(now/1e6, func(r *store.Record) { // the keyspace's clock is in ms
		if ksKeys(r) {
			fs.keys++
		}
		fs.ks.add(r)
	})
	fs.kEpoch = ks.SaveEpoch()
}

// famSaveLost reports whether fs was dropped: another save began, or the store was rebuilt
// (a member that stopped leading, a snapshot installed).
func (s *Server) famSaveLost(fs *famSave) bool {
	return !fs.locksDone && s.st.locks.SaveEpoch() != fs.lEpoch || s.st.store.Keyspace.SaveEpoch() != fs.kEpoch
}

// famSaveStep encodes the next step of fs and reports whether both families are done.
func (s *Server) famSaveStep(fs *famSave) bool {
	if !fs.locksDone {
		fs.locksDone = s.st.locks.SaveNext(saveStep)
		return false
	}
	return s.st.store.Keyspace.SaveNext(saveStep)
}

// famSaveEnd ends fs's saves if they are still its own.
func (s *Server) famSaveEnd(fs *famSave) {
	if !fs.locksDone && s.st.locks.SaveEpoch() == fs.lEpoch {
		s.st.locks.EndSave()
	}
	if ks := s.st.store.Keyspace; ks.SaveEpoch() == fs.kEpoch {
		ks.EndSave()
	}
}
