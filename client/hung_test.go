package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/client"
)

// procTallyd is a tallyd process: a server that can be stopped with SIGSTOP, which an
// in-process one cannot.
type procTallyd struct {
	cmd *exec.Cmd
	client.Server
}

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "client-tallyd")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tallyd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/tallyd/tallyd")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build tallyd: %v\n%s", err, out)
	}
	return bin, nil
})

// startProc runs a tallyd process named name on free ports of 127.0.0.1 (counters,
// PoolCounter, slock) and returns once it answers; it is killed when the test ends.
func startProc(t *testing.T, name string) *procTallyd {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(bin)) })
	ports := make([]string, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		_ = ln.Close()
	}
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--counter-port", ports[0], "--semaphore-port", "0",
		"--pool-port", ports[1], "--slock-port", ports[2], "--appendonly=false", "--data-dir", t.TempDir())
	var log syncLog
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	p := &procTallyd{cmd: cmd, Server: client.Server{Name: name, Counter: "127.0.0.1:" + ports[0],
		Pool: "127.0.0.1:" + ports[1], Slock: "127.0.0.1:" + ports[2]}}
	c, err := client.New([]client.Server{p.Server}, &client.Options{HealthInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err1 := c.Counters().Get(ctx, "ready")
		_, err2 := c.Pool().Stats(ctx, 0, "UPTIME")
		_, err3 := c.Values().Get(ctx, "ready")
		cancel()
		if errors.Is(err1, client.ErrNotFound) && err2 == nil && errors.Is(err3, client.ErrNotFound) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("tallyd %s never answered: %v, %v, %v\n%s", name, err1, err2, err3, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type syncLog struct {
	mu sync.Mutex
	b  []byte
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *syncLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return string(l.b) }

// timedHealth records OnHealth calls with their time.
type timedHealth struct {
	mu     sync.Mutex
	events []healthEvent
}

type healthEvent struct {
	addr string
	up   bool
	at   time.Time
}

func (h *timedHealth) on(addr string, up bool, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, healthEvent{addr, up, time.Now()})
}

// of returns the events of addr, in order.
func (h *timedHealth) of(addr string) []healthEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []healthEvent
	for _, e := range h.events {
		if e.addr == addr {
			out = append(out, e)
		}
	}
	return out
}

// Issue 15 item 5: with one of two servers stopped by SIGSTOP (it accepts TCP connections
// but answers nothing), the client marks it down once, keeps it down while it is stopped
// (a health check is an answer to the protocol's no-op, not a dial), fails requests over
// within IOTimeout (a PoolCounter wait too, after a probe), and stalls no later round; after SIGCONT it marks it up and its keys
// go back.
func TestHungServerNoFlapping(t *testing.T) {
	a, b := startProc(t, "a"), startProc(t, "b")
	const ioTimeout, healthInterval, healthTimeout = time.Second, 50 * time.Millisecond, 300 * time.Millisecond
	var hl timedHealth
	c, err := client.New([]client.Server{a.Server, b.Server}, &client.Options{IOTimeout: ioTimeout,
		DialTimeout: 200 * time.Millisecond, HealthInterval: healthInterval, HealthTimeout: healthTimeout,
		OnHealth: hl.on})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var keys []string // keys that live on b
	for i := 0; len(keys) < 4; i++ {
		if k := fmt.Sprint("key", i); c.Order(k)[0] == "b" {
			keys = append(keys, k)
		}
	}
	ctx := testCtx(t)

	// round runs one request of each kind per key, and returns the longest one and where
	// the counters were held.
	round := func() (longest time.Duration, addrs map[string]bool, err error) {
		addrs = map[string]bool{}
		timed := func(f func() error) error {
			start := time.Now()
			err := f()
			longest = max(longest, time.Since(start))
			return err
		}
		for _, k := range keys {
			if err := timed(func() error {
				h, err := c.Counters().Acquire(ctx, k, 1, 100)
				if err != nil {
					return err
				}
				addrs[h.Addr()] = true
				return h.Release(ctx)
			}); err != nil {
				return longest, addrs, fmt.Errorf("counter %s: %w", k, err)
			}
			if err := timed(func() error {
				return c.Pool().Do(ctx, k, client.Limits{Workers: 1, MaxQueue: 10, Timeout: 5 * time.Second},
					func(context.Context) error { return nil })
			}); err != nil {
				return longest, addrs, fmt.Errorf("pool %s: %w", k, err)
			}
			if err := timed(func() error { _, err := c.Values().Incr(ctx, k); return err }); err != nil {
				return longest, addrs, fmt.Errorf("incr %s: %w", k, err)
			}
		}
		return longest, addrs, nil
	}
	if _, addrs, err := round(); err != nil || !addrs[b.Counter] || len(addrs) != 1 {
		t.Fatalf("before the stop: %v, counters held at %v, want b's %s only", err, addrs, b.Counter)
	}

	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b is stopped", func() bool { return procState(t, b.cmd.Process.Pid) == 'T' })
	stopped := time.Now()
	var slow []string
	rounds := 0
	for time.Since(stopped) < 5*time.Second {
		start := time.Now()
		longest, addrs, err := round()
		rounds++
		if err != nil {
			t.Fatalf("round %d with b stopped: %v", rounds, err)
		}
		if addrs[b.Counter] || !addrs[a.Counter] {
			t.Fatalf("round %d with b stopped: counters held at %v, want a's %s", rounds, addrs, a.Counter)
		}
		// One request per protocol waits IOTimeout for b, then fails over; none waits longer
		// (a PoolCounter wait of 5 s: IOTimeout, then a probe that gets no answer).
		if limit := ioTimeout + healthInterval + healthTimeout + 300*time.Millisecond; longest > limit {
			t.Errorf("round %d: a request took %v, more than IOTimeout %v, a probe and a margin", rounds, longest, ioTimeout)
		}
		if d := time.Since(start); d > ioTimeout/2 {
			slow = append(slow, fmt.Sprintf("round %d at +%v: %v", rounds, start.Sub(stopped).Round(time.Millisecond), d))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(slow) != 1 || rounds < 10 {
		t.Errorf("%d rounds in 5 s with b stopped; the slow ones (want only the first): %v", rounds, slow)
	}
	for _, addr := range []string{b.Counter, b.Pool, b.Slock} {
		ev := hl.of(addr)
		if len(ev) != 1 || ev[0].up {
			t.Errorf("%s while stopped: health events %+v, want one: marked down", addr, ev)
		}
	}
	for _, addr := range []string{a.Counter, a.Pool, a.Slock} {
		if ev := hl.of(addr); len(ev) != 0 {
			t.Errorf("%s (running) had health events %+v", addr, ev)
		}
	}

	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	for _, addr := range []string{b.Counter, b.Pool, b.Slock} {
		eventually(t, addr+" marked up after SIGCONT", func() bool {
			ev := hl.of(addr)
			return len(ev) == 2 && ev[1].up
		})
	}
	t.Logf("%d rounds while b was stopped, slow: %v; marked up %v after SIGCONT", rounds, slow,
		hl.of(b.Counter)[1].at.Sub(resumed).Round(time.Millisecond))
	if _, addrs, err := round(); err != nil || !addrs[b.Counter] || len(addrs) != 1 {
		t.Fatalf("after SIGCONT: %v, counters held at %v, want b's %s again", err, addrs, b.Counter)
	}
}

// procState is the state letter of process pid (/proc/PID/stat): 'T' once stopped.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	i := bytes.LastIndexByte(stat, ')') // the command name may hold anything
	if i < 0 || i+2 >= len(stat) {
		t.Fatalf("/proc/%d/stat: %q", pid, stat)
	}
	return stat[i+2]
}
