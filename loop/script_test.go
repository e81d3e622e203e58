package loop

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// goRedis returns a go-redis client of the test server's slock port.
func goRedis(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: replyWait,
		ReadTimeout: replyWait})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// TestScriptEval: EVAL and EVALSHA over go-redis, with the replies converted as Redis does,
// SCRIPT LOAD, EXISTS and FLUSH, and NOSCRIPT after a flush.
func TestScriptEval(t *testing.T) {
	ts := startSlock(t, nil)
	ctx := context.Background()
	rdb := goRedis(t, ts.slockAddr)

	v, err := rdb.Eval(ctx, "return redis.call('SET', KEYS[1], ARGV[1])", []string{"k"}, "v1").Result()
	if err != nil || v != "OK" {
		t.Fatalf("EVAL SET: %v, %v", v, err)
	}
	if got := rdb.Get(ctx, "k").Val(); got != "v1" {
		t.Fatalf("GET after the script's SET: %q", got)
	}
	v, err = rdb.Eval(ctx, "return {1, 'two', 3.9, redis.call('GET', KEYS[1]), false, {ok='fine'}}", []string{"k"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(strings.Fields(strings.Trim(strings.ReplaceAll(fmtAny(v), ",", " "), "[]")), " "),
		"1 two 3 v1 <nil> fine"; got != want {
		t.Fatalf("conversions: got %q, want %q", got, want)
	}

	sha, err := rdb.ScriptLoad(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])").Result()
	if err != nil || len(sha) != 40 {
		t.Fatalf("SCRIPT LOAD: %q, %v", sha, err)
	}
	for i, want := range []int64{5, 10} {
		n, err := rdb.EvalSha(ctx, sha, []string{"n"}, 5).Int64()
		if err != nil || n != want {
			t.Fatalf("EVALSHA %d: %d, %v", i, n, err)
		}
	}
	ex, err := rdb.ScriptExists(ctx, sha, strings.Repeat("0", 40), strings.ToUpper(sha)).Result()
	if err != nil || len(ex) != 3 || !ex[0] || ex[1] || !ex[2] {
		t.Fatalf("SCRIPT EXISTS: %v, %v", ex, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = rdb.EvalSha(ctx, sha, []string{"n"}, 5).Result()
	if err == nil || err.Error() != "NOSCRIPT No matching script. Please use EVAL." {
		t.Fatalf("EVALSHA after SCRIPT FLUSH: %v", err)
	}
	// go-redis's Script runs EVALSHA and falls back to EVAL on NOSCRIPT.
	s := redis.NewScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
	if n, err := s.Run(ctx, rdb, []string{"n"}, 1).Int64(); err != nil || n != 11 {
		t.Fatalf("Script.Run: %d, %v", n, err)
	}
	ts.healthy(t)
}

func fmtAny(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			b.WriteString("[")
			for i, e := range v {
				if i > 0 {
					b.WriteString(" ")
				}
				walk(e)
			}
			b.WriteString("]")
		case nil:
			b.WriteString("<nil>")
		case string:
			b.WriteString(v)
		case int64:
			b.WriteString(strings.TrimSpace(strings.Repeat(" ", 0) + itoa(v)))
		default:
			b.WriteString("?")
		}
	}
	walk(v)
	return b.String()
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	var d []byte
	for n != 0 {
		r := n % 10
		if r < 0 {
			r = -r
		}
		d = append([]byte{byte('0' + r)}, d...)
		n /= 10
	}
	if neg {
		return "-" + string(d)
	}
	return string(d)
}

// TestScriptErrors: redis.call raises a command's error and stops the script, redis.pcall
// returns it; a script that writes then fails keeps its write (as Redis: no rollback);
// EVAL_RO refuses a write; commands a script may not run are refused; Lua errors carry
// Redis 7.0's "script: sha, on @user_script:line." suffix.
func TestScriptErrors(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`+OK`, "SET", "s", "abc"),
		kv(`-ERR value is not an integer or out of range script: c243b9f46db13ba8f69da41b45a77708832babed, on @user_script:1.`,
			"EVAL", "return redis.call('incr','s')", "0"),
		kv(`-ERR value is not an integer or out of range`, "EVAL", "return redis.pcall('incr','s')", "0"),
		kv(`"caught"`, "EVAL", "local r = redis.pcall('incr','s'); if r.err then return 'caught' end", "0"),
		kv(`-ERR user_script:1: boom script: 1212d86f987c760471ba1e9f969b625da59d3caf, on @user_script:1.`,
			"EVAL", "redis.call('set','w','written'); error('boom')", "0"),
		kv(`"written"`, "GET", "w"),
		kv(`-ERR Write commands are not allowed from read-only scripts. script: ff967d0ae0e68b4f9e360fa91c54598bc25ad9b6, on @user_script:1.`,
			"EVAL_RO", "return redis.call('set','a','b')", "0"),
		kv(`"abc"`, "EVAL_RO", "return redis.call('get',KEYS[1])", "1", "s"),
		kv(`-ERR This Redis command is not allowed from script script: 1e5046f3a9119d3dc9cf5824428b6d9fedd305d2, on @user_script:1.`,
			"EVAL", "return redis.call('eval','return 1','0')", "0"),
		kv(`-ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.`,
			"EVAL", "return redis.call('nosuch')", "0"),
		kv(`-ERR Number of keys can't be greater than number of args`, "EVAL", "return 1", "2", "a"),
		kv(`-ERR Number of keys can't be negative`, "EVAL", "return 1", "-1"),
		kv(`-ERR value is not an integer or out of range`, "EVAL", "return 1", "x"),
		kv(`-NOSCRIPT No matching script. Please use EVAL.`, "EVALSHA", strings.Repeat("0", 40), "0"),
		kv(`-ERR user_script:1: Script attempted to access nonexistent global variable 'y' script: e278681ed961e2fb52881313e5c90fdd93749940, on @user_script:1.`,
			"EVAL", "return y", "0"),
		kv(`-ERR user_script:1: Attempt to modify a readonly table script: 34bce5f775de97f557a34088509c8bfe1ea17e52, on @user_script:1.`,
			"EVAL", "x = 1", "0"),
		kv(`+OK`, "SELECT", "0"),
	})
	// A script's SELECT is its own: the connection stays in its database.
	runKV(t, rc, []kvStep{
		kv(`+OK`, "EVAL", "redis.call('select','3'); return redis.call('set','indb3','x')", "0"),
		kv(`$-1`, "GET", "indb3"),
		kv(`+OK`, "SELECT", "3"),
		kv(`"x"`, "GET", "indb3"),
	})
	ts.healthy(t)
}

// TestScriptRunaway: a script that never ends is stopped at lua-time-limit with a BUSY error,
// and another client is served right after, not after the script would have ended.
func TestScriptRunaway(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.LuaTimeLimit = 50 * time.Millisecond })
	ctx := context.Background()
	rdb := goRedis(t, ts.slockAddr)
	other := goRedis(t, ts.slockAddr)
	if err := other.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rdb.Eval(ctx, "redis.call('set','before','1') while true do end", nil).Err() }()
	time.Sleep(10 * time.Millisecond) // let the script start
	start := time.Now()
	if err := other.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 50*time.Millisecond+time.Second {
		t.Fatalf("another client waited %v for a script stopped at 50 ms", d)
	}
	err := <-done
	if err == nil || !strings.HasPrefix(err.Error(), "BUSY script ran past lua-time-limit (50 ms)") {
		t.Fatalf("runaway script: %v", err)
	}
	if got := other.Get(ctx, "before").Val(); got != "1" {
		t.Fatalf("the write before the stop: %q (it stays)", got)
	}
	var re redis.Error
	if !errors.As(err, &re) {
		t.Fatalf("not a Redis error reply: %T", err)
	}
	ts.healthy(t)
}
