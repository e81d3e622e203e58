package loop

import (
	"fmt"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestCASCommands: DELEX, DELIFEQ, SET ... IF*, DIGEST, GETDEL, GETEX and WAIT over TCP, as
// Redis 8.4 (Valkey 9 for DELIFEQ, Redis 7 for the others) answers them; the release of a
// lock by compare-and-delete from another connection.
func TestCASCommands(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	runKV(t, a, []kvStep{kv(`+OK`, "SET", "lk", "tok", "NX", "PX", "30000")})
	runKV(t, a, []kvStep{
		kv(`+OK`, "SET", "hw", "Hello world"),
		kv(`"b6acb9d84a38ff74"`, "DIGEST", "hw"),
		kv(`$-1`, "DIGEST", "nokey"),
		kv(`:1`, "HSET", "h", "f", "1"),
		kv(`-WRONGTYPE Operation against a key holding the wrong kind of value`, "DIGEST", "h"),
		kv(`:5`, "INCRBY", "n", "5"),
		kv(`"`+digestOf("5")+`"`, "DIGEST", "n"), // a counter digests as GET shows it
	})
	runKV(t, b, []kvStep{
		kv(`:0`, "DELEX", "lk", "IFEQ", "other"),
		kv(`:0`, "DELEX", "lk", "IFNE", "tok"),
		kv(`:0`, "DELEX", "lk", "IFDEQ", digestOf("other")),
		kv(`:0`, "DELIFEQ", "lk", "other"),
		kv(`"tok"`, "GET", "lk"),
		kv(`+OK`, "SET", "lk", "tok", "IFEQ", "tok", "PX", "60000"), // a refresh by compare-and-set
		kv(`$-1`, "SET", "lk", "x", "IFEQ", "other"),
		kv(`"tok"`, "SET", "lk", "x", "IFEQ", "other", "GET"),
		kv(`"tok"`, "GET", "lk"),
		kv(`:1`, "DELEX", "lk", "IFDEQ", upperDigest("tok")),
		kv(`:0`, "EXISTS", "lk"),
		kv(`$-1`, "SET", "lk", "x", "IFEQ", "x"), // IFEQ on no key: not set
		kv(`+OK`, "SET", "lk", "x", "IFNE", "y"), // IFNE on no key: set
		kv(`$-1`, "SET", "lk", "x", "IFDNE", digestOf("x")),
		kv(`+OK`, "SET", "lk", "y", "IFDEQ", digestOf("x")),
		kv(`:1`, "DELIFEQ", "lk", "y"),
		kv(`:0`, "DELIFEQ", "lk", "y"),
		kv(`-ERR syntax error`, "SET", "lk", "x", "NX", "IFEQ", "y"),
		kv(`-ERR syntax error`, "SET", "lk", "x", "IFEQ", "y", "XX"),
		kv(`-ERR syntax error`, "DELEX", "lk", "IFEQ"),
		kv(`-ERR syntax error`, "DELEX", "lk", "IFXX", "v"),
		kv(`-ERR wrong number of arguments for 'delifeq' command`, "DELIFEQ", "lk"),
		kv(`-WRONGTYPE Operation against a key holding the wrong kind of value`, "DELEX", "h", "IFEQ", "1"),
		kv(`-WRONGTYPE Operation against a key holding the wrong kind of value`, "DELIFEQ", "h", "1"),
		kv(`:1`, "DELEX", "h"), // no condition: DEL
		kv(`:1`, "DELEX", "n", "IFEQ", "5"),
		// GETDEL and GETEX.
		kv(`+OK`, "SET", "g", "v"),
		kv(`"v"`, "GETEX", "g", "PX", "50000"),
		kv(`"v"`, "GETEX", "g"),
		kv(`"v"`, "GETEX", "g", "PERSIST"),
		kv(`:-1`, "TTL", "g"),
		kv(`"v"`, "GETEX", "g", "EX", "100"),
		kv(`:100`, "TTL", "g"),
		kv(`-ERR invalid expire time in 'getex' command`, "GETEX", "g", "EX", "0"),
		kv(`$-1`, "GETEX", "nokey", "EX", "0"),
		kv(`-ERR syntax error`, "GETEX", "g", "EX", "1", "PERSIST"),
		kv(`"v"`, "GETDEL", "g"),
		kv(`$-1`, "GETDEL", "g"),
		kv(`:0`, "EXISTS", "g"),
		kv(`+OK`, "SET", "g", "v"),
		kv(`"v"`, "GETEX", "g", "PXAT", "1"), // a time past: gone
		kv(`:0`, "EXISTS", "g"),
		kv(`:0`, "WAIT", "0", "0"),
		kv(`:0`, "WAIT", "1", "100"),
		kv(`-ERR timeout is negative`, "WAIT", "0", "-1"),
		kv(`-ERR value is not an integer or out of range`, "WAIT", "x", "y"),
		kv(`-ERR timeout is not an integer or out of range`, "WAIT", "0", "y"),
		kv(`-ERR value is not an integer or out of range`, "WAIT", "x", "0"),
	})
	// A key a LOCK holds under another LockId is not deleted by a matching DELEX either.
	expectText(t, parseTextLock(t, a.cmd("LOCK", "held", "EXPRIED", "60", "SET", "v")), "0", "1", "1", "1", "1")
	runKV(t, b, []kvStep{kv(`:0`, "DELEX", "held", "IFEQ", "v"), kv(`$-1`, "GETDEL", "held"), kv(`$-1`, "SET", "held", "w", "IFEQ", "v"), kv(`"v"`, "GET", "held")})
	ts.healthy(t)
}

// digestOf is DIGEST of s, computed here apart from the server's code.
func digestOf(s string) string { return fmt.Sprintf("%016x", xxh3.HashString(s)) }

func upperDigest(s string) string {
	d := []byte(digestOf(s))
	for i, c := range d {
		if 'a' <= c && c <= 'f' {
			d[i] = c - 'a' + 'A'
		}
	}
	return string(d)
}
