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

	// The string library's functions that loop (issue 30 rewrote find, match, gmatch, gsub,
	// upper, lower, reverse and table.sort after Lua 5.1's, with a step budget): each
	// expression's results with their types, or its error, as redis-server's Lua gives them.
	t.Run("patterns", func(t *testing.T) {
		d.t = t
		pat := func(expr string) rdCase {
			return c("EVAL", "local function ser(...) local n = select('#', ...) local t = {} "+
				"for i = 1, n do local v = select(i, ...) t[#t+1] = type(v)..':'..tostring(v) end "+
				"return n..'>'..table.concat(t, '|') end\n"+
				"local ok, r = pcall(function() return ser("+expr+") end)\n"+
				"if ok then return r else return 'ERR:'..tostring(r) end", "0")
		}
		d.run(false,
			pat("string.find('hello world', 'o w')"),
			pat("string.find('hello world', 'o', 6)"),
			pat("string.find('hello world', 'l+')"),
			pat("string.find('hello', '')"),
			pat("string.find('hello', '', 3)"),
			pat("string.find('hello', '', 10)"),
			pat("string.find('hello', 'l', -2)"),
			pat("string.find('hello', 'l', -100)"),
			pat("string.find('a.b', '.', 1, true)"),
			pat("string.find('a+b', '+', 1, true)"),
			pat("string.find('hello', '(l)(l)')"),
			pat("string.find('hello', '()ll()')"),
			pat("string.find('hello', 'x')"),
			pat("string.find('hello', '^h')"),
			pat("string.find('hello', '^e')"),
			pat("string.find('hello', 'o$')"),
			pat("string.find('hel$lo', 'l$l')"),
			pat("string.find('  x', '%s*x')"),
			pat("string.find('abc', '[a-')"),
			pat("string.find('abc', '[a')"),
			pat("string.find('abc', '%')"),
			pat("string.find('abc', '(a')"),
			pat("string.find('abc', 'a)')"),
			pat("string.find('abc', '%1')"),
			pat("string.find('f(a(b)c)d', '%b()')"),
			pat("string.find('THE (quick) fox', '%f[%a]%a+', 5)"),
			pat("string.find('abc', '%f')"),
			pat("string.match('key=value', '(%w+)=(%w+)')"),
			pat("string.match('2024-01-02', '(%d+)-(%d+)-(%d+)')"),
			pat("string.match('hello', '()ll()')"),
			pat("string.match('hello', '.-l')"),
			pat("string.match('hello', '.*l')"),
			pat("string.match('hello', 'l*')"),
			pat("string.match('hello', 'x?h')"),
			pat("string.match('hello', 'h?e')"),
			pat("string.match('aaa', 'a-b')"),
			pat("string.match('aaab', 'a-b')"),
			pat("string.match('[]', '[]]')"),
			pat("string.match('a]', '[]]')"),
			pat("string.match('x^y', '[%^]')"),
			pat("string.match('x-y', '[a%-z]')"),
			pat("string.match('x-y', '[-]')"),
			pat("string.match('abc', '[^a]+')"),
			pat("string.match('ABC def', '%u+')"),
			pat("string.match('ABC def', '%l+')"),
			pat("string.match('a1_b2', '%w+')"),
			pat("string.match('!?.', '%p+')"),
			pat("string.match('a\\0b', '%z')"),
			pat("string.match('\\1\\2', '%c+')"),
			pat("string.match('ff0A', '%x+')"),
			pat("string.match('é', '%a')"),
			pat("string.match('hello hello', '(h%a+) %1')"),
			pat("string.match('hello', '(h)(e)(l)(l)(o)')"),
			pat("string.match('hello', '((l)(l))')"),
			pat("string.match('abc', 'b', 3)"),
			pat("string.match('abc', 'b', -2)"),
			pat("string.match('abc', '^b', 2)"),
			pat("string.match('abc', '$')"),
			pat("string.match('', '.*')"),
			pat("string.match('abc', '(()b())')"),
			pat("string.match('x', '(x')"),
			pat("string.match('x', 'x)')"),
			pat("string.match('ab', '%bab')"),
			pat("string.match('ab', '%ba')"),
			pat("string.gsub('hello world', 'o', '0')"),
			pat("string.gsub('hello world', 'o', '0', 1)"),
			pat("string.gsub('hello world', '(%w+)', '<%1>')"),
			pat("string.gsub('hello world', '%w+', '%0 %0')"),
			pat("string.gsub('hello', '', '-')"),
			pat("string.gsub('hello', 'x*', '-')"),
			pat("string.gsub('abc', '^a', 'X')"),
			pat("string.gsub('aaa', '^a', 'X')"),
			pat("string.gsub('abc', '%w', '%%')"),
			pat("string.gsub('abc', '%w', '%2')"),
			pat("string.gsub('abc', '(%w)', '%2')"),
			pat("string.gsub('abc', '%w', 'x%')"),
			pat("string.gsub('abc', '%w', 5)"),
			pat("string.gsub('abc', '%w', {a='1', b=true})"),
			pat("string.gsub('abc', '%w', {a='1', b=false})"),
			pat("string.gsub('abc', '%w', {a={}})"),
			pat("string.gsub('abc', '%w', function(c) return c:upper() end)"),
			pat("string.gsub('abc', '%w', function(c) return nil end)"),
			pat("string.gsub('abc', '%w', function(c) return 7 end)"),
			pat("string.gsub('abc', '(%w)()', function(c, p) return c..p end)"),
			pat("string.gsub('abc', '%w', true)"),
			pat("string.gsub('abc', '%w', '%1')"),
			pat("string.gsub('abc', '', '%1')"),
			pat("string.gsub('abc def', '(%w+) (%w+)', '%2 %1')"),
			pat("string.gsub('abc', '.', {}, 2)"),
			pat("string.gsub('abc', '.', 'x', 0)"),
			pat("string.gsub('abc', '.', 'x', -1)"),
			pat("string.gsub('abc', '.', 'x', 2.7)"),
			pat("(function() local t={} for w in string.gmatch('one two  three', '%a+') do t[#t+1]=w end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do t[#t+1]=k..v end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for w in string.gmatch('abc', '') do t[#t+1]='['..w..']' end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for w in string.gmatch('abc', '^a') do t[#t+1]='['..w..']' end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for a in string.gmatch('abc', '()') do t[#t+1]=a end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for w in string.gmatch('a,b,,c', '([^,]*)') do t[#t+1]='['..w..']' end return table.concat(t, ',') end)()"),
			pat("(function() local t={} for w in string.gfind('a b', '%a') do t[#t+1]=w end return table.concat(t, ',') end)()"),
			pat("string.upper('abcÉé')"),
			pat("string.lower('ABCÉé')"),
			pat("string.reverse('abc')"),
			pat("string.reverse('')"),
			pat("string.format('%-5s|%5s|', 'ab', 'cd')"),
			pat("string.format('%x %X %o %e %g', 255, 255, 8, 1.5, 2.5)"),
			pat("string.format('%%')"),
			pat("string.format('%c%c', 65, 66)"),
			pat("('abc'):find('b')"),
			pat("('a.b'):gsub('%.', '/')"),
			pat("string.find('abc', '[%a-z]')"),
			pat("string.find('a-z', '[%a-z]+')"),
			pat("string.match('hello', '[h-l]+')"),
			pat("string.match('hello', '[^]')"),
			pat("string.match('^', '^^')"),
			pat("string.match('a$b', 'a$b')"),
			pat("string.find('abc', 'b', 1, false)"),
			pat("string.find('a.c', '.', 2, nil)"),
			pat("string.find(123, 2)"),
			pat("string.gsub(12345, 3, 'x')"),
			pat("string.match('  trim  ', '^%s*(.-)%s*$')"),
			pat("string.rep('ab', 3)"),
			pat("string.rep('ab', 0)"),
			pat("string.rep('ab', -1)"),
			pat("string.match('x', '[a-]')"),
			pat("string.match('-', '[a-]')"),
			pat("string.match('b', '[a-c-e]')"),
			pat("string.find('aXb', '%f[%u]')"),
			pat("string.find('abc', '%f[^%z]')"),
			pat("string.find('abc', '%f[%z]')"),
			pat("(function() local t={5,2,8,1,9,3} table.sort(t) return table.concat(t, ',') end)()"),
			pat("(function() local t={5,2,8,1,9,3} table.sort(t, function(a,b) return a>b end) return table.concat(t, ',') end)()"),
			pat("(function() local t={'b','a','c'} table.sort(t) return table.concat(t, ',') end)()"),
			pat("(function() local t={} table.sort(t) return #t end)()"),
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
