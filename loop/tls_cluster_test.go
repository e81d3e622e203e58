package loop

// Peer TLS, over real sockets on 127.0.0.1: three members in this process whose links go
// through the TLS bridge (certificates required both ways) elect a leader and replicate; a
// member whose certificate another CA signed is refused, and each side says so.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/internal/testcert"
	"github.com/tallyd/tallyd/tlsbridge"
)

// tlsMember is one member of a test cluster.
type tlsMember struct {
	s         *Server
	log       *logBuf
	slockAddr string
	peerAddr  string
}

// freePorts returns n ports of 127.0.0.1 nothing listened on a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return ports
}

// memberFiles are member id's peer certificate, from ca, and ca's certificate.
func memberFiles(t *testing.T, ca *testcert.CA, id uint64) testcert.Files {
	return ca.WriteFiles(t, t.TempDir(), "peer", fmt.Sprintf("member-%d", id), "127.0.0.1")
}

// startTLSMember runs member id with peer TLS from files f; peers are the initial voters
// (nil with join: it joins through that address).
func startTLSMember(t *testing.T, id uint64, peerAddr string, peers map[uint64]string, join string, f testcert.Files, key ...byte) *tlsMember {
	t.Helper()
	dir := t.TempDir()
	server, client, err := tlsbridge.PeerConfigs(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	m := &tlsMember{log: &logBuf{}, peerAddr: peerAddr}
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}, {Proto: ProtoPeer, Addr: peerAddr, TLS: true}}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Cluster = &ClusterConfig{NodeID: id, Peers: peers, Join: join, PeerAddr: peerAddr,
		Tick: 20 * time.Millisecond, Timeout: 5 * time.Second, SnapshotEntries: 1000, New: join == "", Key: key}
	cfg.TLS.PeerServer, cfg.TLS.PeerClient = server, client
	cfg.TLS.HandshakeTimeout = 2 * time.Second
	cfg.Log = zerolog.New(m.log).Level(zerolog.InfoLevel)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.s = s
	errc := make(chan error, 1)
	go func() { errc <- s.Run() }()
	<-s.Ready()
	select {
	case err := <-errc:
		t.Fatalf("member %d: Run: %v\n%s", id, err, m.log.String())
	default:
	}
	m.slockAddr = s.Addr(0).String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("member %d: Stop: %v", id, err)
		}
		if err := <-errc; err != nil {
			t.Errorf("member %d: Run returned %v after Stop", id, err)
		}
		if t.Failed() {
			t.Logf("member %d's log:\n%s", id, m.log.String())
		}
	})
	return m
}

// info is member m's INFO cluster, as fields.
func (m *tlsMember) info(t *testing.T) map[string]string {
	t.Helper()
	rc := dialResp(t, m.slockAddr)
	defer rc.c.Close()
	r := rc.cmd("INFO", "cluster")
	out := map[string]string{}
	for _, l := range strings.Split(string(r.Str), "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// waitLeader waits until every member names the same leader, and returns its index.
func waitLeader(t *testing.T, ms []*tlsMember) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lead := ""
		agree := true
		for _, m := range ms {
			in := m.info(t)
			if in["leader_id"] == "" || in["leader_id"] == "0" || (lead != "" && in["leader_id"] != lead) {
				agree = false
				break
			}
			lead = in["leader_id"]
		}
		if agree {
			id, _ := strconv.ParseUint(lead, 10, 64)
			for i, m := range ms {
				if m.s.cfg.Cluster.NodeID == id && m.info(t)["leader_ready"] == "true" {
					return i
				}
			}
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, m := range ms {
				fmt.Fprintf(&b, "%v\n", m.info(t))
			}
			t.Fatalf("no leader agreed on:\n%s", b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTLSPeerCluster(t *testing.T) {
	t.Run("tls", func(t *testing.T) { testTLSPeerCluster(t, nil, "tls") })
	// With the cluster key too: its challenge runs inside TLS.
	t.Run("key+tls", func(t *testing.T) { testTLSPeerCluster(t, []byte(strings.Repeat("k", 32)), "key+tls") })
}

func testTLSPeerCluster(t *testing.T, key []byte, auth string) {
	ca := testcert.NewCA(t, "cluster CA")
	ports := freePorts(t, 3)
	peers := map[uint64]string{}
	for i, p := range ports {
		peers[uint64(i+1)] = "127.0.0.1:" + strconv.Itoa(p)
	}
	var ms []*tlsMember
	for i := range ports {
		ms = append(ms, startTLSMember(t, uint64(i+1), peers[uint64(i+1)], peers, "", memberFiles(t, ca, uint64(i+1)), key...))
	}
	li := waitLeader(t, ms)
	for _, m := range ms {
		in := m.info(t)
		if in["peer_auth"] != auth || in["peer_auth_warning"] != "" {
			t.Errorf("member %s: peer_auth %q, warning %q", in["node_id"], in["peer_auth"], in["peer_auth_warning"])
		}
		deadline := time.Now().Add(10 * time.Second)
		for id := uint64(1); id <= 3; id++ {
			for link := in[fmt.Sprintf("peer_%d", id)]; !strings.Contains(link, "link=up") && !strings.Contains(link, "link=self"); {
				if time.Now().After(deadline) {
					t.Fatalf("member %s: peer %d %q", in["node_id"], id, link)
				}
				time.Sleep(20 * time.Millisecond)
				in = m.info(t)
				link = in[fmt.Sprintf("peer_%d", id)]
			}
		}
	}
	// A write on the leader is replicated: every member reads it from its own store.
	lead := dialResp(t, ms[li].slockAddr)
	expectSimple(t, lead.cmd("CONSISTENCY", "QUORUM"), '+', "OK")
	expectSimple(t, lead.cmd("SET", "replicated", "over peer TLS"), '+', "OK")
	for i, m := range ms {
		rc := dialResp(t, m.slockAddr)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := rc.cmd("GET", "replicated")
			if r.Kind == '$' && string(r.Str) == "over peer TLS" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d reads %s", i+1, showResp(r))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// A write through a follower is forwarded to the leader on a TLS link.
	fi := (li + 1) % 3
	fol := dialResp(t, ms[fi].slockAddr)
	expectSimple(t, fol.cmd("CONSISTENCY", "QUORUM"), '+', "OK")
	expectSimple(t, fol.cmd("SET", "forwarded", "through a follower"), '+', "OK")
	expectSimple(t, lead.cmd("GET", "forwarded"), '$', "through a follower")

	// Neither a plaintext stranger nor a TLS client without a certificate gets a frame in.
	if c, err := tls.Dial("tcp", ms[li].peerAddr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"}); err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("anything"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a peer link without a client certificate was answered")
		}
		_ = c.Close()
	}
	ms[li].log.waitFor(t, "TLS handshake failed")

	// Every member's bridged links count their descriptors.
	for i, m := range ms {
		if used := m.s.ct.fds.Used(); used < 2*tlsbridge.Descriptors {
			t.Errorf("member %d: %d descriptors taken by its links, want at least %d", i+1, used, 2*tlsbridge.Descriptors)
		}
	}
}

// A member whose certificate another CA signed is refused by the cluster: it never joins,
// and the member it dials says why. The other CA takes the cluster CA's very name, so that
// the intruder's TLS client offers its certificate (Go's sends only one whose issuer the
// server names) and the server must check the signature. A member that trusts only its own
// CA refuses the cluster's certificate itself, and says so.
func TestTLSPeerOtherCA(t *testing.T) {
	ca := testcert.NewCA(t, "cluster CA")
	ports := freePorts(t, 3)
	peers := map[uint64]string{1: "127.0.0.1:" + strconv.Itoa(ports[0])}
	m1 := startTLSMember(t, 1, peers[1], peers, "", memberFiles(t, ca, 1))
	waitLeader(t, []*tlsMember{m1})
	impostor := testcert.NewCA(t, "cluster CA")
	f := memberFiles(t, impostor, 4)
	if err := os.WriteFile(f.CA, append(append([]byte(nil), impostor.PEM...), ca.PEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	startTLSMember(t, 4, "127.0.0.1:"+strconv.Itoa(ports[1]), nil, peers[1], f)
	m1.log.waitFor(t, "certificate signed by unknown authority")
	// It goes on trying, and is refused every time.
	deadline := time.Now().Add(10 * time.Second)
	for m1.s.tb.peer.Stats().HandshakeFailed < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the intruder's link failed only %d times", m1.s.tb.peer.Stats().HandshakeFailed)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// One that trusts only its own CA refuses the cluster's certificate, and says so.
	other := testcert.NewCA(t, "another CA")
	lone := startTLSMember(t, 5, "127.0.0.1:"+strconv.Itoa(ports[2]), nil, peers[1], memberFiles(t, other, 5))
	lone.log.waitFor(t, "TLS: dialling a peer failed")
	if !strings.Contains(lone.log.String(), "certificate signed by unknown authority") {
		t.Errorf("the dialling member does not say why:\n%s", lone.log.String())
	}

	if st := m1.s.tb.peer.Stats(); st.Bridged != 0 {
		t.Errorf("member 1 let %d TLS links through", st.Bridged)
	}
	in := m1.info(t)
	for _, id := range []string{"peer_4", "peer_5"} {
		if _, ok := in[id]; ok {
			t.Fatalf("an intruder became a member: %v", in)
		}
	}
}
