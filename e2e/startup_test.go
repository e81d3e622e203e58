package e2e

// Starting the binary: its flags, its config file, and the exit status and message of each
// way a start can fail.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	p := start(t, 0, "-l", "300.1.2.3", "--counter-port", strconv.Itoa(freePort(t)))
	if code := p.exitCode(t); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(p.log.String(), `"300.1.2.3"`) {
		t.Fatalf("the message does not name the address:\n%s", p.log.String())
	}
}

func TestBusyPortExits1(t *testing.T) {
	t.Parallel()
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

// tallyd listens with SO_REUSEPORT (its loop accepts by itself), but a second server on the
// same port must still fail at start rather than split the clients between two stores.
func TestSecondServerOnSamePortExits1(t *testing.T) {
	t.Parallel()
	port := strconv.Itoa(freePort(t))
	a := start(t, 0, "--counter-port", port)
	a.waitLog(t, "tallyd listening")
	b := start(t, 0, "--counter-port", port)
	if code := b.exitCode(t); code != 1 || !strings.Contains(b.log.String(), "address already in use") {
		t.Fatalf("second server: exit %d:\n%s", code, b.log.String())
	}
	if exited, err := a.exited(); exited {
		t.Fatalf("first server exited: %v", err)
	}
}

func TestConfigFileAndFlagOverride(t *testing.T) {
	t.Parallel()
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
