package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/bench/load"
	"github.com/tallyd/tallyd/bench/report"
)

// caseDef is one case of the standard suite.
type caseDef struct {
	name, about, series string
	proto               string // the case's protocol, run where a target speaks it; "": each target's own
	alt                 string // where a target does not speak proto: this protocol instead (the report says so)
	cfg                 load.Config
	halfOf              string // open loop: run at half the ops/s this case reached on the target
	firstOnly           bool   // run on the first target only, in the first round
	firstRound          bool   // run in the first round only
	tls                 bool   // over TLS: where a target has an endpoint for proto+"+tls"
	fair                bool   // the fairness run (load.RunFair), not load.Run
	stampede            bool   // the PoolCounter stampede (load.RunStampede), not load.Run
}

// The standard suite's run lengths: a run shorter is partial, and not published.
const (
	stdDuration = 5 * time.Second
	stdWarmup   = time.Second
)

// suiteOpts are the suite's knobs.
type suiteOpts struct {
	duration, warmup, soak time.Duration
	rounds                 int
	idle                   int
	quick                  bool
}

// standardCases returns the suite behind make bench.
func standardCases(o suiteOpts) []caseDef {
	pairs := func(conns, pipeline int) load.Config {
		return load.Config{Workload: load.Pairs, Conns: conns, Pipeline: pipeline}
	}
	// The held case goes first, while the server is fresh: RSS it freed after earlier
	// cases would hide what idle connections cost.
	held := pairs(1000, 1)
	held.Idle = o.idle
	cs := []caseDef{{name: report.CaseHeld, about: fmt.Sprintf("the %s case with %d more connections open and idle, run first on a fresh server; its RSS sampled before and after they connect", report.CaseActive, o.idle), cfg: held, firstRound: true}}
	scale := []int{1, 4, 16, 64, 256, 1000}
	if o.quick {
		scale = []int{1, 16, 64, 1000}
	}
	for _, p := range []int{1, 16} {
		for _, n := range scale {
			name := fmt.Sprintf("pairs %dx%d", n, p)
			about := fmt.Sprintf("%d connection(s), each with %d acquire+release pair(s) in flight on its own key", n, p)
			cs = append(cs, caseDef{name: name, about: about, series: fmt.Sprintf("pipeline %d", p), cfg: pairs(n, p)})
		}
	}
	cs = append(cs,
		caseDef{name: "mix 64x16 zipf", about: "90% gets, 10% acquire+release pairs, over 10,000 shared keys picked zipf (theta 0.99); an op is a get or a pair",
			cfg: load.Config{Workload: load.Mix, Conns: 64, Pipeline: 16, Keys: 10000, Dist: "zipf", Gets: 0.9}},
		caseDef{name: "hot 64x16", about: "one key whose maximum is 1, each connection releasing what it got with its next acquire: every connection contends, refused acquires (busy) are expected; an op is an acquire (with the release before it)",
			cfg: load.Config{Workload: load.Hot, Conns: 64, Pipeline: 16}},
		caseDef{name: "churn 64x1 + 1000/s", about: "64 connections x 1 pair, plus 1,000 connect/pair/close cycles per second",
			cfg: load.Config{Workload: load.Pairs, Conns: 64, Pipeline: 1, Churn: 1000}},
		caseDef{name: "open 64 at half", about: "open loop, 64 connections at half the ops/s the target reached in pairs 64x1; latency from the intended send time",
			cfg: pairs(64, 1), halfOf: "pairs 64x1"},
	)
	if o.soak > 0 {
		soak := pairs(64, 16)
		soak.Duration = o.soak
		cs = append(cs, caseDef{name: report.CaseSoak, about: fmt.Sprintf("%s for %v with the server's RSS sampled every second (first server only)", report.CaseHeadline, o.soak), cfg: soak, firstOnly: true})
	}
	// The lock protocols last: what they leave (slock locks held until they expire) does
	// not weigh on the counter cases' figures and RSS. Fairness at the very end: it loads
	// 100,000 keys.
	cs = append(cs, lockCases(o)...)
	cs = append(cs, redisLockCases()...)
	cs = append(cs, tlsCases()...)
	return append(cs, caseDef{name: report.CaseFair, proto: "slock-text", fair: true, firstRound: true,
		about: "one connection pipelines 2,000 KEYS zzz* over 100,000 keys in one write, again and again; another sends PING after PING: an op is one PING, its latency what the other client waits (issue 21: the burst froze every port 16.7 s)"})
}

// caseStampede is the PoolCounter stampede case's name.
const caseStampede = "pool stampede 300 on 4 keys"

// redisLockCases are what Redis lock libraries send (issue 22), on tallyd's Redis-text port
// and beside redis-server: a lock taken with SET NX PX and released by compare-and-delete,
// by DELEX IFEQ (redis-server 7.0 has no DELEX: there the same compare-and-delete by
// EVALSHA) and by EVALSHA of redis-py's release script.
func redisLockCases() []caseDef {
	cfg := load.Config{Workload: load.Pairs, Conns: 64, Pipeline: 16, Keys: 10_000, AwaitGrant: true, Expiry: 30 * time.Second}
	const shape = "64 connections, each with 16 locks in flight on 10,000 shared keys (uniform), so some SETs find the key held (refused, busy); " +
		"an op is SET key token NX PX 30000 (token unique to the op) and, once it is granted, "
	return []caseDef{
		{name: "lock SET NX PX + DELEX IFEQ", proto: "redis-lock", alt: "redis-lock-lua", cfg: cfg,
			about: shape + "DELEX key IFEQ token (:1 released). A server without DELEX (redis-server 7.0) runs the same compare-and-delete as EVALSHA of the release script (protocol redis-lock-lua), and the notes below the table say so"},
		{name: "lock release by EVALSHA", proto: "redis-lock-lua", cfg: cfg,
			about: shape + "EVALSHA of redis-py's release script (if GET key == token then DEL key), loaded once a connection with SCRIPT LOAD (again after a NOSCRIPT, which resends the EVALSHA)"},
	}
}

// tlsCases are slock cases over TLS, to read beside the same cases in plain text (run where
// a target has a PROTO+tls endpoint: tallyd's TLS port, whose TLS runs on the bridge's
// goroutines, not on the loop): what TLS costs per request, and per connection (churn).
func tlsCases() []caseDef {
	var cs []caseDef
	for _, p := range []struct{ proto, what, pair string }{
		{"slock-text", "slock Redis-text", "LOCK+UNLOCK commands of one LOCK_ID"},
		{"slock", "slock binary", "Lock+Unlock frames of one LockId"},
	} {
		for _, sh := range [][2]int{{16, 1}, {64, 16}} {
			cs = append(cs, caseDef{name: fmt.Sprintf("%s pairs %dx%d TLS", p.proto, sh[0], sh[1]), proto: p.proto, tls: true,
				about: fmt.Sprintf("%s pairs %dx%d over TLS: %d connection(s), each with %d %s pair(s) in flight on its own key",
					p.proto, sh[0], sh[1], sh[0], sh[1], p.pair),
				cfg: load.Config{Workload: load.Pairs, Conns: sh[0], Pipeline: sh[1]}})
		}
	}
	// No active connection: the cycles are the whole load, and their latency is the connect's
	// (and the handshake's), not a wait behind a busy server or generator.
	churn := load.Config{Workload: load.Pairs, Conns: 0, Pipeline: 1, Churn: 200}
	for _, over := range []string{"", " TLS"} {
		cs = append(cs, caseDef{name: "slock-text churn 200/s" + over, proto: "slock-text", tls: over != "",
			about: "slock Redis-text: 200 connect/LOCK+UNLOCK/close cycles per second, nothing else" +
				map[string]string{"": ", in plain text", " TLS": ", over TLS (each cycle a full handshake)"}[over],
			cfg: churn})
	}
	return cs
}

// lockCases returns the cases of the lock protocols: PoolCounter, slock's binary frames
// and slock's Redis text. Each runs on the targets that speak the protocol (--endpoint).
func lockCases(o suiteOpts) []caseDef {
	var cs []caseDef
	shapes := [][2]int{{16, 1}, {64, 1}, {16, 16}, {64, 16}}
	if o.quick {
		shapes = [][2]int{{16, 1}, {64, 16}}
	}
	for _, p := range []struct{ proto, what, pair string }{
		{"pool", "PoolCounter", "ACQ4ME+RELEASE"},
		{"slock", "slock binary", "Lock+Unlock frames of one LockId"},
		{"slock-text", "slock Redis-text", "LOCK+UNLOCK commands of one LOCK_ID"},
	} {
		for _, sh := range shapes {
			cs = append(cs, caseDef{name: fmt.Sprintf("%s pairs %dx%d", p.proto, sh[0], sh[1]), proto: p.proto,
				series: fmt.Sprintf("pipeline %d", sh[1]),
				about: fmt.Sprintf("%s: %d connection(s), each with %d %s pair(s) in flight on its own key, sent together (never contended, so legal to pipeline)",
					p.what, sh[0], sh[1], p.pair),
				cfg: load.Config{Workload: load.Pairs, Conns: sh[0], Pipeline: sh[1]}})
		}
		if p.proto == "slock" {
			// slock's own benchmark (slock-benchmark --mode=stream --client=16 --conc=16)
			// writes 4 KiB of Lock+Unlock frames at a time on each connection without waiting
			// for replies, so the server reads full buffers: here as many in flight.
			cs = append(cs, caseDef{name: "slock stream 16x16", proto: p.proto, series: "stream",
				about: "slock binary, as slock-benchmark --mode=stream --client=16 --conc=16: 16 connections, each with 512 Lock+Unlock pairs in flight on its own key (64 KiB of frames, what the server reads at once)",
				cfg:   load.Config{Workload: load.Pairs, Conns: 16, Pipeline: 512}})
		}
		if p.proto == "pool" {
			for _, n := range []int{16, 64} {
				if o.quick && n == 64 {
					continue
				}
				cs = append(cs, caseDef{name: fmt.Sprintf("pool lock-then-release %dx1", n), proto: p.proto,
					series: "release once granted",
					about:  fmt.Sprintf("PoolCounter: %d connections, each on its own key, sending RELEASE only once ACQ4ME is answered LOCKED: two round trips a pair, as PoolCounter clients do", n),
					cfg:    load.Config{Workload: load.Pairs, Conns: n, Pipeline: 1, AwaitGrant: true}})
			}
		}
		if p.proto == "pool" {
			cs = append(cs, caseDef{name: caseStampede, proto: p.proto, stampede: true,
				about: "PoolCounter as MediaWiki stampedes it: 300 connections on 4 hot keys, each sending ACQ4ME key 2 50 5 (workers 2, maxqueue 50, timeout 5 s), " +
					"holding a LOCKED 5 ms then RELEASE, and after QUEUE_FULL or TIMEOUT pausing 10 ms and asking again; an op is a grant (at most 4 x 2 / 5 ms = 1,600/s), " +
					"its latency the wait from ACQ4ME to LOCKED; the generator checks no key is ever held by more than 2"})
		}
		if p.proto == "slock-text" {
			continue
		}
		// Contention: shared keys, one holder at a time.
		cc := caseDef{name: p.proto + " contention 64x1 8 keys", proto: p.proto, series: "8 shared keys",
			about: fmt.Sprintf("%s: 64 connections on 8 shared keys (uniform), one holder a key: each sends its acquire with a probe behind it (%s), and the release once the lock is granted; a probe answered before its acquire counts a waiter",
				p.what, map[string]string{"pool": "STATS UPTIME", "slock": "a Ping frame"}[p.proto]),
			cfg: load.Config{Workload: load.Pairs, Conns: 64, Pipeline: 1, Keys: 8, Timeout: time.Second}}
		if p.proto == "slock" {
			cc.name, cc.cfg.Pipeline = "slock contention 64x16 8 keys", 16
			cc.about += "; 16 acquires in flight a connection, their replies matched by RequestId"
		}
		cs = append(cs, cc)
		wc := caseDef{name: p.proto + " wait 64x1", proto: p.proto,
			about: fmt.Sprintf("%s: 64 connections waiting on one key the bench holds all run; every wait times out after %s (an op is one wait)",
				p.what, map[string]string{"pool": "1 s, the protocol's granularity", "slock": "100 ms"}[p.proto]),
			cfg: load.Config{Workload: load.Waits, Conns: 64, Pipeline: 1, Keys: 1, Timeout: time.Second}}
		if p.proto == "slock" {
			wc.name, wc.cfg.Pipeline, wc.cfg.Timeout = "slock wait 64x16", 16, 100*time.Millisecond
		}
		cs = append(cs, wc)
	}
	return cs
}

// targetFlag parses NAME=PROTO@HOST:PORT.
func targetFlag(s string) (report.Target, error) {
	name, rest, ok := strings.Cut(s, "=")
	proto, addr, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 || name == "" || addr == "" {
		return report.Target{}, fmt.Errorf("--target %q is not NAME=PROTO@HOST:PORT", s)
	}
	if _, err := load.Lookup(strings.TrimSuffix(proto, "+tls")); err != nil {
		return report.Target{}, fmt.Errorf("--target %q: %v", s, err)
	}
	return report.Target{Name: name, Proto: proto, Addr: addr}, nil
}

func suiteCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench suite", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	var o suiteOpts
	targets := fs.StringArray("target", nil, "a server, NAME=PROTO@HOST:PORT; repeat; the first is judged against the targets, one named redis is compared with")
	endpoints := fs.StringArray("endpoint", nil, "NAME=PROTO@HOST:PORT: where target NAME speaks another protocol (pool, slock, slock-text); that protocol's cases run there")
	pids := fs.StringArray("pid", nil, "NAME=PID: sample that target's server RSS")
	notes := fs.StringArray("note", nil, "a line for the report, e.g. how the servers were pinned")
	fs.DurationVar(&o.duration, "duration", stdDuration, "measured time per run")
	fs.DurationVar(&o.warmup, "warmup", stdWarmup, "warm-up before each run")
	fs.DurationVar(&o.soak, "soak", 0, "also run the 64x16 case this long with RSS sampling (0: skip)")
	fs.IntVar(&o.rounds, "rounds", 1, "runs per case and target, targets alternating")
	fs.IntVar(&o.idle, "idle", 18000, "idle connections of the held case (lowered to fit the open-file limit)")
	fs.BoolVar(&o.quick, "quick", false, "fewer connection counts")
	sink := fs.String("sink", "", "also measure the generator against a tallyd-bench sink (counter) at this host:port")
	only := fs.String("cases", "", "run only the cases matching this regexp")
	tlsCA := fs.String("tls-ca", "", "the PEM `FILE` of certificates to trust on PROTO+tls endpoints (the TLS cases)")
	dir := fs.String("out", "bench/out", "directory for NAME.json, NAME.md and NAME.png (tallyd-bench publish copies a whole run to the published results)")
	name := fs.String("name", "latest", "base name of the files in --out")
	format := fs.String("chart", "png", "chart format: png or svg")
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	if err := parseFlags(fs, args, "Usage: tallyd-bench suite --target NAME=PROTO@HOST:PORT... [flags]\n\nThe standard suite behind make bench: writes NAME.json, NAME.md and the chart into --out.\nA run that is not the whole suite (--quick, --cases, a shorter --duration, no --soak or\n--sink, a failed case) is marked partial, and tallyd-bench publish refuses it.\n\nFlags:\n", out); err != nil {
		return err
	}
	if len(*targets) == 0 {
		return fmt.Errorf("suite needs at least one --target NAME=PROTO@HOST:PORT")
	}
	rep := &report.Report{Started: time.Now(), Machine: report.ThisMachine(), Notes: *notes,
		Duration: o.duration.String(), Rounds: o.rounds, LoadStart: report.ReadLoad()}
	for _, s := range *targets {
		t, err := targetFlag(s)
		if err != nil {
			return err
		}
		rep.Targets = append(rep.Targets, t)
	}
	for _, s := range *endpoints {
		e, err := targetFlag(s)
		if err != nil {
			return fmt.Errorf("--endpoint: %v", err)
		}
		found := false
		for i := range rep.Targets {
			if t := &rep.Targets[i]; t.Name == e.Name {
				if t.Endpoints == nil {
					t.Endpoints = map[string]string{}
				}
				t.Endpoints[e.Proto], found = e.Addr, true
			}
		}
		if !found {
			return fmt.Errorf("--endpoint %q names no --target", s)
		}
	}
	for _, s := range *pids {
		name, v, _ := strings.Cut(s, "=")
		pid, err := strconv.Atoi(v)
		if err != nil || pid <= 0 {
			return fmt.Errorf("--pid %q is not NAME=PID", s)
		}
		found := false
		for i := range rep.Targets {
			if rep.Targets[i].Name == name {
				rep.Targets[i].PID, found = pid, true
			}
		}
		if !found {
			return fmt.Errorf("--pid %q names no --target", s)
		}
	}
	if lim := fdLimit(); lim > 0 && 1000+o.idle+300 > lim {
		o.idle = max(0, lim-1000-300)
		fmt.Fprintf(errOut, "suite: open-file limit %d: the held case keeps %d idle connections\n", lim, o.idle)
	}
	// What makes the run less than the standard suite; publish refuses it.
	if o.quick {
		rep.Partial = append(rep.Partial, "--quick: fewer connection counts")
	}
	if *only != "" {
		rep.Partial = append(rep.Partial, fmt.Sprintf("only the cases matching %q", *only))
	}
	if o.duration < stdDuration || o.warmup < stdWarmup {
		rep.Partial = append(rep.Partial, fmt.Sprintf("runs of %v after a %v warm-up, shorter than the standard %v after %v", o.duration, o.warmup, stdDuration, stdWarmup))
	}
	if o.soak <= 0 {
		rep.Partial = append(rep.Partial, "no soak run")
	}
	if *sink == "" {
		rep.Partial = append(rep.Partial, "no load generator check (--sink)")
	}
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			return fmt.Errorf("--cases: %v", err)
		}
	}
	var progress io.Writer
	if !*quiet {
		progress = errOut
	}
	var tlsCfg *tls.Config
	if *tlsCA != "" {
		var err error
		if tlsCfg, err = load.ClientTLS(*tlsCA); err != nil {
			return fmt.Errorf("--tls-ca: %v", err)
		}
	}

	for _, cd := range standardCases(o) {
		if filter != nil && !filter.MatchString(cd.name) {
			continue
		}
		c := &report.Case{Name: cd.name, About: cd.about, Proto: cd.proto, Series: cd.series, Results: map[string]*load.Result{}}
		runs := map[string][]*load.Result{}
		for round := 0; round < o.rounds; round++ {
			if (cd.firstOnly || cd.firstRound) && round > 0 {
				break
			}
			for ti, t := range rep.Targets {
				if cd.firstOnly && ti > 0 {
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if t.Proto == "pool" && !cd.stampede {
					// A PoolCounter server only (poolcounterd) runs the stampede alone: it serves only
					// the first line of each read, so the other cases, whose lines can share a read
					// (pipelined, an acquire with its probe, a RELEASE with the next ACQ4ME), stall.
					continue
				}
				key := cd.proto
				if cd.tls {
					key += "+tls"
				}
				addr, ok := t.Endpoint(key)
				proto := cd.proto
				if !ok && cd.alt != "" {
					addr, ok = t.Endpoint(cd.alt)
					proto = cd.alt
				}
				if !ok {
					continue // the target does not speak the case's protocol
				}
				cfg := cd.cfg
				cfg.Addr, cfg.Proto, cfg.PID = addr, t.Proto, t.PID
				if cd.tls {
					if tlsCfg == nil {
						return fmt.Errorf("%s: an endpoint %s needs --tls-ca", t.Name, key)
					}
					cfg.TLS = tlsCfg
				}
				if proto != "" {
					cfg.Proto = proto
				}
				cfg.Warmup = o.warmup
				if cfg.Duration == 0 {
					cfg.Duration = o.duration
				}
				cfg.Sources = 256
				cfg.Progress = progress
				cfg.Label = fmt.Sprintf("[%s | %s]", cd.name, t.Name)
				if cd.halfOf != "" {
					base := rep.Case(cd.halfOf)
					if base == nil || base.Results[t.Name] == nil || base.Results[t.Name].OpsPerSec == 0 {
						if filter == nil {
							rep.Partial = append(rep.Partial, fmt.Sprintf("%s on %s not run: %s has no result", cd.name, t.Name, cd.halfOf))
						}
						continue
					}
					cfg.Rate = base.Results[t.Name].OpsPerSec / 2
				}
				var res *load.Result
				var err error
				switch {
				case cd.fair:
					res, err = load.RunFair(ctx, load.FairConfig{Addr: addr, Duration: cfg.Duration, Warmup: cfg.Warmup,
						Label: cfg.Label, Progress: progress})
				case cd.stampede:
					res, err = load.RunStampede(ctx, load.StampedeConfig{Addr: addr, Duration: cfg.Duration, Warmup: cfg.Warmup,
						Label: cfg.Label, Progress: progress})
				default:
					res, err = load.Run(ctx, cfg)
				}
				if err != nil {
					fmt.Fprintf(errOut, "suite: %s on %s: %v\n", cd.name, t.Name, err)
					rep.Partial = append(rep.Partial, fmt.Sprintf("%s on %s failed: %v", cd.name, t.Name, err))
					continue
				}
				res.Label = t.Name
				runs[t.Name] = append(runs[t.Name], res)
				if progress != nil {
					fmt.Fprintf(errOut, "%s %s ops/s, p50 %s, p99 %s, errors %d\n", cfg.Label,
						load.Grouped(res.OpsPerSec), load.Micros(res.Latency.P50), load.Micros(res.Latency.P99), errorSum(res))
				}
				time.Sleep(300 * time.Millisecond) // let the server settle the closes
			}
		}
		for name, rs := range runs {
			c.Results[name] = load.Merge(rs...)
		}
		if len(c.Results) > 0 {
			rep.Cases = append(rep.Cases, c)
		}
	}
	if *sink != "" {
		for _, shape := range [][2]int{{64, 16}, {8, 256}} {
			cfg := load.Config{Addr: *sink, Proto: "counter", Conns: shape[0], Pipeline: shape[1],
				Duration: o.duration, Warmup: o.warmup, Sources: 256, Progress: progress,
				Label: fmt.Sprintf("[generator %dx%d]", shape[0], shape[1])}
			res, err := load.Run(ctx, cfg)
			if err != nil {
				return fmt.Errorf("generator check against %s: %v", *sink, err)
			}
			rep.Generator = append(rep.Generator, res)
		}
	}
	rep.LoadEnd = report.ReadLoad()
	return writeSuite(rep, *dir, *name, *format, out)
}

// writeSuite writes NAME.json, NAME.md and the chart NAME.FORMAT into dir and prints the
// Markdown to out.
func writeSuite(rep *report.Report, dir, name, format string, out io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), js.Bytes(), 0o644); err != nil {
		return err
	}
	// A chart of an earlier run must not pass for this one's (publish copies what is there).
	for _, ext := range []string{".png", ".svg"} {
		if err := os.Remove(filepath.Join(dir, name+ext)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	chart := name + "." + format
	if err := rep.Chart(filepath.Join(dir, chart)); err != nil {
		fmt.Fprintf(os.Stderr, "suite: no chart: %v\n", err)
		os.Remove(filepath.Join(dir, chart))
		chart = ""
	}
	md := suiteMarkdown(rep, name, chart)
	if err := os.WriteFile(filepath.Join(dir, name+".md"), md, 0o644); err != nil {
		return err
	}
	out.Write(md)
	return nil
}

// suiteMarkdown is the NAME.md of a run whose chart is the file chart beside it ("" for
// none).
func suiteMarkdown(rep *report.Report, name, chart string) []byte {
	var md bytes.Buffer
	fmt.Fprintf(&md, "# tallyd-bench results: %s\n\n", name)
	rep.Markdown(&md, chart)
	return md.Bytes()
}

func errorSum(r *load.Result) uint64 {
	var n uint64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// fdLimit returns the soft open-file limit (Go raises it to the hard limit at start).
func fdLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return int(l.Cur)
}
