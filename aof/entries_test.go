package aof

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// rent is a raft entry of index i and term, whose data is data ("" none).
func rent(i, term uint64, data string) *raftpb.Entry {
	e := &raftpb.Entry{Index: new(i), Term: new(term), Type: new(raftpb.EntryNormal)}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

// seedRaftLog is a raft log of every kind of record: a peer table, entries, hard states and
// a snapshot received from the leader.
func seedRaftLog() []byte {
	b := []byte(raftlog.RaftHeader)
	b = raftlog.AppendPeers(b, map[uint64]string{1: "a:1", 2: "b:2"})
	for i := uint64(1); i <= 4; i++ {
		b = raftlog.AppendEntry(b, rent(i, 1, fmt.Sprintf("x-%d", i)))
	}
	b = raftlog.AppendHardState(b, 1, 1, 3)
	b = raftlog.AppendSnapshot(b, &raftpb.Snapshot{Data: []byte("snapshot-data"), Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(6)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}})
	for i := uint64(7); i <= 8; i++ {
		b = raftlog.AppendEntry(b, rent(i, 2, fmt.Sprintf("y-%d", i)))
	}
	return raftlog.AppendHardState(b, 2, 0, 8)
}

func TestRaftDecodeRecords(t *testing.T) {
	a, c := state(0, "a", "va", 1), state(3, "c", "", 2)
	peers := map[uint64]string{1: "h:1", 7: "h:7"}
	b := AppendState(nil, &a)
	e1 := len(b)
	b = raftlog.AppendPeers(b, peers)
	e2 := len(b)
	b = AppendState(b, &c)
	var got []string
	var gotPeers map[uint64]string
	err := DecodeRecords(b, func(ks *store.KeyState) {
		got = append(got, fmt.Sprintf("%d %q %q %d", ks.DB, bytes.TrimRight(ks.Key[:], "\x00"), ks.Value, len(ks.Holders)))
	}, func(p map[uint64]string) { gotPeers = p })
	if err != nil || strings.Join(got, ",") != `0 "a" "va" 1,3 "c" "" 2` || !maps.Equal(gotPeers, peers) {
		t.Fatalf("decoded %v %v: %v", got, gotPeers, err)
	}
	for cut := range len(b) {
		n := 0
		err := DecodeRecords(b[:cut], func(*store.KeyState) { n++ }, func(map[uint64]string) { n++ })
		if whole := cut == 0 || cut == e1 || cut == e2; (err == nil) != whole {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for at := range len(b) {
		d := bytes.Clone(b)
		d[at] ^= 0x10
		if err := DecodeRecords(d, func(*store.KeyState) {}, func(map[uint64]string) {}); err == nil {
			t.Fatalf("byte %d damaged: decoded", at)
		}
	}
	// An entry of a raft log is not a record of an entry's data.
	if err := DecodeRecords(raftlog.AppendEntry(nil, rent(1, 1, "x")), func(*store.KeyState) {}, func(map[uint64]string) {}); err == nil {
		t.Fatal("a raft log entry record decoded as state")
	}
}
