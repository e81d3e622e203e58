package e2e

// Limits under attack: connections to the metrics port cannot use up the descriptors the
// main ports need, and slow clients do not hold their slots forever (--idle-timeout).

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// Keep-alive /healthz connections beyond what the descriptors allow are refused at the
// metrics port; the main ports go on accepting and serving, and the server stays up.
// (Before the shared budget, 600 such connections at `ulimit -n 512` made the next accept
// on the counter port fail with EMFILE, which stopped the engine: tallyd exited 1.)
func TestMetricsConnectionsCannotExhaustDescriptors(t *testing.T) {
	port, mport := freePort(t), freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	maddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	p := start(t, 512, "--counter-port", strconv.Itoa(port), "--metrics-addr", maddr, "--log-format", "json")
	p.waitLog(t, "serving /metrics")
	p.waitLog(t, "tallyd listening")
	first := dialRetry(t, addr)
	if r := call(t, first, counter.AppendAcquire(nil, 1, 1, 1, []byte("x"))); r.Status != counter.StatusOK {
		t.Fatalf("acquire: %v", r.Status)
	}

	// 600 keep-alive /healthz connections, each left open after its answer.
	const n = 600
	var (
		mu       sync.Mutex
		conns    []net.Conn
		answered atomic.Int32
		wg       sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", maddr, 3*time.Second)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: tallyd\r\n\r\n"); err != nil {
				return
			}
			if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.HasPrefix(line, "HTTP/1.1 ") {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Logf("%d of %d keep-alive /healthz connections answered", answered.Load(), n)
	if got := answered.Load(); got == 0 || got > 32 {
		t.Errorf("%d of %d keep-alive metrics connections were answered, want 1 to 32 (--metrics-max-connections)", got, n)
	}

	// The main port accepts and serves new connections, and the old one still works.
	for i := 0; i < 50; i++ {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			t.Fatalf("dial %d after the metrics flood: %v\n%s", i, err, p.log.String())
		}
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = c.Write(counter.AppendGet(nil, 2, []byte("x")))
		f, err := readFrame(c)
		c.Close()
		if err != nil {
			t.Fatalf("get on connection %d after the metrics flood: %v\n%s", i, err, p.log.String())
		}
		var r counter.Response
		if _, err := counter.ParseResponse(f, 1<<20, &r); err != nil || r.Status != counter.StatusOK {
			t.Fatalf("get on connection %d: %v %v", i, r.Status, err)
		}
	}
	if r := call(t, first, counter.AppendGet(nil, 3, []byte("x"))); r.Status != counter.StatusOK {
		t.Fatalf("get on the first connection: %v", r.Status)
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}

	// Once the flood is gone, the metrics port answers again: its descriptors came back.
	for _, c := range conns {
		c.Close()
	}
	if !waitUntil(time.Now().Add(10*time.Second), 100*time.Millisecond, func() bool {
		c, err := net.DialTimeout("tcp", maddr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: tallyd\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		return bytes.HasPrefix(b, []byte("HTTP/1.1 200"))
	}) {
		t.Fatalf("/healthz not answered after the flood:\n%s", p.log.String())
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}
}

// 3,000 connections trickling one byte a second, never a whole request, are closed after
// --idle-timeout; connections that hold or await something, or send whole requests, stay.
func TestIdleTimeoutClosesSlowClientsKeepsHolders(t *testing.T) {
	cport, pport, sport := freePort(t), freePort(t), freePort(t)
	caddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(cport))
	paddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(pport))
	saddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sport))
	const timeout = 2 * time.Second
	p := start(t, 0, "--counter-port", strconv.Itoa(cport), "--pool-port", strconv.Itoa(pport),
		"--slock-port", strconv.Itoa(sport), "--idle-timeout", "2", "--log-format", "json")
	p.waitLog(t, "tallyd listening")

	// Holders, each then silent.
	ctr := dialRetry(t, caddr) // a counter held
	if r := call(t, ctr, counter.AppendAcquire(nil, 1, 1, 5, []byte("held"))); r.Status != counter.StatusOK {
		t.Fatalf("acquire: %v", r.Status)
	}
	poolHolderConn := dialPoolLine(t, paddr) // a PoolCounter lock held...
	poolHolderConn.send(t, "ACQ4ME page 1 5 30\n")
	poolHolderConn.expect(t, "LOCKED")
	poolWaiter := dialPoolLine(t, paddr) // ... and one awaited
	poolWaiter.send(t, "ACQ4ME page 1 5 30\n")
	will := dialR(t, saddr)                                                            // slock text with a WILL
	if rep, err := will.do("LOCK", "w", "EXPRIED", "60"); err != nil || rep != "*14" { // 12, and the grant's TOKEN (issue 19)
		t.Fatalf("LOCK w: %q, %v", rep, err)
	}
	will.must(t, "+OK", "UNLOCK", "w", "WILL", "1")
	waiter := dialR(t, saddr) // slock text with a pending LOCK (w is held)
	if _, err := waiter.c.Write(respCmd("LOCK", "w", "TIMEOUT", "60", "EXPRIED", "60")); err != nil {
		t.Fatal(err)
	}
	active := dialRetry(t, caddr) // whole requests more often than the timeout
	stopActive := make(chan struct{})
	activeErr := make(chan error, 1)
	go func() {
		for i := uint32(10); ; i++ {
			select {
			case <-stopActive:
				activeErr <- nil
				return
			case <-time.After(500 * time.Millisecond):
			}
			_ = active.SetDeadline(time.Now().Add(3 * time.Second))
			if _, err := active.Write(counter.AppendRequest(nil, counter.OpNoop, i, nil)); err != nil {
				activeErr <- err
				return
			}
			if _, err := readFrame(active); err != nil {
				activeErr <- err
				return
			}
		}
	}()

	// 3,000 slow clients, 1,000 per protocol, each sending a request that never completes,
	// one byte a second.
	slow := [3]struct {
		addr  string
		bytes []byte
	}{
		{caddr, cfRaw(0x90, cfGet, 0, 0, 1, bytes.Repeat([]byte{'a'}, 100))},
		{paddr, []byte("ACQ4ME " + strings.Repeat("a", 100))},
		{saddr, []byte("*2\r\n$3\r\nGET\r\n$100\r\n" + strings.Repeat("a", 100))},
	}
	const perProto = 1000
	type slowConn struct {
		c      net.Conn
		opened time.Time
		closed atomic.Int64 // Unix ns at which the server closed it
	}
	conns := make([]*slowConn, 0, 3*perProto)
	for _, s := range slow {
		for i := 0; i < perProto; i++ {
			c, err := net.DialTimeout("tcp", s.addr, 3*time.Second)
			if err != nil {
				t.Fatalf("dial slow client %d: %v", len(conns), err)
			}
			sc := &slowConn{c: c, opened: time.Now()}
			conns = append(conns, sc)
			go func() {
				_, err := io.Copy(io.Discard, c) // until the server closes it
				if !errors.Is(err, net.ErrClosed) {
					sc.closed.Store(time.Now().UnixNano())
				}
			}()
		}
	}
	defer func() {
		for _, sc := range conns {
			sc.c.Close()
		}
	}()
	stopTrickle := make(chan struct{})
	var trickled sync.WaitGroup
	trickled.Add(1)
	go func() {
		defer trickled.Done()
		for k := 0; ; k++ {
			for i, sc := range conns {
				if sc.closed.Load() != 0 {
					continue
				}
				b := slow[i/perProto].bytes
				_ = sc.c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				_, _ = sc.c.Write(b[k%len(b) : k%len(b)+1])
			}
			select {
			case <-stopTrickle:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	defer func() { close(stopTrickle); trickled.Wait() }()

	open := func() (n int) {
		for _, sc := range conns {
			if sc.closed.Load() == 0 {
				n++
			}
		}
		return n
	}
	if !waitUntil(time.Now().Add(timeout+10*time.Second), 100*time.Millisecond, func() bool { return open() == 0 }) {
		t.Fatalf("%d of %d slow clients still open %s after the idle timeout", open(), len(conns), 10*time.Second)
	}
	var first, last time.Duration
	for i, sc := range conns {
		held := time.Duration(sc.closed.Load() - sc.opened.UnixNano())
		if held < timeout-100*time.Millisecond {
			t.Fatalf("slow client %d closed after %s, before the idle timeout %s", i, held, timeout)
		}
		if i == 0 || held < first {
			first = held
		}
		last = max(last, held)
	}
	t.Logf("%d slow clients closed %s to %s after they opened (idle timeout %s)", len(conns), first, last, timeout)
	p.waitLog(t, "closing idle connections")

	// Every holder is still there, and what it holds or awaits goes on.
	time.Sleep(timeout) // well past their own timeout by now
	close(stopActive)
	if err := <-activeErr; err != nil {
		t.Fatalf("the active connection: %v", err)
	}
	if r := call(t, ctr, counter.AppendGet(nil, 2, []byte("held"))); r.Status != counter.StatusOK {
		t.Fatalf("counter holder: get: %v", r.Status)
	}
	poolHolderConn.send(t, "RELEASE\n")
	poolHolderConn.expect(t, "RELEASED")
	poolWaiter.expect(t, "LOCKED") // the waiter was kept, and gets the lock
	will.must(t, "+PONG", "PING")
	_ = waiter.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := waiter.br.Peek(1); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("slock text waiter: answered or closed before w was unlocked: %v", err)
	}
	_ = will.c.Close()                                         // its WILL unlocks w, which the pending LOCK was waiting for
	if rep, err := waiter.read(); err != nil || rep != "*14" { // 12, and the grant's TOKEN (issue 19)
		t.Fatalf("slock text waiter: %q, %v", rep, err)
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}
}

// poolLine is a PoolCounter connection read line by line.
type poolLine struct {
	c net.Conn
	r *bufio.Reader
}

func dialPoolLine(t *testing.T, addr string) *poolLine {
	c := dialRetry(t, addr)
	return &poolLine{c: c, r: bufio.NewReader(c)}
}

func (p *poolLine) send(t *testing.T, s string) {
	t.Helper()
	_ = p.c.SetWriteDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(p.c, s); err != nil {
		t.Fatal(err)
	}
}

func (p *poolLine) expect(t *testing.T, want string) {
	t.Helper()
	_ = p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := p.r.ReadString('\n')
	if err != nil || strings.TrimSuffix(line, "\n") != want {
		t.Fatalf("pool: got %q (%v), want %q", line, err, want)
	}
}

func respCmd(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// The open-file limit lowered under the running server (prlimit) is followed: a flood past
// the new limit is refused at the cap instead of stopping the engine.
func TestLoweredOpenFileLimitIsFollowed(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit is not installed")
	}
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := start(t, 1024, "--counter-port", strconv.Itoa(port), "--backlog", "16", "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	first := dialRetry(t, addr)
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(p.cmd.Process.Pid), "--nofile=256:1024").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v\n%s", err, out)
	}
	p.waitLog(t, "the open-file limit changed")

	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Floods of 400 connections, kept open, until the server says it refused one at the cap
	// (on a loaded machine one flood's dials may time out before the loop accepts enough).
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.log.String(), "open-file cap") && time.Now().Before(deadline) {
		var wg sync.WaitGroup
		for i := 0; i < 400; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", addr, 3*time.Second)
				if err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		time.Sleep(100 * time.Millisecond)
	}
	p.waitLog(t, "open-file cap")
	if r := call(t, first, counter.AppendGet(nil, 1, []byte("x"))); r.Status != counter.StatusNotFound {
		t.Fatalf("get after the flood: %v", r.Status)
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}
}
