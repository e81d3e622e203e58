package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/loop"
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
	// A Kubernetes Secret mounted with the pod's fsGroup: group-readable, the group our own.
	if _, err := readClusterKey(write("group", strings.Repeat("x", 40), 0o640)); err != nil {
		t.Fatalf("a key only our own group can read: %v", err)
	}
	for _, mode := range []os.FileMode{0o660, 0o604, 0o650} {
		p := write(fmt.Sprintf("group%o", mode), strings.Repeat("x", 40), mode)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := readClusterKey(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("a key of mode %o: %v", mode, err)
		}
	}
	if os.Geteuid() == 0 {
		p := write("othergroup", strings.Repeat("x", 40), 0o640)
		if err := os.Chown(p, -1, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := readClusterKey(p); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("a key another group can read: %v", err)
		}
	}
	if _, err := readClusterKey(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key file")
	}
}

// --node-id-from-hostname turns a StatefulSet pod's name into a node ID: its ordinal plus one.
func TestNodeIDFromHostname(t *testing.T) {
	for _, tc := range []struct {
		host string
		want uint64
		err  string
	}{
		{"tallyd-0", 1, ""},
		{"tallyd-2", 3, ""},
		{"my-tallyd-12", 13, ""},
		{"tallyd-1.tallyd-peers.default.svc.cluster.local", 2, ""},
		{"tallyd", 0, "does not end in -ORDINAL"},
		{"tallyd-", 0, "does not end in -ORDINAL"},
		{"tallyd-x", 0, `"x" is not an ordinal`},
		{"tallyd-18446744073709551615", 0, "is not an ordinal"},
		{"host.tallyd-1", 0, "does not end in -ORDINAL"},
	} {
		got, err := nodeIDFromHostname(tc.host)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("nodeIDFromHostname(%q) = %d, %v; want an error with %q", tc.host, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("nodeIDFromHostname(%q) = %d, %v; want %d", tc.host, got, err, tc.want)
		}
	}
}

// --node-id-from-hostname sets the node ID from this machine's host name, refuses --node-id
// beside it, and needs cluster mode.
func TestNodeIDFromHostnameFlag(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	want, wantErr := nodeIDFromHostname(host)
	cfg := loop.Defaults()
	cfg.DataDir = t.TempDir()
	c := clusterOptions{cluster: "1=127.0.0.1:0", fromHost: true, raftTick: time.Millisecond, timeout: time.Second, state: "existing"}
	err = c.config(&cfg, true, "127.0.0.1")
	switch {
	case wantErr != nil:
		if err == nil || err.Error() != wantErr.Error() {
			t.Errorf("host %q: config() = %v; want %v", host, err, wantErr)
		}
	case c.nodeID != want:
		t.Errorf("host %q: node ID %d; want %d", host, c.nodeID, want)
	}
	c = clusterOptions{cluster: "1=127.0.0.1:0", fromHost: true, nodeID: 1, raftTick: time.Millisecond, timeout: time.Second, state: "existing"}
	if err := c.config(&cfg, true, "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "cannot be used together") {
		t.Errorf("--node-id 1 --node-id-from-hostname: %v; want an error", err)
	}
	c = clusterOptions{fromHost: true}
	if err := c.config(&cfg, true, "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "need --cluster or --join") {
		t.Errorf("--node-id-from-hostname alone: %v; want an error", err)
	}
}
