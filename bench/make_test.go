package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/bench/report"
)

// gitStatus returns `git status --porcelain` of the repository at root: every change to
// a committed file, and every new file git does not ignore.
func gitStatus(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=all").CombinedOutput()
	if err != nil {
		t.Fatalf("git status: %v\n%s", err, out)
	}
	return string(out)
}

// TestMakeBenchLeavesCommittedFilesAlone runs a short `make bench` and a `make
// bench-publish` of its partial results: neither may change a committed file, and the
// run's files land in BENCH_OUT.
func TestMakeBenchLeavesCommittedFilesAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tallyd and runs make bench")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"make", "git", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run(); err != nil {
		t.Skip("not in a git checkout")
	}
	// The default output directory is one git ignores.
	if out, err := exec.Command("git", "-C", root, "check-ignore", "-q", "bench/out/latest.json").CombinedOutput(); err != nil {
		t.Errorf("bench/out/latest.json is not ignored by git: %v %s", err, out)
	}
	before := gitStatus(t, root)
	out := t.TempDir()
	// Into a temporary BENCH_OUT; so that the test cannot pass by writing nowhere, the
	// run must put its files there.
	mk := func(target string, vars ...string) ([]byte, error) {
		cmd := exec.Command("make", "--no-print-directory", "-C", root, target)
		cmd.Env = append(os.Environ(), vars...)
		return cmd.CombinedOutput()
	}
	b, err := mk("bench", "BENCH_OUT="+out, "BENCH_QUICK=1", "BENCH_CASES=^pairs 1x1$", "BENCH_DURATION=500ms", "BENCH_SOAK=0")
	if err != nil {
		t.Fatalf("make bench: %v\n%s", err, b)
	}
	if after := gitStatus(t, root); after != before {
		t.Errorf("make bench changed the worktree:\nbefore:\n%s\nafter:\n%s\nmake's output:\n%s", before, after, b)
	}
	rep, err := report.ReadFile(filepath.Join(out, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"latest.json", "latest.md"}
	// (Not that it completed ops: on a loaded machine a stall may outlast a short run, and
	// a case of 0 ops/s has no place on the chart's log axes.)
	if len(rep.Cases) > 0 && rep.Cases[0].Results["tallyd"] != nil && rep.Cases[0].Results["tallyd"].Ops > 0 {
		files = append(files, "latest.png")
	}
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("make bench did not write %s into BENCH_OUT: %v", f, err)
		}
	}
	if len(rep.Cases) != 1 || rep.Cases[0].Name != "pairs 1x1" || rep.Cases[0].Results["tallyd"] == nil ||
		rep.Cases[0].Results["tallyd"].Addr == "" || len(rep.Generator) == 0 {
		t.Errorf("make bench ran %d cases (%+v), generator %d", len(rep.Cases), rep.Cases, len(rep.Generator))
	}
	if len(rep.Partial) == 0 {
		t.Errorf("a quick run of one case is not marked partial")
	}

	b, err = mk("bench-publish", "BENCH_OUT="+out)
	if err == nil || !bytes.Contains(b, []byte("latest is a partial run")) {
		t.Errorf("make bench-publish of a partial run: %v\n%s", err, b)
	}
	if after := gitStatus(t, root); after != before {
		t.Errorf("make bench-publish of a partial run changed the worktree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if strings.Contains(string(b), "published") && !strings.Contains(string(b), "nothing published") {
		t.Errorf("make bench-publish says it published:\n%s", b)
	}
}
