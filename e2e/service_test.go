package e2e

// scripts/tallyd.service stays in step with the code: it has the sandboxing asked for, is a
// notify service that reloads with SIGHUP (e2e/reload_test.go runs both), passes only flags
// tallyd has, and systemd accepts it with the built binary in ExecStart.

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "../scripts/tallyd.service"

// unitDirectives reads a systemd unit's Key=Value lines (later ones appended).
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", unitFile, line)
		}
		m[k] = append(m[k], v)
	}
	return m
}

// The unit has the sandboxing the issue asks for, and passes only flags tallyd knows.
func TestServiceUnit(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	d := unitDirectives(t, text)
	for k, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "tallyd", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "NoNewPrivileges": "yes", "LimitNOFILE": "65536", "Restart": "on-failure",
		"CapabilityBoundingSet": "", "Type": "notify", "NotifyAccess": "main",
		"ExecReload": "/bin/kill -HUP $MAINPID", "EnvironmentFile": "-/etc/default/tallyd",
	} {
		if got := d[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s=%q, want %q", unitFile, k, got, want)
		}
	}
	if len(d["ExecStart"]) != 1 {
		t.Fatalf("%s: ExecStart %q", unitFile, d["ExecStart"])
	}
	args := strings.Fields(d["ExecStart"][0])
	if args[0] != "/usr/local/bin/tallyd" {
		t.Errorf("ExecStart runs %s", args[0])
	}
	code, help := runBin(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	if args[len(args)-1] != "$TALLYD_OPTS" {
		t.Errorf("ExecStart does not end with $TALLYD_OPTS (flags from the EnvironmentFile): %q", args)
	}
	for i, a := range args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !strings.Contains(help, "      "+name+" ") {
			t.Errorf("ExecStart passes %s, which tallyd --help does not list", name)
		}
		if name == "--data-dir" && (i+2 >= len(args) || args[i+2] != "/var/lib/tallyd") {
			t.Errorf("--data-dir is not the StateDirectory /var/lib/tallyd")
		}
		if name == "--config" && (i+2 >= len(args) || args[i+2] != "/etc/tallyd/tallyd.conf") {
			t.Errorf("--config is not /etc/tallyd/tallyd.conf (ConfigurationDirectory=tallyd)")
		}
	}

	// systemd's own check, with ExecStart pointing at the binary these tests built.
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit was checked above, not by systemd")
	}
	unit := filepath.Join(t.TempDir(), "tallyd.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(text, "/usr/local/bin/tallyd", binPath)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", unit).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
