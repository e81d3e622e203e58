package loop

import (
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/proto/resp"
)

// Under load a large proposal awaits its commit alone: what arrives meanwhile goes into the
// next one, so a round costs one raft entry for more writes (issue 25). A small proposal
// (a light load) still lets the next go at once, for latency. Every write is acknowledged
// with its value either way, and the followers apply them all.
func TestSimProposalWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  int    // INCRs on distinct keys in the first client's one write
		window uint64 // proposals awaiting their commit once the second client's INCRs ran
	}{
		{"large first proposal", 200, 1},
		{"small first proposal", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newSim(t, 3, 25)
			l := c.elect()
			a, b := c.client(l), c.client(l)
			var big []byte
			for i := range tc.first {
				big = resp.AppendCommand(big, "INCR", "a"+strconv.Itoa(i))
			}
			m := c.ms[l]
			var seq0 uint64
			c.runOn(m, func() { seq0 = m.s.cl.m.Acks.Seq })
			a.write(big)
			b.send("INCR", "b")
			// Both writes are served before any proposal can commit (a fake fsync and a
			// link's latency away).
			c.run(50 * time.Microsecond)
			var seq, win uint64
			var last int
			c.runOn(m, func() { seq, win, last = m.s.cl.m.Acks.Seq, m.s.cl.m.Acks.Window(), m.s.cl.m.LastProposal() })
			if seq-seq0 != tc.window || win != tc.window {
				t.Fatalf("after both writes: %d proposals made, %d awaiting their commit (last %d bytes); want %d",
					seq-seq0, win, last, tc.window)
			}
			if big := last >= cluster.SoloProposal; big != (tc.window == 1) {
				t.Fatalf("the last proposal has %d bytes: the test's load does not fit cluster.SoloProposal (%d)", last, cluster.SoloProposal)
			}
			for i := range tc.first {
				if r := a.reply(simReplyWait); !r.isInt(1) {
					t.Fatalf("INCR a%d: %s", i, r)
				}
			}
			if r := b.reply(simReplyWait); !r.isInt(1) {
				t.Fatalf("INCR b: %s", r)
			}
			c.run(200 * time.Millisecond)
			for _, id := range c.others(l) {
				f := c.client(id)
				f.do("CONSISTENCY", "ONE")
				for _, k := range []string{"b", "a0", "a" + strconv.Itoa(tc.first-1)} {
					if r := f.do("GET", k); !r.isBulk("1") {
						t.Fatalf("GET %s at ONE on m%d: %s", k, id, r)
					}
				}
			}
			c.noPanics()
		})
	}
}
