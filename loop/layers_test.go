package loop

// The rooms keep their rules: this test reads the module's import graph with go list and
// fails if a package depends on what its room forbids.

import (
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// layerRoots are the packages the rules speak of, as go list patterns.
var layerRoots = []string{"github.com/tallyd/tallyd/store", "github.com/tallyd/tallyd/proto/...", "github.com/tallyd/tallyd/stats", "github.com/tallyd/tallyd/bench/...", "github.com/tallyd/tallyd/tlsbridge", "github.com/tallyd/tallyd/script", "github.com/tallyd/tallyd/logfile", "github.com/tallyd/tallyd/raftlog", "github.com/tallyd/tallyd/cluster/...", "github.com/tallyd/tallyd/lockwire", "github.com/tallyd/tallyd/snapfile"}

// layerRule says which module packages pkg may depend on (directly or not); std reports a
// standard-library package. It returns "" when dep is allowed, else the rule it breaks.
func layerRule(pkg, dep string, std bool) string {
	if dep == pkg {
		return ""
	}
	under := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	if under(dep, "github.com/tallyd/tallyd/cluster/sim") && !under(pkg, "github.com/tallyd/tallyd/cluster/sim") {
		return "only tests import cluster/sim, the simulator"
	}
	switch {
	case pkg == "github.com/tallyd/tallyd/cluster/sim":
		// Members without the loop: fake hosts, links, disks and clock around cluster alone.
		for _, bad := range []string{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/stats", "github.com/tallyd/tallyd/tlsbridge", "github.com/tallyd/tallyd/script", "github.com/panjf2000/gnet"} {
			if under(dep, bad) {
				return "cluster/sim imports neither loop, stats, tlsbridge, script nor gnet"
			}
		}
	case pkg == "github.com/tallyd/tallyd/store":
		if !std {
			return "store imports only the standard library"
		}
	case pkg == "github.com/tallyd/tallyd/lockwire":
		if under(dep, "github.com/tallyd/tallyd") && dep != "github.com/tallyd/tallyd/store" {
			return "lockwire imports only store of the module"
		}
	case pkg == "github.com/tallyd/tallyd/snapfile":
		// The backup file's frame: restore reads it before anything else starts, so it knows
		// nothing of what its body holds.
		if !std {
			return "snapfile imports only the standard library"
		}
	case pkg == "github.com/tallyd/tallyd/logfile":
		// What the two logs share: the record frame, the damage rule, the check-log tool.
		if !std {
			return "logfile imports only the standard library"
		}
	case pkg == "github.com/tallyd/tallyd/raftlog":
		// The raft log stores raft's entries as opaque bytes: it knows neither the store nor
		// the append-only log whose records they carry (aof imports it, not the reverse).
		if under(dep, "github.com/tallyd/tallyd") && dep != "github.com/tallyd/tallyd/logfile" {
			return "raftlog imports only logfile of the module"
		}
	case pkg == "github.com/tallyd/tallyd/cluster":
		// The raft member apart from the loop: the loop imports it and calls it, never the
		// reverse, and it does no network I/O of its own (the loop's links carry its messages).
		for _, bad := range []string{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/stats", "github.com/tallyd/tallyd/tlsbridge", "github.com/tallyd/tallyd/script", "github.com/panjf2000/gnet"} {
			if under(dep, bad) {
				return "cluster imports neither loop, stats, tlsbridge, script nor gnet"
			}
		}
	case pkg == "github.com/tallyd/tallyd/proto/acl":
		if !std {
			return "proto/acl imports only the standard library"
		}
	case under(pkg, "github.com/tallyd/tallyd/proto"):
		for _, bad := range []string{"github.com/tallyd/tallyd/store", "github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/stats", "github.com/tallyd/tallyd/tlsbridge"} {
			if under(dep, bad) {
				return "proto imports neither store, loop, stats nor tlsbridge"
			}
		}
	case pkg == "github.com/tallyd/tallyd/stats":
		if under(dep, "github.com/tallyd/tallyd") {
			return "stats imports no other package of the module"
		}
	case pkg == "github.com/tallyd/tallyd/tlsbridge":
		// The bridge runs TLS off the loop and hands it plaintext: it knows neither the
		// loop nor gnet (the loop registers the ends it is handed).
		if under(dep, "github.com/tallyd/tallyd") || under(dep, "github.com/panjf2000/gnet") {
			return "tlsbridge imports no other package of the module, nor gnet"
		}
	case pkg == "github.com/tallyd/tallyd/script":
		// Scripts call back into the loop through a function value: the package knows
		// neither the loop, the store nor a codec, and does no I/O.
		if under(dep, "github.com/tallyd/tallyd") || under(dep, "github.com/panjf2000/gnet") {
			return "script imports no other package of the module, nor gnet"
		}
	case under(pkg, "github.com/tallyd/tallyd/bench"):
		if under(dep, "github.com/tallyd/tallyd") && !under(dep, "github.com/tallyd/tallyd/proto") && !under(dep, "github.com/tallyd/tallyd/bench") {
			return "bench imports only proto (no stats, store or loop)"
		}
	}
	return ""
}

// importRule says which packages pkg may import directly (a rule on the import lines, where
// layerRule speaks of every dependency); it returns "" when dep is allowed, else the rule it
// breaks.
func importRule(pkg, dep string) string {
	under := func(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }
	switch {
	case pkg == "github.com/tallyd/tallyd/loop":
		// The raft member is cluster.Member; the loop is its host and never drives raft
		// itself (raft, raftpb, tracker are cluster's).
		if under(dep, "go.etcd.io/raft") {
			return "loop imports cluster, never go.etcd.io/raft"
		}
		if under(dep, "github.com/tallyd/tallyd/cluster/sim") {
			return "only tests import cluster/sim, the simulator"
		}
	}
	return ""
}

// importRoots are the packages importRule speaks of.
var importRoots = []string{"github.com/tallyd/tallyd/loop"}

// goList runs go list with args and returns its output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	out, err := exec.Command(goBin, append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestLayers(t *testing.T) {
	std := map[string]bool{}
	for _, l := range goList(t, append([]string{"-deps", "-f", "{{.ImportPath}} {{.Standard}}"}, layerRoots...)...) {
		path, isStd, _ := strings.Cut(l, " ")
		std[path] = isStd == "true"
	}
	pkgs := 0
	for _, l := range goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, layerRoots...)...) {
		f := strings.Fields(l)
		pkgs++
		for _, dep := range f[1:] {
			s, known := std[dep]
			if !known {
				t.Fatalf("%s: dependency %s missing from go list -deps", f[0], dep)
			}
			if rule := layerRule(f[0], dep, s); rule != "" {
				t.Errorf("%s depends on %s: %s", f[0], dep, rule)
			}
		}
	}
	for _, l := range goList(t, append([]string{"-f", "{{.ImportPath}} {{join .Imports \" \"}}"}, importRoots...)...) {
		f := strings.Fields(l)
		for _, dep := range f[1:] {
			if rule := importRule(f[0], dep); rule != "" {
				t.Errorf("%s imports %s: %s", f[0], dep, rule)
			}
		}
	}
	if pkgs < 12 { // store, stats, four proto packages, bench and two under it, tlsbridge, logfile, raftlog, cluster, lockwire
		t.Fatalf("go list found only %d packages under %v", pkgs, layerRoots)
	}
}

// TestLayerRule: the rules themselves, on made-up dependencies.
func TestLayerRule(t *testing.T) {
	for _, c := range []struct {
		pkg, dep string
		std, ok  bool
	}{
		{"github.com/tallyd/tallyd/store", "strconv", true, true},
		{"github.com/tallyd/tallyd/store", "github.com/tallyd/tallyd/stats", false, false},
		{"github.com/tallyd/tallyd/store", "github.com/tallyd/tallyd/proto/slock", false, false},
		{"github.com/tallyd/tallyd/store", "github.com/x/y", false, false},
		{"github.com/tallyd/tallyd/proto/pool", "github.com/tallyd/tallyd/store", false, false},
		{"github.com/tallyd/tallyd/proto/pool", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/proto/pool", "github.com/tallyd/tallyd/stats", false, false},
		{"github.com/tallyd/tallyd/proto/slock", "github.com/tallyd/tallyd/proto/resp", false, true},
		{"github.com/tallyd/tallyd/proto/slock", "github.com/tallyd/tallyd/proto/acl", false, true},
		{"github.com/tallyd/tallyd/proto/rediscmd", "github.com/tallyd/tallyd/proto/slock", false, true},
		{"github.com/tallyd/tallyd/proto/rediscmd", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/proto/acl", "crypto/sha256", true, true},
		{"github.com/tallyd/tallyd/lockwire", "github.com/tallyd/tallyd/store", false, true},
		{"github.com/tallyd/tallyd/lockwire", "github.com/tallyd/tallyd/proto/slock", false, false},
		{"github.com/tallyd/tallyd/logfile", "hash/crc32", true, true},
		{"github.com/tallyd/tallyd/logfile", "github.com/tallyd/tallyd/store", false, false},
		{"github.com/tallyd/tallyd/raftlog", "github.com/tallyd/tallyd/logfile", false, true},
		{"github.com/tallyd/tallyd/raftlog", "go.etcd.io/raft/v3/raftpb", false, true},
		{"github.com/tallyd/tallyd/raftlog", "github.com/tallyd/tallyd/aof", false, false},
		{"github.com/tallyd/tallyd/raftlog", "github.com/tallyd/tallyd/store", false, false},
		{"github.com/tallyd/tallyd/cluster", "github.com/tallyd/tallyd/raftlog", false, true},
		{"github.com/tallyd/tallyd/cluster", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/cluster", "github.com/panjf2000/gnet/v2", false, false},
		{"github.com/tallyd/tallyd/cluster/sim", "github.com/tallyd/tallyd/cluster", false, true},
		{"github.com/tallyd/tallyd/cluster/sim", "github.com/anishathalye/porcupine", false, true},
		{"github.com/tallyd/tallyd/cluster/sim", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/cluster/sim", false, false},
		{"github.com/tallyd/tallyd/cluster", "github.com/tallyd/tallyd/cluster/sim", false, false},
		{"github.com/tallyd/tallyd/proto/acl", "github.com/tallyd/tallyd/proto/resp", false, false},
		{"github.com/tallyd/tallyd/proto/acl", "golang.org/x/crypto/bcrypt", false, false},
		{"github.com/tallyd/tallyd/proto/slock", "google.golang.org/protobuf/encoding/protowire", false, true},
		{"github.com/tallyd/tallyd/proto/slock", "github.com/tallyd/tallyd/storex", false, true},
		{"github.com/tallyd/tallyd/stats", "github.com/tallyd/tallyd/proto/counter", false, false},
		{"github.com/tallyd/tallyd/stats", "github.com/prometheus/client_golang/prometheus", false, true},
		{"github.com/tallyd/tallyd/bench/load", "github.com/tallyd/tallyd/stats", false, false},
		{"github.com/tallyd/tallyd/bench/load", "github.com/tallyd/tallyd/store", false, false},
		{"github.com/tallyd/tallyd/bench/load", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/bench", "github.com/tallyd/tallyd/bench/report", false, true},
		{"github.com/tallyd/tallyd/bench/load", "github.com/tallyd/tallyd/proto/counter", false, true},
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/store", false, true},
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/tlsbridge", false, true},
		{"github.com/tallyd/tallyd/proto/resp", "github.com/tallyd/tallyd/tlsbridge", false, false},
		{"github.com/tallyd/tallyd/tlsbridge", "github.com/tallyd/tallyd/loop", false, false},
		{"github.com/tallyd/tallyd/tlsbridge", "github.com/panjf2000/gnet/v2", false, false},
		{"github.com/tallyd/tallyd/tlsbridge", "crypto/tls", true, true},
		{"github.com/tallyd/tallyd/tlsbridge", "golang.org/x/sys/unix", false, true},
	} {
		if got := layerRule(c.pkg, c.dep, c.std) == ""; got != c.ok {
			t.Errorf("layerRule(%s, %s) allowed %v, want %v", c.pkg, c.dep, got, c.ok)
		}
	}
	for _, c := range []struct {
		pkg, dep string
		ok       bool
	}{
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/cluster", true},
		{"github.com/tallyd/tallyd/loop", "go.etcd.io/raft/v3", false},
		{"github.com/tallyd/tallyd/loop", "go.etcd.io/raft/v3/raftpb", false},
		{"github.com/tallyd/tallyd/loop", "go.etcd.io/raft/v3/tracker", false},
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/store", true},
		{"github.com/tallyd/tallyd/cluster", "go.etcd.io/raft/v3", true},
		{"github.com/tallyd/tallyd/loop", "github.com/tallyd/tallyd/cluster/sim", false},
	} {
		if got := importRule(c.pkg, c.dep) == ""; got != c.ok {
			t.Errorf("importRule(%s, %s) allowed %v, want %v", c.pkg, c.dep, got, c.ok)
		}
	}
}
