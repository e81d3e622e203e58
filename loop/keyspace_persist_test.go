package loop

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// The keyspace's state (store.Keyspace) in SNAPSHOT's file, the log's rewrite and replay,
// and a follower's raft snapshot install (keyspace_persist.go). The Redis path does not
// write the keyspace yet (issue 32's next stage), so these tests fill it on the loop.

// ksFill puts n keys in ks at now (Unix ms): strings, integers, small and large hashes,
// some with an expiry an hour on, some fenced, in databases 0 to 2; tag changes the values.
func ksFill(ks *store.Keyspace, n int, now int64, tag string) {
	for i := range n {
		db, key := uint8(i%3), []byte("key:"+strconv.Itoa(i))
		o := &store.SetOpts{}
		if i%5 == 0 {
			o.At = now + 3600_000 + int64(i)
		}
		switch i % 7 {
		case 0, 1, 2:
			ks.Set(db, key, []byte(tag+strconv.Itoa(i)), o, now, nil)
		case 3:
			ks.IncrBy(db, key, int64(i), now)
			if o.At != 0 {
				ks.Expire(db, key, o.At, store.ExpireAlways, now)
			}
		case 4:
			ks.HSet(db, key, [][]byte{[]byte("f"), []byte(tag), []byte("g"), []byte(strconv.Itoa(i))}, now)
			if o.At != 0 {
				ks.Expire(db, key, o.At, store.ExpireAlways, now)
			}
		case 5:
			if i%35 == 5 { // a large hash now and then
				var pairs [][]byte
				for f := range 200 {
					pairs = append(pairs, []byte("field"+strconv.Itoa(f)), []byte(tag+strconv.Itoa(f)))
				}
				ks.HSet(db, key, pairs, now)
			} else {
				ks.Set(db, key, []byte(strings.Repeat(tag, 10)), o, now, nil)
			}
		case 6:
			ks.Set(db, key, []byte(tag), o, now, nil)
			ks.RaiseFence(db, key, uint64(1000+i), now)
		}
	}
}

// ksDump describes every key of ks at now: its value, expiry and fence.
func ksDump(ks *store.Keyspace, now int64) map[string]string {
	m := map[string]string{}
	for db := range uint8(store.MaxLockDB + 1) {
		var c uint64
		for {
			c = ks.Scan(db, c, 1000, now, func(key []byte, kind store.ValueKind) {
				v := ""
				if kind == store.KindHash {
					h := map[string]string{}
					ks.HRange(db, key, now, func(f, val []byte) { h[string(f)] = string(val) })
					keys := slices.Sorted(maps.Keys(h))
					for _, f := range keys {
						v += f + "=" + h[f] + ","
					}
				} else {
					b, _ := ks.Get(db, key, now, nil)
					v = string(b)
				}
				m[fmt.Sprintf("%d/%s", db, key)] = fmt.Sprintf("%d:%s at %d fence %d", kind, v, ks.ExpireAt(db, key, now), ks.KeyFence(db, key, now))
			})
			if c == 0 {
				break
			}
		}
	}
	return m
}

func sameDump(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	bad := 0
	for k, v := range want {
		if got[k] != v {
			if bad++; bad <= 5 {
				t.Errorf("%s: %s = %q, want %q", what, k, got[k], v)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d keys differ", what, bad)
	}
}

// restoreBody reads a backup's body into a fresh keyspace and counts its key states.
func restoreBody(t *testing.T, body []byte) (*store.Keyspace, int) {
	t.Helper()
	_, recs, ok := cluster.SplitSnapshot(body)
	if !ok {
		t.Fatal("no records in the snapshot")
	}
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	states := 0
	var applyErr error
	err := aof.DecodeAll(recs, &aof.Handlers{State: func(st *store.KeyState) {
		if st.Ceil == 0 && !st.Flush {
			states++
		}
	}, Peers: func(map[uint64]string) {},
		Keyspace: func(r *store.Record) {
			if err := ks.Apply(r); err != nil && applyErr == nil {
				applyErr = err
			}
		}})
	if err != nil || applyErr != nil {
		t.Fatalf("the snapshot's records: %v, %v", err, applyErr)
	}
	if err := ks.Check(); err != nil {
		t.Fatal(err)
	}
	return ks, states
}

// TestSnapshotKeyspace: SNAPSHOT's file holds the keyspace's keys beside the Locks' (a
// SET through the wire), and counts them in its header; restored, they are the keyspace as
// it was. On 59a2fc0 the file had no keyspace records at all.
func TestSnapshotKeyspace(t *testing.T) {
	ts, stop := startPersist(t, t.TempDir(), nil)
	defer stop()
	rc := dialResp(t, ts.slockAddr)
	if r := rc.cmd("SET", "wire", "v"); r.Kind != '+' {
		t.Fatalf("SET: %v", r)
	}
	var want map[string]string
	const n = 5000
	ts.onLoop(t, func() {
		now := ts.now().UnixMilli()
		ksFill(ts.st.store.Keyspace, n, now, "snap")
		want = ksDump(ts.st.store.Keyspace, now)
	})
	r := rc.cmd("SNAPSHOT")
	h, body, err := snapfile.Decode(r.Str)
	if err != nil {
		t.Fatalf("SNAPSHOT: %v (%v)", err, r)
	}
	if h.Keys != n+1 {
		t.Fatalf("the header counts %d keys, want %d", h.Keys, n+1)
	}
	ks, states := restoreBody(t, body)
	if states != 1 {
		t.Fatalf("%d key states, want the one SET", states)
	}
	sameDump(t, "SNAPSHOT's keyspace", ksDump(ks, time.Now().UnixMilli()), want)
	// The keyspace's save is over: a second SNAPSHOT takes it again.
	ts.onLoop(t, func() {
		if on, _ := ts.st.store.Keyspace.Saving(); on {
			t.Error("the keyspace's save goes on after the file was sent")
		}
	})
	_, body, err = snapfile.Decode(rc.cmd("SNAPSHOT").Str)
	if err != nil {
		t.Fatal(err)
	}
	ks, _ = restoreBody(t, body)
	sameDump(t, "the second SNAPSHOT", ksDump(ks, time.Now().UnixMilli()), want)
}

// TestSnapshotKeyspaceInstant: keys written, changed and deleted while SNAPSHOT's file is
// encoded a step at a time: the file holds the keyspace as it was when SNAPSHOT began
// (copy-on-write), none of the later changes.
func TestSnapshotKeyspaceInstant(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	rc.cmd("PING")
	var want map[string]string
	var cs *conn
	var file []byte
	steps := 0
	ts.onLoop(t, func() {
		now := ts.now()
		ks := ts.st.store.Keyspace
		ksFill(ks, 20_000, now.UnixMilli(), "old")
		want = ksDump(ks, now.UnixMilli())
		for _, c := range ts.ct.conns {
			cs = c
		}
		// SNAPSHOT's encoding begun and stepped by hand, with changes between the steps.
		c := ts.contBegin(cs, contSnapshot)
		ts.backing = cs
		ts.snapshotBegin(c, now.UnixNano())
		bk := &ts.bk
		for i := 0; ; i++ {
			done := ts.famSaveStep(&bk.fs)
			bk.putKeyspace()
			if done {
				break
			}
			steps++
			k := []byte("key:" + strconv.Itoa(19_999-i))
			ks.Set(uint8((19_999-i)%3), k, []byte("new"), &store.SetOpts{}, now.UnixMilli(), nil)
			ks.Del(uint8(i%3), []byte("key:"+strconv.Itoa(i)), now.UnixMilli())
			ks.Set(0, []byte("made:"+strconv.Itoa(i)), []byte("x"), &store.SetOpts{}, now.UnixMilli(), nil)
			if i == 3 {
				ks.Flush(2)
			}
		}
		bk.seal(&ts.Server.log)
		file, _ = bk.chunk(nil, 1<<30)
		c.active = false
		ts.snapshotDrop()
	})
	if steps < 10 {
		t.Fatalf("the file of 20k keys was encoded in %d steps", steps)
	}
	file = file[:len(file)-2] // the bulk string's end
	_, body, err := snapfile.Decode(file)
	if err != nil {
		t.Fatalf("SNAPSHOT: %v", err)
	}
	ks, _ := restoreBody(t, body)
	sameDump(t, "the file begun before the changes", ksDump(ks, time.Now().UnixMilli()), want)
}

// TestPersistRewriteKeyspace: a log rewrite writes the keyspace's keys (runs of aof kind 6)
// and a restart replays them; a torn keyspace run at the log's tail is cut off, the keys
// before it kept. On 59a2fc0 the rewritten log had none of them.
func TestPersistRewriteKeyspace(t *testing.T) {
	dir := t.TempDir()
	ts, stop := startPersist(t, dir, func(c *Config) { c.AOFRewriteSize = 1 << 40 })
	rc := dialResp(t, ts.slockAddr)
	if r := rc.cmd("SET", "wire", "v"); r.Kind != '+' {
		t.Fatalf("SET: %v", r)
	}
	var want map[string]string
	ts.onLoop(t, func() {
		now := ts.now().UnixMilli()
		ksFill(ts.st.store.Keyspace, 30_000, now, "rw")
		want = ksDump(ts.st.store.Keyspace, now)
		if !ts.Rewrite() {
			t.Error("no rewrite started")
			return
		}
		steps := 0
		for ts.persist.rewriting {
			ts.rewriteStep(ts.now().UnixNano())
			steps++
		}
		if steps < 4 {
			t.Errorf("the rewrite of 30k keys took %d steps", steps)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		var committing bool
		ts.onLoop(t, func() { committing = ts.persist.committing })
		if !committing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rewrite was not committed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rc.c.Close()
	stop()
	// A torn keyspace run at the tail: a crash in the middle of writing it.
	path := filepath.Join(dir, logName)
	r := store.Record{Op: store.RecSet, DB: 0, Kind: store.KindString, Key: []byte("torn"), Value: []byte("x")}
	run := aof.AppendKeyspace(nil, r.Append(nil))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(run[:len(run)-2])
	f.Close()

	ts2, stop2 := startPersist(t, dir, nil)
	defer stop2()
	rc2 := dialResp(t, ts2.slockAddr)
	if r := rc2.cmd("GET", "wire"); string(r.Str) != "v" {
		t.Fatalf("GET wire after the restart: %v", r)
	}
	ts2.onLoop(t, func() {
		sameDump(t, "the keyspace replayed", ksDump(ts2.st.store.Keyspace, ts2.now().UnixMilli()), want)
		if ts2.persist.replayed.Truncated == 0 {
			t.Error("the torn run was not cut off")
		}
	})
}
