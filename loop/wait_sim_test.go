package loop

import (
	"testing"
	"time"
)

// WAIT on the leader counts the other voters whose raft log holds the connection's last
// write: it blocks the connection (its later commands wait behind it, other clients do not)
// while a follower's link is held, and answers once the link is released; with a timeout it
// answers the lower count at the timeout; a connection that wrote nothing gets every voter.
func TestSimWaitLeader(t *testing.T) {
	c := newSim(t, 3, 21)
	l := c.elect()
	f := c.others(l)
	a := c.client(l)
	if r := a.do("SET", "k", "v1"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	if r := a.do("WAIT", "2", "0"); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 with every link up: %s", r)
	}

	c.hold(l, f[1]) // f[1] gets nothing from the leader
	if r := a.do("SET", "k", "v2"); !r.isOK() {
		t.Fatalf("SET with m%d held: %s", f[1], r)
	}
	if r := a.do("WAIT", "1", "0"); !r.isInt(1) {
		t.Fatalf("WAIT 1 0 with m%d held: %s", f[1], r)
	}
	a.send("WAIT", "2", "0")
	a.send("PING")
	if r := a.reply(300 * time.Millisecond); !r.none {
		t.Fatalf("WAIT 2 0 with m%d held answered %s; want it to block", f[1], r)
	}
	// Other clients are served meanwhile; one that wrote nothing gets every voter at once.
	b := c.client(l)
	if r := b.do("GET", "k"); !r.isBulk("v2") {
		t.Fatalf("GET on another connection while WAIT blocks: %s", r)
	}
	if r := b.do("WAIT", "2", "0"); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 on a connection without writes: %s", r)
	}
	if r := b.do("WAIT", "3", "50"); !r.isInt(2) { // more than there are: the timeout, as Redis
		t.Fatalf("WAIT 3 50 on a connection without writes: %s", r)
	}
	c.heal()
	if r := a.reply(simReplyWait); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 once m%d's link is released: %s", f[1], r)
	}
	if r := a.reply(simReplyWait); string(r.r.Str) != "PONG" {
		t.Fatalf("PING behind WAIT: %s", r)
	}

	// A timeout answers what is reached by then.
	c.hold(l, f[1])
	if r := a.do("INCR", "n"); !r.isInt(1) {
		t.Fatalf("INCR with m%d held: %s", f[1], r)
	}
	start := c.elapsed()
	a.send("WAIT", "2", "150")
	r := a.reply(simReplyWait)
	took := c.elapsed() - start
	if !r.isInt(1) || took < 150*time.Millisecond || took > 250*time.Millisecond {
		t.Fatalf("WAIT 2 150 with m%d held: %s after %v; want 1 after 150ms", f[1], r, took)
	}
	c.heal()
	if r := a.do("WAIT", "2", "1000"); !r.isInt(2) {
		t.Fatalf("WAIT 2 1000 once healed: %s", r)
	}
	// Inside EXEC nothing waits: the INCR before it is not in any log yet. The errors are
	// Redis's.
	a.do("MULTI")
	a.do("INCR", "n")
	a.do("WAIT", "2", "0")
	if r := a.do("EXEC"); r.r.Kind != '*' || len(r.r.Elems) != 2 || r.r.Elems[1].Int != 0 {
		t.Fatalf("EXEC of INCR, WAIT 2 0: %s; want [2 0]", r)
	}
	c.heal()
	for _, tc := range [][3]string{
		{"x", "0", "ERR value is not an integer or out of range"},
		{"1", "x", "ERR timeout is not an integer or out of range"},
		{"1", "-1", "ERR timeout is negative"},
	} {
		if r := a.do("WAIT", tc[0], tc[1]); !r.isErr(tc[2]) {
			t.Fatalf("WAIT %s %s: %s", tc[0], tc[1], r)
		}
	}
	c.noPanics()
}

// WAIT through a follower runs on the leader, on the virtual connection that holds the
// client's writes: it blocks until the lagging voter has the write, even past the
// follower's --cluster-timeout for forwarded commands (WAIT 0 waits for ever, as Redis's).
func TestSimWaitFollower(t *testing.T) {
	c := newSim(t, 3, 22)
	l := c.elect()
	f := c.others(l)
	a := c.client(f[0])
	if r := a.do("SET", "k", "v"); !r.isOK() {
		t.Fatalf("SET through m%d: %s", f[0], r)
	}
	if r := a.do("WAIT", "2", "0"); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 through m%d: %s", f[0], r)
	}
	c.hold(l, f[1])
	if r := a.do("SET", "k", "v2"); !r.isOK() {
		t.Fatalf("SET through m%d with m%d held: %s", f[0], f[1], r)
	}
	a.send("WAIT", "2", "0")
	if r := a.reply(300 * time.Millisecond); !r.none {
		t.Fatalf("WAIT 2 0 through m%d with m%d held answered %s; want it to block", f[0], f[1], r)
	}
	c.heal()
	if r := a.reply(simReplyWait); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 through m%d once m%d's link is released: %s", f[0], f[1], r)
	}

	// A voter down for longer than the follower gives forwarded commands.
	c.kill(f[1])
	if r := a.do("INCR", "n"); !r.isInt(1) {
		t.Fatalf("INCR with m%d down: %s", f[1], r)
	}
	a.send("WAIT", "2", "0")
	if r := a.reply(3 * time.Second); !r.none {
		t.Fatalf("WAIT 2 0 with m%d down answered %s; want it to block", f[1], r)
	}
	if err := c.restart(f[1]); err != nil {
		t.Fatal(err)
	}
	if r := a.reply(simReplyWait); !r.isInt(2) {
		t.Fatalf("WAIT 2 0 once m%d is back: %s", f[1], r)
	}
	if r := a.do("WAIT", "2", "100"); !r.isInt(2) {
		t.Fatalf("WAIT 2 100 after: %s", r)
	}
	c.noPanics()
}

// A leader that stops leading answers a blocked WAIT as it answers the replies it holds:
// -CLUSTERDOWN leader changed (the write it counts may never be committed); the connection
// goes on.
func TestSimWaitAbdicate(t *testing.T) {
	c := newSim(t, 3, 23)
	l := c.elect()
	f := c.others(l)
	a := c.client(l)
	c.hold(l, f[1])
	if r := a.do("SET", "k", "v"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	a.send("WAIT", "2", "0")
	if r := a.reply(200 * time.Millisecond); !r.none {
		t.Fatalf("WAIT 2 0 with m%d held answered %s; want it to block", f[1], r)
	}
	c.transfer(f[0])
	if r := a.reply(simReplyWait); !r.isErr("CLUSTERDOWN leader changed") {
		t.Fatalf("WAIT 2 0 on m%d after it stopped leading: %s", l, r)
	}
	c.heal()
	if r := a.do("GET", "k"); !r.isBulk("v") {
		t.Fatalf("GET through m%d after: %s", l, r)
	}
	c.noPanics()
}

// WAIT allocates nothing in steady state: the write's index is resolved once, and the
// voters are counted with a visitor made once.
func TestWaitAllocs(t *testing.T) {
	c := newSim(t, 3, 24)
	l := c.elect()
	a := c.client(l)
	if r := a.do("SET", "k", "v"); !r.isOK() {
		t.Fatalf("SET: %s", r)
	}
	if r := a.do("WAIT", "2", "0"); !r.isInt(2) {
		t.Fatalf("WAIT 2 0: %s", r)
	}
	s := c.ms[l].s
	var cs *conn
	for _, x := range s.ct.conns {
		if x.slock != nil && x.slock.wr.Term != 0 {
			cs = x
		}
	}
	if cs == nil {
		t.Fatal("no connection on the leader has a write")
	}
	args := [][]byte{[]byte("WAIT"), []byte("2"), []byte("0")}
	n := testing.AllocsPerRun(100, func() {
		s.waitCmd(cs, args, 0)
		cs.out, cs.gates = cs.out[:0], cs.gates[:0]
	})
	if n != 0 || cs.slock.repl.active {
		t.Fatalf("WAIT 2 0: %v allocations a call (blocked: %v), want 0", n, cs.slock.repl.active)
	}
}
