package main

import (
	"bytes"
	"fmt"
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
)

// The tests run the real binaries, as people and scripts do: tallyd on
// ephemeral ports and tallyctl against it.
var tallydBin, ctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tallyctl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tallydBin, ctlBin = filepath.Join(dir, "tallyd"), filepath.Join(dir, "tallyctl")
	for _, b := range [][2]string{{tallydBin, "github.com/tallyd/tallyd"}, {ctlBin, "."}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b[1], err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuf is a bytes.Buffer safe for a process's writer and the test's reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

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

// server is a running tallyd with every protocol on its own port.
type server struct {
	counter, semaphore, pool, slock int
	log                             *syncBuf
}

// startServer runs tallyd until the test ends. Without the semaphore
// listener (semaphore false) its port is one nobody listens on.
func startServer(t *testing.T, semaphore bool, extra ...string) *server {
	t.Helper()
	s := &server{counter: freePort(t), semaphore: freePort(t), pool: freePort(t), slock: freePort(t), log: &syncBuf{}}
	semArg := strconv.Itoa(s.semaphore)
	if !semaphore {
		semArg = "0"
	}
	cmd := exec.Command(tallydBin, "--counter-port", strconv.Itoa(s.counter), "--semaphore-port", semArg,
		"--pool-port", strconv.Itoa(s.pool), "--slock-port", strconv.Itoa(s.slock), "--semaphore-gc-interval", "1")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.Dir = t.TempDir() // for anything it writes (slock's append-only log goes to ./data)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ports := []int{s.counter, s.pool, s.slock}
	if semaphore {
		ports = append(ports, s.semaphore)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range ports {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("tallyd never listened on %d:\n%s", p, s.log.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

// flags are the global flags pointing tallyctl at s.
func (s *server) flags() []string {
	return []string{"--counter-port", strconv.Itoa(s.counter), "--semaphore-port", strconv.Itoa(s.semaphore),
		"--pool-port", strconv.Itoa(s.pool), "--slock-port", strconv.Itoa(s.slock)}
}

// result is one finished tallyctl run.
type result struct {
	out, err string
	code     int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
}

// ctl runs tallyctl against s with args and waits for it.
func (s *server) ctl(t *testing.T, args ...string) result {
	t.Helper()
	p := s.start(t, args...)
	return p.wait(t)
}

// proc is a tallyctl running in the background (holding something).
type proc struct {
	cmd      *exec.Cmd
	out, err *syncBuf
	done     chan struct{}
	code     int
}

func (s *server) start(t *testing.T, args ...string) *proc {
	t.Helper()
	return s.startEnv(t, nil, args...)
}

// startEnv starts tallyctl with env in place of the endpoint variables of the test's
// environment (TALLYD_HOST, TALLYD_*_PORT), which it never inherits.
func (s *server) startEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	full := args
	if s != nil {
		full = append(s.flags(), args...)
	}
	p := &proc{cmd: exec.Command(ctlBin, full...), out: &syncBuf{}, err: &syncBuf{}, done: make(chan struct{})}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TALLYD_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to end (generously: only to avoid a hang).
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("tallyctl %q did not exit; stdout %q stderr %q", p.cmd.Args, p.out.String(), p.err.String())
	}
	return result{p.out.String(), p.err.String(), p.code}
}

// waitOut waits until the process has printed substr.
func (p *proc) waitOut(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(p.out.String(), substr) {
		select {
		case <-p.done:
			t.Fatalf("tallyctl %q exited %d before printing %q; stdout %q stderr %q",
				p.cmd.Args[1:], p.code, substr, p.out.String(), p.err.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tallyctl %q never printed %q; stdout %q stderr %q", p.cmd.Args[1:], substr, p.out.String(), p.err.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expect checks a run's exit status and that its stdout and stderr contain
// the given strings.
func expect(t *testing.T, r result, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\n%v", r.code, code, r)
		return
	}
	for _, s := range stdout {
		if !strings.Contains(r.out, s) {
			t.Errorf("stdout lacks %q\n%v", s, r)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.err, s) {
			t.Errorf("stderr lacks %q\n%v", s, r)
		}
	}
}

// eventually retries check (which returns "" when satisfied) for a while,
// for states that change when the server gets round to a close.
func eventually(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
