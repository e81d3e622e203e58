// Command tallyctl is a command-line client for people and scripts that speaks every protocol tallyd serves, with a live `top` view.
//
//	tallyctl [global flags] GROUP COMMAND [ARGS] [flags]
//	tallyctl [global flags] get|set|incr|... KEY [ARGS]
//	tallyctl [global flags] top
//
// Exit status: 0 when the command succeeded, 2 when the server refused it
// (a status, an error reply, TIMEOUT, ...), 1 for a local error (usage,
// bad argument, unreachable server, broken reply).
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	buildversion "github.com/tallyd/tallyd/internal/version"
)

var version = buildversion.String()

// Defaults: tallyd's own (see docs/operations.md), the semaphore variant's port being
// the one `semaphore.enable = true` gives it.
const (
	defaultHost          = "127.0.0.1"
	defaultCounterPort   = 11215
	defaultSemaphorePort = 11216
	defaultPoolPort      = 7531
	defaultSlockPort     = 5658
	defaultTimeout       = 5 * time.Second
)

// Exit statuses.
const (
	exitOK      = 0
	exitLocal   = 1
	exitRefused = 2
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--man" { // hidden: the page `make install` installs
		if err := writeMan(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "tallyctl:", err)
			os.Exit(exitLocal)
		}
		os.Exit(exitOK)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// app is one invocation: the global flags and where output goes.
type app struct {
	host          string
	counterPort   int
	semaphorePort int
	poolPort      int
	slockPort     int
	timeout       time.Duration
	json          bool
	showVersion   bool
	consistency   string // CONSISTENCY sent first on Redis-text connections (cluster mode)
	user          string // AUTH user password, sent first on Redis-text connections
	password      string
	tls           bool // every connection over TLS
	cacert        string
	cert, key     string
	tlsConf       *tls.Config // made from the above once
	tlsErr        error

	stdout, stderr io.Writer

	// getenv reads the endpoint variables (nil: os.Getenv). Documentation generated from
	// the flags, which must not depend on the environment it is built in, passes one that
	// returns "".
	getenv func(string) string
	// envErr is the first endpoint variable of the environment that is not valid.
	envErr error

	// interrupt delivers SIGINT and SIGTERM while a command holds something.
	interrupt func() (<-chan os.Signal, func())
}

// refusal is the server saying no: exit status 2. msg starts with the
// command's name and arguments ("acquire printer 2: ..."); fields go into
// --json output.
type refusal struct {
	msg     string
	fields  map[string]any
	printed bool // the command printed it already (text output: raw's error reply, health's reason): only the exit status
}

func (r *refusal) Error() string { return r.msg }

func refuse(fields map[string]any, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), fields: fields}
}

// usageError is a command line that cannot run: exit status 1, with a hint.
type usageError struct {
	msg  string
	help string // the command whose --help to suggest
}

func (e *usageError) Error() string { return e.msg }

// command is one subcommand: "counter acquire", "get", "top", ...
type command struct {
	group, name string
	args        string // synopsis of the positional arguments
	summary     string // one line for the command lists
	help        string // paragraphs for the command's --help
	nargs       [2]int // at least, at most (-1: any number)

	// setup registers the command's flags on fs and returns what runs it.
	setup func(fs *pflag.FlagSet) func(a *app, args []string) error
}

func (c *command) path() string {
	if c.group == "" {
		return c.name
	}
	return c.group + " " + c.name
}

var groups = []struct{ name, summary string }{
	{"counter", "yrmcds counters (port 11215): get, acquire, release, stats, dump, noop"},
	{"semaphore", "yrmcds semaphores (port 11216): get, acquire, release, stats, noop"},
	{"pool", "PoolCounter (port 7531): acq4me, acq4any, stats"},
	{"slock", "slock locks (port 5658): lock, unlock, state, info, list, locked, waits, ping"},
	{"cluster", "a tallyd cluster (through any member's slock port): status, add, remove"},
	{"snapshot", "backups of the store (through the slock port; a cluster's leader): save, status"},
}

// commands is every command, in the order --help lists them.
var commands []*command

func init() {
	register(&command{name: "version", nargs: [2]int{0, 0},
		summary: "print tallyctl's version (the same number tallyd --version prints)",
		help:    "Prints \"tallyctl VERSION\", as --version does. A build sets VERSION with make VERSION=...\n(-ldflags -X github.com/tallyd/tallyd/internal/version.Tag=...); go install ...@vX.Y.Z stamps it.",
		setup: func(fs *pflag.FlagSet) func(*app, []string) error {
			return func(a *app, _ []string) error {
				if a.json {
					a.emitJSON(map[string]any{"ok": true, "version": version})
					return nil
				}
				_, err := fmt.Fprintln(a.stdout, "tallyctl", version)
				return err
			}
		}})
}

func register(cs ...*command) { commands = append(commands, cs...) }

func find(group, name string) *command {
	for _, c := range commands {
		if c.group == group && c.name == name {
			return c
		}
	}
	return nil
}

func isGroup(name string) bool {
	for _, g := range groups {
		if g.name == name {
			return true
		}
	}
	return false
}

// The environment variables that give the endpoints when their flags do not.
const (
	envHost          = "TALLYD_HOST"
	envCounterPort   = "TALLYD_COUNTER_PORT"
	envSemaphorePort = "TALLYD_SEMAPHORE_PORT"
	envPoolPort      = "TALLYD_POOL_PORT"
	envSlockPort     = "TALLYD_SLOCK_PORT"
	envUser          = "TALLYD_USER"
	envPassword      = "TALLYD_PASSWORD"
)

// passwordWarning is redis-cli's warning about a password on the command line (ps shows
// it to every user of the host), with tallyctl's flag and variable.
const passwordWarning = "Warning: Using a password with '--password' option on the command line interface may not be safe. Set " + envPassword + " instead.\n"

// env returns the environment variable name, "" when unset.
func (a *app) env(name string) string {
	if a.getenv != nil {
		return a.getenv(name)
	}
	return os.Getenv(name)
}

// envPort returns the port the environment variable name gives, or def when it is unset
// or empty; a value that is not a port is recorded in a.envErr.
func (a *app) envPort(name string, def int) int {
	v := a.env(name)
	if v == "" {
		return def
	}
	p, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || p < 1 || p > 65535 {
		if a.envErr == nil {
			a.envErr = fmt.Errorf("environment variable %s=%q is not a port from 1 to 65535", name, v)
		}
		return def
	}
	return p
}

// globalFlags are valid before the command and after it. The endpoints' defaults come
// from the environment (TALLYD_HOST, TALLYD_COUNTER_PORT, ...) when it sets them.
func (a *app) globalFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("tallyctl", pflag.ContinueOnError)
	fs.SortFlags = false
	host := defaultHost
	if v := strings.TrimSpace(a.env(envHost)); v != "" {
		host = v
	}
	fs.StringVarP(&a.host, "host", "s", host, "tallyd's host name or IP address ($"+envHost+")")
	fs.IntVar(&a.counterPort, "counter-port", a.envPort(envCounterPort, defaultCounterPort), "yrmcds counter port ($"+envCounterPort+")")
	fs.IntVar(&a.semaphorePort, "semaphore-port", a.envPort(envSemaphorePort, defaultSemaphorePort), "yrmcds semaphore port ($"+envSemaphorePort+")")
	fs.IntVar(&a.poolPort, "pool-port", a.envPort(envPoolPort, defaultPoolPort), "PoolCounter port ($"+envPoolPort+")")
	fs.IntVar(&a.slockPort, "slock-port", a.envPort(envSlockPort, defaultSlockPort), "slock port: binary frames and Redis text, locks and durable values ($"+envSlockPort+")")
	fs.DurationVar(&a.timeout, "timeout", defaultTimeout, "how long to wait to connect and for each reply (on top of any wait the request asks for)")
	fs.BoolVar(&a.json, "json", false, "print one JSON object (an array for listings) instead of text")
	fs.StringVar(&a.consistency, "consistency", "", "consistency level of durable-value commands against a cluster: ONE, QUORUM (the server's default) or ALL")
	fs.StringVar(&a.user, "user", "", "log in as this ACL user on Redis-text connections (AUTH USER PASSWORD; $"+envUser+")")
	fs.StringVar(&a.password, "password", "", "log in with this password on Redis-text connections (--requirepass, or --user's; $"+envPassword+", which is safer: ps shows the command line)")
	fs.BoolVar(&a.tls, "tls", false, "connect over TLS (the ports are then tallyd's --*-tls-port ones)")
	fs.StringVar(&a.cacert, "cacert", "", "CA certificate `FILE` (PEM) to verify the server's certificate with (default: the system's)")
	fs.StringVar(&a.cert, "cert", "", "client certificate `FILE` (PEM) for a server that asks for one (--tls-ca-cert-file)")
	fs.StringVar(&a.key, "key", "", "the client certificate's private key `FILE` (PEM)")
	return fs
}

// run is main without the exit, for tests: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, interrupt: notifyInterrupt}
	global := a.globalFlags()
	global.BoolVar(&a.showVersion, "version", false, "print tallyctl's version")
	global.SetInterspersed(false)
	global.SetOutput(io.Discard)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			a.usage(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "tallyctl: %v\nRun 'tallyctl --help' for usage.\n", err)
		return exitLocal
	}
	if a.showVersion {
		fmt.Fprintln(stdout, "tallyctl", version)
		return exitOK
	}
	if a.envErr != nil {
		fmt.Fprintf(stderr, "tallyctl: %v\n", a.envErr)
		return exitLocal
	}
	rest := global.Args()
	if len(rest) == 0 {
		a.usage(stderr)
		return exitLocal
	}
	if rest[0] == "help" {
		return a.helpFor(rest[1:])
	}
	var c *command
	switch {
	case isGroup(rest[0]):
		group := rest[0]
		if len(rest) == 1 || rest[1] == "-h" || rest[1] == "--help" || rest[1] == "help" {
			w, code := stdout, exitOK
			if len(rest) == 1 {
				w, code = stderr, exitLocal
			}
			a.groupUsage(w, group)
			return code
		}
		if c = find(group, rest[1]); c == nil {
			fmt.Fprintf(stderr, "tallyctl: %s has no command %q\n", group, rest[1])
			if why, ok := removed[group+" "+rest[1]]; ok {
				fmt.Fprintf(stderr, "%s\n", why)
			}
			fmt.Fprintf(stderr, "Run 'tallyctl %s --help' for its commands.\n", group)
			return exitLocal
		}
		rest = rest[2:]
	default:
		if c = find("", rest[0]); c == nil {
			fmt.Fprintf(stderr, "tallyctl: unknown command %q\nRun 'tallyctl --help' for usage.\n", rest[0])
			return exitLocal
		}
		rest = rest[1:]
	}

	fs := pflag.NewFlagSet("tallyctl "+c.path(), pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetOutput(io.Discard)
	runFn := c.setup(fs)
	own := pflag.NewFlagSet("", pflag.ContinueOnError)
	own.SortFlags = false
	fs.VisitAll(own.AddFlag)
	fs.AddFlagSet(global) // a command's own flag of the same name wins (slock lock --timeout)
	fs.Usage = func() {}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			a.commandUsage(stdout, c, own)
			return exitOK
		}
		fmt.Fprintf(stderr, "tallyctl %s: %v\nRun 'tallyctl %s --help' for usage.\n", c.path(), err, c.path())
		return exitLocal
	}
	a.credentials(global, stderr)
	pos := fs.Args()
	if len(pos) < c.nargs[0] || c.nargs[1] >= 0 && len(pos) > c.nargs[1] {
		want := fmt.Sprintf("%d", c.nargs[0])
		switch {
		case c.nargs[1] < 0:
			want = fmt.Sprintf("at least %d", c.nargs[0])
		case c.nargs[1] != c.nargs[0]:
			want = fmt.Sprintf("%d to %d", c.nargs[0], c.nargs[1])
		}
		noun := "arguments"
		if c.nargs[0] == 1 && c.nargs[1] == 1 {
			noun = "argument"
		}
		msg := fmt.Sprintf("want %s %s (%s), got %d", want, noun, c.args, len(pos))
		if c.nargs[1] == 0 {
			msg = fmt.Sprintf("takes no arguments, got %q", strings.Join(pos, " "))
		}
		fmt.Fprintf(stderr, "tallyctl %s: %s\nRun 'tallyctl %s --help' for usage.\n", c.path(), msg, c.path())
		return exitLocal
	}
	err := runFn(a, pos)
	return a.finish(c, err)
}

// credentials takes the user and password from the environment when no flag gives them,
// and warns about a password given on the command line, as redis-cli does.
func (a *app) credentials(global *pflag.FlagSet, stderr io.Writer) {
	if f := global.Lookup("password"); f != nil && f.Changed {
		fmt.Fprint(stderr, passwordWarning)
	} else {
		a.password = a.env(envPassword)
	}
	if f := global.Lookup("user"); f == nil || !f.Changed {
		a.user = strings.TrimSpace(a.env(envUser))
	}
}

// authHint is what a refusal for want of logging in adds.
const authHint = "(the server wants a login: give --user and TALLYD_PASSWORD, or --password)"

// finish reports err and turns it into the exit status.
func (a *app) finish(c *command, err error) int {
	if err == nil {
		return exitOK
	}
	var ae *authError
	if errors.As(err, &ae) {
		if a.json {
			a.emitJSON(map[string]any{"ok": false, "error": ae.msg, "auth_failed": true})
		} else {
			fmt.Fprintf(a.stderr, "tallyctl %s: %s\n", c.path(), ae.msg)
		}
		return exitRefused
	}
	var r *refusal
	if errors.As(err, &r) {
		if a.json {
			fields := map[string]any{"ok": false, "error": r.msg}
			for k, v := range r.fields {
				fields[k] = v
			}
			a.emitJSON(fields)
		} else if !r.printed {
			prefix := "tallyctl "
			if c.group != "" {
				prefix += c.group + " "
			}
			fmt.Fprintf(a.stderr, "%s%s\n", prefix, r.msg)
			if rep, _ := r.fields["reply"].(string); strings.HasPrefix(rep, "NOAUTH") {
				fmt.Fprintln(a.stderr, authHint)
			}
		}
		return exitRefused
	}
	var u *usageError
	if errors.As(err, &u) {
		fmt.Fprintf(a.stderr, "tallyctl %s: %s\nRun 'tallyctl %s --help' for usage.\n", c.path(), u.msg, c.path())
		return exitLocal
	}
	fmt.Fprintf(a.stderr, "tallyctl %s: %v\n", c.path(), err)
	return exitLocal
}

func (a *app) helpFor(words []string) int {
	switch {
	case len(words) == 0:
		a.usage(a.stdout)
	case isGroup(words[0]) && len(words) == 1:
		a.groupUsage(a.stdout, words[0])
	default:
		var c *command
		if isGroup(words[0]) {
			c = find(words[0], words[1])
		} else {
			c = find("", words[0])
		}
		if c == nil {
			fmt.Fprintf(a.stderr, "tallyctl: no command %q\n", strings.Join(words, " "))
			return exitLocal
		}
		own := pflag.NewFlagSet(c.path(), pflag.ContinueOnError)
		own.SortFlags = false
		c.setup(own)
		a.commandUsage(a.stdout, c, own)
	}
	return exitOK
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintf(w, `tallyctl %s — a client for tallyd: every command of every protocol it serves.

Usage:
  tallyctl [global flags] GROUP COMMAND [ARGS] [flags]
  tallyctl [global flags] COMMAND [ARGS] [flags]

Groups (tallyctl GROUP --help lists their commands):
`, version)
	for _, g := range groups {
		fmt.Fprintf(w, "  %-10s %s\n", g.name, g.summary)
	}
	fmt.Fprintf(w, "\nDurable values (Redis commands on the slock port) and the rest:\n")
	for _, c := range commands {
		if c.group == "" {
			fmt.Fprintf(w, "  %-28s %s\n", c.name+" "+c.args, c.summary)
		}
	}
	fmt.Fprintf(w, `
Global flags (before or after the command):
%s
The endpoints come from the environment when no flag gives them (a flag wins):
%s (default %s), %s (%d), %s (%d),
%s (%d) and %s (%d); the login from %s and %s.

Exit status: 0 ok, 2 refused by the server (an error status or reply, TIMEOUT, a missing
key, ...), 1 a local error (usage, bad argument, server unreachable, broken reply).
Run 'tallyctl GROUP COMMAND --help' for a command's arguments and flags.
`, (&app{}).globalFlags().FlagUsages(), envHost, defaultHost, envCounterPort, defaultCounterPort,
		envSemaphorePort, defaultSemaphorePort, envPoolPort, defaultPoolPort, envSlockPort, defaultSlockPort, envUser, envPassword)
}

func (a *app) groupUsage(w io.Writer, group string) {
	for _, g := range groups {
		if g.name == group {
			fmt.Fprintf(w, "tallyctl %s — %s\n\nCommands:\n", group, g.summary)
		}
	}
	for _, c := range commands {
		if c.group == group {
			fmt.Fprintf(w, "  %-36s %s\n", c.name+" "+c.args, c.summary)
		}
	}
	fmt.Fprintf(w, "\nRun 'tallyctl %s COMMAND --help' for a command's flags; 'tallyctl --help' for the global flags.\n", group)
}

// commandUsage prints c's --help: own holds only the command's own flags.
func (a *app) commandUsage(w io.Writer, c *command, own *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s\n", strings.TrimSpace("tallyctl "+c.path()+" "+c.args), c.summary)
	if c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(c.help, "\n"))
	}
	if own.HasFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", own.FlagUsages())
	}
	gl := pflag.NewFlagSet("", pflag.ContinueOnError)
	gl.SortFlags = false
	(&app{}).globalFlags().VisitAll(func(f *pflag.Flag) {
		if own.Lookup(f.Name) == nil {
			gl.AddFlag(f)
		}
	})
	fmt.Fprintf(w, "\nGlobal flags:\n%s", gl.FlagUsages())
	fmt.Fprintf(w, "\nExit status: 0 ok, 2 refused by the server, 1 local error.\n")
}

// notifyInterrupt catches SIGINT and SIGTERM until stop is called.
func notifyInterrupt() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}
