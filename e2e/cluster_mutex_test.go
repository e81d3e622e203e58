package e2e

// Issue 19 item 4: a mutex taken with SETNX (or SET NX) through a follower is still its
// holder's after the leader changes, and after the follower's peer links blip: the same
// connection's DEL frees it, another's does not. That is slock's mutex, which a connection
// asks for with CLIENT SLOCK ON; without it SETNX makes a Redis key, anyone's to delete
// (issue 22).

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// holderDo runs a command on the holder's own connection, retried on that connection
// while the cluster answers -CLUSTERDOWN (up to d); a transport error (the connection
// closed) ends it: no other connection is the holder.
func holderDo(k *cclient, d time.Duration, args ...string) (string, error) {
	var got string
	var err error
	waitUntil(time.Now().Add(d), 50*time.Millisecond, func() bool {
		got, err = k.do(opTimeout, args...)
		return err != nil || !strings.HasPrefix(got, "-CLUSTERDOWN")
	})
	return got, err
}

func TestClusterMutexOwnership(t *testing.T) {
	skipFake(t)
	c, _ := newProxyCluster(t, 3)
	c.bound(90 * time.Second)
	for i, fault := range []string{"leader killed", "the follower's peer links blip 0.3 s"} {
		lead := c.settled(10 * time.Second)
		f := c.others(lead)[0]
		a := c.client(f)
		if got, err := a.do(opTimeout, "CLIENT", "SLOCK", "ON"); err != nil || got != "+OK" {
			t.Fatalf("CLIENT SLOCK ON through node %d: %q %v", c.nodes[f].id, got, err)
		}
		nx, setnx := fmt.Sprintf("m%da", i), fmt.Sprintf("m%db", i)
		if got, err := a.do(opTimeout, "SETNX", setnx, "v"); err != nil || got != ":1" {
			t.Fatalf("%s: SETNX %s through node %d: %q %v", fault, setnx, c.nodes[f].id, got, err)
		}
		if got, err := a.do(opTimeout, "SET", nx, "v", "NX"); err != nil || got != "+OK" {
			t.Fatalf("%s: SET %s v NX through node %d: %q %v", fault, nx, c.nodes[f].id, got, err)
		}
		if fault == "leader killed" {
			c.kill(lead)
			next := c.waitLeader(10*time.Second, c.others(lead))
			t.Logf("%s: A took %s and %s through node %d; node %d killed; node %d leads", fault, setnx, nx, c.nodes[f].id, c.nodes[lead].id, c.nodes[next].id)
		} else {
			c.isolate(f)
			time.Sleep(300 * time.Millisecond)
			c.heal(f)
			t.Logf("%s: A took %s and %s through node %d; its peer links cut for 0.3 s", fault, setnx, nx, c.nodes[f].id)
		}
		for _, key := range []string{setnx, nx} {
			if got, err := holderDo(c.client(f), 10*time.Second, "DEL", key); err != nil || got != ":0" {
				t.Errorf("%s: another client's DEL %s of A's mutex: %q %v, want :0", fault, key, got, err)
			}
			got, err := holderDo(a, 10*time.Second, "DEL", key)
			switch {
			case err != nil:
				t.Errorf("%s: A's DEL %s on the connection that took it: %v: the holder lost its connection, nobody can free the mutex", fault, key, err)
			case got != ":1":
				t.Errorf("%s: A's DEL %s on the connection that took it: %q, want :1 (the mutex is stuck)", fault, key, got)
			default:
				// Freed: another client takes it.
				if got, err := holderDo(c.client(f), 10*time.Second, "SETNX", key, "w"); err != nil || got != ":1" {
					t.Errorf("%s: after A's DEL %s, another client's SETNX: %q %v, want :1", fault, key, got, err)
				}
			}
			if err != nil {
				break
			}
		}
		a.close()
		if fault == "leader killed" {
			c.start(lead)
			c.waitServing(lead, 10*time.Second)
		}
		c.check()
	}
}
