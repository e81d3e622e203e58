package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// TestRestoreKeyspace: a backup holding the keyspace's records (Redis data, store.Keyspace:
// runs of aof kind 6 beside the Locks' key states) restores into a single node's log and
// into a member's raft snapshot with every record, in order (on 59a2fc0 restore refused the
// file: "unknown record kind").
func TestRestoreKeyspace(t *testing.T) {
	secret := [32]byte{4, 5, 6}
	s := cluster.Secret{Known: true, Key: secret}
	body := raftlog.AppendPeers(s.SnapshotHead(), map[uint64]string{9: "old:1"})
	st := store.KeyState{DB: 0, Key: [16]byte{'k'}, Value: []byte("v"),
		Holders: []store.HolderState{{LockID: [16]byte{'k'}, Levels: 1, Count: 1}}}
	body = aof.AppendState(body, &st)
	var recs []byte
	for i := range 3000 { // more than one run
		r := store.Record{Op: store.RecSet, DB: uint8(i % 3), Kind: store.KindString, Key: []byte("key:" + strconv.Itoa(i)),
			Value: bytes.Repeat([]byte{'x'}, 40), At: int64(i)}
		recs = r.Append(recs)
	}
	h := store.Record{Op: store.RecHSet, DB: 1, Key: []byte("h"), Value: []byte{1, 'f', 1, 'v'}}
	recs = h.Append(recs)
	body = aof.AppendKeyspace(body, recs)
	f := filepath.Join(t.TempDir(), "b.snap")
	if err := os.WriteFile(f, snapfile.Encode(snapfile.Header{Kind: snapfile.Single, Index: 50, Keys: 3002}, body), 0o600); err != nil {
		t.Fatal(err)
	}
	// A single node's log.
	dir := filepath.Join(t.TempDir(), "d")
	var out, errs bytes.Buffer
	if code := runRestore([]string{f, "--data-dir", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	var got []byte
	states := 0
	if _, err := aof.ReplayAll(filepath.Join(dir, loop.LogFile), func(*store.KeyState) { states++ },
		func(r *store.Record) { got = r.Append(got) }); err != nil {
		t.Fatal(err)
	}
	if states != 1 || !bytes.Equal(got, recs) {
		t.Fatalf("replayed %d states, keyspace records equal: %v", states, bytes.Equal(got, recs))
	}
	// A member's raft snapshot.
	mdir := t.TempDir()
	if code := runRestore([]string{f, "--data-dir", mdir, "--cluster", "1=a:1,2=b:2,3=c:3", "--node-id", "1"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lg, rs, err := raftlog.OpenRaft(filepath.Join(mdir, loop.RaftDir), func(raftlog.RaftProgress) {})
	if err != nil {
		t.Fatal(err)
	}
	lg.Close()
	_, data, ok := cluster.SplitSnapshot(rs.Snapshot.GetData())
	if !ok {
		t.Fatal("no records in the member's snapshot")
	}
	got = got[:0]
	if err := aof.DecodeAll(data, &aof.Handlers{State: func(*store.KeyState) {}, Peers: func(map[uint64]string) {},
		Keyspace: func(r *store.Record) { got = r.Append(got) }}); err != nil || !bytes.Equal(got, recs) {
		t.Fatalf("member's snapshot: %v, keyspace records equal: %v", err, bytes.Equal(got, recs))
	}
}
