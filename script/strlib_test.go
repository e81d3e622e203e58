package script

import (
	"strings"
	"testing"
	"time"
)

// TestBuiltinsStopped: the string library's looping functions stop at the time limit with
// the instruction check's -BUSY, within twice the limit (issue 30: gopher-lua's matcher
// ran the first for 71 s in one call).
func TestBuiltinsStopped(t *testing.T) {
	const limit = 50 * time.Millisecond
	e, f := New(Limits{Time: limit}), &fakeCall{}
	for _, body := range []string{
		"return string.match(string.rep('a', 400), '^(a-)(a-)(a-)(a-)b')",
		"return string.find(string.rep('a', 600), '.-.-.-b')",
		"for w in string.gmatch(string.rep('a', 400), '(a-)(a-)(a-)b') do end",
		"return string.gsub(string.rep('a', 2000), '(a-)(a-)(a-)b', 'x')",
		"return pcall(string.match, string.rep('a', 400), '^(a-)(a-)(a-)(a-)b')", // pcall does not keep it going
		"local t = {} for i = 1, 200000 do t[i] = -i end for i = 1, 100 do table.sort(t, function(a, b) return a < b end) end",
	} {
		var took time.Duration
		for range 3 { // a loaded machine may deschedule one run
			t0 := time.Now()
			got := eval(t, e, f, body, nil)
			took = time.Since(t0)
			if !strings.HasPrefix(got, "-BUSY script ran past lua-time-limit (50 ms)") {
				t.Fatalf("%s: %q", body, got)
			}
			if took <= 2*limit {
				break
			}
		}
		if took > 2*limit {
			t.Errorf("%s: stopped after %v, over twice the limit", body, took)
		}
	}
}

// TestGsubBounded: gsub's result is held to the longest string a script may build.
func TestGsubBounded(t *testing.T) {
	e, f := New(Limits{MaxString: 1 << 20, Time: 5 * time.Second}), &fakeCall{}
	got := eval(t, e, f, "return #string.gsub(string.rep('a', 100000), 'a', string.rep('b', 100))", nil)
	if !strings.HasPrefix(got, "-ERR script would build a string over 1048576 bytes") {
		t.Fatalf("%q", got)
	}
	if got := eval(t, e, f, "return #string.gsub(string.rep('a', 1000), 'a', string.rep('b', 100))", nil); got != ":100000\r\n" {
		t.Fatalf("%q", got)
	}
}
