package e2e

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
)

// TestRedisDifferentialScripts sends the same EVAL, EVALSHA, EVAL_RO and SCRIPT lines to
// redis-server (7.0) and tallyd and compares the replies byte for byte, error texts (with
// the script's SHA1 and line) included. The differences listed (differs) are docs/redis.md's
// "Scripting" exceptions: gopher-lua's own error texts, RESP3, the libraries not provided.
func TestRedisDifferentialScripts(t *testing.T) {
	t.Parallel()
	refAddr := rdStartRedis(t)
	talAddr := rdStartTallyd(t)
	d := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
	d.run(false, c("FLUSHALL"), c("SCRIPT", "FLUSH"))
	sha := func(body string) string { return sha1hex(body) }

	t.Run("conversions", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("EVAL", "return 1", "0"), c("EVAL", "return -7", "0"), c("EVAL", "return 3.99", "0"),
			c("EVAL", "return -3.99", "0"), c("EVAL", "return 1/0", "0"), c("EVAL", "return 0/0", "0"),
			c("EVAL", "return 2^63", "0"), c("EVAL", "return 'str'", "0"), c("EVAL", "return ''", "0"),
			c("EVAL", "return true", "0"), c("EVAL", "return false", "0"), c("EVAL", "return nil", "0"),
			c("EVAL", "return", "0"), c("EVAL", "return {}", "0"),
			c("EVAL", "return {1, 'two', 3.5, true, false, 'after false'}", "0"),
			c("EVAL", "return {1, 2, nil, 4}", "0"), c("EVAL", "return {1, {2, {3, 'x'}}, {}}", "0"),
			c("EVAL", "return {ok='fine'}", "0"), c("EVAL", "return {err='My Error'}", "0"),
			c("EVAL", "return {err='x'}", "0"), c("EVAL", "return {ok='a\\r\\nb'}", "0"),
			c("EVAL", "return {err='a\\nb'}", "0"), c("EVAL", "return {1, {err='inner'}, {ok='s'}}", "0"),
			c("EVAL", "return {ok=1}", "0"), c("EVAL", "return {x=1, 7}", "0"),
			c("EVAL", "return redis.error_reply('My Error')", "0"), c("EVAL", "return redis.error_reply('oops')", "0"),
			c("EVAL", "return redis.error_reply('-WRONGTYPE x y')", "0"), c("EVAL", "return redis.status_reply('FINE')", "0"),
			c("EVAL", "return redis.error_reply(1)", "0"), c("EVAL", "return redis.status_reply()", "0"),
			c("EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", "2", "k1", "k2", "a1", "a2"),
			c("EVAL", "return #KEYS + #ARGV", "0"), c("EVAL", "return ARGV", "0", "a", "", "\x00\r\n"),
			c("EVAL", "return redis.sha1hex('')", "0"), c("EVAL", "return redis.sha1hex('abc')", "0"),
			c("EVAL", "return string.format('%d-%s-%5.2f', 7, 'x', 3.14159)", "0"),
			c("EVAL", "return {string.sub('hello', 2, 4), string.upper('a'), string.len('abc'), tonumber('12'), tostring(5)}", "0"),
			c("EVAL", "return table.concat({'a','b','c'}, ',')", "0"), c("EVAL", "return math.floor(7.9) + math.max(1, 5)", "0"),
			c("EVAL", "local t = {} for i = 1, 10 do t[#t+1] = i * i end return t", "0"),
			c("EVAL", "return string.rep('ab', 3)", "0"), c("EVAL", "return select('#', 1, 2, 3)", "0"),
			c("EVAL", "return {pcall(error, 'x')}", "0").differs(`*[$nil $"user_script:1: x"]`), // gopher-lua places error() called by pcall
			c("EVAL", "return {pcall(function() error('x') end)}", "0"), c("EVAL", "return type(KEYS)", "0"),
		)
	})

	t.Run("calls", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("SET", "s", "abc"),
			c("EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "v"), c("GET", "k"),
			c("EVAL", "return redis.call('GET', KEYS[1])", "1", "k"), c("EVAL", "return redis.call('get', 'nokey')", "0"),
			c("EVAL", "return type(redis.call('get', 'nokey'))", "0"), c("EVAL", "return redis.call('ping')", "0"),
			c("EVAL", "return redis.call('incr', 'n')", "0"), c("EVAL", "return redis.call('incrby', 'n', 10)", "0"),
			c("EVAL", "return redis.call('incr', 's')", "0"), c("EVAL", "return redis.pcall('incr', 's')", "0"),
			c("EVAL", "local r = redis.pcall('incr', 's') return r['err']", "0"),
			c("EVAL", "return redis.call('nosuch')", "0"), c("EVAL", "return redis.pcall('nosuch')", "0"),
			c("EVAL", "return redis.call('get')", "0"), c("EVAL", "return redis.call('get', 'a', 'b')", "0"),
			c("EVAL", "return redis.call()", "0"), c("EVAL", "return redis.pcall()", "0"),
			c("EVAL", "return redis.call({})", "0"), c("EVAL", "return redis.call('get', {})", "0"),
			c("EVAL", "return redis.call('get', nil)", "0"), c("EVAL", "return redis.call('set', 'num', 3.5)", "0"),
			c("GET", "num"), c("EVAL", "return redis.call('set', 'num', 1e20)", "0"), c("GET", "num"),
			c("EVAL", "return redis.call('set', 'num', 0.1)", "0"), c("GET", "num"),
			c("EVAL", "return redis.call('eval', 'return 1', '0')", "0"), c("EVAL", "return redis.call('multi')", "0"),
			c("EVAL", "return redis.call('exec')", "0"), c("EVAL", "return redis.call('watch', 'k')", "0"),
			c("EVAL", "return redis.call('script', 'load', 'return 1')", "0"), c("EVAL", "return redis.call('auth', 'x')", "0"),
			c("EVAL", "return redis.call('client', 'id')", "0"), c("EVAL", "return redis.call('quit')", "0"),
			c("EVAL", "return redis.call('hello')", "0"), c("EVAL", "return redis.call('config', 'get', 'x')", "0"),
			c("EVAL", "return redis.call('mget', 'k', 'nokey', 's')", "0"),
			c("EVAL", "return redis.call('hset', 'h', 'f', 'v')", "0"), c("EVAL", "return redis.call('hgetall', 'h')", "0"),
			c("EVAL", "redis.call('set', 'w', '1'); error('boom')", "0"), c("GET", "w"),
			c("EVAL", "redis.call('del', 'w'); return redis.call('get', 'w')", "0"),
			c("EVAL", "return redis.call('exists', 'k', 'k', 'nokey')", "0"),
			c("EVAL", "redis.call('select', '5'); return redis.call('set', 'in5', 'x')", "0"), c("GET", "in5"),
			c("SELECT", "5"), c("GET", "in5"), c("SELECT", "0"),
			c("EVAL", "return redis.call('expire', 'k', 100)", "0"), c("EVAL", "return redis.call('ttl', 'k')", "0"),
			c("EVAL", "return redis.pcall('get', 's', 'x')", "0"),
		)
	})

	t.Run("read-only", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k"),
			c("EVAL_RO", "return redis.call('set', 'a', 'b')", "0"), c("EVAL_RO", "return redis.pcall('set', 'a', 'b')", "0"),
			c("EVAL_RO", "return redis.call('del', 'k')", "0"), c("GET", "k"), c("GET", "a"),
			c("SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"),
			c("EVALSHA_RO", sha("return redis.call('get', KEYS[1])"), "1", "k"),
			c("EVALSHA_RO", strings.Repeat("a", 40), "0"),
		)
	})

	t.Run("errors", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("EVAL"), c("EVAL", "return 1"), c("EVALSHA", "x"), c("EVAL_RO", "x"),
			c("EVAL", "return 1", "-1"), c("EVAL", "return 1", "2", "a"), c("EVAL", "return 1", "x"),
			c("EVAL", "return 1", "1.5", "a"), c("EVAL", "return 1", "", "a"), c("EVAL", "return 1", "99999999999999999999"),
			c("EVALSHA", strings.Repeat("0", 40), "0"), c("EVALSHA", "short", "0"), c("EVALSHA", strings.Repeat("0", 41), "0"),
			c("EVALSHA", strings.Repeat("0", 40), "-1"), c("EVALSHA", strings.Repeat("0", 40), "5"),
			c("EVAL", "return y", "0"), c("EVAL", "x = 1", "0"), c("EVAL", "_G.x = 1", "0"), c("EVAL", "rawset(_G, 'x', 1)", "0"),
			c("EVAL", "string.x = 1", "0"), c("EVAL", "redis.call = nil", "0"), c("EVAL", "KEYS = {}", "0"),
			c("EVAL", "error('boom')", "0"), c("EVAL", "\n\nerror('on line 3')", "0"), c("EVAL", "error({err='tbl'})", "0"),
			c("EVAL", "error(redis.error_reply('WHAT a b'))", "0"), c("EVAL", "error()", "0"),
			c("EVAL", "local function f() redis.call('incr', 's') end\nf()", "0"),
			c("EVAL", "return redis.call('incr', 's')\n", "0"), c("EVAL", "\nreturn redis.call('nosuch')", "0"),
			c("EVAL", "return setmetatable(_G, nil)", "0"), c("EVAL", "return pcall(function() x = 1 end)", "0"),
			c("EVAL", "return redis.setresp(2)", "0"), c("EVAL", "return redis.setresp(4)", "0"),
			c("EVAL", "redis.log(redis.LOG_WARNING, 'from a script')", "0"), c("EVAL", "return redis.log(1)", "0"),
			c("EVAL", "return redis.log('x', 'y')", "0"), c("EVAL", "return redis.log(9, 'y')", "0"),
			c("EVAL", "return redis.sha1hex()", "0"),
		)
		for _, g := range []string{"loadstring", "load", "print", "dofile", "loadfile", "os", "io", "debug", "require",
			"module", "package", "collectgarbage", "getfenv", "setfenv", "newproxy", "gcinfo", "unpack", "select",
			"rawget", "rawset", "rawequal", "xpcall", "pcall", "next", "pairs", "ipairs", "tostring", "tonumber",
			"type", "assert", "error", "setmetatable", "getmetatable", "string", "table", "math", "_G", "redis", "KEYS", "ARGV"} {
			d.run(false, c("EVAL", "return type("+g+")", "0"))
		}
		d.run(false, c("EVAL", "return _VERSION", "0"), c("EVAL", "return collectgarbage('count') >= 0", "0"),
			c("EVAL", "return loadstring('return 1 + 1')()", "0"), c("EVAL", "return redis.REDIS_VERSION ~= nil", "0"))
	})

	// gopher-lua's own texts: its compile errors and some runtime errors are worded
	// differently from Lua 5.1's (docs/redis.md "Scripting"); the libraries tallyd does not provide.
	t.Run("gopher-lua", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("EVAL", "return x x", "0").differs("-ERR Error compiling script (new function): user_script line:1(column:10) near 'x': syntax error"),
			c("SCRIPT", "LOAD", "return (").differs("-ERR Error compiling script (new function): user_script at EOF: syntax error"),
			c("EVAL", "local a = nil return a.b", "0").differs("-ERR user_script:1: attempt to index a non-table object(nil) with key 'b' script: 110b0470d91869ece9116b534365bb4b702dce6a, on @user_script:1."),
			c("EVAL", "return 1 + {}", "0").differs("-ERR user_script:1: cannot perform add operation between number and table script: 8ab7d53c27e34dc602fbe3688d99968c695c98e4, on @user_script:1."),
			c("EVAL", "local f return f()", "0").differs("-ERR user_script:1: attempt to call a non-function object script: 7cea770a6ce62d20b092d3baa5371050543c35f9, on @user_script:1."),
			c("EVAL", "local function f() return f() + 1 end return f()", "0"),
			c("EVAL", "return type(bit)", "0").differs("-ERR user_script:1: Script attempted to access nonexistent global variable 'bit' script: 1b03e735c03072284f716e56cf7272b87958129e, on @user_script:1."),
			c("EVAL", "return type(cjson)", "0").differs("-ERR user_script:1: Script attempted to access nonexistent global variable 'cjson' script: fd2a943aac9e73e65de5be8093aacbdb8359c635, on @user_script:1."),
			c("EVAL", "return type(cmsgpack)", "0").differs("-ERR user_script:1: Script attempted to access nonexistent global variable 'cmsgpack' script: dbd2a5884c8e31fcbab74cb14b75c4911f3dbf4b, on @user_script:1."),
			c("EVAL", "return type(struct)", "0").differs("-ERR user_script:1: Script attempted to access nonexistent global variable 'struct' script: da127d946c2ce324ddf00cf2f248683bdf63fe57, on @user_script:1."),
			c("EVAL", "return type(coroutine)", "0").differs("-ERR user_script:1: Script attempted to access nonexistent global variable 'coroutine' script: ee9a75a6fda6c1ece25420e1b3337791f1842f30, on @user_script:1."),
			c("EVAL", "return redis.setresp(3)", "0").differs("-ERR tallyd speaks RESP2 only: redis.setresp(3) is not supported script: 0eb74e6168d6fcf78a71b3e59c5918fb45f3d442, on @user_script:1."),
		)
	})

	t.Run("script", func(t *testing.T) {
		d.t = t
		body := "return redis.call('incr', KEYS[1])"
		d.run(false,
			c("SCRIPT", "LOAD", body), c("SCRIPT", "LOAD", body), c("EVALSHA", sha(body), "1", "cnt"),
			c("EVALSHA", strings.ToUpper(sha(body)), "1", "cnt"), c("SCRIPT", "EXISTS", sha(body), strings.Repeat("0", 40), "x"),
			c("SCRIPT", "EXISTS", strings.ToUpper(sha(body))), c("EVAL", "return 'evaled'", "0"),
			c("SCRIPT", "EXISTS", sha("return 'evaled'")), c("EVALSHA", sha("return 'evaled'"), "0"),
			c("SCRIPT", "FLUSH"), c("SCRIPT", "EXISTS", sha(body)), c("EVALSHA", sha(body), "1", "cnt"),
			c("SCRIPT", "FLUSH", "ASYNC"), c("SCRIPT", "FLUSH", "sync"), c("SCRIPT", "FLUSH", "x"),
			c("SCRIPT", "FLUSH", "SYNC", "x"), c("SCRIPT", "LOAD"), c("SCRIPT", "LOAD", "a", "b"), c("SCRIPT", "EXISTS"),
			c("SCRIPT", "KILL"), c("SCRIPT", "KILL", "x"), c("SCRIPT", "NOSUCH"), c("SCRIPT"),
			c("SCRIPT", "LOAD", ""), c("EVALSHA", sha(""), "0"), c("EVAL", "", "0"),
		)
	})

	t.Run("pipelined", func(t *testing.T) {
		d.t = t
		var cases []rdCase
		for i := 0; i < 100; i++ {
			cases = append(cases, c("EVAL", "return redis.call('incrby', KEYS[1], ARGV[1])", "1", "p", "3"),
				c("EVALSHA", sha("return redis.call('incrby', KEYS[1], ARGV[1])"), "1", "p", "1"))
		}
		d.run(true, cases...)
	})

	t.Run("transactions", func(t *testing.T) {
		d.t = t
		d.run(false, c("MULTI"), c("EVAL", "return redis.call('incr', 'tx')", "0"), c("EVAL", "return redis.call('incr', 'tx')", "0"),
			c("EXEC"), c("GET", "tx"))
	})
}

// sha1hex is a script's name: the hex SHA1 of its body.
func sha1hex(body string) string {
	s := sha1.Sum([]byte(body))
	return hex.EncodeToString(s[:])
}
