package loop

// An in-process, deterministic cluster: N members, each a real *Server built by New with
// cluster mode on, driven on the test's goroutine by a harness that plays gnet (as raft's
// rafttest and interaction_env drive raft nodes). Nothing listens and nothing sleeps:
//
//   - Time is a fake clock (Config.Now) that only the harness moves. Each member is ticked
//     as OnTick would (every loop Tick, sooner when a deadline falls due), and its raft
//     ticks follow from ClusterConfig.Tick.
//   - Connections are in-memory gnet.Conns (simConn). A client's bytes go in with OnTraffic
//     and the test reads what the server Wrote. A peer link is a pair of simConns, one per
//     member, joined by two streams (one per direction) that deliver whole writes in order
//     after a latency, a per-direction delay, and a seeded jitter that reorders deliveries
//     across links but never within one stream. A stream can be held (a partition: nothing
//     is delivered until healed; a sender whose bytes stay held past its link timeout sees
//     its side fail, as TCP_USER_TIMEOUT makes it), and a pair can be cut (every link between
//     them breaks at once and new dials are refused). Bytes are never altered or partly lost.
//   - Dials go through Server.dialHook: the harness connects (after a round trip), refuses,
//     or times the dial out, and runs OnOpen on both members or dialFailed on the dialler.
//   - The raft log is the real one on a t.TempDir, stepped (raftlog.StepRaftLogs): after every
//     event a member ran, the harness has its log writer write what the event queued, as one
//     batch, and the writer's progress report (an EventLoop.Execute) runs on the member a
//     fake fsync later. A kill drops a member at once (no callbacks; its peers see its links
//     close); a restart builds a new Server on the same data directory; a wipe removes it.
//   - Everything random is seeded: the harness's own choices, and crypto/rand's Reader
//     (raft's election timeouts, the key secrets and LockIds) while the simulation runs. One
//     seed gives one run; the trace of messages, client I/O and log lines is the same.
//
// A panic in a member's handler is caught, traced, and kills that member (as the process
// would die); tests check panics() is empty. A member whose server set its fatal error or
// began to stop is stopped: its connections close and its log is closed.
//
// The API, for a test:
//
//	c := newSim(t, 3, seed)          // members 1..3 bootstrap a new cluster
//	l := c.elect()                   // a leader serves, everyone follows and has applied
//	a := c.client(f)                 // a text client on member f's slock port
//	r := a.do("SET", "x", "1")       // send and wait (5 s of fake time at most): r.isOK()
//	a.send(...); r = a.reply(d)      // pipelined; a.incrs(t, "n", 200); a.lock(key, 0, 30) (binary)
//	c.kill(i); c.restart(i, simNew)  // crash, start again on its data (mods: simNew, ...)
//	c.wipe(i)                        // remove its data directory (while down)
//	c.partition(i); c.hold(i, j)     // hold everything to/from i; one direction only
//	c.cut(i, j); c.cutAll(i)         // break links, refuse dials
//	c.delay(i, j, d); c.delayRamp(i, j, d, over)
//	c.heal()                         // every fault gone, held bytes delivered
//	c.run(d); c.runUntil(cond, d)    // let fake time pass
//	c.leader(); c.electOther(old); c.transfer(id); c.others(ids...)
//	c.noPanics(); c.ms[i].fatal; c.raftState(i)
//
// The trace is printed when a test fails (TALLYD_SIM_TRACE=1: always; =all: with heartbeats).

import (
	"cmp"
	"container/heap"
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3/raftpb"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/proto/peer"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/raftlog"
)

// simOptions are the simulation's timings.
type simOptions struct {
	loopTick time.Duration // Config.Tick
	raftTick time.Duration // ClusterConfig.Tick
	timeout  time.Duration // ClusterConfig.Timeout (--cluster-timeout)
	latency  time.Duration // one way, on every peer link
	jitter   time.Duration // up to this much more, per write, seeded
	fsync    time.Duration // from a batch handed to the raft log to its progress report
	insecure bool          // no cluster key: peer links are not authenticated
	mod      func(id uint64, cfg *Config)
}

// simKey is the cluster key of simulated clusters (--cluster-key-file), unless insecure.
var simKey = []byte("the simulated cluster's shared key, 48 bytes long")

// simInsecure runs a simulated cluster without a cluster key.
func simInsecure(o *simOptions) { o.insecure = true }

func defaultSimOptions() simOptions {
	return simOptions{loopTick: 5 * time.Millisecond, raftTick: 20 * time.Millisecond, timeout: time.Second,
		latency: 200 * time.Microsecond, jitter: 300 * time.Microsecond, fsync: time.Millisecond}
}

// sim is the simulated cluster.
type sim struct {
	t     testing.TB
	seed  uint64
	opt   simOptions
	rng   *rand.Rand
	start time.Time
	now   time.Time

	q   simQueue
	seq uint64

	ms     []*simMember // by node id; ms[0] is nil
	peers  map[uint64]string
	faults map[[2]uint64]*simFault
	pipes  []*simPipe
	ports  int
	nconn  int

	closedClients []string // closed during the current event, traced after it

	mu    sync.Mutex // the trace: log lines may come from a log writer's goroutine
	trace []simLine
}

// simLine is one line of the trace; noisy ones (heartbeats) are left out when it is printed.
type simLine struct {
	at    time.Duration
	noisy bool
	text  string
}

// simMember is one member: its addresses, data directory, and its current Server.
type simMember struct {
	c         *sim
	id        uint64
	slockAddr string
	peerAddr  string
	dir       string

	s     *Server
	loop  *simLoop
	inc   int  // incarnation: events of an earlier one are dropped
	up    bool // running
	conns []*simConn
	dials []simDialReq
	cbAt  time.Time // when the last log report runs: reports keep their order

	panicked string // a panic that killed it
	fatal    error  // the error that stopped it
	bootErr  error  // why its last start failed

	fsyncMore time.Duration // added to its fake fsyncs (a slow disk)
	longest   time.Duration // the longest event of its loop, in real time (a turn's length)
	longestAt time.Time     // when it ran (the simulated clock)
	// The most CPU time an event of its loop took (the thread's clock: what it did, however
	// loaded the machine; GC work it was made to assist included), and when.
	longestCPU   time.Duration
	longestCPUAt time.Time
	nextCPU      time.Duration // the most CPU time another event took, and when
	nextCPUAt    time.Time
}

type simDialReq struct {
	d    *peerDial
	addr string
}

// simFault is what happens to the bytes from one member to another.
type simFault struct {
	delay time.Duration // added to every write's latency
	hold  bool          // nothing is delivered (a partition)
	cut   bool          // links break and dials are refused
}

// newSim starts n members (node ids 1..n) bootstrapping a new cluster. Their logs are
// closed when the test ends, and the trace is printed if it failed.
func newSim(t testing.TB, n int, seed uint64, opts ...func(*simOptions)) *sim {
	t.Helper()
	o := defaultSimOptions()
	for _, f := range opts {
		f(&o)
	}
	c := &sim{t: t, seed: seed, opt: o, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), peers: map[uint64]string{},
		faults: map[[2]uint64]*simFault{}, ports: 40000}
	c.now = c.start
	// Raft draws its election timeouts from crypto/rand's Reader, and so do the key secret
	// and the LockIds: seeded for the run, and every draw is on this goroutine.
	var cseed [32]byte
	binary.LittleEndian.PutUint64(cseed[:], seed)
	saved := cryptorand.Reader
	cryptorand.Reader = rand.NewChaCha8(cseed)
	raftlog.StepRaftLogs(true)
	t.Cleanup(func() {
		for _, m := range c.ms {
			if m != nil && m.up {
				c.down(m)
			}
		}
		raftlog.StepRaftLogs(false)
		cryptorand.Reader = saved
		if t.Failed() || os.Getenv("TALLYD_SIM_TRACE") != "" {
			c.dump(os.Getenv("TALLYD_SIM_TRACE") == "all")
		}
	})
	root := t.TempDir()
	c.ms = make([]*simMember, n+1)
	for id := uint64(1); id <= uint64(n); id++ {
		m := &simMember{c: c, id: id, slockAddr: "127.0.0.1:" + strconv.Itoa(7000+int(id)),
			peerAddr: "127.0.0.1:" + strconv.Itoa(8000+int(id)), dir: fmt.Sprintf("%s/m%d", root, id)}
		c.ms[id] = m
		c.peers[id] = m.peerAddr
	}
	for id := uint64(1); id <= uint64(n); id++ {
		if err := c.boot(c.ms[id], true); err != nil {
			t.Fatalf("member %d: %v", id, err)
		}
	}
	c.netTick()
	return c
}

// ---------------------------------------------------------------------------------------
// Time and events.

type simEvent struct {
	at  time.Time
	seq uint64
	fn  func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// at runs fn at time t (never before now), after everything already due then.
func (c *sim) at(t time.Time, fn func()) {
	if t.Before(c.now) {
		t = c.now
	}
	c.seq++
	heap.Push(&c.q, &simEvent{at: t, seq: c.seq, fn: fn})
}

// onMember runs fn on m's loop at t, if the same incarnation of m is still up then.
func (c *sim) onMember(m *simMember, t time.Time, fn func()) {
	inc := m.inc
	c.at(t, func() {
		if m.up && m.inc == inc {
			c.runOn(m, fn)
		}
	})
}

// runOn runs fn as one event of m's loop (m is up): a panic kills m; then the log is
// stepped, dials are placed and a stop is noticed.
func (c *sim) runOn(m *simMember, fn func()) {
	inc := m.inc
	runtime.LockOSThread() // the event's CPU time is its thread's
	t0, c0 := time.Now(), threadCPU()
	ok := c.guard(m, fn)
	cpu := threadCPU() - c0
	runtime.UnlockOSThread()
	if d := time.Since(t0); d > m.longest {
		m.longest, m.longestAt = d, c.now
	}
	if cpu > m.longestCPU {
		m.nextCPU, m.nextCPUAt = m.longestCPU, m.longestCPUAt
		m.longestCPU, m.longestCPUAt = cpu, c.now
	} else if cpu > m.nextCPU {
		m.nextCPU, m.nextCPUAt = cpu, c.now
	}
	if !ok {
		return
	}
	if m.up && m.inc == inc {
		c.settle(m)
	}
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// guard runs fn, catching a panic: the member dies of it. It reports whether fn returned.
func (c *sim) guard(m *simMember, fn func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			m.panicked = fmt.Sprint(r)
			c.tracef(false, "m%d PANIC %v\n%s", m.id, r, debug.Stack())
			c.crash(m)
			ok = false
		}
	}()
	fn()
	return true
}

// settle runs after each event of m: the dials it asked for are placed (in a fixed order:
// the server asks in map order), its log writes what was queued, and the writer's reports
// are run a fake fsync later.
func (c *sim) settle(m *simMember) {
	ds := m.dials
	m.dials = nil
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].d.join != ds[j].d.join {
			return !ds[i].d.join
		}
		return ds[i].d.id < ds[j].d.id
	})
	for _, d := range ds {
		c.dial(m, d)
	}
	if cl := m.s.cl; cl != nil && cl.m.St.Log != nil {
		cl.m.St.Log.Step()
	}
	for _, r := range m.loop.take() {
		at := c.now.Add(c.opt.fsync + m.fsyncMore)
		if at.Before(m.cbAt) {
			at = m.cbAt
		}
		m.cbAt = at
		c.onMember(m, at, func() { _ = r.Run(context.Background()) })
	}
	if f := m.s.persist.fatal.Load(); f != nil {
		c.stop(m, *f)
	} else if m.s.run.stopping.Load() {
		c.stop(m, errors.New("stopping"))
	}
}

// step runs the next event; false when there is none.
func (c *sim) step() bool {
	if len(c.q) == 0 {
		return false
	}
	e := heap.Pop(&c.q).(*simEvent)
	if e.at.After(c.now) {
		c.now = e.at
	}
	e.fn()
	c.traceClosed()
	return true
}

// traceClosed traces the clients whose connections the last event closed, by name: a server
// closes several in Go's map order (abdicate), which a seed does not fix.
func (c *sim) traceClosed() {
	slices.Sort(c.closedClients)
	for _, n := range c.closedClients {
		c.tracef(false, "%s: connection closed", n)
	}
	c.closedClients = c.closedClients[:0]
}

// runUntil runs events until cond holds (true) or d of fake time has passed (false).
func (c *sim) runUntil(cond func() bool, d time.Duration) bool {
	deadline := c.now.Add(d)
	for !cond() {
		if len(c.q) == 0 || c.q[0].at.After(deadline) {
			c.now = deadline
			return cond()
		}
		c.step()
	}
	return true
}

// run lets d of fake time pass.
func (c *sim) run(d time.Duration) { c.runUntil(func() bool { return false }, d) }

// elapsed is the fake time since the start.
func (c *sim) elapsed() time.Duration { return c.now.Sub(c.start) }

// ---------------------------------------------------------------------------------------
// Members: start, ticks, kill, restart, wipe.

// simMod changes a member's configuration for one start.
type simMod func(cfg *Config)

// simNew starts a member with --initial-cluster-state new (simExisting: existing, the
// default).
func simNew(cfg *Config) { cfg.Cluster.New = true }

func simExisting(cfg *Config) { cfg.Cluster.New = false }

// config is member m's configuration: its slock and peer listeners, its data directory,
// the fake clock, and a log into the trace.
func (c *sim) config(m *simMember) Config {
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: m.slockAddr}, {Proto: ProtoPeer, Addr: m.peerAddr}}
	cfg.DataDir = m.dir
	cfg.Tick = c.opt.loopTick
	cfg.CounterBuckets, cfg.SemaphoreBuckets = 16, 16
	cfg.Now = func() time.Time { return c.now }
	cfg.Log = zerolog.New(simLogWriter{c, m.id}).Level(zerolog.InfoLevel)
	peers := make(map[uint64]string, len(c.peers))
	for id, a := range c.peers {
		peers[id] = a
	}
	cfg.Cluster = &ClusterConfig{NodeID: m.id, Peers: peers, PeerAddr: m.peerAddr, Tick: c.opt.raftTick,
		Timeout: c.opt.timeout}
	if !c.opt.insecure {
		cfg.Cluster.Key = simKey
	}
	if c.opt.mod != nil {
		c.opt.mod(m.id, &cfg)
	}
	return cfg
}

// boot starts a new Server for m on its data directory, as Run does but without gnet:
// New, the raft log opened (openCluster), the listeners known by their ports (OnBoot),
// then the first tick (the first OnOpen's). first is the cluster's first start
// (--initial-cluster-state new); a restart keeps the default unless mods say otherwise.
func (c *sim) boot(m *simMember, first bool, mods ...simMod) error {
	if m.up {
		c.t.Fatalf("sim: member %d is already up", m.id)
	}
	cfg := c.config(m)
	if first {
		cfg.Cluster.New = true
	}
	for _, f := range mods {
		f(&cfg)
	}
	m.inc++
	m.panicked, m.fatal, m.bootErr = "", nil, nil
	s, err := New(cfg)
	if err != nil {
		return err
	}
	m.s, m.loop, m.conns, m.dials = s, &simLoop{m: m}, nil, nil
	s.run.dialHook = func(d *peerDial, addr string) { m.dials = append(m.dials, simDialReq{d, addr}) }
	if !c.guard(m, func() { err = s.openCluster() }) {
		err = errors.New("openCluster panicked: " + m.panicked)
	}
	if err != nil {
		if s.cl != nil && s.cl.m.St.Log != nil {
			s.cl.m.St.Log.Unstepped()
			s.cl.m.St.Log.Close()
		}
		m.bootErr = err
		c.tracef(false, "m%d start failed: %v", m.id, err)
		return err
	}
	addrs := make([]net.Addr, len(s.cfg.Listeners))
	for i, l := range s.cfg.Listeners {
		a := simAddr(l.Addr)
		addrs[i] = a
		s.ct.byPort[a.Port] = &listenerState{Listener: l}
	}
	s.run.addrs = addrs
	s.run.markReady()
	s.run.el.Store(gnet.EventLoop(m.loop))
	m.up = true
	c.tracef(false, "m%d started (incarnation %d)", m.id, m.inc)
	c.tick(m, c.now.Add(time.Duration(c.rng.Int64N(int64(c.opt.loopTick))))) // each its own phase
	return nil
}

// tick runs m's tick at t, as OnTick hands it over, and the next one when OnTick would.
func (c *sim) tick(m *simMember, t time.Time) {
	c.onMember(m, t, func() {
		s := m.s
		s.tickHook()
		_ = s.tick(context.Background())
		delay := s.cfg.Tick
		if due := s.run.nextDue.Load(); due != math.MaxInt64 {
			if d := time.Duration(due - c.now.UnixNano()); d < delay {
				delay = max(d, minTick)
			}
		}
		c.tick(m, c.now.Add(delay))
	})
}

// kill drops member id at once, as kill -9: no callback runs, its links close (its peers
// get what it had sent, then the end of the stream), its clients see their connections
// close, and what its log wrote stays.
func (c *sim) kill(id uint64) {
	m := c.ms[id]
	if !m.up {
		return
	}
	c.tracef(false, "m%d KILLED", id)
	c.crash(m)
	c.traceClosed()
}

// crash is kill's work, also done to a member that panicked.
func (c *sim) crash(m *simMember) {
	m.up = false
	m.inc++
	for _, sc := range m.conns {
		if !sc.closed {
			sc.closed = true
			c.transportClosed(sc)
		}
	}
	m.conns = nil
	m.loop.take()
	if cl := m.s.cl; cl != nil && cl.m.St.Log != nil {
		cl.m.St.Log.Unstepped()
		cl.m.St.Log.Close()
	}
}

// stop stops m as its engine would once the server asked to stop (its fatal error set):
// every connection closes with OnClose, and its log is closed.
func (c *sim) stop(m *simMember, err error) {
	m.fatal = err
	c.tracef(false, "m%d STOPPED: %v", m.id, err)
	for _, sc := range append([]*simConn(nil), m.conns...) {
		c.guard(m, func() { c.closeConn(sc, nil) })
	}
	m.up = false
	m.inc++
	m.conns = nil
	m.loop.take()
	if cl := m.s.cl; cl != nil && cl.m.St.Log != nil {
		cl.m.St.Log.Unstepped()
		m.s.closeCluster()
	}
}

// down takes a member out at the end of the test (as kill, without a trace line).
func (c *sim) down(m *simMember) { c.crash(m) }

// restart starts member id again on its data directory (after kill, stop or wipe).
func (c *sim) restart(id uint64, mods ...simMod) error {
	c.tracef(false, "m%d restarting", id)
	return c.boot(c.ms[id], false, mods...)
}

// wipe removes member id's data directory (it must be down).
func (c *sim) wipe(id uint64) {
	m := c.ms[id]
	if m.up {
		c.t.Fatalf("sim: wipe of member %d while it runs", id)
	}
	c.tracef(false, "m%d data directory WIPED", id)
	if err := os.RemoveAll(m.dir); err != nil {
		c.t.Fatal(err)
	}
}

// panics lists the members that panicked, and why.
func (c *sim) panics() []string {
	var p []string
	for _, m := range c.ms {
		if m != nil && m.panicked != "" {
			p = append(p, fmt.Sprintf("m%d: %s", m.id, m.panicked))
		}
	}
	return p
}

// noPanics fails the test if a member panicked.
func (c *sim) noPanics() {
	c.t.Helper()
	if p := c.panics(); len(p) > 0 {
		c.t.Fatalf("a member panicked: %s", strings.Join(p, "; "))
	}
}

// ---------------------------------------------------------------------------------------
// Who leads.

// leader returns the member that leads and serves (ready), 0 if none. With two that think
// they lead (a deposed one not yet told), the one of the higher term.
func (c *sim) leader() uint64 {
	var best uint64
	var term uint64
	for _, m := range c.ms {
		if m == nil || !m.up || m.s.cl == nil || !m.s.cl.serving() {
			continue
		}
		if t := m.s.cl.m.Term(); best == 0 || t > term {
			best, term = m.id, t
		}
	}
	return best
}

// elect runs until a leader serves and every member up knows it and has applied what it
// has committed (at most 10 s of fake time), and returns it.
func (c *sim) elect() uint64 {
	c.t.Helper()
	ok := c.runUntil(func() bool {
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
	}, 10*time.Second)
	if !ok {
		c.t.Fatalf("no leader elected within 10s (at %v)", c.elapsed())
	}
	return c.leader()
}

// electOther waits until a member other than old leads and serves (at most 10 s).
func (c *sim) electOther(old uint64) uint64 {
	c.t.Helper()
	if !c.runUntil(func() bool { l := c.leader(); return l != 0 && l != old }, 10*time.Second) {
		c.t.Fatalf("no new leader (other than %d) within 10s (at %v)", old, c.elapsed())
	}
	return c.leader()
}

// transfer asks the leader to hand leadership to id and waits until id serves (at most 5 s).
func (c *sim) transfer(id uint64) {
	c.t.Helper()
	l := c.leader()
	if l == 0 {
		c.t.Fatal("sim: transfer without a leader")
	}
	c.tracef(false, "leadership transfer m%d -> m%d", l, id)
	m := c.ms[l]
	c.runOn(m, func() {
		m.s.cl.m.TransferLeader(id)
		m.s.flush()
	})
	if !c.runUntil(func() bool { return c.leader() == id }, 5*time.Second) {
		c.t.Fatalf("leadership did not move to %d within 5s", id)
	}
}

// others returns the member ids other than those given, in order.
func (c *sim) others(not ...uint64) []uint64 {
	var r []uint64
next:
	for _, m := range c.ms {
		if m == nil {
			continue
		}
		for _, n := range not {
			if m.id == n {
				continue next
			}
		}
		r = append(r, m.id)
	}
	return r
}

// ---------------------------------------------------------------------------------------
// The network: faults.

func (c *sim) fault(from, to uint64) *simFault {
	k := [2]uint64{from, to}
	f := c.faults[k]
	if f == nil {
		f = &simFault{}
		c.faults[k] = f
	}
	return f
}

// delay adds d to the latency of everything from -> to (0 removes it).
func (c *sim) delay(from, to uint64, d time.Duration) {
	c.tracef(false, "net: m%d>m%d delayed by %v", from, to, d)
	c.fault(from, to).delay = d
}

// delayRamp raises the delay of everything from -> to steadily from what it is to d over
// the given time (in 10 ms steps): later writes arrive later and later, but never all
// stop arriving for long, as on a link filling its buffers.
func (c *sim) delayRamp(from, to uint64, d, over time.Duration) {
	c.tracef(false, "net: m%d>m%d delay rising to %v over %v", from, to, d, over)
	f := c.fault(from, to)
	start, t0 := f.delay, c.now
	const step = 10 * time.Millisecond
	for t := step; t <= over; t += step {
		v := start + time.Duration(float64(d-start)*float64(t)/float64(over))
		c.at(t0.Add(t), func() { c.fault(from, to).delay = v })
	}
}

// hold stops delivering what from sends to (one direction of a partition): it waits until
// healed, or fails its sender's side of the link once older than its link timeout. Dials
// either way time out.
func (c *sim) hold(from, to uint64) {
	c.tracef(false, "net: m%d>m%d held", from, to)
	c.fault(from, to).hold = true
}

// partition holds everything to and from id.
func (c *sim) partition(id uint64) {
	c.tracef(false, "net: m%d partitioned", id)
	for _, m := range c.ms {
		if m != nil && m.id != id {
			c.fault(id, m.id).hold = true
			c.fault(m.id, id).hold = true
		}
	}
}

// cut breaks every link between a and b (both sides see it close, what was in flight is
// lost) and refuses dials between them until healed.
func (c *sim) cut(a, b uint64) {
	c.tracef(false, "net: m%d-m%d cut", a, b)
	c.fault(a, b).cut = true
	c.fault(b, a).cut = true
	for _, p := range slices.Clone(c.pipes) { // breakPipe reaps c.pipes in place
		x, y := p.ends[0].m.id, p.ends[1].m.id
		if x == a && y == b || x == b && y == a {
			c.breakPipe(p, syscall.ECONNRESET)
		}
	}
}

// cutAll cuts every link of id.
func (c *sim) cutAll(id uint64) {
	for _, m := range c.ms {
		if m != nil && m.id != id {
			c.cut(id, m.id)
		}
	}
}

// heal removes every fault: held bytes are delivered (in order), dials succeed.
func (c *sim) heal() {
	c.tracef(false, "net: healed")
	clear(c.faults)
	for _, p := range c.pipes {
		for _, st := range p.st {
			for _, sg := range st.segs {
				if sg.held {
					c.timeSeg(st, sg)
				}
			}
		}
	}
}

// linkTimeout is how long m's side of a link may have bytes held before it fails.
func (m *simMember) linkTimeout() time.Duration {
	if m.up && m.s.cl != nil {
		return m.s.linkTimeout()
	}
	return time.Second
}

// ---------------------------------------------------------------------------------------
// The network: links.

// simPipe is one TCP connection between two members: ends[0] dialled, ends[1] accepted;
// st[k] carries what ends[k] writes to ends[1-k].
type simPipe struct {
	ends [2]*simConn
	st   [2]*simStream
}

type simStream struct {
	p       *simPipe
	k       int
	segs    []*simSeg
	last    time.Time // when the last write is due: a stream never reorders
	pumpAt  time.Time
	pumpGen int
	pumping bool
	parse   []byte // what was written and not yet traced (a frame cut across writes)
}

type simSeg struct {
	data []byte
	fin  bool // the sender closed: the end of the stream
	sent time.Time
	at   time.Time
	held bool
}

func (st *simStream) from() *simConn { return st.p.ends[st.k] }
func (st *simStream) to() *simConn   { return st.p.ends[1-st.k] }

// dial answers a dial m's server asked for: connected after a round trip, refused (no
// member there, dead, or the pair cut), or timed out after a second (held).
func (c *sim) dial(m *simMember, r simDialReq) {
	var to *simMember
	for _, x := range c.ms {
		if x != nil && x.peerAddr == r.addr {
			to = x
		}
	}
	rtt := 2 * c.opt.latency
	fail := func(after time.Duration, why string) {
		c.tracef(false, "net: m%d dials %s: %s", m.id, r.addr, why)
		c.onMember(m, c.now.Add(after), func() {
			m.s.dialFailed(r.d)
			m.s.flush()
		})
	}
	switch {
	case to == nil || !to.up:
		fail(rtt, "refused")
		return
	case c.fault(m.id, to.id).cut || c.fault(to.id, m.id).cut:
		fail(rtt, "refused (cut)")
		return
	case c.fault(m.id, to.id).hold || c.fault(to.id, m.id).hold:
		fail(time.Second, "timed out (held)")
		return
	}
	inc, toInc := m.inc, to.inc
	c.at(c.now.Add(rtt), func() {
		if !m.up || m.inc != inc {
			return
		}
		if !to.up || to.inc != toInc || c.fault(m.id, to.id).cut || c.fault(to.id, m.id).cut {
			fail(0, "refused")
			return
		}
		c.connect(m, to, r.d)
	})
}

// connect makes a link from a (which dialled, d) to b: b accepts it on its peer port, a
// registers it with d as its context.
func (c *sim) connect(a, b *simMember, d *peerDial) {
	p := &simPipe{}
	c.ports++
	da := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: c.ports}
	p.ends[0] = c.newConn(a, fmt.Sprintf("m%d>m%d", a.id, b.id), da, simAddr(b.peerAddr))
	p.ends[1] = c.newConn(b, fmt.Sprintf("m%d<m%d", b.id, a.id), simAddr(b.peerAddr), da)
	p.ends[0].ctx = d
	for k := range p.st {
		p.st[k] = &simStream{p: p, k: k}
		p.ends[k].pipe, p.ends[k].side = p, k
	}
	c.pipes = append(c.pipes, p)
	c.tracef(false, "net: link m%d>m%d up", a.id, b.id)
	c.onMember(b, c.now, func() { c.open(p.ends[1]) })
	c.onMember(a, c.now, func() { c.open(p.ends[0]) })
}

// send puts what sc wrote on its stream.
func (c *sim) send(sc *simConn, b []byte) {
	st := sc.pipe.st[sc.side]
	sg := &simSeg{data: append([]byte(nil), b...), sent: c.now}
	st.segs = append(st.segs, sg)
	c.traceFrames(st, b)
	c.timeSeg(st, sg)
}

// fin ends sc's stream (its side closed).
func (c *sim) fin(sc *simConn) {
	st := sc.pipe.st[sc.side]
	sg := &simSeg{fin: true, sent: c.now}
	st.segs = append(st.segs, sg)
	c.timeSeg(st, sg)
}

// timeSeg sets when sg arrives: held while its direction is, else after the latency, the
// delay and a jitter, never before what was written before it.
func (c *sim) timeSeg(st *simStream, sg *simSeg) {
	from, to := st.from().m.id, st.to().m.id
	f := c.fault(from, to)
	if f.hold {
		sg.held = true
		return
	}
	sg.held = false
	d := c.opt.latency + f.delay
	if c.opt.jitter > 0 {
		d += time.Duration(c.rng.Int64N(int64(c.opt.jitter)))
	}
	at := c.now.Add(d)
	if at.Before(st.last) {
		at = st.last
	}
	st.last, sg.at = at, at
	c.pump(st, at)
}

// pump delivers st's due writes at t.
func (c *sim) pump(st *simStream, t time.Time) {
	if st.pumping && !st.pumpAt.After(t) {
		return
	}
	st.pumpGen++
	st.pumping, st.pumpAt = true, t
	gen := st.pumpGen
	c.at(t, func() {
		if gen != st.pumpGen {
			return
		}
		st.pumping = false
		c.deliver(st)
	})
}

// deliver hands the receiver every write of st due by now, with one OnTraffic.
func (c *sim) deliver(st *simStream) {
	from, to := st.from(), st.to()
	if c.fault(from.m.id, to.m.id).hold {
		for _, sg := range st.segs {
			sg.held = true
		}
		return
	}
	var data []byte
	fin := false
	n := 0
	for ; n < len(st.segs); n++ {
		sg := st.segs[n]
		if sg.held || sg.at.After(c.now) || fin {
			break
		}
		if sg.fin {
			fin = true
		}
		data = append(data, sg.data...)
	}
	st.segs = st.segs[n:]
	if len(st.segs) > 0 && !st.segs[0].held {
		c.pump(st, st.segs[0].at)
	}
	c.reap()
	if to.closed || !to.m.up || to.m.inc != to.inc {
		return // a closed socket: gone
	}
	m := to.m
	c.runOn(m, func() {
		if len(data) > 0 {
			to.in = append(to.in, data...)
			c.traffic(to)
		}
		if fin && !to.closed {
			c.closeConn(to, io.EOF)
		}
	})
}

// breakPipe fails both sides of a link now (what is in flight is lost).
func (c *sim) breakPipe(p *simPipe, err error) {
	for k := range p.st {
		p.st[k].segs = nil
		p.st[k].pumpGen++
		p.st[k].pumping = false
	}
	for _, sc := range p.ends {
		if !sc.closed && sc.m.up && sc.m.inc == sc.inc {
			sc := sc
			c.runOn(sc.m, func() { c.closeConn(sc, err) })
		}
		sc.closed = true
	}
	c.reap()
}

// checkHeld fails the sending side of each link whose held bytes are older than its link
// timeout (TCP_USER_TIMEOUT); runs every 10 ms of fake time.
func (c *sim) checkHeld() {
	for _, p := range c.pipes {
		for _, st := range p.st {
			if len(st.segs) == 0 || !st.segs[0].held {
				continue
			}
			from := st.from()
			if c.now.Sub(st.segs[0].sent) < from.m.linkTimeout() {
				continue
			}
			st.segs = nil
			if !from.closed && from.m.up && from.m.inc == from.inc {
				c.tracef(false, "net: %s timed out (held)", from.name)
				c.runOn(from.m, func() { c.closeConn(from, syscall.ETIMEDOUT) })
			}
			from.closed = true
		}
	}
	c.reap()
}

// reap forgets links closed on both sides with nothing left to deliver.
func (c *sim) reap() {
	kept := c.pipes[:0]
	for _, p := range c.pipes {
		if p.ends[0].closed && p.ends[1].closed && len(p.st[0].segs) == 0 && len(p.st[1].segs) == 0 {
			continue
		}
		kept = append(kept, p)
	}
	clear(c.pipes[len(kept):])
	c.pipes = kept
}

// netTick starts the link timeout checks.
func (c *sim) netTick() {
	c.at(c.now.Add(10*time.Millisecond), func() {
		c.checkHeld()
		c.netTick()
	})
}

// simAddr parses a host:port of the simulation.
func simAddr(a string) *net.TCPAddr {
	host, port, _ := net.SplitHostPort(a)
	p, _ := strconv.Atoi(port)
	return &net.TCPAddr{IP: net.ParseIP(host), Port: p}
}

// ---------------------------------------------------------------------------------------
// Connections: the fake gnet.Conn and gnet.EventLoop.

// simConn is an in-memory gnet.Conn on a member's loop: a client's or one end of a link.
type simConn struct {
	gnet.Conn // nil: a method the loop was not expected to use panics
	c         *sim
	m         *simMember
	inc       int
	name      string
	ctx       any
	in        []byte
	local     *net.TCPAddr
	remote    *net.TCPAddr
	opened    bool // OnOpen ran
	closed    bool // OnClose ran, or the member died

	client *simClient // a client's connection: what is written goes to it
	pipe   *simPipe   // a link's end: what is written goes on pipe.st[side]
	side   int
}

func (c *sim) newConn(m *simMember, name string, local, remote *net.TCPAddr) *simConn {
	sc := &simConn{c: c, m: m, inc: m.inc, name: name, local: local, remote: remote}
	m.conns = append(m.conns, sc)
	return sc
}

func (sc *simConn) Context() any          { return sc.ctx }
func (sc *simConn) SetContext(ctx any)    { sc.ctx = ctx }
func (sc *simConn) Fd() int               { return -1 }
func (sc *simConn) LocalAddr() net.Addr   { return sc.local }
func (sc *simConn) RemoteAddr() net.Addr  { return sc.remote }
func (sc *simConn) InboundBuffered() int  { return len(sc.in) }
func (sc *simConn) OutboundBuffered() int { return 0 }
func (sc *simConn) EventLoop() gnet.EventLoop {
	return sc.m.loop
}

func (sc *simConn) Peek(n int) ([]byte, error) {
	if n <= 0 {
		return sc.in, nil
	}
	if n > len(sc.in) {
		return sc.in, io.ErrShortBuffer
	}
	return sc.in[:n], nil
}

func (sc *simConn) Discard(n int) (int, error) {
	if n <= 0 || n > len(sc.in) {
		n = len(sc.in)
	}
	sc.in = sc.in[n:]
	if len(sc.in) == 0 {
		sc.in = nil
	}
	return n, nil
}

func (sc *simConn) Write(b []byte) (int, error) {
	if sc.closed {
		return 0, net.ErrClosed
	}
	switch {
	case sc.client != nil:
		sc.client.rx = append(sc.client.rx, b...)
	case sc.pipe != nil:
		sc.c.send(sc, b)
	}
	return len(b), nil
}

// Wake has OnTraffic run for sc again (at once, after what is already due).
func (sc *simConn) Wake(gnet.AsyncCallback) error {
	if sc.closed {
		return nil
	}
	sc.c.onMember(sc.m, sc.c.now, func() {
		if sc.inc == sc.m.inc {
			sc.c.traffic(sc)
		}
	})
	return nil
}

// Close closes sc asynchronously, as gnet's Conn.Close.
func (sc *simConn) Close() error {
	if sc.closed {
		return nil
	}
	sc.c.onMember(sc.m, sc.c.now, func() { sc.c.closeConn(sc, nil) })
	return nil
}

// open runs OnOpen for sc (on its member's loop).
func (c *sim) open(sc *simConn) {
	if sc.closed {
		return
	}
	sc.opened = true
	if _, act := sc.m.s.OnOpen(sc); act == gnet.Close {
		c.closeConn(sc, nil)
	}
}

// traffic runs OnTraffic for sc (on its member's loop), and closes it if asked.
func (c *sim) traffic(sc *simConn) {
	if sc.closed || !sc.opened {
		return
	}
	if sc.m.s.OnTraffic(sc) == gnet.Close {
		c.closeConn(sc, nil)
	}
}

// closeConn closes sc as gnet does (on its member's loop): OnClose, then its transport.
func (c *sim) closeConn(sc *simConn, err error) {
	if sc.closed {
		return
	}
	sc.closed = true
	if sc.pipe != nil {
		why := "closed"
		if err != nil {
			why = err.Error()
		}
		c.tracef(false, "net: %s closes: %s", sc.name, why)
	}
	if sc.opened && sc.m.up && sc.m.inc == sc.inc {
		sc.m.s.OnClose(sc, err)
	}
	c.transportClosed(sc)
}

// transportClosed tells the other end: a client sees its connection closed; a link's peer
// gets the end of the stream after what was sent.
func (c *sim) transportClosed(sc *simConn) {
	switch {
	case sc.client != nil:
		sc.client.closed = true
		c.closedClients = append(c.closedClients, sc.client.name)
	case sc.pipe != nil:
		c.fin(sc)
	}
}

// simLoop is a member's gnet.EventLoop: Execute queues the runnable for the harness (it is
// called by the raft log's writer goroutine, through runFlushed).
type simLoop struct {
	m      *simMember
	mu     sync.Mutex
	queued []gnet.Runnable
}

func (l *simLoop) Execute(_ context.Context, r gnet.Runnable) error {
	l.mu.Lock()
	l.queued = append(l.queued, r)
	l.mu.Unlock()
	return nil
}

func (l *simLoop) take() []gnet.Runnable {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.queued
	l.queued = nil
	return r
}

// Close closes c now, on the loop (OnClose runs before it returns), as gnet's.
func (l *simLoop) Close(c gnet.Conn) error {
	sc, ok := c.(*simConn)
	if !ok {
		panic(fmt.Sprintf("sim: EventLoop.Close of a %T", c))
	}
	l.m.c.closeConn(sc, nil)
	return nil
}

func (l *simLoop) Register(context.Context, net.Addr) (<-chan gnet.RegisteredResult, error) {
	panic("sim: EventLoop.Register (dials go through Server.dialHook)")
}

func (l *simLoop) Enroll(context.Context, net.Conn) (<-chan gnet.RegisteredResult, error) {
	panic("sim: EventLoop.Enroll")
}

func (l *simLoop) Schedule(context.Context, gnet.Runnable, time.Duration) error {
	return errors.New("sim: Schedule is not supported (nor is it by gnet)")
}

// ---------------------------------------------------------------------------------------
// The trace.

func (c *sim) tracef(noisy bool, format string, args ...any) {
	c.mu.Lock()
	c.trace = append(c.trace, simLine{at: c.now.Sub(c.start), noisy: noisy, text: fmt.Sprintf(format, args...)})
	c.mu.Unlock()
}

// traceText is the whole trace (noisy lines included when all), one line per event.
func (c *sim) traceText(all bool) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, l := range c.trace {
		if l.noisy && !all {
			continue
		}
		fmt.Fprintf(&b, "%10.6f %s\n", l.at.Seconds(), l.text)
	}
	return b.String()
}

// dump prints the trace (set TALLYD_SIM_TRACE=1 to print it for passing tests too, =all
// for the heartbeats as well).
func (c *sim) dump(all bool) {
	c.t.Logf("sim trace (seed %d; heartbeats %s):\n%s", c.seed, map[bool]string{true: "shown", false: "left out"}[all],
		c.traceText(all))
}

// traceFrames traces the peer frames written on st, once whole.
//
// A run of Close frames in one write is traced in session order: the server writes them
// while ranging over a map of sessions (leaderChanged, expireSessions, abdicate's closes),
// so their order on the wire is Go's map order, the one thing a seed does not fix. Each
// ends a different session, so the order does not change what the receiver does.
func (c *sim) traceFrames(st *simStream, b []byte) {
	st.parse = append(st.parse, b...)
	dir := fmt.Sprintf("m%d>m%d", st.from().m.id, st.to().m.id)
	suffix := ""
	if held := c.fault(st.from().m.id, st.to().m.id); held.hold {
		suffix = " (held)"
	} else if held.delay > 0 {
		suffix = " (+" + held.delay.String() + ")"
	}
	var closes [][2]uint64 // session, why
	flushCloses := func() {
		slices.SortFunc(closes, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
		for _, x := range closes {
			c.tracef(false, "%s Close s%d why=%d%s", dir, x[0], x[1], suffix)
		}
		closes = closes[:0]
	}
	defer flushCloses()
	for {
		f, n, err := peer.Parse(st.parse)
		if err != nil {
			c.tracef(false, "%s bad frame: %v", dir, err)
			st.parse = nil
			return
		}
		if n == 0 {
			return
		}
		st.parse = st.parse[n:]
		if f.Type == peer.TypeClose {
			closes = append(closes, [2]uint64{f.Session, uint64(f.Why)})
			continue
		}
		flushCloses()
		text, noisy := describeFrame(&f)
		c.tracef(noisy, "%s %s%s", dir, text, suffix)
	}
}

// describeFrame renders a peer frame for the trace; heartbeats are noisy.
func describeFrame(f *peer.Frame) (string, bool) {
	switch f.Type {
	case peer.TypeRaft:
		m := &raftpb.Message{}
		if err := proto.Unmarshal(f.Msg, m); err != nil {
			return "Raft <bad: " + err.Error() + ">", false
		}
		t := m.GetType()
		return describeMsg(m), t == raftpb.MessageType_MsgHeartbeat || t == raftpb.MessageType_MsgHeartbeatResp
	case peer.TypeForward:
		kind := "text"
		if f.Kind == peer.KindBinary {
			kind = "binary"
		}
		return fmt.Sprintf("Forward s%d %s L%d %s", f.Session, kind, f.Level, describeBytes(f.Data, f.Kind == peer.KindBinary)), false
	case peer.TypeReply:
		return fmt.Sprintf("Reply s%d %s", f.Session, describeBytes(f.Data, len(f.Data) > 0 && f.Data[0] == 0x56)), false
	case peer.TypeHello:
		return fmt.Sprintf("Hello from %d %s", f.From, f.Addr), false
	case peer.TypeJoin:
		return fmt.Sprintf("Join %d %s", f.ID, f.Addr), false
	case peer.TypeJoinReply:
		return fmt.Sprintf("JoinReply ok=%v leader=%d %q", f.OK, f.LeaderID, f.Err), false
	}
	return f.Type.String(), false
}

// describeMsg renders a raft message: type, term, and what matters of the rest.
func describeMsg(m *raftpb.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s t%d", strings.TrimPrefix(m.GetType().String(), "Msg"), m.GetTerm())
	switch m.GetType() {
	case raftpb.MessageType_MsgApp:
		fmt.Fprintf(&b, " prev=%d/t%d commit=%d", m.GetIndex(), m.GetLogTerm(), m.GetCommit())
		if ents := m.GetEntries(); len(ents) > 0 {
			fmt.Fprintf(&b, " ents=%d..%d", ents[0].GetIndex(), ents[len(ents)-1].GetIndex())
		}
	case raftpb.MessageType_MsgAppResp:
		fmt.Fprintf(&b, " index=%d", m.GetIndex())
		if m.GetReject() {
			fmt.Fprintf(&b, " REJECT hint=%d", m.GetRejectHint())
		}
	case raftpb.MessageType_MsgVote, raftpb.MessageType_MsgPreVote:
		fmt.Fprintf(&b, " last=%d/t%d", m.GetIndex(), m.GetLogTerm())
	case raftpb.MessageType_MsgVoteResp, raftpb.MessageType_MsgPreVoteResp:
		if m.GetReject() {
			b.WriteString(" REJECT")
		} else {
			b.WriteString(" granted")
		}
	case raftpb.MessageType_MsgHeartbeat:
		fmt.Fprintf(&b, " commit=%d", m.GetCommit())
	case raftpb.MessageType_MsgSnap:
		md := m.GetSnapshot().GetMetadata()
		fmt.Fprintf(&b, " snap=%d/t%d", md.GetIndex(), md.GetTerm())
	case raftpb.MessageType_MsgReadIndex, raftpb.MessageType_MsgReadIndexResp:
		fmt.Fprintf(&b, " index=%d", m.GetIndex())
	}
	return b.String()
}

// describeBytes renders client bytes: RESP commands or replies as text, binary as hex.
func describeBytes(b []byte, binary bool) string {
	if binary {
		return fmt.Sprintf("<%d bytes binary>", len(b))
	}
	var parts []string
	for len(b) > 0 {
		r, n, err := resp.ParseReply(b)
		if err != nil || n == 0 {
			parts = append(parts, strconv.Quote(string(b)))
			break
		}
		parts = append(parts, showCommand(r))
		b = b[n:]
	}
	return strings.Join(parts, "; ")
}

// showCommand renders a command (an array of bulk strings) as its words, anything else as
// a reply.
func showCommand(r resp.Reply) string {
	if r.Kind != '*' || len(r.Elems) == 0 {
		return showReply(r)
	}
	words := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		if e.Kind != '$' || e.Null {
			return showReply(r)
		}
		words[i] = string(e.Str)
	}
	return strings.Join(words, " ")
}

// showReply renders a RESP reply on one line.
func showReply(r resp.Reply) string {
	switch r.Kind {
	case '+':
		return "+" + string(r.Str)
	case '-':
		return "-" + string(r.Str)
	case ':':
		return ":" + strconv.FormatInt(r.Int, 10)
	case '$':
		if r.Null {
			return "(nil)"
		}
		return strconv.Quote(string(r.Str))
	case '*':
		if r.Null {
			return "(nil array)"
		}
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = showReply(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return "?"
}

// simLogWriter puts a member's log lines in the trace, without the fields that measure
// real time.
type simLogWriter struct {
	c  *sim
	id uint64
}

func (w simLogWriter) Write(p []byte) (int, error) {
	d := json.NewDecoder(strings.NewReader(string(p)))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		w.c.tracef(false, "m%d log %s", w.id, strings.TrimSpace(string(p)))
		return len(p), nil
	}
	lvl, _ := m["level"].(string)
	msg, _ := m["message"].(string)
	keys := make([]string, 0, len(m))
	for k := range m {
		switch k {
		case "level", "message", "took_ms", "elapsed_us", "time", "longest_tick_ms", "ticks":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "m%d log %s %s", w.id, strings.ToUpper(lvl), msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, m[k])
	}
	w.c.tracef(false, "%s", b.String())
	return len(p), nil
}

// raftState describes member id's raft state, for failure messages.
func (c *sim) raftState(id uint64) string {
	m := c.ms[id]
	if !m.up {
		return fmt.Sprintf("m%d down", id)
	}
	st := m.s.cl.m.Status()
	return fmt.Sprintf("m%d %s term=%d lead=%d commit=%d applied=%d", id, st.Role, st.Term, st.Lead, st.Commit, m.s.cl.m.Applied())
}

// logged says whether member id's log said something containing substr.
func (c *sim) logged(id uint64, substr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	prefix := fmt.Sprintf("m%d log ", id)
	for _, l := range c.trace {
		if strings.HasPrefix(l.text, prefix) && strings.Contains(l.text, substr) {
			return true
		}
	}
	return false
}
