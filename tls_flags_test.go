package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/internal/testcert"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/tlsbridge"
)

// The TLS flags become TLS listeners and configurations, or a clear error.
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.NewCA(t, "flags CA")
	f := ca.WriteFiles(t, dir, "tallyd", "tallyd", "127.0.0.1")
	parse := func(args ...string) (loop.Config, error) {
		t.Helper()
		d := loop.Defaults()
		var o options
		fs := newFlags(&o, d)
		if err := fs.Parse(append([]string{"--data-dir", t.TempDir()}, args...)); err != nil {
			t.Fatal(err)
		}
		return o.loopConfig(fs, d)
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--slock-tls-port", "6380"}, "needs --tls-cert-file and --tls-key-file"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert}, "needs --tls-cert-file and --tls-key-file"},
		{[]string{"--tls-cert-file", f.Cert, "--tls-key-file", f.Key}, "need a TLS port"},
		{[]string{"--slock-tls-port", "70000", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key}, "not a port number"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Key, "--tls-key-file", f.Key}, "loading the certificate"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-ca-cert-file", f.Key}, "holds no PEM certificate"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-handshake-timeout", "0s"}, "must be positive"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-hello-timeout", "0s"}, "--tls-hello-timeout 0s must be positive"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-max-handshakes", "0"}, "must be at least 1"},
		{[]string{"--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key, "--tls-max-handshakes-per-ip", "-1"}, "must be 0 (no cap) or more"},
		{[]string{"--slock-tls-port", "5658", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key}, "both want"},
		{[]string{"--peer-cert-file", f.Cert, "--peer-key-file", f.Key, "--peer-trusted-ca-file", f.CA}, "need cluster mode"},
		{[]string{"--cluster", "1=127.0.0.1:7001", "--node-id", "1", "--peer-cert-file", f.Cert, "--peer-key-file", f.Key}, "needs all of"},
	} {
		if _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %v; want an error with %q", tc.args, err, tc.err)
		}
	}

	cfg, err := parse("--slock-tls-port", "6380", "--pool-tls-port", "6381", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key,
		"--tls-ca-cert-file", f.CA, "--cluster", "1=127.0.0.1:7001", "--node-id", "1",
		"--peer-cert-file", f.Cert, "--peer-key-file", f.Key, "--peer-trusted-ca-file", f.CA)
	if err != nil {
		t.Fatal(err)
	}
	tlsOn := map[string]bool{}
	for _, l := range cfg.Listeners {
		if l.TLS {
			tlsOn[l.Proto.String()+"@"+l.Addr] = true
		}
	}
	for _, want := range []string{"slock@127.0.0.1:6380", "pool@127.0.0.1:6381", "peer@127.0.0.1:7001"} {
		if !tlsOn[want] {
			t.Errorf("no TLS listener %s: %v", want, cfg.Listeners)
		}
	}
	if len(tlsOn) != 3 {
		t.Errorf("TLS listeners %v", tlsOn)
	}
	if cfg.TLS.Client == nil || cfg.TLS.Client.ClientCAs == nil || cfg.TLS.PeerServer == nil || cfg.TLS.PeerClient == nil {
		t.Errorf("TLS configuration %+v", cfg.TLS)
	}
	if _, err := loop.New(cfg); err != nil {
		t.Fatalf("loop.New: %v", err)
	}
	if cfg.TLS.HelloTimeout != tlsbridge.DefaultHelloTimeout || cfg.TLS.MaxHandshakes != tlsbridge.DefaultMaxHandshakes ||
		cfg.TLS.MaxHandshakesPerSource != tlsbridge.DefaultMaxHandshakesPerSource {
		t.Errorf("handshake limits by default: %+v", cfg.TLS)
	}
	cfg, err = parse("--slock-tls-port", "6380", "--tls-cert-file", f.Cert, "--tls-key-file", f.Key,
		"--tls-hello-timeout", "500ms", "--tls-max-handshakes", "64", "--tls-max-handshakes-per-ip", "0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.HelloTimeout != 500*time.Millisecond || cfg.TLS.MaxHandshakes != 64 || cfg.TLS.MaxHandshakesPerSource >= 0 {
		t.Errorf("handshake limits from the flags: %+v", cfg.TLS)
	}
}
