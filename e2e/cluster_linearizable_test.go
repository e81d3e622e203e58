package e2e

// Linearizability under faults: concurrent clients run INCR and GET at QUORUM through
// every node while a nemesis kills and restarts nodes and cuts and heals their links; the
// history is checked with porcupine against counterModel.

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	linClients  = 6
	linKeys     = 5
	linNemesis  = 20 * time.Second
	linCheckFor = 60 * time.Second
)

func TestClusterLinearizable(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(linNemesis + 90*time.Second)
	h := newHistory()
	var acked, unknown, reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range linClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			hc := &histClient{h: h, k: c.client(i % len(c.nodes)), id: h.client()}
			defer hc.k.close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				op := byte(opGet)
				if r.IntN(2) == 0 {
					op = opIncr
				}
				reply, ok, err := hc.do(op, fmt.Sprintf("lin%d", r.IntN(linKeys)), opTimeout)
				switch {
				case ok && op == opIncr:
					acked.Add(1)
				case ok:
					reads.Add(1)
				case isNotSent(err):
					time.Sleep(20 * time.Millisecond) // the node is down
				default:
					if op == opIncr && !strings.HasPrefix(reply, "-CLUSTERDOWN no leader") {
						unknown.Add(1)
					}
					time.Sleep(time.Duration(10+r.IntN(40)) * time.Millisecond)
				}
				time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
			}
		}()
	}

	faults := c.nemesis(h, linNemesis, 7, nil)
	// Everything healed and running: the cluster settles and the clients go on a moment.
	lead := c.waitLeader(10*time.Second, nil)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	c.check()
	// A final read of every key through the leader, in the history too.
	hc := &histClient{h: h, k: c.client(lead), id: h.client()}
	for i := range linKeys {
		if _, ok, err := hc.do(opGet, fmt.Sprintf("lin%d", i), opTimeout); !ok {
			t.Fatalf("final GET lin%d through the leader: %v", i, err)
		}
	}
	t.Logf("%d faults; %d INCRs acknowledged, %d of unknown outcome, %d reads", faults, acked.Load(), unknown.Load(), reads.Load())
	if acked.Load() < 100 || reads.Load() < 100 {
		t.Fatalf("too little progress under the nemesis to check anything: %d INCRs acknowledged, %d reads; INFO cluster:\n%s", acked.Load(), reads.Load(), c.infos())
	}
	requireLinearizable(t, h.snapshot(), linCheckFor)
}

// nemesis injects faults for d, one at a time, on a random node or on the leader: kill -9
// and isolation in turn, and with pn (the proxy network) slowing one direction of a link
// too. Each lasts 0.5 to 2.5 s; everything is healed and running when it returns the
// number of faults.
func (c *tcluster) nemesis(h *history, d time.Duration, seed uint64, pn *proxyNet) int {
	c.t.Helper()
	kinds := []string{"kill", "isolate"}
	if pn != nil {
		kinds = append(kinds, "delay")
	}
	r := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	faults := 0
	end := time.Now().Add(d)
	for time.Now().Add(3 * time.Second).Before(end) {
		time.Sleep(time.Duration(300+r.IntN(900)) * time.Millisecond)
		victim := r.IntN(len(c.nodes))
		if r.IntN(2) == 0 {
			if l := c.leader(nil); l >= 0 {
				victim = l
			}
		}
		hold := time.Duration(500+r.IntN(2000)) * time.Millisecond
		at := float64(h.now()) / 1e9
		switch kinds[faults%len(kinds)] {
		case "kill":
			c.t.Logf("%6.2fs nemesis: kill -9 node %d for %v", at, c.nodes[victim].id, hold)
			c.kill(victim)
			time.Sleep(hold)
			c.start(victim)
		case "isolate":
			c.t.Logf("%6.2fs nemesis: isolate node %d for %v", at, c.nodes[victim].id, hold)
			c.isolate(victim)
			time.Sleep(hold)
			c.heal(victim)
		case "delay":
			to := c.others(victim)[r.IntN(len(c.nodes)-1)]
			slow := time.Duration(100+r.IntN(1400)) * time.Millisecond
			c.t.Logf("%6.2fs nemesis: delay node %d -> node %d by %v for %v", at, c.nodes[victim].id, c.nodes[to].id, slow, hold)
			pn.delay(victim, to, slow)
			time.Sleep(hold)
			pn.delay(victim, to, 0)
		}
		faults++
		c.check()
	}
	return faults
}
