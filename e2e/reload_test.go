package e2e

// SIGHUP reloads a running tallyd and never stops it; under systemd's notify protocol it
// reports readiness, the reload and the stop.

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

// notifySocket listens where tallyd's sd_notify datagrams go ($NOTIFY_SOCKET).
type notifySocket struct {
	t *testing.T
	c *net.UnixConn
}

func newNotifySocket(t *testing.T, name string) *notifySocket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{t, c}
}

// next is the next datagram, which must come within 10 s.
func (n *notifySocket) next() string {
	n.t.Helper()
	buf := make([]byte, 4096)
	_ = n.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	k, err := n.c.Read(buf)
	if err != nil {
		n.t.Fatalf("no sd_notify message: %v", err)
	}
	return string(buf[:k])
}

// none asserts nothing arrives for d.
func (n *notifySocket) none(d time.Duration) {
	n.t.Helper()
	_ = n.c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	if k, err := n.c.Read(buf); err == nil {
		n.t.Fatalf("unexpected sd_notify message %q", buf[:k])
	}
}

// waitFile waits until the file at path contains substr.
func waitFile(t *testing.T, path, substr string) string {
	t.Helper()
	var text string
	if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		b, _ := os.ReadFile(path)
		text = string(b)
		return strings.Contains(text, substr)
	}) {
		t.Fatalf("%s never said %q:\n%s", path, substr, text)
	}
	return text
}

func TestSIGHUPReloadsAndNotifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf, logFile := filepath.Join(dir, "tallyd.conf"), filepath.Join(dir, "tallyd.log")
	port, otherPort := freePort(t), freePort(t)
	writeConf := func(text string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := fmt.Sprintf("counter.port = %d\npool.port = 0\nslock.port = 0\ndata_dir = %s\nlog.format = json\nlog.path = %s\n",
		port, filepath.Join(dir, "data"), logFile)
	writeConf(base + "log.level = info\n")
	ns := newNotifySocket(t, "@tallyd-e2e-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	cmd := exec.Command(binPath, "--config", conf)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+ns.c.LocalAddr().String())
	p := startCmd(t, cmd)

	if got := ns.next(); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("first message %q, want READY=1", got)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	a := dialRetry(t, addr) // READY=1 came after the listener was bound: it connects at once
	if r := call(t, a, counter.AppendRequest(nil, counter.OpNoop, 1, nil)); r.Status != counter.StatusOK {
		t.Fatalf("noop: %v", r.Status)
	}
	if text := waitFile(t, logFile, "tallyd listening"); strings.Contains(text, `"level":"debug"`) {
		t.Fatalf("debug lines at level info:\n%s", text)
	}

	// Rotate the log, turn on debug, cap connections at one, move the port.
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	writeConf(strings.Replace(base, strconv.Itoa(port), strconv.Itoa(otherPort), 1) +
		"log.level = debug\nlimits.max_connections = 1\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := ns.next(); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Fatalf("got %q, want RELOADING=1 with MONOTONIC_USEC", got)
	}
	if got := ns.next(); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("got %q after the reload, want READY=1", got)
	}
	text := waitFile(t, logFile, "SIGHUP: config reloaded")
	for _, want := range []string{
		`"SIGHUP: log file reopened"`,
		`"changed":["limits.max_connections (--max-connections): 0 -> 1","log.level (--log-level): info -> debug"]`,
		fmt.Sprintf(`"needs_restart":["counter.port (--counter-port): %d -> %d"]`, port, otherPort),
		`"SIGHUP: these changes take effect only when tallyd is restarted"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the log after SIGHUP lacks %s:\n%s", want, text)
		}
	}
	if old, _ := os.ReadFile(logFile + ".1"); strings.Contains(string(old), "SIGHUP:") {
		t.Errorf("lines after SIGHUP went to the rotated file:\n%s", old)
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("tallyd exited on SIGHUP: %v\n%s", err, p.log.String())
	}

	// In force: a second connection is refused, the first is still served on the old port,
	// and debug lines are written.
	b := dialRetry(t, addr)
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := b.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("second connection not refused after limits.max_connections = 1: %d %v", n, err)
	}
	if r := call(t, a, counter.AppendRequest(nil, counter.OpNoop, 2, nil)); r.Status != counter.StatusOK {
		t.Fatalf("noop after reload: %v", r.Status)
	}
	a.Close()
	waitFile(t, logFile, `"level":"debug"`)
	waitFile(t, logFile, `"limit":"max-connections","value":1`)

	// A config that does not load changes nothing, and tallyd runs on.
	writeConf(base + "log.levle = warn\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := ns.next(); !strings.HasPrefix(got, "RELOADING=1") {
		t.Fatalf("got %q", got)
	}
	if got := ns.next(); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("got %q", got)
	}
	text = waitFile(t, logFile, `"message":"SIGHUP: config not reloaded: running on with the settings in force"`)
	if want := `tallyd.conf:7: unknown key \"log.levle\" (did you mean log.level?)`; !strings.Contains(text, want) {
		t.Fatalf("the failed reload does not say %s:\n%s", want, text)
	}
	// Nor does a max-input too small for the max-body still in force (it changes at a restart).
	writeConf(base + "limits.max_body = 1000\nlimits.max_input = 2000\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	ns.next()
	ns.next()
	waitFile(t, logFile, `--max-input 2000 must hold a whole request of the running --max-body (at least 1048588)`)
	c := dialRetry(t, addr)
	if r := call(t, c, counter.AppendRequest(nil, counter.OpNoop, 3, nil)); r.Status != counter.StatusOK {
		t.Fatalf("noop after a failed reload: %v", r.Status)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := ns.next(); got != "STOPPING=1" {
		t.Fatalf("got %q at SIGTERM, want STOPPING=1", got)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, p.log.String())
	}
	ns.none(200 * time.Millisecond)
}

// Without a config file SIGHUP only says so; it never stops tallyd, even before its loop has
// seen a connection.
func TestSIGHUPWithoutConfig(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	p := start(t, 0, "--counter-port", strconv.Itoa(port), "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "SIGHUP: no config file (--config) to reload")
	c := dialRetry(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if r := call(t, c, counter.AppendRequest(nil, counter.OpNoop, 1, nil)); r.Status != counter.StatusOK {
		t.Fatalf("noop: %v", r.Status)
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("exited on SIGHUP: %v\n%s", err, p.log.String())
	}
}
