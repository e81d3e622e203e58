package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The peer listener obeys --bind (issue 20: it bound whatever host --cluster named, 0.0.0.0
// included, even with --bind 127.0.0.1), or --peer-bind; a bind that cannot receive the
// member's own peer address is an error at start.
func TestPeerListen(t *testing.T) {
	for _, tc := range []struct {
		peerAddr, peerBind, bind, want, err string
	}{
		{"127.0.0.1:7000", "", "127.0.0.1", "127.0.0.1:7000", ""},
		{"0.0.0.0:7000", "", "127.0.0.1", "", "--peer-bind 0.0.0.0"},
		{"10.0.0.1:7000", "", "127.0.0.1", "", "not on --bind 127.0.0.1"},
		{"10.0.0.1:7000", "10.0.0.1", "127.0.0.1", "10.0.0.1:7000", ""},
		{"10.0.0.1:7000", "", "0.0.0.0", "0.0.0.0:7000", ""},
		{"node1.example:7000", "", "127.0.0.1", "", "not on --bind"},
		{"10.0.0.1:7000", "10.0.0.2", "0.0.0.0", "", "not on --peer-bind 10.0.0.2"},
		{"10.0.0.1:7000", "nonsense", "0.0.0.0", "", "not an IP address"},
		{"[::1]:7000", "", "::1", "[::1]:7000", ""},
	} {
		got, err := peerListen(tc.peerAddr, tc.peerBind, tc.bind)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("peerListen(%q, %q, %q) = %q, %v; want an error with %q", tc.peerAddr, tc.peerBind, tc.bind, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("peerListen(%q, %q, %q) = %q, %v; want %q", tc.peerAddr, tc.peerBind, tc.bind, got, err, tc.want)
		}
	}
}

func TestReadClusterKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if k, err := readClusterKey(write("ok", "  "+strings.Repeat("x", 40)+"\n", 0o600)); err != nil || len(k) != 40 {
		t.Fatalf("a good key: %q, %v", k, err)
	}
	if _, err := readClusterKey(write("short", "tooshort", 0o600)); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("a short key: %v", err)
	}
	if _, err := readClusterKey(write("open", strings.Repeat("x", 40), 0o644)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a key others can read: %v", err)
	}
	if _, err := readClusterKey(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key file")
	}
}
