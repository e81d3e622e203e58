//go:build !linux

package tlsbridge

import "net"

// tune sets a TLS socket's keep-alive period (TCP_USER_TIMEOUT is Linux's).
func tune(c net.Conn, cfg Config) {
	if tc, ok := c.(*net.TCPConn); ok && cfg.KeepAlive > 0 {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(cfg.KeepAlive)
	}
}
