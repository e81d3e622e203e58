package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/bench/load"
)

// writesFlags holds the flags of the writes command.
type writesFlags struct {
	cfg   load.WritesConfig
	json  bool
	quiet bool
}

func newWritesFlags(errOut io.Writer) (*pflag.FlagSet, *writesFlags) {
	fs := pflag.NewFlagSet("tallyd-bench writes", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	f := &writesFlags{}
	c := &f.cfg
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:6379", "Redis-text (RESP) server `host:port` (tallyd: its slock port)")
	fs.IntVar(&c.Conns, "conns", 64, "connections")
	fs.IntVar(&c.Pipeline, "pipeline", 16, "INCRs per round, sent in one write; the next round goes once all are answered")
	fs.IntVar(&c.Keys, "keys", 100_000, "keys, each INCR on one picked uniformly at random")
	fs.StringVar(&c.Prefix, "prefix", "bw:", "key name prefix")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "load before the measured window")
	fs.IntVar(&c.WaitReplicas, "wait", 0, "end each round with WAIT N --wait-timeout (Redis with replicas); 0: no WAIT")
	fs.DurationVar(&c.WaitTimeout, "wait-timeout", 0, "WAIT's timeout (0: wait for ever), whole milliseconds")
	fs.StringVar(&c.Consistency, "consistency", "", "send CONSISTENCY LEVEL on each connection first (tallyd cluster: ONE, QUORUM or ALL); empty: the server's default")
	fs.BoolVar(&c.Locks, "locks", false, "rounds of --pipeline slock lock pairs (LOCK k TIMEOUT 0 EXPRIED 30 LOCK_ID x, UNLOCK k LOCK_ID x), a key of its own each, in place of INCRs")
	fs.BoolVar(&c.AwaitGrant, "await-grant", false, "with --locks: send a round's UNLOCKs only once its LOCKs are answered (two round trips a round), not each with its LOCK")
	fs.Uint64Var(&c.Seed, "seed", 0, "random seed (0: from the clock)")
	fs.IntVar(&c.Sources, "sources", 256, "spread connections to a loopback target over this many 127.0.0.0/8 source addresses (0: one)")
	fs.StringVar(&c.Label, "label", "", "names the run in progress lines and the result")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON on stdout")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines")
	return fs, f
}

// parseWrites parses the writes command's arguments into a configuration.
func parseWrites(args []string, errOut io.Writer) (*writesFlags, error) {
	fs, f := newWritesFlags(errOut)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	c := &f.cfg
	switch {
	case c.Conns < 1:
		return nil, fmt.Errorf("--conns %d: want at least 1", c.Conns)
	case c.Pipeline < 1:
		return nil, fmt.Errorf("--pipeline %d: want at least 1", c.Pipeline)
	case c.Keys < 1:
		return nil, fmt.Errorf("--keys %d: want at least 1", c.Keys)
	case c.Duration <= 0:
		return nil, fmt.Errorf("--duration %s: want more than 0", c.Duration)
	case c.Warmup < 0:
		return nil, fmt.Errorf("--warmup %s: want 0 or more", c.Warmup)
	case c.WaitReplicas < 0:
		return nil, fmt.Errorf("--wait %d: want 0 or more replicas", c.WaitReplicas)
	case c.WaitTimeout < 0:
		return nil, fmt.Errorf("--wait-timeout %s: want 0 or more", c.WaitTimeout)
	case c.AwaitGrant && !c.Locks:
		return nil, fmt.Errorf("--await-grant is for --locks")
	}
	if !f.quiet {
		c.Progress = errOut
	}
	return f, nil
}

// writesCmd runs the write benchmark of make bench-cluster: rounds of pipelined INCRs
// on random keys (or of lock pairs), optionally each followed by WAIT.
func writesCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	f, err := parseWrites(args, errOut)
	if err != nil {
		return err
	}
	res, err := load.RunWrites(ctx, f.cfg)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(out, res)
	}
	res.WriteText(out)
	return nil
}
