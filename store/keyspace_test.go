package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/store"
)

func ksCheck(t *testing.T, ks *store.Keyspace) {
	t.Helper()
	if err := ks.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestKeyspaceEventsAndRecords: each write names its events as Redis 7.0 does and logs
// records that replay to the same state; the records decode to what was done.
func TestKeyspaceEventsAndRecords(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{Log: true, Events: true})
	now := int64(1000)
	events := func(want ...string) {
		t.Helper()
		var got []string
		for _, ev := range ks.Events() {
			got = append(got, ev.Name.String()+":"+string(ks.EventKey(ev)))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		ks.ClearEvents()
	}
	ks.Set(0, []byte("k"), []byte("v"), &store.SetOpts{At: now + 100}, now, nil)
	events("new:k", "set:k", "expire:k")
	ks.Set(0, []byte("k"), []byte("w"), &store.SetOpts{KeepTTL: true}, now, nil)
	events("set:k")
	if ks.TTL(0, []byte("k"), now) != 100 {
		t.Fatal("KEEPTTL lost the expiry")
	}
	ks.IncrBy(0, []byte("n"), 5, now)
	events("incrby:n")
	ks.Append(0, []byte("s"), []byte("ab"), now)
	events("new:s", "append:s")
	ks.HSet(0, []byte("h"), [][]byte{[]byte("f"), []byte("1")}, now)
	ks.HIncrBy(0, []byte("h"), []byte("f"), 2, now)
	ks.HDel(0, []byte("h"), [][]byte{[]byte("f")}, now)
	events("hset:h", "hincrby:h", "hdel:h", "del:h")
	ks.Persist(0, []byte("k"), now)
	ks.Expire(0, []byte("s"), now+5, store.ExpireAlways, now)
	events("persist:k", "expire:s")
	ks.Set(0, []byte("gone"), []byte("x"), &store.SetOpts{At: now - 1}, now, nil)
	events("new:gone", "set:gone", "expire:gone", "expired:gone")
	if n, more := ks.Advance(now+5, 10); n != 1 || more {
		t.Fatalf("Advance: %d %v", n, more)
	}
	events("expired:s")
	ks.Del(0, []byte("n"), now)
	events("del:n")
	ks.Set(0, []byte("n"), []byte("x"), &store.SetOpts{}, now, nil)
	if _, st := ks.IncrBy(0, []byte("n"), 1, now); st != store.KeyspaceNotInt {
		t.Fatalf("INCR of x: %v", st)
	}
	events("new:n", "set:n") // a refused command emits nothing
	ks.Flush(1)
	ksCheck(t, ks)

	var ops []store.RecOp
	for b := ks.Log(); len(b) > 0; {
		r, n, err := store.ReadRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, r.Op)
		b = b[n:]
	}
	want := []store.RecOp{store.RecSet, store.RecSet, store.RecSet, store.RecAppend, store.RecHSet, store.RecHSet,
		store.RecHDel, store.RecExpire, store.RecExpire, store.RecDel, store.RecDel, store.RecDel, store.RecSet, store.RecFlush}
	if !slices.Equal(ops, want) {
		t.Fatalf("records %v, want %v", ops, want)
	}
	fresh := store.NewKeyspace(store.KeyspaceConfig{})
	if err := fresh.Restore(ks.Log()); err != nil {
		t.Fatal(err)
	}
	ksCheck(t, fresh)
	for _, k := range []string{"k", "n", "s", "h", "gone"} {
		a, sa := ks.Get(0, []byte(k), now+5, nil)
		b, sb := fresh.Get(0, []byte(k), now+5, nil)
		if string(a) != string(b) || sa != sb || ks.TTL(0, []byte(k), now+5) != fresh.TTL(0, []byte(k), now+5) {
			t.Fatalf("%s: %q %v, replayed %q %v", k, a, sa, b, sb)
		}
	}
	if _, _, err := store.ReadRecord([]byte{byte(store.RecSet), 0, 5, 'a'}); err == nil {
		t.Fatal("a truncated record read")
	}
}

// TestKeyspaceScanStable: a SCAN walked a few keys at a time while keys are added and
// deleted returns every key present for the whole walk.
func TestKeyspaceScanStable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	for i := range 5000 {
		ks.Set(0, []byte("k"+strconv.Itoa(i)), []byte("v"), &store.SetOpts{}, 0, nil)
	}
	for round := range 20 {
		stay := map[string]bool{}
		var c uint64
		seen := map[string]bool{}
		first := true
		for first || c != 0 {
			if first {
				for i := range 5000 {
					k := "k" + strconv.Itoa(i)
					if ks.Exists(0, [][]byte{[]byte(k)}, 0) == 1 && i%3 == 0 {
						stay[k] = true
					}
				}
			}
			first = false
			c = ks.Scan(0, c, 1+r.IntN(20), 0, func(k []byte, _ store.ValueKind) { seen[string(k)] = true })
			for range 10 {
				i := r.IntN(8000)
				k := []byte("k" + strconv.Itoa(i))
				if i%3 == 0 && i < 5000 {
					continue // the keys that stay
				}
				if r.IntN(2) == 0 {
					ks.Del(0, k, 0)
				} else {
					ks.Set(0, k, []byte("v"), &store.SetOpts{}, 0, nil)
				}
			}
		}
		for k := range stay {
			if !seen[k] {
				t.Fatalf("round %d: %s was there for the whole scan, not returned", round, k)
			}
		}
	}
	ksCheck(t, ks)
}

// TestKeyspaceHashes: a hash stays packed up to 128 short fields and turns into a map
// past them; both answer alike, and the last field deleted deletes the key.
func TestKeyspaceHashes(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	small := ks.Bytes()
	for i := range 200 {
		if n, st := ks.HSet(0, []byte("h"), [][]byte{[]byte("f" + strconv.Itoa(i)), []byte(strconv.Itoa(i))}, 0); n != 1 || st != store.KeyspaceOK {
			t.Fatalf("HSET %d: %d %v", i, n, st)
		}
		if i == 127 {
			small = ks.Bytes()
		}
		ksCheck(t, ks)
	}
	t.Logf("a hash of 128 packed fields: %d bytes", small)
	if small > 6000 {
		t.Fatalf("128 packed fields cost %d bytes", small)
	}
	if n, _ := ks.HLen(0, []byte("h"), 0); n != 200 {
		t.Fatalf("HLEN %d", n)
	}
	if v, _ := ks.HIncrBy(0, []byte("h"), []byte("f7"), 3, 0); v != 10 {
		t.Fatalf("HINCRBY %d", v)
	}
	if _, st := ks.Get(0, []byte("h"), 0, nil); st != store.KeyspaceWrongType {
		t.Fatalf("GET of a hash: %v", st)
	}
	for i := range 200 {
		ks.HDel(0, []byte("h"), [][]byte{[]byte("f" + strconv.Itoa(i))}, 0)
	}
	if ks.Len(0) != 0 {
		t.Fatal("an empty hash stayed")
	}
	ksCheck(t, ks)
}

// TestKeyspaceAllocs: GET, SET of an existing key to a value of the same size, INCR,
// HINCRBY, and DEL then SET of a key allocate nothing in steady state.
func TestKeyspaceAllocs(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{Log: true, Events: true})
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%012d", i))
		ks.Set(0, keys[i], []byte("abc"), &store.SetOpts{}, 0, nil)
	}
	ks.IncrBy(0, []byte("counter"), 1, 0)
	ks.HSet(0, []byte("hash"), [][]byte{[]byte("f"), []byte("1")}, 0)
	buf := make([]byte, 0, 64)
	val := []byte("xyz")
	o := &store.SetOpts{}
	i := 0
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"GET", func() { buf, _ = ks.Get(0, keys[i%1000], 0, buf[:0]) }},
		{"SET", func() { ks.Set(0, keys[i%1000], val, o, 0, nil) }},
		{"SET PX", func() { ks.Set(0, keys[i%1000], val, &store.SetOpts{At: 100}, 0, nil) }},
		{"INCR", func() { ks.IncrBy(0, []byte("counter"), 1, 0) }},
		{"HINCRBY", func() { ks.HIncrBy(0, []byte("hash"), []byte("f"), 1, 0) }},
		{"DEL+SET", func() {
			ks.Del(0, keys[i%1000], 0)
			ks.Set(0, keys[i%1000], val, o, 0, nil)
		}},
	} {
		c.f()
		if n := testing.AllocsPerRun(1000, func() {
			c.f()
			i++
			if i%100 == 0 {
				ks.ClearLog()
				ks.ClearEvents()
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations a call", c.name, n)
		}
	}
	ksCheck(t, ks)
}

// TestKeyspaceBackupInstant: a backup taken while keys are overwritten, deleted, added,
// expired and a database flushed holds the keys as they were when it began.
func TestKeyspaceBackupInstant(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	for i := range 1000 {
		ks.Set(uint8(i%2), []byte("k"+strconv.Itoa(i)), []byte("old"), &store.SetOpts{At: int64(100 + i)}, 0, nil)
	}
	var saved []byte
	ks.BeginSave(50, func(r *store.Record) { saved = r.Append(saved) })
	for i := 0; !ks.SaveNext(7); i++ {
		k := []byte("k" + strconv.Itoa(i))
		ks.Set(0, k, []byte("new"), &store.SetOpts{}, 50, nil)
		ks.Del(1, k, 50)
		ks.Set(0, []byte("made"+strconv.Itoa(i)), []byte("x"), &store.SetOpts{}, 50, nil)
		if i == 30 {
			ks.Flush(1)
		}
		ks.Advance(int64(50+i), 5)
	}
	ksCheck(t, ks)
	fresh := store.NewKeyspace(store.KeyspaceConfig{})
	if err := fresh.Restore(saved); err != nil {
		t.Fatal(err)
	}
	ksCheck(t, fresh)
	if fresh.Keys() != 1000 {
		t.Fatalf("restored %d keys, want 1000", fresh.Keys())
	}
	for i := range 1000 {
		v, _ := fresh.Get(uint8(i%2), []byte("k"+strconv.Itoa(i)), 50, nil)
		if string(v) != "old" || fresh.ExpireAt(uint8(i%2), []byte("k"+strconv.Itoa(i)), 50) != int64(100+i) {
			t.Fatalf("k%d restored as %q", i, v)
		}
	}
}

// TestKeyspaceGrowShrink: 20k keys added and deleted again, in random order, with index
// tables that split at 64 slots: the invariants hold on the way, and what the keys cost
// is given back but the first two chunks of entries and of expiries (each 4,096 long) and
// the tables (split ones are not merged again; they shrink to 64 slots).
func TestKeyspaceGrowShrink(t *testing.T) {
	defer store.SetKeyspaceTableMax(64)()
	r := rand.New(rand.NewPCG(3, 4))
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	empty := ks.Bytes()
	const n = 20_000
	perm := r.Perm(n)
	for i, j := range perm {
		ks.Set(0, []byte("key"+strconv.Itoa(j)), []byte("value"), &store.SetOpts{At: int64(1000 + j)}, 0, nil)
		if i%997 == 0 {
			ksCheck(t, ks)
		}
	}
	ksCheck(t, ks)
	full := ks.Bytes()
	for i, j := range r.Perm(n) {
		if !ks.Del(0, []byte("key"+strconv.Itoa(j)), 0) {
			t.Fatalf("key%d missing", j)
		}
		if i%997 == 0 {
			ksCheck(t, ks)
		}
	}
	ksCheck(t, ks)
	if left := ks.Bytes(); left > empty+full*2/5 { // 20k keys: the chunks kept are a third of them
		t.Fatalf("%d keys cost %d bytes, %d left once deleted (empty: %d)", n, full, left, empty)
	}
}

// TestStoreKeyspaceExpiry: a key's expiry is part of the Store's NextDeadline, and
// Advance expires it (Due.KeysExpired), a bounded number of keys a call.
func TestStoreKeyspaceExpiry(t *testing.T) {
	s := store.New(store.Config{Start: at(0), Keyspace: store.KeyspaceConfig{Events: true}})
	var d store.Due
	s.Advance(at(0), &d) // the collections due at the start
	d.Reset()
	ms := at(0)/1e6 + 500
	for i := range store.KeyspaceExpireBudget + 5 {
		s.Keyspace.Set(0, []byte("k"+strconv.Itoa(i)), []byte("v"), &store.SetOpts{At: ms}, at(0)/1e6, nil)
	}
	if next, ok := s.NextDeadline(); !ok || next != ms*1e6 {
		t.Fatalf("NextDeadline %d %v, want the key's %d", next, ok, ms*1e6)
	}
	s.Advance(ms*1e6-1, &d)
	if d.KeysExpired != 0 {
		t.Fatalf("%d keys expired a nanosecond early", d.KeysExpired)
	}
	s.Advance(ms*1e6, &d)
	if d.KeysExpired != store.KeyspaceExpireBudget {
		t.Fatalf("%d keys expired, want the budget %d", d.KeysExpired, store.KeyspaceExpireBudget)
	}
	if next, _ := s.NextDeadline(); next != ms*1e6 {
		t.Fatalf("5 keys still due, NextDeadline %d", next)
	}
	d.Reset()
	s.Advance(ms*1e6, &d)
	if d.KeysExpired != 5 || s.Keyspace.Keys() != 0 || len(s.Keyspace.Events()) != 4*(store.KeyspaceExpireBudget+5) { // new, set, expire, expired
		t.Fatalf("expired %d, keys left %d, events %d", d.KeysExpired, s.Keyspace.Keys(), len(s.Keyspace.Events()))
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestKeyspaceIncrByFloatAsRedis: INCRBYFLOAT's sums are redis-server 7.0.15's (on x86-64:
// a long double, %.17Lf without trailing zeros), digit for digit; these were read from it.
func TestKeyspaceIncrByFloatAsRedis(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{})
	for _, c := range [][3]string{{"10.5", "0.1", "10.6"}, {"0", "3.0e3", "3000"}, {"1", "1e20", "100000000000000000000"}, {"0.1", "0.2", "0.3"}, {"5", "-5", "0"},
		{"1e300", "1", "1000000000000000000008997324079559193870523944273290747938260082321265646596180935755849152083750497190350372508614274835903592556184672983913096260520748646287327135641843653294084255107606016789726652932370030551382947620994540294772781889620606179267611627097410650567187386105690089424915104006144"},
		{"3", "0.333333333333333333", "3.33333333333333333"}} {
		ks.Set(0, []byte("f"), []byte(c[0]), &store.SetOpts{}, 0, nil)
		out, st := ks.IncrByFloat(0, []byte("f"), []byte(c[1]), 0, nil)
		if string(out) != c[2] {
			t.Errorf("%s + %s = %q %v, Redis %q", c[0], c[1], out, st, c[2])
		}
	}
}

// TestKeyspaceMaxKeys: at MaxKeys, every operation that would add a key answers
// KeyspaceFull and changes nothing; existing keys still change; a name over MaxKeyLen is
// refused.
func TestKeyspaceMaxKeys(t *testing.T) {
	ks := store.NewKeyspace(store.KeyspaceConfig{MaxKeys: 2})
	o := &store.SetOpts{}
	ks.Set(0, []byte("a"), []byte("1"), o, 0, nil)
	ks.Set(1, []byte("b"), []byte("1"), o, 0, nil)
	if r, _ := ks.Set(0, []byte("c"), []byte("1"), o, 0, nil); r.St != store.KeyspaceFull || r.Done {
		t.Fatalf("SET past MaxKeys: %+v", r)
	}
	if _, st := ks.IncrBy(0, []byte("c"), 1, 0); st != store.KeyspaceFull {
		t.Fatalf("INCR past MaxKeys: %v", st)
	}
	if _, st := ks.Append(0, []byte("c"), []byte("x"), 0); st != store.KeyspaceFull {
		t.Fatalf("APPEND past MaxKeys: %v", st)
	}
	if _, st := ks.HSet(0, []byte("c"), [][]byte{[]byte("f"), []byte("v")}, 0); st != store.KeyspaceFull {
		t.Fatalf("HSET past MaxKeys: %v", st)
	}
	if st := ks.MSet(0, [][]byte{[]byte("a"), []byte("2"), []byte("c"), []byte("2")}, 0); st != store.KeyspaceFull {
		t.Fatalf("MSET past MaxKeys: %v", st)
	}
	if v, _ := ks.Get(0, []byte("a"), 0, nil); string(v) != "1" {
		t.Fatalf("a refused MSET set a to %q", v)
	}
	if n, st := ks.IncrBy(0, []byte("a"), 1, 0); n != 2 || st != store.KeyspaceOK {
		t.Fatalf("INCR of an existing key at MaxKeys: %d %v", n, st)
	}
	long := make([]byte, store.MaxKeyLen+1)
	if r, _ := ks.Set(0, long, []byte("1"), o, 0, nil); r.St != store.KeyspaceTooLong {
		t.Fatalf("SET of a %d-byte name: %+v", len(long), r)
	}
	if ks.Keys() != 2 || ks.Exists(0, [][]byte{[]byte("c")}, 0) != 0 {
		t.Fatalf("%d keys", ks.Keys())
	}
	ksCheck(t, ks)
}
