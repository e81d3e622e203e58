package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// conn is one TCP connection with a read buffer that the proto/* parsers
// read from: a parser's views into it stay valid until the next read.
type conn struct {
	nc      net.Conn
	what    string // "counter at 127.0.0.1:11215", for errors
	timeout time.Duration
	buf     []byte // bytes read and not yet consumed: buf[off:]
	off     int
}

// dial connects to the given protocol's port on the app's host.
func (a *app) dial(proto string, port int) (*conn, error) {
	addr := net.JoinHostPort(a.host, strconv.Itoa(port))
	what := proto + " at " + addr
	if port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%s: port %d is not in 1..65535", what, port)
	}
	var tc *tls.Config
	if a.tls {
		var err error
		if tc, err = a.tlsConfig(); err != nil {
			return nil, err
		}
	}
	nc, err := net.DialTimeout("tcp", addr, a.timeout)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w", what, unwrapOp(err))
	}
	if tc != nil {
		t := tls.Client(nc, tc)
		_ = t.SetDeadline(time.Now().Add(a.timeout))
		if err := t.Handshake(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("%s: TLS handshake: %w", what, unwrapOp(err))
		}
		_ = t.SetDeadline(time.Time{})
		nc = t
	}
	return &conn{nc: nc, what: what, timeout: a.timeout}, nil
}

// tlsConfig is the client TLS configuration --tls, --cacert, --cert and --key give, made
// once: the server's certificate is checked against --cacert (else the system's roots) and
// the host name; --cert and --key are presented to a server that asks for one.
func (a *app) tlsConfig() (*tls.Config, error) {
	if a.tlsConf != nil || a.tlsErr != nil {
		return a.tlsConf, a.tlsErr
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.host}
	if a.cacert != "" {
		pem, err := os.ReadFile(a.cacert)
		if err != nil {
			a.tlsErr = fmt.Errorf("--cacert: %w", err)
			return nil, a.tlsErr
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			a.tlsErr = fmt.Errorf("--cacert %s: no PEM certificate in it", a.cacert)
			return nil, a.tlsErr
		}
	}
	if (a.cert == "") != (a.key == "") {
		a.tlsErr = errors.New("--cert and --key go together")
		return nil, a.tlsErr
	}
	if a.cert != "" {
		kp, err := tls.LoadX509KeyPair(a.cert, a.key)
		if err != nil {
			a.tlsErr = fmt.Errorf("--cert/--key: %w", err)
			return nil, a.tlsErr
		}
		c.Certificates = []tls.Certificate{kp}
	}
	a.tlsConf = c
	return c, nil
}

// authError is a Redis-text login the server refused (-WRONGPASS), or a command it refused
// because the connection has not logged in (-NOAUTH): tallyctl needs --user/--password.
type authError struct{ msg string }

func (e *authError) Error() string { return e.msg }

// isAuthReply says whether an error reply is about logging in.
func isAuthReply(msg []byte) bool {
	return bytes.HasPrefix(msg, []byte("NOAUTH")) || bytes.HasPrefix(msg, []byte("WRONGPASS"))
}

// unwrapOp drops net.OpError's "dial tcp ADDR:" prefix, which the caller
// already says.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var sys *os.SyscallError
		if errors.As(op.Err, &sys) {
			return sys.Err
		}
		return op.Err
	}
	return err
}

func (c *conn) Close() error { return c.nc.Close() }

// send writes b within the timeout.
func (c *conn) send(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.nc.Write(b); err != nil {
		return fmt.Errorf("%s: send: %w", c.what, unwrapOp(err))
	}
	return nil
}

// parseFn looks at the unconsumed bytes and returns how many the reply at
// their start took: 0 and a nil error when it is not all there yet.
type parseFn func(b []byte) (int, error)

// recv reads until parse accepts a whole reply, waiting up to the timeout
// plus wait, and consumes it.
func (c *conn) recv(wait time.Duration, parse parseFn) error {
	total := c.timeout + wait
	deadline := time.Now().Add(total)
	for {
		n, err := parse(c.buf[c.off:])
		if err != nil {
			return fmt.Errorf("%s: bad reply: %w", c.what, err)
		}
		if n > 0 {
			c.off += n
			return nil
		}
		if err := c.fill(deadline, total); err != nil {
			return err
		}
	}
}

// room moves the unconsumed bytes to the front (so views from earlier
// replies become invalid) and makes space to read into.
func (c *conn) room() {
	if c.off > 0 {
		c.buf = c.buf[:copy(c.buf, c.buf[c.off:])]
		c.off = 0
	}
	if cap(c.buf)-len(c.buf) < 4096 {
		nb := make([]byte, len(c.buf), 2*cap(c.buf)+8192)
		copy(nb, c.buf)
		c.buf = nb
	}
}

// fill reads more bytes by the deadline, total being the wait it allows.
func (c *conn) fill(deadline time.Time, total time.Duration) error {
	c.room()
	_ = c.nc.SetReadDeadline(deadline)
	n, err := c.nc.Read(c.buf[len(c.buf):cap(c.buf)])
	c.buf = c.buf[:len(c.buf)+n]
	if n > 0 {
		return nil
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s: no reply within %v", c.what, total)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s: the server closed the connection", c.what)
	case err != nil:
		return fmt.Errorf("%s: receive: %w", c.what, unwrapOp(err))
	}
	return nil
}

// hold keeps the connection open for d, or until SIGINT/SIGTERM, or until the
// server closes it. Bytes the server pushes meanwhile are buffered and
// passed to check (slock's EXPRIED), which may end the hold with an error.
// interrupted reports a signal.
func (c *conn) hold(a *app, d time.Duration, check func() error) (interrupted bool, err error) {
	sig, stop := a.interrupt()
	defer stop()
	var signalled atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-sig:
			signalled.Store(true)
			_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	end := time.Now().Add(d)
	for {
		if signalled.Load() {
			return true, nil
		}
		c.room()
		_ = c.nc.SetReadDeadline(end)
		if signalled.Load() {
			return true, nil
		}
		n, rerr := c.nc.Read(c.buf[len(c.buf):cap(c.buf)])
		c.buf = c.buf[:len(c.buf)+n]
		if n > 0 && check != nil {
			if err := check(); err != nil {
				return false, err
			}
		}
		var ne net.Error
		switch {
		case rerr == nil:
		case errors.As(rerr, &ne) && ne.Timeout():
			return signalled.Load(), nil
		case errors.Is(rerr, io.EOF):
			return false, fmt.Errorf("%s: the server closed the connection while holding", c.what)
		default:
			return false, fmt.Errorf("%s: while holding: %w", c.what, unwrapOp(rerr))
		}
	}
}

// emitJSON prints v as one line of JSON.
func (a *app) emitJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(a.stderr, "tallyctl: json: %v\n", err)
		return
	}
	fmt.Fprintf(a.stdout, "%s\n", b)
}

// show renders a name for people: as is when it is printable UTF-8 without
// spaces or quotes, else quoted Go-style.
func show(b []byte) string {
	if len(b) == 0 || !utf8.Valid(b) {
		return strconv.Quote(string(b))
	}
	for _, r := range string(b) {
		if r <= ' ' || r == '"' || r == '\\' || r == 0x7f || !strconv.IsPrint(r) {
			return strconv.Quote(string(b))
		}
	}
	return string(b)
}

// parseUint32 parses a decimal argument that must fit in 32 bits.
func parseUint32(what, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("%s %q is not a whole number from 0 to 4294967295", what, s)}
	}
	return uint32(v), nil
}
