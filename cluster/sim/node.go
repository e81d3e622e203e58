package sim

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tallyd/tallyd/cluster"
)

// Node is one simulated member: its raft member, its disk (which outlives a crash), and the
// host's side: the model, the journal of records not yet proposed, the replies held.
type Node struct {
	ID    uint64
	M     *cluster.Member // nil until first started
	Disk  *cluster.MemLog
	Up    bool
	Fatal error // why the member stopped itself (Host.Fatal), or failed to start
	Model *Model

	s       *Sim
	gen     int // incarnation: events of an earlier one are dropped
	journal []byte
	buf     []byte
	held    []*Op
	syncing bool

	installGen int // the snapshot install in progress (InstallDelay)
	// Counters, for the tests.
	Abdications, Snapshots, Installs, LinksDropped int
}

// boot starts the member on its disk.
func (n *Node) boot(b cluster.Boot) error {
	s := n.s
	n.gen++
	n.Fatal = nil
	n.held, n.journal, n.syncing = nil, n.journal[:0], false
	n.Model = newModel()
	lg := s.log.With().Uint64("node", n.ID).Logger()
	n.M = cluster.NewMember(n.ID, &lg, func() time.Time { return s.start.Add(s.now) })
	n.M.St.Sim = n.Disk
	// A member that joins (b.Join) waits to be contacted: Sim.Add has the leader propose it.
	if _, err := n.M.Open(n.Disk.State(), b, func(data []byte) { n.restore(data) }); err != nil {
		n.Fatal = err
		s.note("boot-failed", n.ID, 0, []byte(err.Error()), false, func() string { return fmt.Sprintf("m%d refused to start: %v", n.ID, err) })
		return err
	}
	n.Up = true
	gen := n.gen
	// Raft's ticks, at a seeded phase.
	var tick func()
	tick = func() {
		if !n.Up || n.gen != gen {
			return
		}
		n.guard(n.tick)
		s.after(s.Opt.Tick, tick)
	}
	s.after(time.Duration(s.Rng.Int64N(int64(s.Opt.Tick)))+1, tick)
	return nil
}

// stop takes the member down: its replies fail with why, outcome unknown.
func (n *Node) stop(why string) {
	n.Up = false
	n.gen++
	for _, op := range n.held {
		n.s.finish(op, why, true)
	}
	n.held = nil
	n.journal = n.journal[:0]
}

// guard runs fn on the member; a panic is recorded as a failure and takes the member down
// (as the process would die).
func (n *Node) guard(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			n.s.fail(fmt.Sprintf("m%d panicked: %v\n%s", n.ID, r, debug.Stack()))
			if n.Up {
				n.stop("closed")
				n.Disk.Crash(0)
			}
		}
	}()
	fn()
}

// event runs fn on the member now, then its turn, unless it went down meanwhile.
func (n *Node) event(fn func()) {
	gen := n.gen
	n.s.after(0, func() {
		if n.Up && n.gen == gen {
			n.guard(func() {
				fn()
				n.turn()
			})
		}
	})
}

// tick is the loop's clusterTick: raft's clock, learners promoted, replies expired, a
// snapshot taken when due, then the turn.
func (n *Node) tick() {
	n.M.Tick()
	n.M.PromoteLearners()
	s := n.s
	for _, op := range n.held {
		if s.now-op.since >= s.Opt.Timeout {
			n.failHeld("CLUSTERDOWN no quorum", op)
		}
	}
	n.dropFinished()
	if n.M.SnapshotDue(s.Opt.SnapshotEntries, len(n.journal) > 0) {
		idx := n.M.Applied()
		data := n.snapshot()
		if ok, err := n.M.TakeSnapshot(idx, n.M.SnapshotConf(), data); err != nil {
			s.fail(fmt.Sprintf("m%d: snapshot at %d: %v", n.ID, idx, err))
		} else if ok {
			n.Snapshots++
			if s.Opt.CompactAll {
				_ = n.M.St.Mem.Compact(idx) // (the member keeps some thousands of entries for those a little behind)
			}
			s.note("snapshot", n.ID, idx, nil, false, func() string { return fmt.Sprintf("m%d snapshot at %d", n.ID, idx) })
		}
	}
	n.turn()
}

// deliver steps a raft message from member from.
func (n *Node) deliver(from uint64, b []byte, noisy bool) {
	s := n.s
	s.note("recv", from, n.ID, nil, noisy, func() string { return fmt.Sprintf("recv m%d <- m%d", n.ID, from) })
	if n.M.Members.Addrs[from] == "" {
		n.M.Members.Addrs[from] = addr(from) // the link's Hello names it (the loop's learnPeer)
	}
	if n.M.Step(b, from, !s.Opt.Insecure, host{n}) {
		n.LinksDropped++
		s.note("link-dropped", from, n.ID, nil, false, func() string { return fmt.Sprintf("m%d dropped the link from m%d", n.ID, from) })
	}
	n.turn()
}

// turn is the loop's clusterTurn: the journal proposed, the replies' marks settled, the
// member's turn, the replies released, the disk asked to sync; again while a commit opened
// the window for what waits in the journal.
func (n *Node) turn() {
	for n.Up {
		n.propose()
		n.settle()
		n.M.Turn(host{n})
		if !n.Up {
			return
		}
		n.release()
		n.syncLater()
		if !n.M.Serving() || len(n.journal) == 0 || !n.M.WindowOpen() {
			return
		}
	}
}

// propose hands the journal to the member as one entry, while the window is open.
func (n *Node) propose() {
	if !n.M.Serving() || len(n.journal) == 0 || !n.M.WindowOpen() {
		return
	}
	n.buf = append(cluster.ProposalBuf(n.buf), n.journal...)
	n.journal = n.journal[:0]
	seq, err := n.M.Propose(n.buf)
	s := n.s
	s.note("propose", n.ID, seq, nil, false, func() string { return fmt.Sprintf("m%d proposes #%d (%d bytes)", n.ID, seq, len(n.buf)) })
	if err != nil {
		n.abdicate("proposal dropped")
	}
}

// syncLater has the disk make what it was handed durable, a fake fsync later.
func (n *Node) syncLater() {
	if n.syncing || !n.Disk.Pending() {
		return
	}
	n.syncing = true
	gen := n.gen
	n.s.after(n.s.Opt.Fsync, func() {
		if !n.Up || n.gen != gen {
			return
		}
		n.guard(func() {
			n.syncing = false
			seq := n.Disk.Sync()
			if err := n.Disk.Err; err != nil {
				n.s.fail(fmt.Sprintf("m%d: %v", n.ID, err))
				n.Disk.Err = nil
			}
			n.M.Synced(seq, host{n})
			n.turn()
		})
	})
}

// abdicate is the loop's: what this leader ran and did not get committed may never be, so
// its held replies fail, and its model is rebuilt from the committed log.
func (n *Node) abdicate(why string) {
	s := n.s
	n.Abdications++
	s.note("abdicate", n.ID, 0, []byte(why), false, func() string { return fmt.Sprintf("m%d abdicates: %s", n.ID, why) })
	n.M.Unready()
	for _, op := range n.held {
		n.failHeld("CLUSTERDOWN leader changed", op)
	}
	n.dropFinished()
	n.M.Acks.Forget()
	n.journal = n.journal[:0]
	n.Model = newModel()
	n.M.Replay(func(data []byte) { n.restore(data) }, func(recs []byte) { n.Model.apply(recs, n) })
}

// snapshot encodes the model for a snapshot: the secret's head, the peer table, the state.
func (n *Node) snapshot() []byte {
	b := n.M.Secret.SnapshotHead()
	b = appendPeers(b, n.M.Members.Addrs)
	return n.Model.appendState(b)
}

// restore replaces the model by a snapshot's data.
func (n *Node) restore(data []byte) {
	k, recs, ok := cluster.SplitSnapshot(data)
	if k != nil {
		n.M.Secret = cluster.Secret{Known: true, Key: *k}
	}
	n.Model = newModel()
	if ok {
		n.Model.apply(recs, n)
	}
}

// host is the node's side of its member (cluster.Host).
type host struct{ n *Node }

func (h host) ApplyRecords(recs []byte, now int64) { h.n.Model.apply(recs, h.n) }
func (h host) AppliedBatch()                       {}
func (h host) SetSecret(k [32]byte)                {}
func (h host) MemberAdded(id uint64, a string)     {}
func (h host) MemberRemoved(id uint64)             {}
func (h host) Abdicate(why string)                 { h.n.abdicate(why) }
func (h host) LeaderReady() {
	n := h.n
	n.s.note("ready", n.ID, n.M.Term(), nil, false, func() string { return fmt.Sprintf("m%d leads term %d, ready", n.ID, n.M.Term()) })
}
func (h host) Acked() {}

func (h host) RoleChanged(was uint64) {
	n := h.n
	lead := n.M.Leader()
	n.s.note("role", n.ID, lead, nil, false, func() string { return fmt.Sprintf("m%d: leader m%d (was m%d)", n.ID, lead, was) })
}

func (h host) Send(to uint64, m cluster.Message) error {
	b, err := m.AppendTo(make([]byte, 0, m.Size()))
	if err != nil {
		return err
	}
	return h.n.s.send(h.n.ID, to, b)
}

func (h host) Fatal(err error) {
	n := h.n
	n.s.note("fatal", n.ID, 0, []byte(err.Error()), false, func() string { return fmt.Sprintf("m%d stops: %v", n.ID, err) })
	n.stop("closed")
	n.Disk.Crash(n.Disk.Queued()) // the process exits: its log is closed, what was queued written
	n.Fatal = err
}

// RestoreSnapshot installs a snapshot the leader sent: at once, or InstallDelay later (a
// newer one replaces it meanwhile).
func (h host) RestoreSnapshot(data []byte) {
	n := h.n
	s := n.s
	n.installGen++
	s.note("install", n.ID, uint64(len(data)), nil, false, func() string { return fmt.Sprintf("m%d installs a snapshot (%d bytes)", n.ID, len(data)) })
	if s.Opt.InstallDelay == 0 {
		n.restore(data)
		n.Installs++
		n.M.SnapshotInstalled()
		return
	}
	gen, ig := n.gen, n.installGen
	s.after(s.Opt.InstallDelay, func() {
		if !n.Up || n.gen != gen || n.installGen != ig {
			return
		}
		n.guard(func() {
			n.restore(data)
			n.Installs++
			n.M.SnapshotInstalled()
			n.turn()
		})
	})
}
