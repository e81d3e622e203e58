package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/cluster"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/snapfile"
	"github.com/tallyd/tallyd/store"
)

// backupFile writes a backup of one key with a value (and an old peer table) to a file.
func backupFile(t *testing.T, kind snapfile.Kind) (string, [32]byte) {
	t.Helper()
	secret := [32]byte{1, 2, 3}
	s := cluster.Secret{Known: true, Key: secret}
	body := raftlog.AppendPeers(s.SnapshotHead(), map[uint64]string{9: "old:1"})
	ks := store.KeyState{DB: 0, Key: [16]byte{'k'}, Value: []byte("v"),
		Holders: []store.HolderState{{LockID: [16]byte{'k'}, Levels: 1, Count: 1}}}
	body = aof.AppendState(body, &ks)
	f := filepath.Join(t.TempDir(), "b.snap")
	if err := os.WriteFile(f, snapfile.Encode(snapfile.Header{Kind: kind, Index: 50, Term: 3, Keys: 1}, body), 0o600); err != nil {
		t.Fatal(err)
	}
	return f, secret
}

func TestRestoreSingle(t *testing.T) {
	f, secret := backupFile(t, snapfile.Cluster)
	dir := filepath.Join(t.TempDir(), "d")
	var out, errs bytes.Buffer
	if code := runRestore([]string{f, "--data-dir", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, loop.KeySecretFile)); err != nil || !bytes.Equal(b, secret[:]) {
		t.Fatalf("secret %x %v", b, err)
	}
	var got []store.KeyState
	if _, err := aof.Replay(filepath.Join(dir, loop.LogFile), func(ks *store.KeyState) { got = append(got, *ks) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Value) != "v" || len(got[0].Holders) != 1 {
		t.Fatalf("replayed %+v", got)
	}
	// Again into the same, now not empty, directory: refused.
	if code := runRestore([]string{f, "--data-dir", dir}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "not empty") {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
}

func TestRestoreClusterMember(t *testing.T) {
	f, secret := backupFile(t, snapfile.Cluster)
	dir := t.TempDir()
	var out, errs bytes.Buffer
	if code := runRestore([]string{f, "--data-dir", dir, "--cluster", "1=a:1,2=b:2,3=c:3", "--node-id", "2"}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	lg, st, err := raftlog.OpenRaft(filepath.Join(dir, loop.RaftDir), func(raftlog.RaftProgress) {})
	if err != nil {
		t.Fatal(err)
	}
	lg.Close()
	md := st.Snapshot.GetMetadata()
	if md.GetIndex() != 50 || md.GetTerm() != 3 || len(md.GetConfState().GetVoters()) != 3 || st.HardState.GetCommit() != 50 {
		t.Fatalf("snapshot %v, hard state %v", md, st.HardState)
	}
	k, recs, ok := cluster.SplitSnapshot(st.Snapshot.GetData())
	if !ok || k == nil || *k != secret {
		t.Fatalf("snapshot data: secret %v ok %v", k, ok)
	}
	var peers map[uint64]string
	n := 0
	if err := aof.DecodeRecords(recs, func(*store.KeyState) { n++ }, func(p map[uint64]string) { peers = p }); err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(peers) != 3 || peers[2] != "b:2" {
		t.Fatalf("%d records, peers %v", n, peers)
	}
}

func TestRestoreRefuses(t *testing.T) {
	f, _ := backupFile(t, snapfile.Single)
	b, _ := os.ReadFile(f)
	cut := filepath.Join(t.TempDir(), "cut.snap")
	os.WriteFile(cut, b[:len(b)-5], 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{cut, "--data-dir", filepath.Join(t.TempDir(), "x")}, 1, "cut off"},
		{[]string{f}, 2, "--data-dir"},
		{[]string{f, "--data-dir", "d", "--cluster", "1=a:1"}, 2, "--node-id"},
		{[]string{f, "--data-dir", "d", "--cluster", "1=a:1", "--node-id", "2"}, 2, "not in --cluster"},
	} {
		var out, errs bytes.Buffer
		if code := runRestore(c.args, &out, &errs); code != c.code || !strings.Contains(errs.String(), c.want) {
			t.Fatalf("%q: exit %d: %s", c.args, code, errs.String())
		}
	}
}

// A backup whose fencing tokens are ahead of this clock's time floor (by more than a second)
// gets a warning: the clock is behind the one that granted them (issue 30, item 4).
func TestRestoreCeilAheadOfClock(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	floor := store.TimeFloor(now.UnixMilli())
	for _, c := range []struct {
		ceil uint64
		warn bool
	}{
		{0, false},
		{1 << 20, false},
		{floor, false},
		{floor + 1000*store.TokensPerMs, false},
		{floor + 1001*store.TokensPerMs, true},
		{store.TimeFloor(now.Add(time.Hour).UnixMilli()), true},
	} {
		var b strings.Builder
		checkCeil(c.ceil, now, &b)
		if got := b.Len() > 0; got != c.warn || c.warn && !strings.Contains(b.String(), "behind") {
			t.Errorf("ceiling %d at %v: warned %v (%q), want %v", c.ceil, now, got, b.String(), c.warn)
		}
	}
	var b strings.Builder
	checkCeil(store.TimeFloor(now.Add(time.Hour).UnixMilli()), now, &b)
	if !strings.Contains(b.String(), "2026-11-28T13:00:00Z") {
		t.Errorf("the warning does not name the clock reading the tokens belong to: %q", b.String())
	}
}
