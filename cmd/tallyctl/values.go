package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/proto/resp"
)

// respConn is a client connection speaking Redis text on the slock port.
type respConn struct{ *conn }

func (a *app) dialRESP() (*respConn, error) {
	c, err := a.dial("slock", a.slockPort)
	if err != nil {
		return nil, err
	}
	r := &respConn{c}
	if a.user != "" || a.password != "" {
		args := []string{"AUTH", a.password}
		if a.user != "" {
			args = []string{"AUTH", a.user, a.password}
		}
		rep, err := r.do(args...)
		if err == nil && rep.Kind == '-' {
			err = &authError{msg: fmt.Sprintf("%s: AUTH: %s", c.what, rep.Str)}
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	if a.consistency != "" {
		rep, err := r.do("CONSISTENCY", a.consistency)
		if err != nil {
			c.Close()
			return nil, err
		}
		if rep.Kind == '-' {
			c.Close()
			return nil, &usageError{msg: fmt.Sprintf("--consistency %s: %s", a.consistency, rep.Str)}
		}
	}
	return r, nil
}

// do sends one command and returns its reply, copied out of the buffer.
func (r *respConn) do(args ...string) (resp.Reply, error) {
	if err := r.send(resp.AppendCommand(nil, args...)); err != nil {
		return resp.Reply{}, err
	}
	var rep resp.Reply
	err := r.recv(0, func(b []byte) (int, error) {
		var n int
		var err error
		rep, n, err = resp.ParseReply(b)
		return n, err
	})
	if err != nil {
		return resp.Reply{}, err
	}
	return cloneReply(rep), nil
}

func cloneReply(r resp.Reply) resp.Reply {
	r.Str = append([]byte(nil), r.Str...)
	for i := range r.Elems {
		r.Elems[i] = cloneReply(r.Elems[i])
	}
	return r
}

// replyValue is a reply as a JSON value: a number, a string, null or an array.
func replyValue(r resp.Reply) any {
	switch {
	case r.Null:
		return nil
	case r.Kind == ':':
		return r.Int
	case r.Kind == '*':
		out := make([]any, len(r.Elems))
		for i, e := range r.Elems {
			out[i] = replyValue(e)
		}
		return out
	}
	return string(r.Str)
}

// replyText renders a reply the way redis-cli does for a terminal.
func replyText(r resp.Reply, indent string) string {
	switch {
	case r.Kind == '*' && r.Null:
		return "(nil)"
	case r.Null:
		return "(nil)"
	case r.Kind == ':':
		return "(integer) " + strconv.FormatInt(r.Int, 10)
	case r.Kind == '+':
		return string(r.Str)
	case r.Kind == '-':
		return "(error) " + string(r.Str)
	case r.Kind == '$':
		return strconv.Quote(string(r.Str))
	}
	if len(r.Elems) == 0 {
		return "(empty array)"
	}
	var b strings.Builder
	w := len(strconv.Itoa(len(r.Elems)))
	for i, e := range r.Elems {
		if i > 0 {
			b.WriteString("\n" + indent)
		}
		prefix := fmt.Sprintf("%*d) ", w, i+1)
		b.WriteString(prefix + replyText(e, indent+strings.Repeat(" ", len(prefix))))
	}
	return b.String()
}

// valueCmd is a durable-value command: the Redis command it sends for the
// arguments and how it prints the reply.
type valueCmd struct {
	name, args, summary, help string
	nargs                     [2]int
	build                     func(args []string) ([]string, error)
	// raw prints a bulk string's bytes and an integer's digits alone (for
	// $(...) in scripts) instead of redis-cli's rendering.
	raw bool
	// nilRefused, when not empty, makes a null reply a refusal saying this
	// (GET of a missing key, SET NX of an existing one).
	nilRefused string
	// cliRaw and cliTTY, for the raw command, are its --raw and --no-raw: redis-cli's
	// rendering for a pipe or for a terminal, whatever stdout is (redisfmt.go).
	cliRaw, cliTTY *bool
}

func init() {
	fixed := func(cmd string) func([]string) ([]string, error) {
		return func(args []string) ([]string, error) { return append([]string{cmd}, args...), nil }
	}
	byN := func(one, many string) func([]string) ([]string, error) {
		return func(args []string) ([]string, error) {
			if len(args) == 1 {
				return []string{one, args[0]}, nil
			}
			if _, err := strconv.ParseInt(args[1], 10, 64); err != nil {
				return nil, &usageError{msg: fmt.Sprintf("N %q is not a whole number", args[1])}
			}
			return []string{many, args[0], args[1]}, nil
		}
	}
	cmds := []valueCmd{
		{name: "get", args: "KEY", nargs: [2]int{1, 1}, raw: true, nilRefused: "no such key", build: fixed("GET"),
			summary: "print the value of KEY",
			help:    "Prints the value alone (a number as digits). A missing key prints nothing and exits 2."},
		{name: "set", args: "KEY VALUE", nargs: [2]int{2, 2}, build: nil,
			nilRefused: "not set (--nx: the key exists; --xx: it does not)",
			summary:    "set KEY to VALUE (--ex seconds to expire)",
			help:       "Prints OK. With --nx or --xx, a key that was not set is a refusal (exit 2)."},
		{name: "incr", args: "KEY [N]", nargs: [2]int{1, 2}, raw: true, build: byN("INCR", "INCRBY"),
			summary: "add N (default 1) to KEY and print the new value",
			help:    "Sends INCR KEY, or INCRBY KEY N. A missing key counts from 0."},
		{name: "decr", args: "KEY [N]", nargs: [2]int{1, 2}, raw: true, build: byN("DECR", "DECRBY"),
			summary: "subtract N (default 1) from KEY and print the new value",
			help:    "Sends DECR KEY, or DECRBY KEY N. A missing key counts from 0."},
		{name: "del", args: "KEY...", nargs: [2]int{1, -1}, raw: true, build: fixed("DEL"),
			summary: "delete keys and print how many existed"},
		{name: "exists", args: "KEY...", nargs: [2]int{1, -1}, raw: true, build: fixed("EXISTS"),
			summary: "print how many of the keys exist"},
		{name: "ttl", args: "KEY", nargs: [2]int{1, 1}, raw: true, build: fixed("TTL"),
			summary: "print KEY's seconds to live (-1: no expiry, -2: no such key)"},
		{name: "expire", args: "KEY SECONDS", nargs: [2]int{2, 2}, raw: true, build: fixed("EXPIRE"),
			summary: "make KEY expire in SECONDS; prints 1, or 0 if there is no such key"},
		{name: "persist", args: "KEY", nargs: [2]int{1, 1}, raw: true, build: fixed("PERSIST"),
			summary: "remove KEY's expiry; prints 1, or 0 if it had none"},
		{name: "keys", args: "[PATTERN]", nargs: [2]int{0, 1}, raw: true,
			build: func(args []string) ([]string, error) {
				if len(args) == 0 {
					return []string{"KEYS", "*"}, nil
				}
				return []string{"KEYS", args[0]}, nil
			},
			summary: "list the keys matching PATTERN (default *), one a line"},
		{name: "raw", args: "COMMAND [ARG...]", nargs: [2]int{1, -1}, build: func(args []string) ([]string, error) { return args, nil },
			summary: "send any Redis-text command to the slock port and print the reply",
			help: `Prints the reply as redis-cli does: for a terminal (integer) 1, (nil), (error) ERR ...,
numbered array elements and quoted strings; for a pipe or file the bare values, one a
line (--raw and --no-raw choose, as redis-cli's do). INFO and the other reports print
their text as it is. An error reply exits 2. For example:
  tallyctl raw LOCK job TIMEOUT 0 EXPRIED 30
  tallyctl raw TIMEOUT GET`},
	}
	for i := range cmds {
		vc := cmds[i]
		help := vc.help
		if help != "" {
			help += "\n"
		}
		help += "Durable values live on the slock port and speak Redis text; an error reply (-ERR ...)\nexits 2."
		register(&command{name: vc.name, args: vc.args, nargs: vc.nargs, summary: vc.summary, help: help,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				if vc.name == "set" {
					ex := fs.Int64("ex", 0, "expire after this many seconds (SET ... EX)")
					nx := fs.Bool("nx", false, "only set a key that does not exist (SET ... NX)")
					xx := fs.Bool("xx", false, "only set a key that exists (SET ... XX)")
					vc.build = func(args []string) ([]string, error) {
						cmd := []string{"SET", args[0], args[1]}
						switch {
						case *ex < 0:
							return nil, &usageError{msg: fmt.Sprintf("--ex %d is negative", *ex)}
						case *ex > 0:
							cmd = append(cmd, "EX", strconv.FormatInt(*ex, 10))
						}
						if *nx && *xx {
							return nil, &usageError{msg: "--nx and --xx exclude each other"}
						}
						if *nx {
							cmd = append(cmd, "NX")
						}
						if *xx {
							cmd = append(cmd, "XX")
						}
						return cmd, nil
					}
				}
				if vc.name == "raw" {
					vc.cliRaw = fs.Bool("raw", false, "print bare values, as for a pipe (redis-cli --raw)")
					vc.cliTTY = fs.Bool("no-raw", false, "print as for a terminal, types marked and strings quoted (redis-cli --no-raw)")
				}
				return func(a *app, args []string) error { return a.value(&vc, args) }
			}})
	}
}

func (a *app) value(vc *valueCmd, args []string) error {
	cmd, err := vc.build(args)
	if err != nil {
		return err
	}
	r, err := a.dialRESP()
	if err != nil {
		return err
	}
	defer r.Close()
	rep, err := r.do(cmd...)
	if err != nil {
		return err
	}
	if vc.cliRaw != nil && !a.json {
		return a.printRedisCLI(vc, cmd, rep)
	}
	what := strings.Join(append([]string{vc.name}, args...), " ")
	switch {
	case rep.Kind == '-':
		return refuse(map[string]any{"reply": string(rep.Str)}, "%s: %s", what, rep.Str)
	case rep.Null && vc.nilRefused != "":
		return refuse(map[string]any{"reply": nil}, "%s: %s", what, vc.nilRefused)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "command": cmd, "reply": replyValue(rep)})
		return nil
	}
	switch {
	case !vc.raw:
		fmt.Fprintln(a.stdout, replyText(rep, ""))
	case rep.Kind == ':':
		fmt.Fprintln(a.stdout, rep.Int)
	case rep.Kind == '*':
		for _, e := range rep.Elems {
			if e.Kind == ':' {
				fmt.Fprintln(a.stdout, e.Int)
			} else {
				fmt.Fprintf(a.stdout, "%s\n", e.Str)
			}
		}
	case rep.Null:
		fmt.Fprintln(a.stdout, "(nil)")
	default:
		fmt.Fprintf(a.stdout, "%s\n", rep.Str)
	}
	return nil
}

// info runs INFO and returns its text with "\n" line ends.
func (r *respConn) info() (string, error) {
	rep, err := r.do("INFO")
	if err != nil {
		return "", err
	}
	if rep.Kind == '-' && isAuthReply(rep.Str) {
		return "", &authError{msg: fmt.Sprintf("%s: INFO: %s", r.what, rep.Str)}
	}
	if rep.Kind == '-' {
		return "", refuse(map[string]any{"reply": string(rep.Str)}, "info: %s", rep.Str)
	}
	if rep.Kind != '$' || rep.Null {
		return "", fmt.Errorf("%s: INFO reply of type %q, want a bulk string", r.what, rep.Kind)
	}
	return strings.ReplaceAll(string(rep.Str), "\r\n", "\n"), nil
}

// infoFields splits INFO text into its "name:value" pairs.
func infoFields(text string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}

func (a *app) slockInfo() error {
	r, err := a.dialRESP()
	if err != nil {
		return err
	}
	defer r.Close()
	text, err := r.info()
	if err != nil {
		return err
	}
	if a.json {
		m := map[string]any{"ok": true}
		for k, v := range infoFields(text) {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			} else {
				m[k] = v
			}
		}
		a.emitJSON(m)
		return nil
	}
	fmt.Fprint(a.stdout, strings.TrimRight(text, "\n")+"\n")
	return nil
}
