// Package sim simulates a cluster of raft members (cluster.Member) without the loop, as
// etcd's rafttest and interaction_env drive raft nodes: each member has a fake host holding
// a small model state machine (keys with values and counters, locks with fencing tokens
// reserved under a ceiling), fake links between members (delay, jitter, loss, reordering,
// partitions, one way or both), a fake disk that loses what was not made durable when its
// member crashes (cluster.MemLog), and a fake clock that drives raft's ticks. Everything
// runs on the caller's goroutine from one event queue, and every random choice comes from
// one seed (math/rand/v2's PCG): a seed replays bit for bit (Hash). Checkers (check.go)
// read the history of the clients' operations: keys linearizable (porcupine), a lock held
// by one client at a time with growing tokens, no acknowledged write lost, members
// converged.
//
// The model host does what the loop does for its member (loop/cluster.go, cluster_gate.go):
// a serving leader runs commands on its own model and journals records; at each turn the
// journal is proposed (while the window is open), the member's Readies are handed over,
// and replies wait until their change reaches their level and, at QUORUM and ALL, for a
// read barrier begun after the command ran when the proposal it would wait for was made
// before it. A leader that abdicates fails what it holds and rebuilds its model from the
// committed log (Member.Replay). Followers apply committed records.
//
// Raft draws its election timeouts, and the first leader its key secret, from crypto/rand's
// Reader: a simulation replaces it with a seeded stream while it runs (New to Close), so
// one simulation runs at a time in a process (New panics before the last one's Close); run
// seeds in parallel in several processes.
package sim

import (
	"container/heap"
	cryptorand "crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/cluster"
)

// Options are a simulation's settings; zero values take the defaults.
type Options struct {
	Nodes           int           // members at start (ids 1..Nodes); 3
	Seed            uint64        // every random choice follows from it
	Tick            time.Duration // raft's tick; 10 ms
	Latency         time.Duration // one way on every link; 1 ms
	Jitter          time.Duration // up to this much more per message, seeded; 1 ms
	Reorder         bool          // jitter may reorder a link's messages (else each direction is FIFO, as TCP)
	Fsync           time.Duration // from a write to the disk's durable report; 1 ms
	Timeout         time.Duration // a reply not released after this fails, outcome unknown; 2 s
	SnapshotEntries uint64        // applied entries between a member's snapshots; 100
	InstallDelay    time.Duration // a snapshot from the leader is installed this much later; 0: at once
	CompactAll      bool          // a snapshot taken leaves raft's memory no entry before it: a member behind gets the snapshot
	FenceBlock      uint64        // fencing tokens one ceiling record reserves; 4
	Insecure        bool          // links prove nothing (Member.Step's proved is false)
	Trace           bool          // keep the trace's lines (Lines), not only its hash
	TraceAll        bool          // with heartbeats
	Log             io.Writer     // the members' log lines (zerolog JSON); nil: none
}

func (o *Options) defaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Tick == 0 {
		o.Tick = 10 * time.Millisecond
	}
	if o.Latency == 0 {
		o.Latency = time.Millisecond
	}
	if o.Jitter == 0 {
		o.Jitter = time.Millisecond
	}
	if o.Fsync == 0 {
		o.Fsync = time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.SnapshotEntries == 0 {
		o.SnapshotEntries = 100
	}
	if o.FenceBlock == 0 {
		o.FenceBlock = 4
	}
}

// running is held from New to Close: one simulation at a time (crypto/rand's Reader is process-wide).
var running sync.Mutex

// Sim is a simulated cluster.
type Sim struct {
	Opt   Options
	Rng   *rand.Rand // the run's randomness: scenarios draw from it too
	start time.Time
	now   time.Duration

	q     eventQueue
	evSeq uint64

	nodes []*Node // by id - 1
	peers map[uint64]string
	links map[[2]uint64]*Link

	hash   uint64
	lines  []string
	events uint64

	// History is every client operation, in the order invoked.
	History []*Op
	// Failures are what went wrong in the members: panics, a disk's impossible write.
	Failures []string

	log    zerolog.Logger
	saved  io.Reader
	closed bool
}

// New starts a simulation of opt.Nodes members bootstrapping a new cluster. Close ends it.
func New(opt Options) *Sim {
	opt.defaults()
	if !running.TryLock() {
		panic("sim: a simulation is running in this process: Close it first (crypto/rand's Reader is process-wide)")
	}
	s := &Sim{Opt: opt, Rng: rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x9e3779b97f4a7c15)),
		start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), peers: map[uint64]string{},
		links: map[[2]uint64]*Link{}, hash: fnvOffset}
	var cseed [32]byte
	binary.LittleEndian.PutUint64(cseed[:], opt.Seed)
	s.saved = cryptorand.Reader
	cryptorand.Reader = rand.NewChaCha8(cseed)
	s.log = zerolog.Nop()
	if opt.Log != nil {
		s.log = zerolog.New(opt.Log)
	}
	for id := uint64(1); id <= uint64(opt.Nodes); id++ {
		s.peers[id] = addr(id)
	}
	for id := uint64(1); id <= uint64(opt.Nodes); id++ {
		n := &Node{ID: id, s: s, Disk: cluster.NewMemLog()}
		s.nodes = append(s.nodes, n)
		if err := n.boot(cluster.Boot{Peers: s.peers, New: true}); err != nil {
			panic(fmt.Sprintf("sim: member %d: %v", id, err))
		}
	}
	return s
}

// Close ends the simulation: crypto/rand's Reader is given back, and the next may start.
func (s *Sim) Close() {
	if s.closed {
		return
	}
	s.closed = true
	cryptorand.Reader = s.saved
	running.Unlock()
}

// addr is member id's peer address.
func addr(id uint64) string { return fmt.Sprintf("m%d:7946", id) }

// Now is the simulated time since the start.
func (s *Sim) Now() time.Duration { return s.now }

// Events is how many events ran.
func (s *Sim) Events() uint64 { return s.events }

// Node returns member id (nil if there is none).
func (s *Sim) Node(id uint64) *Node {
	if id == 0 || id > uint64(len(s.nodes)) {
		return nil
	}
	return s.nodes[id-1]
}

// Nodes returns every member ever started, by id.
func (s *Sim) Nodes() []*Node { return s.nodes }

// The event queue.

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// after runs fn d from now (events at the same time run in the order scheduled).
func (s *Sim) after(d time.Duration, fn func()) {
	s.evSeq++
	heap.Push(&s.q, event{at: s.now + d, seq: s.evSeq, fn: fn})
}

// step runs the next event; false when there is none.
func (s *Sim) step() bool {
	if len(s.q) == 0 {
		return false
	}
	e := heap.Pop(&s.q).(event)
	s.now = e.at
	s.events++
	e.fn()
	return true
}

// Run lets d of simulated time pass.
func (s *Sim) Run(d time.Duration) {
	end := s.now + d
	for len(s.q) > 0 && s.q[0].at <= end {
		s.step()
	}
	s.now = end
}

// RunUntil runs events until ok holds, at most limit of simulated time; it says whether ok held.
func (s *Sim) RunUntil(ok func() bool, limit time.Duration) bool {
	end := s.now + limit
	for !ok() {
		if len(s.q) == 0 || s.q[0].at > end {
			s.now = max(s.now, end)
			return ok()
		}
		s.step()
	}
	return true
}

// The trace: every message, delivery, client operation and fault, hashed (FNV-1a); its
// lines are kept with Options.Trace.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (s *Sim) mix(b []byte) {
	h := s.hash
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	s.hash = h
}

func (s *Sim) mixU(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	s.mix(b[:])
}

// note adds an event to the trace: its kind, two numbers and bytes to the hash, and with
// Options.Trace the line text makes.
func (s *Sim) note(kind string, a, b uint64, data []byte, noisy bool, text func() string) {
	s.mix([]byte(kind))
	s.mixU(uint64(s.now))
	s.mixU(a)
	s.mixU(b)
	s.mix(data)
	if s.Opt.Trace && (!noisy || s.Opt.TraceAll) {
		s.lines = append(s.lines, fmt.Sprintf("%12v %s", s.now, text()))
	}
}

// Logf adds a line of the test's own to the trace.
func (s *Sim) Logf(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	s.note("log", 0, 0, []byte(text), false, func() string { return text })
}

// Hash is the trace's hash so far: two runs of one seed (and the same calls) have the same.
func (s *Sim) Hash() uint64 { return s.hash }

// Lines are the trace's lines (with Options.Trace).
func (s *Sim) Lines() []string { return s.lines }

// Links and faults.

// Link is one direction between two members.
type Link struct {
	Delay time.Duration // added to every message's latency
	Loss  float64       // the chance a message is lost
	Down  bool          // every message is lost (a partition, one way if only this direction)
	last  time.Duration // the last delivery scheduled (FIFO)
	ramp  int           // the delay ramp in progress (random.go); Heal ends it
}

// Link returns the link from member from to member to.
func (s *Sim) Link(from, to uint64) *Link {
	k := [2]uint64{from, to}
	l := s.links[k]
	if l == nil {
		l = &Link{}
		s.links[k] = l
	}
	return l
}

// ids returns every member's id.
func (s *Sim) ids() []uint64 {
	ids := make([]uint64, len(s.nodes))
	for i := range s.nodes {
		ids[i] = uint64(i + 1)
	}
	return ids
}

// Partition cuts member id off from every other, both ways.
func (s *Sim) Partition(id uint64) {
	s.note("fault", id, 0, []byte("partition"), false, func() string { return fmt.Sprintf("partition m%d", id) })
	for _, o := range s.ids() {
		if o != id {
			s.Link(id, o).Down, s.Link(o, id).Down = true, true
		}
	}
}

// Cut breaks the links between a and b, both ways.
func (s *Sim) Cut(a, b uint64) {
	s.note("fault", a, b, []byte("cut"), false, func() string { return fmt.Sprintf("cut m%d m%d", a, b) })
	s.Link(a, b).Down, s.Link(b, a).Down = true, true
}

// Hold drops what from sends to to (one way).
func (s *Sim) Hold(from, to uint64) {
	s.note("fault", from, to, []byte("hold"), false, func() string { return fmt.Sprintf("hold m%d -> m%d", from, to) })
	s.Link(from, to).Down = true
}

// Delay adds d to what from sends to to.
func (s *Sim) Delay(from, to uint64, d time.Duration) {
	s.note("fault", from, to, []byte("delay"), false, func() string { return fmt.Sprintf("delay m%d -> m%d %v", from, to, d) })
	s.Link(from, to).Delay = d
}

// Loss loses what from sends to to with chance p.
func (s *Sim) Loss(from, to uint64, p float64) {
	s.note("fault", from, to, []byte("loss"), false, func() string { return fmt.Sprintf("loss m%d -> m%d %.2f", from, to, p) })
	s.Link(from, to).Loss = p
}

// Heal ends every link fault.
func (s *Sim) Heal() {
	s.note("fault", 0, 0, []byte("heal"), false, func() string { return "heal" })
	for _, l := range s.links {
		l.Delay, l.Loss, l.Down = 0, 0, false
		l.ramp++
	}
}

// send puts b, a raft message from member from, on the link to member to.
func (s *Sim) send(from, to uint64, b []byte) error {
	dst := s.Node(to)
	if dst == nil || !dst.Up {
		return cluster.ErrUnreachable
	}
	noisy := s.Opt.Trace && !s.Opt.TraceAll && cluster.IsHeartbeat(b) // decoded only for the trace's lines
	s.note("send", from, to, b, noisy, func() string { return "send " + cluster.Describe(b) })
	l := s.Link(from, to)
	if l.Down || l.Loss > 0 && s.Rng.Float64() < l.Loss {
		s.note("lost", from, to, nil, noisy, func() string { return fmt.Sprintf("lost m%d -> m%d", from, to) })
		return nil
	}
	at := s.now + s.Opt.Latency + l.Delay
	if s.Opt.Jitter > 0 {
		at += time.Duration(s.Rng.Int64N(int64(s.Opt.Jitter)))
	}
	if !s.Opt.Reorder {
		at = max(at, l.last)
		l.last = at
	}
	gen := dst.gen
	s.after(at-s.now, func() {
		if !dst.Up || dst.gen != gen || s.Link(from, to).Down {
			return // the connection broke with the restart, or the link since
		}
		dst.guard(func() { dst.deliver(from, b, noisy) })
	})
	return nil
}

// Members.

// Crash kills member id at once: what its disk had not made durable is lost, and its
// clients' replies with it (their outcome unknown).
func (s *Sim) Crash(id uint64) { s.crash(id, false) }

// CrashTorn kills member id, and a random prefix of what its disk had not made durable
// survives (written without its fsync).
func (s *Sim) CrashTorn(id uint64) { s.crash(id, true) }

func (s *Sim) crash(id uint64, torn bool) {
	n := s.Node(id)
	if n == nil || !n.Up {
		return
	}
	keep := 0
	if torn {
		keep = s.Rng.IntN(n.Disk.Queued() + 1)
	}
	s.note("crash", id, uint64(keep), nil, false, func() string { return fmt.Sprintf("crash m%d (kept %d unsynced)", id, keep) })
	n.stop("closed")
	n.Disk.Crash(keep)
}

// Restart starts member id again on its disk (a new cluster's member, as it was started).
func (s *Sim) Restart(id uint64) error {
	return s.restart(id, cluster.Boot{Peers: s.peers, New: true})
}

// RestartExisting starts member id again without --initial-cluster-state new.
func (s *Sim) RestartExisting(id uint64) error { return s.restart(id, cluster.Boot{Peers: s.peers}) }

// RestartJoin starts member id again with --join (through any member) and no --cluster: a
// member that lost its data, wrongly coming back under its old id.
func (s *Sim) RestartJoin(id uint64) error {
	return s.restart(id, cluster.Boot{Join: addr(s.Others(id)[0])})
}

func (s *Sim) restart(id uint64, boot cluster.Boot) error {
	n := s.Node(id)
	if n == nil || n.Up {
		return fmt.Errorf("sim: member %d is not down", id)
	}
	s.note("restart", id, 0, nil, false, func() string { return fmt.Sprintf("restart m%d", id) })
	return n.boot(boot)
}

// Wipe empties the disk of member id, which is down.
func (s *Sim) Wipe(id uint64) {
	if n := s.Node(id); n != nil && !n.Up {
		s.note("wipe", id, 0, nil, false, func() string { return fmt.Sprintf("wipe m%d", id) })
		n.Disk = cluster.NewMemLog()
	}
}

// Add starts a new member (the next id) on an empty disk, joining through the serving
// leader, which proposes it as a learner (promoted once caught up). It returns the id.
func (s *Sim) Add() (uint64, error) {
	l := s.Node(s.Leader())
	if l == nil {
		return 0, fmt.Errorf("sim: no serving leader to join through")
	}
	id := uint64(len(s.nodes) + 1)
	n := &Node{ID: id, s: s, Disk: cluster.NewMemLog()}
	s.nodes = append(s.nodes, n)
	s.note("add", id, l.ID, nil, false, func() string { return fmt.Sprintf("add m%d through m%d", id, l.ID) })
	if err := n.boot(cluster.Boot{Join: addr(l.ID)}); err != nil {
		return 0, err
	}
	var err error
	l.guard(func() {
		err = l.M.ProposeLearner(id, addr(id))
		l.turn()
	})
	return id, err
}

// Remove has the serving leader propose member id's removal.
func (s *Sim) Remove(id uint64) error {
	l := s.Node(s.Leader())
	if l == nil {
		return fmt.Errorf("sim: no serving leader")
	}
	s.note("remove", id, l.ID, nil, false, func() string { return fmt.Sprintf("remove m%d through m%d", id, l.ID) })
	var err error
	l.guard(func() {
		err = l.M.ProposeRemove(id)
		l.turn()
	})
	return err
}

// Transfer has the leader hand its leadership to member id.
func (s *Sim) Transfer(id uint64) {
	for _, n := range s.nodes {
		if n.Up && n.M.IsLeader() {
			s.note("transfer", n.ID, id, nil, false, func() string { return fmt.Sprintf("transfer m%d -> m%d", n.ID, id) })
			n.guard(func() {
				n.M.TransferLeader(id)
				n.turn()
			})
		}
	}
}

// Leader is the serving leader whose links to a majority of voters are up (0: none); a
// deposed leader cut off still serving is not counted unless it is the only one.
func (s *Sim) Leader() uint64 {
	var found uint64
	for _, n := range s.nodes {
		if n.Up && n.M.Serving() {
			if s.reaches(n) {
				return n.ID
			}
			found = n.ID
		}
	}
	return found
}

// reaches says whether n's links both ways to a majority of its voters are up.
func (s *Sim) reaches(n *Node) bool {
	voters := n.M.Members.Voters()
	k := 0
	for _, v := range voters {
		o := s.Node(v)
		if v == n.ID || o != nil && o.Up && !s.Link(n.ID, v).Down && !s.Link(v, n.ID).Down {
			k++
		}
	}
	return 2*k > len(voters)
}

// Elect runs until a serving leader that reaches a majority is followed by every member up
// and reachable, at most limit; it returns the leader (0: none).
func (s *Sim) Elect(limit time.Duration) uint64 {
	ok := s.RunUntil(func() bool {
		l := s.Leader()
		if l == 0 || !s.reaches(s.Node(l)) {
			return false
		}
		for _, n := range s.nodes {
			if n.Up && n.ID != l && !s.Link(l, n.ID).Down && n.M.Members.IsMember(n.ID) && n.M.Leader() != l {
				return false
			}
		}
		return true
	}, limit)
	if !ok {
		return 0
	}
	return s.Leader()
}

// Others returns the ids of the members up but those given.
func (s *Sim) Others(not ...uint64) []uint64 {
	var ids []uint64
	for _, n := range s.nodes {
		if n.Up && !slices.Contains(not, n.ID) {
			ids = append(ids, n.ID)
		}
	}
	return ids
}

// fail records a failure of the members (a panic, an impossible write).
func (s *Sim) fail(why string) {
	s.note("failure", 0, 0, []byte(why), false, func() string { return "FAILURE " + why })
	s.Failures = append(s.Failures, why)
}
