package tlsbridge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ServerConfig is the configuration of a TLS listener for clients: the certificate and key
// it presents, and, when caFile is given, the CA bundle client certificates must be signed
// by: each client must then present one (mutual TLS).
func ServerConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		if cfg.ClientCAs, err = loadPool(caFile); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// PeerConfigs are the configurations of a cluster member's peer links, as etcd's peer
// flags: every member presents its certificate both as the server of the links it accepts
// and as the client of those it dials, and each side requires the other's, signed by the CA
// bundle caFile. A dialled member's certificate must also name the host it is dialled at
// (its peer address), as any TLS server's.
func PeerConfigs(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, nil, errors.New("peer TLS needs a certificate, its key and the trusted CA bundle")
	}
	cert, err := loadPair(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, nil, err
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}

func loadPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, errors.New("a TLS certificate needs both its file and its key's")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("loading the certificate %s and its key %s: %w", certFile, keyFile, err)
	}
	return cert, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return pool, nil
}
