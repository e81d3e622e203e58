package load

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A run over TLS: every connection (active and churned) is a TLS client of a TLS sink, and
// the run says so.
func TestRunOverTLS(t *testing.T) {
	certPEM, keyPEM, err := SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"slock-text", "slock"} {
		s, err := NewSink(proto)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { s.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})); close(done) }()
		cfg, err := ClientTLS(ca)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Config{Addr: l.Addr().String(), Proto: proto, Conns: 4, Pipeline: 4,
			Requests: 400, Churn: 50, Duration: 300 * time.Millisecond, TLS: cfg})
		l.Close()
		<-done
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if !res.TLS || res.Ops == 0 || len(res.Errors) != 0 {
			t.Errorf("%s over TLS: tls %v, %d ops, errors %v", proto, res.TLS, res.Ops, res.Errors)
		}
		if res.Churn == nil || res.Churn.Cycles == 0 || res.Churn.Failed != 0 {
			t.Errorf("%s: churn over TLS %+v", proto, res.Churn)
		}
	}
	// A plain client of a TLS port gets nowhere; a TLS client that trusts nothing neither.
	if _, err := Run(context.Background(), Config{Addr: "127.0.0.1:1", Proto: "slock", Conns: 1, Requests: 1,
		TLS: &tls.Config{}, Idle: 1}); err == nil {
		t.Error("idle connections with TLS accepted")
	}
}
