package store_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/store"
)

// incrState is the record a replicated INCR of key leaves: one holder under the key's own
// LockId that never expires and persists at once, and a NUMBER value.
func incrState(ks *store.KeyState, key uint32, n int64, start int64) {
	ks.DB = 0
	ks.Key = [16]byte{}
	binary.LittleEndian.PutUint32(ks.Key[:], key)
	ks.Value = binary.LittleEndian.AppendUint64(append(ks.Value[:0], 10, 0, 0, 0, store.DataSet, 0x10), uint64(n))
	ks.Holders = append(ks.Holders[:0], store.HolderState{LockID: ks.Key, Levels: 1, Count: 0,
		Hold: store.Hold{N: 0xFFFF, Opts: store.HoldNever | store.HoldPersistNow}, Start: start})
}

// BenchmarkRestore: a follower applying replicated INCRs of 100,000 random keys, a raft
// entry (ForgetJournal) every 290 records, as in make bench-cluster.
func BenchmarkRestore(b *testing.B) {
	keys, batch := 100000, 290
	if testing.Short() {
		keys = 1000 // in cache: the instructions alone
	}
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
	now := int64(1e18)
	var ks store.KeyState
	for i := range uint32(keys) {
		incrState(&ks, i, 1, now)
		l.Restore(&ks, now)
	}
	l.ForgetJournal()
	rnd := rand.New(rand.NewPCG(1, 2))
	names := make([]store.KeyName, batch)
	pick := func() {
		for j := range names {
			names[j] = store.KeyName{}
			binary.LittleEndian.PutUint32(names[j].Key[:], uint32(rnd.IntN(keys)))
		}
	}
	for _, warm := range []bool{false, true} {
		b.Run(map[bool]string{false: "cold", true: "warmed"}[warm], func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%batch == 0 {
					pick()
					if warm {
						l.Warm(names)
					}
				}
				incrState(&ks, binary.LittleEndian.Uint32(names[i%batch].Key[:]), int64(i), now)
				l.Restore(&ks, now)
				if i++; i%batch == 0 {
					l.ForgetJournal()
				}
			}
		})
	}
}

// BenchmarkJournal: a leader's turn of 290 INCR-like SETs (Update with a data record, never
// expiring, persisting at once) on keys picked at random among 100,000, then the journal of
// the turn encoded as log records; the figure is the journal's alone, per write.
func BenchmarkJournal(b *testing.B) {
	const keys, batch = 100000, 290
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9})
	now := int64(1e18)
	set := func(key uint32, n int64) {
		var w wc
		w.Kind = store.KindLock
		binary.LittleEndian.PutUint32(w.Key[:], key)
		w.LockID = w.Key
		w.Flag = 0x20 | 0x02                      // a data record; an Update
		w.Expried, w.ExpriedFlag = 0xFFFF, 0x4100 // never expires (keeping the expiry); persists at once
		w.Data = rec(store.DataSet, 0x01, i64(n))
		c := w.cmd()
		l.Do(1, &c, now, nil, nil)
	}
	for i := range uint32(keys) {
		set(i, 1)
	}
	var buf []byte
	emit := func(ks *store.KeyState) { buf = aof.AppendState(buf, ks) }
	l.Journal(now, emit)
	rnd := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%batch == 0 {
			b.StopTimer()
			for j := range batch {
				set(uint32(rnd.IntN(keys)), int64(j))
			}
			buf = buf[:0]
			b.StartTimer()
			l.Journal(now, emit)
		}
		i++
	}
}
