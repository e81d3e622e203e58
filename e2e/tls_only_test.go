package e2e

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/internal/testcert"
)

// TLS only: every plaintext port set to 0 and a TLS port for each protocol. The server
// must serve every TLS port (old code: gnet refused to run without a listener of its
// own, "the internal engine is empty", and TLS clients got EOF), and listen on nothing
// else: the plaintext ports really are off.
func TestTLSOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "e2e CA")
	srv := ca.WriteFiles(t, dir, "server", "tallyd", "127.0.0.1")
	slockTLS, counterTLS, poolTLS := freePort(t), freePort(t), freePort(t)
	tmp := t.TempDir() // the server's $TMPDIR
	p := startEnv(t, []string{"TMPDIR=" + tmp}, "--counter-port=0", "--pool-port=0", "--slock-port=0", "--semaphore-port=0",
		"--slock-tls-port="+strconv.Itoa(slockTLS), "--counter-tls-port="+strconv.Itoa(counterTLS),
		"--pool-tls-port="+strconv.Itoa(poolTLS),
		"--tls-cert-file="+srv.Cert, "--tls-key-file="+srv.Key)
	p.waitLog(t, "tallyd listening")
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	dial := func(port int) *tls.Conn {
		t.Helper()
		var c *tls.Conn
		var err error
		if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
			c, err = tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(port), cfg)
			return err == nil
		}) {
			t.Fatalf("TLS dial %d: %v\n%s", port, err, p.log.String())
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}

	// slock's TLS port: Redis text.
	r := &rconn{c: dial(slockTLS)}
	r.br = bufio.NewReader(r.c)
	for _, step := range []struct {
		want string
		args []string
	}{{"+PONG", []string{"PING"}}, {"+OK", []string{"SET", "e2e:tlsonly", "v1"}}, {"$v1", []string{"GET", "e2e:tlsonly"}}} {
		got, err := r.do(step.args...)
		if err != nil || got != step.want {
			t.Fatalf("%v over TLS: %q, %v (want %q)\n%s", step.args, got, err, step.want, p.log.String())
		}
	}

	// The counter protocol's TLS port.
	if resp := call(t, dial(counterTLS), cfReq(cfAcquire, 7, cfAcqBody(2, 5, "tls-only"))); resp.Status != 0 || resp.Opaque != 7 {
		t.Fatalf("acquire over TLS: %+v", resp)
	}

	// PoolCounter's TLS port.
	pc := dial(poolTLS)
	if _, err := pc.Write([]byte("ACQ4ME page 1 5 3\nRELEASE\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("LOCKED\nRELEASED\n"))
	if _, err := io.ReadFull(pc, buf); err != nil || string(buf) != "LOCKED\nRELEASED\n" {
		t.Fatalf("PoolCounter over TLS: %q, %v", buf, err)
	}

	// The process listens on the TLS ports and on no other TCP port.
	want := []int{counterTLS, poolTLS, slockTLS}
	sort.Ints(want)
	if got := listeningPorts(t, p.cmd.Process.Pid); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the process listens on TCP ports %v, want only the TLS ports %v", got, want)
	}
	// The loop's own socket (a unix socket: gnet needs a listener) is unlinked once bound.
	if m, _ := filepath.Glob(filepath.Join(tmp, "*")); len(m) > 0 {
		t.Errorf("a path of the server's left in $TMPDIR: %v", m)
	}
	// The default plaintext ports refuse (unless something else on this machine has one).
	for _, port := range []int{defaultSlockPort, defaultCounterPort, defaultPoolPort} {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			t.Logf("port %d accepted a connection: another process's (not in this server's listeners)", port)
		}
	}

	// And it stops on SIGTERM, saying so, with no socket of its own left behind.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, p.log.String())
	}
	if strings.Contains(p.log.String(), "engine is empty") {
		t.Errorf("the log says gnet had no engine:\n%s", p.log.String())
	}
	if m, _ := filepath.Glob(filepath.Join(tmp, "*")); len(m) > 0 {
		t.Errorf("left behind in $TMPDIR: %v", m)
	}
}

// startEnv is start with more environment variables.
func startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	if !strings.Contains(strings.Join(args, " "), "--data-dir") {
		args = append(args, "--data-dir="+t.TempDir())
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), env...)
	return startCmd(t, cmd)
}

const (
	defaultSlockPort   = 5658
	defaultCounterPort = 11215
	defaultPoolPort    = 7531
)

// listeningPorts returns, sorted, the TCP ports process pid listens on (from /proc: its
// socket descriptors matched against the kernel's TCP tables).
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []int
	// The server's own view (/proc/PID/net): /proc/net is the reading thread's, and a test
	// of this process may have a thread in a network namespace of its own.
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "net", table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] { // 0A: LISTEN
				continue
			}
			i := strings.LastIndexByte(f[1], ':')
			port, err := strconv.ParseUint(f[1][i+1:], 16, 16)
			if err != nil {
				t.Fatal(err)
			}
			ports = append(ports, int(port))
		}
	}
	sort.Ints(ports)
	return ports
}
