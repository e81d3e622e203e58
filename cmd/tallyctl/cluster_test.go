package main

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tallyctl cluster status, add and remove, against a one-member cluster; and status against a
// single node, which says so in one line (issue 24).
func TestClusterCommands(t *testing.T) {
	single := startServer(t, false)
	r := single.ctl(t, "cluster", "status")
	expect(t, r, 0, []string{"is a single node, not in cluster mode"}, nil)
	if strings.Count(r.out, "\n") != 1 || r.err != "" {
		t.Errorf("cluster status of a single node is not one line:\n%s", r)
	}
	expect(t, single.ctl(t, "--json", "cluster", "status"), 0, []string{`"single_node":true`}, nil)

	s := &server{slock: freePort(t), log: &syncBuf{}}
	peer := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(tallydBin, "--cluster", "1="+peer, "--node-id", "1", "--initial-cluster-state", "new", "--raft-tick", "10ms",
		"--counter-port", "0", "--pool-port", "0", "--slock-port", strconv.Itoa(s.slock), "--data-dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })

	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r = s.ctl(t, "cluster", "status")
		if r.code == 0 && strings.Contains(r.out, "role leader") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader: %s\n%s", r, s.log.String())
		}
	}
	expect(t, r, 0, []string{"node 1  role leader  leader 1", "1  addr=" + peer + " voter=true match_index="}, nil)
	// docs/cluster.md's walk-through finds the leader with awk 'NR == 1 {print $6}'.
	if f := strings.Fields(r.out); len(f) < 6 || f[4] != "leader" || f[5] != "1" {
		t.Errorf("the leader is not the 6th field of cluster status's first line:\n%s", r.out)
	}
	expect(t, s.ctl(t, "--json", "cluster", "status"), 0, []string{`"role":"leader"`, `"node_id":1`}, nil)

	expect(t, s.ctl(t, "cluster", "add", "2", "127.0.0.1:1"), 0, []string{"OK"}, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r = s.ctl(t, "cluster", "status")
		if strings.Contains(r.out, "2  addr=127.0.0.1:1 voter=false match_index=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member 2 never shown as a learner: %s", r)
		}
	}
	expect(t, s.ctl(t, "cluster", "add", "2", "127.0.0.1:1"), 2, nil, []string{"already a member"})
	expect(t, s.ctl(t, "cluster", "add", "x", "127.0.0.1:1"), 1, nil, []string{`ID "x" is not a positive integer`})
	expect(t, s.ctl(t, "cluster", "remove", "2"), 0, []string{"OK"}, nil)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r = s.ctl(t, "cluster", "status"); !strings.Contains(r.out, "2  addr=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member 2 never removed: %s", r)
		}
	}
	// A consistency level per call: ALL on a one-member cluster is the member itself.
	expect(t, s.ctl(t, "--consistency", "ALL", "incr", "k"), 0, []string{"1"}, nil)
	expect(t, s.ctl(t, "--consistency", "SOME", "incr", "k"), 1, nil, []string{"CONSISTENCY takes ONE, QUORUM or ALL"})
}
