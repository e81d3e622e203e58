package e2e

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// fillKeys SETs n keys prefix:0.. (value v<i>) at addr with pipelined MSETs.
func fillKeys(t *testing.T, addr, prefix string, n int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const per, window = 500, 16 // MSETs of per keys, at most window of them unanswered
	cmds := (n + per - 1) / per
	errc := make(chan error, 1)
	credit := make(chan struct{}, window)
	go func() {
		args := make([]string, 0, 1+2*per)
		for i := 0; i < n; i += per {
			credit <- struct{}{}
			args = append(args[:0], "MSET")
			for j := i; j < min(i+per, n); j++ {
				args = append(args, prefix+":"+strconv.Itoa(j), "v"+strconv.Itoa(j))
			}
			if _, err := c.Write(resp.AppendCommand(nil, args...)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	br := bufio.NewReaderSize(c, 1<<16)
	_ = c.SetReadDeadline(time.Now().Add(120 * time.Second))
	for i := range cmds {
		line, err := br.ReadString('\n')
		if err != nil || line != "+OK\r\n" {
			t.Fatalf("MSET %d of %d: %q, %v", i, cmds, line, err)
		}
		<-credit
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// latencies measures GET round trips at addr until stop.
func latencies(addr string, stop <-chan struct{}, out *[]time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	k := &cclient{addr: addr}
	defer k.close()
	for {
		select {
		case <-stop:
			return
		default:
		}
		t0 := time.Now()
		if _, err := k.do(10*time.Second, "GET", "probe"); err != nil {
			*out = append(*out, time.Hour) // fails the bound
			return
		}
		*out = append(*out, time.Since(t0))
	}
}

// sentLog is a writer's SETs: when each was sent and when its reply came.
type sentLog struct {
	mu   sync.Mutex
	sent []time.Time
	ack  []time.Time
}

// write SETs w:0, w:1, ... one at a time at addr until stop.
func (l *sentLog) write(addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	k := &cclient{addr: addr}
	defer k.close()
	for j := 0; ; j++ {
		select {
		case <-stop:
			return
		default:
		}
		l.mu.Lock()
		l.sent = append(l.sent, time.Now())
		l.mu.Unlock()
		got, err := k.do(10*time.Second, "SET", "w:"+strconv.Itoa(j), "v"+strconv.Itoa(j))
		if err != nil || got != "+OK" {
			return
		}
		l.mu.Lock()
		l.ack = append(l.ack, time.Now())
		l.mu.Unlock()
	}
}

// TestSnapshotLargeNoPause (issue 30, item 7): SNAPSHOT of a store of 1M keys, while a
// writer SETs keys one after another, never holds the loop: another client's GETs meanwhile
// have a p99 of at most 10 ms (encoded in one turn, a SNAPSHOT of 1M keys paused every
// client up to 845 ms). The file, restored, holds the 1M keys, every SET acknowledged
// before the save began and none sent after it began (the server's log says when), and the
// keys changed while it was encoded with their values before.
// TALLYD_SNAPSHOT_KEYS sets the store's size: make test uses 300,000 (filling 1M keys takes
// most of a minute, a sixth of the suite's time); by hand TALLYD_SNAPSHOT_KEYS=1000000 and
// 5000000 (issue 31, item 6: the suite's time).
func TestSnapshotLargeNoPause(t *testing.T) {
	n := 300_000
	if v := os.Getenv("TALLYD_SNAPSHOT_KEYS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// No log rewrite meanwhile (its slices are not what this measures).
	p := start(t, 0, "--counter-port", "0", "--slock-port", strconv.Itoa(port), "--data-dir", filepath.Join(dir, "live"),
		"--aof-rewrite-size", "1099511627776")
	dialRetry(t, addr)
	tallyctl(t, "--help") // built before the clock starts
	t0 := time.Now()
	fillKeys(t, addr, "p", n)
	t.Logf("%d keys set in %v", n, time.Since(t0).Round(time.Millisecond))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var lat []time.Duration
	var wl sentLog
	wg.Add(1)
	go wl.write(addr, stop, &wg)
	time.Sleep(100 * time.Millisecond)
	probeStop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Add(1)
	go latencies(addr, probeStop, &lat, &pwg)
	time.Sleep(time.Second)
	base := slices.Clone(lat) // the same GETs before the save: how loaded the box is
	slices.Sort(base)
	baseP99 := base[len(base)*99/100]
	t.Logf("before the save: %d GETs in 1s, p99 %v, max %v", len(base), baseP99, base[len(base)-1])
	lat = lat[:0]

	file := filepath.Join(dir, "backup.snap")
	cut := time.Now()
	type res struct {
		code int
		out  string
	}
	done := make(chan res, 1)
	go func() {
		code, out := tallyctl(t, append(ctlAt(addr), "--timeout", "60s", "snapshot", "save", file)...)
		done <- res{code, out}
	}()
	// The save began before the log says so: every SET sent after that is after it.
	var began time.Time
	for began.IsZero() {
		if strings.Contains(p.log.String(), "snapshot for a backup begun") {
			began = time.Now()
		}
		select {
		case r := <-done:
			t.Fatalf("snapshot save ended before its start was seen: exit %d: %s", r.code, r.out)
		case <-time.After(time.Millisecond):
		}
	}
	// Keys the encoding has not reached yet (the walk goes in the order they were made,
	// so the last ones) changed after the save began: the file has their old values.
	var over []int
	overStop := make(chan struct{})
	var owg sync.WaitGroup
	owg.Add(1)
	go func() {
		defer owg.Done()
		k := &cclient{addr: addr}
		defer k.close()
		for j := n - 1; j >= 0; j-- {
			select {
			case <-overStop:
				return
			default:
			}
			if got, err := k.do(10*time.Second, "SET", "p:"+strconv.Itoa(j), "changed"); err != nil || got != "+OK" {
				return
			}
			over = append(over, j)
		}
	}()
	r := <-done
	close(overStop)
	owg.Wait()
	took := time.Since(cut)
	close(probeStop)
	pwg.Wait()
	close(stop)
	wg.Wait()
	if r.code != 0 || !strings.Contains(r.out, "single snapshot") {
		t.Fatalf("snapshot save: exit %d: %s", r.code, r.out)
	}
	slices.Sort(lat)
	if len(lat) < 20 {
		t.Fatalf("only %d GETs during the save", len(lat))
	}
	p99, worst := lat[len(lat)*99/100], lat[len(lat)-1]
	wl.mu.Lock()
	before, after := 0, 0
	for _, at := range wl.ack {
		if at.Before(cut) {
			before++
		}
	}
	for _, at := range wl.sent {
		if at.After(began) {
			after++
		}
	}
	wl.mu.Unlock()
	t.Logf("%s; save took %v; %d GETs meanwhile: p99 %v, max %v; %d SETs acknowledged before the save, %d sent after it began",
		strings.TrimSpace(r.out), took.Round(time.Millisecond), len(lat), p99, worst, before, after)
	longest := -1.0 // the server's longest step of the save, ms (its log line)
	for _, line := range strings.Split(p.log.String(), "\n") {
		if strings.Contains(line, "snapshot taken for a backup") {
			t.Logf("server: %s", line)
			if i := strings.Index(line, "longest_step_ms="); i >= 0 {
				f := strings.Fields(line[i+len("longest_step_ms="):])
				if len(f) > 0 {
					longest, _ = strconv.ParseFloat(f[0], 64)
				}
			}
		}
	}
	// Its steps are bounded (~1 ms of work each): the longest, wall clock, may be stretched by
	// the scheduler on a loaded box, never to a save done in one turn (hundreds of ms here).
	if longest < 0 || longest > 50 {
		t.Errorf("the save's longest step held the loop %v ms (want at most 50; -1: not logged)", longest)
	}
	rate := float64(len(lat)) / took.Seconds() // GETs a second during the save, beside len(base) in 1 s before
	switch {
	case baseP99 > 2*time.Millisecond:
		// A box this loaded (other processes hold the CPUs for tens of ms) cannot tell a
		// turn held by the save from one taken by the scheduler.
		t.Logf("the box is loaded (GETs' p99 %v before the save): the 10ms bound is not judged", baseP99)
	case rate < float64(len(base))/2:
		// The GETs slowed to less than half their rate with no step of the save longer than
		// the bound (checked above): the CPUs were taken (make test's other processes, the
		// file's writer), which a latency cannot tell from a held loop. Measure it on a quiet
		// machine: scripts/snapshot-latency.sh.
		t.Logf("the GETs ran at %.0f/s during the save against %d/s before: the box is contended, the 10ms bound is not judged (p99 %v)", rate, len(base), p99)
	case p99 > 10*time.Millisecond:
		t.Errorf("another client's p99 during the SNAPSHOT of %d keys: %v (max %v), want at most 10ms", n, p99, worst)
	}
	if before == 0 || after == 0 {
		t.Fatalf("%d SETs acknowledged before the save and %d sent after it began: the test checks nothing", before, after)
	}

	rdir := filepath.Join(dir, "restored")
	if code, out := runBin(t, "restore", file, "--data-dir", rdir); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	rport := freePort(t)
	raddr := "127.0.0.1:" + strconv.Itoa(rport)
	rp := start(t, 0, "--counter-port", "0", "--slock-port", strconv.Itoa(rport), "--data-dir", rdir)
	if !waitUntil(time.Now().Add(60*time.Second), 20*time.Millisecond, func() bool {
		got, err := (&cclient{addr: raddr}).do(time.Second, "PING")
		return err == nil && got == "+PONG"
	}) {
		t.Fatalf("the restored node does not answer:\n%s", rp.log.String())
	}
	k := &cclient{addr: raddr}
	defer k.close()
	wl.mu.Lock()
	defer wl.mu.Unlock()
	present := 0
	for j, at := range wl.sent {
		got, err := k.do(10*time.Second, "GET", "w:"+strconv.Itoa(j))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case j < len(wl.ack) && wl.ack[j].Before(cut) && got != "$v"+strconv.Itoa(j):
			t.Fatalf("w:%d, acknowledged %v before the save, restored as %q", j, cut.Sub(wl.ack[j]), got)
		case at.After(began) && got != "$-1":
			t.Fatalf("w:%d, sent %v after the save began, restored as %q", j, at.Sub(began), got)
		case got != "$-1":
			present++
		}
	}
	if len(over) == 0 {
		t.Fatal("no key was changed during the save: the copy-on-write was not checked")
	}
	for _, j := range over {
		key := "p:" + strconv.Itoa(j)
		if got, err := k.do(10*time.Second, "GET", key); err != nil || got != "$v"+strconv.Itoa(j) {
			t.Fatalf("%s, changed after the save began, restored as %q (%v), want its value before", key, got, err)
		}
	}
	t.Logf("%d keys changed during the save restored with their values before it", len(over))
	for _, j := range []int{0, 1, n / 2, n - 1} {
		key := "p:" + strconv.Itoa(j)
		if got, err := k.do(10*time.Second, "GET", key); err != nil || got != "$v"+strconv.Itoa(j) {
			t.Fatalf("%s restored as %q (%v)", key, got, err)
		}
	}
	if got, err := k.do(10*time.Second, "DBSIZE"); err != nil || got != ":"+strconv.Itoa(n+present) {
		t.Fatalf("DBSIZE of the restored node: %q (%v), want %d", got, err, n+present)
	}
	t.Logf("restored: %d keys, %d of the writer's", n+present, present)
}
