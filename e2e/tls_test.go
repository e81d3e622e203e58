package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallyd/tallyd/internal/testcert"
)

// tallyd with TLS ports from its flags: Redis text and the counter protocol over TLS with a
// client certificate (mTLS), beside the plaintext slock port, on one store.
func TestTLSPorts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "e2e CA")
	srv := ca.WriteFiles(t, dir, "server", "tallyd", "127.0.0.1")
	cli := ca.TLSCert(t, "e2e client")
	slock, slockTLS, counterTLS := freePort(t), freePort(t), freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(slock),
		"--slock-tls-port="+strconv.Itoa(slockTLS), "--counter-tls-port="+strconv.Itoa(counterTLS),
		"--tls-cert-file="+srv.Cert, "--tls-key-file="+srv.Key, "--tls-ca-cert-file="+srv.CA)
	p.waitLog(t, "tallyd listening")
	cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cli}, ServerName: "127.0.0.1"}

	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(slockTLS), TLSConfig: cfg,
		Protocol: 2, MaxRetries: -1, DialTimeout: 5 * time.Second})
	defer rdb.Close()
	var pong string
	var err error
	if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		pong, err = rdb.Ping(ctx).Result()
		return err == nil
	}) {
		t.Fatalf("PING over TLS: %v\n%s", err, p.log.String())
	}
	if pong != "PONG" {
		t.Fatalf("PING over TLS: %q", pong)
	}
	if err := rdb.Set(ctx, "e2e:tls", "secret", 0).Err(); err != nil {
		t.Fatal(err)
	}
	dialR(t, "127.0.0.1:"+strconv.Itoa(slock)).must(t, "$secret", "GET", "e2e:tls")

	// The counter protocol over TLS.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(counterTLS), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := call(t, c, cfReq(cfAcquire, 7, cfAcqBody(2, 5, "tls-counter"))); r.Status != 0 || r.Opaque != 7 {
		t.Fatalf("acquire over TLS: %+v", r)
	}

	// Without a client certificate: refused, and logged.
	noCert := cfg.Clone()
	noCert.Certificates = nil
	if b, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(slockTLS), noCert); err == nil {
		_ = b.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = b.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		if line, err := bufio.NewReader(b).ReadString('\n'); err == nil {
			t.Fatalf("a client without a certificate was answered %q", line)
		}
		_ = b.Close()
	}
	p.waitLog(t, "TLS handshake failed")
	if !strings.Contains(p.log.String(), "certificate") {
		t.Errorf("the log does not say why:\n%s", p.log.String())
	}
}

// A flood of TLS connections under a small open-file limit never stops the engine: each
// takes its descriptors from the open-file cap before its handshake, the ones past it are
// refused, the plaintext client already in is still served, and once the flood is gone a
// new TLS client gets in.
func TestTLSFloodUnderOpenFileLimit(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "e2e CA")
	srv := ca.WriteFiles(t, dir, "server", "tallyd", "127.0.0.1")
	port, tlsPort := freePort(t), freePort(t)
	p := start(t, 128, "--counter-port", strconv.Itoa(port), "--slock-tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", srv.Cert, "--tls-key-file", srv.Key, "--log-format", "json")
	p.waitLog(t, "tallyd listening")
	first := dialRetry(t, "127.0.0.1:"+strconv.Itoa(port))
	if r := call(t, first, cfReq(cfAcquire, 1, cfAcqBody(1, 1, "x"))); r.Status != 0 {
		t.Fatalf("acquire: %+v", r)
	}
	cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tlsAddr, cfg)
			if err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	p.waitLog(t, `"limit":"open-file cap"`)
	if len(conns) == 0 || len(conns) >= 200 {
		t.Errorf("%d of 200 TLS connections got through a cap of about 30 descriptors", len(conns))
	}
	if r := call(t, first, cfReq(cfAcquire, 2, cfAcqBody(1, 2, "x"))); r.Status != 0 || r.Opaque != 2 {
		t.Fatalf("the plaintext client after the flood: %+v\n%s", r, p.log.String())
	}
	for _, c := range conns {
		c.Close()
	}
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", tlsAddr, cfg)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		line, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && line == "+PONG\r\n"
	}) {
		t.Fatalf("no TLS client served after the flood:\n%s", p.log.String())
	}
	if exited, err := p.exited(); exited {
		t.Fatalf("server exited: %v\n%s", err, p.log.String())
	}
}

// The handshake-slot flags reach the bridge: with --tls-max-handshakes-per-ip 2, a third
// silent connection from one address takes the place of that address's oldest (cut, and
// logged as dropped); with --tls-hello-timeout 1s, a silent connection is cut after about a
// second (its handshake timeout is a minute); a real client from elsewhere is served.
func TestTLSHandshakeSlotFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "e2e CA")
	srv := ca.WriteFiles(t, dir, "server", "tallyd", "127.0.0.1")
	tlsPort := freePort(t)
	// TLS only (TestTLSOnly).
	p := start(t, 0, "--counter-port=0", "--slock-port=0", "--slock-tls-port="+strconv.Itoa(tlsPort),
		"--tls-cert-file="+srv.Cert, "--tls-key-file="+srv.Key, "--tls-handshake-timeout=1m",
		"--tls-hello-timeout=1s", "--tls-max-handshakes-per-ip=2", "--log-format=json")
	p.waitLog(t, "tallyd listening")
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	silent := func(from ...string) net.Conn {
		ip := "127.0.0.2"
		if len(from) > 0 {
			ip = from[0]
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	first := silent()
	silent()
	time.Sleep(100 * time.Millisecond) // accepted, in the order they came
	silent()
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := first.Read(make([]byte, 1)); err == nil {
		t.Error("the oldest of three silent connections from one address was not cut")
	}
	// The first failure logged is first's drop (the hello deadline is a second away).
	p.waitLog(t, `"remote":"`+first.LocalAddr().String()+`","error":"dropped for a newer connection`)
	// Failed handshakes are logged at most once a second: the silent ones above may time out
	// within a second of that line, unlogged; this one times out a second after it at least.
	silent("127.0.0.3")
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("a TLS client: %v\n%s", err, p.log.String())
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING over TLS: %q, %v\n%s", line, err, p.log.String())
	}
	p.waitLog(t, "no whole ClientHello within 1s of the connect")
}
