package e2e

// `make install` installs the binaries, the manual pages made from their flags, the systemd
// units (tallyd.service, tallyd-node.service) pointing at the installed binary, and the
// example config unless one is there.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMakeInstall(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	dest, bin := t.TempDir(), t.TempDir()
	install := func() {
		t.Helper()
		cmd := exec.Command("make", "-C", "..", "install", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install: %v\n%s", err, out)
		}
	}
	install()
	for _, f := range []struct {
		path string
		mode os.FileMode
		has  []string
	}{
		{"/usr/bin/tallyd", 0o755, nil},
		{"/usr/bin/tallyctl", 0o755, nil},
		{"/usr/share/man/man8/tallyd.8", 0o644, []string{".TH TALLYD 8", `\-\-log\-file`, `\fBlimits.max_connections\fR`, "SIGHUP"}},
		{"/usr/share/man/man1/tallyctl.1", 0o644, []string{".TH TALLYCTL 1", `\-\-json`, `tallyctl slock lock`}},
		{"/usr/lib/systemd/system/tallyd.service", 0o644, []string{"ExecStart=/usr/bin/tallyd --config /etc/tallyd/tallyd.conf", "Type=notify", "ExecReload="}},
		{"/usr/lib/systemd/system/tallyd-node.service", 0o644, []string{"ExecStart=/usr/bin/tallyd --node-id", "Type=notify", "ExecReload="}},
		{"/etc/tallyd/tallyd.conf", 0o644, []string{"bind = 127.0.0.1"}},
	} {
		fi, err := os.Stat(filepath.Join(dest, f.path))
		if err != nil {
			t.Errorf("%s not installed: %v", f.path, err)
			continue
		}
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", f.path, fi.Mode().Perm(), f.mode)
		}
		b, _ := os.ReadFile(filepath.Join(dest, f.path))
		for _, want := range f.has {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", f.path, want)
			}
		}
	}
	if out, err := exec.Command(filepath.Join(dest, "/usr/bin/tallyd"), "--version").Output(); err != nil || !strings.HasPrefix(string(out), "tallyd ") {
		t.Errorf("installed tallyd --version: %q %v", out, err)
	}

	// A second install keeps the operator's config.
	conf := filepath.Join(dest, "/etc/tallyd/tallyd.conf")
	if err := os.WriteFile(conf, []byte("bind = ::1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	install()
	if b, _ := os.ReadFile(conf); string(b) != "bind = ::1\n" {
		t.Fatalf("make install overwrote the config: %q", b)
	}

	// make uninstall removes both units (and keeps the config).
	if out, err := exec.Command("make", "-C", "..", "uninstall", "DESTDIR="+dest, "PREFIX=/usr", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	for _, u := range []string{"tallyd.service", "tallyd-node.service"} {
		if _, err := os.Stat(filepath.Join(dest, "/usr/lib/systemd/system", u)); !os.IsNotExist(err) {
			t.Errorf("make uninstall left %s (%v)", u, err)
		}
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("make uninstall removed the config: %v", err)
	}
}
