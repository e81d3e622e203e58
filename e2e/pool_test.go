package e2e

// PoolCounter as its deployment scripts run it.

import (
	"io"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// PoolCounter deployment scripts run the daemon with -l and stop it with SIGTERM.
func TestPoolCounterProcess(t *testing.T) {
	t.Parallel()
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
