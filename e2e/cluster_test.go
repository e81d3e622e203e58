package e2e

// The cluster's failure behaviour (issue 13), each in a test: the leader killed, a
// minority partitioned, nodes restarted with and without their data, the consistency
// levels. Every test skips while the binary has no --cluster.

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// electionSlack is how much later than its election timeouts a new leader may be seen:
	// polling INFO every 10 ms, a pre-vote and a vote round, a fsync of the vote.
	electionSlack = 150 * time.Millisecond
	// resumeSlack is how much longer than the election clients on the surviving nodes may
	// pause: the leader-changed answer to a command in flight, a commit round, and the
	// scheduling of four processes on a loaded 2-core machine (616 ms after a 199 ms election
	// once at load 12). Still under --cluster-timeout (1 s here): a client that waited for a
	// timeout instead of the new leader fails it.
	resumeSlack = 600 * time.Millisecond
	// opTimeout is how long a client waits for any answer: a -CLUSTERDOWN must come
	// sooner.
	opTimeout = clusterTimeout + downSlack + 2*time.Second
)

// mustDo runs one command on a fresh connection to slot and wants the reply.
func (c *tcluster) mustDo(slot int, want string, args ...string) {
	c.t.Helper()
	k := c.client(slot)
	defer k.close()
	got, err := k.do(opTimeout, args...)
	if err != nil || got != want {
		c.t.Fatalf("node %d (slot %d): %s: %q (%v), want %q", c.nodes[slot].id, slot, strings.Join(args, " "), got, err, want)
	}
}

// value is key's value read at QUORUM through slot, retried for up to d while the
// cluster elects a leader.
func (c *tcluster) value(slot int, key string, d time.Duration) int64 {
	c.t.Helper()
	k := c.client(slot)
	defer k.close()
	var got string
	var err error
	var v int64
	if !waitUntil(time.Now().Add(d), 50*time.Millisecond, func() bool {
		got, err = k.do(opTimeout, "GET", key)
		var ok bool
		v, ok = intReply(got)
		return err == nil && ok
	}) {
		c.t.Fatalf("GET %s at QUORUM through node %d: %q (%v) for %v", key, c.nodes[slot].id, got, err, d)
	}
	return v
}

// oneReader is a connection to slot that reads at consistency ONE.
func (c *tcluster) oneReader(slot int) *cclient {
	c.t.Helper()
	k := c.client(slot)
	if got, err := k.setup(opTimeout, "CONSISTENCY", "ONE"); err != nil || got != "+OK" {
		c.t.Fatalf("CONSISTENCY ONE on node %d: %q (%v)", c.nodes[slot].id, got, err)
	}
	return k
}

// localValue is key's value on slot's own replica (a read at ONE).
func (c *tcluster) localValue(k *cclient, slot int, key string) (int64, error) {
	got, err := k.do(opTimeout, "GET", key)
	if err != nil {
		return 0, err
	}
	v, ok := intReply(got)
	if !ok {
		return 0, fmt.Errorf("GET %s at ONE on node %d: %q", key, c.nodes[slot].id, got)
	}
	return v, nil
}

// waitLocal waits until slot's replica holds want for key.
func (c *tcluster) waitLocal(slot int, key string, want int64, d time.Duration) {
	c.t.Helper()
	k := c.oneReader(slot)
	defer k.close()
	var v int64
	var err error
	if !waitUntil(time.Now().Add(d), 20*time.Millisecond, func() bool {
		v, err = c.localValue(k, slot, key)
		return err == nil && v == want
	}) {
		c.t.Fatalf("node %d's replica has %s = %d (%v) after %v, want %d; INFO cluster:\n%s", c.nodes[slot].id, key, v, err, d, want, c.infos())
	}
}

// clusterDown runs a command that must be refused with -CLUSTERDOWN within the bound.
func (c *tcluster) clusterDown(k *cclient, slot int, args ...string) {
	c.t.Helper()
	begin := time.Now()
	got, err := k.do(opTimeout, args...)
	took := time.Since(begin)
	switch {
	case err != nil:
		c.t.Fatalf("node %d: %s: no answer after %v (%v); want -CLUSTERDOWN within %v", c.nodes[slot].id, strings.Join(args, " "), took.Round(time.Millisecond), err, clusterTimeout+downSlack)
	case !strings.HasPrefix(got, "-CLUSTERDOWN"):
		c.t.Fatalf("node %d: %s: %q after %v, want -CLUSTERDOWN", c.nodes[slot].id, strings.Join(args, " "), got, took.Round(time.Millisecond))
	case took > clusterTimeout+downSlack:
		c.t.Fatalf("node %d: %s: %q after %v, want it within %v", c.nodes[slot].id, strings.Join(args, " "), got, took.Round(time.Millisecond), clusterTimeout+downSlack)
	}
	c.t.Logf("node %d: %s: %q after %v", c.nodes[slot].id, strings.Join(args, " "), got, took.Round(time.Millisecond))
}

// incrs runs n INCRs of key through slot at QUORUM, each retried (on the same
// connection) while the cluster has no leader; it returns how many were acknowledged and
// how many have an unknown outcome.
func (c *tcluster) incrs(slot int, key string, n int, d time.Duration) (acked, unknown int) {
	c.t.Helper()
	k := c.client(slot)
	defer k.close()
	end := time.Now().Add(d)
	for acked < n {
		if time.Now().After(end) {
			c.t.Fatalf("INCR %s through node %d: %d of %d acknowledged in %v; INFO cluster:\n%s", key, c.nodes[slot].id, acked, n, d, c.infos())
		}
		got, err := k.do(opTimeout, "INCR", key)
		if _, ok := intReply(got); err == nil && ok {
			acked++
			continue
		}
		if !isNotSent(err) && !strings.HasPrefix(got, "-CLUSTERDOWN no leader") {
			unknown++
		}
		time.Sleep(50 * time.Millisecond)
	}
	return acked, unknown
}

// TestClusterLeaderKilled: clients write through every node; the leader is killed with
// SIGKILL. A new leader must be elected within two election timeouts, the clients on the
// other nodes must go on after at most that pause, and no acknowledged INCR may be lost.
func TestClusterLeaderKilled(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(60 * time.Second)
	lead := c.waitLeader(5*time.Second, nil)
	before, _ := c.info(lead)
	h := newHistory()
	const key = "lk"
	type writer struct {
		acked, unknown int
		acks           []time.Time
	}
	ws := make([]*writer, 3)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s := range 3 {
		ws[s] = &writer{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &histClient{h: h, k: c.client(s), id: h.client()}
			defer hc.k.close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				reply, ok, err := hc.do(opIncr, key, opTimeout)
				switch {
				case ok:
					ws[s].acked++
					ws[s].acks = append(ws[s].acks, time.Now())
				case isNotSent(err) || strings.HasPrefix(reply, "-CLUSTERDOWN no leader"):
					time.Sleep(10 * time.Millisecond) // nothing was run
				default:
					ws[s].unknown++
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	killed := time.Now()
	c.kill(lead)
	t.Logf("killed the leader, node %d (slot %d), term %s", c.nodes[lead].id, lead, before["term"])
	next := c.waitLeader(10*time.Second, c.others(lead))
	elected := time.Since(killed)
	after, _ := c.info(next)
	t0, _ := strconv.Atoi(before["term"])
	t1, _ := strconv.Atoi(after["term"])
	// Each election round (a term; a split vote costs one) may take up to two election
	// timeouts: raft draws each timeout from [1, 2) times the election timeout.
	rounds := max(t1-t0, 1)
	t.Logf("node %d (slot %d) leader in term %d, %v after the kill (%d round(s); election timeout %v)", c.nodes[next].id, next, t1, elected.Round(time.Millisecond), rounds, electionTO)
	if limit := time.Duration(rounds)*2*electionTO + electionSlack; elected > limit {
		t.Errorf("a new leader %v after the leader was killed, want within %v (%d election round(s) of two election timeouts + %v)", elected.Round(time.Millisecond), limit, rounds, electionSlack)
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	c.check()

	acked, unknown := 0, 0
	for s, w := range ws {
		acked += w.acked
		unknown += w.unknown
		if s == lead {
			continue
		}
		// The longest pause between acknowledgements around the kill.
		var gap time.Duration
		var after int
		for i := 1; i < len(w.acks); i++ {
			if w.acks[i].After(killed) {
				after++
				if w.acks[i-1].Before(killed.Add(elected + time.Second)) {
					gap = max(gap, w.acks[i].Sub(w.acks[i-1]))
				}
			}
		}
		t.Logf("client of node %d: %d acknowledged (%d after the kill), %d unknown, longest pause %v", c.nodes[s].id, w.acked, after, w.unknown, gap.Round(time.Millisecond))
		if after == 0 {
			t.Errorf("the client of node %d had no INCR acknowledged after the kill", c.nodes[s].id)
		} else if gap > elected+resumeSlack {
			t.Errorf("the client of node %d paused %v, want at most the election's %v + %v", c.nodes[s].id, gap.Round(time.Millisecond), elected.Round(time.Millisecond), resumeSlack)
		}
	}
	final := c.value(next, key, 5*time.Second)
	t.Logf("%s = %d: %d INCRs acknowledged, %d of unknown outcome", key, final, acked, unknown)
	if final < int64(acked) || final > int64(acked+unknown) {
		t.Errorf("%s = %d after %d acknowledged INCRs and %d of unknown outcome: want %d..%d", key, final, acked, unknown, acked, acked+unknown)
	}
	hc := &histClient{h: h, k: c.client(next), id: h.client()}
	if _, ok, err := hc.do(opGet, key, opTimeout); !ok {
		t.Fatalf("final GET: %v", err)
	}
	requireLinearizable(t, h.snapshot(), 30*time.Second)
}

// TestClusterMinorityPartition cuts one node off its peers, first a follower, then the
// leader: writes at QUORUM and ALL and reads at QUORUM on it must be answered
// -CLUSTERDOWN within the bound and never acknowledged, reads at ONE are still served, the
// majority goes on, and once the link is back the node catches up.
func TestClusterMinorityPartition(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(90 * time.Second)
	for _, who := range []string{"follower", "leader"} {
		lead := c.waitLeader(5*time.Second, nil)
		victim := c.others(lead)[0]
		if who == "leader" {
			victim = lead
		}
		key := "mp-" + who
		maj := c.others(victim)
		acked, unsure := c.incrs(maj[0], key, 5, 10*time.Second)
		base := c.value(maj[1], key, 5*time.Second)
		if base < int64(acked) || base > int64(acked+unsure) {
			t.Fatalf("%s = %d after %d acknowledged INCRs and %d of unknown outcome", key, base, acked, unsure)
		}
		c.waitLocal(victim, key, base, 5*time.Second)

		// The minority's clients are connected, their levels set, before the cut.
		levels := map[string]*cclient{}
		for _, level := range []string{"QUORUM", "ALL"} {
			levels[level] = c.client(victim)
			if got, err := levels[level].setup(opTimeout, "CONSISTENCY", level); err != nil || got != "+OK" {
				t.Fatalf("CONSISTENCY %s on node %d: %q (%v)", level, c.nodes[victim].id, got, err)
			}
		}
		one := c.oneReader(victim)

		c.isolate(victim)
		t.Logf("isolated the %s, node %d (slot %d)", who, c.nodes[victim].id, victim)
		attempts := 0
		for _, level := range []string{"QUORUM", "ALL"} {
			k := levels[level]
			for range 2 {
				attempts++
				c.clusterDown(k, victim, "INCR", key)
			}
			c.clusterDown(k, victim, "GET", key)
		}
		// The majority goes on (electing a leader first if it lost its own).
		more, moreUnsure := c.incrs(maj[1], key, 5, 10*time.Second)
		// ONE reads on the minority are served: the value it had (a leader may show its own
		// writes, not yet committed).
		v, err := c.localValue(one, victim, key)
		if err != nil {
			t.Fatalf("a read at ONE on the isolated %s: %v", who, err)
		}
		if who == "follower" && v != base || v < base || v > base+int64(attempts) {
			t.Fatalf("a read at ONE on the isolated %s: %s = %d, want %d (the value before the partition)", who, key, v, base)
		}
		c.check()

		c.heal(victim)
		t.Logf("healed node %d", c.nodes[victim].id)
		// The minority's writes had unknown outcomes: they may still commit after the heal.
		var final, local int64
		if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
			final = c.value(maj[0], key, 5*time.Second)
			local, err = c.localValue(one, victim, key)
			return err == nil && local == final
		}) {
			t.Fatalf("after the heal node %d's replica has %s = %d (%v), the majority %d; INFO cluster:\n%s", c.nodes[victim].id, key, local, err, final, c.infos())
		}
		if lo, hi := base+int64(more), base+int64(more+moreUnsure+attempts); final < lo || final > hi {
			t.Fatalf("%s = %d: want %d..%d (%d before the partition, %d acknowledged by the majority, %d of unknown outcome there, %d refused on the minority)",
				key, final, lo, hi, base, more, moreUnsure, attempts)
		}
		// One leader, and the healed node follows it.
		lead = c.waitLeader(5*time.Second, nil)
		if who == "leader" && lead == victim {
			t.Logf("the old leader was elected again after the heal")
		}
		if !waitUntil(time.Now().Add(5*time.Second), 20*time.Millisecond, func() bool {
			m, err := c.info(victim)
			return err == nil && (m["role"] == "follower" || victim == lead && m["role"] == "leader") &&
				m["leader_id"] == strconv.FormatUint(c.nodes[lead].id, 10)
		}) {
			t.Fatalf("after the heal node %d does not follow leader %d; INFO cluster:\n%s", c.nodes[victim].id, c.nodes[lead].id, c.infos())
		}
		one.close()
	}
}

// TestClusterRestart: a follower killed and restarted with its data catches up on what
// it missed; then, its data directory lost, it is removed and rejoins as a new node
// through --join: a learner, promoted to voter, and caught up.
func TestClusterRestart(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(90 * time.Second)
	lead := c.waitLeader(5*time.Second, nil)
	victim, other := c.others(lead)[0], c.others(lead)[1]
	const key = "rs"
	want := 0
	add := func(slot, n int) {
		t.Helper()
		a, u := c.incrs(slot, key, n, 10*time.Second)
		if u != 0 {
			t.Fatalf("%d INCRs of unknown outcome with every member up", u)
		}
		want += a
	}
	add(lead, 10)
	c.waitLocal(victim, key, int64(want), 5*time.Second)

	c.kill(victim)
	add(lead, 10)
	add(other, 10)
	c.start(victim)
	c.waitServing(victim, 10*time.Second)
	c.waitLocal(victim, key, int64(want), 10*time.Second)
	add(victim, 1) // QUORUM writes through it work again
	if v := c.value(lead, key, 5*time.Second); v != int64(want) {
		t.Fatalf("%s = %d, want %d", key, v, want)
	}
	c.check()

	// Its data lost: removed, and back as node 4.
	oldID := c.nodes[victim].id
	c.kill(victim)
	lead = c.waitLeader(5*time.Second, c.others(victim))
	c.mustDo(lead, "+OK", "CLUSTER", "REMOVE", strconv.FormatUint(oldID, 10))
	if !waitUntil(time.Now().Add(5*time.Second), 20*time.Millisecond, func() bool {
		m, err := c.info(lead)
		_, listed := m["peer_"+strconv.FormatUint(oldID, 10)]
		return err == nil && !listed
	}) {
		t.Fatalf("node %d still listed after CLUSTER REMOVE; INFO cluster:\n%s", oldID, c.infos())
	}
	add(lead, 5) // two voters, both up
	via := c.others(victim, lead)[0]
	c.wipeJoin(victim, 4, via)
	t.Logf("node %d's data wiped; it joins as node 4 through node %d", oldID, c.nodes[via].id)
	var seen []string
	if !waitUntil(time.Now().Add(15*time.Second), 10*time.Millisecond, func() bool {
		m, err := c.info(lead)
		if err != nil {
			return false
		}
		p := m["peer_4"]
		if len(seen) == 0 || seen[len(seen)-1] != p {
			seen = append(seen, p)
		}
		return isVoter(p)
	}) {
		t.Fatalf("node 4 never became a voter; the leader's peer_4 went %q; INFO cluster:\n%s", seen, c.infos())
	}
	t.Logf("the leader's peer_4: %q", seen)
	c.waitServing(victim, 10*time.Second)
	if !waitUntil(time.Now().Add(5*time.Second), 20*time.Millisecond, func() bool {
		m, err := c.info(victim)
		return err == nil && m["node_id"] == "4" && m["role"] == "follower"
	}) {
		t.Fatalf("node 4 is not a follower; INFO cluster:\n%s", c.infos())
	}
	c.waitLocal(victim, key, int64(want), 10*time.Second)
	add(victim, 1)
	if v := c.value(victim, key, 5*time.Second); v != int64(want) {
		t.Fatalf("%s = %d through node 4, want %d", key, v, want)
	}
}

// TestClusterConsistencyLevels: CONSISTENCY answers and sets the connection's level;
// with a voter down, ALL writes are refused within the bound, QUORUM and ONE ones succeed.
func TestClusterConsistencyLevels(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(60 * time.Second)
	lead := c.waitLeader(5*time.Second, nil)
	f1, f2 := c.others(lead)[0], c.others(lead)[1]
	k := c.client(f1)
	must := func(k *cclient, want string, args ...string) {
		t.Helper()
		got, err := k.do(opTimeout, args...)
		if err != nil || got != want {
			t.Fatalf("%s: %q (%v), want %q", strings.Join(args, " "), got, err, want)
		}
	}
	must(k, "+QUORUM", "CONSISTENCY")
	must(k, "+OK", "CONSISTENCY", "ONE")
	must(k, "+ONE", "CONSISTENCY")
	must(k, "+OK", "CONSISTENCY", "ALL")
	must(k, "+ALL", "CONSISTENCY")
	if got, err := k.do(opTimeout, "CONSISTENCY", "TWO"); err != nil || !strings.HasPrefix(got, "-") {
		t.Fatalf("CONSISTENCY TWO: %q (%v), want an error", got, err)
	}
	must(k, "+ALL", "CONSISTENCY")
	must(k, ":1", "INCR", "cl")                  // ALL, every voter up
	must(c.client(f1), "+QUORUM", "CONSISTENCY") // per connection: a new one has the default

	c.kill(f2)
	t.Logf("killed node %d, a follower", c.nodes[f2].id)
	acked, unknown := 1, 0
	for _, slot := range []int{lead, f1} {
		ka := c.client(slot)
		must(ka, "+OK", "CONSISTENCY", "ALL")
		c.clusterDown(ka, slot, "INCR", "cl")
		unknown++
		for _, level := range []string{"QUORUM", "ONE"} {
			kl := c.client(slot)
			must(kl, "+OK", "CONSISTENCY", level)
			got, err := kl.do(opTimeout, "INCR", "cl")
			if _, ok := intReply(got); err != nil || !ok {
				t.Fatalf("INCR at %s through node %d with a follower down: %q (%v)", level, c.nodes[slot].id, got, err)
			}
			acked++
		}
	}
	v := c.value(lead, "cl", 5*time.Second)
	if v < int64(acked) || v > int64(acked+unknown) {
		t.Fatalf("cl = %d after %d acknowledged INCRs and %d refused at ALL", v, acked, unknown)
	}
	// The follower back: ALL writes go through again.
	c.start(f2)
	c.waitServing(f2, 10*time.Second)
	ka := c.client(f1)
	must(ka, "+OK", "CONSISTENCY", "ALL")
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		got, err := ka.do(opTimeout, "INCR", "cl")
		_, ok := intReply(got)
		return err == nil && ok
	}) {
		t.Fatalf("INCR at ALL never succeeded after the follower came back; INFO cluster:\n%s", c.infos())
	}
}
