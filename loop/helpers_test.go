package loop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/proto/counter"
)

// logBuf collects the server's JSON log lines so tests can look for warnings.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func (l *logBuf) waitFor(t *testing.T, substr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(l.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("log never said %q; log:\n%s", substr, l.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type testServer struct {
	*Server
	counterAddr, semaphoreAddr, poolAddr, slockAddr string
	log                                             *logBuf
}

// startServer runs a server with a counter and a semaphore listener on ephemeral ports of
// 127.0.0.1; it is stopped when the test ends.
// testKeyspace runs every test server's Redis path on store.Keyspace (Config.RedisKeyspace)
// when TALLYD_TEST_KEYSPACE=1: how far the move of issue 32 has come, test by test.
var testKeyspace = os.Getenv("TALLYD_TEST_KEYSPACE") == "1"

func startServer(t *testing.T, mod func(*Config)) *testServer {
	t.Helper()
	lb := &logBuf{}
	cfg := Defaults()
	cfg.Listeners = []Listener{
		{Proto: ProtoCounter, Addr: "127.0.0.1:0"},
		{Proto: ProtoSemaphore, Addr: "127.0.0.1:0"},
	}
	cfg.Log = zerolog.New(lb).Level(zerolog.InfoLevel)
	cfg.RedisKeyspace = testKeyspace
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Run() }()
	<-s.Ready()
	select {
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	default:
	}
	ts := &testServer{Server: s, log: lb}
	for i, l := range cfg.Listeners {
		switch l.Proto {
		case ProtoCounter:
			ts.counterAddr = s.Addr(i).String()
		case ProtoSemaphore:
			ts.semaphoreAddr = s.Addr(i).String()
		case ProtoPool:
			ts.poolAddr = s.Addr(i).String()
		case ProtoSlock:
			ts.slockAddr = s.Addr(i).String()
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		if err := <-errc; err != nil {
			t.Errorf("Run returned %v after Stop", err)
		}
	})
	return ts
}

// onLoop runs f on the event loop and waits for it (the loop must have seen a connection).
func (ts *testServer) onLoop(t *testing.T, f func()) {
	t.Helper()
	el, ok := ts.run.el.Load().(gnet.EventLoop)
	if !ok {
		t.Fatal("no event loop yet: open a connection first")
	}
	done := make(chan struct{})
	err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		defer close(done)
		f()
		return nil
	}))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not run the check")
	}
}

// checkInvariants verifies the store's invariants on the loop.
func (ts *testServer) checkInvariants(t *testing.T) {
	t.Helper()
	var err error
	ts.onLoop(t, func() { err = ts.st.store.Check() })
	if err != nil {
		t.Fatalf("store invariant: %v", err)
	}
}

// client is a blocking yrmcds client for tests.
type client struct {
	t      testing.TB
	c      net.Conn
	serial uint32
	wbuf   []byte
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	cl := &client{t: t, c: c}
	t.Cleanup(func() { _ = c.Close() })
	return cl
}

func (cl *client) next() uint32 { cl.serial++; return cl.serial }

func (cl *client) send(b []byte) {
	cl.t.Helper()
	_ = cl.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := cl.c.Write(b); err != nil {
		cl.t.Fatalf("write: %v", err)
	}
}

// frame is one response with its bytes copied out.
type frame struct {
	Magic  byte
	Op     counter.Opcode
	Status counter.Status
	Opaque uint32
	Body   []byte
	Raw    []byte
}

// readFrame reads one whole response.
func (cl *client) readFrame() frame {
	cl.t.Helper()
	f, err := cl.tryRead(5 * time.Second)
	if err != nil {
		cl.t.Fatalf("read response: %v", err)
	}
	return f
}

func (cl *client) tryRead(timeout time.Duration) (frame, error) {
	_ = cl.c.SetReadDeadline(time.Now().Add(timeout))
	hdr := make([]byte, counter.HeaderLen)
	if _, err := io.ReadFull(cl.c, hdr); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[4:8])
	if n > 1<<20 {
		return frame{}, errors.New("response body too large")
	}
	raw := make([]byte, counter.HeaderLen+int(n))
	copy(raw, hdr)
	if _, err := io.ReadFull(cl.c, raw[counter.HeaderLen:]); err != nil {
		return frame{}, err
	}
	var r counter.Response
	if m, err := counter.ParseResponse(raw, 1<<20, &r); err != nil || m != len(raw) {
		return frame{}, errors.New("unparseable response")
	}
	return frame{Magic: raw[0], Op: r.Opcode, Status: r.Status, Opaque: r.Opaque, Body: raw[counter.HeaderLen:], Raw: raw}, nil
}

// expectClosed asserts the server closes the connection without sending anything more.
func (cl *client) expectClosed() {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [64]byte
	for {
		n, err := cl.c.Read(b[:])
		if n > 0 {
			cl.t.Fatalf("expected a close, got %d bytes: % x", n, b[:n])
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				cl.t.Fatal("connection was not closed")
			}
			return
		}
	}
}

func (cl *client) roundTrip(req []byte, opaque uint32) frame {
	cl.t.Helper()
	cl.send(req)
	f := cl.readFrame()
	if f.Opaque != opaque {
		cl.t.Fatalf("opaque %d, want %d", f.Opaque, opaque)
	}
	if f.Magic != counter.MagicResponse {
		cl.t.Fatalf("magic %#x", f.Magic)
	}
	return f
}

func (cl *client) acquire(name string, r, max uint32) frame {
	o := cl.next()
	return cl.roundTrip(counter.AppendAcquire(cl.wbuf[:0], o, r, max, []byte(name)), o)
}

func (cl *client) release(name string, r uint32) frame {
	o := cl.next()
	return cl.roundTrip(counter.AppendRelease(cl.wbuf[:0], o, r, []byte(name)), o)
}

func (cl *client) get(name string) frame {
	o := cl.next()
	return cl.roundTrip(counter.AppendGet(cl.wbuf[:0], o, []byte(name)), o)
}

func (cl *client) simple(op counter.Opcode) frame {
	o := cl.next()
	return cl.roundTrip(counter.AppendRequest(cl.wbuf[:0], op, o, nil), o)
}

// stats returns the Stats reply as an ordered list and a map.
func (cl *client) stats() ([]counter.StatText, map[string]string) {
	cl.t.Helper()
	f := cl.simple(counter.OpStats)
	if f.Status != counter.StatusOK {
		cl.t.Fatalf("stats status %#x", f.Status)
	}
	list, err := counter.ParseStatsBody(f.Body)
	if err != nil {
		cl.t.Fatalf("stats body: %v", err)
	}
	m := make(map[string]string, len(list))
	for _, s := range list {
		m[s.Name] = s.Value
	}
	return list, m
}

func u32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// expectStatus checks a response's status and, for errors, its exact message body.
func expectStatus(t *testing.T, f frame, want counter.Status) {
	t.Helper()
	if f.Status != want {
		t.Fatalf("status %#x (%s), want %#x; body %q", f.Status, f.Status.Message(), want, f.Body)
	}
	if want != counter.StatusOK && string(f.Body) != want.Message() {
		t.Fatalf("error body %q, want %q", f.Body, want.Message())
	}
}

// checkWhileRunning runs check on the loop every few milliseconds until the returned stop
// is called (which waits for the checker); a failed check is reported and sets failed.
func (ts *testServer) checkWhileRunning(t *testing.T, what string, check func() error, failed *atomic.Bool) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(3 * time.Millisecond):
			}
			var err error
			ts.onLoop(t, func() { err = check() })
			if err != nil {
				t.Errorf("%s invariant broken mid-run: %v", what, err)
				failed.Store(true)
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}
