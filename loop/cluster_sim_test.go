package loop

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 19's four scenarios in the simulated cluster (sim_test.go), as regression tests of
// the fixed behaviour. On failure the test prints the simulation's trace: every peer frame
// (raft messages decoded, heartbeats left out; TALLYD_SIM_TRACE=all shows them), every client
// command and reply, every fault, and the members' log lines, on the fake clock.

// simLock is the lock: try once, hold for 30 s.
var simLock = []string{"LOCK", "k", "TIMEOUT", "0", "EXPRIED", "30"}

// refused checks that a LOCK that must not be granted was not: a lock reply that is not a
// grant (TIMEOUT), or -CLUSTERDOWN. A grant fails the test with why.
func refused(t *testing.T, r simReply, why string) {
	t.Helper()
	switch res, ok := r.lockResult(); {
	case ok && res == 0:
		t.Fatalf("%s: granted: %s", why, r)
	case ok:
	case r.isErr("CLUSTERDOWN"):
	default:
		t.Fatalf("%s: neither a refusal nor -CLUSTERDOWN: %s", why, r)
	}
}

// ---------------------------------------------------------------------------------------
// 1. Young locks are lost at failover.

// A takes k on the leader and is told OK; the leader then dies (or is cut off) before the
// lock is a second old. B, on another member, must not get k from the new leader.
func TestSimYoungLockSurvivesFailover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		isolate bool // the leader is partitioned away rather than killed
		binary  bool // A and B use binary slock Lock frames
	}{
		{"text/killed", false, false},
		{"text/isolated", true, false},
		{"binary/killed", false, true},
		{"binary/isolated", true, true},
	} {
		for _, seed := range []uint64{1, 5, 7} {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				l := c.elect()
				a := c.client(l)
				if tc.binary {
					if r := a.lock("k", 0, 30); !r.granted() {
						t.Fatalf("A's binary Lock on the leader m%d: %s", l, r)
					}
				} else if r := a.do(simLock...); !r.granted() {
					t.Fatalf("A's LOCK on the leader m%d: %s", l, r)
				}
				c.run(time.Duration(c.rng.Int64N(int64(500 * time.Millisecond)))) // still young
				if tc.isolate {
					c.partition(l)
				} else {
					c.kill(l)
				}
				n := c.electOther(l)
				// B on the new leader, and B' on the other member (forwarded to it).
				for _, id := range c.others(l) {
					b := c.client(id)
					why := fmt.Sprintf("B's Lock of k on m%d (m%d leads now) while A holds k from the old leader m%d", id, n, l)
					if tc.binary {
						if r := b.lock("k", 0, 30); r.granted() {
							t.Fatalf("%s: granted: %s", why, r)
						}
					} else {
						refused(t, b.do(simLock...), why)
					}
				}
				c.noPanics()
			})
		}
	}
}

// A is connected to the leader when the leader is partitioned away: a LOCK it sends then is
// never granted (the grant cannot be replicated): it is answered -CLUSTERDOWN, or A's
// connection is closed. Whatever B gets on the majority side, A is never left believing
// it holds k at the same time.
func TestSimLockOnIsolatedLeader(t *testing.T) {
	for _, seed := range []uint64{1, 5, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			c := newSim(t, 3, seed)
			l := c.elect()
			a := c.client(l)
			if r := a.do("PING"); r.String() != "+PONG" {
				t.Fatalf("PING: %s", r)
			}
			c.partition(l)
			a.send(simLock...)
			ra := a.reply(simReplyWait)
			if ra.granted() {
				t.Fatalf("A's LOCK on the isolated leader m%d was granted: %s", l, ra)
			}
			if !ra.closed && !ra.isErr("CLUSTERDOWN") {
				t.Fatalf("A's LOCK on the isolated leader m%d: want -CLUSTERDOWN or the connection closed, got %s", l, ra)
			}
			c.electOther(l)
			b := c.client(c.others(l)[0])
			if r := b.do(simLock...); !r.granted() {
				t.Fatalf("B's LOCK on the majority side (A was never granted k): %s", r)
			}
			c.noPanics()
		})
	}
}

// At CONSISTENCY ONE a grant may be lost at failover (the fast path, as Cassandra's ONE),
// but its holder is told: A takes k at ONE on the leader (or through a follower), the
// leader is cut off, and if B then gets k from the new leader, A's connection is closed
// (within two seconds), not left open as if A still held k.
func TestSimLockAtOneHolderIsTold(t *testing.T) {
	for _, viaFollower := range []bool{false, true} {
		for _, seed := range []uint64{1, 5, 7} {
			name := "on-leader"
			if viaFollower {
				name = "via-follower"
			}
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				l := c.elect()
				at := l
				if viaFollower {
					at = c.others(l)[0]
				}
				a := c.client(at)
				if r := a.do("CONSISTENCY", "ONE"); !r.isOK() {
					t.Fatalf("CONSISTENCY ONE: %s", r)
				}
				if r := a.do(simLock...); !r.granted() {
					t.Fatalf("A's LOCK at ONE on m%d: %s", at, r)
				}
				c.partition(l)
				n := c.electOther(l)
				b := c.client(n)
				rb := b.do(simLock...)
				if !rb.granted() {
					return // k survived: A still holds it
				}
				granted := c.elapsed()
				if !c.runUntil(func() bool { return a.closed }, 2*time.Second) {
					t.Fatalf("B got k from m%d at %v; A, which took k at ONE through m%d, still has its connection open at %v",
						n, granted, at, c.elapsed())
				}
				c.noPanics()
			})
		}
	}
}

// ---------------------------------------------------------------------------------------
// 2. A deposed leader answers stale reads and grants given-away locks.

// The leader L loses one follower; the other follower's messages to L are delayed by d
// (the delay grows to d steadily, so that L keeps hearing from it, late, and keeps
// believing it leads: raft's CheckQuorum is satisfied); L has a proposal in
// flight; then what L sends is held, and the two followers elect N. Through N, B writes
// x=new (acknowledged) and takes k. A, on L at QUORUM, then reads x and locks k: it must
// never read "old" nor be granted k. (-CLUSTERDOWN or a closed connection are fine.)
func TestSimDeposedLeader(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 2500 * time.Millisecond, 3 * time.Second} {
		for _, seed := range []uint64{1, 5, 7} {
			t.Run(fmt.Sprintf("delay%v/seed%d", d, seed), func(t *testing.T) {
				// The run: tallyd's default raft tick and --cluster-timeout.
				c := newSim(t, 3, seed, func(o *simOptions) { o.raftTick, o.timeout = 100*time.Millisecond, 2*time.Second })
				l := c.elect()
				fs := c.others(l)
				f1, f2 := fs[0], fs[1]
				if seed%2 == 0 {
					f1, f2 = f2, f1
				}
				a := c.client(l)
				if r := a.do("SET", "x", "old"); !r.isOK() {
					t.Fatalf("SET x old on m%d: %s", l, r)
				}
				c.cut(l, f1)
				// F2's answers come later and later, but keep coming: L hears from a quorum.
				c.delayRamp(f2, l, d, 2*d)
				c.run(2*d + 100*time.Millisecond)
				if c.leader() != l {
					t.Fatalf("m%d no longer leads before the proposal: %s", l, c.raftState(l))
				}
				w := c.client(l)
				w.send("SET", "y", "1") // L's proposal in flight
				c.run(5*time.Millisecond + time.Duration(c.rng.Int64N(int64(20*time.Millisecond))))
				c.hold(l, f2) // L is cut off: what it sends goes nowhere
				n := c.electOther(l)
				b := c.client(n)
				if r := b.do("SET", "x", "new"); !r.isOK() {
					t.Fatalf("B's SET x new through the new leader m%d: %s", n, r)
				}
				if r := b.do(simLock...); !r.granted() {
					t.Fatalf("B's LOCK k through the new leader m%d: %s", n, r)
				}
				acked := c.elapsed()
				a.send("GET", "x")
				a.send(simLock...)
				rg := a.reply(2 * d)
				rl := a.reply(2 * d)
				if rg.isBulk("old") {
					t.Errorf("A read x = \"old\" on the deposed leader m%d at %v, after B's SET x new was acknowledged by m%d at %v",
						l, c.elapsed(), n, acked)
				}
				if rl.granted() {
					t.Errorf("the deposed leader m%d granted k to A at %v, after m%d granted it to B at %v: %s",
						l, c.elapsed(), n, acked, rl)
				}
				if t.Failed() {
					t.FailNow()
				}
				for _, r := range []simReply{rg, rl} {
					if !r.closed && !r.none && !r.isErr("CLUSTERDOWN") && !r.isBulk("new") {
						if _, ok := r.lockResult(); !ok {
							t.Fatalf("A on the deposed leader m%d: unexpected reply %s", l, r)
						}
					}
				}
				c.noPanics()
			})
		}
	}
}

// ---------------------------------------------------------------------------------------
// 3. A member that lost its disk can destroy acknowledged writes.

// A leads and B is down; 200 INCRs are acknowledged at QUORUM by A and C. A and C crash,
// and C's data directory is wiped. B and C restart with their usual flags. C, empty, must
// not help B lead: every GET at QUORUM answers 200 or -CLUSTERDOWN. Once A is back, it is 200.
func TestSimWipedMemberCannotElect(t *testing.T) {
	for _, seed := range []uint64{5, 7} {
		t.Run(fmt.Sprintf("new/seed%d", seed), func(t *testing.T) {
			c := newSim(t, 3, seed)
			a := c.elect()
			rest := c.others(a)
			b, w := rest[0], rest[1]
			c.kill(b)
			const n = 200
			c.client(a).incrs(t, "n", n)
			c.kill(a)
			c.kill(w)
			c.wipe(w)
			if err := c.restart(b); err != nil {
				t.Fatalf("B (m%d) restarting on its data: %v", b, err)
			}
			if err := c.restart(w, simNew); err != nil {
				t.Logf("C (m%d), wiped, refused to start with --initial-cluster-state new: %v", w, err)
			}
			// Five seconds of reads through B and C: 200, or -CLUSTERDOWN while A is away.
			check := func(phase string) (saw200 bool) {
				for _, id := range []uint64{b, w} {
					if !c.ms[id].up {
						continue
					}
					r := c.client(id).do("GET", "n")
					switch {
					case r.isBulk(strconv.Itoa(n)):
						saw200 = true
					case r.isErr("CLUSTERDOWN"), r.closed:
					default:
						t.Fatalf("%s: GET n at QUORUM on m%d answered %s; %d INCRs were acknowledged (%s; %s)",
							phase, id, r, n, c.raftState(b), c.raftState(w))
					}
				}
				return saw200
			}
			for i := 0; i < 10; i++ {
				c.run(500 * time.Millisecond)
				check("A away")
			}
			if err := c.restart(a); err != nil {
				t.Fatalf("A (m%d) restarting: %v", a, err)
			}
			ok := false
			for i := 0; i < 20 && !ok; i++ {
				c.run(500 * time.Millisecond)
				ok = check("A back")
			}
			if !ok {
				t.Fatalf("A is back and GET n never answered %d (%s; %s; %s)", n, c.raftState(a), c.raftState(b), c.raftState(w))
			}
			c.noPanics()
		})
	}
}

// A wiped member restarted with the default --initial-cluster-state (existing) refuses to
// start, and says how to bring it back.
func TestSimWipedMemberExistingRefuses(t *testing.T) {
	c := newSim(t, 3, 1)
	l := c.elect()
	w := c.others(l)[0]
	if r := c.client(l).do("SET", "x", "1"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	c.kill(w)
	c.wipe(w)
	err := c.restart(w, simExisting)
	if err == nil {
		t.Fatalf("m%d started on an empty data directory without --initial-cluster-state new", w)
	}
	if !strings.Contains(err.Error(), "--initial-cluster-state") {
		t.Fatalf("m%d refused to start, but the error does not name --initial-cluster-state: %v", w, err)
	}
	c.noPanics()
}

// The leader is up when a wiped member comes back with --initial-cluster-state new and its
// old --cluster list, or with --join (through the leader) and its old --node-id. The leader
// believes the member holds entries it lost; the member must not panic on the leader's
// messages (tocommit(55) is out of range [lastIndex(3)]) but stop cleanly with its fatal
// error set; until then a GET through it at QUORUM answers the acknowledged value or
// -CLUSTERDOWN; the others go on serving.
//
// With peer links authenticated (the cluster key) the leader's heartbeat is proof, and the
// wiped member stops (ErrMemberState, exit 78). TestSimWipedMemberInsecure: without a key a
// heartbeat could be forged, so it only drops the link.
func TestSimWipedMemberWithLeaderUp(t *testing.T) {
	for _, join := range []bool{false, true} {
		for _, seed := range []uint64{5, 7} {
			name := "new"
			if join {
				name = "join"
			}
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				l := c.elect()
				w := c.others(l)[0]
				const n = 60
				c.client(l).incrs(t, "n", n)
				c.kill(w)
				c.wipe(w)
				flags := simNew
				if join {
					addr := c.ms[l].peerAddr
					flags = func(cfg *Config) { cfg.Cluster.Peers, cfg.Cluster.Join = map[uint64]string{}, addr }
				}
				if err := c.restart(w, flags); err != nil {
					t.Logf("m%d refused to start: %v", w, err)
				}
				for i := 0; i < 6; i++ {
					c.run(500 * time.Millisecond)
					c.noPanics()
					if !c.ms[w].up {
						continue
					}
					if r := c.client(w).do("GET", "n"); !r.isBulk(strconv.Itoa(n)) && !r.isErr("CLUSTERDOWN") && !r.closed {
						t.Fatalf("GET n at QUORUM through the wiped member m%d: %s (%s)", w, r, c.raftState(w))
					}
				}
				m := c.ms[w]
				if m.up {
					t.Fatalf("the wiped member m%d still runs (%s): it must stop when the leader shows it lost its data", w, c.raftState(w))
				}
				if m.fatal == nil && m.bootErr == nil {
					t.Fatalf("the wiped member m%d is down without an error", w)
				}
				if r := c.client(l).do("GET", "n"); !r.isBulk(strconv.Itoa(n)) {
					t.Fatalf("GET n on the leader m%d: %s", l, r)
				}
			})
		}
	}
}

// ---------------------------------------------------------------------------------------
// 4. Mutexes get stuck.

// A takes SETNX m through a follower F with CLIENT SLOCK ON (slock's mutex: a key that only
// its holder deletes; without it SETNX makes a Redis key, anyone's); then the leader
// changes (or only F's peer links blip for 0.3 s). Another client's DEL m must answer 0,
// A's DEL m through F 1, and another client's SETNX m afterwards must succeed.
func TestSimMutexSurvivesLeaderChange(t *testing.T) {
	for _, blip := range []bool{false, true} {
		for _, seed := range []uint64{1, 5, 7} {
			name := "leader-changes"
			if blip {
				name = "links-blip"
			}
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				l := c.elect()
				fs := c.others(l)
				f, g := fs[0], fs[1]
				a := c.client(f)
				if r := a.do("CLIENT", "SLOCK", "ON"); !r.isOK() {
					t.Fatalf("CLIENT SLOCK ON: %s", r)
				}
				if r := a.do("SETNX", "m", "v"); !r.isInt(1) {
					t.Fatalf("A's SETNX m through follower m%d: %s", f, r)
				}
				c.run(time.Duration(c.rng.Int64N(int64(300 * time.Millisecond))))
				if blip {
					c.cutAll(f)
					c.run(300 * time.Millisecond)
					c.heal()
				} else {
					c.transfer(g)
				}
				b := c.client(g)
				if r := b.do("DEL", "m"); !r.isInt(0) {
					t.Fatalf("B's DEL m of A's mutex through m%d: %s", g, r)
				}
				if r := a.do("DEL", "m"); !r.isInt(1) {
					t.Fatalf("A's DEL m through m%d after the %s (%s leads): %s", f, name, c.raftState(c.leader()), r)
				}
				if r := b.do("SETNX", "m", "v2"); !r.isInt(1) {
					t.Fatalf("B's SETNX m after A's DEL: %s", r)
				}
				c.noPanics()
			})
		}
	}
}

// A new cluster's first leader is lost (killed or cut off) right after it was elected,
// before its followers heard that its first entry committed: they started empty, and
// their logs are the same. They must still elect one of them (the guard that keeps a
// wiped member from voting must not stop a new cluster's second election).
func TestSimNewClusterLosesFirstLeaderEarly(t *testing.T) {
	for _, isolate := range []bool{false, true} {
		for _, seed := range []uint64{1, 5, 7} {
			name := "killed"
			if isolate {
				name = "isolated"
			}
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				c := newSim(t, 3, seed)
				if !c.runUntil(func() bool { return c.leader() != 0 }, 10*time.Second) {
					t.Fatal("no first leader")
				}
				l := c.leader()
				if isolate {
					c.partition(l)
				} else {
					c.kill(l)
				}
				n := c.electOther(l)
				if r := c.client(n).do("SET", "x", "1"); !r.isOK() {
					t.Fatalf("SET on the second leader m%d: %s", n, r)
				}
				c.noPanics()
			})
		}
	}
}

// Without a cluster key the heartbeat that shows a wiped member lost its data could be a
// stranger's forgery (issue 20: no frame may take a member down), so the member only drops
// the link and says why; it still never panics, never votes a leader in and never answers
// stale data.
func TestSimWipedMemberInsecure(t *testing.T) {
	for _, seed := range []uint64{5, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			c := newSim(t, 3, seed, simInsecure)
			l := c.elect()
			w := c.others(l)[0]
			const n = 60
			c.client(l).incrs(t, "n", n)
			c.kill(w)
			c.wipe(w)
			if err := c.restart(w, simNew); err != nil {
				t.Fatalf("m%d refused to start: %v", w, err)
			}
			for i := 0; i < 6; i++ {
				c.run(500 * time.Millisecond)
				c.noPanics()
				if r := c.client(w).do("GET", "n"); !r.isBulk(strconv.Itoa(n)) && !r.isErr("CLUSTERDOWN") && !r.closed {
					t.Fatalf("GET n at QUORUM through the wiped member m%d: %s (%s)", w, r, c.raftState(w))
				}
			}
			if !c.ms[w].up {
				t.Fatalf("the wiped member m%d stopped on an unauthenticated heartbeat", w)
			}
			if !c.logged(w, "lost its data") {
				t.Fatalf("the wiped member m%d never said it lost its data", w)
			}
			if r := c.client(l).do("GET", "n"); !r.isBulk(strconv.Itoa(n)) {
				t.Fatalf("GET n on the leader m%d: %s", l, r)
			}
		})
	}
}
