package e2e

// Issue 19 item 3: a member that lost its data dir and is restarted with its usual flags
// never destroys acknowledged writes and never panics.

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// wipe kills slot's node and removes its data dir.
func (c *tcluster) wipe(slot int) {
	c.t.Helper()
	c.kill(slot)
	if err := os.RemoveAll(c.nodes[slot].dataDir); err != nil {
		c.t.Fatal(err)
	}
}

// waitExit waits up to d for slot's node to end by itself: whether it did, and its exit
// status (-1: killed by a signal, a Go crash's SIGABRT included).
func (c *tcluster) waitExit(slot int, d time.Duration) (bool, int) {
	c.t.Helper()
	nd := c.nodes[slot]
	if nd.p == nil {
		c.t.Fatalf("node %d (slot %d) is not running", nd.id, slot)
	}
	select {
	case err := <-nd.p.done:
		nd.p.done <- err
		code, ok := exitStatus(err)
		if !ok {
			c.t.Fatalf("node %d: wait: %v", nd.id, err)
		}
		c.mu.Lock()
		nd.p = nil
		c.mu.Unlock()
		return true, code
	case <-time.After(d):
		return false, 0
	}
}

// lastLog is the output of slot's node's latest run.
func (c *tcluster) lastLog(slot int) string {
	nd := c.nodes[slot]
	if len(nd.logs) == 0 {
		return ""
	}
	return nd.logs[len(nd.logs)-1].String()
}

// goPanic finds a Go panic or fatal error and its goroutine trace in a node's output.
var goPanic = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ \[).*`)

// noPanic fails the test if slot's latest run crashed with a Go panic.
func (c *tcluster) noPanic(slot int, when string) {
	c.t.Helper()
	if m := goPanic.FindString(c.lastLog(slot)); m != "" {
		c.t.Errorf("%s: node %d panicked: %s", when, c.nodes[slot].id, m)
	}
}

// logLine is the first line of log that contains sub ("" if none).
func logLine(log, sub string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}

// TestClusterWipedMemberLeaderUp: a follower that the leader had caught up loses its data
// dir and is restarted, the leader still up, (1) with its usual flags, (2) with
// --initial-cluster-state new, (3) with --join and its old ID. It never panics: (1) it
// refuses to start, exit status 78, saying what to do; (2) the leader's heartbeat shows it
// lost data: on peer links that prove the cluster key, exit status 78 with a clear line
// (without a key the link is only dropped: it may run on); (3) it is refused or stops
// (78). The cluster keeps every acknowledged write.
func TestClusterWipedMemberLeaderUp(t *testing.T) {
	skipFake(t)
	for _, keyed := range []bool{true, false} {
		name := map[bool]string{true: "cluster key", false: "no key"}[keyed]
		t.Run(name, func(t *testing.T) {
			var extra []string
			if keyed {
				needCluster(t)
				if !clusterHas("--cluster-key-file") {
					t.Skip("this binary has no --cluster-key-file")
				}
				extra = clusterKeyArgs(t)
			}
			wipedLeaderUp(t, newCluster(t, 3, extra...), keyed)
		})
	}
}

func wipedLeaderUp(t *testing.T, c *tcluster, keyed bool) {
	c.bound(90 * time.Second)
	lead := c.waitLeader(10*time.Second, nil)
	victim, other := c.others(lead)[0], c.others(lead)[1]
	if acked, unknown := c.incrs(lead, "w", 50, 20*time.Second); unknown != 0 {
		t.Fatalf("%d INCRs of unknown outcome with every member up (%d acknowledged)", unknown, acked)
	}
	c.waitLocal(victim, "w", 50, 10*time.Second)
	for _, how := range []string{"usual flags", "--initial-cluster-state new", "--join and its old ID"} {
		nd := c.nodes[victim]
		c.wipe(victim)
		switch how {
		case "--initial-cluster-state new":
			if !hasInitialState() {
				t.Logf("%s: this binary has no --initial-cluster-state: started with its usual flags", how)
			}
			nd.initState = "new"
		case "--join and its old ID":
			nd.join = c.net.peerAddr(lead)
		}
		c.start(victim)
		mayRun := how == "--join and its old ID" || how == "--initial-cluster-state new" && !keyed
		wait := 10 * time.Second
		if mayRun {
			wait = 3 * time.Second // long enough to hear the leader and panic, as it did
		}
		exited, code := c.waitExit(victim, wait)
		log := c.lastLog(victim)
		c.noPanic(victim, how)
		switch {
		case !exited && mayRun:
			t.Logf("%s: node %d still runs after %v", how, nd.id, wait)
		case !exited:
			t.Errorf("%s: the wiped node %d still runs after 10 s, want it stopped with exit status 78", how, nd.id)
		case code != 78:
			t.Errorf("%s: the wiped node %d exited with status %d, want 78; its log:\n%s", how, nd.id, code, tail(log, 3000))
		}
		switch how {
		case "usual flags":
			if exited && (!strings.Contains(log, "--initial-cluster-state") || !strings.Contains(log, "--join")) {
				t.Errorf("%s: node %d's refusal does not name --initial-cluster-state and --join:\n%s", how, nd.id, tail(log, 3000))
			}
		case "--initial-cluster-state new":
			if exited && !strings.Contains(log, "--node-id") {
				t.Errorf("%s: node %d's stop does not say to join with a new --node-id:\n%s", how, nd.id, tail(log, 3000))
			}
		}
		t.Logf("%s: node %d exited %v (status %d): %s", how, nd.id, exited, code, firstOf(logLine(log, "--initial-cluster-state"), logLine(log, "lost"), logLine(log, "--node-id")))
		if !exited {
			c.kill(victim)
		}
		nd.join = ""
		// Nothing acknowledged is lost, through the leader and the other member.
		for _, s := range []int{lead, other} {
			if v := c.value(s, "w", 10*time.Second); v != 50 {
				t.Errorf("%s: w = %d through node %d, want 50", how, v, c.nodes[s].id)
			}
		}
		c.check()
	}
}

// TestClusterWipedMemberRestart is the item 3: A leads, B is down, 200 INCRs are
// acknowledged at QUORUM by A and C; A and C crash and C's data dir is lost; B and C are
// restarted with their usual flags. With them (existing, the default) C refuses to start:
// exit status 78, naming --initial-cluster-state and --join. With
// --initial-cluster-state new C starts, but B never answers GET as anything but 200
// (-CLUSTERDOWN allowed): C cannot help elect a leader that lacks the writes. When A
// returns everything is there, and C never panics.
func TestClusterWipedMemberRestart(t *testing.T) {
	skipFake(t)
	for _, state := range []string{"existing", "new"} {
		t.Run(state, func(t *testing.T) {
			c := newCluster(t, 3)
			c.bound(90 * time.Second)
			a := c.waitLeader(10*time.Second, nil)
			b, cc := c.others(a)[0], c.others(a)[1]
			c.kill(b)
			if acked, unknown := c.incrs(a, "w", 200, 30*time.Second); unknown != 0 {
				t.Fatalf("%d INCRs of unknown outcome (%d acknowledged) with A and C up", unknown, acked)
			}
			c.kill(a)
			c.wipe(cc)
			t.Logf("200 INCRs acknowledged by node %d (leader) and node %d; node %d was down; node %d's data dir wiped", c.nodes[a].id, c.nodes[cc].id, c.nodes[b].id, c.nodes[cc].id)
			c.start(b)
			if state == "new" {
				if !hasInitialState() {
					t.Logf("this binary has no --initial-cluster-state: node %d started with its usual flags, which bootstrap an empty data dir", c.nodes[cc].id)
				}
				c.nodes[cc].initState = "new"
			}
			c.start(cc)
			c.waitServing(b, 10*time.Second)
			running := true
			if state == "existing" {
				exited, code := c.waitExit(cc, 10*time.Second)
				log := c.lastLog(cc)
				switch {
				case !exited:
					t.Errorf("the wiped node %d, started with its usual flags, still runs after 10 s; want it refused, exit status 78", c.nodes[cc].id)
				case code != 78:
					t.Errorf("the wiped node %d exited with status %d, want 78:\n%s", c.nodes[cc].id, code, tail(log, 3000))
				case !strings.Contains(log, "--initial-cluster-state") || !strings.Contains(log, "--join"):
					t.Errorf("the wiped node %d's refusal does not name --initial-cluster-state and --join:\n%s", c.nodes[cc].id, tail(log, 3000))
				default:
					t.Logf("node %d refused to start (78): %s", c.nodes[cc].id, logLine(log, "--initial-cluster-state"))
				}
				running = !exited
			} else {
				c.waitServing(cc, 10*time.Second)
			}
			// B alone, or B and the wiped C: never a leader without the writes.
			k := c.client(b)
			answers := map[string]int{}
			lost := ""
			end := time.Now().Add(4 * time.Second)
			for time.Now().Before(end) {
				got, err := k.do(opTimeout, "GET", "w")
				switch {
				case err != nil:
					answers["no answer"]++
				case got == "$200" || strings.HasPrefix(got, "-CLUSTERDOWN"):
					answers[strings.SplitN(got, " ", 2)[0]]++
				default:
					answers[got]++
					if lost == "" {
						lost = got
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("node %d's answers to GET w at QUORUM over 4 s: %v", c.nodes[b].id, answers)
			if lost != "" {
				t.Errorf("node %d answered GET w with %q: 200 acknowledged INCRs lost (the wiped node %d helped elect a leader without them); INFO cluster:\n%s",
					c.nodes[b].id, lost, c.nodes[cc].id, c.infos())
			}
			if running {
				c.noPanic(cc, "before A returns")
			}
			// A returns: everything is there.
			c.start(a)
			c.waitServing(a, 10*time.Second)
			for _, s := range []int{a, b} {
				if v := c.value(s, "w", 15*time.Second); v != 200 {
					t.Errorf("after node %d returned: w = %d through node %d at QUORUM, want 200; INFO cluster:\n%s", c.nodes[a].id, v, c.nodes[s].id, c.infos())
				}
			}
			if running {
				// The wiped node is caught up, or stopped cleanly (78); never a panic.
				caught := waitUntil(time.Now().Add(10*time.Second), 100*time.Millisecond, func() bool {
					if exited, _ := c.nodes[cc].p.exited(); exited {
						return true
					}
					k := &cclient{addr: c.net.clientAddr(cc)}
					defer k.close()
					if got, err := k.setup(time.Second, "CONSISTENCY", "ONE"); err != nil || got != "+OK" {
						return false
					}
					got, err := k.do(time.Second, "GET", "w")
					return err == nil && got == "$200"
				})
				c.noPanic(cc, "after A returned")
				if exited, err := c.nodes[cc].p.exited(); exited {
					if code, _ := exitStatus(err); code != 78 {
						t.Errorf("the wiped node %d exited with status %d after A returned, want 78 (or caught up):\n%s", c.nodes[cc].id, code, tail(c.lastLog(cc), 3000))
					} else {
						t.Logf("the wiped node %d stopped (78) after A returned: %s", c.nodes[cc].id, firstOf(logLine(c.lastLog(cc), "lost"), logLine(c.lastLog(cc), "--node-id")))
					}
				} else if !caught {
					t.Errorf("the wiped node %d neither caught up (w = 200 at ONE) nor stopped within 10 s of A's return; INFO cluster:\n%s", c.nodes[cc].id, c.infos())
				}
			}
			c.check()
		})
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// firstOf is the first non-empty string.
func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
