package tlsbridge

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/internal/testcert"
)

// fakeLoop stands for the event loop: each enrolled end is served by a goroutine of the
// test, which answers every line with it upper-cased, and closes after a line "QUIT" (the
// loop closing first) or at EOF (the client closing first).
type fakeLoop struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []*Conn
	ends   []net.Conn
	events []Event
	eof    atomic.Int64 // ends that saw EOF from the bridge
	budget *countBudget
}

func (f *fakeLoop) enroll(_ context.Context, end net.Conn, c *Conn) error {
	f.mu.Lock()
	f.conns = append(f.conns, c)
	f.ends = append(f.ends, end)
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer c.LoopClosed()
		defer end.Close()
		r := bufio.NewReader(end)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				f.eof.Add(1)
				return
			}
			if _, err := end.Write([]byte(strings.ToUpper(line))); err != nil {
				return
			}
			if line == "QUIT\n" {
				return
			}
		}
	}()
	return nil
}

func (f *fakeLoop) report(e Event) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *fakeLoop) eventsOf(k EventKind) []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Event
	for _, e := range f.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// countBudget is a Budget with a cap.
type countBudget struct {
	cap  atomic.Int64
	used atomic.Int64
}

func (b *countBudget) Take() bool {
	if b.used.Add(1) > b.cap.Load() {
		b.used.Add(-1)
		return false
	}
	return true
}
func (b *countBudget) Give() { b.used.Add(-1) }

// setup is a bridge serving a listener on 127.0.0.1 with a fresh CA's certificate.
type setup struct {
	t      *testing.T
	ca     *testcert.CA
	b      *Bridge
	loop   *fakeLoop
	addr   string
	client *tls.Config
	base   int // goroutines before the bridge
}

func newSetup(t *testing.T, mod func(*Config)) *setup {
	t.Helper()
	ca := testcert.NewCA(t, "bridge test CA")
	st := &setup{t: t, ca: ca, loop: &fakeLoop{budget: &countBudget{}}, base: settledGoroutines()}
	st.loop.budget.cap.Store(1 << 20)
	cfg := Config{
		Server: &tls.Config{Certificates: []tls.Certificate{ca.TLSCert(t, "server", "127.0.0.1")}},
		Enroll: st.loop.enroll, Report: st.loop.report, Budget: st.loop.budget,
		HandshakeTimeout: 5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	st.b = New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st.addr = ln.Addr().String()
	st.b.Serve(ln, "test listener")
	st.client = &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	return st
}

// dial is a TLS client of the bridge.
func (st *setup) dial() *tls.Conn {
	st.t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", st.addr, st.client)
	if err != nil {
		st.t.Fatalf("dial: %v", err)
	}
	return c
}

// rawDial opens a plain TCP connection to addr: a TLS client that never starts its
// handshake. It is closed when the test ends.
func rawDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// expectCut checks that the bridge closes c.
func expectCut(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("%s was not closed: %v", what, err)
	}
}

// ping dials a TLS client, checks one round trip and closes it.
func (st *setup) ping(line string) {
	st.t.Helper()
	c := st.dial()
	defer c.Close()
	if got := roundTrip(st.t, c, line); got != strings.ToUpper(line) {
		st.t.Fatalf("%q answered %q", line, got)
	}
}

// roundTrip sends a line and reads the loop's answer.
func roundTrip(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(got, "\n")
}

// closeAll closes the bridge and checks that every goroutine it and the fake loop started
// is gone and every descriptor is given back.
func (st *setup) closeAll() {
	st.t.Helper()
	st.b.Close(5 * time.Second)
	st.loop.wg.Wait()
	st.checkGone()
}

// checkGone waits for the goroutine count to come back to what it was before the bridge,
// and for the budget to be whole again.
func (st *setup) checkGone() {
	st.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, used := runtime.NumGoroutine(), st.loop.budget.used.Load()
		if n <= st.base && used == 0 && st.b.Stats().Live == 0 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			st.t.Fatalf("%d goroutines (%d before), %d descriptors still taken, %d connections live:\n%s",
				n, st.base, used, st.b.Stats().Live, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settledGoroutines is the goroutine count once those of earlier tests have ended.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return m
		}
		n = m
	}
	return n
}

// The client closes first: the loop's end sees EOF, and nothing is left behind.
func TestBridgeClientCloses(t *testing.T) {
	st := newSetup(t, nil)
	var cs []*tls.Conn
	for i := 0; i < 5; i++ {
		c := st.dial()
		if got := roundTrip(t, c, "ping"); got != "PING" {
			t.Fatalf("got %q, want PING", got)
		}
		cs = append(cs, c)
	}
	if got := st.loop.budget.used.Load(); got != 5*Descriptors {
		t.Errorf("5 bridged connections take %d descriptors, want %d", got, 5*Descriptors)
	}
	for _, c := range cs {
		_ = c.Close()
	}
	st.loop.wg.Wait() // every fake loop connection saw EOF and closed
	if n := st.loop.eof.Load(); n != 5 {
		t.Errorf("%d loop ends saw EOF, want 5", n)
	}
	waitLive(t, st.b, 0)
	if got := st.loop.budget.used.Load(); got != 0 {
		t.Errorf("%d descriptors still taken after every connection closed", got)
	}
	st.closeAll()
}

// The loop closes first: the client gets the last answer, then EOF (close_notify).
func TestBridgeLoopCloses(t *testing.T) {
	st := newSetup(t, nil)
	c := st.dial()
	defer c.Close()
	if got := roundTrip(t, c, "QUIT"); got != "QUIT" {
		t.Fatalf("got %q", got)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the loop closed: read %d, %v; want EOF", n, err)
	}
	waitLive(t, st.b, 0)
	st.closeAll()
}

// A client that half-closes (close_notify) after its request still gets the answer: the
// loop sees EOF after the request, as over TCP.
func TestBridgeHalfClose(t *testing.T) {
	st := newSetup(t, func(c *Config) {
		c.Enroll = func(_ context.Context, end net.Conn, bc *Conn) error {
			go func() {
				defer bc.LoopClosed()
				defer end.Close()
				b, _ := io.ReadAll(end) // up to EOF
				_, _ = end.Write([]byte(strings.ToUpper(string(b))))
			}()
			return nil
		}
	})
	c := st.dial()
	defer c.Close()
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "HELLO\n" {
		t.Fatalf("after a half-close: %q, %v; want HELLO", got, err)
	}
	waitLive(t, st.b, 0)
	st.closeAll()
}

// A handshake that never finishes takes only its own goroutine: another client is served
// while it hangs (its timeout is a minute away), and Close ends it.
func TestBridgeStalledHandshake(t *testing.T) {
	st := newSetup(t, func(c *Config) { c.HandshakeTimeout = time.Minute })
	stalled := rawDial(t, st.addr)
	_, _ = stalled.Write([]byte{0x16, 0x03, 0x01}) // the start of a record, never finished
	waitPending(t, st.b, 1)
	st.ping("ping")
	st.closeAll()
}

// A stalled handshake is cut at the timeout, and reported.
func TestBridgeHandshakeTimeout(t *testing.T) {
	st := newSetup(t, func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond })
	stalled := rawDial(t, st.addr)
	expectCut(t, stalled, "the stalled handshake")
	deadline := time.Now().Add(5 * time.Second)
	for len(st.loop.eventsOf(HandshakeFailed)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled handshake was not reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if e := st.loop.eventsOf(HandshakeFailed)[0]; !strings.Contains(e.Err.Error(), "within") || e.Tag != "test listener" {
		t.Errorf("event %+v", e)
	}
	st.closeAll()
}

// Handshakes in progress are capped: one over the cap is closed at once, and counted.
func TestBridgeHandshakeCap(t *testing.T) {
	st := newSetup(t, func(c *Config) { c.MaxHandshakes = 2 })
	var stalled []net.Conn
	for i := 0; i < 2; i++ {
		s := rawDial(t, st.addr)
		stalled = append(stalled, s)
	}
	waitPending(t, st.b, 2)
	over := rawDial(t, st.addr)
	expectCut(t, over, "a handshake over the cap")
	if ev := st.loop.eventsOf(Refused); len(ev) != 1 || ev[0].Why != "handshakes in progress" {
		t.Fatalf("refusals %+v", ev)
	}
	for _, s := range stalled {
		_ = s.Close() // their handshakes fail: the slots are free again
	}
	waitPending(t, st.b, 0)
	st.ping("again")
	st.closeAll()
}

// The descriptor budget is taken before the handshake: a connection it has no room for is
// closed at once; room comes back when connections close.
func TestBridgeBudget(t *testing.T) {
	st := newSetup(t, nil)
	st.loop.budget.cap.Store(peak) // room for one connection being set up
	c := st.dial()
	if got := roundTrip(t, c, "one"); got != "ONE" {
		t.Fatalf("got %q", got)
	}
	// It now holds Descriptors: one short of another's peak.
	expectCut(t, rawDial(t, st.addr), "a connection past the budget")
	if ev := st.loop.eventsOf(Refused); len(ev) != 1 || ev[0].Why != "open-file cap" {
		t.Fatalf("refusals %+v", ev)
	}
	_ = c.Close()
	waitLive(t, st.b, 0)
	c = st.dial()
	if got := roundTrip(t, c, "two"); got != "TWO" {
		t.Fatalf("got %q", got)
	}
	_ = c.Close()
	st.closeAll()
}

// Admit refuses before any handshake work.
func TestBridgeAdmit(t *testing.T) {
	var open atomic.Bool
	st := newSetup(t, func(c *Config) { c.Admit = func(tag any) bool { return open.Load() && tag == "test listener" } })
	if _, err := tls.Dial("tcp", st.addr, st.client); err == nil {
		t.Fatal("a connection Admit refused got through its handshake")
	}
	open.Store(true)
	st.ping("in")
	st.closeAll()
}

// Mutual TLS: without a certificate, or with one from another CA, the handshake fails
// (reported); with the CA's, the loop learns the client's verified subject.
func TestBridgeMutualTLS(t *testing.T) {
	var st *setup
	st = newSetup(t, func(c *Config) {
		c.Server.ClientAuth = tls.RequireAndVerifyClientCert
	})
	st.b.cfg.Server.ClientCAs = st.ca.Pool()
	other := testcert.NewCA(t, "another CA")
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":           nil,
		"a certificate of another": {other.TLSCert(t, "intruder")},
	} {
		cfg := st.client.Clone()
		cfg.Certificates = certs
		c, err := tls.Dial("tcp", st.addr, cfg)
		if err == nil {
			// TLS 1.3: the client learns of the refusal at its first read.
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = c.Write([]byte("x\n"))
			_, err = c.Read(make([]byte, 1))
			_ = c.Close()
		}
		if err == nil {
			t.Fatalf("%s: served", name)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(st.loop.eventsOf(HandshakeFailed)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("handshake failures reported: %+v", st.loop.eventsOf(HandshakeFailed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cfg := st.client.Clone()
	cfg.Certificates = []tls.Certificate{st.ca.TLSCert(t, "app-7")}
	c, err := tls.Dial("tcp", st.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, c, "ok"); got != "OK" {
		t.Fatalf("got %q", got)
	}
	st.loop.mu.Lock()
	subject, remote := st.loop.conns[0].Subject, st.loop.conns[0].Remote.String()
	st.loop.mu.Unlock()
	if !strings.Contains(subject, "CN=app-7") || remote != c.LocalAddr().String() {
		t.Errorf("the loop sees subject %q from %s; want CN=app-7 from %s", subject, remote, c.LocalAddr())
	}
	_ = c.Close()
	st.closeAll()
}

// Dial: an outbound TLS connection, bridged the same way.
func TestBridgeDial(t *testing.T) {
	st := newSetup(t, nil)
	srv := st.dialTarget()
	cb := New(Config{Client: &tls.Config{RootCAs: st.ca.Pool(), Certificates: []tls.Certificate{st.ca.TLSCert(t, "dialer")}},
		Budget: st.loop.budget})
	var end net.Conn
	var got *Conn
	err := cb.Dial(context.Background(), srv, "peer 2", func(_ context.Context, e net.Conn, c *Conn) error {
		end, got = e, c
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Outbound || got.Tag != "peer 2" || !strings.Contains(got.Subject, "CN=server") {
		t.Errorf("dialled conn %+v", got)
	}
	// The fake loop writes on its end; the TLS server (an upper-casing echo) answers.
	if g := roundTrip(t, end, "hello"); g != "HELLO" {
		t.Fatalf("got %q", g)
	}
	_ = end.Close()
	got.LoopClosed()
	cb.Close(5 * time.Second)
	if s := cb.Stats(); s.Live != 0 || s.Bridged != 1 {
		t.Errorf("stats %+v", s)
	}
	st.closeAll()
}

// dialTarget serves the fake loop through the setup's own bridge, for Dial to reach.
func (st *setup) dialTarget() string { return st.addr }

// A dial to a server whose certificate another CA signed fails, and takes nothing.
func TestBridgeDialOtherCA(t *testing.T) {
	st := newSetup(t, nil)
	other := testcert.NewCA(t, "another CA")
	cb := New(Config{Client: &tls.Config{RootCAs: other.Pool()}, Budget: st.loop.budget})
	err := cb.Dial(context.Background(), st.addr, nil, func(context.Context, net.Conn, *Conn) error {
		t.Error("enrolled")
		return nil
	})
	var uerr x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &uerr) {
		t.Fatalf("dial to another CA's server: %v", err)
	}
	cb.Close(time.Second)
	st.closeAll()
}

// Close ends everything: handshakes in progress and bridged connections.
func TestBridgeCloseEndsAll(t *testing.T) {
	st := newSetup(t, nil)
	rawDial(t, st.addr) // a handshake in progress
	var cs []*tls.Conn
	for i := 0; i < 3; i++ {
		c := st.dial()
		roundTrip(t, c, "x")
		cs = append(cs, c)
	}
	waitPending(t, st.b, 1)
	// The loop closes its ends when it stops, as gnet does.
	st.loop.mu.Lock()
	for _, e := range st.loop.ends {
		_ = e.Close()
	}
	st.loop.mu.Unlock()
	st.closeAll()
	for _, c := range cs {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a client was not closed")
		}
		_ = c.Close()
	}
}

func waitLive(t *testing.T, b *Bridge, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().Live != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections live, want %d", b.Stats().Live, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitPending(t *testing.T, b *Bridge, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections pending, want %d", b.Pending(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A connection counts as pending until the loop takes it (Taken), and not a moment after:
// the loop's admission check adds its open connections to Pending, so a connection the
// loop has counted while the bridge still counted it would refuse a client below the limit
// (TestTLSLimits did so now and then). Taken is counted once whoever calls it, and the
// bridge's own call after the enrollment answers changes nothing more.
func TestBridgeTakenCountsOnce(t *testing.T) {
	var st *setup
	var during atomic.Int64
	during.Store(-99)
	st = newSetup(t, func(c *Config) {
		enroll := c.Enroll
		c.Enroll = func(ctx context.Context, end net.Conn, bc *Conn) error {
			err := enroll(ctx, end, bc)
			bc.Taken() // what the loop does when it opens the connection
			during.Store(st.b.Pending())
			bc.Taken() // a second call counts nothing
			return err
		}
	})
	st.ping("one")
	if got := during.Load(); got != 0 {
		t.Errorf("pending once the loop took the connection: %d, want 0", got)
	}
	st.closeAll()
	if got := st.b.Pending(); got != 0 {
		t.Errorf("pending after the enrollment: %d, want 0 (taken twice?)", got)
	}
}
