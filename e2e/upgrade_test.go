package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stop ends slot's node with SIGTERM, as a service manager does, and waits for it.
func (c *tcluster) stop(slot int) { c.t.Helper(); c.end(slot, syscall.SIGTERM, 15*time.Second) }

// caughtUp waits until slot's node has applied everything the leader has committed.
func (c *tcluster) caughtUp(slot int, d time.Duration) {
	c.t.Helper()
	if !waitUntil(time.Now().Add(d), 20*time.Millisecond, func() bool {
		lead := c.leader(nil)
		if lead < 0 {
			return false
		}
		l, err1 := c.infoOne(lead)
		m, err2 := c.infoOne(slot)
		if err1 != nil || err2 != nil {
			return false
		}
		commit, _ := strconv.ParseUint(l["commit_index"], 10, 64)
		applied, _ := strconv.ParseUint(m["applied_index"], 10, 64)
		return applied >= commit
	}) {
		c.t.Fatalf("node %d did not catch up in %v; INFO cluster:\n%s", c.nodes[slot].id, d, c.infos())
	}
}

// TestRollingUpgrade: the members of a cluster are stopped (SIGTERM), replaced and started
// one at a time, the followers first and the leader last, while clients SET keys at QUORUM
// through every member, moving to another member when theirs does not answer. No
// acknowledged SET is lost: afterwards every member holds every one. "Replaced" is a second
// copy of the binary (building an older commit is not cheap and reliable on a clean
// checkout), so the test proves the procedure, not compatibility between versions.
func TestRollingUpgrade(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(150 * time.Second)
	b, err := os.ReadFile(c.bin)
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(c.dir, "clnode-next")
	if err := os.WriteFile(next, b, 0o755); err != nil {
		t.Fatal(err)
	}

	w := newWriteLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var addrs []string
	for s := range c.nodes {
		addrs = append(addrs, c.net.clientAddr(s))
	}
	for i := range 3 {
		wg.Add(1)
		order := append(append([]string(nil), addrs[i:]...), addrs[:i]...)
		go w.writer(order, "u"+strconv.Itoa(i), stop, &wg)
	}
	time.Sleep(300 * time.Millisecond)

	lead := c.waitLeader(10*time.Second, nil)
	order := append(c.others(lead), lead)
	c.bin = next
	for _, s := range order {
		before := w.ackedCount()
		c.stop(s)
		c.start(s)
		c.waitServing(s, 15*time.Second)
		c.waitLeader(10*time.Second, nil)
		c.caughtUp(s, 15*time.Second)
		t.Logf("node %d replaced (%d SETs acknowledged meanwhile)", c.nodes[s].id, w.ackedCount()-before)
		time.Sleep(200 * time.Millisecond) // writes go on with every member up
	}
	close(stop)
	wg.Wait()
	for s := range c.nodes {
		if args := c.nodes[s].p.cmd.Args; !slices.Contains(args, next) {
			t.Fatalf("node %d runs %q, not the new binary", c.nodes[s].id, args)
		}
	}
	n := 0
	for s := range c.nodes {
		c.caughtUp(s, 15*time.Second)
		n = w.checkRestored(t, c.net.clientAddr(s), time.Time{}, true)
	}
	if n == 0 {
		t.Fatal("no SET was acknowledged: the test checked nothing")
	}
	c.check()
	t.Logf("%d acknowledged SETs, on every member after the roll", n)
}

// ackedCount returns how many SETs were acknowledged so far (for progress lines).
func (w *writeLog) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}
