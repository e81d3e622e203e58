package store_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestSaveIsOneInstant: a backup encoded a key at a time (BeginSave, SaveNext) while random
// Locks, Unlocks (with SET and INCR records), expiries, disconnects, flushes, fences and
// restored records change the keys between its steps emits exactly what SnapshotAll emits at
// the instant it began: every key the log had then, with its state then, once; none made or
// changed since. Without the copy-on-write (cow) a changed key is emitted with its new
// state, or a key made meanwhile is emitted.
func TestSaveIsOneInstant(t *testing.T) {
	for seed := range 60 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSave(t, uint64(seed)) })
	}
}

func saveID(ks *store.KeyState) string {
	if ks.Ceil != 0 {
		return "ceil"
	}
	return fmt.Sprintf("%d/%x", ks.DB, ks.Key)
}

func runSave(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5a7e))
	l := store.NewLocks(store.LocksConfig{MaxWaitersPerKey: 4, MaxWaitersPerOwner: 6, Persist: true, PersistAfter: 1e9})
	now := at(0)
	var log []string
	op := func(i int) {
		switch n := r.IntN(100); {
		case n < 70:
			c, o := randomLock(r, uint16(i))
			c.Key = id16(string(rune('k' + r.IntN(16))))
			if r.IntN(3) == 0 {
				c.ExpriedFlag |= 0x0400 // the persisting kinds
			}
			sc := c.cmd()
			log = append(log, fmt.Sprintf("%d owner %d: %s", i, o, show(sc)))
			l.Do(o, &sc, now, nil, nil)
		case n < 82:
			now += int64(r.IntN(1500)) * 1e6
			log = append(log, fmt.Sprintf("%d expire @%d", i, (now-at(0))/1e6))
			l.Expire(now, nil, nil)
			l.PersistDue(now)
		case n < 87:
			o := store.Owner(1 + r.IntN(4))
			log = append(log, fmt.Sprintf("%d disconnected %d", i, o))
			l.Disconnected(o, now)
		case n < 90:
			db := uint8(r.IntN(2))
			log = append(log, fmt.Sprintf("%d flush %d", i, db))
			l.Flush(db, now, nil, nil)
		case n < 93:
			if r.IntN(4) == 0 {
				l.FreeFlushed(1 + r.IntN(3))
			}
		case n < 96:
			key := id16(string(rune('k' + r.IntN(16))))
			log = append(log, fmt.Sprintf("%d fence %x", i, key[:1]))
			l.RaiseFence(uint8(r.IntN(2)), key, uint64(1+r.IntN(1000)))
		default:
			ks := store.KeyState{DB: uint8(r.IntN(2)), Key: id16(string(rune('k' + r.IntN(16))))}
			if r.IntN(3) > 0 {
				ks.Holders = []store.HolderState{{LockID: id16("z"), Levels: 1, Start: now - 2e9, Deadline: now + 5e9, Token: uint64(r.IntN(50))}}
			}
			log = append(log, fmt.Sprintf("%d restore %d/%x holders %d", i, ks.DB, ks.Key[:1], len(ks.Holders)))
			l.Restore(&ks, now)
		}
		l.Journal(now, func(*store.KeyState) {}) // as the loop does every turn
	}
	fail := func(f string, a ...any) {
		t.Helper()
		for _, s := range log[max(0, len(log)-30):] {
			t.Log(s)
		}
		t.Fatalf("seed %d: "+f, append([]any{seed}, a...)...)
	}
	i := 0
	for range 2 { // twice: a second backup after the first
		for range 200 + r.IntN(200) {
			op(i)
			i++
		}
		want := map[string]string{}
		l.SnapshotAll(now, func(ks *store.KeyState) { want[saveID(ks)] = fmt.Sprint(*ks) })
		got := map[string]string{}
		log = append(log, "begin save")
		l.BeginSave(now, func(ks *store.KeyState) {
			id := saveID(ks)
			if _, dup := got[id]; dup {
				fail("%s emitted twice", id)
			}
			got[id] = fmt.Sprint(*ks)
		})
		for done := false; !done; {
			for range r.IntN(5) {
				op(i)
				i++
			}
			done = l.SaveNext(1 + r.IntN(3))
		}
		if on, _ := l.Saving(); on {
			fail("Saving after the end")
		}
		for id, w := range want {
			if got[id] != w {
				fail("%s: saved %s, want %s", id, got[id], w)
			}
		}
		for id, g := range got {
			if _, ok := want[id]; !ok {
				fail("%s saved (%s), but it had no state when the backup began", id, g)
			}
		}
		if len(want) < 2 {
			t.Logf("seed %d: only %d records", seed, len(want))
		}
		if err := l.Check(); err != nil {
			fail("%v", err)
		}
	}
}

// TestSaveStepBounded: a step of a backup (SaveNext of 1,024 keys) stops once the states it
// emitted take about 256 KiB: with values of 64 KiB, a few keys a step, not 1,024 (64 MiB
// copied in one loop turn; with 1 MiB values, a GiB). Every key is still emitted once.
func TestSaveStepBounded(t *testing.T) {
	const keys, vlen = 200, 64 << 10
	now := int64(1_700_000_000e9)
	l := store.NewLocks(store.LocksConfig{Persist: true, PersistAfter: 1e9, MaxValue: 1 << 20})
	var ks store.KeyState
	for i := range uint32(keys) {
		setState(&ks, i, vlen, now)
		l.Restore(&ks, now)
	}
	l.ForgetJournal()
	var got, most, steps int
	var step int
	l.BeginSave(now, func(ks *store.KeyState) {
		if len(ks.Value) != vlen+6 {
			t.Fatalf("key %x: value of %d bytes", ks.Key, len(ks.Value))
		}
		got++
		step += len(ks.Value)
	})
	for done := false; !done; steps++ {
		step = 0
		done = l.SaveNext(1024)
		most = max(most, step)
	}
	if got != keys {
		t.Fatalf("%d keys emitted, want %d", got, keys)
	}
	if most > 256<<10+vlen+6 || steps < keys*vlen/(256<<10) {
		t.Fatalf("a step emitted up to %d bytes of values, in %d steps (want at most 256 KiB and a key)", most, steps)
	}
	t.Logf("%d keys of %d-byte values in %d steps, at most %d bytes a step", keys, vlen, steps, most)
}
