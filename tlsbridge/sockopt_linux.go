package tlsbridge

import (
	"net"

	"golang.org/x/sys/unix"
)

// tune sets a TLS socket's keep-alive period and, when asked, its TCP_USER_TIMEOUT.
func tune(c net.Conn, cfg Config) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	if cfg.KeepAlive > 0 {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(cfg.KeepAlive)
	}
	if cfg.UserTimeout <= 0 {
		return
	}
	if rc, err := tc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(cfg.UserTimeout.Milliseconds()))
		})
	}
}
