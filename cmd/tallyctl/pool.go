package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/proto/pool"
)

func init() {
	acquire := func(name string, forAny bool) *command {
		help := `Asks for a slot of KEY: at most WORKERS holders, at most MAXQUEUE holders and waiters
together, waiting up to TIMEOUT seconds (0: answer at once). Prints the server's reply:
LOCKED (exit 0), or TIMEOUT, QUEUE_FULL, LOCK_HELD, ERROR ... (exit 2).
A slot is released when its connection closes, so without --hold it is released as soon
as tallyctl exits. With --hold, tallyctl keeps it for that long (Ctrl-C ends the hold
early), then sends RELEASE and prints RELEASED.`
		if forAny {
			help += `
ACQ4ANY waiters are woken with DONE when a holder releases (its work can be shared):
DONE is a success (exit 0) that holds nothing.`
		}
		return &command{group: "pool", name: name, args: "KEY WORKERS MAXQUEUE TIMEOUT", nargs: [2]int{4, 4},
			summary: strings.ToUpper(name) + ": take a slot of KEY, waiting up to TIMEOUT seconds", help: help,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				hold := fs.Duration("hold", 0, "keep the slot for this long (e.g. 10s), then RELEASE it; Ctrl-C releases early")
				return func(a *app, args []string) error { return a.poolAcquire(forAny, args, *hold) }
			}}
	}
	register(
		acquire("acq4me", false),
		acquire("acq4any", true),
		&command{group: "pool", name: "stats", args: "[full|uptime|COUNTER]", nargs: [2]int{0, 1},
			summary: "STATS: every statistic (full, the default), the uptime, or one counter",
			help: `COUNTER is one of total_acquired, total_releases, hashtable_entries, processing_workers,
waiting_workers, connect_errors, failed_sends, full_queues, lock_mismatch,
lock_while_waiting, release_mismatch, processed_count. Lines are printed as the server
sends them; ERROR WRONG_STAT is a refusal (exit 2).`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error {
					arg := "FULL"
					if len(args) == 1 {
						arg = args[0]
					}
					return a.poolStats(arg)
				}
			}},
	)
}

// removed names commands that are gone, with what to do instead.
var removed = map[string]string{
	"pool release": `A PoolCounter slot belongs to the connection that took it, and a RELEASE on a new
connection holds nothing to give back (it always answered NOT_LOCKED). To release a slot
held by 'tallyctl pool acq4me --hold', end that session: Ctrl-C, or kill its pid (SIGINT or SIGTERM).`,
}

// poolConn is a client connection to the PoolCounter port.
type poolConn struct{ *conn }

func (a *app) dialPool() (*poolConn, error) {
	c, err := a.dial("pool", a.poolPort)
	if err != nil {
		return nil, err
	}
	return &poolConn{c}, nil
}

// line reads one reply line, waiting up to the timeout plus wait.
func (p *poolConn) line(wait time.Duration) (string, error) {
	var l []byte
	err := p.recv(wait, func(b []byte) (int, error) {
		var n int
		l, n = pool.ParseReplyLine(b)
		if n == 0 && len(b) > maxReply {
			return 0, fmt.Errorf("a reply line longer than %d bytes", maxReply)
		}
		return n, nil
	})
	return string(l), err
}

func checkPoolKey(key string) error {
	switch {
	case key == "":
		return &usageError{msg: "KEY is empty"}
	case strings.ContainsAny(key, " \n"):
		return &usageError{msg: fmt.Sprintf("KEY %q has a space or newline (PoolCounter clients encode a space as %%20)", key)}
	}
	return nil
}

func (a *app) poolAcquire(forAny bool, args []string, hold time.Duration) error {
	key := args[0]
	if err := checkPoolKey(key); err != nil {
		return err
	}
	var nums [3]uint32
	for i, what := range []string{"WORKERS", "MAXQUEUE", "TIMEOUT"} {
		v, err := parseUint32(what, args[i+1])
		if err != nil {
			return err
		}
		nums[i] = v
	}
	if hold < 0 {
		return &usageError{msg: fmt.Sprintf("--hold %v is negative", hold)}
	}
	p, err := a.dialPool()
	if err != nil {
		return err
	}
	defer p.Close()
	cmd := "ACQ4ME"
	req := pool.AppendAcq4Me(nil, []byte(key), nums[0], nums[1], nums[2])
	if forAny {
		cmd = "ACQ4ANY"
		req = pool.AppendAcq4Any(nil, []byte(key), nums[0], nums[1], nums[2])
	}
	if err := p.send(req); err != nil {
		return err
	}
	start := time.Now()
	reply, err := p.line(time.Duration(nums[2]) * time.Second)
	if err != nil {
		return err
	}
	waited := time.Since(start)
	what := strings.ToLower(cmd) + " " + key
	fields := map[string]any{"key": key, "reply": reply, "waited_seconds": waited.Seconds()}
	switch reply {
	case "LOCKED", "DONE":
	default:
		return refuse(fields, "%s: %s", what, reply)
	}
	if !a.json {
		fmt.Fprintln(a.stdout, reply)
	}
	if reply == "DONE" || hold == 0 {
		if a.json {
			fields["ok"] = true
			a.emitJSON(fields)
		}
		return nil
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "holding for %v (Ctrl-C releases now)\n", hold)
	}
	hstart := time.Now()
	interrupted, err := p.hold(a, hold, nil)
	if err != nil {
		return err
	}
	held := time.Since(hstart).Round(time.Millisecond)
	if err := p.send(pool.AppendRelease(nil)); err != nil {
		return err
	}
	rel, err := p.line(0)
	if err != nil {
		return err
	}
	fields["release"], fields["held_seconds"], fields["interrupted"] = rel, held.Seconds(), interrupted
	if rel != "RELEASED" {
		return refuse(fields, "release %s after holding: %s", key, rel)
	}
	if a.json {
		fields["ok"] = true
		a.emitJSON(fields)
	} else {
		how := ""
		if interrupted {
			how = ", interrupted"
		}
		fmt.Fprintf(a.stdout, "RELEASED after %v%s\n", held, how)
	}
	return nil
}

// poolStat is one "name: value" line of a STATS reply.
type poolStat struct{ name, value string }

// stats sends STATS arg and reads its lines: several ending with an empty
// one for FULL and KEYS (tallyd's list of the busiest keys), else one.
func (p *poolConn) stats(arg string) ([]poolStat, error) {
	if err := p.send(pool.AppendStats(nil, arg)); err != nil {
		return nil, err
	}
	full := strings.EqualFold(arg, "FULL") || strings.EqualFold(arg, "KEYS") // several lines, then an empty one
	var out []poolStat
	for {
		l, err := p.line(0)
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(l, "ERROR") {
			return nil, refuse(map[string]any{"reply": l}, "stats %s: %s", arg, l)
		}
		if full && l == "" {
			return out, nil
		}
		name, value, ok := strings.Cut(l, ": ")
		if !ok {
			return nil, fmt.Errorf("%s: STATS reply line %q is not \"name: value\"", p.what, l)
		}
		out = append(out, poolStat{name, value})
		if !full {
			return out, nil
		}
	}
}

func (a *app) poolStats(arg string) error {
	if strings.Contains(arg, "\n") {
		return &usageError{msg: fmt.Sprintf("STATS argument %q has a newline", arg)}
	}
	p, err := a.dialPool()
	if err != nil {
		return err
	}
	defer p.Close()
	st, err := p.stats(arg)
	if err != nil {
		return err
	}
	if a.json {
		m := map[string]any{"ok": true}
		for _, s := range st {
			if v, err := strconv.ParseInt(s.value, 10, 64); err == nil {
				m[s.name] = v
			} else {
				m[s.name] = s.value
			}
		}
		a.emitJSON(m)
		return nil
	}
	for _, s := range st {
		fmt.Fprintf(a.stdout, "%s: %s\n", s.name, s.value)
	}
	return nil
}
