package loop

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/tallyd/tallyd/snapfile"
)

// SNAPSHOT on a member that does not lead (backup.go), in the simulated cluster (sim_test.go).

// snapshotOf checks that r is a backup file and returns its header and body.
func snapshotOf(t *testing.T, r simReply) (snapfile.Header, []byte) {
	t.Helper()
	if r.raw == nil || r.r.Kind != '$' {
		t.Fatalf("SNAPSHOT: want a bulk string, got %s", r)
	}
	h, body, err := snapfile.Decode(r.r.Str)
	if err != nil {
		t.Fatalf("SNAPSHOT's file: %v", err)
	}
	return h, body
}

// hasValues fails the test for each of vals the backup's body does not hold.
func hasValues(t *testing.T, body []byte, vals []string, why string) {
	t.Helper()
	for _, v := range vals {
		if !bytes.Contains(body, []byte(v)) {
			t.Errorf("%s: the file lacks %q", why, v)
		}
	}
}

// Writes acknowledged through the leader, then SNAPSHOT on a follower whose disk is slow
// (it applies committed entries only once its log has them): the file is answered only once
// the follower applied them, and holds every one. Writes at ONE (acknowledged once on the
// leader's disk, before they commit) are in it too: the followers' disks are slow, so they
// are not yet committed when the follower's read reaches the leader.
func TestSimSnapshotOnFollower(t *testing.T) {
	for _, one := range []bool{false, true} {
		for _, seed := range []uint64{1, 5, 7} {
			t.Run(fmt.Sprintf("one=%v/seed%d", one, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				l := c.elect()
				f := c.others(l)[0]
				for _, id := range c.others(l) {
					if id == f || one {
						c.ms[id].fsyncMore = 300 * time.Millisecond
					}
				}
				a := c.client(l)
				if one {
					if r := a.do("CONSISTENCY", "ONE"); !r.isOK() {
						t.Fatalf("CONSISTENCY ONE: %s", r)
					}
				}
				var vals []string
				for i := range 20 {
					k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("value-%d-%d", seed, i)
					a.send("SET", k, v)
					vals = append(vals, v)
				}
				for range vals {
					if r := a.reply(simReplyWait); !r.isOK() {
						t.Fatalf("SET on the leader m%d: %s", l, r)
					}
				}
				stable, applied := c.ms[l].s.cl.m.St.Stable(), c.ms[f].s.cl.m.Applied()
				if applied >= stable {
					t.Fatalf("the follower m%d applied %d already (the leader's log is at %d): nothing to wait for", f, applied, stable)
				}
				b := c.client(f)
				asked := c.now
				h, body := snapshotOf(t, b.do("SNAPSHOT"))
				if h.Kind != snapfile.Cluster || h.Index < stable || h.Keys < uint64(len(vals)) {
					t.Fatalf("header %+v: want a cluster file at index >= %d with >= %d keys", h, stable, len(vals))
				}
				hasValues(t, body, vals, fmt.Sprintf("SNAPSHOT on the follower m%d after %d acknowledged SETs", f, len(vals)))
				t.Logf("answered after %v at index %d (the leader's log was at %d, the follower had applied %d)",
					c.now.Sub(asked), h.Index, stable, applied)
				c.noPanics()
			})
		}
	}
}

// snapshotSim starts a cluster of three for seed and SETs k through its leader; it returns
// the leader, a follower and the leader's client.
func snapshotSim(t *testing.T, seed uint64) (c *sim, l, f uint64, a *simClient) {
	c = newSim(t, 3, seed)
	l = c.elect()
	f = c.others(l)[0]
	a = c.client(l)
	if r := a.do("SET", "k", "before"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	c.run(100 * time.Millisecond)
	return c, l, f, a
}

// A follower cut off from the others answers -CLUSTERDOWN after --cluster-timeout, never a
// file of its store (which may lag behind what the majority acknowledged meanwhile).
func TestSimSnapshotPartitionedFollower(t *testing.T) {
	for _, seed := range []uint64{1, 5, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			c, _, f, a := snapshotSim(t, seed)
			c.partition(f)
			if r := a.do("SET", "k", "after-the-partition"); !r.isOK() {
				t.Fatalf("SET on the majority side: %s", r)
			}
			for _, wait := range []time.Duration{0, 3 * time.Second} { // a leader still known, then none
				c.run(wait)
				b := c.client(f)
				asked := c.now
				r := b.do("SNAPSHOT")
				if !r.isErr("CLUSTERDOWN") {
					t.Fatalf("SNAPSHOT on the partitioned follower m%d: want -CLUSTERDOWN, got %s", f, r)
				}
				if d := c.now.Sub(asked); d < c.opt.timeout {
					t.Fatalf("-CLUSTERDOWN after %v, before --cluster-timeout (%v)", d, c.opt.timeout)
				}
			}
			c.heal()
			if !c.runUntil(func() bool { return c.ms[f].s.cl.m.Leader() != 0 }, 10*time.Second) {
				t.Fatalf("m%d learns no leader once healed", f)
			}
			b := c.client(f)
			_, body := snapshotOf(t, b.do("SNAPSHOT"))
			hasValues(t, body, []string{"after-the-partition"}, "SNAPSHOT on the healed follower")
			c.noPanics()
		})
	}
}

// The leader changes while a follower's SNAPSHOT waits for its read: -CLUSTERDOWN, as other
// commands; the next SNAPSHOT reads through the new leader.
func TestSimSnapshotLeaderChanges(t *testing.T) {
	for _, seed := range []uint64{1, 5, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			c, l, f, _ := snapshotSim(t, seed)
			c.hold(l, f) // the read's answer does not come
			b := c.client(f)
			b.send("SNAPSHOT")
			c.run(50 * time.Millisecond)
			c.kill(l)
			if r := b.reply(simReplyWait); !r.isErr("CLUSTERDOWN") {
				t.Fatalf("SNAPSHOT on m%d as its leader m%d dies: want -CLUSTERDOWN, got %s", f, l, r)
			}
			c.heal()
			n := c.electOther(l)
			if r := c.client(n).do("SET", "k", "v2-new-leader"); !r.isOK() {
				t.Fatalf("SET on the new leader: %s", r)
			}
			at := f
			if at == n {
				at = c.others(l, n)[0]
			}
			_, body := snapshotOf(t, c.client(at).do("SNAPSHOT"))
			hasValues(t, body, []string{"v2-new-leader"}, fmt.Sprintf("SNAPSHOT on m%d under the new leader m%d", at, n))
			c.noPanics()
		})
	}
}
