package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/snapfile"
)

// TestLockDataDir: the data directory lock (issue 31, item 1) as restore and check-log
// --fix meet it, a cluster member's raft log included; TestDataDirOneOwner (e2e) runs two
// real processes.
func TestLockDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	release, err := lockDataDir(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("data directory %s is in use by process %d", dir, os.Getpid())
	if _, err := lockDataDir(dir, true); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	// A member's raft log: check-log --fix locks the data directory above raft/.
	raft := filepath.Join(dir, loop.RaftDir)
	if err := os.MkdirAll(raft, 0o700); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(raft, "raft.log")
	if err := os.WriteFile(log, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := runCheckLog([]string{"--fix", log}, &out, &errs, time.Now()); code != 1 || !strings.Contains(errs.String(), want) {
		t.Fatalf("check-log --fix of a held member's raft log: exit %d: %s", code, errs.String())
	}
	f, _ := backupFile(t, snapfile.Cluster)
	errs.Reset()
	if code := runRestore([]string{f, "--data-dir", dir}, &out, &errs); code != 1 || !strings.Contains(errs.String(), want) {
		t.Fatalf("restore into a held dir: exit %d: %s", code, errs.String())
	}
	release()
	// Released (as by the holder's end), the file left behind holds nothing.
	release, err = lockDataDir(dir, true)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release()
	// A directory with only a lock file restores as an empty one.
	empty := t.TempDir()
	r, err := lockDataDir(empty, true)
	if err != nil {
		t.Fatal(err)
	}
	r()
	if code := runRestore([]string{f, "--data-dir", empty}, &out, &errs); code != 0 {
		t.Fatalf("restore into a dir holding only LOCK: exit %d: %s", code, errs.String())
	}
	// Without a lock file, check-log --fix needs none (and creates none).
	other := t.TempDir()
	if r, err := lockDataDir(other, false); err != nil {
		t.Fatal(err)
	} else {
		r()
	}
	if _, err := os.Stat(filepath.Join(other, dataDirLockFile)); !os.IsNotExist(err) {
		t.Fatalf("lock file created without create: %v", err)
	}
}
