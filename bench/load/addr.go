package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Loopback source addresses: connection i binds Source(i, n) before it connects, so the
// connection count is not limited by one source address's ephemeral ports (about 28k on
// Linux, fewer while closed connections sit in TIME_WAIT).

// Source returns the i-th of n source addresses spread evenly over 127.0.0.0/8,
// skipping 127.0.0.0 and 127.255.255.255. Index i wraps around modulo n.
func Source(i, n int) netip.Addr {
	if n < 1 {
		n = 1
	}
	const span = 1<<24 - 2 // 127.0.0.1 .. 127.255.255.254
	step := span / n
	if step < 1 {
		step = 1
	}
	off := uint32(1 + (i%n)*step%span)
	return netip.AddrFrom4([4]byte{127, byte(off >> 16), byte(off >> 8), byte(off)})
}

// dialers dials from a spread of loopback source addresses.
type dialers struct {
	target  string
	tls     *tls.Config // conn's connections are TLS (nil: plain TCP)
	d       []*net.Dialer
	ip      netip.AddrPort // the target, when it is an IPv4 literal (for raw dials)
	sources int            // source addresses for raw dials (0: none)
}

// newDialers returns dialers for target. When the target is a loopback address and
// sources > 0, connection i comes from Source(i, sources); otherwise the system picks.
func newDialers(target string, sources int, timeout time.Duration) (*dialers, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("target address %q: %v", target, err)
	}
	ds := &dialers{target: target}
	if ap, err := netip.ParseAddrPort(target); err == nil && ap.Addr().Is4() {
		ds.ip = ap
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.Is4() || !ip.IsLoopback() || sources < 1 {
		ds.d = []*net.Dialer{{Timeout: timeout}}
		return ds, nil
	}
	ds.sources = sources
	ds.d = make([]*net.Dialer, sources)
	for i := range ds.d {
		ds.d[i] = &net.Dialer{
			Timeout:   timeout,
			LocalAddr: &net.TCPAddr{IP: Source(i, sources).AsSlice()},
			Control:   bindNoPort,
		}
	}
	return ds, nil
}

// dial connects connection number i.
func (ds *dialers) dial(i int) (*net.TCPConn, error) {
	c, err := ds.d[i%len(ds.d)].Dial("tcp", ds.target)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	tc.SetNoDelay(true)
	return tc, nil
}

// conn connects connection number i and, with TLS, runs its handshake (crypto/tls, on the
// caller's goroutine: the epoll driver never runs TLS).
func (ds *dialers) conn(i int) (net.Conn, error) {
	c, err := ds.dial(i)
	if err != nil || ds.tls == nil {
		return c, err
	}
	tc := tls.Client(c, ds.tls)
	ctx, cancel := context.WithTimeout(context.Background(), ds.d[i%len(ds.d)].Timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}
