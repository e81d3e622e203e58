package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tallyd/proto/counter"
)

var binPath string

// TestMain builds the real binary once: these tests run it as a process, the way
// deployment scripts do. It is built by import path, so the tests work from any directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tallyd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "tallyd")
	out, err := exec.Command("go", "build", "-o", binPath, "tallyd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// freePort returns a port that was free a moment ago on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncBuf is a bytes.Buffer safe for the process's writer and the test's reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type proc struct {
	cmd  *exec.Cmd
	log  *syncBuf
	done chan error
}

// start runs the binary (through bash when a ulimit is wanted) and kills it when the test ends.
//
// Tests never use the default ports: unless args name --pool-port or --slock-port, those are off.
func start(t *testing.T, ulimit int, args ...string) *proc {
	t.Helper()
	if !strings.Contains(strings.Join(args, " "), "--pool-port") {
		args = append(args, "--pool-port=0")
	}
	if !strings.Contains(strings.Join(args, " "), "--slock-port") {
		args = append(args, "--slock-port=0")
	}
	if j := strings.Join(args, " "); !strings.Contains(j, "--data-dir") && !strings.Contains(j, "--appendonly") {
		args = append(args, "--data-dir="+t.TempDir())
	}
	var cmd *exec.Cmd
	if ulimit > 0 {
		cmd = exec.Command("bash", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, ulimit), binPath}, args...)...)
	} else {
		cmd = exec.Command(binPath, args...)
	}
	p := &proc{cmd: cmd, log: &syncBuf{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) waitLog(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.log.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("log never said %q:\n%s", substr, p.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitCode waits for the process to end.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatalf("process did not exit; log:\n%s", p.log.String())
	}
	return -1
}

// call sends one request and reads its response.
func call(t *testing.T, c net.Conn, req []byte) counter.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatalf("write: %v", err)
	}
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatalf("read: %v", err)
	}
	buf := make([]byte, 12+binary.BigEndian.Uint32(hdr[4:]))
	copy(buf, hdr)
	if _, err := io.ReadFull(c, buf[12:]); err != nil {
		t.Fatalf("read body: %v", err)
	}
	var r counter.Response
	if _, err := counter.ParseResponse(buf, 1<<20, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func dialRetry(t *testing.T, addr string) net.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runBin runs the binary to its end and returns its exit status and everything it printed.
func runBin(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(binPath, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("tallyd %q: %v", args, err)
	return -1, ""
}

func TestHelpAndVersion(t *testing.T) {
	code, help := runBin(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	for _, want := range []string{"Usage: tallyd", "-l, --bind", "--counter-port", "--semaphore-port",
		"--config", "--max-connections", "--max-body", "--max-objects", "--max-output",
		"--log-level", "--log-format", "--version", "counter.stat_interval", "SIGTERM"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	out, err := exec.Command(binPath, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "tallyd ") {
		t.Fatalf("--version: %q, %v", out, err)
	}
	if code, out := runBin(t, "--no-such-flag"); code != 2 || !strings.Contains(out, "no-such-flag") {
		t.Fatalf("unknown flag: exit %d, %q", code, out)
	}
}

func TestInvalidBindExits1(t *testing.T) {
	p := start(t, 0, "-l", "300.1.2.3", "--counter-port", strconv.Itoa(freePort(t)))
	if code := p.exitCode(t); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(p.log.String(), `"300.1.2.3"`) {
		t.Fatalf("the message does not name the address:\n%s", p.log.String())
	}
}

func TestBusyPortExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	p := start(t, 0, "--counter-port", port)
	if code := p.exitCode(t); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(p.log.String(), "address already in use") {
		t.Fatalf("no reason given:\n%s", p.log.String())
	}
}

func TestSIGTERMReleasesAndExits0(t *testing.T) {
	port := freePort(t)
	p := start(t, 0, "--counter-port", strconv.Itoa(port), "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	c := dialRetry(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if r := call(t, c, counter.AppendAcquire(nil, 1, 1, 1, []byte("x"))); r.Status != counter.StatusOK {
		t.Fatalf("acquire: %v", r.Status)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM, want 0:\n%s", code, p.log.String())
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("connection still open after shutdown: %d, %v", n, err)
	}
}

func TestConfigFileAndFlagOverride(t *testing.T) {
	p1, p2, p3 := freePort(t), freePort(t), freePort(t)
	conf := filepath.Join(t.TempDir(), "yrmcds.conf")
	err := os.WriteFile(conf, []byte(fmt.Sprintf(`# a yrmcds.conf
counter.enable = true
counter.port = %d
counter.max_connections = 1
counter.consumption_stats.interval = 3600
semaphore.enable = true
semaphore.port = %d
semaphore.gc_interval = 5
memory_limit = 1G
`, p1, p2)), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, 0, "--config", conf, "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	log := p.log.String()
	for _, want := range []string{
		fmt.Sprintf(`"counter":"127.0.0.1:%d"`, p1),
		fmt.Sprintf(`"semaphore":"127.0.0.1:%d"`, p2),
		`"key":"memory_limit"`, "unknown config key",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	// counter.max_connections = 1 is in force: a second connection is closed at once.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p1))
	c1 := dialRetry(t, addr)
	call(t, c1, counter.AppendRequest(nil, counter.OpNoop, 1, nil))
	c2 := dialRetry(t, addr)
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c2.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("second connection not refused: %d %v", n, err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// A flag wins over the file; counter.enable = false turns the counter listener off.
	q := start(t, 0, "--config", conf, "--counter-port", strconv.Itoa(p3), "--log-format", "json")
	q.waitLog(t, "tallyd listening")
	if !strings.Contains(q.log.String(), fmt.Sprintf(`"counter":"127.0.0.1:%d"`, p3)) {
		t.Fatalf("flag did not override the file:\n%s", q.log.String())
	}
	off := filepath.Join(t.TempDir(), "off.conf")
	_ = os.WriteFile(off, []byte("counter.enable = false\nsemaphore.enable = true\nsemaphore.port = "+strconv.Itoa(freePort(t))+"\n"), 0o644)
	r := start(t, 0, "--config", off, "--log-format", "json")
	r.waitLog(t, "tallyd listening")
	if strings.Contains(r.log.String(), `"counter":`) {
		t.Fatalf("counter.enable = false left the counter listener on:\n%s", r.log.String())
	}
	bad := filepath.Join(t.TempDir(), "bad.conf")
	_ = os.WriteFile(bad, []byte("counter.port = lots\n"), 0o644)
	b := start(t, 0, "--config", bad)
	if code := b.exitCode(t); code != 1 || !strings.Contains(b.log.String(), "bad.conf:1") {
		t.Fatalf("bad config: exit %d:\n%s", code, b.log.String())
	}
}

// With a small open-file limit, a flood of connections is refused at the cap instead of
// stopping the engine: the server goes on serving.
func TestOpenFileLimitNeverStopsTheEngine(t *testing.T) {
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := start(t, 128, "--counter-port", strconv.Itoa(port), "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	first := dialRetry(t, addr)
	if r := call(t, first, counter.AppendAcquire(nil, 1, 1, 1, []byte("x"))); r.Status != counter.StatusOK {
		t.Fatalf("acquire: %v", r.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 3 * time.Second}
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.waitLog(t, "open-file cap")
	// The engine is alive: the first connection still works.
	_ = first.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.Write(counter.AppendGet(nil, 2, []byte("x"))); err != nil {
		t.Fatalf("write after the flood: %v\n%s", err, p.log.String())
	}
	if _, err := io.ReadFull(first, make([]byte, 16)); err != nil {
		t.Fatalf("get after the flood: %v\n%s", err, p.log.String())
	}
	for _, c := range conns {
		c.Close()
	}
	// And, once the flood is gone, new clients get in.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dialRetry(t, addr)
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(counter.AppendRequest(nil, counter.OpNoop, 3, nil))
		if n, _ := io.ReadFull(c, make([]byte, 12)); n == 12 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection served after the flood:\n%s", p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-p.done:
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	default:
	}
}

// PoolCounter deployment scripts run the daemon with -l and stop it with SIGTERM.
func TestPoolCounterProcess(t *testing.T) {
	port := freePort(t)
	p := start(t, 0, "-l", "127.0.0.1", "--counter-port", "0", "--pool-port", strconv.Itoa(port))
	p.waitLog(t, "tallyd listening")
	c := dialRetry(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ACQ4ME page 1 5 3\nRELEASE\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("LOCKED\nRELEASED\n"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "LOCKED\nRELEASED\n" {
		t.Fatalf("replies %q, %v", buf, err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.log.String())
	}
}

// tallyd listens with SO_REUSEPORT (its loop accepts by itself), but a second server on the
// same port must still fail at start rather than split the clients between two stores.
func TestSecondServerOnSamePortExits1(t *testing.T) {
	port := strconv.Itoa(freePort(t))
	a := start(t, 0, "--counter-port", port)
	a.waitLog(t, "tallyd listening")
	b := start(t, 0, "--counter-port", port)
	if code := b.exitCode(t); code != 1 || !strings.Contains(b.log.String(), "address already in use") {
		t.Fatalf("second server: exit %d:\n%s", code, b.log.String())
	}
	select {
	case err := <-a.done:
		t.Fatalf("first server exited: %v", err)
	default:
	}
}
