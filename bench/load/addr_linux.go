package load

import (
	"net"
	"syscall"
)

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT: with it a bind to a source address
// defers the choice of port to connect, which then only needs the 4-tuple to be unique.
const ipBindAddressNoPort = 24

func bindNoPort(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// alive reports whether the server has not closed c, without reading from it.
func alive(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := true
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = err == syscall.EAGAIN || (err == nil && n > 0)
		return true
	})
	return ok
}
