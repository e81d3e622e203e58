package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/loop"
)

// The security keys set what their flags set: a listener's own allow-list replaces --allow,
// protected mode reads yes/no, and the password is kept out of every message.
func TestSecurityConfig(t *testing.T) {
	o, fs, _, err := loadConf(t, `allow = 10.0.0.0/8
pool.allow = 192.0.2.1, 192.0.2.0/25
cluster.peer_allow = 10.9.0.0/16
protected_mode = no
requirepass = "pw in a file"
`, "--semaphore-port=11216")
	if err != nil {
		t.Fatal(err)
	}
	o.cluster.cluster, o.cluster.nodeID = "1=127.0.0.1:7000", 1
	o.dataDir = t.TempDir()
	cfg, err := o.loopConfig(fs, loop.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ProtectedMode || cfg.RequirePass != "pw in a file" || cfg.ACLFile != "" {
		t.Errorf("protected %v, requirepass %q, aclfile %q", cfg.ProtectedMode, cfg.RequirePass, cfg.ACLFile)
	}
	want := map[loop.Proto]string{loop.ProtoCounter: "[10.0.0.0/8]", loop.ProtoSemaphore: "[10.0.0.0/8]",
		loop.ProtoPool: "[192.0.2.1/32 192.0.2.0/25]", loop.ProtoSlock: "[10.0.0.0/8]", loop.ProtoPeer: "[10.9.0.0/16]"}
	for _, l := range cfg.Listeners {
		if got := fmtPrefixes(l); got != want[l.Proto] {
			t.Errorf("%s listener: allow %s, want %s", l.Proto, got, want[l.Proto])
		}
		delete(want, l.Proto)
	}
	if len(want) > 0 {
		t.Errorf("no listener for %v", want)
	}
	for _, args := range [][]string{
		{"--protected-mode", "maybe"}, {"--allow", "10.0.0.0/40"}, {"--slock-allow", "nonsense"},
		{"--requirepass", "pw", "--aclfile", "/dev/null"},
	} {
		var stderr bytes.Buffer
		code := run(append(args, "--counter-port=1", "--pool-port=0", "--slock-port=0", "--appendonly=false"), &stderr)
		if code != 1 || !strings.Contains(stderr.String(), args[0]) && !strings.Contains(stderr.String(), "together") {
			t.Errorf("%q: exit %d, %q", args, code, stderr.String())
		}
	}
}

func fmtPrefixes(l loop.Listener) string {
	var s []string
	for _, p := range l.Allow {
		s = append(s, p.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

// A reload's log line names a changed password, never its values.
func TestDescribeChangeHidesSecrets(t *testing.T) {
	got := describeChange("requirepass", "old-Secret", "new-Secret")
	if got != "requirepass (--requirepass): changed" {
		t.Errorf("describeChange = %q", got)
	}
	if got := describeChange("slock-allow", "", "10.0.0.0/8"); got != `slock.allow (--slock-allow): "" -> 10.0.0.0/8` {
		t.Errorf("describeChange = %q", got)
	}
}
