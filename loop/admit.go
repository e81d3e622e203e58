package loop

import (
	"net"
	"net/netip"
	"strings"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// Who may connect, decided at accept (OnOpen) from where a connection comes from:
//
//   - A listener with an allow-list (Listener.Allow: --counter-allow, ..., or --allow for
//     all) accepts only sources inside it; any other connection is closed at once.
//   - Protected mode (Config.ProtectedMode, as Redis's): a listener bound to an address
//     that is not loopback, without an allow-list, accepts only loopback sources, and on the
//     slock port only until a password or users are configured. yrmcds and PoolCounter
//     connections from elsewhere are closed at accept; a slock connection is decided by its
//     first bytes: Redis text is answered -DENIED saying how to open the port, binary frames
//     are closed.
//   - The slock port's binary frames have no authentication: while the Redis-text side needs
//     a password, they are served only from the allow-list, or without one from loopback.
//
// Every refusal counts in the listener's rejected connections and is logged (rate-limited).

// gate is what a slock connection may speak, decided at accept.
type gate uint8

const (
	gateOpen     gate = iota
	gateTextOnly      // the text side needs a password and the source is not one binary frames come from
	gateDenied        // protected mode: text is answered DENIED, binary frames refused
)

// deniedText is Redis's protected-mode error, adapted to tallyd's settings.
const deniedText = "DENIED tallyd is running in protected mode because protected mode is enabled, no password " +
	"is set for the default user and this port has no allow-list. In this mode connections are only accepted " +
	"from the loopback interface. If you want to connect from external computers to tallyd you may adopt one of " +
	"the following solutions: 1) Set a password for the default user (--requirepass, or requirepass in the " +
	"config file) or give users in an ACL file (--aclfile). 2) Allow your clients' networks with --slock-allow " +
	"or --allow CIDR,... (slock.allow or allow in the config file). 3) Restart tallyd with '--protected-mode no' " +
	"(protected_mode = no in the config file), but MAKE SURE tallyd is not publicly accessible from the internet " +
	"if you do so. NOTE: You only need to do one of the above things in order for the server to start accepting " +
	"connections from the outside."

// Allow-lists and protected mode judge the address remoteAddr (tls.go) gives: the socket's
// peer, or for a TLS connection its client's (OnOpen asks it once; a slock connection keeps
// the answer, slockConn.remote, for its log lines).

// addrIP is a's IP address, IPv4-mapped IPv6 as IPv4; not valid if a is not an IP address.
func addrIP(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	case *net.UDPAddr:
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// loopbackBind reports whether a listener bound to addr (host:port) can only be reached
// from this machine.
func loopbackBind(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// ParseAllow reads an allow-list: CIDRs or single addresses, separated by commas.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			ip, err := netip.ParseAddr(f)
			if err != nil {
				return nil, err
			}
			ip = ip.Unmap()
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// allowed reports whether ip is inside one of allow.
func allowed(allow []netip.Prefix, ip netip.Addr) bool {
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// admit decides whether a connection on ln from ra may stay: why not ("" if it may), and
// for the slock port what it may speak.
func (s *Server) admit(ln *listenerState, ra net.Addr) (g gate, why string) {
	ip := addrIP(ra)
	if len(ln.Allow) > 0 {
		if !allowed(ln.Allow, ip) {
			return gateOpen, "source not in the allow-list"
		}
		return gateOpen, ""
	}
	local := ip.IsLoopback()
	protected := s.cfg.ProtectedMode && !ln.loopback && !local
	switch ln.Proto {
	case ProtoSlock:
		switch {
		case protected && s.auth.open:
			return gateDenied, ""
		case !s.auth.open && !local:
			return gateTextOnly, ""
		}
	case ProtoPeer: // peers authenticate themselves (cluster); only an allow-list applies here
	default:
		if protected {
			return gateOpen, "protected mode"
		}
	}
	return gateOpen, ""
}

// refuseSource closes a just-accepted connection from a source admit refused, counts it
// in its listener's rejected connections and logs it (rate-limited).
func (s *Server) refuseSource(ln *listenerState, ra net.Addr, why string) ([]byte, gnet.Action) {
	s.countRefused(ln.Proto)
	s.logRefused(ln.Proto, ra, why)
	return nil, gnet.Close
}

func (s *Server) countRefused(p Proto) {
	if p < numProtos {
		s.ct.stats[p].Rejected++
	}
	if p == ProtoPool {
		s.st.pools.Stats().ConnectErrors++
	}
}

// logRefused logs a connection refused for where it comes from, saying how to let it in.
func (s *Server) logRefused(p Proto, ra net.Addr, why string) {
	missed, ok := s.logs.admit.allow(s.now())
	if !ok {
		return
	}
	flag := "--" + p.String() + "-allow"
	how := "add its network to " + flag + " (or --allow)"
	switch why {
	case "protected mode":
		how = "this listener is bound to a non-loopback address with no allow-list: give " + flag +
			" (or --allow), or run with --protected-mode no"
	case "protected mode: no password":
		how = "no password or ACL file is set and the slock port has no allow-list: set --requirepass or --aclfile, give " +
			flag + " (or --allow), or run with --protected-mode no"
	case "binary slock frames need an allowed source":
		how = "binary frames have no password: with --requirepass or --aclfile they are served only from " + flag +
			" (without one, from loopback)"
	}
	s.log.Warn().Stringer("proto", p).Stringer("remote", ra).Str("why", why).Str("fix", how).
		Uint64("refused_since_last_line", missed).Msg("connection refused")
}

// gateRefuses runs when a slock connection's first bytes say what it speaks: true if its
// gate refuses that; it is then answered (Redis text: DENIED), closed and counted.
func (s *Server) gateRefuses(cs *conn, kind slock.Kind) bool {
	var why string
	switch g := cs.slock.gate; {
	case g == gateDenied && kind == slock.RESP:
		s.put(cs, resp.AppendError(s.out(cs), deniedText))
		why = "protected mode: no password"
	case g == gateDenied:
		why = "protected mode"
	case g == gateTextOnly && kind == slock.Binary:
		why = "binary slock frames need an allowed source"
	default:
		return false
	}
	cs.quit = true
	s.countRefused(ProtoSlock)
	s.logRefused(ProtoSlock, cs.slock.remote, why)
	return true
}

// warnExposed logs, at start, each listener that anyone who can reach it may use: bound to
// an address that is not loopback, with no allow-list and (slock) no password, protected
// mode off; and, protected mode on, which listeners it limits to loopback clients.
func (s *Server) warnExposed(addrs []net.Addr) {
	for i, l := range s.cfg.Listeners {
		if l.Proto == ProtoPeer || loopbackBind(l.Addr) || len(l.Allow) > 0 {
			continue
		}
		open := l.Proto != ProtoSlock || s.auth.open
		what := "this listener is bound to a non-loopback address with no allow-list"
		if l.Proto == ProtoSlock {
			what += " and no password"
		}
		fix := " (--" + l.Proto.String() + "-allow or --allow CIDR,... says who may; docs/security.md)"
		ev := s.log.Warn().Stringer("proto", l.Proto).Str("addr", addrs[i].String())
		switch {
		case open && !s.cfg.ProtectedMode:
			ev.Msg("SECURITY WARNING: " + what + ", and protected mode is off: anyone who can reach it can use it" + fix)
		case open:
			ev.Msg("protected mode: " + what + ": it accepts loopback clients only" + fix)
		default:
			ev.Msg("the slock port needs a password for Redis text; its binary frames, which have none, " +
				"are served to loopback clients only (--slock-allow CIDR,... lets others in)")
		}
	}
}
