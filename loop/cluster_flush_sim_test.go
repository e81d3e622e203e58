package loop

import (
	"strconv"
	"testing"
	"time"
)

// A FLUSHALL on the leader goes through the raft log as one flush record: every member
// empties its keyspace, in the same order with the writes around it, and a member restarted
// from its raft log does not bring a flushed key back (issue 21, item 8).
func TestSimFlushReplicated(t *testing.T) {
	c := newSim(t, 3, 11)
	l := c.elect()
	a := c.client(l)
	for i := range 20 {
		if r := a.do("SET", "k"+strconv.Itoa(i), "v"); !r.isOK() {
			t.Fatalf("SET: %s", r)
		}
	}
	for _, cmd := range [][]string{{"FLUSHALL"}, {"SET", "after", "1"}} {
		if r := a.do(cmd...); !r.isOK() {
			t.Fatalf("%v: %s", cmd, r)
		}
	}
	check := func(when string) {
		t.Helper()
		c.run(200 * time.Millisecond)
		for _, id := range c.others() {
			b := c.client(id)
			b.do("CONSISTENCY", "ONE")
			if r := b.do("GET", "k3"); r.raw == nil || !r.r.Null {
				t.Fatalf("%s: GET k3 at ONE on m%d: %s", when, id, r)
			}
			if r := b.do("GET", "after"); !r.isBulk("1") {
				t.Fatalf("%s: GET after at ONE on m%d: %s", when, id, r)
			}
			if r := b.do("DBSIZE"); !r.isInt(1) {
				t.Fatalf("%s: DBSIZE at ONE on m%d: %s", when, id, r)
			}
		}
	}
	check("after the flush")
	f := c.others(l)[0]
	c.kill(f)
	if err := c.restart(f); err != nil {
		t.Fatal(err)
	}
	check("a follower restarted")
	c.noPanics()
}
