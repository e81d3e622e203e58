package loop

import (
	"strconv"
	"testing"
	"time"
)

// incrScript increments KEYS[1] and sets KEYS[2] to the new value: two records per run.
const incrScript = "local n = redis.call('INCR', KEYS[1]); redis.call('SET', KEYS[2], n); return n"

// A script sent through a follower runs on the leader, once; its reply waits for its writes
// to be committed, so that every script acknowledged survives the leader's death, and every
// member applies the writes (followers apply records, they do not run the script).
func TestSimScriptEffects(t *testing.T) {
	c := newSim(t, 3, 7)
	l := c.elect()
	f := c.others(l)
	a := c.client(f[0])
	const runs = 20
	for i := 1; i <= runs; i++ {
		a.send("EVAL", incrScript, "2", "n", "copy")
	}
	for i := 1; i <= runs; i++ {
		if r := a.reply(simReplyWait); !r.isInt(int64(i)) {
			t.Fatalf("EVAL #%d through follower m%d: %s", i, f[0], r)
		}
	}
	// Straight to the leader, then the leader dies at once: acknowledged means committed.
	b := c.client(l)
	if r := b.do("EVAL", incrScript, "2", "n", "copy"); !r.isInt(runs + 1) {
		t.Fatalf("EVAL on the leader: %s", r)
	}
	c.kill(l)
	n := c.electOther(l)
	want := strconv.Itoa(runs + 1)
	for _, key := range []string{"n", "copy"} {
		if r := c.client(n).do("GET", key); !r.isBulk(want) {
			t.Fatalf("after m%d died and m%d leads: GET %s = %s, want %s", l, n, key, r, want)
		}
	}
	// Each follower applied the same writes (it never ran the script: the records came).
	c.run(200 * time.Millisecond)
	for _, id := range c.others(l) {
		cl := c.client(id)
		cl.do("CONSISTENCY", "ONE")
		for _, key := range []string{"n", "copy"} {
			if r := cl.do("GET", key); !r.isBulk(want) {
				t.Fatalf("GET %s at ONE on m%d: %s, want %s", key, id, r, want)
			}
		}
	}
	c.noPanics()
}
