package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/raftlog"
)

// The in-process harness: N members, each a RawNode on this package's Storage over a real
// raft log in a temporary directory, stepped (raftlog.StepRaftLogs) so that a log writes
// only when a round asks it to. Messages between members go through the harness, which may
// cut a member off; the clock is the rounds' ticks. Nothing runs but the test's goroutine
// and the logs' writers it waits for, so a run is the same every time.

// member is one raft member of the harness.
type member struct {
	id      uint64
	st      *Storage
	rn      *raft.RawNode
	synced  atomic.Uint64 // the log writer's last report
	applied []string      // the data of the normal entries applied, in order
	acks    Acks          // its proposals' indexes, while it leads (as the loop's)
	reads   Reads         // its read barriers
	members Members       // its configuration, as applied
	fresh   Fresh         // its vote rule while no leader has caught it up
}

// harness is N members and the messages between them.
type harness struct {
	t       *testing.T
	members []*member
	peers   []raft.Peer       // the bootstrap's voters
	queue   []*raftpb.Message // sent, not yet delivered
	cut     map[uint64]bool   // members whose messages are dropped both ways
	// With rng set, each round delivers its messages in a random order, drops one in drop
	// and keeps one in delay back for a later round.
	rng         *rand.Rand
	drop, delay float64
}

var nopLog = zerolog.Nop()

func newHarness(t *testing.T, n int) *harness {
	t.Helper()
	raftlog.StepRaftLogs(true)
	t.Cleanup(func() { raftlog.StepRaftLogs(false) })
	h := &harness{t: t, cut: map[uint64]bool{}}
	for id := uint64(1); id <= uint64(n); id++ {
		h.peers = append(h.peers, raft.Peer{ID: id, Context: fmt.Appendf(nil, "m%d", id)})
	}
	for id := uint64(1); id <= uint64(n); id++ {
		h.members = append(h.members, h.start(id))
	}
	return h
}

// start returns member id with an empty data directory, bootstrapped as a new cluster's
// (--initial-cluster-state new): fresh, as the loop makes it.
func (h *harness) start(id uint64) *member {
	t := h.t
	m := &member{id: id, st: NewStorage(), members: NewMembers(), fresh: Fresh{On: true, BootLast: uint64(len(h.peers))}}
	lg, _, err := raftlog.OpenRaft(t.TempDir(), func(pr raftlog.RaftProgress) { m.synced.Store(pr.Synced) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Unstepped(); lg.Close() })
	m.st.Log = lg
	if m.rn, err = raft.NewRawNode(RaftConfig(id, 0, m.st, Logger{Log: &nopLog})); err != nil {
		t.Fatal(err)
	}
	if err := m.rn.Bootstrap(h.peers); err != nil {
		t.Fatal(err)
	}
	return m
}

// wipe restarts member id on an empty data directory, as a new cluster's member.
func (h *harness) wipe(id uint64) *member {
	h.members[id-1] = h.start(id)
	return h.members[id-1]
}

// send queues msg for its member, unless either end is cut off or it has no member here.
func (h *harness) send(from uint64, msg *raftpb.Message) {
	if !h.cut[from] && !h.cut[msg.GetTo()] && msg.GetTo() <= uint64(len(h.members)) {
		h.queue = append(h.queue, msg)
	}
}

// deliver hands m's durable appends' responses on.
func (h *harness) deliver(m *member) {
	m.st.Deliver(m.id, func(r *raftpb.Message) { _ = m.rn.Step(r) }, func(r *raftpb.Message) { h.send(m.id, r) })
}

// readies is a member's side of its Readies in the harness, as the loop's (HandleReadies).
type readies struct {
	h *harness
	m *member
}

func (r readies) SoftState(*raft.SoftState)      {}
func (r readies) ReadState(ctx []byte, i uint64) { r.m.reads.Passed(ctx, i) }
func (r readies) Send(msg *raftpb.Message)       { r.h.send(r.m.id, msg) }

func (r readies) Append(msg *raftpb.Message) {
	m := r.m
	if m.st.Append(msg, AppendHooks{Snapshot: func(*raftpb.Snapshot) {}, Entries: func(ents []*raftpb.Entry) {
		m.fresh.Appended(ents[len(ents)-1].GetIndex())
		if st := m.rn.BasicStatus(); st.RaftState == raft.StateLeader {
			m.acks.Note(ents, st.GetTerm())
		}
	},
		Fail: func(what string, err error) { r.h.t.Errorf("member %d: %s: %v", m.id, what, err) }}) {
		r.h.deliver(m)
	}
}

func (r readies) Apply(msg *raftpb.Message) {
	m := r.m
	for _, e := range msg.GetEntries() {
		switch {
		case e.GetType() == raftpb.EntryType_EntryConfChange:
			var cc raftpb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				r.h.t.Fatalf("member %d: configuration change %d: %v", m.id, e.GetIndex(), err)
			}
			m.members.Apply(m.rn, &cc)
		case e.GetType() == raftpb.EntryType_EntryNormal && len(e.GetData()) > 0:
			m.applied = append(m.applied, string(e.GetData()))
		}
	}
	for _, resp := range msg.GetResponses() {
		_ = m.rn.Step(resp)
	}
}

// round handles every member's Readies as the loop does (appends to the storage, applies,
// messages out), has each log write what it was handed, and then delivers the messages sent.
func (h *harness) round() {
	for _, m := range h.members {
		HandleReadies(m.rn, readies{h, m})
		m.st.Log.Step()
		m.st.Synced(m.synced.Load())
		h.deliver(m)
	}
	q := h.queue
	h.queue = nil
	if h.rng != nil {
		h.rng.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
	}
	for _, msg := range q {
		switch {
		case h.rng == nil:
		case h.rng.Float64() < h.drop:
			continue
		case h.rng.Float64() < h.delay:
			h.queue = append(h.queue, msg)
			continue
		}
		to := h.members[msg.GetTo()-1]
		if ok, _ := to.fresh.MayStep(msg, len(to.members.Conf.GetVoters())); !ok {
			continue // as Member.Step (check.go): a fresh member's vote is withheld
		}
		_ = to.rn.Step(msg)
	}
}

// tick advances every member's clock by one raft tick, then runs a round.
func (h *harness) tick() {
	for _, m := range h.members {
		m.rn.Tick()
	}
	h.round()
}

// until runs rounds (with ticks) until ok holds; it fails the test after limit ticks.
func (h *harness) until(what string, limit int, ok func() bool) {
	h.t.Helper()
	for range limit {
		if ok() {
			return
		}
		h.tick()
	}
	if !ok() {
		h.t.Fatalf("%s: not after %d ticks", what, limit)
	}
}

// leader returns the member that leads, nil if none.
func (h *harness) leader() *member {
	for _, m := range h.members {
		if m.rn.BasicStatus().RaftState == raft.StateLeader && !h.cut[m.id] {
			return m
		}
	}
	return nil
}

// TestHarnessReplicates: three members elect a leader; what it proposes is applied by
// every member, in order, only through the logs' durable appends; a member cut off misses
// what is proposed meanwhile and catches up once the cut heals.
func TestHarnessReplicates(t *testing.T) {
	h := newHarness(t, 3)
	if err := h.members[0].rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	h.until("a leader", 50, func() bool { return h.leader() != nil })
	all := func(want ...string) func() bool {
		return func() bool {
			for _, m := range h.members {
				if !h.cut[m.id] && !slices.Equal(m.applied, want) {
					return false
				}
			}
			return true
		}
	}
	l := h.leader()
	for _, d := range []string{"a", "b"} {
		if err := l.rn.Propose([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	h.until("a and b applied everywhere", 50, all("a", "b"))
	for _, m := range h.members {
		if m.st.Stable() < 5 { // three configuration entries, the leader's empty entry, a, b
			t.Fatalf("member %d: stable index %d", m.id, m.st.Stable())
		}
	}

	follower := h.members[0]
	if follower == l {
		follower = h.members[1]
	}
	h.cut[follower.id] = true
	if err := l.rn.Propose([]byte("c")); err != nil {
		t.Fatal(err)
	}
	h.until("c applied by the two connected members", 50, all("a", "b", "c"))
	if slices.Contains(follower.applied, "c") {
		t.Fatal("a member cut off applied c")
	}
	delete(h.cut, follower.id)
	h.until("c applied by the member cut off", 100, all("a", "b", "c"))
}

// TestHarnessUnreliableLinks: five members whose links reorder, delay and drop messages
// still elect leaders and apply the same proposals in the same order everywhere (a proposal
// a leader took just before losing its term may be lost, never reordered or applied twice).
func TestHarnessUnreliableLinks(t *testing.T) {
	for seed := range uint64(5) {
		h := newHarness(t, 5)
		h.rng, h.drop, h.delay = rand.New(rand.NewPCG(seed, 23)), 0.1, 0.2
		var want []string
		propose := func(d string) {
			h.until(fmt.Sprintf("seed %d: a leader", seed), 500, func() bool { return h.leader() != nil })
			if h.leader().rn.Propose([]byte(d)) == nil {
				want = append(want, d)
			}
		}
		for i := range 10 {
			propose(fmt.Sprintf("p%d", i))
			h.tick()
		}
		// An end marker, proposed again until every member applied it.
		everywhere := func() bool {
			for _, m := range h.members {
				if !slices.Contains(m.applied, "end") {
					return false
				}
			}
			return true
		}
		for try := 0; !everywhere(); try++ {
			if try == 40 {
				t.Fatalf("seed %d: the end marker is not applied everywhere", seed)
			}
			propose("end")
			for range 50 {
				if everywhere() {
					break
				}
				h.tick()
			}
		}
		first := h.members[0].applied
		for _, m := range h.members {
			if n := min(len(m.applied), len(first)); !slices.Equal(m.applied[:n], first[:n]) {
				t.Fatalf("seed %d: member %d applied %v, member 1 %v", seed, m.id, m.applied, first)
			}
		}
		k := 0 // what was applied is what was proposed, in order, without repeats but the marker's
		for _, d := range first {
			if d == "end" {
				continue
			}
			for k < len(want) && want[k] != d {
				k++
			}
			if k == len(want) {
				t.Fatalf("seed %d: applied %v, out of the order proposed %v", seed, first, want)
			}
			k++
		}
	}
}
