package cluster

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tallyd/tallyd/raftlog"
)

func ent(i, term uint64) *raftpb.Entry {
	return &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryNormal), Data: []byte("x")}
}

// TestStorageDeliversWhenDurable: an append reaches raft's memory at once; its responses go
// out, in order, only once the log's writer reports its batch durable, to raft itself or to
// the other members.
func TestStorageDeliversWhenDurable(t *testing.T) {
	st := NewStorage()
	lg, _, err := raftlog.OpenRaft(t.TempDir(), func(raftlog.RaftProgress) {})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	st.Log = lg
	var seen []string
	hooks := AppendHooks{
		Snapshot: func(*raftpb.Snapshot) { seen = append(seen, "snapshot") },
		Entries:  func(e []*raftpb.Entry) { seen = append(seen, "entries") },
		Fail:     func(what string, err error) { t.Errorf("%s: %v", what, err) },
	}
	self := uint64(1)
	m1 := &raftpb.Message{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(0)),
		Entries:   []*raftpb.Entry{ent(1, 1), ent(2, 1)},
		Responses: []*raftpb.Message{{To: new(self)}, {To: new(uint64(2))}}}
	if st.Append(m1, hooks) {
		t.Fatal("durable before the writer said so")
	}
	m2 := &raftpb.Message{Entries: []*raftpb.Entry{ent(3, 1)}, Responses: []*raftpb.Message{{To: new(uint64(3))}}}
	st.Append(m2, hooks)
	if last, _ := st.Mem.LastIndex(); last != 3 || len(seen) != 2 {
		t.Fatalf("raft's memory holds up to %d, hooks saw %v", last, seen)
	}
	var stepped, sent []uint64
	deliver := func() {
		st.Deliver(self, func(m *raftpb.Message) { stepped = append(stepped, m.GetTo()) },
			func(m *raftpb.Message) { sent = append(sent, m.GetTo()) })
	}
	deliver()
	if len(stepped)+len(sent) != 0 || st.Stable() != 0 {
		t.Fatalf("delivered before durable: %v %v, stable %d", stepped, sent, st.Stable())
	}
	st.Synced(1) // the first batch
	deliver()
	if len(stepped) != 1 || len(sent) != 1 || st.Stable() != 2 {
		t.Fatalf("after the first batch: stepped %v, sent %v, stable %d", stepped, sent, st.Stable())
	}
	st.Synced(1 << 40)
	deliver()
	deliver()
	if len(stepped) != 1 || len(sent) != 2 || sent[1] != 3 || st.Stable() != 3 {
		t.Fatalf("after every batch: stepped %v, sent %v, stable %d", stepped, sent, st.Stable())
	}
	if st.Append(&raftpb.Message{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(3))}, hooks) != true {
		t.Fatal("an append after a durable one's batch is not durable at once")
	}
	if hs, _, _ := st.Mem.InitialState(); hs.GetTerm() != 2 || hs.GetCommit() != 3 {
		t.Fatalf("hard state %v", hs)
	}
}

// TestBootstrapOnly: a log of nothing but the initial members' configuration entries (or a
// snapshot of just those) is a bootstrap; an entry a leader appended is history.
func TestBootstrapOnly(t *testing.T) {
	cc := func(i uint64) *raftpb.Entry {
		return &raftpb.Entry{Index: new(i), Term: new(uint64(1)), Type: new(raftpb.EntryConfChange)}
	}
	snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(1)),
		ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
	for _, c := range []struct {
		snap *raftpb.Snapshot
		ents []*raftpb.Entry
		want bool
	}{
		{nil, nil, false},
		{nil, []*raftpb.Entry{cc(1), cc(2), cc(3)}, true},
		{nil, []*raftpb.Entry{cc(1), cc(2), ent(3, 1)}, false},
		{snap, nil, true},
		{snap, []*raftpb.Entry{cc(4)}, true},
		{snap, []*raftpb.Entry{ent(4, 2)}, false},
	} {
		if got := BootstrapOnly(c.snap, c.ents); got != c.want {
			t.Errorf("snapshot %v, %d entries: %v, want %v", c.snap != nil, len(c.ents), got, c.want)
		}
	}
}

// TestStorageHoldsSnapshot: a snapshot the loop installs a slice at a time (HoldSnapshot) has
// its response to raft itself held, once durable, until ReleaseSnapshot, and the responses to
// raft of later appends behind it, in order (raft must not hear entries after an unstable
// snapshot are stable before it: TestMemberSnapshotInstallWaits); its response to the
// leader goes as usual. raft's memory has the snapshot's metadata, and the snapshot raft
// reads (View) is the one given, its data shared.
func TestStorageHoldsSnapshot(t *testing.T) {
	st := NewStorage()
	lg, _, err := raftlog.OpenRaft(t.TempDir(), func(raftlog.RaftProgress) {})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	st.Log = lg
	self := uint64(1)
	data := []byte("records")
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(2)),
		ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
	hooks := AppendHooks{
		Snapshot: func(s *raftpb.Snapshot) { st.HoldSnapshot(s.GetMetadata().GetIndex()) },
		Entries:  func([]*raftpb.Entry) {},
		Fail:     func(what string, err error) { t.Errorf("%s: %v", what, err) },
	}
	applied := &raftpb.Message{To: new(self), Snapshot: snap, Index: new(uint64(10))}
	st.Append(&raftpb.Message{Snapshot: snap, Responses: []*raftpb.Message{{To: new(uint64(3))}, applied}}, hooks)
	st.Append(&raftpb.Message{Entries: []*raftpb.Entry{ent(11, 2)}, Responses: []*raftpb.Message{{To: new(self), Index: new(uint64(11))}}}, hooks)
	if st.Installing() != 10 {
		t.Fatalf("installing %d, want 10", st.Installing())
	}
	if s, _ := st.View.Snapshot(); s != snap || &s.GetData()[0] != &data[0] {
		t.Fatal("raft does not read the snapshot given, its data shared")
	}
	if s, _ := st.Mem.Snapshot(); s.GetMetadata().GetIndex() != 10 || len(s.GetData()) != 0 {
		t.Fatalf("raft's memory has the snapshot at %d with %d bytes of data; want its metadata alone", s.GetMetadata().GetIndex(), len(s.GetData()))
	}
	var stepped []*raftpb.Message
	var sent int
	deliver := func() {
		st.Deliver(self, func(m *raftpb.Message) { stepped = append(stepped, m) }, func(*raftpb.Message) { sent++ })
	}
	st.Synced(1 << 40)
	deliver()
	if sent != 1 || len(stepped) != 0 {
		t.Fatalf("while installing: %d sent, %d stepped (%v); want the leader's response alone", sent, len(stepped), stepped)
	}
	st.ReleaseSnapshot(func(m *raftpb.Message) { stepped = append(stepped, m) })
	if len(stepped) != 2 || stepped[0] != applied || stepped[1].GetIndex() != 11 || st.Installing() != 0 {
		t.Fatalf("after the install: stepped %v; want the snapshot's response, then the later append's", stepped)
	}
	// Released before its response was delivered: it goes at the next delivery, as any.
	st.Append(&raftpb.Message{Snapshot: &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(2))}},
		Responses: []*raftpb.Message{{To: new(self), Index: new(uint64(20))}}}, hooks)
	st.ReleaseSnapshot(func(*raftpb.Message) { t.Fatal("stepped at the release: nothing was held") })
	st.Synced(1 << 41)
	deliver()
	if len(stepped) != 3 || stepped[2].GetIndex() != 20 {
		t.Fatalf("the response of a snapshot released before durable: stepped %v", stepped)
	}
}
