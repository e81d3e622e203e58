package loop

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/resp"
)

// This file tests the Redis path on store.Keyspace (Config.RedisKeyspace, ksredis.go).

// newKSPathServer is newKVPathServer with the Redis path on the keyspace (the log on when
// dir is not empty).
func newKSPathServer(tb testing.TB, dir string) (*Server, *fakeConn) {
	tb.Helper()
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}}
	cfg.RedisKeyspace = true
	cfg.DataDir = dir
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.openLog(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.closeLog)
	fc := &fakeConn{}
	cs := &conn{c: fc, owner: 1, proto: ProtoSlock, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	fc.ctx = cs
	s.ct.conns[cs.owner] = cs
	return s, fc
}

// ksBatch is the hot path of issue 32 over keys named as redis-benchmark names them: SET,
// GET, INCR, SET NX PX (a lock library's acquire) and DEL (its release), 16 of each.
func ksBatch() []byte {
	var b []byte
	for i := range 16 {
		k := fmt.Sprintf("key:%012d", i%4)
		b = resp.AppendCommand(b, "SET", k, "xxx")
		b = resp.AppendCommand(b, "GET", k)
		b = resp.AppendCommand(b, "INCR", "counter:"+k)
		b = resp.AppendCommand(b, "SET", "lock:"+k, "tok", "NX", "PX", "30000")
		b = resp.AppendCommand(b, "DEL", "lock:"+k)
	}
	return b
}

// The keyspace path allocates nothing once warm: parse, Keyspace operation and reply, and
// with the log on its records framed as aof kind 6 and handed to the writer.
func TestKeyspacePathDoesNotAllocate(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s, fc := newKSPathServer(t, dir)
		batch := ksBatch()
		serve := func() {
			fc.in = batch
			if s.OnTraffic(fc) != gnet.None {
				t.Fatal("connection closed")
			}
			s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq}) // the writer's report
		}
		for range 3 {
			serve()
		}
		fc.written = 0
		if allocs := testing.AllocsPerRun(200, serve); allocs != 0 {
			t.Fatalf("log %v: %v allocations per batch of 80 commands", dir != "", allocs)
		}
		if len(fc.in) != 0 || fc.written == 0 {
			t.Fatalf("batch not consumed (%d left) or nothing written", len(fc.in))
		}
		if dir != "" && s.persist.seq == 0 {
			t.Fatal("nothing was logged")
		}
		if n := s.st.store.Keyspace.Keys(); n != 8 {
			t.Fatalf("%d keys in the keyspace, want 8 (4 strings, 4 counters; the locks deleted)", n)
		}
		if v, _ := s.st.locks.State(0); v.KeyCount != 0 {
			t.Fatalf("%d keys in store.Locks: the Redis path still makes lock keys", v.KeyCount)
		}
	}
}

// BenchmarkKeyspacePath is BenchmarkKVPath on the keyspace: one command of ksBatch an op.
func BenchmarkKeyspacePath(b *testing.B) {
	for _, log := range []bool{false, true} {
		name, dir := "memory", ""
		if log {
			name, dir = "aof", b.TempDir()
		}
		b.Run(name, func(b *testing.B) {
			s, fc := newKSPathServer(b, dir)
			batch := ksBatch()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 80 {
				fc.in = batch
				s.OnTraffic(fc)
				s.logged(aof.Progress{Written: s.persist.seq, Synced: s.persist.seq})
			}
		})
	}
}

// A Redis key costs what the keyspace's entry costs, not a lock's: 20,000 SETs of 3-byte
// values over TCP (keys as redis-benchmark names them) grow the store by less than 150
// bytes a key. As lock commands on store.Locks they cost about 630 (issue 32).
func TestKeyspaceRedisBytesPerKey(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.RedisKeyspace = true })
	rc := dialResp(t, ts.slockAddr)
	var before, after int64
	rc.cmd("PING") // the loop has seen a connection (onLoop)
	ts.onLoop(t, func() { before = ts.st.store.Bytes() })
	const n = 20_000
	var b []byte
	for i := range n {
		b = resp.AppendCommand(b, "SET", fmt.Sprintf("key:%012d", i), "xxx")
		if len(b) > 64<<10 || i == n-1 {
			rc.write(b)
			b = b[:0]
		}
	}
	for range n {
		if r := rc.reply(); showResp(r) != "+OK" {
			t.Fatalf("SET: %s", showResp(r))
		}
	}
	if r := rc.cmd("DBSIZE"); r.Int != n {
		t.Fatalf("DBSIZE %s, want %d", showResp(r), n)
	}
	ts.onLoop(t, func() { after = ts.st.store.Bytes() })
	if per := float64(after-before) / n; per > 150 {
		t.Fatalf("%.1f store bytes a key, want at most 150", per)
	} else {
		t.Logf("%.1f store bytes a key", per)
	}
}

// The Redis tests of this package, run again with the Redis path on the keyspace: same
// replies over TCP, from another store.
func TestKeyspaceRedisSuite(t *testing.T) {
	tests := []struct {
		name string
		f    func(*testing.T)
	}{
		{"RedisKeysAnyConnection", TestRedisKeysAnyConnection},
		{"SlockKVCommands", TestSlockKVCommands},
		{"RedisPy", TestRedisPy},
		{"PersistRewriteUnderLoad", TestPersistRewriteUnderLoad},
		{"NotifyEvents", TestNotifyEvents},
		{"SlockKVKeys", TestSlockKVKeys},
		{"FencingTokens", TestFencingTokens},
		{"RedisMultiExec", TestRedisMultiExec},
		{"RedisMultiAtomic", TestRedisMultiAtomic},
		{"RedisReadYourWrites", TestRedisReadYourWrites},
		{"RedisExecBigReplies", TestRedisExecBigReplies},
		{"RedisMGetMSet", TestRedisMGetMSet},
	}
	old := testKeyspace
	testKeyspace = true
	defer func() { testKeyspace = old }()
	for _, tc := range tests {
		t.Run(tc.name, tc.f)
	}
}

// TestKeyspaceLogRestart: with the Redis path on the keyspace, its changes are logged as
// keyspace records (aof kind 6) and come back after a restart: strings, counters, hashes,
// expiries, deletions, fences and flushes, in every database.
func TestKeyspaceLogRestart(t *testing.T) {
	dir := t.TempDir()
	mod := func(c *Config) { c.RedisKeyspace = true }
	ts, stop := startPersist(t, dir, mod)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`+OK`, "SET", "a", "alpha"),
		kv(`:5`, "INCRBY", "c", "5"),
		kv(`+OK`, "SET", "e", "v", "EX", "100"),
		kv(`+OK`, "SET", "gone", "v"),
		kv(`:1`, "DEL", "gone"),
		kv(`+OK`, "SET", "past", "v", "PXAT", "1"),
		kv(`+OK`, "SET", "f", "v", "FENCE", "7"),
		kv(`:6`, "APPEND", "a", "!"),
		kv(`+OK`, "SELECT", "7"),
		kv(`+OK`, "SET", "in7", "seven"),
		kv(`+OK`, "SET", "flushed", "x"),
		kv(`+OK`, "FLUSHDB"),
		kv(`+OK`, "SET", "after", "y"),
		kv(`+OK`, "SELECT", "0"),
		kv(`:3`, "HINCRBY", "g", "up", "3"),
		kv(`:2`, "HSET", "g", "down", "1", "views", "10"),
		kv(`:1`, "HDEL", "g", "down"),
	})
	stop()
	var found bool
	recs := 0
	if err := aofKinds(filepath.Join(dir, logName), func(kind byte) {
		found = found || kind == 6
		recs++
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("no keyspace record among the log's %d", recs)
	}

	ts, stop = startPersist(t, dir, mod)
	defer stop()
	rc = dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`"alpha!"`, "GET", "a"),
		kv(`"5"`, "GET", "c"),
		kv(`:6`, "INCR", "c"),
		kv(`"v"`, "GET", "e"),
		kv(`$-1`, "GET", "gone"),
		kv(`$-1`, "GET", "past"),
		kv(`:7`, "GETFENCE", "f"),
		kv(`["up" "3" "views" "10"]`, "HGETALL", "g"),
		kv(`:5`, "DBSIZE"), // a, c, e, f, g
		kv(`+OK`, "SELECT", "7"),
		kv(`$-1`, "GET", "in7"),
		kv(`$-1`, "GET", "flushed"),
		kv(`"y"`, "GET", "after"),
		kv(`+OK`, "SELECT", "0"),
	})
	if r := rc.cmd("TTL", "e"); r.Kind != ':' || r.Int < 95 || r.Int > 100 {
		t.Fatalf("TTL e after restart: %s", showResp(r))
	}
}

// aofKinds calls f with the kind of each record of the append-only log at path.
func aofKinds(path string, f func(kind byte)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b = b[len(aof.Header):]
	for len(b) >= 9 {
		n := int(binary.LittleEndian.Uint32(b))
		if len(b) < 8+n {
			return fmt.Errorf("record cut off")
		}
		f(b[8])
		b = b[8+n:]
	}
	return nil
}

// TestKeyspaceOldLogMoved: a log written before the keyspace (Redis values as store.Locks
// key states) replays, and its values are then the keyspace's.
func TestKeyspaceOldLogMoved(t *testing.T) {
	dir := t.TempDir()
	ts, stop := startPersist(t, dir, nil) // today's default path: values in the Locks
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`+OK`, "SET", "a", "alpha"),
		kv(`:5`, "INCRBY", "c", "5"),
		kv(`+OK`, "SET", "e", "v", "EX", "100"),
		kv(`:2`, "HSET", "g", "up", "3", "down", "1"),
	})
	stop()
	mod := func(c *Config) { c.RedisKeyspace = true }
	for round := range 2 { // moved at the first start; found where they are at the second
		ts, stop = startPersist(t, dir, mod)
		rc = dialResp(t, ts.slockAddr)
		runKV(t, rc, []kvStep{
			kv(`"alpha"`, "GET", "a"),
			kv(`"5"`, "GET", "c"),
			kv(`"v"`, "GET", "e"),
			kv(`"3"`, "HGET", "g", "up"),
			kv(`:2`, "HLEN", "g"),
		})
		if r := rc.cmd("TTL", "e"); r.Int < 90 || r.Int > 100 {
			t.Fatalf("round %d: TTL e = %s, want about 100", round, showResp(r))
		}
		// The keyspace path reads only the keyspace: the values are there, four keys.
		runKV(t, rc, []kvStep{kv(`:4`, "DBSIZE")})
		stop() // journals what is pending: the move's records
	}
	var kind6 bool
	if err := aofKinds(filepath.Join(dir, logName), func(kind byte) { kind6 = kind6 || kind == 6 }); err != nil {
		t.Fatal(err)
	}
	if !kind6 {
		t.Fatal("the moved keys' records are not in the log")
	}
}

// A client cannot grow the keyspace past --max-objects keys: a write that would add one
// answers an error and adds nothing; the keys there can still be written and deleted.
func TestKeyspaceMaxObjects(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.RedisKeyspace, c.MaxObjects = true, 3 })
	rc := dialResp(t, ts.slockAddr)
	full := `-ERR max number of keys reached (--max-objects): the key was not added`
	runKV(t, rc, []kvStep{
		kv(`+OK`, "SET", "a", "1"),
		kv(`:1`, "INCR", "b"),
		kv(`:1`, "HSET", "c", "f", "v"),
		kv(full, "SET", "d", "1"),
		kv(full, "INCR", "d"),
		kv(full, "HSET", "d", "f", "v"),
		kv(full, "MSET", "a", "2", "d", "1"),
		kv(`"1"`, "GET", "a"), // MSET set none
		kv(`:0`, "EXISTS", "d"),
		kv(`+OK`, "SET", "a", "x"),
		kv(`:2`, "INCR", "b"),
		kv(`:1`, "DEL", "a"),
		kv(`+OK`, "SET", "d", "1"),
		kv(`:3`, "DBSIZE"),
	})
}
