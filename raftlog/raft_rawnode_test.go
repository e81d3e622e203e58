package raftlog

import (
	"fmt"
	"io"
	"log"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// node is a one-voter raft node on a MemoryStorage whose Ready loop saves to a RaftLog, as
// the event loop does.
type node struct {
	t       *testing.T
	rn      *raft.RawNode
	ms      *raft.MemoryStorage
	l       *RaftLog
	p       *progress
	applied []string
	cs      *raftpb.ConfState
	last    uint64 // index of the last entry applied
	id      uint64
	out     []*raftpb.Message // sent once what came with them is on disk
}

func startNode(t *testing.T, dir string) *node { return startNodeID(t, dir, 1) }

func startNodeID(t *testing.T, dir string, id uint64) *node {
	t.Helper()
	n := &node{t: t, ms: raft.NewMemoryStorage(), id: id}
	var st *RaftState
	n.l, st, n.p = openRaft(t, dir)
	if st.Snapshot != nil {
		if err := n.ms.ApplySnapshot(st.Snapshot); err != nil {
			t.Fatal(err)
		}
		n.applied = append(n.applied, string(st.Snapshot.GetData()))
		n.cs = st.Snapshot.GetMetadata().GetConfState()
		n.last = st.Snapshot.GetMetadata().GetIndex()
	}
	if st.HardState != nil {
		if err := n.ms.SetHardState(st.HardState); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.ms.Append(st.Entries); err != nil {
		t.Fatal(err)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: n.ms,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: raftQuiet})
	if err != nil {
		t.Fatal(err)
	}
	n.rn = rn
	return n
}

// ready handles every Ready: save, wait until on disk, apply, advance.
func (n *node) ready() {
	for n.rn.HasReady() {
		rd := n.rn.Ready()
		if s := n.l.Save(rd.HardState, rd.Entries, rd.Snapshot); s > 0 {
			n.p.synced(n.t, s)
		}
		if rd.Snapshot != nil && rd.Snapshot.GetMetadata().GetIndex() != 0 {
			n.ms.ApplySnapshot(rd.Snapshot)
		}
		n.ms.Append(rd.Entries)
		if rd.HardState != nil {
			n.ms.SetHardState(rd.HardState)
		}
		for _, e := range rd.CommittedEntries {
			switch e.GetType() {
			case raftpb.EntryConfChange:
				var cc raftpb.ConfChange
				if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
					n.t.Fatal(err)
				}
				n.cs = n.rn.ApplyConfChange(&cc)
			case raftpb.EntryNormal:
				if len(e.GetData()) > 0 {
					n.applied = append(n.applied, string(e.GetData()))
				}
			}
			n.last = e.GetIndex()
		}
		n.out = append(n.out, rd.Messages...)
		n.rn.Advance(rd)
	}
}

// lead makes the node leader: it campaigns and handles what follows.
func (n *node) lead() {
	n.t.Helper()
	for range 50 {
		if n.rn.BasicStatus().RaftState == raft.StateLeader {
			n.ready()
			return
		}
		n.rn.Tick()
		n.ready()
	}
	n.t.Fatalf("not leader: %+v", n.rn.BasicStatus())
}

// The raft log carries a real RawNode across restarts and compactions: what was committed
// stays committed and applied once, and raft starts from what was read without a panic.
func TestRaftWithRawNode(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir)
	if err := n.rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	propose := func(from, to int) {
		for i := from; i <= to; i++ {
			if err := n.rn.Propose([]byte(fmt.Sprint("v", i))); err != nil {
				t.Fatal(err)
			}
			n.ready()
		}
	}
	n.ready()
	n.lead()
	propose(1, 20)
	want := fmt.Sprint(n.applied)
	n.l.Close()

	// Restart: everything committed is still there.
	n = startNode(t, dir)
	n.lead()
	// Entries are applied again from the start (applied is not persisted), the same ones.
	if got := fmt.Sprint(n.applied); got != want {
		t.Fatalf("after a restart applied %s, want %s", got, want)
	}
	propose(21, 30)
	// Compact at the last applied index, with the applied values as the snapshot's data.
	snap, err := n.ms.CreateSnapshot(n.last, n.cs, []byte(fmt.Sprint(n.applied)))
	if err != nil {
		t.Fatal(err)
	}
	n.ms.Compact(n.last)
	n.p.synced(t, n.l.Compact(snap))
	want = fmt.Sprint(n.applied)
	propose(31, 35)
	tail := n.applied[len(n.applied)-5:]
	n.l.Close()

	n = startNode(t, dir)
	if len(n.applied) != 1 || n.applied[0] != want {
		t.Fatalf("after compaction the snapshot holds %q, want %q", n.applied, want)
	}
	n.lead()
	if got := fmt.Sprint(n.applied[1:]); got != fmt.Sprint(tail) {
		t.Fatalf("after compaction and a restart applied %s, want %s", got, fmt.Sprint(tail))
	}
	propose(36, 36)
	if n.applied[len(n.applied)-1] != "v36" {
		t.Fatalf("applied %v", n.applied)
	}
	n.l.Close()
}

var raftQuiet = &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}

// pump delivers messages between nodes until none is left.
func pump(nodes ...*node) {
	for range 100 {
		moved := false
		for _, n := range nodes {
			n.ready()
			out := n.out
			n.out = nil
			for _, m := range out {
				for _, to := range nodes {
					if to.id == m.GetTo() {
						to.rn.Step(m)
						moved = true
					}
				}
				if m.GetType() == raftpb.MsgSnap {
					n.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
				}
			}
		}
		if !moved {
			return
		}
	}
}

// A learner that joins after a compaction gets the leader's snapshot through Ready: saved,
// it restarts from it.
func TestRaftReceivedSnapshotWithRawNode(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	n1 := startNodeID(t, d1, 1)
	if err := n1.rn.Bootstrap([]raft.Peer{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	n1.ready()
	n1.lead()
	// Node 2 is added first (a snapshot it receives must hold it), and stays away meanwhile.
	if err := n1.rn.ProposeConfChange(&raftpb.ConfChange{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(2))}); err != nil {
		t.Fatal(err)
	}
	n1.ready()
	for i := 1; i <= 10; i++ {
		n1.rn.Propose([]byte(fmt.Sprint("v", i)))
		n1.ready()
	}
	n1.out = nil
	snap, err := n1.ms.CreateSnapshot(n1.last, n1.cs, []byte(fmt.Sprint(n1.applied)))
	if err != nil {
		t.Fatal(err)
	}
	n1.ms.Compact(n1.last)
	n1.p.synced(t, n1.l.Compact(snap))
	want := string(snap.GetData())

	n2 := startNodeID(t, d2, 2)
	pump(n1, n2)
	for i := 11; i <= 13; i++ {
		n1.rn.Tick() // a heartbeat: node 1 learns of node 2's log and sends the snapshot
		pump(n1, n2)
		n1.rn.Propose([]byte(fmt.Sprint("v", i)))
		pump(n1, n2)
	}
	if n2.last != n1.last || fmt.Sprint(n2.applied) != "[v11 v12 v13]" {
		t.Fatalf("node 2 applied %v up to %d, node 1 at %d", n2.applied, n2.last, n1.last)
	}
	n1.l.Close()
	n2.l.Close()

	n2 = startNodeID(t, d2, 2)
	if len(n2.applied) != 1 || n2.applied[0] != want {
		t.Fatalf("node 2 restarts from %q, want the leader's snapshot %q", n2.applied, want)
	}
	st := reopen(t, d2)
	if len(st.Entries) == 0 || st.Entries[len(st.Entries)-1].GetIndex() != n1.last ||
		st.HardState.GetCommit() != n1.last {
		t.Fatalf("node 2 read back\n%s\nleader at %d", describe(st), n1.last)
	}
	n2.ready()
	n2.l.Close()
}
