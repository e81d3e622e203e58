package load

import "syscall"

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
