package stats

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// /readyz answers from the newest snapshot: 200 "ready", or 503 with the snapshot's reason,
// or with "snapshot stale" when the loop has stopped publishing.
func TestReadyz(t *testing.T) {
	var p Publisher
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Second})
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "snapshot stale: ") {
		t.Fatalf("before any snapshot: %d %q", code, body)
	}
	p.Publish(&Snapshot{At: time.Now()})
	if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("ready: %d %q", code, body)
	}
	p.Publish(&Snapshot{At: time.Now(), Unready: "no quorum: 1 of 3 voters reachable"})
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || body != "no quorum: 1 of 3 voters reachable\n" {
		t.Fatalf("unready: %d %q", code, body)
	}
	if code, body := get(t, h, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while unready (the loop answers): %d %q", code, body)
	}
	p.Publish(&Snapshot{At: time.Now().Add(-2 * time.Second)})
	code, body := get(t, h, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "snapshot stale: ") || strings.Count(body, "\n") != 1 {
		t.Fatalf("stale: %d %q", code, body)
	}
}

// healthMetrics are the metrics of readiness, the logs and the cluster, with their type.
var healthMetrics = map[string]string{
	"tallyd_ready": "gauge", "tallyd_log_bytes": "gauge", "tallyd_log_fsync_seconds": "histogram",
	"tallyd_log_write_errors_total": "counter", "tallyd_held_replies": "gauge", "tallyd_raft_role": "gauge",
	"tallyd_raft_term": "gauge", "tallyd_raft_commit_index": "gauge", "tallyd_raft_applied_index": "gauge",
	"tallyd_raft_snapshot_index": "gauge", "tallyd_raft_leader_changes_total": "counter",
	"tallyd_raft_proposals_in_flight": "gauge", "tallyd_raft_proposal_commit_seconds": "histogram",
	"tallyd_raft_peer_match_index": "gauge", "tallyd_raft_peer_link_up": "gauge", "tallyd_clusterdown_total": "counter",
}

// Every metric of a cluster member's snapshot is exported with HELP, TYPE and its values.
func TestHealthMetricsExported(t *testing.T) {
	var p Publisher
	fsync := Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{3, 1, 0}, Count: 4, Sum: 0.012}
	p.Publish(&Snapshot{At: time.Now(), Unready: "no leader",
		Logs: []Log{{Name: "raft", Bytes: 4096, Fsync: fsync, WriteErrors: 2}},
		Held: []LevelCount{{"ONE", 0}, {"QUORUM", 5}, {"ALL", 1}},
		Raft: &Raft{Role: "leader", Term: 7, Commit: 1042, Applied: 1041, SnapshotIndex: 1000, LeaderChanges: 3,
			InFlight: 2, ProposalCommit: fsync, Peers: []Peer{{ID: 2, Match: 1040, Up: true}, {ID: 3, Match: -1}},
			ClusterDown: []ReasonCount{{"no_leader", 4}, {"no_quorum", 0}}}})
	h := serveHTTP(t, &p, HTTPConfig{})
	_, body := get(t, h, "/metrics")
	for name, typ := range healthMetrics {
		for _, want := range []string{"# HELP " + name + " ", "# TYPE " + name + " " + typ + "\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
	for _, line := range []string{
		"tallyd_ready 0\n", `tallyd_log_bytes{log="raft"} 4096`, `tallyd_log_fsync_seconds_count{log="raft"} 4`,
		`tallyd_log_fsync_seconds_bucket{log="raft",le="0.001"} 3`, `tallyd_log_write_errors_total{log="raft"} 2`,
		`tallyd_held_replies{level="QUORUM"} 5`, `tallyd_raft_role{role="leader"} 1`, `tallyd_raft_role{role="follower"} 0`,
		"tallyd_raft_term 7\n", "tallyd_raft_commit_index 1042\n", "tallyd_raft_applied_index 1041\n",
		"tallyd_raft_snapshot_index 1000\n", "tallyd_raft_leader_changes_total 3\n", "tallyd_raft_proposals_in_flight 2\n",
		"tallyd_raft_proposal_commit_seconds_count 4\n", `tallyd_raft_peer_match_index{peer="2"} 1040`,
		`tallyd_raft_peer_link_up{peer="2"} 1`, `tallyd_raft_peer_link_up{peer="3"} 0`,
		`tallyd_clusterdown_total{reason="no_leader"} 4`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if strings.Contains(body, `tallyd_raft_peer_match_index{peer="3"}`) {
		t.Error("a match index not known here is exported")
	}

	// A single node: no raft metrics at all.
	p.Publish(&Snapshot{At: time.Now()})
	_, body = get(t, h, "/metrics")
	if strings.Contains(body, "tallyd_raft_") || !strings.Contains(body, "tallyd_ready 1\n") {
		t.Errorf("a single node's /metrics:\n%s", body)
	}
}
