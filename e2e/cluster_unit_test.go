package e2e

import (
	"os"
	"strings"
	"testing"
)

// scripts/tallyd-node.service, the cluster member's unit, passes only flags tallyd knows and
// takes its member settings from the EnvironmentFile its comment shows.
func TestClusterNodeUnit(t *testing.T) {
	const file = "../scripts/tallyd-node.service"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	d := unitDirectives(t, text)
	if got := d["EnvironmentFile"]; len(got) != 1 || got[0] != "/etc/tallyd/node.env" {
		t.Errorf("EnvironmentFile=%q", got)
	}
	if len(d["ExecStart"]) != 1 {
		t.Fatalf("ExecStart %q", d["ExecStart"])
	}
	_, help := runBin(t, "--help")
	for _, a := range strings.Fields(d["ExecStart"][0])[1:] {
		if name, _, _ := strings.Cut(a, "="); strings.HasPrefix(name, "--") && !strings.Contains(help, " "+name+" ") {
			t.Errorf("ExecStart passes %s, which tallyd --help does not list", name)
		}
		if strings.HasPrefix(a, "${") {
			v := strings.Trim(a, "${}")
			if !strings.Contains(text, "#   "+v+"=") {
				t.Errorf("ExecStart uses %s, which the example node.env in the comment does not set", v)
			}
		}
	}
	for _, want := range []string{"--cluster", "--node-id", "--appendfsync always", "--data-dir /var/lib/tallyd"} {
		if !strings.Contains(d["ExecStart"][0], want) {
			t.Errorf("ExecStart lacks %s", want)
		}
	}
	// Issue 19: the unit runs on every start, so it never bootstraps (a wiped member with
	// --initial-cluster-state new could help elect a leader lacking acknowledged writes),
	// and a member refused for its state (exit status 78) is not restarted in a loop.
	if strings.Contains(d["ExecStart"][0], "--initial-cluster-state") {
		t.Errorf("ExecStart passes --initial-cluster-state: %q", d["ExecStart"][0])
	}
	if got := d["RestartPreventExitStatus"]; len(got) != 1 || !strings.Contains(" "+got[0]+" ", " 78 ") {
		t.Errorf("RestartPreventExitStatus=%q, want it to name 78", got)
	}
}
