package e2e

// Issue 19 item 1: a lock acknowledged at QUORUM survives the leader's death or isolation,
// however young it is (held for less than --lock-persist-after), text LOCK and binary
// slock Lock alike; a client on an isolated leader is never granted a lock the cluster
// does not know; on a single node a graceful stop keeps every held lock.

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// lockTaker takes and frees one key for one owner, through text LOCK or binary frames.
type lockTaker interface {
	// take tries the key once (no wait), held 60 s: granted, or refused (held by another);
	// err: no lock reply (a transport error, -CLUSTERDOWN, a closed connection).
	take() (granted bool, what string, err error)
	// free releases the key held by this owner (any connection): released, or not held.
	free() (released bool, what string, err error)
	close()
}

type textTaker struct {
	k, fresh *cclient
	key, id  string
}

func (x *textTaker) take() (bool, string, error) {
	r, err := x.k.lock(opTimeout, "LOCK", x.key, "TIMEOUT", "0", "EXPRIED", "60", "LOCK_ID", x.id)
	return r.granted(), r.text, err
}

func (x *textTaker) free() (bool, string, error) {
	r, err := x.fresh.lock(opTimeout, "UNLOCK", x.key, "LOCK_ID", x.id)
	return r.granted(), r.text, err
}

func (x *textTaker) close() { x.k.close(); x.fresh.close() }

type binTaker struct {
	b, fresh *bclient
	key      string
	id       [16]byte
}

func (x *binTaker) take() (bool, string, error) {
	r, err := x.b.lock(x.key, x.id, 60, opTimeout)
	return binResult(r, err)
}

func (x *binTaker) free() (bool, string, error) {
	r, err := x.fresh.unlock(x.key, x.id, opTimeout)
	return binResult(r, err)
}

func binResult(r slock.Reply, err error) (bool, string, error) {
	if err != nil {
		return false, "no reply", err
	}
	return r.Result == slock.ResultOK, fmt.Sprintf("result %d (%v)", r.Result, r.Result), nil
}

func (x *binTaker) close() { x.b.close(); x.fresh.close() }

// taker is owner's taker of key on slot (its frees go through a connection of their own
// to slot too; retarget moves them).
func (c *tcluster) taker(proto string, slot int, key, owner string) lockTaker {
	if proto == "binary" {
		return &binTaker{b: &bclient{addr: c.net.clientAddr(slot)}, fresh: &bclient{addr: c.net.clientAddr(slot)}, key: key, id: binLockID(owner)}
	}
	return &textTaker{k: &cclient{addr: c.net.clientAddr(slot)}, fresh: &cclient{addr: c.net.clientAddr(slot)}, key: key, id: owner}
}

// retryTake tries until the key is granted or refused (a definite answer) within d, the
// cluster electing a leader meanwhile.
func retryTake(x lockTaker, d time.Duration) (granted bool, what string, err error) {
	waitUntil(time.Now().Add(d), 100*time.Millisecond, func() bool {
		granted, what, err = x.take()
		return err == nil
	})
	return granted, what, err
}

// retryTakeOwn is retryTake for a key nobody else asks for: after an attempt without an
// answer, a refusal of reentry (LOCKED_ERROR) means that attempt took it.
func retryTakeOwn(x lockTaker, d time.Duration) (granted bool, what string, err error) {
	lost := false
	waitUntil(time.Now().Add(d), 100*time.Millisecond, func() bool {
		granted, what, err = x.take()
		if err != nil {
			lost = true
		}
		return err == nil
	})
	if lost && err == nil && !granted && strings.Contains(what, "LOCKED_ERROR") {
		return true, what + " (an earlier attempt without an answer took it)", nil
	}
	return granted, what, err
}

// settled waits until one leader leads and every running node follows it, and returns
// its slot.
func (c *tcluster) settled(d time.Duration) int {
	c.t.Helper()
	lead := -1
	if !waitUntil(time.Now().Add(d), 20*time.Millisecond, func() bool {
		lead = c.leader(nil)
		if lead < 0 {
			return false
		}
		for s, nd := range c.nodes {
			if nd.p == nil || s == lead {
				continue
			}
			m, err := c.infoOne(s)
			if err != nil || m["role"] != "follower" || m["leader_id"] != strconv.FormatUint(c.nodes[lead].id, 10) {
				return false
			}
		}
		return true
	}) {
		c.t.Fatalf("the cluster did not settle under one leader within %v; INFO cluster:\n%s", d, c.infos())
	}
	return lead
}

// retryFree is retryTake for free.
func retryFree(x lockTaker, d time.Duration) (released bool, what string, err error) {
	waitUntil(time.Now().Add(d), 100*time.Millisecond, func() bool {
		released, what, err = x.free()
		return err == nil
	})
	return released, what, err
}

// TestClusterYoungLockFailover: A takes a lock at QUORUM, through the leader or through a
// follower, text or binary; at once (well within --lock-persist-after, 10 s here) the
// leader is killed with SIGKILL or cut off. B must not be granted the lock by the new
// leader, and A's LockId must still release it there.
func TestClusterYoungLockFailover(t *testing.T) {
	skipFake(t)
	c := newCluster(t, 3, "--lock-persist-after", "10s")
	c.bound(150 * time.Second)
	done := map[string]string{"kill": "killed", "isolate": "isolated"}
	n := 0
	for _, proto := range []string{"text", "binary"} {
		for _, fault := range []string{"kill", "isolate"} {
			for _, via := range []string{"leader", "follower"} {
				n++
				name := fmt.Sprintf("%s lock through the %s, leader %s", proto, via, done[fault])
				lead := c.settled(10 * time.Second)
				slot := lead
				if via == "follower" {
					slot = c.others(lead)[0]
				}
				key := fmt.Sprintf("yl%d", n)
				a := c.taker(proto, slot, key, fmt.Sprintf("owner-a-%d", n))
				granted, what, err := retryTakeOwn(a, 10*time.Second)
				if err != nil || !granted {
					t.Fatalf("%s: A's lock through node %d: %s (%v); INFO cluster:\n%s", name, c.nodes[slot].id, what, err, c.infos())
				}
				grant := time.Now()
				if fault == "kill" {
					c.kill(lead)
				} else {
					c.isolate(lead)
				}
				after := time.Since(grant).Round(time.Millisecond)
				t.Logf("%s: A granted %s through node %d; leader node %d %s %v later", name, key, c.nodes[slot].id, c.nodes[lead].id, done[fault], after)
				next := c.waitLeader(10*time.Second, c.others(lead))
				b := c.taker(proto, next, key, fmt.Sprintf("owner-b-%d", n))
				granted, what, err = retryTake(b, 10*time.Second)
				switch {
				case err != nil:
					t.Errorf("%s: B's lock through the new leader node %d: no answer for 10 s: %v", name, c.nodes[next].id, err)
				case granted:
					t.Errorf("%s: B was granted %s through the new leader node %d (%s): A's lock, acknowledged at QUORUM, the leader %s %v later, is lost",
						name, key, c.nodes[next].id, what, done[fault], after)
				default:
					// A's LockId frees it through the new leader: the cluster knows A holds it.
					a2 := c.taker(proto, next, key, fmt.Sprintf("owner-a-%d", n))
					if released, what, err := retryFree(a2, 10*time.Second); err != nil || !released {
						t.Errorf("%s: A's UNLOCK by its LockId through the new leader node %d: %s (%v), want it released", name, c.nodes[next].id, what, err)
					} else if granted, what, err := retryTake(b, 10*time.Second); err != nil || !granted {
						t.Errorf("%s: B's lock after A's release: %s (%v), want it granted", name, what, err)
					}
					a2.close()
				}
				a.close()
				b.close()
				if fault == "kill" {
					c.start(lead)
				} else {
					c.heal(lead)
				}
				c.waitServing(lead, 10*time.Second)
				c.check()
			}
		}
	}
	lockOnIsolatedLeader(t, c)
}

// lockOnIsolatedLeader: the leader is cut off; A, connected to it, asks for a lock (text,
// then binary). The answer must be -CLUSTERDOWN (binary: a refusal) or a closed
// connection, never a grant: the majority elects another leader that knows nothing of it,
// and B is granted the key there.
func lockOnIsolatedLeader(t *testing.T, c *tcluster) {
	for i, proto := range []string{"text", "binary"} {
		lead := c.settled(10 * time.Second)
		key := fmt.Sprintf("il%d", i)
		a := c.taker(proto, lead, key, "owner-a")
		// Connected (and, text, its level set) before the cut.
		if proto == "text" {
			if got, err := a.(*textTaker).k.do(opTimeout, "PING"); err != nil || got != "+PONG" {
				t.Fatalf("PING: %q %v", got, err)
			}
		} else if _, err := a.(*binTaker).b.unlock("nothing", binLockID("owner-a"), opTimeout); err != nil {
			t.Fatalf("binary unlock of nothing: %v", err)
		}
		c.isolate(lead)
		begin := time.Now()
		granted, what, err := a.take()
		took := time.Since(begin).Round(time.Millisecond)
		t.Logf("%s LOCK %s on the isolated leader node %d: %s (%v) after %v", proto, key, c.nodes[lead].id, what, err, took)
		switch {
		case err == nil && granted:
			t.Errorf("%s: the isolated leader node %d granted %s (%s) after %v: a lock the majority does not know", proto, c.nodes[lead].id, key, what, took)
		case err != nil && !isClusterDown(err) && !strings.Contains(err.Error(), errBinClosed.Error()) && !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset"):
			t.Errorf("%s: the isolated leader node %d answered LOCK %s with %v after %v, want -CLUSTERDOWN or a closed connection", proto, c.nodes[lead].id, key, err, took)
		case err == nil && proto == "text":
			t.Errorf("%s: the isolated leader node %d refused LOCK %s with %s after %v, want -CLUSTERDOWN: the key is free in the cluster", proto, c.nodes[lead].id, key, what, took)
		}
		next := c.waitLeader(10*time.Second, c.others(lead))
		b := c.taker(proto, next, key, "owner-b")
		if granted, what, err := retryTake(b, 10*time.Second); err != nil || !granted {
			t.Errorf("%s: B's lock of %s through the new leader node %d: %s (%v), want it granted (nobody holds it)", proto, key, c.nodes[next].id, what, err)
		}
		a.close()
		b.close()
		c.heal(lead)
		c.check()
	}
}

// TestLockSurvivesGracefulStop: a single node, --lock-persist-after 10 s; A holds a text
// and a binary lock, granted less than a second before SIGTERM. After the restart B is
// refused both, and A's LockIds release them. (After a kill -9 such young locks may be
// lost: that is --lock-persist-after's documented trade-off; the test only logs it.)
func TestLockSurvivesGracefulStop(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir, "--lock-persist-after=10s"}
	for _, stop := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		p := start(t, 0, args...)
		p.waitLog(t, "tallyd listening")
		key := "gs" + strconv.Itoa(int(stop))
		text := &textTaker{k: &cclient{addr: addr}, fresh: &cclient{addr: addr}, key: key, id: "owner-a"}
		bin := &binTaker{b: &bclient{addr: addr}, fresh: &bclient{addr: addr}, key: key + "b", id: binLockID("owner-a")}
		for _, x := range []lockTaker{text, bin} {
			if granted, what, err := x.take(); err != nil || !granted {
				t.Fatalf("A's lock: %s (%v)", what, err)
			}
		}
		begin := time.Now()
		_ = p.cmd.Process.Signal(stop)
		code := p.exitCode(t)
		t.Logf("%v %v after the grants: exit status %d", stop, time.Since(begin).Round(time.Millisecond), code)
		text.close()
		bin.close()
		p = start(t, 0, args...)
		p.waitLog(t, "tallyd listening")
		refused := map[string]bool{}
		for _, b := range []struct {
			kind string
			x    lockTaker
		}{
			{"text", &textTaker{k: &cclient{addr: addr}, fresh: &cclient{addr: addr}, key: key, id: "owner-b"}},
			{"binary", &binTaker{b: &bclient{addr: addr}, fresh: &bclient{addr: addr}, key: key + "b", id: binLockID("owner-b")}},
		} {
			granted, what, err := b.x.take()
			switch {
			case err != nil:
				t.Errorf("after %v and a restart, B's %s lock: %v", stop, b.kind, err)
			case stop == syscall.SIGKILL:
				t.Logf("after kill -9 and a restart, B's %s lock of a lock held less than --lock-persist-after: %s (lost is the documented trade-off)", b.kind, what)
			case granted:
				t.Errorf("after SIGTERM and a restart, B was granted A's %s lock (%s): the graceful stop did not keep it", b.kind, what)
			default:
				refused[b.kind] = true
			}
			b.x.close()
		}
		// What B was refused is A's: its LockId releases it.
		for _, a := range []struct {
			kind string
			x    lockTaker
		}{
			{"text", &textTaker{k: &cclient{addr: addr}, fresh: &cclient{addr: addr}, key: key, id: "owner-a"}},
			{"binary", &binTaker{b: &bclient{addr: addr}, fresh: &bclient{addr: addr}, key: key + "b", id: binLockID("owner-a")}},
		} {
			if !refused[a.kind] {
				continue
			}
			if released, what, err := a.x.free(); err != nil || !released {
				t.Errorf("after %v and a restart, A's UNLOCK of its %s lock by its LockId: %s (%v), want it released", stop, a.kind, what, err)
			}
			a.x.close()
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
}
