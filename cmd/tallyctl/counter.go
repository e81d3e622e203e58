package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/proto/counter"
)

// maxReply bounds a reply body: a Stats body is a few hundred bytes, a Dump
// entry at most 10 + 65535.
const maxReply = 1 << 20

// yrmcds is a client connection to the counter or semaphore port.
type yrmcds struct {
	*conn
	dialect counter.Dialect
	opaque  uint32
}

func (a *app) dialYrmcds(d counter.Dialect) (*yrmcds, error) {
	port := a.counterPort
	if d == counter.Semaphore {
		port = a.semaphorePort
	}
	c, err := a.dial(d.String(), port)
	if err != nil {
		return nil, err
	}
	return &yrmcds{conn: c, dialect: d}, nil
}

// do sends the request build makes with the next opaque and returns its reply.
func (y *yrmcds) do(build func(dst []byte, opaque uint32) []byte) (counter.Response, error) {
	y.opaque++
	if err := y.send(build(nil, y.opaque)); err != nil {
		return counter.Response{}, err
	}
	return y.reply()
}

// reply reads the next reply and checks that it answers the last request.
func (y *yrmcds) reply() (counter.Response, error) {
	var r counter.Response
	err := y.recv(0, func(b []byte) (int, error) { return counter.ParseResponse(b, maxReply, &r) })
	if err != nil {
		return r, err
	}
	if r.Opaque != y.opaque {
		return r, fmt.Errorf("%s: reply has opaque %d, want %d", y.what, r.Opaque, y.opaque)
	}
	return r, nil
}

// status turns an error status into a refusal naming the request.
func statusError(what string, r counter.Response) error {
	msg := string(r.Body)
	if msg == "" {
		msg = r.Status.String()
	}
	return refuse(map[string]any{"status": fmt.Sprintf("0x%02x", uint8(r.Status))},
		"%s: %s (status 0x%02x)", what, msg, uint8(r.Status))
}

// checkName applies the client-side checks libyrmcds makes.
func checkName(name string) error {
	if name == "" || len(name) > counter.MaxNameLen {
		return &usageError{msg: fmt.Sprintf("name must be 1 to %d bytes, not %d", counter.MaxNameLen, len(name))}
	}
	return nil
}

func init() {
	for _, d := range []counter.Dialect{counter.Counter, counter.Semaphore} {
		register(yrmcdsCommands(d)...)
	}
}

func yrmcdsCommands(d counter.Dialect) []*command {
	g := d.String()
	maxArg, maxWord := "MAX", "maximum"
	acquireHelp := `Acquires N resources of NAME if its consumption stays at most MAX afterwards (a new
counter starts at N). What a connection acquires is released when it closes, so without
--hold the resources are released as soon as tallyctl exits: the command then only shows
whether they were available. With --hold, tallyctl keeps them for that long (Ctrl-C ends
the hold early), then releases them with a Release request and reports it.`
	getSummary := "print the current consumption of NAME"
	if d == counter.Semaphore {
		maxArg, maxWord = "INITIAL", "initial value"
		acquireHelp = `Acquires N resources of the semaphore NAME, created with INITIAL resources if it does
not exist (its value becomes INITIAL - N), else taken from its value if N <= value.
What a connection acquires is released when it closes, so without --hold the resources
are released as soon as tallyctl exits. With --hold, tallyctl keeps them for that long
(Ctrl-C ends the hold early), then releases them with a Release request.`
		getSummary = "print the resources NAME has left"
	}
	cmds := []*command{
		{group: g, name: "get", args: "NAME", nargs: [2]int{1, 1}, summary: getSummary,
			help: "Prints the number alone. A name the server does not know is a refusal (exit 2).",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.yrmcdsGet(d, args[0]) }
			}},
		{group: g, name: "acquire", args: "NAME N " + maxArg, nargs: [2]int{3, 3},
			summary: "acquire N resources of NAME (" + maxWord + " " + maxArg + ")", help: acquireHelp,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				hold := fs.Duration("hold", 0, "keep the resources for this long (e.g. 10s, 5m), then release them; Ctrl-C releases early")
				return func(a *app, args []string) error { return a.yrmcdsAcquire(d, args, *hold) }
			}},
		{group: g, name: "release", args: "NAME N", nargs: [2]int{2, 2},
			summary: "release N resources of NAME held by this connection",
			help: `A connection can release only what it acquired itself, and tallyctl's connection is new:
the server answers "Not acquired" (or "Not found" for an unknown name), exit 2. Use
'acquire --hold' to hold and release; this command shows the server's answer.`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.yrmcdsRelease(d, args) }
			}},
		{group: g, name: "stats", args: "", nargs: [2]int{0, 0}, summary: "print the server's statistics, one 'name value' a line",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.yrmcdsStats(d) }
			}},
	}
	if d == counter.Counter {
		cmds = append(cmds, &command{group: g, name: "dump", args: "", nargs: [2]int{0, 0},
			summary: "list every counter: name, current consumption, peak in this interval",
			help: `PEAK is the highest consumption in the current stat interval (a day by default).
Counters at 0 are listed until the interval ends and garbage collection removes them.
--sort current|peak|name orders the list (default: as the server sends it).`,
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				by := fs.String("sort", "", "order by current, peak (both descending) or name")
				return func(a *app, args []string) error { return a.counterDump(*by) }
			}})
	}
	cmds = append(cmds, &command{group: g, name: "noop", args: "", nargs: [2]int{0, 0},
		summary: "send a Noop: checks that the server answers",
		setup: func(fs *pflag.FlagSet) func(*app, []string) error {
			return func(a *app, args []string) error { return a.yrmcdsNoop(d) }
		}})
	return cmds
}

func (a *app) yrmcdsGet(d counter.Dialect, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	y, err := a.dialYrmcds(d)
	if err != nil {
		return err
	}
	defer y.Close()
	r, err := y.do(func(dst []byte, op uint32) []byte { return counter.AppendGet(dst, op, []byte(name)) })
	if err != nil {
		return err
	}
	if r.Status != counter.StatusOK {
		return statusError("get "+show([]byte(name)), r)
	}
	if len(r.Body) != 4 {
		return fmt.Errorf("%s: Get reply body has %d bytes, want 4", y.what, len(r.Body))
	}
	v := binary.BigEndian.Uint32(r.Body)
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "name": name, "value": v})
	} else {
		fmt.Fprintln(a.stdout, v)
	}
	return nil
}

func (a *app) yrmcdsAcquire(d counter.Dialect, args []string, hold time.Duration) error {
	name := args[0]
	if err := checkName(name); err != nil {
		return err
	}
	n, err := parseUint32("N", args[1])
	if err != nil {
		return err
	}
	maxName := "MAX"
	if d == counter.Semaphore {
		maxName = "INITIAL"
	}
	limit, err := parseUint32(maxName, args[2])
	if err != nil {
		return err
	}
	switch {
	case n == 0:
		return &usageError{msg: "N must be at least 1"}
	case n > limit:
		return &usageError{msg: fmt.Sprintf("N %d is larger than %s %d", n, maxName, limit)}
	case hold < 0:
		return &usageError{msg: fmt.Sprintf("--hold %v is negative", hold)}
	}
	y, err := a.dialYrmcds(d)
	if err != nil {
		return err
	}
	defer y.Close()
	r, err := y.do(func(dst []byte, op uint32) []byte { return counter.AppendAcquire(dst, op, n, limit, []byte(name)) })
	if err != nil {
		return err
	}
	what := "acquire " + show([]byte(name)) + " " + args[1]
	if r.Status != counter.StatusOK {
		return statusError(what, r)
	}
	key := strings.ToLower(maxName)
	if !a.json {
		fmt.Fprintf(a.stdout, "acquired %d of %s (%s %d)\n", n, show([]byte(name)), key, limit)
	}
	if hold == 0 {
		if a.json {
			a.emitJSON(map[string]any{"ok": true, "name": name, "acquired": n, key: limit})
		}
		return nil
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "holding for %v (Ctrl-C releases now)\n", hold)
	}
	start := time.Now()
	interrupted, err := y.hold(a, hold, nil)
	if err != nil {
		return err
	}
	held := time.Since(start).Round(time.Millisecond)
	r, err = y.do(func(dst []byte, op uint32) []byte { return counter.AppendRelease(dst, op, n, []byte(name)) })
	if err != nil {
		return err
	}
	if r.Status != counter.StatusOK {
		return statusError("release "+show([]byte(name))+" "+args[1]+" after holding", r)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "name": name, "acquired": n, key: limit, "released": n,
			"held_seconds": held.Seconds(), "interrupted": interrupted})
	} else {
		how := ""
		if interrupted {
			how = ", interrupted"
		}
		fmt.Fprintf(a.stdout, "released %d of %s after %v%s\n", n, show([]byte(name)), held, how)
	}
	return nil
}

func (a *app) yrmcdsRelease(d counter.Dialect, args []string) error {
	name := args[0]
	if err := checkName(name); err != nil {
		return err
	}
	n, err := parseUint32("N", args[1])
	if err != nil {
		return err
	}
	y, err := a.dialYrmcds(d)
	if err != nil {
		return err
	}
	defer y.Close()
	r, err := y.do(func(dst []byte, op uint32) []byte { return counter.AppendRelease(dst, op, n, []byte(name)) })
	if err != nil {
		return err
	}
	if r.Status != counter.StatusOK {
		return statusError("release "+show([]byte(name))+" "+args[1], r)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "name": name, "released": n})
	} else {
		fmt.Fprintf(a.stdout, "released %d of %s\n", n, show([]byte(name)))
	}
	return nil
}

// stats fetches and parses a Stats reply.
func (y *yrmcds) stats() ([]counter.StatText, error) {
	r, err := y.do(func(dst []byte, op uint32) []byte { return counter.AppendRequest(dst, counter.OpStats, op, nil) })
	if err != nil {
		return nil, err
	}
	if r.Status != counter.StatusOK {
		return nil, statusError("stats", r)
	}
	st, err := counter.ParseStatsBody(r.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", y.what, err)
	}
	return st, nil
}

func (a *app) yrmcdsStats(d counter.Dialect) error {
	y, err := a.dialYrmcds(d)
	if err != nil {
		return err
	}
	defer y.Close()
	st, err := y.stats()
	if err != nil {
		return err
	}
	if a.json {
		m := map[string]any{"ok": true}
		for _, s := range st {
			if v, err := strconv.ParseInt(s.Value, 10, 64); err == nil {
				m[s.Name] = v
			} else {
				m[s.Name] = s.Value
			}
		}
		a.emitJSON(m)
		return nil
	}
	w := 0
	for _, s := range st {
		w = max(w, len(s.Name))
	}
	for _, s := range st {
		fmt.Fprintf(a.stdout, "%-*s  %s\n", w, s.Name, s.Value)
	}
	return nil
}

// dumpEntry is one counter of a Dump.
type dumpEntry struct {
	Name    string `json:"name"`
	Current uint32 `json:"current"`
	Peak    uint32 `json:"peak"`
	// Acquired is how many Acquires the counter has granted, when the server says
	// (tallyd's extended Dump; yrmcds does not): HasAcquired.
	Acquired    uint64 `json:"-"`
	HasAcquired bool   `json:"-"`
}

// dump fetches every counter; with acquired, asking for each one's granted Acquires
// (a server that does not count them answers plain entries).
func (y *yrmcds) dump(acquired bool) ([]dumpEntry, error) {
	y.opaque++
	var body []byte
	if acquired {
		body = []byte{counter.DumpAcquired}
	}
	if err := y.send(counter.AppendRequest(nil, counter.OpDump, y.opaque, body)); err != nil {
		return nil, err
	}
	var list []dumpEntry
	for {
		r, err := y.reply()
		if err != nil {
			return nil, err
		}
		if r.Status != counter.StatusOK {
			return nil, statusError("dump", r)
		}
		if len(r.Body) == 0 {
			return list, nil
		}
		cur, peak, name, ac, hasAc, err := counter.ParseDumpEntry(r.Body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", y.what, err)
		}
		list = append(list, dumpEntry{string(name), cur, peak, ac, hasAc})
	}
}

func sortDump(list []dumpEntry, by string) error {
	switch by {
	case "":
	case "current":
		sortStable(list, func(x, y dumpEntry) bool { return x.Current > y.Current || x.Current == y.Current && x.Name < y.Name })
	case "peak":
		sortStable(list, func(x, y dumpEntry) bool { return x.Peak > y.Peak || x.Peak == y.Peak && x.Name < y.Name })
	case "name":
		sortStable(list, func(x, y dumpEntry) bool { return x.Name < y.Name })
	default:
		return &usageError{msg: fmt.Sprintf("--sort %q: want current, peak or name", by)}
	}
	return nil
}

func (a *app) counterDump(by string) error {
	if err := sortDump(nil, by); err != nil {
		return err
	}
	y, err := a.dialYrmcds(counter.Counter)
	if err != nil {
		return err
	}
	defer y.Close()
	list, err := y.dump(false)
	if err != nil {
		return err
	}
	_ = sortDump(list, by)
	if a.json {
		if list == nil {
			list = []dumpEntry{}
		}
		a.emitJSON(list)
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(a.stdout, "no counters")
		return nil
	}
	rows := make([][]string, len(list))
	for i, e := range list {
		rows[i] = []string{show([]byte(e.Name)), fmtInt(e.Current), fmtInt(e.Peak)}
	}
	return writeTable(a.stdout, []string{"NAME", "CURRENT", "PEAK"}, rows)
}

func (a *app) yrmcdsNoop(d counter.Dialect) error {
	y, err := a.dialYrmcds(d)
	if err != nil {
		return err
	}
	defer y.Close()
	start := time.Now()
	r, err := y.do(func(dst []byte, op uint32) []byte { return counter.AppendRequest(dst, counter.OpNoop, op, nil) })
	if err != nil {
		return err
	}
	if r.Status != counter.StatusOK {
		return statusError("noop", r)
	}
	rtt := time.Since(start)
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "rtt_ms": float64(rtt.Microseconds()) / 1000})
	} else {
		fmt.Fprintf(a.stdout, "OK (%v)\n", rtt.Round(time.Microsecond))
	}
	return nil
}
