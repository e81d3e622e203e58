package e2e

// Protected mode and allow-lists from a source that is not loopback: the client runs in a
// network namespace this test creates, joined to the host by a veth link, and reaches
// tallyd (bound to 0.0.0.0) at the host end's address.

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// outside is a network namespace with one veth link to the host: a client in it comes from
// nsIP, and reaches the host at hostIP.
type outside struct {
	ns, veth     string
	hostIP, nsIP string
}

// newOutside makes the namespace and its link, removed when the test ends; it skips the
// test when that cannot be done here (not root, no ip).
func newOutside(t *testing.T) *outside {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a client from another address needs a network namespace, which needs root: run the tests as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2): run scripts/ensure-iproute2.sh")
	}
	sweepStale() // what a killed run left (names of netTag)
	tag := netTag()
	prefix, _ := freeSubnets(t)
	o := &outside{ns: tag + "pn", veth: tag + "ph", hostIP: prefix + "1", nsIP: prefix + "2"}
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", o.ns).Run()
		_ = exec.Command("ip", "link", "del", o.veth).Run() // gone with the namespace, normally
		if left := netLeftovers(tag); left != "" {
			t.Errorf("network namespace %s not removed: %s", tag, left)
		}
	})
	ipCmd(t, "netns", "add", o.ns)
	ipCmd(t, "-n", o.ns, "link", "set", "lo", "up")
	ipCmd(t, "link", "add", o.veth, "type", "veth", "peer", "name", "cli0", "netns", o.ns)
	ipCmd(t, "addr", "add", o.hostIP+"/24", "dev", o.veth)
	ipCmd(t, "link", "set", o.veth, "up")
	ipCmd(t, "-n", o.ns, "addr", "add", o.nsIP+"/24", "dev", "cli0")
	ipCmd(t, "-n", o.ns, "link", "set", "cli0", "up")
	return o
}

// dial connects to addr from inside the namespace: the socket is made by a thread that has
// joined it (and dies with its goroutine, never to serve another).
func (o *outside) dial(addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		f, err := os.Open("/var/run/netns/" + o.ns)
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{nil, err}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// ask sends req from the namespace and returns what arrives before the server closes or
// goes quiet, and whether it closed.
func (o *outside) ask(t *testing.T, addr string, req []byte, want int) (got []byte, closed bool) {
	t.Helper()
	c, err := o.dial(addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, o.nsIP, err)
	}
	defer c.Close()
	_, _ = c.Write(req) // the server may have closed already
	return readUntil(c, want)
}

// readUntil reads until want bytes came, the peer closed, or 2 s of quiet.
func readUntil(c net.Conn, want int) (got []byte, closed bool) {
	var b [4096]byte
	for len(got) < want {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(b[:])
		got = append(got, b[:n]...)
		switch {
		case isTimeout(err):
			return got, false
		case err != nil:
			return got, true
		}
	}
	// Everything wanted came: is the connection then closed?
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(b[:])
	got = append(got, b[:n]...)
	return got, err != nil && (errors.Is(err, io.EOF) || !isTimeout(err))
}

// protServer runs tallyd bound to 0.0.0.0 with counter, pool and slock listeners and args.
type protServer struct {
	p                   *proc
	counter, pool, sl   int
	hostCounter, hostSl string // the same ports at the host end of the link
}

func startProt(t *testing.T, o *outside, args ...string) *protServer {
	t.Helper()
	s := &protServer{counter: freePort(t), pool: freePort(t), sl: freePort(t)}
	s.p = start(t, 0, append([]string{"--bind", "0.0.0.0", "--counter-port=" + strconv.Itoa(s.counter),
		"--pool-port=" + strconv.Itoa(s.pool), "--slock-port=" + strconv.Itoa(s.sl)}, args...)...)
	s.p.waitLog(t, "tallyd listening")
	return s
}

func (s *protServer) at(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

var (
	counterNoop = counter.AppendRequest(nil, counter.OpNoop, 7, nil)
	slockPing   = slock.AppendRequest(nil, slock.TypePing, [16]byte{9})
	poolAcquire = []byte("ACQ4ME k 1 1 1\n")
	respPing    = resp.AppendCommand(nil, "PING")
)

// expect sends each named request (slock text, slock binary, counter, pool) from the
// namespace: served, it is answered in full; else the connection is closed unanswered.
func (o *outside) expect(t *testing.T, s *protServer, served bool, what ...string) {
	t.Helper()
	probes := map[string]struct {
		port int
		req  []byte
		n    int
	}{"slock text": {s.sl, respPing, len("+PONG\r\n")}, "slock binary": {s.sl, slockPing, 64},
		"counter": {s.counter, counterNoop, counter.HeaderLen}, "pool": {s.pool, poolAcquire, len("LOCKED\n")}}
	for _, w := range what {
		p, ok := probes[w]
		if !ok {
			t.Fatalf("no probe %q", w)
		}
		got, closed := o.ask(t, s.at(o.hostIP, p.port), p.req, p.n)
		switch {
		case served && len(got) != p.n:
			t.Errorf("%s from %s: answered %q (closed %v), want %d bytes", w, o.nsIP, got, closed, p.n)
		case !served && (len(got) > 0 || !closed):
			t.Errorf("%s from %s: answered %q, closed %v; want a close", w, o.nsIP, got, closed)
		}
	}
}

// TestProtectedModeFromOutside: with nothing configured, tallyd bound to 0.0.0.0 serves
// loopback clients only; a Redis client from another address is answered DENIED saying how
// to open the port, and yrmcds, PoolCounter and slock binary clients are closed. The start
// log says so. --protected-mode no, an allow-list naming the client, or a password open it.
func TestProtectedModeFromOutside(t *testing.T) {
	o := newOutside(t)
	t.Run("on", func(t *testing.T) {
		s := startProt(t, o)
		s.p.waitLog(t, "protected mode: this listener is bound to a non-loopback address")
		got, closed := o.ask(t, s.at(o.hostIP, s.sl), respPing, 1<<20)
		if !strings.HasPrefix(string(got), "-DENIED tallyd is running in protected mode") || !strings.HasSuffix(string(got), "\r\n") ||
			!strings.Contains(string(got), "--protected-mode no") || !closed {
			t.Fatalf("Redis text from %s: %q, closed %v", o.nsIP, got, closed)
		}
		o.expect(t, s, false, "slock binary", "counter", "pool")
		// redis-cli, run in the namespace, prints the DENIED text.
		if cli, err := exec.LookPath("redis-cli"); err == nil {
			out, _ := exec.Command("ip", "netns", "exec", o.ns, cli, "-h", o.hostIP, "-p", strconv.Itoa(s.sl), "PING").CombinedOutput()
			if !strings.Contains(string(out), "DENIED tallyd is running in protected mode") {
				t.Errorf("redis-cli from %s: %s", o.nsIP, out)
			}
		}
		// Loopback clients are served.
		rc := dialR(t, s.at("127.0.0.1", s.sl))
		rc.must(t, "+PONG", "PING")
		if got, _ := readAfter(t, s.at("127.0.0.1", s.counter), counterNoop, counter.HeaderLen); len(got) < counter.HeaderLen {
			t.Errorf("counter from loopback: %q", got)
		}
		s.p.waitLog(t, "connection refused")
	})
	t.Run("off", func(t *testing.T) {
		s := startProt(t, o, "--protected-mode", "no")
		s.p.waitLog(t, "SECURITY WARNING")
		o.expect(t, s, true, "slock text", "slock binary", "counter", "pool")
	})
	t.Run("allow-list naming it", func(t *testing.T) {
		s := startProt(t, o, "--allow", o.nsIP+"/32")
		o.expect(t, s, true, "slock text", "slock binary", "counter", "pool")
		// Loopback is not in the list.
		if got, closed := readAfter(t, s.at("127.0.0.1", s.sl), respPing, 1); len(got) > 0 || !closed {
			t.Errorf("loopback, not in --allow: %q, closed %v", got, closed)
		}
	})
	t.Run("allow-lists naming others", func(t *testing.T) {
		s := startProt(t, o, "--allow", "192.0.2.0/24", "--counter-allow", o.nsIP, "--protected-mode", "no")
		o.expect(t, s, false, "slock text", "slock binary", "pool")
		o.expect(t, s, true, "counter")
	})
	t.Run("password", func(t *testing.T) {
		s := startProt(t, o, "--requirepass", "pw-from-afar")
		// Redis text comes in and must log in: go-redis, dialling from the namespace.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dialer := func(ctx context.Context, network, addr string) (net.Conn, error) { return o.dial(addr) }
		bad := redis.NewClient(&redis.Options{Addr: s.at(o.hostIP, s.sl), Dialer: dialer, MaxRetries: -1})
		defer bad.Close()
		if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("go-redis from %s without a password: %v", o.nsIP, err)
		}
		good := redis.NewClient(&redis.Options{Addr: s.at(o.hostIP, s.sl), Dialer: dialer, Password: "pw-from-afar", MaxRetries: -1})
		defer good.Close()
		if err := good.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("go-redis from %s with the password: %v", o.nsIP, err)
		}
		// Binary frames have no password: refused from there, served from loopback.
		o.expect(t, s, false, "slock binary")
		if got, _ := readAfter(t, s.at("127.0.0.1", s.sl), slockPing, 64); len(got) != 64 {
			t.Errorf("slock binary from loopback: %q", got)
		}
		// yrmcds and PoolCounter have no password: still loopback only.
		o.expect(t, s, false, "counter", "pool")
		s.p.waitLog(t, "binary frames, which have none, are served to loopback clients only")
		if strings.Contains(s.p.log.String(), "pw-from-afar") {
			t.Errorf("the log shows the password:\n%s", s.p.log.String())
		}
	})
}

// readAfter dials addr from here, sends req and reads as readUntil does.
func readAfter(t *testing.T, addr string, req []byte, want int) ([]byte, bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_, _ = c.Write(req)
	return readUntil(c, want)
}

// TestAllowListFromLoopback: allow-lists that do not name loopback refuse yrmcds, PoolCounter
// and slock (binary and text) clients at accept, whoever runs the tests.
func TestAllowListFromLoopback(t *testing.T) {
	c, p, s := freePort(t), freePort(t), freePort(t)
	pr := start(t, 0, "--counter-port="+strconv.Itoa(c), "--pool-port="+strconv.Itoa(p), "--slock-port="+strconv.Itoa(s),
		"--allow", "10.0.0.0/8", "--pool-allow", "192.0.2.1")
	pr.waitLog(t, "tallyd listening")
	for _, x := range []struct {
		what string
		port int
		req  []byte
	}{{"yrmcds counter", c, counterNoop}, {"PoolCounter", p, poolAcquire}, {"slock binary", s, slockPing}, {"slock text", s, respPing}} {
		if got, closed := readAfter(t, "127.0.0.1:"+strconv.Itoa(x.port), x.req, 1); len(got) > 0 || !closed {
			t.Errorf("%s from loopback, not in the allow-list: %q, closed %v", x.what, got, closed)
		}
	}
	pr.waitLog(t, "connection refused")
}
