package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/loop"
)

// clusterOptions are the cluster-mode flags (docs/cluster.md).
type clusterOptions struct {
	cluster   string
	nodeID    uint64
	join      string
	peerAddr  string
	raftTick  time.Duration
	timeout   time.Duration
	snapshots uint64
	state     string
	peerBind  string
	keyFile   string
	// fromHost takes the node ID from the host name's ordinal (--node-id-from-hostname).
	fromHost bool
}

func (c *clusterOptions) flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.cluster, "cluster", "", "run as a member of a replicated cluster: the initial voters as `ID=HOST:PORT,...` (their peer addresses); needs --node-id")
	fs.Uint64Var(&c.nodeID, "node-id", 0, "this member's ID (cluster mode); its peer port is its own address in --cluster (or --peer-addr)")
	fs.BoolVar(&c.fromHost, "node-id-from-hostname", false, "take --node-id from the host name's trailing -ORDINAL plus one (tallyd-0 is node 1): a Kubernetes StatefulSet's pod names")
	fs.StringVar(&c.join, "join", "", "join a running cluster through a member's peer address `HOST:PORT`, as a learner promoted once caught up (with --node-id and --peer-addr)")
	fs.StringVar(&c.peerAddr, "peer-addr", "", "this member's peer address `HOST:PORT` (default: its entry in --cluster)")
	fs.DurationVar(&c.raftTick, "raft-tick", 100*time.Millisecond, "raft's tick: a leader is elected after 10 without one, heartbeats go every tick")
	fs.DurationVar(&c.timeout, "cluster-timeout", 2*time.Second, "how long a command may wait for a leader or for its consistency level before it is answered -CLUSTERDOWN")
	fs.Uint64Var(&c.snapshots, "snapshot-entries", 20000, "raft log entries applied between snapshots (which compact the raft log)")
	fs.StringVar(&c.peerBind, "peer-bind", "", "IP address the peer listener binds (default: --bind); it must cover this member's peer address")
	fs.StringVar(&c.keyFile, "cluster-key-file", "", "a `FILE` holding the cluster's shared secret (at least 32 bytes, e.g. `head -c 48 /dev/urandom | base64`): every peer link proves it, both ways, before any frame is acted on")
	fs.StringVar(&c.state, "initial-cluster-state", "existing", "new: bootstrap a new cluster from --cluster when the data dir holds no raft log (the first start only); existing: never bootstrap, so that a member whose data dir is empty refuses to start (it lost its data: remove it and --join with a new --node-id)")
}

// config turns the flags into the loop's cluster configuration and peer listener; nil
// when not in cluster mode.
func (c *clusterOptions) config(cfg *loop.Config, appendOnly bool, bind string) error {
	if c.cluster == "" && c.join == "" {
		if c.nodeID != 0 || c.peerAddr != "" || c.fromHost {
			return errors.New("--node-id, --node-id-from-hostname and --peer-addr need --cluster or --join")
		}
		return nil
	}
	if c.fromHost {
		if c.nodeID != 0 {
			return errors.New("--node-id and --node-id-from-hostname cannot be used together")
		}
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-id-from-hostname: %w", err)
		}
		if c.nodeID, err = nodeIDFromHostname(host); err != nil {
			return err
		}
	}
	if c.nodeID == 0 {
		return errors.New("cluster mode needs --node-id (a positive integer)")
	}
	if !appendOnly || cfg.DataDir == "" {
		return errors.New("cluster mode keeps its raft log in --data-dir: --appendonly=false cannot be used")
	}
	if c.raftTick < time.Millisecond {
		return fmt.Errorf("--raft-tick %s is too short (at least 1ms)", c.raftTick)
	}
	if c.timeout <= 0 {
		return fmt.Errorf("--cluster-timeout %s must be positive", c.timeout)
	}
	if c.state != "new" && c.state != "existing" {
		return fmt.Errorf("--initial-cluster-state %q: new or existing", c.state)
	}
	cc := &loop.ClusterConfig{NodeID: c.nodeID, Peers: map[uint64]string{}, Join: c.join, PeerAddr: c.peerAddr,
		Tick: c.raftTick, Timeout: c.timeout, SnapshotEntries: c.snapshots, New: c.state == "new"}
	if c.cluster != "" {
		peers, err := parsePeers(c.cluster)
		if err != nil {
			return err
		}
		cc.Peers = peers
		if cc.PeerAddr == "" {
			cc.PeerAddr = peers[c.nodeID]
		}
		if _, ok := peers[c.nodeID]; !ok && c.join == "" {
			return fmt.Errorf("--node-id %d is not in --cluster %q", c.nodeID, c.cluster)
		}
	}
	if cc.PeerAddr == "" {
		return errors.New("--join needs --peer-addr: the address the other members reach this one at")
	}
	if _, _, err := net.SplitHostPort(cc.PeerAddr); err != nil {
		return fmt.Errorf("peer address %q: %w", cc.PeerAddr, err)
	}
	if c.join != "" {
		if _, _, err := net.SplitHostPort(c.join); err != nil {
			return fmt.Errorf("--join %q: %w", c.join, err)
		}
	}
	if c.keyFile != "" {
		key, err := readClusterKey(c.keyFile)
		if err != nil {
			return err
		}
		cc.Key = key
	}
	ln, err := peerListen(cc.PeerAddr, c.peerBind, bind)
	if err != nil {
		return err
	}
	cfg.Cluster = cc
	cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: loop.ProtoPeer, Addr: ln})
	return nil
}

// nodeIDFromHostname returns one more than the ordinal that ends host's first label, the
// way a StatefulSet names its pods (tallyd-0, tallyd-1, ...), so that node IDs start at 1.
func nodeIDFromHostname(host string) (uint64, error) {
	label, _, _ := strings.Cut(host, ".")
	i := strings.LastIndexByte(label, '-')
	if i < 0 || i == len(label)-1 {
		return 0, fmt.Errorf("--node-id-from-hostname: host name %q does not end in -ORDINAL (as a StatefulSet's pod tallyd-0 does)", host)
	}
	n, err := strconv.ParseUint(label[i+1:], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("--node-id-from-hostname: host name %q does not end in -ORDINAL: %q is not an ordinal", host, label[i+1:])
	}
	return n + 1, nil
}

// peerListen returns the peer listener's address: the port of this member's peer address
// on --peer-bind, else on --bind (which covers every listener). A bind address that cannot
// receive the peer address (a specific IP other than the peer address's own) is an error
// rather than a listener the other members never reach.
func peerListen(peerAddr, peerBind, bind string) (string, error) {
	host, port, _ := net.SplitHostPort(peerAddr)
	on, flag := bind, "--bind"
	if peerBind != "" {
		on, flag = peerBind, "--peer-bind"
		if net.ParseIP(on) == nil && on != "localhost" {
			return "", fmt.Errorf("--peer-bind %q is not an IP address", on)
		}
	}
	if ip := net.ParseIP(on); ip == nil || !ip.IsUnspecified() {
		if hip := net.ParseIP(host); on != host && (hip == nil || !hip.Equal(ip)) {
			return "", fmt.Errorf("this member's peer address %s is not on %s %s: set --peer-bind %s (or --bind)",
				peerAddr, flag, on, host)
		}
	}
	return net.JoinHostPort(on, port), nil
}

// readClusterKey reads the cluster key file: its bytes, without surrounding white space.
func readClusterKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cluster-key-file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 32 {
		return nil, fmt.Errorf("--cluster-key-file %s holds %d bytes: at least 32 are needed (e.g. head -c 48 /dev/urandom | base64 > %s)", path, len(b), path)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 && !ownGroupReadable(st) {
		return nil, fmt.Errorf("--cluster-key-file %s is readable by others (mode %s): chmod 600 it", path, st.Mode().Perm())
	}
	return b, nil
}

// ownGroupReadable tells whether a key file's only access beyond its owner is reading by a
// group this process runs with: Kubernetes mounts a Secret that way (mode 0440, group the
// pod's fsGroup) and offers no way to give the file to the pod's user instead.
func ownGroupReadable(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || st.Mode().Perm()&0o037 != 0 {
		return false
	}
	if int(sys.Gid) == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	return slices.Contains(groups, int(sys.Gid))
}

// parsePeers reads ID=HOST:PORT,ID=HOST:PORT,...
func parsePeers(s string) (map[uint64]string, error) {
	peers := map[uint64]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("--cluster: %q is not ID=HOST:PORT", item)
		}
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--cluster: node ID %q is not a positive integer", id)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("--cluster: address %q of node %d: %w", addr, n, err)
		}
		if _, dup := peers[n]; dup {
			return nil, fmt.Errorf("--cluster: node %d is listed twice", n)
		}
		peers[n] = addr
	}
	if len(peers) == 0 {
		return nil, errors.New("--cluster lists no member")
	}
	return peers, nil
}
