package e2e

// Issue 30 items 1 and 3: a script's built-ins are bounded by --lua-time-limit like its
// instructions (no other client waits longer meanwhile), and the script cache counts
// against --max-memory.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// luaLimit is the --lua-time-limit the tests run with, as the attack did.
const luaLimit = 100 * time.Millisecond

// builtinAttacks are the scripts, each a built-in that loops in Go, at growing
// lengths: before issue 30 the first held the loop 71 s, the second more than 120 s.
func builtinAttacks() []string {
	var a []string
	for _, n := range []int{100, 200, 400} {
		a = append(a, fmt.Sprintf("return string.match(string.rep('a',%d),'^(a-)(a-)(a-)(a-)b')", n))
	}
	for _, n := range []int{300, 600, 1200} {
		a = append(a, fmt.Sprintf("return string.find(string.rep('a',%d), '.-.-.-b')", n))
	}
	for _, n := range []int{200, 400} {
		a = append(a, fmt.Sprintf("local n = 0 for w in string.gmatch(string.rep('a',%d), '(a-)(a-)(a-)b') do n = n + 1 end return n", n))
	}
	return append(a,
		// a gsub whose result grows 100x, again and again
		"local s = string.rep('a', 40000) for i = 1, 1000 do s = string.gsub(s, 'a', string.rep('b', 100)):sub(1, 40000):gsub('b', 'a') end return #s",
		"return #string.gsub(string.rep('a', 3000), '(a-)(a-)(a-)b', 'x')",
		"local n = 0 for i = 1, 1000000 do n = n + #string.upper(string.rep('a', 1000000)) end return n",
		"local t = {} for i = 1, 100 do t[i] = string.rep('x', 40000) end local n = 0 for i = 1, 100000 do n = n + #table.concat(t) end return n",
		"local n = 0 for i = 1, 1000000 do n = n + #string.format('%99s%s', 'x', string.rep('y', 1000000)) end return n",
		// a compile: 1.8 MB of small functions took 65 s and 886 MB of RSS
		"local f = loadstring('local t = {} ' .. string.rep('t.f = function(a) return a end ', 60000)) return 1",
		"local i = 0 local f = load(function() i = i + 1 if i < 60000 then return 't = function(a) return a end ' end end) return 1",
	)
}

// pinger sends PING on its own connection until stopped and records each round trip.
type pinger struct {
	mu   sync.Mutex
	rtts []time.Duration
	stop chan struct{}
	done chan struct{}
}

func startPinger(t *testing.T, addr string) *pinger {
	p := &pinger{stop: make(chan struct{}), done: make(chan struct{})}
	r := dialR(t, addr)
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			t0 := time.Now()
			if got, err := r.do("PING"); err != nil || got != "+PONG" {
				return
			}
			p.mu.Lock()
			p.rtts = append(p.rtts, time.Since(t0))
			p.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return p
}

// take stops the pinger.
func (p *pinger) take() {
	close(p.stop)
	<-p.done
}

// reset forgets the round trips so far.
func (p *pinger) reset() {
	p.mu.Lock()
	p.rtts = p.rtts[:0]
	p.mu.Unlock()
}

// max is the longest round trip since the last reset.
func (p *pinger) max() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rtts) == 0 {
		return 0
	}
	return slices.Max(p.rtts)
}

// cpuTime is the process's user and system CPU time so far (/proc/PID/stat).
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading the server's stat: %v", err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}

// TestScriptBuiltinsBounded: each of the built-in attacks, at growing lengths,
// stops with the time limit's -BUSY (or the string or memory limit's -ERR), and another
// client's PINGs meanwhile wait at most twice the limit. On a loaded machine wall times
// stretch, so the bound allows what a plain Lua loop (stopped by the instruction check,
// which was always bounded) took in the same run beyond the limit; the server's CPU time per
// attack is held to twice the limit too. Before issue 30 the first match held the loop 71 s:
// the test fails at its first reply's 10 s deadline.
func TestScriptBuiltinsBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	addr := rdStartTallyd(t, "--lua-time-limit="+strconv.Itoa(int(luaLimit.Milliseconds())), "--max-memory=64mb", "--appendonly=false")
	r := dialR(t, addr)
	pid := 0
	if got, err := r.do("INFO", "server"); err == nil {
		if _, after, ok := strings.Cut(got, "process_id:"); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\r\n", 2)[0]))
		}
	}
	if pid == 0 {
		t.Fatal("no process_id in INFO server")
	}
	eval := func(body string) (string, time.Duration, time.Duration) {
		t.Helper()
		c0, t0 := cpuTime(t, pid), time.Now()
		got, err := r.do("EVAL", body, "0")
		wall, cpu := time.Since(t0), cpuTime(t, pid)-c0
		if err != nil {
			t.Fatalf("%s: no reply (%v) after %v: the loop is held", body, err, wall)
		}
		return got, wall, cpu
	}
	// The reference: a Lua loop, stopped between instructions.
	var slack time.Duration
	for range 5 {
		got, wall, _ := eval("local i = 0 while true do i = i + 1 end")
		if !strings.HasPrefix(got, "-BUSY") {
			t.Fatalf("plain loop: %q", got)
		}
		slack = max(slack, wall-luaLimit)
	}
	bound := 2*luaLimit + slack
	t.Logf("a plain Lua loop took up to %v: bound %v", luaLimit+slack, bound)

	p := startPinger(t, addr)
	defer p.take()
	var maxWall, maxCPU, maxPing time.Duration
	for _, body := range builtinAttacks() {
		// On a loaded machine one run can be descheduled past the bound: an attack that is
		// bounded passes again at once, one that is not never does (8 s and more before).
		for attempt := 1; ; attempt++ {
			p.reset()
			got, wall, cpu := eval(body)
			time.Sleep(20 * time.Millisecond) // the PING that waited for the script is answered
			ping := p.max()
			// The smallest attacks may finish inside the limit on a fast, quiet machine (the
			// matcher is faster than gopher-lua's): then with their true answer, nil.
			if !strings.HasPrefix(got, "-BUSY script ran past lua-time-limit (100 ms)") && !strings.HasPrefix(got, "-ERR script") &&
				!(got == "$-1" && wall < luaLimit) {
				t.Errorf("%s: %q, want the time limit's -BUSY", body, got)
			}
			t.Logf("%v wall, %v CPU, PING max %v: %.70s", wall.Round(time.Millisecond), cpu, ping.Round(time.Millisecond), body)
			// CPU is sampled in 10 ms ticks and includes the collector's threads.
			ok := wall <= bound && ping <= bound && cpu <= 2*luaLimit+100*time.Millisecond
			if ok || attempt == 3 {
				if !ok {
					t.Errorf("%s: %v wall, %v CPU, another client's PING waited %v: over %v three times", body, wall, cpu, ping, bound)
				}
				maxWall, maxCPU, maxPing = max(maxWall, wall), max(maxCPU, cpu), max(maxPing, ping)
				break
			}
		}
	}
	t.Logf("attacks: max wall %v, max CPU %v, another client's PING max %v (bound %v)", maxWall, maxCPU, maxPing, bound)
	r.must(t, "+PONG", "PING")
}

// TestScriptBuiltinsSIGTERM: SIGTERM while a built-in loops ends the server in time, its
// shutdown finished (before issue 30 it could not: "shutdown did not finish", forced exit).
func TestScriptBuiltinsSIGTERM(t *testing.T) {
	port := freePort(t)
	p := start(t, 0, "-l", "127.0.0.1", "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--lua-time-limit=2000",
		"--appendonly=false")
	p.waitLog(t, "tallyd listening")
	r := dialR(t, "127.0.0.1:"+strconv.Itoa(port))
	r.must(t, "+PONG", "PING")
	if _, err := r.c.Write([]byte(respCmd("EVAL", "return string.find(string.rep('a',3000), '.-.-.-.-b')", "0"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(time.Now().Add(8*time.Second), 20*time.Millisecond, func() bool { done, _ := p.exited(); return done }) {
		t.Fatalf("still running 8 s after SIGTERM")
	}
	t.Logf("exited %v after SIGTERM", time.Since(t0))
	if code := p.exitCode(t); code != 0 || strings.Contains(p.log.String(), "shutdown did not finish") {
		t.Fatalf("exit %d, log:\n%s", code, p.log.String())
	}
}

// scriptOOM is Redis's -OOM.
const scriptOOM = "-OOM command not allowed when used memory > 'maxmemory'."

// funcScript is a unique body of about 4 KB of small functions, which gopher-lua compiles
// to about 1.5 MB.
func funcScript(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- %d\n", i)
	for n := 0; b.Len() < 4000; n++ {
		fmt.Fprintf(&b, "local function f%d(a, b) return a + b * %d end\n", n%150, n)
	}
	return b.String() + "return 1"
}

// TestScriptCacheBudget: SCRIPT LOADs of unique 4 KB scripts fill --max-memory with their
// compiled form, not only their bodies: the scripts only EVAL sent are forgotten first,
// then SCRIPT LOAD answers -OOM, writes are refused as for any state past the budget, and
// peak RSS stays under the budget plus the documented overhead. SCRIPT FLUSH gives the
// memory back. Before issue 30 every load was kept (the bodies, 4 KB each, were all
// --lua-scripts-max-bytes counted) and RSS passed 200 MiB.
func TestScriptCacheBudget(t *testing.T) {
	port := freePort(t)
	p := memServer(t, "-l", "127.0.0.1", "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	p.waitLog(t, "tallyd listening")
	base := procMem(t, p.cmd.Process.Pid, "VmRSS")
	r := dialR(t, "127.0.0.1:"+strconv.Itoa(port))
	r.must(t, "+OK", "SET", "before", "v")
	var evalSHAs []string
	for i := range 5 {
		r.must(t, ":1", "EVAL", funcScript(-1-i), "0")
		evalSHAs = append(evalSHAs, sha1hex(funcScript(-1-i)))
	}
	loaded, oom := 0, 0
	for i := range 150 {
		got, err := r.do("SCRIPT", "LOAD", funcScript(i))
		switch {
		case err != nil:
			t.Fatalf("SCRIPT LOAD %d: %v", i, err)
		case got == scriptOOM:
			oom++
		case strings.HasPrefix(got, "$"):
			loaded++
		default:
			t.Fatalf("SCRIPT LOAD %d: %q", i, got)
		}
	}
	budget := infoBudget(t, r)
	t.Logf("%d loaded, %d refused -OOM; used_memory_budget %s", loaded, oom, mb(budget))
	if oom == 0 || loaded == 0 {
		t.Fatalf("%d loaded, %d refused: want the budget to end the loads", loaded, oom)
	}
	if budget > memBudget {
		t.Errorf("used_memory_budget %s over the budget %s", mb(budget), mb(memBudget))
	}
	for _, sha := range evalSHAs {
		if got, _ := r.do("EVALSHA", sha, "0"); !strings.HasPrefix(got, "-NOSCRIPT") {
			t.Errorf("EVAL-only script %s still cached with SCRIPT LOADs refused: %q", sha, got)
		}
	}
	// What is left of the budget is less than one more script: writes fill it, then -OOM.
	val := strings.Repeat("v", 100<<10)
	refused := false
	for i := 0; i < 30 && !refused; i++ {
		got, err := r.do("SET", "after"+strconv.Itoa(i), val)
		if err != nil {
			t.Fatal(err)
		}
		refused = got == scriptOOM
	}
	if !refused {
		t.Errorf("3 MB of SETs accepted with the budget full of scripts")
	}
	r.must(t, "$v", "GET", "before")
	checkPeak(t, p, base, "SCRIPT LOAD flood")
	r.must(t, "+OK", "SCRIPT", "FLUSH")
	r.must(t, "+OK", "SET", "after", "v")
}
