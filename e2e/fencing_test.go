package e2e

// Issue 19: fencing tokens, and Martin Kleppmann's scenario ("How to do distributed
// locking", 2016) end to end. Client 1 takes a lock with a lease and its token t1, then
// pauses past its lease; client 2 takes the lock (t2 > t1) and writes with t2; client 1
// wakes and writes with t1: refused. Tokens only grow, across a failover and restarts.

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	fenceLock = "res-lock" // the lock guarding the resource
	fenceRes  = "res"      // the resource: a value written with FENCE
)

// fencer is one client of the scenario, on one node (a connection redialled as needed).
type fencer struct {
	t    *testing.T
	name string
	k    *cclient
}

// do runs a command, retried while the answer is -CLUSTERDOWN (up to 15 s), and returns
// the reply; a transport error fails the test.
func (f *fencer) do(args ...string) string {
	f.t.Helper()
	var got string
	var err error
	waitUntil(time.Now().Add(15*time.Second), 100*time.Millisecond, func() bool {
		got, err = f.k.do(opTimeout, args...)
		return err == nil && !strings.HasPrefix(got, "-CLUSTERDOWN")
	})
	if err != nil {
		f.t.Fatalf("%s: %s: %v", f.name, strings.Join(args, " "), err)
	}
	return got
}

// lock takes fenceLock for lease seconds, waiting up to wait seconds, and returns the
// grant's token.
func (f *fencer) lock(wait, lease int) uint64 {
	f.t.Helper()
	var r lockReply
	var err error
	args := []string{"LOCK", fenceLock, "TIMEOUT", strconv.Itoa(wait), "EXPRIED", strconv.Itoa(lease), "LOCK_ID", f.name}
	waitUntil(time.Now().Add(15*time.Second), 100*time.Millisecond, func() bool {
		r, err = f.k.lock(time.Duration(wait)*time.Second+opTimeout, args...)
		return err == nil
	})
	switch {
	case err != nil:
		f.t.Fatalf("%s: %s: %v", f.name, strings.Join(args, " "), err)
	case !r.granted():
		f.t.Fatalf("%s: %s: not granted: %s", f.name, strings.Join(args, " "), r.text)
	case !r.hasToken:
		f.t.Fatalf("%s: %s: the grant carries no TOKEN: %s", f.name, strings.Join(args, " "), r.text)
	}
	return r.token
}

func (f *fencer) unlock() {
	f.t.Helper()
	var r lockReply
	var err error
	waitUntil(time.Now().Add(15*time.Second), 100*time.Millisecond, func() bool {
		r, err = f.k.lock(opTimeout, "UNLOCK", fenceLock, "LOCK_ID", f.name)
		return err == nil
	})
	if err != nil || !r.granted() {
		f.t.Fatalf("%s: UNLOCK %s: %s %v", f.name, fenceLock, r.text, err)
	}
}

// want runs a command and wants its reply.
func (f *fencer) want(want string, args ...string) {
	f.t.Helper()
	if got := f.do(args...); got != want {
		f.t.Errorf("%s: %s: %q, want %q", f.name, strings.Join(args, " "), got, want)
	}
}

// fenced wants a fenced write with an old token refused, naming both tokens.
func (f *fencer) fenced(old, seen uint64, value string) {
	f.t.Helper()
	got := f.do("SET", fenceRes, value, "FENCE", strconv.FormatUint(old, 10))
	if !strings.HasPrefix(got, "-FENCED") || !strings.Contains(got, strconv.FormatUint(old, 10)) || !strings.Contains(got, strconv.FormatUint(seen, 10)) {
		f.t.Errorf("%s: SET %s %s FENCE %d (token %d already seen): %q, want -FENCED naming both tokens", f.name, fenceRes, value, old, seen, got)
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// kleppmann runs the scenario between client 1 (one) and client 2, whom second returns
// after client 1's grant (in the cluster, after a failover); it returns both tokens.
func kleppmann(t *testing.T, one *fencer, second func() *fencer) (t1, t2 uint64) {
	t.Helper()
	t1 = one.lock(0, 1)
	granted1 := time.Now()
	t.Logf("client 1 granted %s with token %d (lease 1 s)", fenceLock, t1)
	one.want(":"+u(t1), "TOKEN", fenceLock)
	one.want(":"+u(t1), "TOKEN", fenceLock, "LOCK_ID", one.name)
	two := second()
	// Client 1 pauses (a GC pause): it does not renew; client 2 waits for the lock.
	t2 = two.lock(10, 60)
	t.Logf("client 2 granted %s with token %d, %v after client 1's grant", fenceLock, t2, time.Since(granted1).Round(time.Millisecond))
	if t2 <= t1 {
		t.Errorf("client 2's token %d is not above client 1's %d", t2, t1)
	}
	two.want(":"+u(t2), "TOKEN", fenceLock)
	two.want("+OK", "SET", fenceRes, "v2", "FENCE", u(t2))
	two.want("+OK", "SET", fenceRes, "v2", "FENCE", u(t2), "PX", "600000") // the same token again, with another option
	two.want(":"+u(t2), "GETFENCE", fenceRes)
	// Client 1 wakes and writes with its old token.
	one.fenced(t1, t2, "v1")
	one.want("$v2", "GET", fenceRes)
	return t1, t2
}

// TestFencingSingleNode: Kleppmann's scenario on one node, then tokens and the fence
// across a restart after SIGTERM and after kill -9; TOKEN of a SETNX key and of a free
// one.
func TestFencingSingleNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir}
	p := start(t, 0, args...)
	p.waitLog(t, "tallyd listening")
	client := func(name string) *fencer {
		k := &cclient{addr: addr}
		t.Cleanup(k.close)
		return &fencer{t: t, name: name, k: k}
	}
	one, two := client("client-1"), client("client-2")
	t1, t2 := kleppmann(t, one, func() *fencer { return two })
	last := t2

	three := client("client-3")
	three.want("$-1", "TOKEN", "free")
	three.want(":1", "SETNX", "sx", "v")
	if got := three.do("TOKEN", "sx"); !strings.HasPrefix(got, ":") || got == ":0" {
		t.Errorf("TOKEN of a key SETNX holds: %q, want its (positive) token", got)
	} else if n, _ := strconv.ParseUint(got[1:], 10, 64); n <= last {
		t.Errorf("TOKEN of a key SETNX took after client 2's grant: %d, not above %d", n, last)
	}
	two.unlock()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		_ = p.cmd.Process.Signal(sig)
		p.exitCode(t)
		p = start(t, 0, args...)
		p.waitLog(t, "tallyd listening")
		next := client(fmt.Sprintf("client-after-%d", sig))
		tok := next.lock(0, 60)
		t.Logf("after %v and a restart: a grant with token %d", sig, tok)
		if tok <= last {
			t.Errorf("after %v and a restart, a grant's token %d is not above the last one before, %d", sig, tok, last)
		}
		last = tok
		one.want(":"+u(t2), "GETFENCE", fenceRes)
		one.fenced(t1, t2, "v1")
		one.want("$v2", "GET", fenceRes)
		next.unlock()
	}
}

// TestFencingCluster: Kleppmann's scenario on a 3-member cluster, with the leader killed
// between the two grants (client 1 through a follower, client 2 through the new leader);
// then every member is killed and restarted: tokens still grow, the fence holds.
func TestFencingCluster(t *testing.T) {
	skipFake(t)
	c := newCluster(t, 3)
	c.bound(120 * time.Second)
	lead := c.waitLeader(10*time.Second, nil)
	f := c.others(lead)[0]
	one := &fencer{t: t, name: "client-1", k: c.client(f)}
	var next int
	t1, t2 := kleppmann(t, one, func() *fencer {
		// Every member has the leader's entries before it dies: a member that started empty
		// and was never caught up does not vote for a log with history (cluster/fresh.go), so
		// killing the leader at once left the other two without a quorum (failed at load 4).
		for _, s := range c.others(lead) {
			c.caughtUp(s, 10*time.Second)
		}
		c.kill(lead)
		next = c.waitLeader(10*time.Second, c.others(lead))
		t.Logf("leader node %d killed; node %d leads", c.nodes[lead].id, c.nodes[next].id)
		return &fencer{t: t, name: "client-2", k: c.client(next)}
	})
	two := &fencer{t: t, name: "client-2", k: c.client(next)}
	two.unlock()
	c.start(lead)
	c.waitServing(lead, 10*time.Second)
	// Every member killed and restarted with its usual flags.
	for s := range c.nodes {
		c.kill(s)
	}
	for s := range c.nodes {
		c.start(s)
	}
	for s := range c.nodes {
		c.waitServing(s, 10*time.Second)
	}
	lead = c.waitLeader(10*time.Second, nil)
	three := &fencer{t: t, name: "client-3", k: c.client(c.others(lead)[0])}
	t3 := three.lock(10, 60)
	t.Logf("after a full restart: client 3 granted token %d", t3)
	if t3 <= t2 {
		t.Errorf("after a full restart, client 3's token %d is not above client 2's %d", t3, t2)
	}
	for s := range c.nodes {
		k := &fencer{t: t, name: fmt.Sprintf("client-1 on node %d", c.nodes[s].id), k: c.client(s)}
		k.want(":"+u(t2), "GETFENCE", fenceRes)
		k.fenced(t1, t2, "v1")
		k.want("$v2", "GET", fenceRes)
	}
	three.unlock()
}

// TestFencingRestoreOldBackup (issue 30, item 4): a server restored from a backup taken
// before tokens it granted later must still grant tokens above all of them. A token t1,
// then a backup (its ceiling just above t1), then a restart (the counter jumps to the
// ceiling) and a token t2 above that ceiling, then the old backup restored into a new data
// directory: the restored server's next token is above t2 (it was the ceiling plus one, t2
// again, when the counter took the backup's ceiling).
func TestFencingRestoreOldBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serve := func(data string) (*proc, string) {
		port := freePort(t)
		p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--data-dir="+data)
		p.waitLog(t, "tallyd listening")
		return p, "127.0.0.1:" + strconv.Itoa(port)
	}
	grant := func(addr, name string) uint64 {
		k := &cclient{addr: addr}
		defer k.close()
		f := &fencer{t: t, name: name, k: k}
		tok := f.lock(0, 60)
		f.want("+OK", "SET", fenceRes, name, "FENCE", u(tok)) // what the protected resource sees
		f.unlock()
		return tok
	}
	live := filepath.Join(dir, "live")
	p, addr := serve(live)
	t1 := grant(addr, "before-backup")
	file := filepath.Join(dir, "old.snap")
	if code, out := tallyctl(t, append(ctlAt(addr), "snapshot", "save", file)...); code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.exitCode(t)
	p, addr = serve(live)
	t2 := grant(addr, "after-backup")
	if t2 <= t1 {
		t.Fatalf("after a restart the token %d is not above %d", t2, t1)
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.exitCode(t)

	rdir := filepath.Join(dir, "restored")
	if code, out := runBin(t, "restore", file, "--data-dir", rdir); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	_, raddr := serve(rdir)
	k := &cclient{addr: raddr}
	t.Cleanup(k.close)
	f := &fencer{t: t, name: "after-restore", k: k}
	f.want(":"+u(t1), "GETFENCE", fenceRes) // the backup's state: t2's write came after it
	t3 := f.lock(0, 60)
	t.Logf("tokens: %d before the backup, %d after it (and a restart), %d after restoring it", t1, t2, t3)
	if t3 <= t2 {
		t.Fatalf("the server restored from an old backup granted token %d, not above %d granted after the backup", t3, t2)
	}
	f.want("+OK", "SET", fenceRes, "restored", "FENCE", u(t3))
}

// TestFencingRestoreCluster (issue 30, item 4): the same on a cluster: a token, a backup
// (on the leader), every member restarted (the new leader continues from the ceiling) and
// a token t2, then every member restored from the old backup: the new cluster's next token
// is above t2.
func TestFencingRestoreCluster(t *testing.T) {
	skipFake(t)
	c := newCluster(t, 3)
	c.bound(120 * time.Second)
	grant := func(name string) uint64 {
		lead := c.waitLeader(10*time.Second, nil)
		f := &fencer{t: t, name: name, k: c.client(c.others(lead)[0])} // through a follower
		tok := f.lock(10, 60)
		f.unlock()
		return tok
	}
	t1 := grant("before-backup")
	lead := c.waitLeader(10*time.Second, nil)
	file := filepath.Join(c.dir, "old.snap")
	if code, out := tallyctl(t, append(ctlAt(c.net.clientAddr(lead)), "snapshot", "save", file)...); code != 0 || !strings.Contains(out, "cluster snapshot") {
		t.Fatalf("snapshot save on the leader: exit %d: %s", code, out)
	}
	for s := range c.nodes {
		c.kill(s)
	}
	for s := range c.nodes {
		c.start(s)
	}
	for s := range c.nodes {
		c.waitServing(s, 10*time.Second)
	}
	t2 := grant("after-backup")
	if t2 <= t1 {
		t.Fatalf("after a full restart the token %d is not above %d", t2, t1)
	}
	for s := range c.nodes {
		c.kill(s)
	}
	for s, nd := range c.nodes {
		nd.dataDir = filepath.Join(c.dir, fmt.Sprintf("restored%d", s))
		code, out := runBin(t, "restore", file, "--data-dir", nd.dataDir, "--cluster", c.net.clusterArg(s, c.ids),
			"--node-id", strconv.FormatUint(nd.id, 10))
		if code != 0 {
			t.Fatalf("restore node %d: exit %d: %s", nd.id, code, out)
		}
	}
	for s := range c.nodes {
		c.start(s)
	}
	for s := range c.nodes {
		c.waitServing(s, 10*time.Second)
	}
	t3 := grant("after-restore")
	t.Logf("tokens: %d before the backup, %d after it (and a full restart), %d after restoring it on every member", t1, t2, t3)
	if t3 <= t2 {
		t.Fatalf("the cluster restored from an old backup granted token %d, not above %d granted after the backup", t3, t2)
	}
}
