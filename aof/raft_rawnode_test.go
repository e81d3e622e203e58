package aof

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
}

func startNode(t *testing.T, dir string) *node {
	t.Helper()
	n := &node{t: t, ms: raft.NewMemoryStorage()}
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
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: n.ms,
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
