package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/tlsbridge"
)

// tlsOptions are the TLS flags (docs/security.md): TLS ports for clients with their
// certificate, and peer TLS, as etcd's peer flags.
type tlsOptions struct {
	slockPort, counterPort, poolPort int
	certFile, keyFile, caFile        string
	handshakeTimeout, helloTimeout   time.Duration
	maxHandshakes, maxPerIP          int

	peerCertFile, peerKeyFile, peerCAFile string
}

// clientFlags defines the client TLS flags.
func (t *tlsOptions) clientFlags(fs *pflag.FlagSet, d loop.Config) {
	fs.IntVar(&t.slockPort, "slock-tls-port", 0, "slock protocol (Redis text and binary frames) over TLS on this port; 0 = off (needs --tls-cert-file and --tls-key-file)")
	fs.IntVar(&t.counterPort, "counter-tls-port", 0, "yrmcds counter protocol over TLS on this port; 0 = off")
	fs.IntVar(&t.poolPort, "pool-tls-port", 0, "PoolCounter over TLS on this port; 0 = off")
	fs.StringVar(&t.certFile, "tls-cert-file", "", "the TLS ports' certificate (PEM `FILE`, the chain after it)")
	fs.StringVar(&t.keyFile, "tls-key-file", "", "the TLS ports' private key (PEM `FILE`)")
	fs.StringVar(&t.caFile, "tls-ca-cert-file", "", "CA bundle (PEM `FILE`): when given, TLS clients must present a certificate it signed (mutual TLS)")
	fs.DurationVar(&t.handshakeTimeout, "tls-handshake-timeout", tlsbridge.DefaultHandshakeTimeout, "a TLS connection whose handshake takes longer is closed (clients and peer links)")
	fs.DurationVar(&t.helloTimeout, "tls-hello-timeout", tlsbridge.DefaultHelloTimeout, "an accepted TLS connection whose whole ClientHello has not come this long after its connect is closed (silent or trickling clients)")
	fs.IntVar(&t.maxHandshakes, "tls-max-handshakes", tlsbridge.DefaultMaxHandshakes, "TLS handshakes in progress at once, per TLS bridge (clients; peer links); past it, the oldest without a ClientHello is dropped, or the newcomer when there is none")
	fs.IntVar(&t.maxPerIP, "tls-max-handshakes-per-ip", tlsbridge.DefaultMaxHandshakesPerSource, "TLS handshakes in progress from one source address (an IPv6 /64); past it, that address's oldest without a ClientHello is dropped, or the newcomer; 0 = no per-address cap")
}

// peerFlags defines the peer TLS flags.
func (t *tlsOptions) peerFlags(fs *pflag.FlagSet) {
	fs.StringVar(&t.peerCertFile, "peer-cert-file", "", "peer TLS: this member's certificate (PEM `FILE`), presented on the links it accepts and those it dials; it must name the host of its peer address")
	fs.StringVar(&t.peerKeyFile, "peer-key-file", "", "peer TLS: its private key (PEM `FILE`)")
	fs.StringVar(&t.peerCAFile, "peer-trusted-ca-file", "", "peer TLS: the CA bundle (PEM `FILE`) every member's certificate must be signed by; links from and to others are refused")
}

// listeners adds the client TLS listeners on bind and the certificate they present.
func (t *tlsOptions) listeners(cfg *loop.Config, bind string) error {
	ports := []struct {
		flag  string
		port  int
		proto loop.Proto
	}{{"counter-tls-port", t.counterPort, loop.ProtoCounter}, {"pool-tls-port", t.poolPort, loop.ProtoPool},
		{"slock-tls-port", t.slockPort, loop.ProtoSlock}}
	on := false
	for _, p := range ports {
		if p.port < 0 || p.port > 65535 {
			return fmt.Errorf("--%s %d is not a port number (0 to 65535)", p.flag, p.port)
		}
		if p.port != 0 {
			on = true
			cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: p.proto,
				Addr: net.JoinHostPort(bind, strconv.Itoa(p.port)), TLS: true})
		}
	}
	if t.handshakeTimeout <= 0 {
		return fmt.Errorf("--tls-handshake-timeout %s must be positive", t.handshakeTimeout)
	}
	cfg.TLS.HandshakeTimeout = t.handshakeTimeout
	switch {
	case t.helloTimeout <= 0:
		return fmt.Errorf("--tls-hello-timeout %s must be positive", t.helloTimeout)
	case t.maxHandshakes < 1:
		return fmt.Errorf("--tls-max-handshakes %d must be at least 1", t.maxHandshakes)
	case t.maxPerIP < 0:
		return fmt.Errorf("--tls-max-handshakes-per-ip %d must be 0 (no cap) or more", t.maxPerIP)
	}
	cfg.TLS.HelloTimeout, cfg.TLS.MaxHandshakes = t.helloTimeout, t.maxHandshakes
	cfg.TLS.MaxHandshakesPerSource = t.maxPerIP
	if t.maxPerIP == 0 {
		cfg.TLS.MaxHandshakesPerSource = -1
	}
	switch {
	case !on && (t.certFile != "" || t.keyFile != "" || t.caFile != ""):
		return errors.New("--tls-cert-file, --tls-key-file and --tls-ca-cert-file need a TLS port (--slock-tls-port, --counter-tls-port or --pool-tls-port)")
	case !on:
		return nil
	case t.certFile == "" || t.keyFile == "":
		return errors.New("a TLS port needs --tls-cert-file and --tls-key-file")
	}
	c, err := tlsbridge.ServerConfig(t.certFile, t.keyFile, t.caFile)
	if err != nil {
		return fmt.Errorf("client TLS: %w", err)
	}
	cfg.TLS.Client = c
	return nil
}

// peer turns on peer TLS for the peer listener and the links this member dials (after the
// cluster flags have added the peer listener).
func (t *tlsOptions) peer(cfg *loop.Config) error {
	if t.peerCertFile == "" && t.peerKeyFile == "" && t.peerCAFile == "" {
		return nil
	}
	if cfg.Cluster == nil {
		return errors.New("--peer-cert-file, --peer-key-file and --peer-trusted-ca-file need cluster mode (--cluster or --join)")
	}
	if t.peerCertFile == "" || t.peerKeyFile == "" || t.peerCAFile == "" {
		return errors.New("peer TLS needs all of --peer-cert-file, --peer-key-file and --peer-trusted-ca-file (client certificates are required both ways)")
	}
	server, client, err := tlsbridge.PeerConfigs(t.peerCertFile, t.peerKeyFile, t.peerCAFile)
	if err != nil {
		return fmt.Errorf("peer TLS: %w", err)
	}
	cfg.TLS.PeerServer, cfg.TLS.PeerClient = server, client
	for i := range cfg.Listeners {
		if cfg.Listeners[i].Proto == loop.ProtoPeer {
			cfg.Listeners[i].TLS = true
		}
	}
	return nil
}
