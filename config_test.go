package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/loop"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "64mb": 64 << 20, "64MB": 64 << 20, "64m": 64 << 20, "2gb": 2 << 30,
		"3G": 3 << 30, "512kb": 512 << 10, "7k": 7 << 10, "100b": 100, " 5mb ": 5 << 20,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mb", "-1", "1.5gb", "12tb", "99999999999gb", "auto"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// A bad --max-memory stops tallyd before it listens, naming the flag.
func TestMaxMemoryOption(t *testing.T) {
	for _, arg := range []string{"--max-memory=1mb", "--max-memory=lots", "--max-memory=-5"} {
		var stderr bytes.Buffer
		code := run([]string{arg, "--counter-port=1", "--pool-port=0", "--slock-port=0", "--appendonly=false"}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "--max-memory") {
			t.Errorf("%s: exit %d, %q", arg, code, stderr.String())
		}
	}
	if a := autoMemory(); a != 0 && a < minMaxMemory {
		t.Errorf("automatic budget %d below the minimum", a)
	}
}

// loadConf reads text as a config file with the command line args, as run does.
func loadConf(t *testing.T, text string, args ...string) (*options, *pflag.FlagSet, string, error) {
	t.Helper()
	var o options
	fs := newFlags(&o, loop.Defaults())
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.configFile = filepath.Join(t.TempDir(), "tallyd.conf")
	if err := os.WriteFile(o.configFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	defer zerolog.SetGlobalLevel(zerolog.GlobalLevel()) // run sets it
	zerolog.SetGlobalLevel(zerolog.DebugLevel)
	err := applyConfigFile(&o, fs, zerolog.New(&log))
	return &o, fs, log.String(), err
}

// The keys operators change most set what their flags set; a flag given wins.
func TestConfigKeysForListenersLoggingAndData(t *testing.T) {
	o, _, log, err := loadConf(t, `bind = 0.0.0.0
pool.port = 7000
slock.port = "6000"
counter.port = 0
log.level = debug
log.format = json
log.path = /tmp/x.log
data_dir = /srv/tallyd
limits.max_connections = 77
limits.idle_timeout = 9
slock.max_wills = 3
aof.enable = off
`, "--slock-port=6001")
	if err != nil || strings.Count(log, "\n") != 1 || !strings.Contains(log, `"key":"slock.port","flag":"slock-port","message":"config key overridden by flag"`) {
		t.Fatalf("%v; logged %s", err, log)
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"bind", o.bind, "0.0.0.0"}, {"pool.port", o.poolPort, 7000}, {"slock.port (the flag wins)", o.slockPort, 6001},
		{"counter.port", o.counterPort, 0}, {"log.level", o.logLevel, "debug"}, {"log.format", o.logFormat, "json"},
		{"log.path", o.logFile, "/tmp/x.log"}, {"data_dir", o.dataDir, "/srv/tallyd"},
		{"limits.max_connections", o.maxConnections, 77}, {"limits.idle_timeout", o.idleTimeout, 9},
		{"slock.max_wills", o.slockMaxWills, 3}, {"aof.enable", o.appendOnly, false},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.key, c.got, c.want)
		}
	}
}

// An unknown key stops the start, naming the file, the line and the key (and the key meant,
// when one is close); yrmcds.conf's own settings are only logged.
func TestUnknownConfigKeyIsAnError(t *testing.T) {
	_, _, _, err := loadConf(t, "# comment\nbind = 127.0.0.1\n\nslock.prot = 5658\n")
	if err == nil || !strings.Contains(err.Error(), `tallyd.conf:4: unknown key "slock.prot" (did you mean slock.port?)`) {
		t.Fatalf("typo: %v", err)
	}
	_, _, _, err = loadConf(t, "frobnicate = yes\n")
	if err == nil || !strings.Contains(err.Error(), `tallyd.conf:1: unknown key "frobnicate"`) || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("unknown key: %v", err)
	}
	_, _, log, err := loadConf(t, "memory_limit = 1G\nworkers = 8\n")
	if err != nil || !strings.Contains(log, `"key":"memory_limit"`) || !strings.Contains(log, `"key":"workers"`) {
		t.Fatalf("yrmcds keys: %v; logged %s", err, log)
	}
	for text, want := range map[string]string{
		"pool.port = 70000\n":          `pool.port: "70000" is not a whole number from 0 to 65535`,
		"log.path\n":                   "expected `key = value`",
		"aof.enable = maybe\n":         `aof.enable: "maybe" is not a boolean`,
		"limits.max_body = -1\n":       `limits.max_body: "-1" is not a whole number`,
		"aof.lock_persist_after = 5\n": `aof.lock_persist_after "5": want a duration`,
	} {
		if _, _, _, err := loadConf(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// Through run: an unknown key exits 1 before anything listens, with the line in the message.
func TestUnknownConfigKeyStopsRun(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "typo.conf")
	if err := os.WriteFile(conf, []byte("counter.port = 0\nlog.levle = debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run([]string{"--config", conf, "--appendonly=false"}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), `typo.conf:2: unknown key "log.levle" (did you mean log.level?)`) {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

// A log level or format from the file is checked like the flag's, before anything listens,
// and reported at its line (issue 31, item 5).
func TestBadLogSettingInConfigStopsRun(t *testing.T) {
	for text, want := range map[string]string{"log.level = loud\n": `log.conf:3: log.level = "loud" (--log-level): want debug`,
		"log.format = xml\n": `log.conf:3: log.format = "xml" (--log-format): want console or json`} {
		conf := filepath.Join(t.TempDir(), "log.conf")
		if err := os.WriteFile(conf, []byte("counter.port = 0\nslock.port = 0\n"+text), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		if code := run([]string{"--config", conf, "--appendonly=false"}, &stderr); code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("%q: exit %d: %s", text, code, stderr.String())
		}
	}
}

// A value whose opening quote is not closed is refused, naming the file, line and key, and
// not taken as is with its quote (requirepass = "abc set the password `"abc`; issue 31,
// item 5); a quoted value keeps its spaces.
func TestConfigUnclosedQuoteRefused(t *testing.T) {
	for _, text := range []string{"requirepass = \"abc\n", "# x\nrequirepass = \"\n"} {
		_, _, _, err := loadConf(t, text)
		if err == nil || !strings.Contains(err.Error(), "tallyd.conf:") || !strings.Contains(err.Error(), ": requirepass: the value's opening quote") ||
			strings.Contains(err.Error(), "abc") {
			t.Errorf("%q: %v", text, err)
		}
	}
	o, _, _, err := loadConf(t, "requirepass = \"a b\"\n")
	if err != nil || o.security.requirePass != "a b" {
		t.Errorf("quoted value: %q, %v", o.security.requirePass, err)
	}
}

// A bad value in the config file is reported with the file, line and key it came from, not
// as the flag it sets (issue 31, item 5); the same value on the command line is still
// reported as the flag.
func TestConfigBadValueNamesFileLineKey(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "tallyd.conf")
	for _, c := range []struct{ line, want string }{
		{"max_memory = 12x", `tallyd.conf:2: max_memory = "12x" (--max-memory): is not a size`},
		{"protected_mode = maybe", `tallyd.conf:2: protected_mode = "maybe" (--protected-mode): yes or no`},
		{"limits.max_output = 10", `tallyd.conf:2: limits.max_output = "10" (--max-output): 10 is too small`},
		{"log.level = loud", `tallyd.conf:2: log.level = "loud" (--log-level): want debug`},
	} {
		if err := os.WriteFile(conf, []byte("# tallyd\n"+c.line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		if code := run([]string{"--config", conf}, &stderr); code == 0 || !strings.Contains(stderr.String(), conf+":2: ") ||
			!strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, %q; want %q", c.line, code, stderr.String(), c.want)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--max-memory", "12x"}, &stderr); code == 0 || !strings.Contains(stderr.String(), "tallyd: --max-memory") {
		t.Errorf("flag: exit %d, %q", code, stderr.String())
	}
}
