package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// slock waits and locked on a key nobody holds say "not held": in a database nothing was
// ever locked in (UNKNOWN_DB_ERROR) and in one where another key is held (LOCK_MANAGER_ERROR).
func TestSlockNotHeld(t *testing.T) {
	s := startServer(t, false)
	for _, verb := range []string{"waits", "locked"} {
		r := s.ctl(t, "slock", verb, "nokey")
		expect(t, r, 2, nil, []string{"tallyctl slock " + verb + " nokey: not held\n"})
		if strings.Contains(r.err, "UNKNOWN_DB") {
			t.Errorf("slock %s nokey shows the protocol's error:\n%s", verb, r)
		}
	}
	expect(t, s.ctl(t, "slock", "lock", "other", "--timeout", "0", "--expried", "30"), 0, []string{"OK key=other"}, nil)
	for _, verb := range []string{"waits", "locked"} {
		expect(t, s.ctl(t, "slock", verb, "nokey"), 2, nil, []string{"tallyctl slock " + verb + " nokey: not held\n"})
		expect(t, s.ctl(t, "--json", "slock", verb, "nokey"), 2, []string{`"held":false`, `"key":"nokey"`}, nil)
	}
	expect(t, s.ctl(t, "slock", "waits", "other"), 0, []string{"other: 1 level(s) held, 0 waiter(s)"}, nil)
}

// tallyctl version prints the number tallyd --version prints, also when a build stamps one
// with -ldflags (make VERSION=...).
func TestVersion(t *testing.T) {
	out := func(bin string, args ...string) string {
		t.Helper()
		b, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", bin, args, err, b)
		}
		return string(b)
	}
	d := out(tallydBin, "--version")
	want := strings.Replace(d, "tallyd", "tallyctl", 1)
	if got := out(ctlBin, "version"); got != want || !strings.HasPrefix(d, "tallyd ") {
		t.Errorf("tallyctl version %q, tallyd --version %q", got, d)
	}
	if got := out(ctlBin, "--version"); got != want {
		t.Errorf("tallyctl --version %q, want %q", got, want)
	}
	if got := out(ctlBin, "--json", "version"); !strings.Contains(got, `"version":"`+strings.Fields(d)[1]+`"`) {
		t.Errorf("tallyctl --json version %q", got)
	}

	dir := t.TempDir()
	flag := "-X github.com/tallyd/tallyd/internal/version.Tag=v9.8.7"
	for _, b := range [][2]string{{filepath.Join(dir, "tallyd"), "github.com/tallyd/tallyd"}, {filepath.Join(dir, "tallyctl"), "."}} {
		if o, err := exec.Command("go", "build", "-ldflags", flag, "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, o)
		}
	}
	if got := out(filepath.Join(dir, "tallyd"), "--version"); got != "tallyd 9.8.7\n" {
		t.Errorf("stamped tallyd --version %q", got)
	}
	if got := out(filepath.Join(dir, "tallyctl"), "version"); got != "tallyctl 9.8.7\n" {
		t.Errorf("stamped tallyctl version %q", got)
	}
}
