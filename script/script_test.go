package script

import (
	"strings"
	"testing"
	"time"
)

// fakeCall answers a few commands with fixed replies and records what it was called with.
type fakeCall struct{ got [][]string }

func (f *fakeCall) call(args [][]byte) []byte {
	var line []string
	for _, a := range args {
		line = append(line, string(a))
	}
	f.got = append(f.got, line)
	switch strings.ToLower(line[0]) {
	case "int":
		return []byte(":-42\r\n")
	case "bulk":
		return []byte("$3\r\nabc\r\n")
	case "nil":
		return []byte("$-1\r\n")
	case "nilarr":
		return []byte("*-1\r\n")
	case "status":
		return []byte("+QUEUED\r\n")
	case "err":
		return []byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n")
	case "arr":
		return []byte("*4\r\n:1\r\n$1\r\nx\r\n*1\r\n$-1\r\n+OK\r\n")
	}
	return []byte("-ERR Unknown Redis command called from script\r\n")
}

func eval(t *testing.T, e *Engine, f *fakeCall, body string, keys []string, args ...string) string {
	t.Helper()
	rest := [][]byte{}
	for _, k := range append(append([]string{}, keys...), args...) {
		rest = append(rest, []byte(k))
	}
	nk := []byte{byte('0' + len(keys))}
	return string(e.Eval(nil, &Run{Body: []byte(body), NumKeys: nk, Rest: rest, Call: f.call}))
}

// Replies convert to Lua as Redis converts them, and Lua values to replies.
func TestConversions(t *testing.T) {
	e, f := New(Limits{}), &fakeCall{}
	for _, c := range []struct{ body, want string }{
		{"return redis.call('int')", ":-42\r\n"},
		{"return type(redis.call('int'))", "$6\r\nnumber\r\n"},
		{"return redis.call('bulk')", "$3\r\nabc\r\n"},
		{"return redis.call('nil') == false", ":1\r\n"},
		{"return redis.call('nilarr') == false", ":1\r\n"},
		{"return redis.call('status').ok", "$6\r\nQUEUED\r\n"},
		{"return redis.call('status')", "+QUEUED\r\n"},
		{"return redis.pcall('err').err", "$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n"},
		{"return redis.call('arr')", "*4\r\n:1\r\n$1\r\nx\r\n*1\r\n$-1\r\n+OK\r\n"},
		{"return 2.9", ":2\r\n"}, {"return -2.9", ":-2\r\n"}, {"return 0/0", ":-9223372036854775808\r\n"},
		{"return true", ":1\r\n"}, {"return false", "$-1\r\n"}, {"return nil", "$-1\r\n"},
		{"return {1, nil, 3}", "*1\r\n:1\r\n"}, {"return {ok='a\\r\\nb'}", "+a  b\r\n"},
		{"return {err='E x'}", "-E x\r\n"}, {"return print", "-ERR user_script:1: Script attempted to access nonexistent global variable 'print' script: " + SHA1([]byte("return print")) + ", on @user_script:1.\r\n"},
		{"return function() end", "$-1\r\n"},
	} {
		if got := eval(t, e, f, c.body, nil); got != c.want {
			t.Errorf("%s: got %q, want %q", c.body, got, c.want)
		}
	}
	// Arguments: strings as they are, numbers as %.17g, anything else refused.
	f.got = nil
	eval(t, e, f, "redis.call('int', 'a', 1, 1.5, 0.1, -0, 1e21, KEYS[1], ARGV[1])", []string{"k\x00"}, "\r\n")
	if got, want := strings.Join(f.got[0], "|"), "int|a|1|1.5|0.10000000000000001|-0|1e+21|k\x00|\r\n"; got != want {
		t.Errorf("redis.call arguments: %q, want %q", got, want)
	}
	if got := eval(t, e, f, "return redis.call('int', true)", nil); !strings.HasPrefix(got, "-ERR Lua redis lib command arguments must be strings or integers script:") {
		t.Errorf("a boolean argument: %q", got)
	}
}

// The sandbox: no os, io, debug or package; globals and library tables read-only; nothing a
// script leaves behind is seen by the next.
func TestSandbox(t *testing.T) {
	e, f := New(Limits{}), &fakeCall{}
	for _, g := range []string{"os", "io", "debug", "package", "require", "dofile", "loadfile", "print", "getfenv",
		"setfenv", "module", "newproxy", "coroutine"} {
		got := eval(t, e, f, "return "+g, nil)
		if !strings.Contains(got, "Script attempted to access nonexistent global variable '"+g+"'") {
			t.Errorf("%s: %q", g, got)
		}
	}
	for _, body := range []string{"x = 1", "KEYS = 1", "redis = nil", "_G.y = 1", "rawset(_G, 'y', 1)", "string.y = 1",
		"rawset(string, 'y', 1)", "redis.call = print", "setmetatable(_G, {})", "math.floor = nil"} {
		got := eval(t, e, f, body, nil)
		if !strings.Contains(got, "readonly table") && !strings.Contains(got, "nonexistent global") {
			t.Errorf("%s: %q (should be refused)", body, got)
		}
	}
	if got := eval(t, e, f, "return {type(string.rep), type(math.floor), type(redis.call), type(table.concat)}", nil); got != "*4\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n$8\r\nfunction\r\n" {
		t.Errorf("the libraries after the attempts: %q", got)
	}
	// KEYS is new each run: what one run put in it is gone.
	eval(t, e, f, "KEYS.extra = 'left'", []string{"a"})
	if got := eval(t, e, f, "return KEYS.extra", nil); got != "$-1\r\n" {
		t.Errorf("KEYS.extra in the next run: %q", got)
	}
}

// A run is bounded: time, a string past MaxString, allocations past MaxMemory; the engine
// serves the next run normally.
func TestBudget(t *testing.T) {
	e, f := New(Limits{Time: 20 * time.Millisecond, MaxMemory: 4 << 20, MaxString: 1 << 16}), &fakeCall{}
	start := time.Now()
	if got := eval(t, e, f, "while true do end", nil); !strings.HasPrefix(got, "-BUSY script ran past lua-time-limit (20 ms)") {
		t.Errorf("endless loop: %q", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the endless loop was stopped after %v", d)
	}
	if got := eval(t, e, f, "local ok = pcall(function() while true do end end) while true do end", nil); !strings.HasPrefix(got, "-BUSY") {
		t.Errorf("pcall around the endless loop: %q", got)
	}
	// The string and memory bounds, with time enough that a loaded machine never turns them
	// into the time limit (a 40,000-step loop can take longer than 20 ms under -race).
	e = New(Limits{Time: time.Minute, MaxMemory: 4 << 20, MaxString: 1 << 16})
	for _, body := range []string{"local s = 'x' while true do s = s .. s end", "return string.rep('ab', 40000)",
		"local t = {} for i = 1, 40000 do t[i] = 'ab' end return table.concat(t)",
		"local s = string.rep('x', 60000) local t = {} for i = 1, 1e6 do t[i] = s .. i end"} {
		if got := eval(t, e, f, body, nil); !strings.Contains(got, "string over 65536 bytes") && !strings.Contains(got, "lua-max-memory") {
			t.Errorf("%s: %q", body, got)
		}
	}
	if got := eval(t, e, f, "return 1 + 1", nil); got != ":2\r\n" {
		t.Errorf("the next run: %q", got)
	}
}

// The cache: EVAL-only scripts are evicted least recently used first; loaded ones stay
// until Flush; the byte limit refuses a Load.
func TestCache(t *testing.T) {
	e, f := New(Limits{MaxScripts: 2, MaxBytes: 100}), &fakeCall{}
	sha, err := e.Load([]byte("return 'loaded'"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eval(t, e, f, "return 1", nil)
	eval(t, e, f, "return 2", nil)
	e.Eval(nil, &Run{SHA: []byte(SHA1([]byte("return 1"))), NumKeys: []byte("0"), Call: f.call}) // 1 is now newer than 2
	eval(t, e, f, "return 3", nil)
	for body, want := range map[string]bool{"return 1": true, "return 2": false, "return 3": true, "return 'loaded'": true} {
		if got := e.Exists([]byte(SHA1([]byte(body)))); got != want {
			t.Errorf("%s cached: %v, want %v", body, got, want)
		}
	}
	if _, err := e.Load([]byte(strings.Repeat(" ", 90)+"return 9"), nil); err == nil || !strings.Contains(err.Error(), "lua-scripts-max-bytes") {
		t.Errorf("Load past the byte limit: %v", err)
	}
	if _, err := e.Load([]byte("return x x"), nil); err == nil || !strings.HasPrefix(err.Error(), "ERR Error compiling script (new function): user_script") {
		t.Errorf("Load of a bad script: %v", err)
	}
	e.Flush()
	if e.Exists([]byte(sha)) {
		t.Error("a loaded script after Flush")
	}
	if n, b := e.Stats(); n != 0 || b != 0 {
		t.Errorf("after Flush: %d scripts, %d bytes", n, b)
	}
	if got := eval(t, e, f, "return 'after flush'", nil); got != "$11\r\nafter flush\r\n" {
		t.Errorf("a run after Flush: %q", got)
	}
}
