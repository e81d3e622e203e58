package cluster

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// indexes returns the indexes of ents.
func indexes(ents []*raftpb.Entry) []uint64 {
	var out []uint64
	for _, e := range ents {
		out = append(out, e.GetIndex())
	}
	return out
}

func hs(term, vote, commit uint64) *raftpb.HardState {
	return &raftpb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

// TestMemLogCrash: what Sync made durable is read back; a crash loses what was queued after
// it, but a prefix kept (a torn tail); an append at an index replaces the entries from it on;
// the commit read back is no further than the log; the next writer numbers from 1.
func TestMemLogCrash(t *testing.T) {
	l := NewMemLog()
	if s := l.Save(hs(1, 1, 0), []*raftpb.Entry{ent(1, 1), ent(2, 1), ent(3, 1)}, nil); s != 1 {
		t.Fatalf("first call numbered %d", s)
	}
	if l.Sync() != 1 || l.Pending() {
		t.Fatal("not durable after Sync")
	}
	l.Save(hs(2, 2, 3), []*raftpb.Entry{ent(3, 2), ent(4, 2)}, nil) // replaces 3
	l.Save(nil, []*raftpb.Entry{ent(5, 2)}, nil)
	if lost := l.Crash(1); lost != 1 {
		t.Fatalf("crash lost %d calls, want 1 (one kept of two)", lost)
	}
	rs := l.State()
	if got := indexes(rs.Entries); len(got) != 4 || got[3] != 4 || rs.Entries[2].GetTerm() != 2 {
		t.Fatalf("entries read back %v (terms %v)", got, rs.Entries)
	}
	if rs.HardState.GetTerm() != 2 || rs.HardState.GetCommit() != 3 {
		t.Fatalf("hard state read back %v", rs.HardState)
	}
	if s := l.Save(hs(3, 0, 9), nil, nil); s != 1 {
		t.Fatalf("the next writer's first call numbered %d", s)
	}
	l.Crash(0)
	if rs := l.State(); rs.HardState.GetTerm() != 2 {
		t.Fatalf("a hard state never synced was read back: %v", rs.HardState)
	}
	l.Save(hs(3, 0, 9), nil, nil)
	l.Sync()
	if c := l.State().HardState.GetCommit(); c != 4 {
		t.Fatalf("commit read back %d, past the log's last entry 4", c)
	}
	if l.Err != nil {
		t.Fatal(l.Err)
	}
	l.Save(nil, []*raftpb.Entry{ent(7, 3)}, nil)
	l.Sync()
	if l.Err == nil {
		t.Fatal("a gap in the entries (5 and 6 missing) was taken")
	}
}

// TestMemLogSnapshots: a snapshot the member took replaces the entries up to its index (those
// after stay); one received from the leader replaces the whole log; the peer table is kept.
func TestMemLogSnapshots(t *testing.T) {
	l := NewMemLog()
	l.Save(hs(1, 1, 4), []*raftpb.Entry{ent(1, 1), ent(2, 1), ent(3, 1), ent(4, 1), ent(5, 1)}, nil)
	l.SavePeers(map[uint64]string{1: "a", 2: "b"})
	snap := func(i uint64) *raftpb.Snapshot {
		return &raftpb.Snapshot{Data: []byte("s"), Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(uint64(1)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}}
	}
	l.Compact(snap(3))
	l.Sync()
	rs := l.State()
	if got := indexes(rs.Entries); len(got) != 2 || got[0] != 4 || rs.Snapshot.GetMetadata().GetIndex() != 3 || rs.Peers[2] != "b" {
		t.Fatalf("after a compaction at 3: entries %v, snapshot %v, peers %v", got, rs.Snapshot.GetMetadata(), rs.Peers)
	}
	l.Save(hs(2, 0, 9), nil, snap(9))
	l.Save(nil, []*raftpb.Entry{ent(10, 2)}, nil)
	l.Sync()
	rs = l.State()
	if got := indexes(rs.Entries); len(got) != 1 || got[0] != 10 || rs.Snapshot.GetMetadata().GetIndex() != 9 {
		t.Fatalf("after a snapshot received at 9: entries %v, snapshot %v", got, rs.Snapshot.GetMetadata())
	}
}
