package loop

// The explorer (issue 34): seeds choose the history. Each seed draws a simulated cluster
// (sim_test.go: real Servers and raft, fake links and clock) of 3 or 5 members, a workload
// and a fault schedule, runs them, then checks what the clients saw:
//
//   - keys are linearizable (porcupine, exModel): GET, SET, INCR, a script's INCR, DEL,
//     MULTI/EXEC, fenced SETs, at QUORUM and ALL (writes at ONE are of unknown outcome,
//     reads at ONE are not checked), and the final reads after the faults are healed, so
//     an acknowledged write that was lost shows as a read that no order explains;
//   - a lock (text LOCK with a LockId and a lease) is held by one client at a time and its
//     fencing tokens only grow (checkGrants);
//   - every request is answered, or its connection closed, within exStuck of simulated time;
//   - no member panicked or stopped on a fatal error, a restart succeeds, and once healed
//     every member applies the leader's log and holds the same keys.
//
// Clients retry on another member when theirs fails them (a closed connection, an error).
// Faults come one at a time, each a knob (exFaults): a partition, one-way loss, delays,
// links cut, a member killed and restarted, the leader killed, a leadership transfer.
//
//	go test -run 'TestExplore$' ./loop/                       # the CI seeds (exCISeeds)
//	TALLYD_SIM_SEEDS=2000 go test -run 'TestExplore$' ./loop/  # more (make sim SEEDS=2000)
//	TALLYD_SIM_SEED=17 go test -run 'TestExplore$' -v ./loop/  # one, with its history (make sim SEED=17)
//
// A failure prints its seed and the command that replays it; a seed replays bit for bit
// (TestExploreReplay). Mutants (explore_mutant_test.go) prove the checks catch bugs.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// exCISeeds is how many seeds TestExplore runs by default (in make test).
const exCISeeds = 200

// exStuck is how long a request may go unanswered (simulated time) beyond a lock's wait.
const exStuck = 6 * time.Second

// exMaxSteps bounds the events of a phase of a seed (a seed is some 10^4 events): past
// it the simulated clock is stuck, and the seed fails rather than hang.
const exMaxSteps = 400_000

// exNever is the Return of an operation whose outcome is not known.
const exNever = int64(1) << 62

// exFaults are the fault kinds the explorer draws from (each a knob).
var exFaults = []string{"partition", "oneway", "delay", "cut", "kill", "killleader", "transfer", "bounce", "restartall", "deposed", "wipe", "isolate", "minority"}

// exOptions are what a seed may draw from.
type exOptions struct {
	faults   []string
	workload time.Duration // how long clients send, simulated
	verbose  bool
}

func defaultExOptions() exOptions {
	return exOptions{faults: exFaults, workload: 3 * time.Second}
}

// exResult is what a seed's run found.
type exResult struct {
	seed        uint64
	members     int
	violations  []string
	hash        string        // of the whole trace
	simulated   time.Duration // simulated time
	ops, grants int
	log         string // what the run logged (the trace and history when verbose or failed)
}

func (r exResult) failed() bool { return len(r.violations) > 0 }

// ---------------------------------------------------------------------------------------
// A seed's run, on a testing.TB of its own: the harness's Fatalf ends the run (as a
// violation), not the test.

type exTB struct {
	testing.TB
	mu       sync.Mutex
	failed   bool
	fatal    []string
	logs     strings.Builder
	cleanups []func()
	dirs     []string
}

func (t *exTB) Helper() {}
func (t *exTB) Logf(format string, args ...any) {
	t.mu.Lock()
	fmt.Fprintf(&t.logs, format+"\n", args...)
	t.mu.Unlock()
}
func (t *exTB) Log(args ...any) { t.Logf("%s", fmt.Sprint(args...)) }
func (t *exTB) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.fatal = append(t.fatal, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}
func (t *exTB) Error(args ...any)                 { t.Errorf("%s", fmt.Sprint(args...)) }
func (t *exTB) Fatalf(format string, args ...any) { t.Errorf(format, args...); runtime.Goexit() }
func (t *exTB) Fatal(args ...any)                 { t.Error(args...); runtime.Goexit() }
func (t *exTB) Fail()                             { t.mu.Lock(); t.failed = true; t.mu.Unlock() }
func (t *exTB) FailNow()                          { t.Fail(); runtime.Goexit() }
func (t *exTB) Failed() bool                      { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }
func (t *exTB) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exTB) TempDir() string {
	d, err := os.MkdirTemp(exDir(), "tallyd-explore-")
	if err != nil {
		panic(err)
	}
	t.dirs = append(t.dirs, d)
	return d
}

// exDir is where the members' data directories go: TALLYD_SIM_DIR, else /dev/shm when it is
// a directory (a tmpfs: the raft logs' fsyncs cost nothing there, and on a disk they were
// 70% of a run's real time), else the system's temporary directory.
func exDir() string {
	if d := os.Getenv("TALLYD_SIM_DIR"); d != "" {
		return d
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "tallyd-explore-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}

// exploreSeed runs one seed and checks it.
func exploreSeed(parent testing.TB, seed uint64, opt exOptions) exResult {
	tb := &exTB{TB: parent}
	res := exResult{seed: seed}
	done := make(chan struct{})
	go func() {
		defer close(done)
		x := newExplorer(tb, seed, opt)
		x.res = &res
		x.run()
	}()
	<-done
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	for _, d := range tb.dirs {
		_ = os.RemoveAll(d)
	}
	res.violations = append(res.violations, tb.fatal...)
	res.log = tb.logs.String()
	return res
}

// ---------------------------------------------------------------------------------------
// The explorer.

type explorer struct {
	t       *exTB
	c       *sim
	rng     *rand.Rand // the workload's and schedule's own draws (the harness has its own)
	opt     exOptions
	res     *exResult
	n       int
	clients []*exClient
	keys    []string      // the keys of the key workload
	locks   []string      // the lock names
	stopped bool          // no new requests
	think   time.Duration // a client waits up to this long between requests

	hist   []porcupine.Operation
	grants []exGrant
	down   map[uint64]bool // killed by the schedule, to be restarted
	wiped  map[uint64]bool // restarted on an empty data directory: it may stop (ErrMemberState)
	bad    []string
	ops    int
}

// exClient is one client: a connection to a member (replaced when it fails), at most one
// request in flight.
type exClient struct {
	id    int
	lock  bool   // a lock client (else a key client)
	level string // its CONSISTENCY
	sc    *simClient
	skip  int // replies to drop first (its CONSISTENCY)
	seq   int
	reads int // of 20 key requests, how many are GETs

	p *exPending // the request in flight

	// A lock client's state: the lock it holds (grant >= 0) and its LockId.
	grant  int
	lockID string
	idle   bool // after this request, a pause (locks idle for a while: the log compacts past the last grant)
	lkey   string
}

// exPending is a request in flight: what it is, when it was sent, how many replies end it.
type exPending struct {
	what    string // for messages
	in      exIn
	kind    string // "key", "lock", "fence", "unlock"
	call    time.Duration
	need    int
	replies []simReply
	bound   time.Duration
	stuck   bool
}

func newExplorer(tb *exTB, seed uint64, opt exOptions) *explorer {
	x := &explorer{t: tb, opt: opt, rng: rand.New(rand.NewPCG(seed^0x5eed, seed)), down: map[uint64]bool{}, wiped: map[uint64]bool{}}
	x.n = 3
	if x.rng.IntN(3) == 0 {
		x.n = 5
	}
	x.res = &exResult{}
	// Half the seeds take raft snapshots often (and so compact the log, and send lagging
	// members snapshots): every 20 to 200 applied entries.
	var snap uint64
	if x.rng.IntN(2) == 0 {
		snap = uint64(20 + x.rng.IntN(180))
	}
	x.c = newSim(tb, x.n, seed, func(o *simOptions) {
		o.mod = func(_ uint64, cfg *Config) {
			if snap > 0 {
				cfg.Cluster.SnapshotEntries = snap
			}
		}
	})
	if snap > 0 {
		x.c.tracef(false, "explore: raft snapshots every %d entries", snap)
	}
	return x
}

func (x *explorer) now() time.Duration { return x.c.elapsed() }

func (x *explorer) violate(format string, args ...any) {
	s := fmt.Sprintf("at %.6f: ", x.now().Seconds()) + fmt.Sprintf(format, args...)
	x.bad = append(x.bad, s)
	x.c.tracef(false, "VIOLATION %s", s)
}

func (x *explorer) run() {
	c := x.c
	x.res.members = x.n
	c.elect()
	nkeys := 2 + x.rng.IntN(3)
	for i := 0; i < nkeys; i++ {
		x.keys = append(x.keys, "k"+strconv.Itoa(i))
	}
	for i := 0; i < 1+x.rng.IntN(2); i++ {
		x.locks = append(x.locks, "L"+strconv.Itoa(i))
	}
	// The mix: from one key client to six, none to three lock clients, reads from a fifth
	// of the key requests to nearly all (few writers: a deposed leader may have nothing new
	// to propose when a read comes).
	nkey, nlock := 2+x.rng.IntN(5), x.rng.IntN(4)
	x.think = []time.Duration{15 * time.Millisecond, 15 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}[x.rng.IntN(4)]
	c.tracef(false, "explore: %d key clients, %d lock clients, think up to %v", nkey, nlock, x.think)
	for i := 0; i < nkey+nlock; i++ {
		// Each key client its own share of reads, from a fifth to all (a reader only).
		cl := &exClient{id: i + 1, lock: i >= nkey, grant: -1, reads: []int{4, 12, 17, 20, 20}[x.rng.IntN(5)]}
		switch r := x.rng.IntN(10); {
		case r < 1 && !cl.lock:
			cl.level = "ONE"
		case r < 3:
			cl.level = "ALL"
		default:
			cl.level = "QUORUM"
		}
		x.clients = append(x.clients, cl)
		c.tracef(false, "explore: client %d (%s, %s, %d reads in 20)", cl.id, map[bool]string{true: "locks", false: "keys"}[cl.lock], cl.level, cl.reads)
		x.connect(cl)
		x.later(cl, time.Duration(x.rng.Int64N(int64(20*time.Millisecond))))
	}
	// The workload runs past the last fault's heal, so that each episode plays out whole.
	end := c.now.Add(max(x.opt.workload, x.schedule()+100*time.Millisecond))
	for steps := 0; c.now.Before(end); steps++ {
		if steps > exMaxSteps {
			x.violate("stalled: %d events and the workload's simulated time is not over (a busy loop among the members?)", exMaxSteps)
			break
		}
		c.step()
		x.poll()
	}
	// The end: no new requests; those in flight end; faults are healed and the members
	// killed restarted.
	x.stopped = true
	for deadline := c.now.Add(exStuck + 2*time.Second); x.inFlight() && c.now.Before(deadline); {
		if !c.step() {
			break
		}
		x.poll()
	}
	c.tracef(false, "explore: workload over")
	x.healAll()
	x.settle()
	x.final()
	for _, p := range c.panics() {
		x.violate("panic: %s", p)
	}
	for _, m := range c.ms {
		if m != nil && m.fatal != nil && !(x.wiped[m.id] && strings.Contains(m.fatal.Error(), "lost its data")) {
			x.violate("m%d stopped: %v", m.id, m.fatal)
		}
	}
	x.check()
	x.res.violations = x.bad
	x.res.simulated = c.elapsed()
	x.res.ops, x.res.grants = x.ops, len(x.grants)
	sum := sha256.Sum256([]byte(c.traceText(true)))
	x.res.hash = hex.EncodeToString(sum[:8])
	if x.opt.verbose || len(x.bad) > 0 {
		x.t.Logf("key history:\n%s", describeHistory(x.hist))
		if len(x.bad) > 0 {
			x.t.Fail() // the harness prints its trace
		}
	}
	if x.opt.verbose && len(x.bad) == 0 {
		x.t.Logf("trace:\n%s", c.traceText(false))
	}
}

func (x *explorer) inFlight() bool {
	for _, cl := range x.clients {
		if cl.p != nil {
			return true
		}
	}
	return false
}

// connect gives cl a new connection to a member drawn at random (refused when it is down:
// the next request finds it closed and draws again).
func (x *explorer) connect(cl *exClient) {
	c := x.c
	id := uint64(1 + x.rng.IntN(x.n))
	m := c.ms[id]
	c.nconn++
	sc := &simClient{c: c, m: m, name: fmt.Sprintf("c%d.%d@m%d", cl.id, c.nconn, id)}
	cl.sc, cl.skip = sc, 0
	if !m.up {
		sc.closed, sc.eofSaw = true, true
		return
	}
	c.ports++
	sc.conn = c.newConn(m, sc.name, simAddr(m.slockAddr), simPort(c.ports))
	sc.conn.client = sc
	c.onMember(m, c.now, func() { c.open(sc.conn) })
	if cl.level != "QUORUM" {
		sc.send("CONSISTENCY", cl.level)
		cl.skip = 1
	}
}

// later has cl send its next request after d.
func (x *explorer) later(cl *exClient, d time.Duration) {
	x.c.at(x.c.now.Add(d), func() { x.next(cl) })
}

// next sends cl's next request.
func (x *explorer) next(cl *exClient) {
	if x.stopped {
		return
	}
	if cl.sc.closed {
		x.connect(cl)
		if cl.sc.closed {
			x.later(cl, 50*time.Millisecond)
			return
		}
	}
	if cl.lock {
		x.nextLock(cl)
	} else {
		x.nextKey(cl)
	}
}

func (x *explorer) nextKey(cl *exClient) {
	cl.seq++
	key := x.keys[x.rng.IntN(len(x.keys))]
	val := int64(cl.id)*1_000_000 + int64(cl.seq)*10
	p := &exPending{kind: "key", need: 1, bound: exStuck}
	switch r := x.rng.IntN(20); {
	case r < cl.reads:
		p.in = exIn{kind: exGet, key: key}
		cl.sc.send("GET", key)
	case r < cl.reads+(20-cl.reads)*2/8:
		p.in = exIn{kind: exSet, key: key, val: val}
		cl.sc.send("SET", key, strconv.FormatInt(val, 10))
	case r < cl.reads+(20-cl.reads)*5/8:
		p.in = exIn{kind: exIncr, key: key}
		cl.sc.send("INCR", key)
	case r < cl.reads+(20-cl.reads)*6/8:
		p.in = exIn{kind: exIncr, key: key}
		cl.sc.send("EVAL", "return redis.call('INCR', KEYS[1])", "1", key)
	case r < cl.reads+(20-cl.reads)*7/8:
		p.in = exIn{kind: exDel, key: key}
		cl.sc.send("DEL", key)
	default:
		p.in = exIn{kind: exMulti, key: key, val: val}
		p.need = 4
		cl.sc.send("MULTI")
		cl.sc.send("SET", key, strconv.FormatInt(val, 10))
		cl.sc.send("INCR", key)
		cl.sc.send("EXEC")
	}
	x.start(cl, p)
}

// A lock client's round: LOCK (a fresh LockId), a fenced SET of the lock's resource with
// its token, UNLOCK.
func (x *explorer) nextLock(cl *exClient) {
	if cl.grant >= 0 {
		g := &x.grants[cl.grant]
		if x.rng.IntN(3) > 0 && g.token > 0 {
			cl.seq++
			val := int64(cl.id)*1_000_000 + int64(cl.seq)*10
			p := &exPending{kind: "fence", need: 1, bound: exStuck,
				in: exIn{kind: exFence, key: "res" + cl.lkey, val: val, token: g.token}}
			cl.sc.send("SET", "res"+cl.lkey, strconv.FormatInt(val, 10), "FENCE", strconv.FormatInt(g.token, 10))
			x.start(cl, p)
			return
		}
		g.end = min(g.end, x.now())
		cl.grant = -1
		cl.idle = true
		p := &exPending{kind: "unlock", need: 1, bound: exStuck}
		cl.sc.send("UNLOCK", cl.lkey, "LOCK_ID", cl.lockID)
		x.start(cl, p)
		return
	}
	cl.seq++
	cl.lkey = x.locks[x.rng.IntN(len(x.locks))]
	cl.lockID = fmt.Sprintf("c%ds%d", cl.id, cl.seq)
	wait := x.rng.IntN(2)
	lease := 1 + x.rng.IntN(3)
	p := &exPending{kind: "lock", need: 1, bound: exStuck + time.Duration(wait)*time.Second,
		in: exIn{val: int64(lease)}}
	cl.sc.send("LOCK", cl.lkey, "TIMEOUT", strconv.Itoa(wait), "EXPRIED", strconv.Itoa(lease), "LOCK_ID", cl.lockID)
	x.start(cl, p)
}

func (x *explorer) start(cl *exClient, p *exPending) {
	p.call = x.now()
	p.what = fmt.Sprintf("%s request of client %d (%s)", p.kind, cl.id, cl.sc.name)
	cl.p = p
	x.ops++
}

// poll collects the replies that arrived, ends the requests they complete, and notes those
// in flight too long.
func (x *explorer) poll() {
	for _, cl := range x.clients {
		p := cl.p
		if p == nil {
			continue
		}
		sc := cl.sc
		for len(sc.rx) > 0 && cl.p != nil {
			r, ok := sc.take()
			if !ok {
				break
			}
			if cl.skip > 0 {
				cl.skip--
				continue
			}
			p.replies = append(p.replies, r)
			x.c.tracef(false, "%s < %s", sc.name, r)
			if len(p.replies) == p.need {
				x.finish(cl, false)
			}
		}
		if cl.p != nil && sc.closed {
			x.c.tracef(false, "%s: closed with a request in flight", sc.name)
			x.finish(cl, true)
		}
		if cl.p != nil && !cl.p.stuck && x.now()-cl.p.call > cl.p.bound {
			cl.p.stuck = true
			x.violate("stuck: the %s sent at %.6f has no reply after %v and its connection is open",
				cl.p.what, cl.p.call.Seconds(), cl.p.bound)
		}
	}
}

// unknownReply says whether a reply leaves a write's outcome unknown: an error other than
// the refusals the model knows.
func unknownReply(r simReply) bool { return r.raw == nil || r.r.Kind == '-' }

// finish ends cl's request: its history entry, then the next request (on another member
// after a failure).
func (x *explorer) finish(cl *exClient, closed bool) {
	p := cl.p
	cl.p = nil
	now := x.now()
	var last simReply
	if len(p.replies) > 0 {
		last = p.replies[len(p.replies)-1]
	}
	failed := closed
	for _, r := range p.replies {
		if r.isErr("") {
			failed = true
		}
	}
	one := cl.level == "ONE"
	add := func(out exOut) {
		ret := int64(now)
		if out.unknown {
			ret = exNever
		}
		x.hist = append(x.hist, porcupine.Operation{ClientId: cl.id, Input: p.in, Call: int64(p.call), Output: out, Return: ret})
	}
	switch p.kind {
	case "key":
		in := p.in
		switch {
		case in.kind == exGet:
			if failed || one {
				break // a read of no effect, or one not checked
			}
			switch {
			case last.r.Kind == '$' && last.r.Null:
				add(exOut{})
			case last.r.Kind == '$':
				v, err := strconv.ParseInt(string(last.r.Str), 10, 64)
				if err != nil {
					x.violate("GET %s: %s is not a value any client wrote", in.key, last)
				}
				add(exOut{exists: true, val: v})
			default:
				x.violate("GET %s: unexpected reply %s", in.key, last)
			}
		case failed || one:
			add(exOut{unknown: true})
		case in.kind == exSet:
			if !last.isOK() {
				x.violate("SET %s: unexpected reply %s", in.key, last)
			}
			add(exOut{})
		case in.kind == exIncr || in.kind == exDel:
			if last.r.Kind != ':' {
				x.violate("%c %s: unexpected reply %s", in.kind, in.key, last)
				add(exOut{unknown: true})
				break
			}
			add(exOut{val: last.r.Int})
		case in.kind == exMulti:
			if last.r.Kind != '*' || len(last.r.Elems) != 2 || last.r.Elems[1].Kind != ':' {
				// An EXEC's array holding an error, or *-1: unknown.
				add(exOut{unknown: true})
				break
			}
			add(exOut{val: last.r.Elems[1].Int})
		}
	case "fence":
		switch {
		case last.isOK():
			add(exOut{ok: true})
		case last.isErr("FENCED"):
			add(exOut{ok: false})
		default:
			add(exOut{unknown: true})
		}
		if failed && !last.isErr("FENCED") {
			x.dropLock(cl)
		}
	case "unlock":
	case "lock":
		if failed {
			break
		}
		res, ok := last.lockResult()
		if !ok {
			x.violate("LOCK %s: unexpected reply %s", cl.lkey, last)
			break
		}
		if res != 0 {
			break // not granted (timed out, ...)
		}
		tok := lockToken(last)
		if tok <= 0 {
			x.violate("LOCK %s: a grant without a token: %s", cl.lkey, last)
		}
		x.grants = append(x.grants, exGrant{client: cl.id, key: cl.lkey, lockID: cl.lockID, call: p.call, ret: now,
			token: tok, end: p.call + time.Duration(p.in.val)*time.Second})
		cl.grant = len(x.grants) - 1
	}
	if failed {
		x.dropLock(cl)
		// Retry elsewhere: a new connection to a member drawn again.
		if !cl.sc.closed {
			cl.sc.conn.Close()
			cl.sc.closed = true
		}
	}
	think := time.Duration(x.rng.Int64N(int64(x.think)))
	if cl.idle {
		cl.idle = false
		if x.rng.IntN(3) == 0 {
			think = time.Duration(200+x.rng.IntN(1000)) * time.Millisecond
		}
	} else if !cl.lock && x.rng.IntN(12) == 0 {
		// A key client pauses too, now and then: a read after a quiet spell is what finds a
		// deposed leader answering from its own state.
		think = time.Duration(200+x.rng.IntN(1000)) * time.Millisecond
	}
	x.later(cl, think)
}

// dropLock: the client no longer counts on the lock it held (its lease goes on).
func (x *explorer) dropLock(cl *exClient) {
	if cl.grant >= 0 {
		g := &x.grants[cl.grant]
		g.end = min(g.end, x.now())
		cl.grant = -1
	}
}

// lockToken is the TOKEN of a text LOCK's grant, 0 if none.
func lockToken(r simReply) int64 {
	el := r.r.Elems
	for i := 0; i+1 < len(el); i++ {
		if (el[i].Kind == '$' || el[i].Kind == '+') && string(el[i].Str) == "TOKEN" {
			switch e := el[i+1]; e.Kind {
			case ':':
				return e.Int
			case '$':
				n, _ := strconv.ParseInt(string(e.Str), 10, 64)
				return n
			}
		}
	}
	return 0
}

func simPort(p int) *net.TCPAddr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p} }

// ---------------------------------------------------------------------------------------
// The fault schedule: episodes one after another, each healed before the next.

// schedule draws the episodes of the workload's time and returns when the last one heals
// (from now).
func (x *explorer) schedule() time.Duration {
	if len(x.opt.faults) == 0 {
		return 0
	}
	t := time.Duration(0)
	for {
		t += time.Duration(20+x.rng.IntN(300)) * time.Millisecond
		if t >= x.opt.workload {
			return t
		}
		kind := x.opt.faults[x.rng.IntN(len(x.opt.faults))]
		switch r := x.rng.IntN(8); {
		case r < 2 && slices.Contains(x.opt.faults, "deposed"):
			kind = "deposed" // the longest history to set up: drawn more often
		case r < 3 && slices.Contains(x.opt.faults, "restartall"):
			kind = "restartall" // every member's token counter from its log alone
		}
		d := time.Duration(50+x.rng.IntN(1000)) * time.Millisecond
		a := uint64(1 + x.rng.IntN(x.n))
		b := uint64(1 + x.rng.IntN(x.n-1))
		if b >= a {
			b++
		}
		extra := time.Duration(x.rng.IntN(150)) * time.Millisecond
		if kind == "wipe" {
			// The leader's follower B is down for extra while writes go on; then the leader
			// and the other follower W crash, W's data directory is lost, B and W restart (W
			// with --initial-cluster-state new); the leader comes back at the heal.
			extra = time.Duration(300+x.rng.IntN(400)) * time.Millisecond
			d = extra + time.Duration(800+x.rng.IntN(1200))*time.Millisecond
		}
		if kind == "deposed" {
			// A deposed leader that does not know it (TestSimDeposedLeader's history): the
			// delay ramps up over 2*extra, then what the leader sends is held for a second
			// and a half while the others elect.
			extra = time.Duration(400+x.rng.IntN(600)) * time.Millisecond
			d = 2*extra + 100*time.Millisecond + 1500*time.Millisecond
		}
		at := x.c.start.Add(x.c.elapsed() + t)
		x.c.at(at, func() { x.fault(kind, a, b, extra) })
		t += d
		x.c.at(x.c.start.Add(x.c.elapsed()+t), func() { x.healAll() })
	}
}

func (x *explorer) fault(kind string, a, b uint64, extra time.Duration) {
	c := x.c
	c.tracef(false, "explore: fault %s m%d m%d", kind, a, b)
	switch kind {
	case "partition":
		c.partition(a)
	case "minority":
		// What the leader sends reaches one follower only, for extra; then it is cut off:
		// with five members the other three elect, and the follower's entries the old leader
		// sent it alone are overwritten.
		l := c.leader()
		if l == 0 {
			return
		}
		fs := c.others(l)
		x.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		for _, f := range fs[1:] {
			c.hold(l, f)
		}
		c.at(c.now.Add(extra/4+5*time.Millisecond), func() { c.partition(l) })
	case "isolate": // the leader partitioned away
		if l := c.leader(); l != 0 {
			c.partition(l)
		}
	case "oneway":
		c.hold(a, b)
	case "delay":
		c.delay(a, b, extra)
		c.delay(b, a, extra/2)
	case "cut":
		c.cut(a, b)
	case "kill":
		x.kill(a)
	case "killleader":
		if l := c.leader(); l != 0 {
			x.kill(l)
		}
	case "bounce": // killed and restarted at once
		x.kill(a)
		x.restart(a)
	case "restartall": // every member killed at once (a power loss), restarted at the heal
		for id := uint64(1); id <= uint64(x.n); id++ {
			x.kill(id)
		}
	case "deposed":
		l := c.leader()
		if l == 0 {
			return
		}
		// The leader keeps (n-1)/2 followers, the slow ones, whose messages to it come later
		// and later; it is cut off from the rest; then what it sends is held.
		fs := c.others(l)
		x.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		slow := fs[:(x.n-1)/2]
		for _, f := range fs[(x.n-1)/2:] {
			c.cut(l, f)
		}
		for _, f := range slow {
			c.delayRamp(f, l, extra, 2*extra)
		}
		c.at(c.now.Add(2*extra+100*time.Millisecond), func() {
			for _, f := range slow {
				c.hold(l, f)
			}
		})
	case "wipe":
		l := c.leader()
		if l == 0 || len(x.wiped) > 0 {
			return
		}
		fs := c.others(l)
		x.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		b, w := fs[0], fs[1]
		x.kill(b)
		c.at(c.now.Add(extra), func() {
			x.kill(l)
			x.kill(w)
			c.wipe(w)
			x.wiped[w] = true
			x.restart(b)
			delete(x.down, w)
			c.tracef(false, "m%d restarting (wiped, --initial-cluster-state new)", w)
			if err := c.boot(c.ms[w], false, simNew); err != nil {
				c.tracef(false, "m%d (wiped) refused to start: %v", w, err)
			}
		})
	case "transfer":
		if l := c.leader(); l != 0 && l != a {
			c.tracef(false, "leadership transfer m%d -> m%d", l, a)
			m := c.ms[l]
			c.runOn(m, func() {
				m.s.cl.m.TransferLeader(a)
				m.s.flush()
			})
		}
	}
}

func (x *explorer) kill(id uint64) {
	if x.c.ms[id].up {
		x.c.kill(id)
		x.down[id] = true
	}
}

func (x *explorer) restart(id uint64) {
	delete(x.down, id)
	if x.c.ms[id].up {
		return
	}
	if err := x.c.restart(id); err != nil {
		x.violate("m%d does not restart: %v", id, err)
	}
}

// healAll heals the network and restarts the members the schedule killed.
func (x *explorer) healAll() {
	x.c.heal()
	ids := make([]uint64, 0, len(x.down))
	for id := range x.down {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		x.restart(id)
	}
}

// settle waits (20 s of simulated time at most) until a leader serves and every member has
// applied its commit index.
func (x *explorer) settle() bool {
	c := x.c
	steps := 0
	ok := c.runUntil(func() bool {
		if steps++; steps > exMaxSteps {
			return true // stalled: reported below
		}
		l := c.leader()
		if l == 0 {
			return false
		}
		commit := c.ms[l].s.cl.m.Commit()
		for _, m := range c.ms {
			if m != nil && m.up && (m.s.cl.m.Leader() != l || m.s.cl.m.Applied() < commit) {
				return false
			}
		}
		return true
	}, 20*time.Second)
	if steps > exMaxSteps {
		x.violate("stalled: %d events without 20 s of simulated time passing (a busy loop among the members?)", exMaxSteps)
		return false
	}
	if !ok {
		var st []string
		for _, m := range c.ms {
			if m != nil {
				st = append(st, c.raftState(m.id))
			}
		}
		x.violate("no convergence 20 s after the faults were healed: %s", strings.Join(st, "; "))
	}
	return ok
}

// final reads every key at QUORUM on the leader (into the history: an acknowledged write
// lost shows there), then at ONE on every member: they must hold the same.
func (x *explorer) final() {
	c := x.c
	l := c.leader()
	if l == 0 {
		return
	}
	keys := append([]string(nil), x.keys...)
	for _, k := range x.locks {
		keys = append(keys, "res"+k)
	}
	a := c.client(l)
	want := map[string]string{}
	for _, k := range keys {
		call := x.now()
		r := a.do("GET", k)
		switch {
		case r.raw != nil && r.r.Kind == '$' && r.r.Null:
			x.hist = append(x.hist, porcupine.Operation{ClientId: 0, Input: exIn{kind: exGet, key: k}, Call: int64(call),
				Output: exOut{}, Return: int64(x.now())})
		case r.raw != nil && r.r.Kind == '$':
			v, _ := strconv.ParseInt(string(r.r.Str), 10, 64)
			x.hist = append(x.hist, porcupine.Operation{ClientId: 0, Input: exIn{kind: exGet, key: k}, Call: int64(call),
				Output: exOut{exists: true, val: v}, Return: int64(x.now())})
		default:
			x.violate("the final GET %s on the leader m%d: %s", k, l, r)
			return
		}
		want[k] = r.String()
	}
	if !x.settle() {
		return
	}
	for _, m := range c.ms {
		if m == nil || !m.up {
			continue
		}
		b := c.client(m.id)
		b.do("CONSISTENCY", "ONE")
		for _, k := range keys {
			if r := b.do("GET", k); r.String() != want[k] {
				x.violate("m%d diverges: GET %s at ONE = %s, the leader's %s", m.id, k, r, want[k])
			}
		}
	}
}

// check runs the checkers on what the clients saw.
func (x *explorer) check() {
	for i := range x.grants {
		if x.grants[i].end > x.now() {
			x.grants[i].end = x.now()
		}
	}
	x.bad = append(x.bad, checkGrants(x.grants)...)
	res, info := porcupine.CheckOperationsVerbose(exModel, x.hist, 10*time.Second)
	switch res {
	case porcupine.Illegal:
		msg := "keys not linearizable"
		for _, part := range info.PartialLinearizationsOperations() {
			for _, lin := range part {
				if len(lin) > 0 {
					last := lin[len(lin)-1]
					msg += fmt.Sprintf("; longest linearization ends at %s", exModel.DescribeOperation(last.Input, last.Output))
					break
				}
			}
		}
		x.violate("%s", msg)
	case porcupine.Unknown:
		x.c.tracef(false, "explore: linearizability check timed out (not judged)")
	}
}

// ---------------------------------------------------------------------------------------
// The tests.

// exSeeds is the seeds a test runs: TALLYD_SIM_SEED (one), else TALLYD_SIM_SEEDS of them
// from TALLYD_SIM_FIRST (1), else n from 1.
func exSeeds(t testing.TB, n int) (seeds []uint64, one bool) {
	if s := os.Getenv("TALLYD_SIM_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TALLYD_SIM_SEED=%q: %v", s, err)
		}
		return []uint64{v}, true
	}
	if s := os.Getenv("TALLYD_SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("TALLYD_SIM_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	first := uint64(1)
	if s := os.Getenv("TALLYD_SIM_FIRST"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TALLYD_SIM_FIRST=%q: %v", s, err)
		}
		first = v
	}
	for i := 0; i < n; i++ {
		seeds = append(seeds, first+uint64(i))
	}
	return seeds, false
}

// exReplay is the command that replays a seed.
func exReplay(seed uint64, mutant string) string {
	env := ""
	if mutant != "" {
		env = "TALLYD_SIM_MUTANT=" + mutant + " "
	}
	return fmt.Sprintf("%sTALLYD_SIM_SEED=%d go test -count=1 -run 'TestExplore$' -v ./loop/   (make sim SEED=%d)", env, seed, seed)
}

func TestExplore(t *testing.T) {
	seeds, one := exSeeds(t, exCISeeds)
	mut := envMutant(t)
	opt := defaultExOptions()
	opt.verbose = one
	t0 := time.Now()
	var simulated time.Duration
	ops, failed := 0, 0
	for _, seed := range seeds {
		r := exploreSeed(t, seed, opt)
		simulated += r.simulated
		ops += r.ops
		if one {
			t.Logf("seed %d: %d members, %d requests, %d grants, %v simulated, trace %s\n%s", seed, r.members, r.ops, r.grants,
				r.simulated, r.hash, r.log)
		}
		if r.failed() {
			failed++
			if !one {
				t.Logf("seed %d log:\n%s", seed, r.log)
			}
			t.Errorf("seed %d (%d members) failed:\n  %s\nreplay: %s", seed, r.members, strings.Join(r.violations, "\n  "), exReplay(seed, mut))
			if failed >= 3 {
				t.Fatalf("stopping after 3 failed seeds")
			}
		}
	}
	el := time.Since(t0)
	t.Logf("%d seeds in %v: %.2f seeds/s, %.1f simulated s per real s, %d requests", len(seeds), el.Round(time.Millisecond),
		float64(len(seeds))/el.Seconds(), simulated.Seconds()/el.Seconds(), ops)
}
