package loop

import (
	"testing"
)

// TestRedisCommandTable: arity errors come from the command table, in Redis's words, for
// every family; slock's own commands keep their own count errors.
func TestRedisCommandTable(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`-ERR wrong number of arguments for 'get' command`, "GET"),
		kv(`-ERR wrong number of arguments for 'get' command`, "get", "a", "b"),
		kv(`-ERR wrong number of arguments for 'echo' command`, "ECHO", "a", "b"),
		kv(`-ERR wrong number of arguments for 'select' command`, "SELECT"),
		kv(`-ERR wrong number of arguments for 'incrby' command`, "INCRBY", "k"),
		kv(`-ERR wrong number of arguments for 'config' command`, "CONFIG"),
		kv(`-ERR wrong number of arguments for 'dbsize' command`, "DBSIZE", "x"),
		kv(`-ERR Command Parse Args Count Error`, "LOCK"),
		kv(`-ERR Command Parse Args Count Error`, "LOCK", "k", "x"),
		kv(`-ERR Unknown Command`, "NOSUCH"),
		kv(`+PONG`, "ping"),
		kv(`+OK`, "SET", "k", "v"),
		kv(`"v"`, "GET", "k"),
	})
	ts.healthy(t)
}
