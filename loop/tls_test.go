package loop

// TLS for clients, over real TCP: the slock port's Redis text and binary frames through the
// TLS bridge (tls.go), with go-redis, redis-cli and redis-py; mutual TLS; the limits; a
// handshake that never finishes; nothing left behind.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallyd/tallyd/internal/testcert"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/tlsbridge"
)

// tlsFixture is a server with a plaintext slock listener and a TLS one.
type tlsFixture struct {
	*testServer
	ca      *testcert.CA
	files   testcert.Files // the server's certificate, key and CA, as files
	tlsAddr string
	client  *tls.Config // trusts the CA; no client certificate
}

// startTLSServer runs a server whose slock port is served plain and over TLS, with a
// certificate of a fresh CA; mutual makes client certificates of that CA required.
func startTLSServer(t *testing.T, mutual bool, mod func(*Config)) *tlsFixture {
	t.Helper()
	f := &tlsFixture{ca: testcert.NewCA(t, "tallyd test CA")}
	f.files = f.ca.WriteFiles(t, t.TempDir(), "server", "tallyd", "127.0.0.1")
	ca := ""
	if mutual {
		ca = f.files.CA
	}
	scfg, err := tlsbridge.ServerConfig(f.files.Cert, f.files.Key, ca)
	if err != nil {
		t.Fatal(err)
	}
	f.testServer = startSlock(t, func(c *Config) {
		c.Listeners = append(c.Listeners, Listener{Proto: ProtoSlock, Addr: "127.0.0.1:0", TLS: true})
		c.TLS.Client = scfg
		if mod != nil {
			mod(c)
		}
	})
	for i, l := range f.cfg.Listeners {
		if l.Proto == ProtoSlock {
			if l.TLS {
				f.tlsAddr = f.Addr(i).String()
			} else {
				f.slockAddr = f.Addr(i).String()
			}
		}
	}
	f.client = &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1"}
	return f
}

// dialTLS opens a TLS connection to the TLS port with cfg (the fixture's when nil).
func (f *tlsFixture) dialTLS(t *testing.T, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	if cfg == nil {
		cfg = f.client
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: replyWait}, "tcp", f.tlsAddr, cfg)
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

func (f *tlsFixture) respTLS(t *testing.T) *respClient {
	t.Helper()
	c, err := f.dialTLS(t, nil)
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	return &respClient{t: t, c: c}
}

// go-redis v9 with a tls.Config: commands round-trip, and they reach the same store as the
// plaintext port's.
func TestTLSGoRedis(t *testing.T) {
	f := startTLSServer(t, false, nil)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: f.tlsAddr, TLSConfig: f.client, Protocol: 2, MaxRetries: -1,
		DialTimeout: replyWait, ReadTimeout: replyWait})
	defer rdb.Close()
	if got, err := rdb.Ping(ctx).Result(); err != nil || got != "PONG" {
		t.Fatalf("PING over TLS: %q, %v", got, err)
	}
	if err := rdb.Set(ctx, "tls:k", "over TLS", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Incr(ctx, "tls:n").Result(); err != nil || n != 1 {
		t.Fatalf("INCR: %d, %v", n, err)
	}
	plain := dialResp(t, f.slockAddr)
	expectSimple(t, plain.cmd("GET", "tls:k"), '$', "over TLS")
	expectSimple(t, plain.cmd("SET", "plain:k", "plaintext"), '+', "OK")
	if got, err := rdb.Get(ctx, "plain:k").Result(); err != nil || got != "plaintext" {
		t.Fatalf("GET over TLS: %q, %v", got, err)
	}
	// A big value crosses many TLS records both ways.
	big := strings.Repeat("0123456789abcdef", 32<<10)
	if err := rdb.Set(ctx, "tls:big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "tls:big").Result(); err != nil || got != big {
		t.Fatalf("a 512 KiB value over TLS came back %d bytes, %v", len(got), err)
	}
	f.healthy(t)
}

// The loop sees the TLS client's own address (CLIENT INFO, the allow-lists' remoteAddr),
// not the socketpair's.
func TestTLSRemoteAddr(t *testing.T) {
	f := startTLSServer(t, false, nil)
	rc := f.respTLS(t)
	r := rc.cmd("CLIENT", "INFO")
	want := "addr=" + rc.c.LocalAddr().String() + " "
	if !strings.Contains(string(r.Str), want) {
		t.Fatalf("CLIENT INFO over TLS: %q; want %q", r.Str, want)
	}
}

// slock's binary frames over TLS, contending with a plaintext client on one key.
func TestTLSSlockBinary(t *testing.T) {
	f := startTLSServer(t, false, nil)
	c, err := f.dialTLS(t, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newSlockClient(t, c)
	b := dialSlock(t, f.slockAddr)
	a.ping()
	key := key16("tls-binary")
	la := newLock(a, key, 5, 10)
	expectLock(t, la.Lock().want(slock.ResultOK), slock.TypeLock, la.id, key, 1, 1)
	lb := newLock(b, key, 5, 10)
	w := lb.Lock()
	w.none(50 * time.Millisecond)
	expectLock(t, la.Unlock().want(slock.ResultOK), slock.TypeUnlock, la.id, key, 0, 0)
	expectLock(t, w.want(slock.ResultOK), slock.TypeLock, lb.id, key, 1, 1)
	// The other way round: the TLS client waits, and is handed the lock.
	la.timeout = 5
	w = la.Lock()
	w.none(50 * time.Millisecond)
	expectLock(t, lb.Unlock().want(slock.ResultOK), slock.TypeUnlock, lb.id, key, 0, 0)
	expectLock(t, w.want(slock.ResultOK), slock.TypeLock, la.id, key, 1, 1)
	f.healthy(t)
}

// With a CA for clients, a client certificate is required and verified: none, or one from
// another CA, is refused (and logged); the CA's is served.
func TestTLSMutual(t *testing.T) {
	f := startTLSServer(t, true, nil)
	other := testcert.NewCA(t, "another CA")
	ping := func(cfg *tls.Config) error {
		c, err := f.dialTLS(t, cfg)
		if err != nil {
			return err
		}
		_ = c.SetDeadline(time.Now().Add(replyWait))
		if _, err := c.Write(resp.AppendCommand(nil, "PING")); err != nil {
			return err
		}
		b := make([]byte, 7)
		if _, err := io.ReadFull(c, b); err != nil {
			return err // TLS 1.3: the refusal arrives after the client's side of the handshake
		}
		if string(b) != "+PONG\r\n" {
			t.Fatalf("PING answered %q", b)
		}
		return nil
	}
	if err := ping(nil); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	cfg := f.client.Clone()
	cfg.Certificates = []tls.Certificate{other.TLSCert(t, "intruder")}
	if err := ping(cfg); err == nil {
		t.Fatal("a client with another CA's certificate was served")
	}
	f.log.waitFor(t, "TLS handshake failed")
	if !strings.Contains(f.log.String(), "certificate") {
		t.Errorf("the log does not say why:\n%s", f.log.String())
	}
	cfg.Certificates = []tls.Certificate{f.ca.TLSCert(t, "app-1")}
	if err := ping(cfg); err != nil {
		t.Fatalf("a client with the CA's certificate: %v", err)
	}
}

// A client that opens a TLS connection and never finishes its handshake stops nobody:
// another client's PING is answered, over TLS and in plain, while it hangs; it is cut at
// the ClientHello's deadline (TLSConfig.HelloTimeout, here 1 s), before the handshake
// timeout (the bridge's tests cover that one).
func TestTLSStalledHandshake(t *testing.T) {
	f := startTLSServer(t, false, func(c *Config) { c.TLS.HandshakeTimeout, c.TLS.HelloTimeout = 3*time.Second, time.Second })
	var stalled []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", f.tlsAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte{0x16, 0x03, 0x01, 0x02}) // a ClientHello's record header, never finished
		stalled = append(stalled, c)
	}
	expectSimple(t, f.respTLS(t).cmd("PING"), '+', "PONG")
	expectSimple(t, dialResp(t, f.slockAddr).cmd("PING"), '+', "PONG")
	for _, c := range stalled {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("a stalled handshake was not closed: %v", err)
		}
	}
	f.log.waitFor(t, "no whole ClientHello within 1s of the connect")
}

// TLS connections count against --max-connections and the descriptor budget (three each);
// one past the limit is refused before its handshake; closing either side closes the other
// and gives everything back.
func TestTLSLimits(t *testing.T) {
	f := startTLSServer(t, false, func(c *Config) { c.MaxConnections = 3 })
	plain := dialResp(t, f.slockAddr)
	expectSimple(t, plain.cmd("PING"), '+', "PONG")
	a, b := f.respTLS(t), f.respTLS(t)
	expectSimple(t, a.cmd("PING"), '+', "PONG")
	expectSimple(t, b.cmd("PING"), '+', "PONG")
	if used := f.ct.fds.Used(); used != 1+2*tlsbridge.Descriptors {
		t.Errorf("one plain and two TLS connections take %d descriptors, want %d", used, 1+2*tlsbridge.Descriptors)
	}
	if _, err := f.dialTLS(t, nil); err == nil {
		t.Fatal("a TLS connection past --max-connections finished its handshake")
	}
	f.log.waitFor(t, `"limit":"max-connections"`)
	// The client closes: the loop's connection goes, and its descriptors.
	_ = a.c.Close()
	waitUsed(t, f.testServer, 1+tlsbridge.Descriptors)
	// The loop closes (QUIT): the client reads the reply, then EOF.
	expectSimple(t, b.cmd("QUIT"), '+', "OK")
	if _, err := b.tryReply(replyWait); err != io.EOF {
		t.Fatalf("after QUIT over TLS: %v, want EOF", err)
	}
	waitUsed(t, f.testServer, 1)
	c := f.respTLS(t)
	expectSimple(t, c.cmd("PING"), '+', "PONG")
	var live int
	f.onLoop(t, func() { live = f.ct.live })
	if live != 2 {
		t.Errorf("the loop counts %d connections, want 2", live)
	}
}

func waitUsed(t *testing.T, ts *testServer, n int) {
	t.Helper()
	deadline := time.Now().Add(replyWait)
	for ts.ct.fds.Used() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors taken, want %d", ts.ct.fds.Used(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Stopping the server ends every TLS goroutine: bridged connections, handshakes in
// progress, the accept loop.
func TestTLSStopLeavesNothing(t *testing.T) {
	before := bridgeGoroutines()
	func() {
		f := startTLSServer(t, false, nil)
		for i := 0; i < 4; i++ {
			expectSimple(t, f.respTLS(t).cmd("PING"), '+', "PONG")
		}
		stalled, err := net.Dial("tcp", f.tlsAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer stalled.Close()
		if n := bridgeGoroutines(); n <= before {
			t.Fatalf("%d bridge goroutines while serving", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for bridgeGoroutines() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d tlsbridge goroutines left after Stop:\n%s", bridgeGoroutines(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bridgeGoroutines counts the goroutines the TLS bridge started.
func bridgeGoroutines() int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "tallyd/tlsbridge.") || strings.Contains(g, "loop.(*Server).startTLS") {
			n++
		}
	}
	return n
}

// redis-cli --tls (Debian's redis-tools): plain and with a client certificate.
func TestTLSRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed: run scripts/ensure-redis-tools.sh (Debian package redis-tools)")
	}
	for _, mutual := range []bool{false, true} {
		f := startTLSServer(t, mutual, nil)
		host, port, _ := strings.Cut(f.tlsAddr, ":")
		args := []string{"--tls", "--cacert", f.files.CA, "-h", host, "-p", port}
		if mutual {
			cf := f.ca.WriteFiles(t, t.TempDir(), "client", "redis-cli", "127.0.0.1")
			args = append(args, "--cert", cf.Cert, "--key", cf.Key)
		}
		run := func(cmd ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, cli, append(args, cmd...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %q: %v\n%s", cmd, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		if got := run("PING"); got != "PONG" {
			t.Fatalf("redis-cli --tls PING: %q", got)
		}
		run("SET", "cli:k", "through TLS")
		if got := run("GET", "cli:k"); got != "through TLS" {
			t.Fatalf("redis-cli --tls GET: %q", got)
		}
		if lines := strings.Split(run("LOCK", "cli:lock", "EXPRIED", "60"), "\n"); len(lines) < 4 || lines[1] != "OK" {
			t.Fatalf("redis-cli --tls LOCK: %q", lines)
		}
		if mutual { // and without the certificate, refused
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, cli, "--tls", "--cacert", f.files.CA, "-h", host, "-p", port, "PING").CombinedOutput()
			cancel()
			if err == nil && strings.TrimSpace(string(out)) == "PONG" {
				t.Fatal("redis-cli without a client certificate was served")
			}
		}
	}
}

// redis-py (Debian's python3-redis) with ssl=True, and with a client certificate.
func TestTLSRedisPy(t *testing.T) {
	py := redisPy(t)
	f := startTLSServer(t, true, nil)
	host, port, _ := strings.Cut(f.tlsAddr, ":")
	cf := f.ca.WriteFiles(t, t.TempDir(), "client", "redis-py", "127.0.0.1")
	script := `
import sys, redis
host, port, ca, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
r = redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert, ssl_keyfile=key,
                socket_timeout=5)
print(r.ping())
r.set("py:k", "via redis-py")
print(r.get("py:k").decode())
print(r.incr("py:n"), r.incr("py:n"))
try:
    redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=ca, socket_timeout=5).ping()
    print("served without a certificate")
except (redis.exceptions.ConnectionError, OSError) as e:
    print("refused without a certificate")
`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, host, port, cf.CA, cf.Cert, cf.Key).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-py: %v\n%s", err, out)
	}
	want := "True\nvia redis-py\n1 2\nrefused without a certificate"
	if got := strings.TrimSpace(string(out)); got != want {
		t.Fatalf("redis-py printed %q, want %q", got, want)
	}
}

// Issue 30 item 6: 1,000 TLS connections that send nothing (each re-opened 10 s after it is
// cut, as the attacker does) do not keep a real TLS client out: its handshake and
// PING take under a second, with the attacker on one address (127.0.0.2: the per-address
// cap) or on twenty (the slots fill: the oldest silent handshake makes room); a plaintext
// client is answered meanwhile. On 4934cb0 the 256 slots stay full for the 10 s handshake
// timeout and the client is refused.
func TestTLSSilentFlood(t *testing.T) {
	var twenty []string
	for i := 2; i < 22; i++ {
		twenty = append(twenty, "127.0.0."+strconv.Itoa(i))
	}
	for name, attackers := range map[string][]string{"one address": {"127.0.0.2"}, "twenty addresses": twenty} {
		t.Run(name, func(t *testing.T) {
			f := startTLSServer(t, false, nil)
			plain := dialResp(t, f.slockAddr)
			floodSilent(t, f.tlsAddr, attackers, 1000)
			deadline := time.Now().Add(30 * time.Second)
			for f.tb.client.Stats().Accepted < 1000 {
				if time.Now().After(deadline) {
					t.Fatalf("the bridge accepted %d of the flood's 1000", f.tb.client.Stats().Accepted)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for i := 0; i < 2; i++ {
				start := time.Now()
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: replyWait}, "tcp", f.tlsAddr, f.client)
				if err != nil {
					t.Fatalf("a TLS client during the flood: %v (after %v)", err, time.Since(start))
				}
				rc := &respClient{t: t, c: c}
				expectSimple(t, rc.cmd("PING"), '+', "PONG")
				if took := time.Since(start); took > time.Second {
					t.Errorf("a TLS client's handshake and PING during the flood took %v", took)
				} else {
					t.Logf("handshake and PING in %v", took)
				}
				_ = c.Close()
				expectSimple(t, plain.cmd("PING"), '+', "PONG")
			}
		})
	}
}

// floodSilent keeps n TCP connections to addr open from the source addresses srcs (in
// turn; any 127.x.y.z binds on Linux), sending nothing; one the server cuts is re-opened
// 10 s later. It returns once all n are connected; they are closed when the test ends.
func floodSilent(t *testing.T, addr string, srcs []string, n int) {
	t.Helper()
	var (
		mu     sync.Mutex
		open   = map[net.Conn]struct{}{}
		done   = make(chan struct{})
		wg     sync.WaitGroup
		opened atomic.Int64
	)
	for i := 0; i < n; i++ {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(srcs[i%len(srcs)])}, Timeout: replyWait}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; ; first = false {
				c, err := d.Dial("tcp", addr)
				mu.Lock()
				select {
				case <-done:
					err = net.ErrClosed
				default:
					if err == nil {
						open[c] = struct{}{}
					}
				}
				mu.Unlock()
				if err != nil {
					if c != nil {
						_ = c.Close()
					}
					return
				}
				if first {
					opened.Add(1)
				}
				_, _ = c.Read(make([]byte, 1)) // until the server cuts it, or the test ends
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				_ = c.Close()
				select {
				case <-done:
					return
				case <-time.After(10 * time.Second):
				}
			}
		}()
	}
	t.Cleanup(func() {
		mu.Lock()
		close(done)
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for opened.Load() < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the flood connected %d of %d", opened.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The start line names every listener: the TLS slock port as slock_tls, beside the plaintext
// slock port, which it used to hide (two fields named slock: the last won; issue 31, item 5).
func TestTLSStartLineShowsBothPorts(t *testing.T) {
	f := startTLSServer(t, false, nil)
	f.log.waitFor(t, "tallyd listening")
	var line map[string]any
	for _, l := range strings.Split(f.log.String(), "\n") {
		if strings.Contains(l, "tallyd listening") {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("start line %q: %v", l, err)
			}
			break
		}
	}
	if line["slock"] != f.slockAddr || line["slock_tls"] != f.tlsAddr {
		t.Fatalf("start line says slock=%v slock_tls=%v; the plaintext port is %s, the TLS port %s",
			line["slock"], line["slock_tls"], f.slockAddr, f.tlsAddr)
	}
}
