package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The raft and log metrics as a live three-member cluster publishes them: one leader, the
// same term everywhere, commit and applied indexes that cover the writes, the leader's view
// of each peer (match index, link up), the proposal-to-commit and raft fsync histograms
// counting, and /readyz 200 on every member; then, with a follower stopped, the leader's
// link to it shows down while /readyz stays 200 (two of three still make a quorum).
func TestClusterMetricsLive(t *testing.T) {
	c, _ := newProxyCluster(t, 3, "--metrics-addr", "127.0.0.1:0")
	lead := c.leader(nil)
	const writes = 50
	k := c.client(lead)
	for i := range writes {
		if got, err := k.do(5*time.Second, "SET", fmt.Sprintf("m%d", i), "v"); err != nil || got != "+OK" {
			t.Fatalf("SET m%d: %q, %v", i, got, err)
		}
	}
	base := func(slot int) string { return "http://" + c.nodes[slot].p.metricsAddr(t) }
	must := func(slot int, series string) float64 {
		t.Helper()
		v := metricValue(t, base(slot), series)
		if v < 0 {
			t.Fatalf("slot %d has no %s", slot, series)
		}
		return v
	}
	var term float64
	var leaders int
	// The followers apply what the leader committed a moment later: wait for it.
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		for s := range 3 {
			if metricValue(t, base(s), "tallyd_raft_applied_index") < writes {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the members' applied indexes never covered the writes")
	}
	for s := range 3 {
		_, page := httpGet(t, base(s)+"/metrics")
		for _, help := range []string{"tallyd_raft_term", "tallyd_raft_commit_index", "tallyd_raft_proposal_commit_seconds", "tallyd_log_fsync_seconds"} {
			if !regexp.MustCompile(`(?m)^# HELP `+help+` \S`).MatchString(page) || !strings.Contains(page, "# TYPE "+help+" ") {
				t.Errorf("slot %d: %s has no HELP or TYPE", s, help)
			}
		}
		tm := must(s, "tallyd_raft_term")
		if s == 0 {
			term = tm
		} else if tm != term {
			t.Errorf("slot %d term %v, slot 0's %v", s, tm, term)
		}
		if tm < 1 {
			t.Errorf("slot %d term %v", s, tm)
		}
		if v := must(s, "tallyd_raft_commit_index"); v < writes {
			t.Errorf("slot %d commit index %v after %d writes", s, v, writes)
		}
		if v := must(s, `tallyd_log_fsync_seconds_count{log="raft"}`); v < 1 {
			t.Errorf("slot %d: no raft log fsync counted", s)
		}
		if must(s, `tallyd_raft_role{role="leader"}`) == 1 {
			leaders++
			if s != lead {
				t.Errorf("slot %d says it leads; INFO said slot %d", s, lead)
			}
			if v := must(s, "tallyd_raft_proposal_commit_seconds_count"); v < 1 {
				t.Errorf("the leader counted no proposal's commit time")
			}
			for _, o := range c.others(s) {
				peer := strconv.FormatUint(c.nodes[o].id, 10)
				if v := must(s, `tallyd_raft_peer_match_index{peer="`+peer+`"}`); v < writes {
					t.Errorf("the leader's match index of peer %s: %v", peer, v)
				}
				if v := must(s, `tallyd_raft_peer_link_up{peer="`+peer+`"}`); v != 1 {
					t.Errorf("the leader's link to peer %s: %v", peer, v)
				}
			}
		}
		if code, body := httpGet(t, "http://"+c.nodes[s].p.metricsAddr(t)+"/readyz"); code != 200 {
			t.Errorf("slot %d /readyz: %d %q", s, code, body)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members say they lead", leaders)
	}
	// A follower stopped: the leader's link to it goes down; the leader stays ready.
	f := c.others(lead)[0]
	addr := c.nodes[lead].p.metricsAddr(t)
	c.kill(f)
	peer := strconv.FormatUint(c.nodes[f].id, 10)
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		return metricValue(t, "http://"+addr, `tallyd_raft_peer_link_up{peer="`+peer+`"}`) == 0
	}) {
		t.Errorf("the leader's link to stopped peer %s never showed down", peer)
	}
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != 200 {
		t.Errorf("leader /readyz with one of three down: %d %q", code, body)
	}
}
