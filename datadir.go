package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/loop"
)

// dataDirLockFile is the file in a data directory whose flock says who owns it: tallyd
// serving it, tallyd restore writing it or tallyd check-log --fix repairing a log in it.
// The owner's PID is written into it, for the message another process gets. The kernel
// drops a flock when its process ends, however it ends, so a file left by a killed process
// never blocks a start (as etcd's and PostgreSQL's data directory locks).
const dataDirLockFile = "LOCK"

// lockDataDir takes dir's exclusive lock, creating dir (0700) and its lock file when create
// is set; without create, a directory with no lock file is not locked (release does nothing):
// no tallyd has served it. release gives the lock back (the process's end does too).
func lockDataDir(dir string, create bool) (release func(), err error) {
	flags := os.O_RDWR
	if create {
		if err := os.MkdirAll(dir, loop.DataDirMode); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
		flags |= os.O_CREATE
	}
	path := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(path, flags|syscall.O_CLOEXEC, aof.FileMode)
	if err != nil {
		if !create && errors.Is(err, os.ErrNotExist) {
			return func() {}, nil
		}
		return nil, fmt.Errorf("data directory %s: lock file: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = "process " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by %s (it holds the lock on %s); stop it first", dir, holder, path)
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", dir, path, err)
	}
	// Ours: say who we are (the holder's PID for the next one's message).
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(pid, 0)
	}
	return func() {
		f.Close() // the flock goes with the descriptor
		runtime.KeepAlive(f)
	}, nil
}

// logDataDir is the data directory a log file of tallyd check-log lives in:
// DATA_DIR/tallyd.aof, or DATA_DIR/raft/raft.log and raft.snap in a cluster.
func logDataDir(file string) string {
	dir := filepath.Dir(filepath.Clean(file))
	if filepath.Base(dir) == loop.RaftDir {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), dataDirLockFile)); err == nil {
			return filepath.Dir(dir)
		}
	}
	return dir
}
