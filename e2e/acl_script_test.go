package e2e

// Issue 30, item 2: every check a command gets on the wire applies to redis.call too, as in
// Redis 7.0: command, key and channel permissions, read-only scripts, OOM. The same script
// lines go to redis-server (7.0) and tallyd, run with the same ACL file or memory budget,
// and must get the same replies, the script errors' wrapping (SHA1, line) included.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// aclScriptFile: pub may use keys app:* and channels app:*, everything but DEL and the
// dangerous commands.
const aclScriptFile = `user default on nopass ~* &* +@all
user pub on >pubpw ~app:* &app:* +@all -@dangerous -del
`

// TestACLDifferentialScripts: a user's command, key and channel permissions inside EVAL,
// EVALSHA, EVAL_RO and MULTI, and what reaches a subscriber, as redis-server answers them.
func TestACLDifferentialScripts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(aclScriptFile), 0o600); err != nil {
		t.Fatal(err)
	}
	refAddr, talAddr := rdStartRedis(t, "--aclfile", path), rdStartTallyd(t, "--aclfile", path)
	dual := func() *rdDual { return &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)} }
	def := dual()
	aclRun(def, c("FLUSHALL"), c("SET", "other", "v"), c("SET", "app:1", "v"))
	// A subscriber of the default user: secretchan, the keyspace events of db 0, app:c.
	sub := dual()
	aclRun(sub, c("SUBSCRIBE", "secretchan"), c("PSUBSCRIBE", "__keyspace@0__:*"), c("SUBSCRIBE", "app:c"))

	pub := dual()
	sha := sha1hex("return redis.call('publish','secretchan','x')")
	aclRun(pub, c("AUTH", "pub", "pubpw"),
		// Channels.
		c("PUBLISH", "secretchan", "x"), c("PUBLISH", "app:c", "wire"),
		c("EVAL", "return redis.call('PUBLISH','secretchan','x')", "0"),
		c("EVAL", "return redis.pcall('PUBLISH','secretchan','x')", "0"),
		c("EVAL", "local r = redis.pcall('publish','secretchan','x') return r['err']", "0"),
		c("EVAL", "return redis.call('publish','__keyspace@0__:secret','set')", "0"),
		c("EVAL_RO", "return redis.call('publish','secretchan','x')", "0"),
		c("EVAL_RO", "return redis.call('publish','__keyspace@0__:other','del')", "0"),
		c("SCRIPT", "LOAD", "return redis.call('publish','secretchan','x')"), c("EVALSHA", sha, "0"), c("EVALSHA_RO", sha, "0"),
		c("EVAL", "return redis.call('PUBLISH','app:c','script')", "0"),
		c("EVAL_RO", "return redis.call('PUBLISH','app:c','ro')", "0"),
		c("EVAL_RO", "return redis.pcall('PUBLISH','app:c','ro')", "0"),
		c("EVAL", "return redis.call('subscribe','app:c')", "0"),
		// Keys.
		c("EVAL", "return redis.call('get','app:1')", "0"), c("EVAL", "return redis.call('get','other')", "0"),
		c("EVAL", "return redis.pcall('set','other','x')", "0"), c("EVAL", "return redis.call('mget','app:1','other')", "0"),
		c("EVAL", "return redis.call('get', KEYS[1])", "1", "other"), c("EVAL_RO", "return redis.call('set','other','x')", "0"),
		c("EVAL_RO", "return redis.call('set','app:2','x')", "0"), c("EVAL", "return redis.call('set','app:2','x')", "0"),
		// Commands.
		c("EVAL", "return redis.call('del','app:1')", "0"), c("EVAL", "return redis.pcall('del','app:1')", "0"),
		c("EVAL", "return redis.call('flushall')", "0"), c("EVAL", "return redis.call('keys','*')", "0"),
		c("EVAL_RO", "return redis.call('del','other')", "0"),
		// A refusal halfway: what ran before it stays, as in Redis.
		c("EVAL", "redis.call('set','app:3','v') return redis.call('publish','secretchan','x')", "0"), c("GET", "app:3"),
		// In a transaction the script runs at EXEC and answers its error there.
		c("MULTI"), c("EVAL", "return redis.call('publish','secretchan','x')", "0"), c("PUBLISH", "app:c", "tx"), c("EXEC"),
		c("MULTI"), c("PUBLISH", "secretchan", "x"), c("EXEC"),
	)
	aclRun(def, c("GET", "other"), c("GET", "app:1"), c("GET", "app:2"), c("PUBLISH", "secretchan", "marker"))
	// The subscriber got only what the user may publish, then the marker: no message of a
	// refused PUBLISH, no forged keyspace event.
	var got []string
	for _, c := range []*rdConn{sub.ref, sub.tal} {
		var msgs []string
		for {
			m := c.reply(t)
			msgs = append(msgs, m)
			if strings.Contains(m, "marker") || len(msgs) > 20 {
				break
			}
		}
		got = append(got, strings.Join(msgs, "\n"))
	}
	if got[0] != got[1] {
		t.Errorf("the subscriber's messages differ:\n  redis-server %s\n  tallyd       %s", got[0], got[1])
	}
	if strings.Contains(got[1], "secretchan\" $\"x") || strings.Contains(got[1], "__keyspace@0__:secret") {
		t.Errorf("a refused PUBLISH reached the subscriber: %s", got[1])
	}
	t.Logf("%d cases compared; the subscriber got:\n%s", def.n+sub.n+pub.n, got[1])
}

// TestRedisDiffScriptOOM: beyond the memory budget (Redis's maxmemory, tallyd's --max-memory,
// both 16 MiB, filled by each side until it refuses) a denyoom command called from a script
// gets Redis's -OOM, wrapped as Redis wraps script errors; reads and deletes still run.
func TestRedisDiffScriptOOM(t *testing.T) {
	t.Parallel()
	refAddr := rdStartRedis(t, "--maxmemory", "16mb")
	talAddr := rdStartTallyd(t, "--max-memory", "16mb")
	d := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
	value := strings.Repeat("v", 1<<20-64) // under tallyd's --slock-max-data with its key
	for _, conn := range []*rdConn{d.ref, d.tal} {
		for i := 0; ; i++ {
			if i == 64 {
				t.Fatalf("%s (redis-server %s, tallyd %s): 64 SETs of 1 MiB stored under a 16 MiB budget", conn.c.RemoteAddr(), refAddr, talAddr)
			}
			conn.send(t, []string{"SET", "big" + strconv.Itoa(i), value})
			r := conn.reply(t)
			if strings.HasPrefix(r, "-OOM") {
				break
			}
			if r != "+OK" {
				t.Fatalf("%s: SET big%d: %s", conn.c.RemoteAddr(), i, r)
			}
		}
	}
	d.run(false,
		c("EVAL", "return redis.call('set','k','v')", "0"), c("EVAL", "return redis.pcall('set','k','v')", "0"),
		c("EVAL", "return redis.call('incr','n')", "0"), c("EVAL", "return redis.call('hset','h','f','v')", "0"),
		c("EVALSHA", sha1hex("return redis.call('set','k','v')"), "0"),
		c("EVAL", "return redis.call('get','big0') == false", "0"), c("EVAL", "return redis.call('exists','k','n','h')", "0"),
		c("EVAL", "return redis.call('publish','c','x')", "0"), c("EVAL_RO", "return redis.call('set','k','v')", "0"),
		c("SET", "k", "v"),
	)
	t.Logf("%d cases compared", d.n)
}
