package main

// scripts/tallyd.conf stays in step with the code: every config key the parser accepts is in
// the example, at its default. (scripts/tallyd.service is checked against the built binary in
// e2e/service_test.go.) The shell scripts parse, and the ones make runs exist.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/stats"
)

const exampleConf = "scripts/tallyd.conf"

// configDoc is the page whose table lists every config key.
const configDoc = "docs/operations.md"

// acceptedKeys is every config key applyConfigFile understands.
func acceptedKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	for _, k := range confKeys {
		keys = append(keys, k.key)
	}
	if len(keys) < 10 {
		t.Fatalf("found only %d config keys: %v", len(keys), keys)
	}
	return keys
}

// Every key applyConfigFile accepts is in the example config, set or (an alias) commented.
func TestExampleConfigNamesEveryKey(t *testing.T) {
	b, err := os.ReadFile(exampleConf)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range acceptedKeys(t) {
		set := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + ` = `)
		commented := regexp.MustCompile(`(?m)^# ` + regexp.QuoteMeta(k) + ` = `)
		if !set.Match(b) && !commented.Match(b) {
			t.Errorf("%s does not document config key %q (applyConfigFile accepts it)", exampleConf, k)
		}
	}
}

// The example, read by the real parser, sets every key to its default and nothing is unknown.
func TestExampleConfigHasDefaults(t *testing.T) {
	var log bytes.Buffer
	var o options
	fs := newFlags(&o, loop.Defaults())
	o = options{configFile: exampleConf} // every value is the file's: no flag given, no default
	if err := applyConfigFile(&o, fs, zerolog.New(&log)); err != nil {
		t.Fatal(err)
	}
	if log.Len() > 0 {
		t.Fatalf("loading %s logged:\n%s", exampleConf, log.String())
	}
	d := loop.Defaults()
	if o.counterEnabledByFile == nil || !*o.counterEnabledByFile {
		t.Error("counter.enable is not true")
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"counter.port", o.counterPort, defaultCounterPort},
		{"counter.max_connections", o.counterMaxConns, 0},
		{"counter.buckets", o.counterBuckets, d.CounterBuckets},
		{"counter.stat_interval", o.statInterval, int(d.StatInterval)},
		{"semaphore.enable", o.semaphoreEnabled, false},
		{"semaphore.port (off while semaphore.enable is false)", o.semaphorePort, 0},
		{"semaphore.max_connections", o.semaphoreMaxConns, 0},
		{"semaphore.buckets", o.semaphoreBuckets, d.SemaphoreBuckets},
		{"semaphore.gc_interval", o.semaphoreGCInterval, int(d.SemaphoreGCInterval / time.Second)},
		{"metrics.addr", o.metricsAddr, ""},
		{"metrics.max_connections", o.metricsMaxConns, stats.DefaultMaxConns},
		{"limits.idle_timeout", o.idleTimeout, int(d.IdleTimeout / time.Second)},
		{"aof.enable", o.appendOnly, true},
		{"aof.dir", o.dataDir, "./data"},
		{"aof.fsync", o.appendFsync, "everysec"},
		{"aof.lock_persist_after", o.lockPersistAfter, d.LockPersistAfter},
		{"aof.rewrite_size", o.aofRewriteSize, d.AOFRewriteSize},
		{"max_memory", o.maxMemory, defaultMaxMemory},
	} {
		if c.got != c.want {
			t.Errorf("%s: the example sets %v, the default is %v", c.key, c.got, c.want)
		}
	}
	// Every key that sets a flag sets its default (semaphore.port: checked below).
	for _, k := range confKeys {
		if f := fs.Lookup(k.flag); f != nil && k.key != "semaphore.port" && f.Value.String() != f.DefValue {
			t.Errorf("%s: the example sets %s, the default of --%s is %s", k.key, f.Value, k.flag, f.DefValue)
		}
	}
	if !strings.Contains(readFile(t, exampleConf), "semaphore.port = 11216") || defaultSemaphorePort != 11216 {
		t.Errorf("semaphore.port in the example is not the default %d", defaultSemaphorePort)
	}
}

// tallyd itself accepts the example: run with it and an invalid bind address, it reads the
// file without a complaint and stops only at the address.
func TestExampleConfigThroughRun(t *testing.T) {
	var stderr bytes.Buffer
	code := run([]string{"--config", exampleConf, "--log-level", "debug", "--bind", "bogus"}, &stderr)
	out := stderr.String()
	if code != 1 || !strings.Contains(out, `invalid listen address "bogus"`) {
		t.Fatalf("exit %d, stderr:\n%s", code, out)
	}
	for _, bad := range []string{"unknown config key", "config file"} {
		if strings.Contains(out, bad) {
			t.Fatalf("loading %s: %s", exampleConf, out)
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The config table (docs/operations.md) has a row for every key (aliases in their key's row),
// with the flag it sets and whether SIGHUP reloads it.
func TestReadmeConfigTable(t *testing.T) {
	readme := readFile(t, configDoc)
	for _, k := range confKeys {
		if k.alias != "" {
			if !strings.Contains(readme, "(alias `"+k.key+"`)") {
				t.Errorf("the config table does not give alias %s", k.key)
			}
			continue
		}
		row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(k.key) + "`[^|]*\\| ([^|]*) \\| ([^|]*) \\|")
		m := row.FindStringSubmatch(readme)
		if m == nil {
			t.Errorf("the config table has no row for %s", k.key)
			continue
		}
		wantFlag, wantLive := "", ""
		if k.flag != "" {
			wantFlag = "`--" + k.flag + "`"
		}
		if liveFlags[k.flag] {
			wantLive = "yes"
		}
		if strings.TrimSpace(m[1]) != wantFlag || strings.TrimSpace(m[2]) != wantLive {
			t.Errorf("the config table's row for %s: flag %q, SIGHUP %q; want %q, %q", k.key, m[1], m[2], wantFlag, wantLive)
		}
	}
}

// Every shell script in scripts/ parses (bash -n): the benchmark scripts are not run by make
// test, so a syntax error would otherwise show only when someone runs make bench-cluster.
func TestShellScriptsParse(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to check the scripts with")
	}
	files, err := filepath.Glob("scripts/*.sh")
	if err != nil || len(files) < 5 {
		t.Fatalf("scripts/*.sh: %v %v", files, err)
	}
	for _, f := range files {
		if out, err := exec.Command(bash, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", f, err, out)
		}
		if fi, err := os.Stat(f); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable (%v)", f, err)
		}
	}
}

// Every ./scripts/X that the Makefile and bench/bench.mk run exists and is executable: make
// bench-cluster and the other bench targets call their script by that path.
func TestMakeTargetsRunExistingScripts(t *testing.T) {
	re := regexp.MustCompile(`\./scripts/[A-Za-z0-9_.-]+`)
	seen := map[string]bool{}
	for _, mk := range []string{"Makefile", "bench/bench.mk"} {
		for _, m := range re.FindAllString(readFile(t, mk), -1) {
			seen[m] = true
			if fi, err := os.Stat(m); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s runs %s, which is missing or not executable (%v)", mk, m, err)
			}
		}
	}
	if !seen["./scripts/bench-cluster.sh"] {
		t.Errorf("bench/bench.mk does not run ./scripts/bench-cluster.sh; it runs %v", seen)
	}
}

// The single-node unit and the cluster member's unit.
const (
	unitSingle = "scripts/tallyd.service"
	unitNode   = "scripts/tallyd-node.service"
)

// serviceLines returns the directives of a unit's [Service] section, "Key=Value" each.
func serviceLines(t *testing.T, name string) []string {
	t.Helper()
	var out []string
	in := false
	for _, l := range strings.Split(readFile(t, name), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "["):
			in = l == "[Service]"
		case in && l != "" && l[0] != '#' && l[0] != ';':
			out = append(out, l)
		}
	}
	return out
}

// Both units are notify services that reload with SIGHUP and run in the same sandbox: every
// [Service] line is the same but for where the settings come from (EnvironmentFile,
// ExecStart) and the exit statuses not restarted (a member adds 78).
func TestUnitsShareHardening(t *testing.T) {
	own := func(l string) bool {
		k, _, _ := strings.Cut(l, "=")
		return k == "EnvironmentFile" || k == "ExecStart" || k == "RestartPreventExitStatus"
	}
	single, node := serviceLines(t, unitSingle), serviceLines(t, unitNode)
	has := func(lines []string, want string) bool {
		for _, l := range lines {
			if l == want {
				return true
			}
		}
		return false
	}
	missing := func(from string, lines []string, to string, other []string) {
		for _, l := range lines {
			if !own(l) && !has(other, l) {
				t.Errorf("%s has %q, %s does not", from, l, to)
			}
		}
	}
	missing(unitSingle, single, unitNode, node)
	missing(unitNode, node, unitSingle, single)
	for _, want := range []string{"Type=notify", "NotifyAccess=main", "ExecReload=/bin/kill -HUP $MAINPID",
		"DynamicUser=yes", "ProtectSystem=strict", "SystemCallFilter=~@privileged", "MemoryDenyWriteExecute=yes"} {
		for _, u := range []string{unitSingle, unitNode} {
			if !has(serviceLines(t, u), want) {
				t.Errorf("%s lacks %s", u, want)
			}
		}
	}
	if len(node) < 40 {
		t.Errorf("%s has only %d [Service] lines: %q", unitNode, len(node), node)
	}
}
