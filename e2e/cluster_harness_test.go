package e2e

// The cluster harness: several tallyd nodes (issue 13) with a network between them that
// the test can cut.
//
// As root with iproute2 (CI), every node runs in its own network namespace with two veth
// interfaces: one on a "peer" bridge (raft, forwarded commands) and one on a "client"
// bridge that the test process reaches from the root namespace. Isolating a node takes
// its peer link down: it loses its peers, clients still reach it. Elsewhere the nodes run
// on 127.0.0.1 and reach each other through a faultLink per ordered pair of nodes.
//
// TALLYD_CLUSTER_NET=netns|proxy picks one (netns fails the test where it cannot work).

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// The timing every cluster test runs with (flags of each node).
const (
	raftTick       = 20 * time.Millisecond
	electionTicks  = 10 // raft's ElectionTick in tallyd (cluster.md: election after 10 ticks)
	electionTO     = electionTicks * raftTick
	clusterTimeout = time.Second
	// downSlack is how much later than --cluster-timeout a -CLUSTERDOWN may arrive (tick
	// granularity, fsync, two loaded cores).
	downSlack = time.Second
	// peerPort and clientPort are the ports of every node inside its own namespace.
	peerPort   = 7000
	clientPort = 6379
)

var (
	clusterOnce sync.Once
	clusterNo   string // why the binary cannot run a cluster; "" if it can
	clusterBin  string // what the nodes run: tallyd, or the fake
	clusterHelp string // its --help
	clusterFake = os.Getenv("TALLYD_CLUSTER_FAKE") == "1"
)

// clusterHas tells whether the nodes' binary has a flag (its --help names it); needCluster
// first.
func clusterHas(flag string) bool { return strings.Contains(clusterHelp, flag+" ") }

// hasInitialState: the binary has --initial-cluster-state (issue 19). Before it, every
// start with an empty data dir bootstrapped the --cluster voters, as `new` does now.
func hasInitialState() bool { return clusterHas("--initial-cluster-state") }

// needCluster skips the test when the binary has no cluster mode yet (issue 13).
//
// TALLYD_CLUSTER_FAKE=1 runs the nodes as testdata/fakecluster instead, a stand-in with
// the same flags and commands and no raft, to check the tests' own machinery.
func needCluster(t *testing.T) {
	t.Helper()
	clusterOnce.Do(func() {
		clusterBin = binPath
		if clusterFake {
			clusterBin = filepath.Join(filepath.Dir(binPath), "fakecluster")
			if out, err := exec.Command("go", "build", "-o", clusterBin, "./testdata/fakecluster").CombinedOutput(); err != nil {
				clusterNo = fmt.Sprintf("go build fakecluster: %v\n%s", err, out)
				return
			}
		}
		out, err := exec.Command(clusterBin, "--help").CombinedOutput()
		clusterHelp = string(out)
		switch {
		case err != nil && !strings.Contains(string(out), "--"):
			clusterNo = fmt.Sprintf("tallyd --help: %v", err)
		case !strings.Contains(string(out), "--cluster"):
			clusterNo = "tallyd --help names no --cluster flag: this build has no cluster mode (issue 13); the cluster tests run once it does"
		}
	})
	if clusterNo != "" && clusterFake {
		t.Fatal(clusterNo)
	}
	if clusterNo != "" {
		t.Skip(clusterNo)
	}
}

// ---------------------------------------------------------------------------------------
// Networks.

// clusterNet is the network of a test cluster: where each node listens and how the test
// cuts a node off from its peers. Slots number the nodes' places from 0.
type clusterNet interface {
	// clusterArg is node slot's --cluster value; ids[j] is the ID of slot j.
	clusterArg(slot int, ids []uint64) string
	// peerAddr is the peer address that slot's node binds (its --peer-addr).
	peerAddr(slot int) string
	// clientAddr is where the test dials slot's Redis-text (slock) port.
	clientAddr(slot int) string
	// bindArgs are slot's listener flags.
	bindArgs(slot int) []string
	// command runs bin with args as slot's process.
	command(slot int, bin string, args []string) *exec.Cmd
	// isolate cuts slot off from every peer (true) or restores its links (false).
	isolate(slot int, cut bool)
	name() string
}

// newClusterNet makes the network of n slots, removed when the test ends.
func newClusterNet(t *testing.T, n int) clusterNet {
	t.Helper()
	return newClusterNetOf(t, n, os.Getenv("TALLYD_CLUSTER_NET"))
}

// newClusterNetOf makes the network of n slots of the kind named (netns, proxy, or ""
// for netns where it can work and proxy elsewhere).
func newClusterNetOf(t *testing.T, n int, kind string) clusterNet {
	t.Helper()
	switch kind {
	case "proxy":
		return newProxyNet(t, n)
	case "netns":
		if why := netnsUsable(); why != "" {
			t.Fatalf("TALLYD_CLUSTER_NET=netns: %s", why)
		}
		return newNetnsNet(t, n)
	}
	if netnsUsable() == "" {
		return newNetnsNet(t, n)
	}
	return newProxyNet(t, n)
}

var (
	netnsOnce sync.Once
	netnsWhy  string
)

// netnsUsable tells why network namespaces cannot be used here ("" if they can): it
// needs root and an `ip` that can add one.
func netnsUsable() string {
	netnsOnce.Do(func() {
		if os.Geteuid() != 0 {
			netnsWhy = "not root"
			return
		}
		if _, err := exec.LookPath("ip"); err != nil {
			netnsWhy = "no ip command (iproute2): run scripts/ensure-iproute2.sh"
			return
		}
		sweepStale()
		// What newNetnsNet does, once: a namespace, a bridge, a veth into the namespace.
		probe := netTag() + "x"
		defer func() {
			_ = exec.Command("ip", "netns", "del", probe+"n").Run()
			_ = exec.Command("ip", "link", "del", probe+"b").Run()
			_ = exec.Command("ip", "link", "del", probe+"v").Run()
		}()
		for _, args := range [][]string{
			{"netns", "add", probe + "n"},
			{"link", "add", probe + "b", "type", "bridge"},
			{"link", "add", probe + "v", "type", "veth", "peer", "name", "peer0", "netns", probe + "n"},
			{"link", "set", probe + "v", "master", probe + "b", "up"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				netnsWhy = fmt.Sprintf("ip %s: %v: %s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	return netnsWhy
}

// Names of namespaces and interfaces: "tcl" + this process's PID in base 36 (5 digits) +
// 2 random base-36 digits + a role. Interface names stay within 15 bytes.
const netPrefix = "tcl"

func netTag() string {
	pid := strconv.FormatInt(int64(os.Getpid()), 36)
	if len(pid) < 5 {
		pid = strings.Repeat("0", 5-len(pid)) + pid
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	return netPrefix + pid + string(digits[rand.IntN(36)]) + string(digits[rand.IntN(36)])
}

// tagOwner is the PID that made a name of netTag, or 0 if it is not one.
func tagOwner(name string) int {
	if !strings.HasPrefix(name, netPrefix) || len(name) < len(netPrefix)+5 {
		return 0
	}
	pid, err := strconv.ParseInt(name[len(netPrefix):len(netPrefix)+5], 36, 64)
	if err != nil || pid <= 0 {
		return 0
	}
	return int(pid)
}

// sweepStale removes the namespaces, bridges and veths that an earlier test process left
// behind (killed before its cleanups ran): those of our prefix whose PID is gone.
func sweepStale() {
	stale := func(name string) bool {
		pid := tagOwner(name)
		if pid == 0 || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && stale(f[0]) {
				killNetnsProcs(f[0])
				_ = exec.Command("ip", "netns", "del", f[0]).Run()
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "7: tclxxxxxab@if6: <...": the name ends at '@' or ':'.
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name := strings.TrimSuffix(f[1], ":")
			if i := strings.IndexByte(name, '@'); i >= 0 {
				name = name[:i]
			}
			if stale(name) {
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
}

// killNetnsProcs kills every process left in a namespace.
func killNetnsProcs(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// netnsNet: a namespace per slot, with a peer and a client veth on two bridges.
type netnsNet struct {
	t            *testing.T
	tag          string
	peerNet      string // "10.A.B." of the peer bridge
	clientNet    string // "10.A.B+1." of the client bridge
	peerBridge   string
	clientBridge string
	mu           sync.Mutex
	cut          map[int]bool
}

func (n *netnsNet) name() string { return "netns" }

// ipCmd runs ip with args, failing the test on an error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// freeSubnets picks two adjacent /24s in 10.200.0.0/13 that no interface or route of this
// machine uses.
func freeSubnets(t *testing.T) (string, string) {
	t.Helper()
	addrs, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	used := string(addrs) + string(routes)
	for range 100 {
		a, b := 200+rand.IntN(8), 2*rand.IntN(127)
		p, c := fmt.Sprintf("10.%d.%d.", a, b), fmt.Sprintf("10.%d.%d.", a, b+1)
		if !strings.Contains(used, p) && !strings.Contains(used, c) {
			return p, c
		}
	}
	t.Fatal("no free pair of /24s in 10.200.0.0/13")
	return "", ""
}

func (n *netnsNet) ns(slot int) string       { return fmt.Sprintf("%sn%d", n.tag, slot) }
func (n *netnsNet) peerVeth(slot int) string { return fmt.Sprintf("%sp%d", n.tag, slot) }
func (n *netnsNet) cliVeth(slot int) string  { return fmt.Sprintf("%sc%d", n.tag, slot) }
func (n *netnsNet) peerIP(slot int) string   { return n.peerNet + strconv.Itoa(10+slot) }
func (n *netnsNet) clientIP(slot int) string { return n.clientNet + strconv.Itoa(10+slot) }

func newNetnsNet(t *testing.T, slots int) *netnsNet {
	t.Helper()
	n := &netnsNet{t: t, tag: netTag(), cut: map[int]bool{}}
	n.peerNet, n.clientNet = freeSubnets(t)
	n.peerBridge, n.clientBridge = n.tag+"bp", n.tag+"bc"
	t.Cleanup(func() { n.remove(slots) }) // before anything exists: a failure half-way is cleaned too
	ipCmd(t, "link", "add", n.peerBridge, "type", "bridge")
	ipCmd(t, "link", "set", n.peerBridge, "up")
	ipCmd(t, "link", "add", n.clientBridge, "type", "bridge")
	ipCmd(t, "addr", "add", n.clientNet+"1/24", "dev", n.clientBridge)
	ipCmd(t, "link", "set", n.clientBridge, "up")
	for s := range slots {
		ns := n.ns(s)
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
		for _, l := range []struct{ veth, inner, bridge, ip string }{
			{n.peerVeth(s), "peer0", n.peerBridge, n.peerIP(s)},
			{n.cliVeth(s), "cli0", n.clientBridge, n.clientIP(s)},
		} {
			ipCmd(t, "link", "add", l.veth, "type", "veth", "peer", "name", l.inner, "netns", ns)
			ipCmd(t, "link", "set", l.veth, "master", l.bridge, "up")
			ipCmd(t, "-n", ns, "addr", "add", l.ip+"/24", "dev", l.inner)
			ipCmd(t, "-n", ns, "link", "set", l.inner, "up")
		}
	}
	return n
}

// remove kills what still runs in the namespaces and deletes them, their veths and the
// bridges. It reports what it could not remove.
func (n *netnsNet) remove(slots int) {
	for s := range slots {
		killNetnsProcs(n.ns(s))
		_ = exec.Command("ip", "netns", "del", n.ns(s)).Run()
		_ = exec.Command("ip", "link", "del", n.peerVeth(s)).Run() // gone with the namespace, normally
		_ = exec.Command("ip", "link", "del", n.cliVeth(s)).Run()
	}
	_ = exec.Command("ip", "link", "del", n.peerBridge).Run()
	_ = exec.Command("ip", "link", "del", n.clientBridge).Run()
	if left := netLeftovers(n.tag); left != "" {
		n.t.Errorf("cluster network %s not removed: %s", n.tag, left)
	}
}

// netLeftovers lists the namespaces and links whose names start with tag.
func netLeftovers(tag string) string {
	var left []string
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], tag) {
				left = append(left, "netns "+f[0])
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], tag) {
				left = append(left, "link "+strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	return strings.Join(left, ", ")
}

func (n *netnsNet) clusterArg(_ int, ids []uint64) string {
	var parts []string
	for s, id := range ids {
		parts = append(parts, fmt.Sprintf("%d=%s:%d", id, n.peerIP(s), peerPort))
	}
	return strings.Join(parts, ",")
}

func (n *netnsNet) peerAddr(slot int) string {
	return net.JoinHostPort(n.peerIP(slot), strconv.Itoa(peerPort))
}

func (n *netnsNet) clientAddr(slot int) string {
	return net.JoinHostPort(n.clientIP(slot), strconv.Itoa(clientPort))
}

func (n *netnsNet) bindArgs(slot int) []string {
	a := []string{"--bind", n.clientIP(slot), "--slock-port", strconv.Itoa(clientPort)}
	// The peer listener binds --bind unless told otherwise (since issue 19); an older
	// binary bound its peer address whatever --bind said.
	if clusterHas("--peer-bind") {
		a = append(a, "--peer-bind", n.peerIP(slot))
	}
	// The test's clients come from the client bridge's address, not loopback: protected
	// mode (issue 20) would answer them DENIED, so the allow-list names their network.
	if clusterHas("--slock-allow") {
		a = append(a, "--slock-allow", n.clientNet+"0/24")
	}
	return a
}

func (n *netnsNet) command(slot int, bin string, args []string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.ns(slot), bin}, args...)...)
}

func (n *netnsNet) isolate(slot int, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	state := "up"
	if cut {
		state = "down"
	}
	ipCmd(n.t, "link", "set", n.peerVeth(slot), state)
	n.cut[slot] = cut
}

// proxyNet: every node on 127.0.0.1; node i reaches node j through links[i][j].
type proxyNet struct {
	peerPorts   []int // each slot's real peer port
	clientPorts []int
	links       [][]*faultLink
}

func (p *proxyNet) name() string { return "proxy" }

func newProxyNet(t *testing.T, slots int) *proxyNet {
	t.Helper()
	p := &proxyNet{links: make([][]*faultLink, slots)}
	for range slots {
		p.peerPorts = append(p.peerPorts, quietPort(t))
		p.clientPorts = append(p.clientPorts, quietPort(t))
	}
	for i := range slots {
		p.links[i] = make([]*faultLink, slots)
		for j := range slots {
			if i == j {
				continue
			}
			l, err := newFaultLink(p.peerAddr(j))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.close)
			p.links[i][j] = l
		}
	}
	return p
}

// quietPort is a port of 127.0.0.1 that was free a moment ago, below the kernel's
// ephemeral range: the proxies' listeners and every outbound connection take ports from
// that range, and a node restarted later must find its ports still free.
func quietPort(t *testing.T) int {
	t.Helper()
	return freePort(t)
}

func (p *proxyNet) clusterArg(slot int, ids []uint64) string {
	var parts []string
	for j, id := range ids {
		addr := p.peerAddr(j)
		if j != slot {
			addr = p.links[slot][j].addr()
		}
		parts = append(parts, fmt.Sprintf("%d=%s", id, addr))
	}
	return strings.Join(parts, ",")
}

func (p *proxyNet) peerAddr(slot int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.peerPorts[slot]))
}

func (p *proxyNet) clientAddr(slot int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.clientPorts[slot]))
}

func (p *proxyNet) bindArgs(slot int) []string {
	return []string{"--bind", "127.0.0.1", "--slock-port", strconv.Itoa(p.clientPorts[slot])}
}

func (p *proxyNet) command(_ int, bin string, args []string) *exec.Cmd {
	return exec.Command(bin, args...)
}

func (p *proxyNet) isolate(slot int, cut bool) {
	for j := range p.links {
		if j != slot {
			p.links[slot][j].setCut(cut)
			p.links[j][slot].setCut(cut)
		}
	}
}

// delay delays everything node from sends to node to by d from now on (0: none): the
// bytes from's link to to carries up, and those to's link to from carries back. Only
// the proxy network can: the kernels these tests run on may lack netem.
func (p *proxyNet) delay(from, to int, d time.Duration) {
	p.links[from][to].setDelay(dirUp, d)
	p.links[to][from].setDelay(dirDown, d)
}

// rampDelay raises the delay from node from to node to, in steps of at most 60 ms every
// 80 ms, until it is d: a delay set at once would leave a silence as long as itself, which
// a leader's check-quorum takes for a lost follower.
func (p *proxyNet) rampDelay(from, to int, d time.Duration) {
	for cur := time.Duration(0); cur < d; {
		cur = min(cur+60*time.Millisecond, d)
		p.delay(from, to, cur)
		time.Sleep(80 * time.Millisecond)
	}
}

// cutPair cuts (true) or restores (false) the links between nodes a and b only.
func (p *proxyNet) cutPair(a, b int, cut bool) {
	p.links[a][b].setCut(cut)
	p.links[b][a].setCut(cut)
}

// ---------------------------------------------------------------------------------------
// Nodes.

// tcluster is a running test cluster.
type tcluster struct {
	t        *testing.T
	timedOut atomic.Bool // the test's time bound passed: every node was killed
	mu       sync.Mutex  // guards the nodes' p against stopAll from a timer
	net      clusterNet
	ids      []uint64 // the initial voters, by slot
	nodes    []*tnode
	dir      string
	bin      string   // what the nodes run
	extra    []string // more flags for every node
	// slotArgs, when set, gives more flags for the node in one slot (its own ports, say).
	slotArgs func(slot int) []string
}

// tnode is the node in one slot.
type tnode struct {
	slot    int
	id      uint64
	dataDir string
	join    string // --join address, for a node that joined
	// initState is the --initial-cluster-state of its next start ("" for none: the
	// default, existing). newCluster starts every node with new, once; a restart passes
	// the usual flags, as the shipped unit does, unless the test sets it again.
	initState string
	p         *proc // nil while stopped
	logs      []*syncBuf
}

// newCluster starts n voters (IDs 1..n) and waits for a leader. It skips the test when
// the binary has no cluster mode, and stops every process when the test ends.
func newCluster(t *testing.T, n int, extra ...string) *tcluster {
	t.Helper()
	needCluster(t)
	return newClusterOn(t, newClusterNet(t, n), n, extra...)
}

// newProxyCluster is newCluster over the proxy network whatever the machine allows: for
// the faults only the proxy has (a delay or a cut of one direction of one pair's link:
// see proxyNet.delay and cutPair).
func newProxyCluster(t *testing.T, n int, extra ...string) (*tcluster, *proxyNet) {
	t.Helper()
	needCluster(t)
	pn := newProxyNet(t, n)
	return newClusterOn(t, pn, n, extra...), pn
}

// clusterKeyArgs writes a cluster key (48 random bytes, base64, mode 0600) into the test's
// directory and returns the flags that make every node's peer links prove it. A member
// whose links proved the key stops (exit 78) on a heartbeat that shows it lost its data;
// on links that did not it only drops the link.
func clusterKeyArgs(t *testing.T) []string {
	t.Helper()
	key := make([]byte, 48)
	for i := range key {
		key[i] = byte(rand.IntN(256))
	}
	path := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--cluster-key-file", path}
}

// newClusterOn starts n voters over the network given.
func newClusterOn(t *testing.T, cn clusterNet, n int, extra ...string) *tcluster {
	t.Helper()
	return newClusterSlots(t, cn, n, nil, extra...)
}

// newClusterSlots is newClusterOn with flags of each slot's own (slotArgs, may be nil).
func newClusterSlots(t *testing.T, cn clusterNet, n int, slotArgs func(slot int) []string, extra ...string) *tcluster {
	t.Helper()
	c := &tcluster{t: t, net: cn, dir: t.TempDir(), extra: extra, slotArgs: slotArgs}
	t.Logf("cluster of %d over %s", n, c.net.name())
	// The nodes run a link (or copy) of the binary named clnode in the test's directory:
	// no "tallyd" in their command lines, so that a `pkill tallyd` or `killall tallyd` run
	// by someone else on a shared machine leaves them be.
	c.bin = filepath.Join(c.dir, "clnode")
	if err := os.Link(clusterBin, c.bin); err != nil {
		b, err := os.ReadFile(clusterBin)
		if err == nil {
			err = os.WriteFile(c.bin, b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for s := range n {
		c.ids = append(c.ids, uint64(s+1))
		c.nodes = append(c.nodes, &tnode{slot: s, id: uint64(s + 1), dataDir: filepath.Join(c.dir, fmt.Sprintf("node%d", s)), initState: "new"})
	}
	t.Cleanup(c.stopAll)
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	for s := range n {
		c.start(s)
	}
	for s := range n {
		c.waitServing(s, 10*time.Second)
	}
	c.waitLeader(10*time.Second, nil)
	// Every member has heard from a leader before the test's faults begin. A member that
	// started empty and was never caught up votes only in the first election of a new
	// cluster (cluster/fresh.go; docs/cluster.md, "Lost disk"): a test that cut the leader
	// off from the last member to come up before the leader reached it, then took the
	// leader away, left the other two without a quorum (TestClusterDeposedLeader,
	// TestFencingCluster: the member started last never knew a leader, its peer link from
	// the leader being cut ~200 ms after the election). Waiting here is what an operator
	// does too: `tallyctl cluster status` shows every member applied.
	for s := range n {
		c.caughtUp(s, 10*time.Second)
	}
	return c
}

// args are the flags of slot's node as it is now (a joiner keeps joining).
func (c *tcluster) args(nd *tnode) []string {
	a := []string{
		"--node-id", strconv.FormatUint(nd.id, 10),
		"--data-dir", nd.dataDir,
		"--raft-tick", raftTick.String(),
		"--cluster-timeout", clusterTimeout.String(),
		"--appendfsync", "always",
		"--counter-port", "0", "--pool-port", "0",
	}
	a = append(a, c.net.bindArgs(nd.slot)...)
	a = append(a, c.extra...)
	// TALLYD_E2E_NODE_FLAGS adds flags to every node (e.g. "--log-level debug" while
	// chasing a failure: the logs are dumped when a test fails).
	a = append(a, strings.Fields(os.Getenv("TALLYD_E2E_NODE_FLAGS"))...)
	if c.slotArgs != nil {
		a = append(a, c.slotArgs(nd.slot)...)
	}
	if nd.join != "" {
		return append(a, "--join", nd.join, "--peer-addr", c.net.peerAddr(nd.slot))
	}
	// A binary older than issue 19 has no such flag: it bootstraps any empty data dir.
	if nd.initState != "" && hasInitialState() {
		a = append(a, "--initial-cluster-state", nd.initState)
	}
	return append(a, "--cluster", c.net.clusterArg(nd.slot, c.ids))
}

// start runs slot's node (with the data it has).
func (c *tcluster) start(slot int) {
	c.t.Helper()
	nd := c.nodes[slot]
	if nd.p != nil {
		c.t.Fatalf("node %d (slot %d) is already running", nd.id, slot)
	}
	if err := os.MkdirAll(nd.dataDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	cmd := c.net.command(slot, c.bin, c.args(nd))
	nd.initState = "" // once: a restart passes the usual flags
	// The node dies with the test process, whatever kills it. (Not startCmd: its cleanup
	// would kill the node before dumpLogs can ask it for its goroutines; stopAll does.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// On failure dumpLogs wants every goroutine's stack, a spinning one's too (crash: the
	// runtime stops each thread to print it, then aborts; any core file lands in the
	// test's temporary directory, the node's working directory).
	cmd.Env = append(os.Environ(), "GOTRACEBACK=crash", "FAKECLUSTER_DIR="+c.dir)
	cmd.Dir = c.dir
	p := &proc{cmd: cmd, log: &syncBuf{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start node %d: %v", nd.id, err)
	}
	go func() { p.done <- cmd.Wait() }()
	c.mu.Lock()
	nd.p = p
	c.mu.Unlock()
	nd.logs = append(nd.logs, p.log)
}

// kill kills slot's node with SIGKILL and waits for it to be gone.
func (c *tcluster) kill(slot int) { c.t.Helper(); c.end(slot, syscall.SIGKILL, 10*time.Second) }

// end sends slot's node sig, if it runs, and waits up to d for it to be gone.
func (c *tcluster) end(slot int, sig syscall.Signal, d time.Duration) {
	c.t.Helper()
	nd := c.nodes[slot]
	if nd.p == nil {
		return
	}
	_ = nd.p.cmd.Process.Signal(sig)
	select {
	case err := <-nd.p.done:
		nd.p.done <- err
	case <-time.After(d):
		c.t.Fatalf("node %d still runs %v after %v", nd.id, d, sig)
	}
	c.mu.Lock()
	nd.p = nil
	c.mu.Unlock()
}

// restart kills slot's node if it runs and starts it again with its data.
func (c *tcluster) restart(slot int) {
	c.t.Helper()
	c.kill(slot)
	c.start(slot)
}

// wipeJoin kills slot's node, removes its data, and starts it empty as node id, joining
// through the peer address of slot via.
func (c *tcluster) wipeJoin(slot int, id uint64, via int) {
	c.t.Helper()
	c.kill(slot)
	nd := c.nodes[slot]
	if err := os.RemoveAll(nd.dataDir); err != nil {
		c.t.Fatal(err)
	}
	nd.id, nd.join = id, c.net.peerAddr(via)
	c.start(slot)
}

// bound gives the test at most d: then every node is killed, so that whatever waits on
// them ends, and check fails the test.
func (c *tcluster) bound(d time.Duration) {
	tm := time.AfterFunc(d, func() {
		c.timedOut.Store(true)
		c.stopAll()
	})
	c.t.Cleanup(func() { tm.Stop() })
}

// check fails the test if its time bound has passed.
func (c *tcluster) check() {
	c.t.Helper()
	if c.timedOut.Load() {
		c.t.Fatal("the test ran past its time bound; every node was killed")
	}
}

// stopAll kills every node and, unless called from the time bound's timer, waits for
// them to be gone.
func (c *tcluster) stopAll() {
	c.mu.Lock()
	var running []*proc
	for _, nd := range c.nodes {
		if nd.p != nil {
			_ = nd.p.cmd.Process.Signal(syscall.SIGKILL)
			running = append(running, nd.p)
		}
	}
	c.mu.Unlock()
	if c.timedOut.Load() {
		return
	}
	for _, p := range running {
		err := <-p.done
		p.done <- err
	}
}

// dumpLogs asks every node still running for its goroutines (SIGQUIT: Go prints them
// and exits), writes every node's whole output (every run of it) to files that outlive
// the test, and logs where, with the head and tail of each.
func (c *tcluster) dumpLogs() {
	c.mu.Lock()
	var running []*proc
	for _, nd := range c.nodes {
		if nd.p != nil {
			_ = nd.p.cmd.Process.Signal(syscall.SIGQUIT)
			running = append(running, nd.p)
		}
	}
	c.mu.Unlock()
	for _, p := range running {
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(3 * time.Second):
		}
	}
	dir, err := os.MkdirTemp("", "tallyd-cluster-logs-")
	if err != nil {
		c.t.Logf("no directory for the nodes' logs: %v", err)
	}
	for _, nd := range c.nodes {
		for i, l := range nd.logs {
			s := l.String()
			if dir != "" {
				_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d-run%d.log", nd.id, i+1)), []byte(s), 0o644)
			}
			if len(s) > 12000 {
				s = s[:4000] + "\n...\n" + s[len(s)-8000:]
			}
			c.t.Logf("node %d (slot %d) run %d log:\n%s", nd.id, nd.slot, i+1, s)
		}
	}
	if dir != "" {
		c.t.Logf("every node's whole log (with its goroutines if it was still running): %s", dir)
	}
}

func (c *tcluster) isolate(slot int) { c.net.isolate(slot, true) }
func (c *tcluster) heal(slot int)    { c.net.isolate(slot, false) }

// client is a new connection to slot's Redis-text port (dialled on first use).
func (c *tcluster) client(slot int) *cclient {
	k := &cclient{addr: c.net.clientAddr(slot)}
	c.t.Cleanup(k.close)
	return k
}

// waitServing waits until slot's node answers PING.
func (c *tcluster) waitServing(slot int, d time.Duration) {
	c.t.Helper()
	k := &cclient{addr: c.net.clientAddr(slot)}
	defer k.close()
	var got string
	var err error
	var exited bool
	if !waitUntil(time.Now().Add(d), 20*time.Millisecond, func() bool {
		if p := c.nodes[slot].p; p != nil {
			if exited, err = p.exited(); exited {
				return true
			}
		}
		got, err = k.do(time.Second, "PING")
		return err == nil && got == "+PONG"
	}) || exited {
		if exited {
			c.t.Fatalf("node %d (slot %d) exited: %v", c.nodes[slot].id, slot, err)
		}
		c.t.Fatalf("node %d (slot %d) does not answer PING after %v: %q, %v", c.nodes[slot].id, slot, d, got, err)
	}
}

// info is slot's INFO cluster as fields, or an error if it could not be had.
func (c *tcluster) info(slot int) (map[string]string, error) { return c.infoAt(slot, "") }

// infoOne is slot's INFO cluster read at consistency ONE: what the node itself believes
// (its role, its term), without asking the cluster.
func (c *tcluster) infoOne(slot int) (map[string]string, error) { return c.infoAt(slot, "ONE") }

// infoAt is INFO cluster on a connection at consistency level ("": the default).
func (c *tcluster) infoAt(slot int, level string) (map[string]string, error) {
	k := &cclient{addr: c.net.clientAddr(slot)}
	defer k.close()
	if level != "" {
		if got, err := k.setup(time.Second, "CONSISTENCY", level); err != nil || got != "+OK" {
			return nil, fmt.Errorf("CONSISTENCY %s: %q %v", level, got, err)
		}
	}
	got, err := k.do(time.Second, "INFO", "cluster")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(got, "$") {
		return nil, fmt.Errorf("INFO cluster: %q", got)
	}
	return parseInfo(got[1:]), nil
}

// parseInfo splits INFO text into its "name:value" fields.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// isVoter tells whether a peer_N field of INFO cluster says voter (voter=1; voter=true
// accepted too).
func isVoter(peer string) bool {
	for _, f := range strings.Split(peer, ",") {
		if f == "voter=1" || f == "voter=true" {
			return true
		}
	}
	return false
}

// slotOf is the slot of the running node with ID id, or -1.
func (c *tcluster) slotOf(id uint64) int {
	for s, nd := range c.nodes {
		if nd.id == id && nd.p != nil {
			return s
		}
	}
	return -1
}

// leader is the slot of the node among the running ones in slots (all if nil) that says
// it is the leader, and whose leadership the others that name a leader agree with; -1 if
// none.
func (c *tcluster) leader(slots []int) int {
	if slots == nil {
		for s := range c.nodes {
			slots = append(slots, s)
		}
	}
	lead, term := -1, -1
	for _, s := range slots {
		if c.nodes[s].p == nil {
			continue
		}
		m, err := c.info(s)
		if err != nil || m["role"] != "leader" {
			continue
		}
		if tm, _ := strconv.Atoi(m["term"]); tm > term {
			lead, term = s, tm
		}
	}
	return lead
}

// waitLeader waits for a leader among slots (all if nil) and returns its slot.
func (c *tcluster) waitLeader(d time.Duration, slots []int) int {
	c.t.Helper()
	lead := -1
	if !waitUntil(time.Now().Add(d), 10*time.Millisecond, func() bool {
		lead = c.leader(slots)
		return lead >= 0
	}) {
		c.t.Fatalf("no leader among slots %v within %v; INFO cluster:\n%s", slots, d, c.infos())
	}
	return lead
}

// infos is every running node's INFO cluster, for failure messages.
func (c *tcluster) infos() string {
	var b strings.Builder
	for s, nd := range c.nodes {
		if nd.p == nil {
			fmt.Fprintf(&b, "slot %d (node %d): stopped\n", s, nd.id)
			continue
		}
		m, err := c.info(s)
		if err != nil {
			fmt.Fprintf(&b, "slot %d (node %d): %v\n", s, nd.id, err)
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "slot %d (node %d):", s, nd.id)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, m[k])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// others is every slot but the ones given.
func (c *tcluster) others(not ...int) []int {
	var out []int
	for s := range c.nodes {
		skip := false
		for _, n := range not {
			skip = skip || s == n
		}
		if !skip {
			out = append(out, s)
		}
	}
	return out
}

// ---------------------------------------------------------------------------------------
// A Redis-text client that survives its server: it redials after any failure.

// errNotSent says a request was never sent (no connection): its outcome is known, nothing.
var errNotSent = errors.New("not sent")

type cclient struct {
	addr string
	c    net.Conn
	br   *bufio.Reader
	// pre are commands replayed on every new connection (CONSISTENCY ...).
	pre [][]string
}

func (k *cclient) close() {
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// setup makes every later connection run args first (and runs it now).
func (k *cclient) setup(timeout time.Duration, args ...string) (string, error) {
	k.pre = append(k.pre, args)
	k.close()
	return k.do(timeout, args...)
}

// dial connects and replays the setup commands.
func (k *cclient) dial(timeout time.Duration) error {
	c, err := net.DialTimeout("tcp", k.addr, min(timeout, time.Second))
	if err != nil {
		return fmt.Errorf("%w: %v", errNotSent, err)
	}
	k.c, k.br = c, bufio.NewReader(c)
	for _, p := range k.pre {
		got, err := k.roundTrip(timeout, p)
		if err != nil || got != "+OK" {
			k.close()
			return fmt.Errorf("%w: %s on a new connection: %q %v", errNotSent, strings.Join(p, " "), got, err)
		}
	}
	return nil
}

// do sends one command and returns its reply as text ("+OK", ":5", "$v", "$-1",
// "-CLUSTERDOWN ..."); an error if none came within timeout (errNotSent if it was not
// even sent). After an error the connection is dropped and the next call redials.
func (k *cclient) do(timeout time.Duration, args ...string) (string, error) {
	if k.c == nil {
		if err := k.dial(timeout); err != nil {
			return "", err
		}
	}
	got, err := k.roundTrip(timeout, args)
	if err != nil {
		k.close()
	}
	return got, err
}

func (k *cclient) roundTrip(timeout time.Duration, args []string) (string, error) {
	_ = k.c.SetDeadline(time.Now().Add(timeout))
	if _, err := k.c.Write(resp.AppendCommand(nil, args...)); err != nil {
		return "", err
	}
	return readReplyText(k.br)
}

// intReply is the integer of ":N" or "$N", the value of a counter ("$-1": 0).
func intReply(s string) (int64, bool) {
	if s == "$-1" {
		return 0, true
	}
	if len(s) < 2 || s[0] != ':' && s[0] != '$' {
		return 0, false
	}
	v, err := strconv.ParseInt(s[1:], 10, 64)
	return v, err == nil
}
