package loop

import (
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// A LOCK and its UNLOCK in one write are granted and released in one turn of the leader:
// nothing is left to replicate. Run while the proposal window is closed (a large proposal
// awaits its commit alone), they must still be answered once it commits, not held for a
// next proposal that never comes until --cluster-timeout answers -CLUSTERDOWN (issue 25:
// the lock-pairs row of make bench-cluster). The store's journal listed the freed key and
// said it had something to emit, so the replies waited for the next proposal, and the
// journal then emitted nothing.
func TestSimNettedLockPairAnswered(t *testing.T) {
	c := newSim(t, 3, 41)
	l := c.elect()
	a := c.client(l)
	if r := a.do("LOCK", "first", "TIMEOUT", "0", "EXPRIED", "30", "LOCK_ID", "x"); !r.granted() { // reserves fencing tokens
		t.Fatalf("first LOCK: %s", r)
	}
	b := c.client(l)
	var big, pair []byte
	for i := range 200 {
		big = resp.AppendCommand(big, "INCR", "b"+strconv.Itoa(i))
	}
	pair = resp.AppendCommand(pair, "LOCK", "k", "TIMEOUT", "0", "EXPRIED", "30", "LOCK_ID", "x")
	pair = resp.AppendCommand(pair, "UNLOCK", "k", "LOCK_ID", "x")
	start := c.now
	b.write(big)
	a.write(pair)
	c.run(50 * time.Microsecond)
	m := c.ms[l]
	var win uint64
	c.runOn(m, func() { win = m.s.cl.m.Acks.Window() })
	if win != 1 {
		t.Fatalf("%d proposals await their commit after the INCRs, want 1 (the window closed)", win)
	}
	for i := range 200 {
		if r := b.reply(simReplyWait); !r.isInt(1) {
			t.Fatalf("INCR b%d: %s", i, r)
		}
	}
	for _, what := range []string{"LOCK", "UNLOCK"} {
		r := a.reply(simReplyWait)
		if res, ok := r.lockResult(); !ok || res != 0 {
			t.Fatalf("%s of the pair: %s", what, r)
		}
	}
	if took := c.now.Sub(start); took >= c.opt.timeout/2 {
		t.Fatalf("the pair was answered after %v (--cluster-timeout %v)", took, c.opt.timeout)
	}
}
