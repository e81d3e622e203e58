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

// The lock libraries' scripts, run as native ops on the leader (sent through a follower or
// to the leader), write what their Lua writes: the records reach every member, and a reply
// waits for them to be committed (the leader dies at once after its last reply: the new
// leader has every effect acknowledged). Followers apply the records; they run no script.
func TestSimScriptNativeLockEffects(t *testing.T) {
	scripts := lockLibScripts(t)
	release, touch := scripts["py-release"], scripts["rs-touch"]
	c := newSim(t, 3, 13)
	l := c.elect()
	f := c.others(l)
	a := c.client(f[0])
	if r := a.do("SET", "k", "tok", "PX", "30000"); !r.isOK() {
		t.Fatalf("SET through follower m%d: %s", f[0], r)
	}
	if r := a.do("EVAL", touch.Body, "1", "k", "tok", "600000"); !r.isInt(1) {
		t.Fatalf("redsync touch through follower m%d: %s", f[0], r)
	}
	if r := a.do("EVAL", release.Body, "1", "k", "tok"); !r.isInt(1) {
		t.Fatalf("redis-py release through follower m%d: %s", f[0], r)
	}
	b := c.client(l)
	for _, cmd := range [][]string{{"SET", "k2", "tok"}, {"SET", "k3", "tok"}} {
		if r := b.do(cmd...); !r.isOK() {
			t.Fatalf("%q on the leader: %s", cmd, r)
		}
	}
	if r := b.do("EVAL", touch.Body, "1", "k3", "tok", "600000"); !r.isInt(1) {
		t.Fatalf("redsync touch on the leader: %s", r)
	}
	if r := b.do("EVAL", release.Body, "1", "k2", "tok"); !r.isInt(1) {
		t.Fatalf("redis-py release on the leader: %s", r)
	}
	var runs uint64
	c.runOn(c.ms[l], func() { runs = c.ms[l].s.scr.eng.NativeRuns() })
	if runs != 4 {
		t.Fatalf("%d native runs on the leader, want 4", runs)
	}
	c.kill(l)
	n := c.electOther(l)
	check := func(id uint64) {
		cl := c.client(id)
		cl.do("CONSISTENCY", "ONE")
		for _, k := range []string{"k", "k2"} {
			if r := cl.do("GET", k); r.raw == nil || r.r.Kind != '$' || !r.r.Null {
				t.Fatalf("GET %s on m%d after its release: %s", k, id, r)
			}
		}
		if r := cl.do("PTTL", "k3"); r.raw == nil || r.r.Kind != ':' || r.r.Int < 500000 || r.r.Int > 600000 {
			t.Fatalf("PTTL k3 on m%d after the touch to 600 s: %s", id, r)
		}
	}
	check(n)
	c.run(200 * time.Millisecond)
	for _, id := range c.others(l) {
		check(id)
	}
	c.noPanics()
}
