package store_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestKeyspaceRewrite: a log rewrite (BeginRewrite, RewriteNext a few keys at a time)
// while the model test's random operations go on (backups among them): the new log, the
// changes journaled meanwhile after what the walk emitted before them, replays to the
// keyspace as it is at the end. The journal is written before each walk step, as the loop
// does at each tick.
func TestKeyspaceRewrite(t *testing.T) {
	for seed := range uint64(30) {
		g := &ksRig{t: t, r: rand.New(rand.NewPCG(seed, seed^0x51)),
			ks: store.NewKeyspace(store.KeyspaceConfig{Log: true}), m: newKsModel(), now: 1_000_000}
		var newLog []byte
		rewriting, rewrites := false, 0
		for i := range 2500 {
			g.step()
			if rewriting {
				newLog = append(newLog, g.ks.Log()...) // ToBoth
			}
			g.ks.ClearLog()
			g.ks.ClearEvents()
			switch {
			case !rewriting && i%300 == 100:
				rewriting, newLog = true, newLog[:0]
				g.ks.BeginRewrite()
			case rewriting && g.r.IntN(3) == 0:
				if g.ks.RewriteNext(1+g.r.IntN(4), func(r *store.Record) { newLog = r.Append(newLog) }) {
					rewriting = false
					rewrites++
					fresh := store.NewKeyspace(store.KeyspaceConfig{})
					if err := fresh.Restore(newLog); err != nil {
						t.Fatalf("seed %d step %d: replay of the rewritten log: %v", seed, i, err)
					}
					compareKs(t, fmt.Sprintf("seed %d step %d: rewritten log", seed, i), fresh, g.m, g.now)
				}
			}
		}
		if rewrites == 0 {
			t.Fatalf("seed %d: no rewrite ended", seed)
		}
	}
}

// TestKeyspaceRewriteAppendOnce: the walk's records of a key come after the records of the
// changes made to it before (the caller journals first), so a replay applies an APPEND once.
func TestKeyspaceRewriteAppendOnce(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{Log: true})
	ks.Set(0, []byte("k"), []byte("abc"), &store.SetOpts{}, 0, nil)
	ks.HSet(0, []byte("h"), [][]byte{[]byte("f1"), []byte("1")}, 0)
	ks.ClearLog()
	ks.BeginRewrite()
	ks.Append(0, []byte("k"), []byte("d"), 0)
	ks.HSet(0, []byte("h"), [][]byte{[]byte("f2"), []byte("2")}, 0)
	ks.HDel(0, []byte("h"), [][]byte{[]byte("f1")}, 0)
	newLog := append([]byte(nil), ks.Log()...)
	ks.ClearLog()
	for !ks.RewriteNext(1, func(r *store.Record) { newLog = r.Append(newLog) }) {
	}
	fresh := store.NewKeyspace(store.KeyspaceConfig{})
	if err := fresh.Restore(newLog); err != nil {
		t.Fatal(err)
	}
	v, _ := fresh.Get(0, []byte("k"), 0, nil)
	n, _ := fresh.HLen(0, []byte("h"), 0)
	if string(v) != "abcd" || n != 1 {
		t.Fatalf("replayed k=%q, h has %d fields; want abcd and 1", v, n)
	}
}

// TestKeyspaceSaveStepBounded: a step of a backup, and of a rewrite's walk, stops once its
// records take about 256 KiB, however many keys it may look at (1,024 keys of 64 KiB are
// 64 MiB in one step on 59a2fc0).
func TestKeyspaceSaveStepBounded(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	big := []byte(strings.Repeat("v", 64<<10))
	for i := range 100 {
		ks.Set(0, []byte("k"+strconv.Itoa(i)), big, &store.SetOpts{}, 0, nil)
	}
	n := 0
	ks.BeginSave(0, func(r *store.Record) { n += len(r.Value) })
	steps, max := 0, 0
	for done := false; !done; steps++ {
		n = 0
		done = ks.SaveNext(1024)
		max = maxInt(max, n)
	}
	if max > 320<<10 || steps < 20 {
		t.Fatalf("backup: a step emitted %d bytes; %d steps", max, steps)
	}
	ks.BeginRewrite()
	steps, max = 0, 0
	for done := false; !done; steps++ {
		n = 0
		done = ks.RewriteNext(1024, func(r *store.Record) { n += len(r.Value) })
		max = maxInt(max, n)
	}
	if max > 320<<10 || steps < 20 {
		t.Fatalf("rewrite: a step emitted %d bytes; %d steps", max, steps)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// TestSwapKeyspace: a keyspace restored beside the serving one takes its place in one
// step; watched keys stay watched with new versions; a backup of the old one is over; the
// store's figures are the new one's.
func TestSwapKeyspace(t *testing.T) {
	s := store.New(store.Config{})
	old := s.Keyspace
	for i := range 100 {
		old.Set(uint8(i%3), []byte("old"+strconv.Itoa(i)), []byte("x"), &store.SetOpts{}, 0, nil)
	}
	v1 := old.Watch(1, []byte("w"))
	v2 := old.Watch(2, []byte("new7"))
	old.BeginSave(0, func(*store.Record) {})
	epoch := old.SaveEpoch()
	st := s.StagingKeyspace()
	for i := range 50 {
		st.Set(uint8(i%3), []byte("new"+strconv.Itoa(i)), []byte("y"), &store.SetOpts{At: 5000}, 0, nil)
	}
	if store.StagedKeyspaceBytes(st) <= 0 || store.StagedKeyspaceBytes(nil) != 0 {
		t.Fatal("staged bytes")
	}
	s.SwapKeyspace(st)
	ks := s.Keyspace
	if ks != old {
		t.Fatal("the keyspace moved")
	}
	ksCheck(t, ks)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if ks.Keys() != 50 || ks.Exists(0, [][]byte{[]byte("old0")}, 0) != 0 {
		t.Fatalf("%d keys after the swap", ks.Keys())
	}
	if ks.WatchVersion(1, []byte("w")) == v1 || ks.WatchVersion(2, []byte("new7")) == v2 || ks.WatchVersion(1, []byte("w")) == 0 {
		t.Fatal("a watched key kept its version")
	}
	if on, _ := ks.Saving(); on || ks.SaveEpoch() != 0 {
		t.Fatal("the old keyspace's backup goes on")
	}
	ks.BeginSave(0, func(*store.Record) {})
	if ks.SaveEpoch() <= epoch {
		t.Fatalf("a backup after the swap numbered %d, the old one %d", ks.SaveEpoch(), epoch)
	}
	ks.EndSave()
	if d, ok := ks.NextDeadline(); !ok || d != 5000 {
		t.Fatalf("next deadline %d %v: the new keys' expiries", d, ok)
	}
	// Unwatch still balances.
	ks.Unwatch(1, []byte("w"))
	ks.Unwatch(2, []byte("new7"))
	ksCheck(t, ks)
	s.ResetKeyspace()
	if ks.Keys() != 0 {
		t.Fatal("ResetKeyspace left keys")
	}
	ksCheck(t, ks)
}
