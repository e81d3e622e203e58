package loop

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// Issue 30, item 2: every check a command gets on the wire applies to redis.call too, as in
// Redis 7.0 (texts recorded from redis-server 7.0.15; e2e/acl_test.go compares them live).

// scriptErr is the reply of a script whose redis.call of body failed with text: Redis's
// wrapping, with the script's SHA1 and line.
func scriptErr(text, body string) string {
	return "-" + text + " script: " + sha1hex(body) + ", on @user_script:1.\r\n"
}

func sha1hex(body string) string {
	h := sha1.Sum([]byte(body))
	return hex.EncodeToString(h[:])
}

// TestScriptACLChannels: a user limited to &app:* is refused PUBLISH secretchan on the wire,
// in MULTI and from a script (EVAL and EVAL_RO, redis.call and redis.pcall), and no message
// reaches the other users' subscribers, forged keyspace events included.
func TestScriptACLChannels(t *testing.T) {
	ts, _ := aclServer(t, "user default on nopass ~* &* +@all\nuser app on >apppw ~* &app:* +@all\n", nil)
	sub := dialRaw(t, ts.slockAddr)
	sub.send("SUBSCRIBE", "secretchan")
	sub.expect(subReply("subscribe", "secretchan", 1))
	sub.send("PSUBSCRIBE", "__keyspace@0__:*")
	sub.expect(subReply("psubscribe", "__keyspace@0__:*", 2))
	sub.send("SUBSCRIBE", "app:news")
	sub.expect(subReply("subscribe", "app:news", 3))

	app := dialRaw(t, ts.slockAddr)
	app.send("AUTH", "app", "apppw")
	app.expect("+OK\r\n")
	const wire = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n"
	const inScript = "ERR The user executing the script can't publish to the channel mentioned in the command"
	app.send("PUBLISH", "secretchan", "x")
	app.expect(wire)
	app.send("MULTI")
	app.expect("+OK\r\n")
	app.send("PUBLISH", "secretchan", "x")
	app.expect(wire)
	app.send("EXEC")
	app.expect("-EXECABORT Transaction discarded because of previous errors.\r\n")

	for _, body := range []string{
		"return redis.call('PUBLISH','secretchan','x')",
		"return redis.call('publish','__keyspace@0__:secret','set')",
	} {
		app.send("EVAL", body, "0")
		app.expect(scriptErr(inScript, body))
		app.send("EVAL_RO", body, "0") // the ACL is checked before the read-only rule, as in Redis
		app.expect(scriptErr(inScript, body))
	}
	pcall := "return redis.pcall('PUBLISH','secretchan','x')"
	app.send("EVAL", pcall, "0")
	app.expect("-" + inScript + "\r\n")
	// Its own channels: allowed.
	own := "return redis.call('PUBLISH','app:news','hello')"
	app.send("EVAL", own, "0")
	app.expect(":1\r\n")
	sub.expect(message("app:news", "hello"))

	// Nothing else reached the subscriber: the next message it gets is the default user's.
	def := dialRaw(t, ts.slockAddr)
	def.send("PUBLISH", "secretchan", "marker")
	def.expect(":1\r\n")
	sub.expect(message("secretchan", "marker"))
	sub.quiet(50 * time.Millisecond)
	ts.healthy(t)
}

// TestScriptReadOnlyPublish: a read-only script (EVAL_RO, EVALSHA_RO) may not PUBLISH, to
// any channel: Redis 7.0 counts may_replicate commands as writes there. Nothing is delivered.
func TestScriptReadOnlyPublish(t *testing.T) {
	ts := startSlock(t, nil)
	sub := dialRaw(t, ts.slockAddr)
	sub.send("SUBSCRIBE", "ch")
	sub.expect(subReply("subscribe", "ch", 1))
	r := dialRaw(t, ts.slockAddr)
	body := "return redis.call('PUBLISH','ch','from-ro')"
	r.send("EVAL_RO", body, "0")
	r.expect(scriptErr("ERR Write commands are not allowed from read-only scripts.", body))
	r.send("SCRIPT", "LOAD", body)
	r.expect(bulk(sha1hex(body)))
	r.send("EVALSHA_RO", sha1hex(body), "0")
	r.expect(scriptErr("ERR Write commands are not allowed from read-only scripts.", body))
	r.send("EVAL_RO", "return redis.pcall('PUBLISH','ch','from-ro')", "0")
	r.expect("-ERR Write commands are not allowed from read-only scripts.\r\n")
	r.send("EVAL", body, "0") // a script that may write may publish
	r.expect(":1\r\n")
	sub.expect(message("ch", "from-ro"))
	sub.quiet(50 * time.Millisecond)
	ts.healthy(t)
}

// TestScriptOOM: beyond --max-memory a redis.call of a denyoom command answers Redis's -OOM
// inside the script (wrapped as Redis wraps it); reads and deletes still run.
func TestScriptOOM(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxMemory = 16 << 20 })
	r := dialRaw(t, ts.slockAddr)
	r.send("SET", "big", strings.Repeat("v", 64<<10))
	r.expect("+OK\r\n")
	ts.onLoop(t, func() { ts.cfg.MaxMemory = 32 << 10 }) // the store alone is over it
	set := "return redis.call('set','k','v')"
	r.send("EVAL", set, "0")
	r.expect(scriptErr(oomText, set))
	r.send("EVAL", "return redis.pcall('incr','n')", "0")
	r.expect("-" + oomText + "\r\n")
	r.send("EVAL", "return redis.call('strlen','big')", "0")
	r.expect(":65536\r\n")
	r.send("EVAL", "return redis.call('exists','k','n')", "0")
	r.expect(":0\r\n")
	r.send("EVAL", "return redis.call('del','big')", "0")
	r.expect(":1\r\n")
	ts.healthy(t)
}
