package e2e

// Issue 12 items 5 and 6: one client, or many, must not be able to make tallyd exhaust
// memory. Each test runs an attack against the built binary with a small memory budget and
// reads the process's peak resident set (VmHWM) from /proc.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// memBudget is the --max-memory the attacks run against.
const memBudget = 64 << 20

// memCeiling is the peak RSS the attacks must stay under: the budget plus a fixed
// allowance for the runtime, the binary and the Go collector's slack (the Go memory limit
// tallyd sets is the budget + 64 MiB).
const memCeiling = memBudget + 96<<20

// procMem reads a field of /proc/PID/status, in bytes.
func procMem(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the server's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// memServer starts tallyd with the memory budget and the given listeners.
func memServer(t *testing.T, args ...string) *proc {
	t.Helper()
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	args = append([]string{"--max-memory=" + strconv.Itoa(memBudget), "--appendonly=false"}, args...)
	return start(t, 0, args...)
}

// mb formats bytes as MiB for logs.
func mb(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// checkPeak fails the test if the server's peak RSS went over memCeiling, and logs it.
func checkPeak(t *testing.T, p *proc, base int64, what string) {
	t.Helper()
	pid := p.cmd.Process.Pid
	peak, now := procMem(t, pid, "VmHWM"), procMem(t, pid, "VmRSS")
	t.Logf("%s: RSS at start %s, peak %s, now %s (budget %s, ceiling %s)", what, mb(base), mb(peak), mb(now), mb(memBudget), mb(memCeiling))
	if peak > memCeiling {
		t.Errorf("%s: peak RSS %s is over the budget plus a fixed overhead (%s)", what, mb(peak), mb(memCeiling))
	}
}

// alive checks that the server still answers on the slock port (Redis text) or counter port.
func aliveRedis(t *testing.T, addr string) {
	t.Helper()
	r := dialR(t, addr)
	r.must(t, "+PONG", "PING")
}

// TestMemoryWillFlood: one connection sends 1,500 `LOCK … WILL 1 SET <1 MB>`. Pending WILLs
// are capped per connection (count and bytes) with an error, and RSS stays bounded.
func TestMemoryWillFlood(t *testing.T) {
	port := freePort(t)
	p := memServer(t, "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	addr := "127.0.0.1:" + strconv.Itoa(port)
	r := dialR(t, addr)
	r.must(t, "+PONG", "PING")
	_ = r.c.SetDeadline(time.Time{}) // do set one; the writer below must not run into it
	base := procMem(t, p.cmd.Process.Pid, "VmRSS")

	value := strings.Repeat("v", 1_000_000)
	const n = 1500
	go func() {
		w := bufio.NewWriterSize(r.c, 1<<20)
		for i := range n {
			if _, err := w.Write(resp.AppendCommand(nil, "LOCK", "will"+strconv.Itoa(i), "WILL", "1", "SET", value)); err != nil {
				return
			}
		}
		_ = w.Flush()
	}()
	ok, refused := 0, 0
	var firstErr string
	for i := range n {
		_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := r.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v (ok %d, refused %d)", i, err, ok, refused)
		}
		switch {
		case line == "+OK\r\n":
			ok++
		case strings.HasPrefix(line, "-"):
			refused++
			if firstErr == "" {
				firstErr = strings.TrimSpace(line)
			}
		default:
			t.Fatalf("reply %d: %q", i, line)
		}
	}
	t.Logf("%d WILLs queued, %d refused; first refusal: %s", ok, refused, firstErr)
	if refused == 0 || !strings.Contains(firstErr, "slock-max-will-bytes") {
		t.Errorf("1,500 WILLs of 1 MB each: %d queued, %d refused (first: %q); want refusals naming slock-max-will-bytes", ok, refused, firstErr)
	}
	if ok*1_000_000 > 4<<20 {
		t.Errorf("%d WILLs of 1 MB queued on one connection, over the 4 MiB default", ok)
	}
	checkPeak(t, p, base, "1,500 WILL SET 1 MB")

	// The count cap: small WILLs stop at --slock-max-wills (1024).
	r2 := dialR(t, addr)
	_ = r2.c.SetDeadline(time.Time{})
	var buf bytes.Buffer
	for i := range 1100 {
		buf.Write(resp.AppendCommand(nil, "LOCK", "w"+strconv.Itoa(i), "WILL", "1", "SET", "x"))
	}
	_, _ = r2.c.Write(buf.Bytes())
	ok, refused, firstErr = 0, 0, ""
	for i := range 1100 {
		_ = r2.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := r2.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if line == "+OK\r\n" {
			ok++
		} else if refused++; firstErr == "" {
			firstErr = strings.TrimSpace(line)
		}
	}
	if ok != 1024 || refused != 76 || !strings.Contains(firstErr, "slock-max-wills") {
		t.Errorf("1,100 small WILLs: %d queued, %d refused (first: %q); want 1024 and 76 naming slock-max-wills", ok, refused, firstErr)
	}
	aliveRedis(t, addr)
}

// attackPartial opens conns connections to addr and sends each the bytes of payload, a
// request that never completes, from a few goroutines. It returns how many connections the
// server closed under it.
func attackPartial(t *testing.T, addr string, conns int, payload []byte) (closed int) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	sem := make(chan struct{}, 32)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 60*time.Second)
			if err != nil {
				t.Errorf("dial %d: %v", i, err)
				return
			}
			_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
			for sent := 0; sent < len(payload); sent += 64 << 10 {
				if _, err := c.Write(payload[sent:min(len(payload), sent+64<<10)]); err != nil {
					break // closed by the server
				}
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	for _, c := range open {
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			closed++
		}
	}
	t.Cleanup(func() {
		for _, c := range open {
			c.Close()
		}
	})
	return closed
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestMemoryPartialRESP: 500 Redis-text connections each park a 4 MB partial SET (under
// --max-input): the budget closes the connections buffering the most, and RSS stays bounded.
func TestMemoryPartialRESP(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 2 GB")
	}
	port := freePort(t)
	p := memServer(t, "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	addr := "127.0.0.1:" + strconv.Itoa(port)
	aliveRedis(t, addr)
	base := procMem(t, p.cmd.Process.Pid, "VmRSS")
	// MSET of five 1 MB values, cut after the fourth: 4 MB parked, under --max-input.
	var req bytes.Buffer
	req.WriteString("*11\r\n$4\r\nMSET\r\n")
	for i := range 4 {
		fmt.Fprintf(&req, "$1\r\n%d\r\n$1000000\r\n%s\r\n", i, bytes.Repeat([]byte("v"), 1_000_000))
	}
	closed := attackPartial(t, addr, 500, req.Bytes())
	t.Logf("500 connections x 4 MB of partial SET: %d closed by the server", closed)
	if closed < 400 {
		t.Errorf("only %d of 500 connections parking 4 MB each were closed under a %s budget", closed, mb(memBudget))
	}
	checkPeak(t, p, base, "500 RESP connections x 4 MB partial")
	aliveRedis(t, addr)
	if !strings.Contains(p.log.String(), "max-memory") {
		t.Errorf("no log line names max-memory:\n%.2000s", p.log.String())
	}
}

// TestMemoryPartialCounter: 1,000 counter connections each park 1 MB of an Acquire whose body
// never completes.
func TestMemoryPartialCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 1 GB")
	}
	port := freePort(t)
	p := memServer(t, "--counter-port="+strconv.Itoa(port))
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := dialRetry(t, addr)
	if r := call(t, c, cfReq(cfNoop, 1, nil)); r.Status != 0 {
		t.Fatalf("noop: status %#x", r.Status)
	}
	base := procMem(t, p.cmd.Process.Pid, "VmRSS")
	const size = 1_000_000
	req := cfRaw(0x90, cfAcquire, 0, 0, 7, bytes.Repeat([]byte("p"), size))
	binary.BigEndian.PutUint32(req[4:], size+100) // never complete
	closed := attackPartial(t, addr, 1000, req)
	t.Logf("1,000 counter connections x 1 MB partial: %d closed by the server", closed)
	if closed < 800 {
		t.Errorf("only %d of 1,000 connections parking 1 MB each were closed under a %s budget", closed, mb(memBudget))
	}
	checkPeak(t, p, base, "1,000 counter connections x 1 MB partial")
	c2 := dialRetry(t, addr)
	if r := call(t, c2, cfReq(cfNoop, 2, nil)); r.Status != 0 {
		t.Fatalf("noop after the attack: status %#x", r.Status)
	}
}

// TestMemoryCounterNames: 10,000 counters with 65,535-byte names, each acquired and released.
// Name bytes count against the budget; released counters keep their name and interval
// maximum for Dump, but beyond the budget they give way, oldest first (issue 21 item 3):
// every one is created, memory stays bounded, and existing counters keep working.
func TestMemoryCounterNames(t *testing.T) {
	port := freePort(t)
	p := memServer(t, "--counter-port="+strconv.Itoa(port))
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := dialRetry(t, addr)
	if r := call(t, c, cfReq(cfNoop, 1, nil)); r.Status != 0 {
		t.Fatalf("noop: status %#x", r.Status)
	}
	_ = c.SetDeadline(time.Time{}) // call set one
	base := procMem(t, p.cmd.Process.Pid, "VmRSS")
	name := func(i int) string {
		b := bytes.Repeat([]byte{'n'}, 65535)
		copy(b, strconv.Itoa(i)+"-")
		return string(b)
	}
	const n = 10_000
	go func() {
		w := bufio.NewWriterSize(c, 1<<20)
		for i := range n {
			nm := name(i)
			_, _ = w.Write(cfReq(cfAcquire, uint32(2*i), cfAcqBody(1, 10, nm)))
			_, _ = w.Write(cfReq(cfRelease, uint32(2*i+1), cfRelBody(1, nm)))
		}
		_ = w.Flush()
	}()
	br := bufio.NewReader(c)
	created := 0
	for i := range n {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		acq, err := readFrame(br)
		if err != nil {
			t.Fatalf("acquire %d: %v\n%.3000s", i, err, p.log.String())
		}
		rel, err := readFrame(br)
		if err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if acq[2] != 0 || rel[2] != 0 {
			t.Fatalf("counter %d: acquire status %#x, release %#x", i, acq[2], rel[2])
		}
		created++
	}
	t.Logf("%d counters of 65,535-byte names created and released", created)
	checkPeak(t, p, base, "10,000 counters x 65,535-byte names")

	// The newest released counters are still there; a counter that exists still works.
	if r := call(t, c, cfReq(cfGet, 1, cfGetBody(name(n-1)))); r.Status != 0 {
		t.Errorf("the newest released counter: status %#x", r.Status)
	}
	if r := call(t, c, cfReq(cfAcquire, 1, cfAcqBody(2, 10, name(n-1)))); r.Status != 0 {
		t.Errorf("acquire of an existing counter over the budget: status %#x", r.Status)
	}
	if r := call(t, c, cfReq(cfGet, 1, cfGetBody(name(0)))); r.Status != 0x01 {
		t.Errorf("the oldest released counter, evicted: status %#x, want 0x01 Not found", r.Status)
	}
}
