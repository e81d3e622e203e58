package loop

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/proto/peer"
)

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startMember runs a one-member cluster (it elects itself) with a slock port and its peer
// port; key is the cluster key (nil: links are not authenticated).
func startMember(t *testing.T, key []byte) (ts *testServer, peerAddr string) {
	t.Helper()
	peerAddr = freeAddr(t)
	ts = startSlock(t, func(c *Config) {
		c.DataDir = t.TempDir()
		c.Cluster = &ClusterConfig{NodeID: 1, Peers: map[uint64]string{1: peerAddr}, PeerAddr: peerAddr,
			Tick: 10 * time.Millisecond, Timeout: time.Second, New: true, Key: key}
		c.Listeners = append(c.Listeners, Listener{Proto: ProtoPeer, Addr: peerAddr})
	})
	rc := dialResp(t, ts.slockAddr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r := rc.cmd("SET", "ready", "1"); r.Kind == '+' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the member never led")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ts, peerAddr
}

// closedSoon reads from c until it is closed (true) or 3 s pass; it returns what it read.
func closedSoon(c net.Conn) (bool, []byte) {
	var got []byte
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF || err != nil && strings.Contains(err.Error(), "reset") {
			return true, got
		}
		if err != nil {
			return false, got
		}
	}
}

// strangerFrames are what a stranger on the peer port tried (issue 20): a Forward that sets
// a key, a Join that adds a learner, and a forged heartbeat from a member id.
func strangerFrames(t *testing.T) map[string][]byte {
	hb, err := proto.Marshal(&raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), To: new(uint64(1)),
		From: new(uint64(1)), Term: new(uint64(99)), Commit: new(uint64(1 << 40))})
	if err != nil {
		t.Fatal(err)
	}
	hello := peer.AppendHello(nil, 2, 0, "127.0.0.1:9")
	return map[string][]byte{
		"forward": peer.AppendForward(append([]byte(nil), hello...), 1, 7, peer.KindText, peer.LevelOne, 0, 0, 0,
			[]byte("*3\r\n$3\r\nSET\r\n$5\r\npwned\r\n$1\r\n1\r\n")),
		"join":      peer.AppendJoin(append([]byte(nil), hello...), 4242, "127.0.0.1:9"),
		"heartbeat": peer.AppendRaft(append([]byte(nil), hello...), hb),
		"too large": append(append([]byte(nil), hello...), 0x04, 0, 0, 1, byte(peer.TypeRaft)), // 64 MiB claimed
		"partial":   append(peer.AppendHeader(append([]byte(nil), hello...), peer.TypeRaft, 1<<20), make([]byte, 8192)...),
	}
}

// TestPeerStrangerRefused: with a cluster key, a stranger's frames on the peer port are not
// acted on — its link is closed — and the member goes on serving.
func TestPeerStrangerRefused(t *testing.T) {
	ts, peerAddr := startMember(t, []byte(strings.Repeat("k", 40)))
	for name, b := range strangerFrames(t) {
		c, err := net.Dial("tcp", peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(b)
		closed, got := closedSoon(c)
		c.Close()
		if !closed {
			t.Errorf("%s: the stranger's link stayed open", name)
		}
		for len(got) > 0 {
			f, n, err := peer.Parse(got)
			if err != nil || n == 0 {
				t.Errorf("%s: the stranger got bytes that are not whole frames: %q", name, got)
				break
			}
			if f.Type != peer.TypeChallenge {
				t.Errorf("%s: the stranger got an answer: a %v frame", name, f.Type)
			}
			got = got[n:]
		}
	}
	rc := dialResp(t, ts.slockAddr)
	if r := rc.cmd("GET", "pwned"); r.Kind != '$' || !r.Null {
		t.Fatalf("a stranger's Forward set a key: GET pwned = %s", showResp(r))
	}
	info := string(rc.cmd("INFO", "cluster").Str)
	if strings.Contains(info, "peer_4242") {
		t.Fatalf("a stranger's Join made it a member:\n%s", info)
	}
	if !strings.Contains(info, "peer_auth:key") || strings.Contains(info, "peer_auth_warning") {
		t.Fatalf("INFO cluster does not say the links are authenticated by the key:\n%s", info)
	}
	if r := rc.cmd("INCR", "still"); r.Kind != ':' || r.Int != 1 {
		t.Fatalf("the member stopped serving: INCR = %s", showResp(r))
	}
	if !strings.Contains(ts.log.String(), "peer link refused") {
		t.Fatal("the refusals were not logged")
	}
}

// TestPeerUnauthenticatedWarned: without a key the member says so, at start and in INFO, and
// still no frame takes it down: a forged heartbeat whose commit is past its log only drops
// the link (a Go panic before issue 19/20).
func TestPeerUnauthenticatedWarned(t *testing.T) {
	ts, peerAddr := startMember(t, nil)
	c, err := net.Dial("tcp", peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(strangerFrames(t)["heartbeat"])
	if closed, _ := closedSoon(c); !closed {
		t.Fatal("the link of a forged heartbeat stayed open")
	}
	rc := dialResp(t, ts.slockAddr)
	info := string(rc.cmd("INFO", "cluster").Str)
	if !strings.Contains(info, "peer_auth:none") || !strings.Contains(info, "peer_auth_warning:PEER LINKS ARE NOT AUTHENTICATED") {
		t.Fatalf("INFO cluster gives no warning:\n%s", info)
	}
	if !strings.Contains(ts.log.String(), "PEER LINKS ARE NOT AUTHENTICATED") {
		t.Fatal("no warning at start")
	}
	if r := rc.cmd("INCR", "alive"); r.Kind != ':' {
		t.Fatalf("the member stopped serving after a forged heartbeat: %s", showResp(r))
	}
	// A member id that is not in the configuration is dropped too.
	c2, err := net.Dial("tcp", peerAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	hb, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), To: new(uint64(1)),
		From: new(uint64(99)), Term: new(uint64(99)), Commit: new(uint64(1 << 40))})
	_, _ = c2.Write(peer.AppendRaft(peer.AppendHello(nil, 99, 0, "127.0.0.1:9"), hb))
	if closed, _ := closedSoon(c2); !closed {
		t.Fatal("the link of a non-member's heartbeat stayed open")
	}
	if r := rc.cmd("INCR", "alive"); r.Kind != ':' || r.Int != 2 {
		t.Fatalf("after a heartbeat from a non-member: %s", showResp(r))
	}
	if !strings.Contains(ts.log.String(), "raft message dropped") {
		t.Fatal("the dropped messages were not logged")
	}
}

// TestPeerKeyedMembersReplicate: two members with the same key form a cluster; one with
// another key is refused.
func TestPeerKeyedMembersReplicate(t *testing.T) {
	key := []byte(strings.Repeat("s", 40))
	a, b := freeAddr(t), freeAddr(t)
	peers := map[uint64]string{1: a, 2: b}
	start := func(id uint64, addr string, k []byte) *testServer {
		return startSlock(t, func(c *Config) {
			c.DataDir = t.TempDir()
			c.Cluster = &ClusterConfig{NodeID: id, Peers: peers, PeerAddr: addr, Tick: 10 * time.Millisecond,
				Timeout: time.Second, New: true, Key: k}
			c.Listeners = append(c.Listeners, Listener{Proto: ProtoPeer, Addr: addr})
		})
	}
	m1, m2 := start(1, a, key), start(2, b, key)
	r1, r2 := dialResp(t, m1.slockAddr), dialResp(t, m2.slockAddr)
	deadline := time.Now().Add(10 * time.Second)
	for r := r1.cmd("INCR", "n"); r.Kind != ':'; r = r1.cmd("INCR", "n") {
		if time.Now().After(deadline) {
			t.Fatalf("no leader with the key: %s\n%s", showResp(r), m1.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := r2.cmd("GET", "n"); string(r.Str) != "1" {
		t.Fatalf("GET n through the other member = %s", showResp(r))
	}
}
