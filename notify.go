package main

import (
	"net"
	"os"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// sdNotify sends state to the service manager, as sd_notify(3) does: one datagram to the
// unix socket $NOTIFY_SOCKET names (a name starting with @ is in the abstract namespace,
// which the net package handles). Without $NOTIFY_SOCKET it does nothing and reports false.
func sdNotify(state string) (bool, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return false, nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return false, err
	}
	return true, nil
}

// notify sends state with sdNotify, logging a failure: the service manager not hearing of
// readiness is worth a line, not a stop.
func notify(log zerolog.Logger, state string) {
	if _, err := sdNotify(state); err != nil {
		log.Warn().Err(err).Str("NOTIFY_SOCKET", os.Getenv("NOTIFY_SOCKET")).Msg("sd_notify failed")
	}
}

// monotonicUsec is CLOCK_MONOTONIC in microseconds, which RELOADING=1 carries (systemd
// 253 and later match it against the reload request).
func monotonicUsec() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano() / 1000
}
