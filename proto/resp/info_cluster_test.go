package resp

import "testing"

func TestAppendInfoCluster(t *testing.T) {
	if got := string(AppendInfoCluster(nil, nil)); got != "# Cluster\r\ncluster_enabled:0\r\n" {
		t.Fatalf("single node: %q", got)
	}
	c := &InfoCluster{NodeID: 2, Role: "follower", LeaderID: 1, Term: 3, Commit: 1042, Applied: 1041,
		SnapshotIndex: 1000, PeerAuth: "none", PeerAuthWarning: "unauthenticated", LogBytes: 4096, LogBatches: 7, LogFsyncs: 8, LogAppends: 9, LastFsyncUS: 640,
		Peers: []InfoPeer{{1, "10.0.0.1:7000", true, -1, "up"}, {2, "10.0.0.2:7000", true, -1, "self"},
			{4, "10.0.0.4:7000", false, 1040, "down"}}}
	want := "# Cluster\r\ncluster_enabled:1\r\nnode_id:2\r\nrole:follower\r\nleader_id:1\r\nterm:3\r\n" +
		"commit_index:1042\r\napplied_index:1041\r\nsnapshot_index:1000\r\nleader_ready:false\r\n" +
		"peer_auth:none\r\npeer_auth_warning:unauthenticated\r\n" +
		"raft_log_bytes:4096\r\nraft_log_batches:7\r\nraft_log_fsyncs:8\r\nraft_log_appends:9\r\n" +
		"raft_log_last_fsync_us:640\r\nraft_log_failing:\r\n" +
		"peer_1:addr=10.0.0.1:7000,voter=true,match_index=-1,link=up\r\n" +
		"peer_2:addr=10.0.0.2:7000,voter=true,match_index=-1,link=self\r\n" +
		"peer_4:addr=10.0.0.4:7000,voter=false,match_index=1040,link=down\r\n"
	if got := string(AppendInfoCluster(nil, c)); got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
