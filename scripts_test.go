package main

// scripts/tallyd.conf and scripts/tallyd.service stay in step with the code: every config key
// the parser accepts is in the example, at its default, and the unit only passes flags tallyd
// has.

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"tallyd/loop"
)

const (
	exampleConf = "scripts/tallyd.conf"
	unitFile    = "scripts/tallyd.service"
)

// acceptedKeys reads the config keys applyConfigFile understands from main.go's source: the
// string constants of the cases of its switch.
func acceptedKeys(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "applyConfigFile" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, e := range cc.List {
				if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if k, err := strconv.Unquote(lit.Value); err == nil && strings.Contains(k, ".") {
						keys = append(keys, k)
					}
				}
			}
			return true
		})
	}
	if len(keys) < 10 {
		t.Fatalf("found only %d config keys in applyConfigFile: %v", len(keys), keys)
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
	o := options{configFile: exampleConf}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError) // no flag given: every key applies
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
		{"aof.enable", o.appendOnly, true},
		{"aof.dir", o.dataDir, "./data"},
		{"aof.fsync", o.appendFsync, "everysec"},
		{"aof.lock_persist_after", o.lockPersistAfter, d.LockPersistAfter},
		{"aof.rewrite_size", o.aofRewriteSize, d.AOFRewriteSize},
	} {
		if c.got != c.want {
			t.Errorf("%s: the example sets %v, the default is %v", c.key, c.got, c.want)
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
	text := readFile(t, unitFile)
	d := unitDirectives(t, text)
	for k, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "tallyd", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "NoNewPrivileges": "yes", "LimitNOFILE": "65536", "Restart": "on-failure",
		"CapabilityBoundingSet": "",
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
	var help bytes.Buffer
	if code := run([]string{"--help"}, &help); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for i, a := range args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if !strings.Contains(help.String(), "      "+name+" ") {
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
