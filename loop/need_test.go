package loop

import (
	"bytes"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestLargeRequestPeekedOnce: a 1 MB argument arriving in 64 pieces is looked at when its
// header is in and when all of it is, not at every piece: gnet's Peek copies a frame that
// straddles its ring and the new bytes, so a peek per piece copied the request over and over
// (quadratic in its size; a 64 MB raft snapshot frame was copied some 32 GB). Before
// conn.need: a peek per piece that arrived on its own (30-64 here).
func TestLargeRequestPeekedOnce(t *testing.T) {
	ts := startSlock(t, nil)
	c, err := net.Dial("tcp", ts.slockAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping := func() {
		t.Helper()
		_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		buf := make([]byte, 7)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("PING: %q %v", buf, err)
		}
	}
	ping()
	var before uint64
	ts.onLoop(t, func() { before = ts.ct.peeks })
	const size, pieces = 1_000_000, 64
	_, _ = c.Write([]byte("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$" + strconv.Itoa(size) + "\r\n"))
	time.Sleep(5 * time.Millisecond)
	val := bytes.Repeat([]byte("v"), size)
	for i := range pieces {
		_, _ = c.Write(val[i*size/pieces : (i+1)*size/pieces])
		time.Sleep(2 * time.Millisecond) // a read event each, most of the time
	}
	_, _ = c.Write([]byte("\r\n"))
	buf := make([]byte, 5)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(buf); err != nil || string(buf) != "+OK\r\n" {
		t.Fatalf("SET of %d bytes: %q %v", size, buf, err)
	}
	var after uint64
	ts.onLoop(t, func() { after = ts.ct.peeks })
	if n := after - before; n > 4 {
		t.Errorf("a %d-byte request sent in %d pieces was peeked at %d times: want at most 4 (its header, its whole)", size, pieces, n)
	} else {
		t.Logf("a %d-byte request sent in %d pieces: peeked at %d times", size, pieces, n)
	}
	ping()
}
