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
	ts.onLoop(t, func() { ksFill(ts.st.store.Keyspace, n, ts.now().UnixMilli(), "snap") })
	ts.onLoop(t, func() { want = ksDump(ts.st.store.Keyspace, ts.now().UnixMilli()) })
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
	ts.onLoop(t, func() { ksFill(ts.st.store.Keyspace, 20_000, ts.now().UnixMilli(), "old") })
	ts.onLoop(t, func() { want = ksDump(ts.st.store.Keyspace, ts.now().UnixMilli()) })
	ts.onLoop(t, func() {
		now := ts.now()
		ks := ts.st.store.Keyspace
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
	if ts.st.store.Keyspace == nil || len(want) != 20_000 {
		t.Fatalf("%d keys before", len(want))
	}
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
	keys, minSteps := 30_000, 4
	if raceEnabled {
		keys, minSteps = 8_000, 2 // each look on the loop within onLoop's 5 s
	}
	var want map[string]string
	ts.onLoop(t, func() {
		now := ts.now().UnixMilli()
		ksFill(ts.st.store.Keyspace, keys, now, "rw")
	})
	ts.onLoop(t, func() { want = ksDump(ts.st.store.Keyspace, ts.now().UnixMilli()) })
	ts.onLoop(t, func() {
		if !ts.Rewrite() {
			t.Error("no rewrite started")
			return
		}
		steps := 0
		for ts.persist.rewriting {
			ts.rewriteStep(ts.now().UnixNano())
			steps++
		}
		if steps < minSteps {
			t.Errorf("the rewrite of %d keys took %d steps", keys, steps)
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
	var got map[string]string
	ts2.onLoop(t, func() { got = ksDump(ts2.st.store.Keyspace, ts2.now().UnixMilli()) })
	sameDump(t, "the keyspace replayed", got, want)
	ts2.onLoop(t, func() {
		if ts2.persist.replayed.Truncated == 0 {
			t.Error("the torn run was not cut off")
		}
	})
}

// TestMoveValuesFromWire: Redis keys written through today's path (store.Locks: SET with and
// without an expiry, SET ... FENCE, INCR, HSET, APPEND, SETEX) and slock's own LOCKs (with a
// value; under another LockId) move into the keyspace (store.Store.MoveValues, a few keys a
// call): each Redis key has there the value, type, PTTL (within the Locks' rounding) and
// fence GET, TYPE, PTTL and the Locks showed; the LOCKs stay where they are.
func TestMoveValuesFromWire(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	type key struct {
		name, typ, val string
		hash           map[string]string
		pttl           int64
		fence          uint64
	}
	var keys []*key
	for i := range 300 {
		name := "key:" + strconv.Itoa(i)
		if i%4 == 0 {
			name = "a-name-longer-than-16-bytes:" + strconv.Itoa(i)
		}
		switch i % 6 {
		case 0:
			rc.cmd("SET", name, "v"+strconv.Itoa(i))
		case 1:
			rc.cmd("SET", name, "v"+strconv.Itoa(i), "PX", strconv.Itoa(60_000+i))
		case 2:
			rc.cmd("INCRBY", name, strconv.Itoa(i*1000))
			rc.cmd("EXPIRE", name, "3600")
		case 3:
			for f := range 1 + i%150 {
				rc.cmd("HSET", name, "f"+strconv.Itoa(f), strconv.Itoa(i+f))
			}
		case 4:
			rc.cmd("SET", name, "base", "FENCE", strconv.Itoa(1000+i))
			rc.cmd("APPEND", name, "-more")
		case 5:
			rc.cmd("SETEX", name, "100", "x")
		}
		keys = append(keys, &key{name: name})
	}
	// slock's locks: one with a value, one without.
	parseTextLock(t, rc.cmd("LOCK", "lock1", "EXPRIED", "60", "SET", "held"))
	parseTextLock(t, rc.cmd("LOCK", "lock2", "EXPRIED", "60"))
	read := time.Now().UnixMilli() // the PTTLs below are read from here on (slowly, under -race)
	for _, k := range keys {
		k.typ = string(rc.cmd("TYPE", k.name).Str)
		if k.typ == "hash" {
			k.hash = map[string]string{}
			r := rc.cmd("HGETALL", k.name)
			for i := 0; i+1 < len(r.Elems); i += 2 {
				k.hash[string(r.Elems[i].Str)] = string(r.Elems[i+1].Str)
			}
		} else {
			k.val = string(rc.cmd("GET", k.name).Str)
		}
		k.pttl = rc.cmd("PTTL", k.name).Int
	}
	var before int64
	ts.onLoop(t, func() {
		fenced := 0
		for _, k := range keys {
			if k.fence = ts.st.locks.KeyFence(0, ts.st.keys.KeyID([]byte(k.name))); k.fence != 0 {
				fenced++
			}
		}
		if fenced != 50 {
			t.Errorf("%d keys fenced, want 50", fenced)
		}
		before = min(read, ts.now().UnixMilli())
		total := store.Moved{}
		for calls := 0; ; calls++ {
			m := ts.st.store.MoveValues(16, ts.now().UnixNano())
			total.Moved, total.Kept = total.Moved+m.Moved, total.Kept+m.Kept
			if m.Done {
				break
			}
		}
		if total.Moved != len(keys) || total.Kept != 1 {
			t.Errorf("moved %d, kept %d; want %d and the LOCK with a value", total.Moved, total.Kept, len(keys))
		}
		if err := ts.st.store.Check(); err != nil {
			t.Error(err)
		}
	})
	ts.onLoop(t, func() {
		ks := ts.st.store.Keyspace
		now := ts.now().UnixMilli()
		for _, k := range keys {
			name := []byte(k.name)
			switch k.typ {
			case "hash":
				h := map[string]string{}
				ks.HRange(0, name, now, func(f, v []byte) { h[string(f)] = string(v) })
				if !maps.Equal(h, k.hash) {
					t.Errorf("%s: hash of %d fields, want %d", k.name, len(h), len(k.hash))
				}
			case "string":
				if v, st := ks.Get(0, name, now, nil); string(v) != k.val || st != store.KeyspaceOK {
					t.Errorf("%s = %q (%v), want %q", k.name, v, st, k.val)
				}
			default:
				t.Errorf("%s: TYPE %q", k.name, k.typ)
			}
			pttl := ks.TTL(0, name, now)
			if k.pttl < 0 && pttl != k.pttl || k.pttl >= 0 && (pttl < k.pttl-(now-before)-1000 || pttl > k.pttl+1000) {
				// The Locks' PTTL is capped at what was asked (TTLAsked), the deadline of a
				// seconds expiry rounded to its second: within a second.
				t.Errorf("%s: PTTL %d, the Locks said %d", k.name, pttl, k.pttl)
			}
			if f := ks.KeyFence(0, name, now); f != k.fence {
				t.Errorf("%s: fence %d, want %d", k.name, f, k.fence)
			}
			if ts.st.locks.Value(0, ts.st.keys.KeyID(name)) != nil {
				t.Errorf("%s: still in the Locks", k.name)
			}
		}
		if ks.Type(0, []byte("lock1"), now) != store.KindNone || ts.st.locks.Value(0, ts.st.keys.KeyID([]byte("lock1"))) == nil {
			t.Error("the LOCK's value moved")
		}
		if held, _ := ts.st.locks.Holds(0, ts.st.keys.KeyID([]byte("lock2")), [16]byte{}); !held {
			t.Error("the LOCK without a value is gone")
		}
	})
}
