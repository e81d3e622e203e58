package e2e

// A running server: SIGTERM ends it cleanly, and running out of file descriptors never stops
// it.

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

func TestSIGTERMReleasesAndExits0(t *testing.T) {
	t.Parallel()
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
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		c := dialRetry(t, addr)
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(counter.AppendRequest(nil, counter.OpNoop, 3, nil))
		n, _ := io.ReadFull(c, make([]byte, 12))
		return n == 12
	}) {
		t.Fatalf("no new connection served after the flood:\n%s", p.log.String())
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}
}
