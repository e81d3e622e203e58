package load

import (
	"net"
	"net/netip"
	"testing"
)

func TestSourceSpreadsOverLoopback(t *testing.T) {
	for _, n := range []int{1, 2, 256, 1000, 1 << 24, 1 << 25} {
		seen := map[netip.Addr]bool{}
		for i := 0; i < 2000; i++ {
			a := Source(i, n)
			b := a.As4()
			if b[0] != 127 || a == netip.MustParseAddr("127.0.0.0") || a == netip.MustParseAddr("127.255.255.255") {
				t.Fatalf("Source(%d, %d) = %v: not a usable 127.0.0.0/8 host", i, n, a)
			}
			if i < n && seen[a] {
				t.Fatalf("Source(%d, %d) = %v repeats an earlier address", i, n, a)
			}
			seen[a] = true
			if got := Source(i+n, n); n < 1<<24 && got != a {
				t.Fatalf("Source(%d, %d) = %v, want it to wrap to %v", i+n, n, got, a)
			}
		}
	}
	if got := Source(0, 1); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Source(0, 1) = %v, want 127.0.0.1", got)
	}
	// Spread, not packed: 256 sources reach the top of the range.
	if b := Source(255, 256).As4(); b[1] < 250 {
		t.Errorf("Source(255, 256) = %v, want near 127.255.x.x", Source(255, 256))
	}
}

func TestDialersBindSpreadSources(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ds, err := newDialers(l.Addr().String(), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		c, err := ds.dial(i)
		if err != nil {
			t.Fatal(err)
		}
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		got := s.RemoteAddr().(*net.TCPAddr).AddrPort().Addr()
		if want := Source(i, 4); got != want {
			t.Errorf("connection %d came from %v, want %v", i, got, want)
		}
		c.Close()
		s.Close()
	}
}

func TestDialersLeaveOtherTargetsAlone(t *testing.T) {
	// No connection is made: only the dialer set-up is inspected.
	for _, target := range []string{"192.0.2.1:11215", "localhost:11215", "[::1]:11215"} {
		ds, err := newDialers(target, 256, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.d) != 1 || ds.d[0].LocalAddr != nil {
			t.Errorf("%s: %d dialers, local address %v; want one, unbound", target, len(ds.d), ds.d[0].LocalAddr)
		}
	}
	if _, err := newDialers("no-port", 1, 0); err == nil {
		t.Error("newDialers accepted an address without a port")
	}
}
