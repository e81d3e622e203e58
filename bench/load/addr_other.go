//go:build !linux

package load

import "syscall"

func bindNoPort(network, address string, c syscall.RawConn) error { return nil }
