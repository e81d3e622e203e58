// Command tallyd-bench is the load generator that ships with tallyd: it drives
// acquire/release, get and contention workloads at a server over any of tallyd's
// protocols, closed or open loop, and reports throughput and latency percentiles.
//
// Usage:
//
//	tallyd-bench [flags]            run one workload (see --help)
//	tallyd-bench sink [flags]       a trivial server that answers every request OK
//	tallyd-bench suite [flags]      the standard suite behind make bench
//	tallyd-bench publish [NAME...]  copy a whole suite's results to the published ones
//	tallyd-bench writes [flags]     pipelined INCR (or LOCK+UNLOCK) rounds (+ WAIT): make bench-cluster
//	tallyd-bench fair [flags]       another client's PINGs while one pipelines 2,000 KEYS
//	tallyd-bench tls-cert --out DIR a self-signed certificate and key for a TLS port (make bench)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/bench/load"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usage is the head of tallyd-bench --help; the run command's flags follow it.
const usage = `tallyd-bench: the load generator that ships with tallyd.

Usage:
  tallyd-bench [flags]              run one workload (the flags below)
  tallyd-bench sink [flags]         a trivial server that answers every request OK
  tallyd-bench suite [flags]        the standard suite behind make bench
  tallyd-bench publish [NAME...]    copy a whole suite run to the published results
  tallyd-bench tls-cert --out DIR   a self-signed certificate for a TLS port (make bench)
  tallyd-bench fair [flags]         another client's PINGs while one pipelines 2,000 KEYS
  tallyd-bench snapshot [flags]     another client's GETs while a SNAPSHOT of --keys keys is taken
  tallyd-bench COMMAND --help       a command's flags

Flags:
`

// run is main without the exit: it returns the exit status, 0 for --help, 2 for an
// error.
func run(ctx context.Context, args []string, out, errOut io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCmd(ctx, args, out, errOut)
	case "sink":
		err = sinkCmd(ctx, args, out, errOut)
	case "suite":
		err = suiteCmd(ctx, args, out, errOut)
	case "publish":
		err = publishCmd(args, out, errOut)
	case "writes":
		err = writesCmd(ctx, args, out, errOut)
	case "fair":
		err = fairCmd(ctx, args, out, errOut)
	case "snapshot":
		err = snapshotCmd(ctx, args, out, errOut)
	case "tls-cert":
		err = tlsCertCmd(args, out, errOut)
	case "help":
		err = runCmd(ctx, []string{"--help"}, out, errOut)
	default:
		err = fmt.Errorf("unknown command %q: want run, sink, suite, publish, writes, tls-cert, fair or snapshot (tallyd-bench --help)", cmd)
	}
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return 0
	}
	fmt.Fprintln(errOut, "tallyd-bench:", err)
	return 2
}

// parseFlags parses args into fs. --help prints head and the flags to out; a bad
// flag is returned, for the caller to report, without the usage.
func parseFlags(fs *pflag.FlagSet, args []string, head string, out io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(out, head)
		fs.SetOutput(out)
		fs.PrintDefaults()
	}
	return err
}

// runFlags holds the flags of the run command.
type runFlags struct {
	cfg          load.Config
	json         bool
	quiet        bool
	compare      string
	compareProto string
	comparePID   int
	rounds       int
	tlsCA        string
}

func newRunFlags(name string, errOut io.Writer) (*pflag.FlagSet, *runFlags) {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(errOut)
	f := &runFlags{}
	c := &f.cfg
	fs.StringVar(&c.Addr, "addr", "", "server `host:port` (default 127.0.0.1 and the protocol's port)")
	fs.StringVar(&c.Proto, "proto", "counter", "protocol: "+strings.Join(load.Names(), ", "))
	fs.StringVar(&c.Workload, "workload", "pairs", "pairs (acquire+release), mix (--gets share of gets, the rest pairs), hot (one key, maximum --max (default --n): each connection releases what it got with its next acquire), wait (pool, slock: --keys (default 1) held --max times by the bench all run, every acquire waits --timeout and times out)")
	fs.IntVar(&c.Conns, "conns", 64, "active connections")
	fs.IntVar(&c.Idle, "idle", 0, "extra connections that stay open and idle")
	fs.IntVar(&c.Pipeline, "pipeline", 1, "ops in flight per connection (closed loop)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time (per round with --compare)")
	fs.Int64Var(&c.Requests, "requests", 0, "stop after this many ops (no time limit or warm-up unless --duration or --warmup is given)")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "load before the measured window")
	fs.Float64Var(&c.Rate, "rate", 0, "open loop: ops/s over all connections, latency from the intended send time (0: closed loop)")
	fs.IntVar(&c.Keys, "keys", 0, "shared keys (0: each connection its own key)")
	fs.StringVar(&c.Dist, "dist", "uniform", "how shared keys are picked: uniform or zipf")
	fs.Float64Var(&c.Theta, "theta", 0.99, "zipf skew, in (0, 1)")
	fs.Float64Var(&c.Gets, "gets", 0.9, "mix workload: share of ops that are gets")
	fs.Uint32Var(&c.N, "n", 1, "resources per acquire and release")
	fs.Uint32Var(&c.Max, "max", 0, "counter maximum / semaphore initial / pool workers / slock holders at once (COUNT+1) (default 2^32-1; hot, wait, pool, slock: --n, so 1)")
	fs.Uint32Var(&c.Queue, "maxqueue", 0, "pool: ACQ4ME maxqueue, holders and waiters a key may have (0: no limit)")
	fs.DurationVar(&c.Timeout, "timeout", 100*time.Millisecond, "pool, slock: how long an acquire may wait for the lock (pool rounds up to whole seconds)")
	fs.DurationVar(&c.Expiry, "expiry", 10*time.Second, "slock: how long a lock may be held before the server frees it (Expried); redis-lock: SET's PX")
	fs.BoolVar(&c.AwaitGrant, "await-grant", false, "pairs: send each release only once its acquire is answered (two round trips a pair; always so on shared keys of pool and slock)")
	fs.Float64Var(&c.Churn, "churn", 0, "connect, one op, close cycles per second, beside the active connections")
	fs.IntVar(&c.Sources, "sources", 256, "spread connections to a loopback target over this many 127.0.0.0/8 source addresses (0: one)")
	fs.StringVar(&c.Prefix, "prefix", "tb:", "key name prefix")
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed (0: from the clock)")
	fs.IntVar(&c.PID, "server-pid", 0, "sample this server process's RSS (Linux /proc)")
	fs.StringVar(&c.Label, "label", "", "prefix of progress lines")
	fs.DurationVar(&c.Spin, "spin", 0, "closed loop on Linux: poll this long for replies before sleeping (busy-waits the generator's core)")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON on stdout")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	fs.StringVar(&f.compare, "compare", "", "also run the workload against this `host:port`, alternating in rounds, and compare")
	fs.StringVar(&f.compareProto, "compare-proto", "", "protocol of the --compare server (default --proto; resp for Redis)")
	fs.IntVar(&f.comparePID, "compare-pid", 0, "sample the --compare server's RSS")
	fs.IntVar(&f.rounds, "rounds", 3, "rounds with --compare: each runs A, then B")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "connect over TLS, trusting the certificates of this PEM `FILE` (tallyd-bench tls-cert writes one)")
	return fs, f
}

// defaultAddr returns 127.0.0.1 and the protocol's default port.
func defaultAddr(proto string) (string, error) {
	d, err := load.Lookup(proto)
	if err != nil {
		return "", err
	}
	if d.Port == 0 {
		return "", fmt.Errorf("protocol %s has no default port: give --addr", proto)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)), nil
}

func runCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs, f := newRunFlags("tallyd-bench", errOut)
	if err := parseFlags(fs, args, usage, out); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	a := f.cfg
	if a.Requests > 0 {
		// --requests alone runs until that many ops are done, all of them measured.
		if !fs.Changed("duration") {
			a.Duration = 0
		}
		if !fs.Changed("warmup") {
			a.Warmup = 0
		}
	}
	if a.Addr == "" {
		var err error
		if a.Addr, err = defaultAddr(a.Proto); err != nil {
			return err
		}
	}
	if !f.quiet {
		a.Progress = errOut
	}
	if f.tlsCA != "" {
		var err error
		if a.TLS, err = load.ClientTLS(f.tlsCA); err != nil {
			return fmt.Errorf("--tls-ca: %v", err)
		}
	}
	if f.compare == "" {
		res, err := load.Run(ctx, a)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(out, res)
		}
		res.WriteText(out)
		return nil
	}
	b := a
	b.Addr, b.PID = f.compare, f.comparePID
	if f.compareProto != "" {
		b.Proto = f.compareProto
	}
	if a.Label == "" {
		a.Label, b.Label = "A", "B"
	}
	ra, rb, err := compare(ctx, a, b, f.rounds, errOut)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(out, comparison(ra, rb))
	}
	load.WriteCompare(out, ra, rb)
	return nil
}

// compare runs a and b in turn, rounds times, and merges each side's rounds.
func compare(ctx context.Context, a, b load.Config, rounds int, errOut io.Writer) (*load.Result, *load.Result, error) {
	if rounds < 1 {
		rounds = 1
	}
	var as, bs []*load.Result
	for i := 0; i < rounds; i++ {
		for _, side := range []struct {
			cfg  load.Config
			into *[]*load.Result
		}{{a, &as}, {b, &bs}} {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			cfg := side.cfg
			if rounds > 1 {
				cfg.Label = fmt.Sprintf("%s%d", cfg.Label, i+1)
			}
			r, err := load.Run(ctx, cfg)
			if err != nil {
				return nil, nil, fmt.Errorf("round %d against %s: %w", i+1, cfg.Addr, err)
			}
			if errOut != nil && cfg.Progress != nil {
				fmt.Fprintf(errOut, "%s: %s ops/s, p99 %s\n", cfg.Label, load.Grouped(r.OpsPerSec), load.Micros(r.Latency.P99))
			}
			*side.into = append(*side.into, r)
		}
	}
	ra, rb := load.Merge(as...), load.Merge(bs...)
	ra.Label, rb.Label = a.Label, b.Label
	return ra, rb, nil
}

// comparisonJSON is the --json output of a comparison.
type comparisonJSON struct {
	A     *load.Result       `json:"a"`
	B     *load.Result       `json:"b"`
	Ratio map[string]float64 `json:"ratio_a_over_b"`
}

func comparison(a, b *load.Result) comparisonJSON {
	c := comparisonJSON{A: a, B: b, Ratio: map[string]float64{}}
	for _, f := range load.Figures {
		if r := load.Ratio(f.Value(a), f.Value(b)); r == r {
			c.Ratio[f.Name] = r
		}
	}
	return c
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// tlsCertCmd writes a self-signed certificate and its key for the hosts given, as
// DIR/cert.pem and DIR/key.pem: the benchmarked server's, and what the generator trusts.
func tlsCertCmd(args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench tls-cert", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	dir := fs.String("out", "", "directory for cert.pem and key.pem")
	hosts := fs.StringSlice("host", []string{"127.0.0.1"}, "the hosts (IP addresses or names) it is valid for")
	if err := parseFlags(fs, args, "Usage: tallyd-bench tls-cert --out DIR [--host H,...]\n\nA self-signed certificate (ECDSA P-256, a day long) and its key for a benchmarked TLS port:\nDIR/cert.pem (give it to the server, and to the generator's --tls-ca) and DIR/key.pem.\n\nFlags:\n", out); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("tls-cert needs --out DIR")
	}
	cert, key, err := load.SelfSigned(*hosts...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "cert.pem"), cert, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*dir, "key.pem"), key, 0o600)
}

func sinkCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench sink", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	listen := fs.String("listen", "127.0.0.1:0", "listen `host:port`")
	proto := fs.String("proto", "counter", "protocol: "+strings.Join(load.Names(), ", "))
	if err := parseFlags(fs, args, "Usage: tallyd-bench sink [flags]\n\nA trivial server that answers every request OK, to measure the generator.\n\nFlags:\n", out); err != nil {
		return err
	}
	s, err := load.NewSink(*proto)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "sink: %s on %s\n", *proto, l.Addr())
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	err = s.Serve(l)
	fmt.Fprintf(errOut, "sink: answered %d requests\n", s.Requests())
	return err
}
