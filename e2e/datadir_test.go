package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startOnDir starts tallyd serving Redis text on a port of its own over data directory dir.
func startOnDir(t *testing.T, dir string) (*proc, string) {
	t.Helper()
	port := strconv.Itoa(freePort(t))
	return start(t, 0, "--counter-port", "0", "--slock-port", port, "--data-dir", dir), "127.0.0.1:" + port
}

// serves waits until p listens or ends: true if it listens.
func (p *proc) serves(t *testing.T) bool {
	t.Helper()
	var listening bool
	if !waitUntil(time.Now().Add(15*time.Second), 10*time.Millisecond, func() bool {
		listening = strings.Contains(p.log.String(), "tallyd listening")
		ended, _ := p.exited()
		return listening || ended
	}) {
		t.Fatalf("tallyd neither listens nor ends; log:\n%s", p.log.String())
	}
	return listening
}

// TestDataDirOneOwner: a data directory has one owner (issue 31, item 1). Two tallyds on
// one --data-dir both ran, each granting SET NX to its own client, and one's acknowledged
// writes were lost when the other compacted and restarted. Now the second one, tallyd
// restore and tallyd check-log --fix exit non-zero naming the directory and the holder's
// PID, and change nothing; once the holder is killed (SIGKILL: its lock file stays
// behind), the next start takes the directory.
func TestDataDirOneOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a, addr := startOnDir(t, dir)
	r := dialR(t, addr)
	r.must(t, "+OK", "SET", "lock:report", "owner-a", "NX")
	file := filepath.Join(t.TempDir(), "b.snap")
	if code, out := tallyctl(t, append(ctlAt(addr), "snapshot", "save", file)...); code != 0 {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	want := fmt.Sprintf("data directory %s is in use by process %d", dir, a.cmd.Process.Pid)

	b, _ := startOnDir(t, dir)
	if b.serves(t) {
		t.Fatalf("a second tallyd serves the data directory the first one serves; its log:\n%s", b.log.String())
	}
	if code := b.exitCode(t); code == 0 || !strings.Contains(b.log.String(), want) {
		t.Fatalf("second tallyd: exit %d, want non-zero and %q; log:\n%s", code, want, b.log.String())
	}

	aof := filepath.Join(dir, "tallyd.aof")
	before, err := os.ReadFile(aof)
	if err != nil {
		t.Fatal(err)
	}
	if code, out := runBin(t, "check-log", "--fix", aof); code == 0 || !strings.Contains(out, want) {
		t.Errorf("check-log --fix on a served log: exit %d, want non-zero and %q:\n%s", code, want, out)
	}
	if code, out := runBin(t, "restore", file, "--data-dir", dir); code == 0 || !strings.Contains(out, want) {
		t.Errorf("restore into a served data dir: exit %d, want non-zero and %q:\n%s", code, want, out)
	}
	if ents, _ := filepath.Glob(aof + ".broken-*"); len(ents) > 0 {
		t.Errorf("check-log --fix moved the served log aside: %v", ents)
	}
	if after, _ := os.ReadFile(aof); string(after[:len(before)]) != string(before) {
		t.Errorf("the served log changed under its server")
	}
	r.must(t, "$owner-a", "GET", "lock:report") // the first one serves on

	// Killed, its lock file left behind: never a stale lock.
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	a.exitCode(t)
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	c, addr := startOnDir(t, dir)
	if !c.serves(t) {
		t.Fatalf("tallyd did not start on the data directory of a killed one; log:\n%s", c.log.String())
	}
	dialR(t, addr).must(t, "$owner-a", "GET", "lock:report")
	// And with its server gone, check-log --fix may run (a lock file alone holds nothing).
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.exitCode(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	if code, out := runBin(t, "check-log", "--fix", aof); code != 0 {
		t.Fatalf("check-log --fix on a stopped data dir: exit %d:\n%s", code, out)
	}
}
