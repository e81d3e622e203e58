package cluster

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

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
}

// harness is N members and the messages between them.
type harness struct {
	t       *testing.T
	members []*member
	queue   []*raftpb.Message // sent, not yet delivered
	cut     map[uint64]bool   // members whose messages are dropped both ways
}

var nopLog = zerolog.Nop()

func newHarness(t *testing.T, n int) *harness {
	t.Helper()
	raftlog.StepRaftLogs(true)
	t.Cleanup(func() { raftlog.StepRaftLogs(false) })
	h := &harness{t: t, cut: map[uint64]bool{}}
	var peers []raft.Peer
	for id := uint64(1); id <= uint64(n); id++ {
		peers = append(peers, raft.Peer{ID: id, Context: fmt.Appendf(nil, "m%d", id)})
	}
	for id := uint64(1); id <= uint64(n); id++ {
		m := &member{id: id, st: NewStorage()}
		lg, _, err := raftlog.OpenRaft(t.TempDir(), func(pr raftlog.RaftProgress) { m.synced.Store(pr.Synced) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lg.Unstepped(); lg.Close() })
		m.st.Log = lg
		if m.rn, err = raft.NewRawNode(RaftConfig(id, 0, m.st, Logger{Log: &nopLog})); err != nil {
			t.Fatal(err)
		}
		if err := m.rn.Bootstrap(peers); err != nil {
			t.Fatal(err)
		}
		h.members = append(h.members, m)
	}
	return h
}

// send queues msg for its member, unless either end is cut off.
func (h *harness) send(from uint64, msg *raftpb.Message) {
	if !h.cut[from] && !h.cut[msg.GetTo()] {
		h.queue = append(h.queue, msg)
	}
}

// deliver hands m's durable appends' responses on.
func (h *harness) deliver(m *member) {
	m.st.Deliver(m.id, func(r *raftpb.Message) { _ = m.rn.Step(r) }, func(r *raftpb.Message) { h.send(m.id, r) })
}

// round handles every member's Readies as the loop does (appends to the storage, applies,
// messages out), has each log write what it was handed, and then delivers the messages sent.
func (h *harness) round() {
	for _, m := range h.members {
		for m.rn.HasReady() {
			rd := m.rn.Ready()
			for _, msg := range rd.Messages {
				switch msg.GetTo() {
				case raft.LocalAppendThread:
					if m.st.Append(msg, AppendHooks{Snapshot: func(*raftpb.Snapshot) {}, Entries: func([]*raftpb.Entry) {},
						Fail: func(what string, err error) { h.t.Errorf("member %d: %s: %v", m.id, what, err) }}) {
						h.deliver(m)
					}
				case raft.LocalApplyThread:
					for _, e := range msg.GetEntries() {
						if e.GetType() == raftpb.EntryType_EntryNormal && len(e.GetData()) > 0 {
							m.applied = append(m.applied, string(e.GetData()))
						}
					}
					for _, r := range msg.GetResponses() {
						_ = m.rn.Step(r)
					}
				default:
					h.send(m.id, msg)
				}
			}
		}
		m.st.Log.Step()
		m.st.Synced(m.synced.Load())
		h.deliver(m)
	}
	q := h.queue
	h.queue = nil
	for _, msg := range q {
		_ = h.members[msg.GetTo()-1].rn.Step(msg)
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
