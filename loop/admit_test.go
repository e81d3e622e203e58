package loop

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

func mustAllow(t testing.TB, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseAllow(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// expectRefused dials addr, sends req and expects the server to close the connection
// without a byte in answer.
func expectRefused(t *testing.T, what, addr string, req []byte) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyWait)
	if err != nil {
		t.Fatalf("%s: dial: %v", what, err)
	}
	defer c.Close()
	_, _ = c.Write(req) // may fail: the server may have closed already
	_ = c.SetReadDeadline(time.Now().Add(replyWait))
	var b [512]byte
	n, err := c.Read(b[:])
	var ne net.Error
	switch {
	case n > 0:
		t.Fatalf("%s: answered %q, want a close", what, b[:n])
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("%s: not closed", what)
	case !errors.Is(err, io.EOF) && !isReset(err):
		t.Fatalf("%s: %v", what, err)
	}
}

// TestAllowList: a listener with an allow-list closes a connection from elsewhere at accept,
// counts it as rejected and logs it, whatever the protocol; a source inside it is served.
func TestAllowList(t *testing.T) {
	elsewhere := mustAllow(t, "10.255.0.0/16,fd00:ffff::/32")
	ts := startServer(t, func(c *Config) {
		c.Listeners = []Listener{
			{Proto: ProtoCounter, Addr: "127.0.0.1:0", Allow: elsewhere},
			{Proto: ProtoSemaphore, Addr: "127.0.0.1:0", Allow: elsewhere},
			{Proto: ProtoPool, Addr: "127.0.0.1:0", Allow: elsewhere},
			{Proto: ProtoSlock, Addr: "127.0.0.1:0", Allow: mustAllow(t, "127.0.0.1/32")},
		}
	})
	expectRefused(t, "counter", ts.counterAddr, counter.AppendRequest(nil, counter.OpNoop, 1, nil))
	expectRefused(t, "semaphore", ts.semaphoreAddr, counter.AppendRequest(nil, counter.OpNoop, 1, nil))
	expectRefused(t, "pool", ts.poolAddr, []byte("ACQ4ME k 1 1 1\n"))
	dialSlock(t, ts.slockAddr).ping() // 127.0.0.1 is in its list
	ts.log.waitFor(t, "connection refused")
	var rejected [numProtos]uint64
	ts.onLoop(t, func() {
		for p := range rejected {
			rejected[p] = ts.ct.stats[p].Rejected
		}
	})
	if rejected != [numProtos]uint64{1, 1, 1, 0} {
		t.Fatalf("rejected per protocol %v, want [1 1 1 0]", rejected)
	}
	if l := ts.log.String(); !strings.Contains(l, "source not in the allow-list") || !strings.Contains(l, "--counter-allow") {
		t.Errorf("the refusal's log line does not say why or how to fix it:\n%s", l)
	}

	// The lists change at a reload: now the slock port refuses loopback, binary and text.
	cfg := ts.cfg
	cfg.Listeners = append([]Listener(nil), cfg.Listeners...)
	for i := range cfg.Listeners {
		cfg.Listeners[i].Allow = elsewhere
		if cfg.Listeners[i].Proto == ProtoCounter {
			cfg.Listeners[i].Allow = mustAllow(t, "::1,127.0.0.0/8")
		}
	}
	ts.Reload(cfg)
	expectRefused(t, "slock binary", ts.slockAddr, slock.AppendRequest(nil, slock.TypePing, [16]byte{1}))
	expectRefused(t, "slock text", ts.slockAddr, resp.AppendCommand(nil, "PING"))
	cl := dial(t, ts.counterAddr)
	expectStatus(t, cl.simple(counter.OpNoop), counter.StatusOK)
}

func TestParseAllow(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.0/8", "10.0.0.0/8"},
		{" 10.1.2.3/8 , 192.168.1.5 ", "10.0.0.0/8 192.168.1.5/32"},
		{"::1,fd00::/8", "::1/128 fd00::/8"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:127.0.0.1", "127.0.0.1/32"},
		{"", ""},
	} {
		p, err := ParseAllow(tc.in)
		var got []string
		for _, x := range p {
			got = append(got, x.String())
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("ParseAllow(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "nonsense", "10.0.0.1/8/8", "host.example"} {
		if _, err := ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) accepted", bad)
		}
	}
}

// TestAdmit: who each listener lets in, by its bind address, allow-list, protected mode and
// whether the Redis-text side needs a password.
func TestAdmit(t *testing.T) {
	for _, tc := range []struct {
		proto     Proto
		bind      string
		allow     string
		protected bool
		pass      string
		from      string
		gate      gate
		refused   string
	}{
		{ProtoCounter, "0.0.0.0:1", "", true, "", "10.1.1.1", gateOpen, "protected mode"},
		{ProtoCounter, "0.0.0.0:1", "", true, "", "127.0.0.1", gateOpen, ""},
		{ProtoCounter, "[::]:1", "", true, "", "::1", gateOpen, ""},
		{ProtoCounter, "[::]:1", "", true, "", "::ffff:127.0.0.1", gateOpen, ""},
		{ProtoCounter, "[::]:1", "", true, "", "::ffff:10.1.1.1", gateOpen, "protected mode"},
		{ProtoPool, "10.1.1.1:1", "", true, "pw", "10.1.1.2", gateOpen, "protected mode"},
		{ProtoSemaphore, "0.0.0.0:1", "", false, "", "10.1.1.1", gateOpen, ""},
		{ProtoCounter, "127.0.0.1:1", "", true, "", "10.1.1.1", gateOpen, ""},
		{ProtoCounter, "localhost:1", "", true, "", "10.1.1.1", gateOpen, ""},
		{ProtoCounter, "0.0.0.0:1", "10.0.0.0/8", true, "", "10.1.1.1", gateOpen, ""},
		{ProtoCounter, "0.0.0.0:1", "10.0.0.0/8", false, "", "192.168.1.1", gateOpen, "source not in the allow-list"},
		{ProtoCounter, "0.0.0.0:1", "10.0.0.0/8", true, "", "127.0.0.1", gateOpen, "source not in the allow-list"},
		{ProtoCounter, "[::]:1", "10.0.0.0/8", true, "", "::ffff:10.9.9.9", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "", true, "", "10.1.1.1", gateDenied, ""},
		{ProtoSlock, "0.0.0.0:1", "", true, "", "127.0.0.1", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "", false, "", "10.1.1.1", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "", true, "pw", "10.1.1.1", gateTextOnly, ""},
		{ProtoSlock, "0.0.0.0:1", "", false, "pw", "10.1.1.1", gateTextOnly, ""},
		{ProtoSlock, "0.0.0.0:1", "", true, "pw", "127.0.0.1", gateOpen, ""},
		{ProtoSlock, "127.0.0.1:1", "", true, "pw", "127.0.0.1", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "10.0.0.0/8", true, "pw", "10.1.1.1", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "10.0.0.0/8", true, "", "10.1.1.1", gateOpen, ""},
		{ProtoSlock, "0.0.0.0:1", "10.0.0.0/8", true, "pw", "127.0.0.1", gateOpen, "source not in the allow-list"},
		{ProtoPeer, "0.0.0.0:1", "", true, "", "10.1.1.1", gateOpen, ""},
		{ProtoPeer, "0.0.0.0:1", "10.0.0.0/8", true, "", "192.168.1.1", gateOpen, "source not in the allow-list"},
	} {
		s := newSlockServer(t, func(c *Config) { c.ProtectedMode, c.RequirePass = tc.protected, tc.pass })
		ln := &listenerState{Listener: Listener{Proto: tc.proto, Addr: tc.bind, Allow: mustAllow(t, tc.allow)},
			loopback: loopbackBind(tc.bind)}
		ip := netip.MustParseAddr(tc.from)
		g, why := s.admit(ln, &net.TCPAddr{IP: ip.AsSlice(), Port: 4242})
		if g != tc.gate || why != tc.refused {
			t.Errorf("%+v: gate %d, refused %q", tc, g, why)
		}
	}
}

// newSlockServer builds (does not run) a server with a slock listener, as mod changes it.
func newSlockServer(t testing.TB, mod func(*Config)) *Server {
	t.Helper()
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}}
	mod(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeSlockConn makes a slock connection of s on c (whose context the caller sets to it).
func (s *Server) fakeSlockConn(c gnet.Conn) *conn {
	cs := &conn{c: c, owner: 1, proto: ProtoSlock, ln: &listenerState{}}
	cs.h = s.handlerFor(cs)
	s.ct.conns[cs.owner] = cs
	return cs
}

// gateConn is a fakeConn that keeps what is written and says where it comes from.
type gateConn struct {
	fakeConn
	out []byte
}

func (g *gateConn) Write(b []byte) (int, error) { g.out = append(g.out, b...); return len(b), nil }
func (g *gateConn) RemoteAddr() net.Addr        { return &net.TCPAddr{IP: net.IPv4(10, 1, 1, 1), Port: 4242} }

// TestSlockGate: on the slock port the first bytes decide. In protected mode with no
// password Redis text is answered DENIED, saying how to open the port, and closed; binary
// frames are closed. With a password, binary frames from a source that is not allowed are
// closed, and Redis text goes on to AUTH.
func TestSlockGate(t *testing.T) {
	ping := slock.AppendRequest(nil, slock.TypePing, [16]byte{1})
	for _, tc := range []struct {
		gate  gate
		pass  string
		in    []byte
		close bool
		want  string
	}{
		{gateDenied, "", resp.AppendCommand(nil, "PING"), true, "-" + deniedText + "\r\n"},
		{gateDenied, "", ping, true, ""},
		{gateTextOnly, "pw", ping, true, ""},
		{gateTextOnly, "pw", resp.AppendCommand(nil, "PING"), false, "-" + noAuthText + "\r\n"},
		{gateOpen, "", ping, false, string(slock.AppendSimple(nil, slock.TypePing, [16]byte{1}, slock.ResultOK))},
	} {
		s := newSlockServer(t, func(c *Config) { c.RequirePass = tc.pass })
		gc := &gateConn{}
		cs := s.fakeSlockConn(gc)
		gc.ctx = cs
		cs.slock.gate, cs.slock.remote = tc.gate, gc.RemoteAddr()
		gc.in = tc.in
		act := s.OnTraffic(gc)
		if closed := act != 0; closed != tc.close || string(gc.out) != tc.want {
			t.Errorf("gate %d, %q: closed %v, wrote %q; want %v, %q", tc.gate, tc.in, closed, gc.out, tc.close, tc.want)
		}
		if rej := s.ct.stats[ProtoSlock].Rejected; (rej == 1) != tc.close {
			t.Errorf("gate %d, %q: %d rejected", tc.gate, tc.in, rej)
		}
	}
	if !strings.HasPrefix(deniedText, "DENIED ") || !strings.Contains(deniedText, "--protected-mode no") ||
		!strings.Contains(deniedText, "--requirepass") || !strings.Contains(deniedText, "--slock-allow") {
		t.Errorf("the DENIED text does not say how to open the port: %s", deniedText)
	}
}
