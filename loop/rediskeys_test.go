package loop

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// TestRedisKeysAnyConnection is issue 22's failure: a key made by SET NX PX (a Redis lock
// library's acquire) is a Redis key. Its owner's PEXPIRE extends it, and another
// connection (a library's pool hands out any) may read, expire, overwrite or delete it,
// also after the connection that made it has closed.
func TestRedisKeysAnyConnection(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	runKV(t, a, []kvStep{
		kv(`+OK`, "SET", "k", "tok", "NX", "PX", "5000"),
		kv(`$-1`, "SET", "k", "tok", "NX", "PX", "5000"), // its own second NX: the key exists
		kv(`:0`, "SETNX", "k", "x"),
		kv(`:1`, "PEXPIRE", "k", "20000"),
	})
	if r := a.cmd("PTTL", "k"); r.Kind != ':' || r.Int <= 19000 || r.Int > 20000 {
		t.Fatalf("PTTL after the owner's PEXPIRE 20000: %s", showResp(r))
	}
	if r := b.cmd("PTTL", "k"); r.Kind != ':' || r.Int <= 19000 || r.Int > 20000 {
		t.Fatalf("another connection's PTTL: %s", showResp(r))
	}
	runKV(t, b, []kvStep{
		kv(`$-1`, "SET", "k", "other", "NX"),
		kv(`:0`, "SETNX", "k", "other"),
		kv(`:0`, "MSETNX", "k", "other", "k2", "x"),
		kv(`"tok"`, "GET", "k"),
		kv(`+OK`, "SET", "k", "tok2", "XX"),
		kv(`"tok2"`, "GETSET", "k", "tok3"),
		kv(`:1`, "EXPIRE", "k", "100"),
		kv(`:100`, "TTL", "k"),
		kv(`:1`, "PERSIST", "k"),
		kv(`:-1`, "TTL", "k"),
		kv(`:5`, "APPEND", "k", "x"),
		kv(`:1`, "DEL", "k"),
		kv(`:0`, "EXISTS", "k"),
	})
	// SETNX and INCR, UNLINK from the other connection.
	runKV(t, a, []kvStep{kv(`:1`, "SETNX", "n", "1")})
	runKV(t, b, []kvStep{kv(`:2`, "INCR", "n"), kv(`:1`, "UNLINK", "n"), kv(`:1`, "SETNX", "n", "b")})
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "n")})
	// SET NX GET (Redis 7): the old value; the key is set only if it had none.
	runKV(t, a, []kvStep{kv(`$-1`, "SET", "g", "v1", "NX", "GET")})
	runKV(t, b, []kvStep{kv(`"v1"`, "SET", "g", "v2", "NX", "GET"), kv(`"v1"`, "GET", "g")})
	// The acquiring connection closes; another releases the lock.
	runKV(t, a, []kvStep{kv(`+OK`, "SET", "job", "tok", "NX", "PX", "30000")})
	_ = a.c.Close()
	time.Sleep(50 * time.Millisecond)
	runKV(t, b, []kvStep{kv(`"tok"`, "GET", "job"), kv(`:1`, "DEL", "job"), kv(`+OK`, "SET", "job", "t2", "NX", "PX", "30000")})
	ts.healthy(t)
}

// TestLocksAndDelFamilies checks the rule of docs/redis.md ("Locks and DEL") for a key touched by both Redis commands
// and slock's LOCK ("Locks and DEL"), one case at a time.
func TestLocksAndDelFamilies(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)

	// 1. A text LOCK under its own LockId (with a value): others read it but cannot
	// change, expire or delete it; its holder's DEL releases it.
	expectText(t, parseTextLock(t, a.cmd("LOCK", "k", "EXPRIED", "60", "SET", "v")), "0", "1", "1", "1", "1")
	runKV(t, b, []kvStep{
		kv(`"v"`, "GET", "k"),
		kv(`:1`, "EXISTS", "k"),
		kv(`$-1`, "SET", "k", "x"),
		kv(`$-1`, "SET", "k", "x", "XX"),
		kv(`$-1`, "SET", "k", "x", "NX"),
		kv(`:0`, "SETNX", "k", "x"),
		kv(`:0`, "MSETNX", "k", "x"),
		kv(`$-1`, "GETSET", "k", "x"),
		kv(`$-1`, "APPEND", "k", "x"),
		kv(`:0`, "EXPIRE", "k", "100"),
		kv(`:0`, "PERSIST", "k"),
		kv(`:0`, "DEL", "k"),
		kv(`:0`, "UNLINK", "k"),
		kv(`"v"`, "GET", "k"),
	})
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "k"), kv(`:0`, "EXISTS", "k")})
	runKV(t, b, []kvStep{kv(`+OK`, "SET", "k", "x")})

	// 2. A binary Lock: the same.
	bc := dialSlock(t, ts.slockAddr)
	l := newLock(bc, key16("bk"), 0, 60)
	l.Lock().want(slock.ResultOK)
	runKV(t, b, []kvStep{kv(`:0`, "DEL", "bk"), kv(`$-1`, "SET", "bk", "x"), kv(`$-1`, "SET", "bk", "x", "NX"), kv(`:0`, "SETNX", "bk", "x")})
	l.Unlock().want(slock.ResultOK)
	runKV(t, b, []kvStep{kv(`+OK`, "SET", "bk", "x"), kv(`:1`, "DEL", "bk")})

	// 3. CLIENT SLOCK ON: SETNX is slock's mutex, under a fresh LockId; only its holder's
	// DEL removes it. Without it, SETNX makes a Redis key, which anyone deletes.
	runKV(t, a, []kvStep{kv(`+OK`, "CLIENT", "SLOCK", "ON"), kv(`:1`, "SETNX", "m", "a")})
	runKV(t, b, []kvStep{kv(`:0`, "DEL", "m"), kv(`$-1`, "SET", "m", "x"), kv(`:0`, "EXPIRE", "m", "10"), kv(`"a"`, "GET", "m")})
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "m")})
	runKV(t, b, []kvStep{kv(`:1`, "SETNX", "m", "b")})
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "m"), kv(`+OK`, "CLIENT", "SLOCK", "OFF")})

	// 4. A LOCK on a Redis key waits (a Redis key is held under its own name) until the
	// key is deleted or expires; then the LOCK holds it, and case 1 applies.
	runKV(t, a, []kvStep{kv(`+OK`, "SET", "r", "v")})
	expectText(t, parseTextLock(t, b.cmd("LOCK", "r", "TIMEOUT", "0", "EXPRIED", "60")), "8", "1", "1", "0", "1")
	b.send("LOCK", "r", "TIMEOUT", "5", "EXPRIED", "60")
	b.silent(100 * time.Millisecond)
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "r")})
	expectText(t, parseTextLock(t, b.reply()), "0", "1", "1", "1", "1")
	runKV(t, a, []kvStep{kv(`$-1`, "SET", "r", "x"), kv(`:0`, "DEL", "r")})
	runKV(t, b, []kvStep{kv(`:1`, "DEL", "r")})
	runKV(t, a, []kvStep{kv(`+OK`, "SET", "r", "x")})
	ts.healthy(t)
}
