package script

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// heavyScript is a unique body of about 4 KB that compiles to much more: many small
// functions (issue 30 item 3's attack, 16,000 SCRIPT LOADs of unique 4 KB scripts).
func heavyScript(i int, kind string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- %d\n", i)
	for n := 0; b.Len() < 4000; n++ {
		switch kind {
		case "funcs":
			fmt.Fprintf(&b, "local function f%d(a, b) return a + b * %d end\n", n%150, n)
		case "calls":
			fmt.Fprintf(&b, "redis.call('SET', KEYS[1], ARGV[%d])\n", n)
		case "tables":
			fmt.Fprintf(&b, "t = {%d, %d, %d, 'k%d'}\n", n, n+1, n+2, n)
		}
	}
	return b.String()
}

// TestScriptMemoryCounted: what the cache counts for a compiled script (Memory) follows
// what the compiled scripts keep on the heap, for bodies that compile small and large.
func TestScriptMemoryCounted(t *testing.T) {
	for _, kind := range []string{"funcs", "calls", "tables"} {
		e := New(Limits{MaxBytes: 1 << 30})
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		const n = 20
		for i := range n {
			if _, err := e.Load([]byte(heavyScript(i, kind)), nil); err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		live := int64(m1.HeapAlloc - m0.HeapAlloc)
		ratio := float64(e.Memory()) / float64(live)
		t.Logf("%s: %d B of heap per 4 KB script, %d B counted (%.2f)", kind, live/n, e.Memory()/n, ratio)
		if ratio < 0.8 || ratio > 1.6 {
			t.Errorf("%s: counted %d B for %d B of heap (%.2f)", kind, e.Memory(), live, ratio)
		}
		runtime.KeepAlive(e)
	}
}

// TestScriptRoom: a script that does not fit the room given makes the EVAL-only scripts go
// first, then SCRIPT LOAD is refused with -OOM and EVAL runs uncached.
func TestScriptRoom(t *testing.T) {
	e, f := New(Limits{}), &fakeCall{}
	for i := range 3 {
		if got := eval(t, e, f, fmt.Sprintf("return %d", i), nil); got != fmt.Sprintf(":%d\r\n", i) {
			t.Fatal(got)
		}
	}
	if n, _ := e.Stats(); n != 3 {
		t.Fatalf("%d scripts cached", n)
	}
	budget := e.Memory() + 1000 // room for the EVAL-only scripts and a little
	room := func(need int64) bool { return e.Memory()+need <= budget }
	if _, err := e.Load([]byte(heavyScript(0, "funcs")), room); err != ErrOOM {
		t.Fatalf("Load: %v, want ErrOOM", err)
	}
	if n, _ := e.Stats(); n != 0 || e.Memory() != 0 {
		t.Fatalf("%d scripts, %d bytes left: the EVAL-only ones did not go first", n, e.Memory())
	}
	if _, err := e.Load([]byte("return 'small'"), room); err != nil {
		t.Fatalf("Load of a small script: %v", err)
	}
	got := string(e.Eval(nil, &Run{Body: []byte(heavyScript(1, "funcs") + "\nreturn 5"), NumKeys: []byte("0"), Call: f.call, Room: room}))
	if n, _ := e.Stats(); got != ":5\r\n" || n != 1 {
		t.Fatalf("EVAL over the room: %q, %d scripts cached; want it run uncached", got, n)
	}
}

// TestLoadstringBounded: loadstring and load compile what fits the budget and stop the run
// before compiling what does not (1.8 MB of small functions took 65 s before issue 30).
func TestLoadstringBounded(t *testing.T) {
	e, f := New(Limits{}), &fakeCall{}
	for body, want := range map[string]string{
		"return loadstring('return 1 + 2')()":                                                       ":3\r\n",
		"local p, i = {'return ', '4', '2'}, 0 return load(function() i = i + 1 return p[i] end)()": ":42\r\n",
		"return pcall(loadstring, string.rep('t = function() end ', 60000))":                        "-ERR script would compile a chunk of about",
		"return load(function() return string.rep('t = function() end ', 1000) end)":                "-", // stopped (string or time limit)
	} {
		t0 := time.Now()
		got := eval(t, e, f, body, nil)
		if !strings.HasPrefix(got, want) || time.Since(t0) > time.Second {
			t.Errorf("%s: %q after %v, want %q", body, got, time.Since(t0), want)
		}
	}
}
