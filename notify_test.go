package main

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listenNotify opens a unixgram socket as systemd does for NOTIFY_SOCKET and returns the
// name to put there.
func listenNotify(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("reading the notify socket: %v", err)
	}
	return string(buf[:n])
}

// sdNotify sends its datagram to a socket path and to an abstract name (@...), and does
// nothing without NOTIFY_SOCKET.
func TestSdNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	abstract := "@tallyd-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, name := range []string{path, abstract} {
		c := listenNotify(t, name)
		t.Setenv("NOTIFY_SOCKET", name)
		if sent, err := sdNotify("READY=1\nSTATUS=serving"); !sent || err != nil {
			t.Fatalf("%s: sent %v, %v", name, sent, err)
		}
		if got := readNotify(t, c); got != "READY=1\nSTATUS=serving" {
			t.Fatalf("%s: got %q", name, got)
		}
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := sdNotify("READY=1"); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: sent %v, %v", sent, err)
	}
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "nobody-listens"))
	if _, err := sdNotify("READY=1"); err == nil {
		t.Fatal("no error for a socket nobody listens on")
	}
	if a, b := monotonicUsec(), monotonicUsec(); a <= 0 || b < a {
		t.Fatalf("monotonic clock: %d then %d", a, b)
	}
}
