package e2e

// What Redis monitoring tools read from INFO: redis-cli --stat and --latency, and the
// fields redis_exporter turns into metrics (issue 15 item 6: --stat showed
// --9223372036854775808B, INFO stats and memory were empty).

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// TestRedisCLIStat runs redis-cli --stat while a load runs and stops: every figure is a
// sane number (no negatives, memory in bytesToHuman's form), the keys are those set, and
// the request count moves with the load.
func TestRedisCLIStat(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed: run scripts/ensure-redis-tools.sh (Debian package redis-tools)")
	}
	stdbuf, err := exec.LookPath("stdbuf") // redis-cli buffers its lines when they go to a pipe
	if err != nil {
		t.Skip("stdbuf (coreutils) is not installed")
	}
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	p.waitLog(t, "tallyd listening")
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ps := strconv.Itoa(port)

	rc := dialR(t, addr)
	for i := range 20 {
		rc.must(t, "+OK", "SET", "k"+strconv.Itoa(i), "v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncBuf
	stat := exec.CommandContext(ctx, stdbuf, "-o0", cli, "-h", "127.0.0.1", "-p", ps, "--stat", "-i", "0.1")
	stat.Stdout, stat.Stderr = &out, &out
	if err := stat.Start(); err != nil {
		t.Fatal(err)
	}
	statDone := make(chan error, 1)
	go func() { statDone <- stat.Wait() }()
	stopStat := sync.OnceFunc(func() {
		_ = stat.Process.Kill()
		<-statDone
	})
	defer stopStat()
	time.Sleep(500 * time.Millisecond) // some idle lines first

	// The load: four connections of GET and SET for a second.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sent atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := dialR(t, addr)
			for i := 0; !stop.Load(); i++ {
				key := "k" + strconv.Itoa(i%20)
				if _, err := lc.do("GET", key); err != nil {
					t.Errorf("load %d: %v", g, err)
					return
				}
				sent.Add(1)
			}
		}()
	}
	time.Sleep(time.Second)
	// INFO while the load runs: the rates are not zero.
	during := infoMap(t, rc, "stats")
	stop.Store(true)
	wg.Wait()
	time.Sleep(400 * time.Millisecond) // some lines after
	stopStat()

	// --stat: a header, then "keys mem clients blocked requests (+delta) connections".
	lineRE := regexp.MustCompile(`^(\d+)\s+(\d+(?:\.\d\d)?[BKMGTP])\s+(\d+)\s+(\d+)\s+(\d+) \(\+(\d+)\)\s+(\d+)\s*$`)
	var lines, maxDelta int
	var lastReq int
	for _, l := range strings.Split(out.String(), "\n") {
		if l == "" || strings.HasPrefix(l, "---") || strings.HasPrefix(l, "keys") {
			continue
		}
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("redis-cli --stat line %q is not all figures:\n%s", l, out.String())
		}
		lines++
		if keys, _ := strconv.Atoi(m[1]); keys != 20 {
			t.Errorf("--stat keys %d, want the 20 set: %q", keys, l)
		}
		if clients, _ := strconv.Atoi(m[3]); clients < 1 {
			t.Errorf("--stat clients %d, want at least redis-cli's own: %q", clients, l)
		}
		req, _ := strconv.Atoi(m[5])
		if req < lastReq {
			t.Errorf("--stat requests went down: %d after %d", req, lastReq)
		}
		lastReq = req
		d, _ := strconv.Atoi(m[6])
		maxDelta = max(maxDelta, d)
	}
	if lines < 5 {
		t.Fatalf("redis-cli --stat printed %d lines of figures in 1.9 s at -i 0.1:\n%s", lines, out.String())
	}
	if maxDelta < 100 {
		t.Errorf("--stat requests moved by at most %d a line while %d GETs ran:\n%s", maxDelta, sent.Load(), out.String())
	}
	t.Logf("%d GETs; redis-cli --stat:\n%s", sent.Load(), out.String())

	// The Stats section while the load ran.
	if n := infoInt(t, during, "instantaneous_ops_per_sec"); n < 100 {
		t.Errorf("instantaneous_ops_per_sec %d under load", n)
	}
	if v, err := strconv.ParseFloat(during["instantaneous_input_kbps"], 64); err != nil || v <= 0 {
		t.Errorf("instantaneous_input_kbps %q under load", during["instantaneous_input_kbps"])
	}
	if v, err := strconv.ParseFloat(during["instantaneous_output_kbps"], 64); err != nil || v <= 0 {
		t.Errorf("instantaneous_output_kbps %q under load", during["instantaneous_output_kbps"])
	}

	// After: the totals add up to what was sent.
	rc.must(t, "$-1", "GET", "missing")
	st := infoMap(t, rc, "stats")
	if n := infoInt(t, st, "total_commands_processed"); n < sent.Load()+20 {
		t.Errorf("total_commands_processed %d, want at least the %d commands sent", n, sent.Load()+20)
	}
	if n := infoInt(t, st, "keyspace_hits"); n < sent.Load() {
		t.Errorf("keyspace_hits %d after %d GETs of keys that exist", n, sent.Load())
	}
	if n := infoInt(t, st, "keyspace_misses"); n != 1 {
		t.Errorf("keyspace_misses %d after one GET of a missing key", n)
	}
	if n := infoInt(t, st, "total_connections_received"); n < 6 {
		t.Errorf("total_connections_received %d: redis-cli, this one and the load's 4 at least", n)
	}
	if n := infoInt(t, st, "total_net_input_bytes"); n < sent.Load()*10 {
		t.Errorf("total_net_input_bytes %d after %d GETs", n, sent.Load())
	}
	for _, f := range []string{"total_net_output_bytes", "rejected_connections", "expired_keys", "evicted_keys",
		"total_error_replies"} {
		infoInt(t, st, f) // present, an integer, not negative
	}

	// Memory: real, consistent figures.
	mem := infoMap(t, rc, "memory")
	used, rss, peak := infoInt(t, mem, "used_memory"), infoInt(t, mem, "used_memory_rss"), infoInt(t, mem, "used_memory_peak")
	if used < 100<<10 || rss < used || peak < used || infoInt(t, mem, "maxmemory") <= 0 {
		t.Errorf("INFO memory: used %d, rss %d, peak %d: want a Go heap's worth, rss and peak above it\n%v", used, rss, peak, mem)
	}
	if infoInt(t, mem, "used_memory_dataset") <= 0 || infoInt(t, mem, "used_memory_budget") < infoInt(t, mem, "used_memory_dataset") {
		t.Errorf("INFO memory: dataset and budget %v", mem)
	}
	human := regexp.MustCompile(`^\d+(\.\d\d)?[BKMGTP]$`)
	for _, f := range []string{"used_memory_human", "used_memory_rss_human", "used_memory_peak_human", "maxmemory_human"} {
		if !human.MatchString(mem[f]) {
			t.Errorf("INFO memory %s = %q", f, mem[f])
		}
	}
	if r, err := strconv.ParseFloat(mem["mem_fragmentation_ratio"], 64); err != nil || r <= 0 {
		t.Errorf("mem_fragmentation_ratio %q", mem["mem_fragmentation_ratio"])
	}

	// Keyspace in Redis's form, the locks in their own section.
	ks := infoMap(t, rc, "keyspace")
	if ks["db0"] != "keys=20,expires=0,avg_ttl=0" {
		t.Errorf("INFO keyspace db0 = %q, want keys=20,expires=0,avg_ttl=0", ks["db0"])
	}
	rc.must(t, "+OK", "SET", "brief", "v", "EX", "100")
	if ks := infoMap(t, rc, "keyspace"); !strings.HasPrefix(ks["db0"], "keys=21,expires=1,avg_ttl=") {
		t.Errorf("INFO keyspace db0 = %q after SET EX", ks["db0"])
	}
	if lk := infoMap(t, rc, "locks"); !strings.HasPrefix(lk["db0"], "keys=21,locked=21,") {
		t.Errorf("INFO locks db0 = %q", lk["db0"])
	}
	cl := infoMap(t, rc, "clients")
	if infoInt(t, cl, "maxclients") <= 0 || infoInt(t, cl, "connected_clients") < 1 {
		t.Errorf("INFO clients %v", cl)
	}
	// A waiting LOCK is a blocked client.
	holder, waiter := dialR(t, addr), dialR(t, addr)
	if got, err := holder.do("LOCK", "busy", "TIMEOUT", "0", "EXPRIED", "30"); err != nil || got != "*14" { // 12, and the grant's TOKEN (issue 19)
		t.Fatalf("LOCK busy: %q %v", got, err)
	}
	if _, err := waiter.c.Write(resp.AppendCommand(nil, "LOCK", "busy", "TIMEOUT", "30", "EXPRIED", "30")); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(time.Now().Add(5*time.Second), 10*time.Millisecond, func() bool {
		return infoInt(t, infoMap(t, rc, "clients"), "blocked_clients") == 1
	}) {
		t.Errorf("blocked_clients never 1 while a LOCK waits: %v", infoMap(t, rc, "clients"))
	}
}

// TestRedisCLILatency runs redis-cli --latency: PING is answered, in well under a second.
func TestRedisCLILatency(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed: run scripts/ensure-redis-tools.sh (Debian package redis-tools)")
	}
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	p.waitLog(t, "tallyd listening")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	// Without a terminal, --latency prints "min max avg samples" when it ends.
	out, _ := exec.CommandContext(ctx, cli, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "--latency").CombinedOutput()
	f := strings.Fields(string(out))
	if len(f) < 4 {
		t.Fatalf("redis-cli --latency printed %q", out)
	}
	f = f[len(f)-4:]
	maxMs, err1 := strconv.ParseFloat(f[1], 64)
	samples, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || samples < 10 || maxMs < 0 || maxMs > 500 {
		t.Fatalf("redis-cli --latency: %q (min max avg samples)", out)
	}
	t.Logf("redis-cli --latency: %s", out)
}

// infoMap runs INFO section and returns its "name:value" lines.
func infoMap(t *testing.T, rc *rconn, section string) map[string]string {
	t.Helper()
	got, err := rc.do("INFO", section)
	if err != nil || !strings.HasPrefix(got, "$# ") {
		t.Fatalf("INFO %s: %q %v", section, got, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(got[1:], "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// infoInt is field f of m, which must be a non-negative integer.
func infoInt(t *testing.T, m map[string]string, f string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(m[f], 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("INFO field %s = %q, want a non-negative integer", f, m[f])
	}
	return n
}
