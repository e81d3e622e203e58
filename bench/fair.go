package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/bench/load"
)

// fairCmd runs the fairness benchmark once: one client pipelines a burst of KEYS, another
// sends PINGs, and the PINGs' latency is reported (the suite's fairness case).
func fairCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench fair", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	var c load.FairConfig
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:5658", "Redis-text (RESP) server `host:port` (tallyd: its slock port)")
	fs.IntVar(&c.Keys, "keys", 100_000, "keys with a value the KEYS walk")
	fs.IntVar(&c.Burst, "burst", 2000, "KEYS in the attacker's one write")
	fs.StringVar(&c.Pattern, "pattern", "zzz*", "KEYS's pattern")
	fs.IntVar(&c.DB, "db", 9, "the database used (SELECT), flushed first")
	fs.DurationVar(&c.Duration, "duration", 5*time.Second, "measured time")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "time before the measured window, the burst already running")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout")
	quiet := fs.BoolP("quiet", "q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if !*quiet {
		c.Progress = errOut
	}
	c.Label = "[fair]"
	res, err := load.RunFair(ctx, c)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	l := res.Latency
	fmt.Fprintf(out, "PING while another client pipelines %d KEYS %s over %d keys, %v: %d PINGs, p50 %s, p99 %s, p99.9 %s, max %s; the attacker's KEYS answered %d (%d whole bursts)\n",
		c.Burst, c.Pattern, c.Keys, c.Duration, l.Count, load.Micros(l.P50), load.Micros(l.P99), load.Micros(l.P999),
		load.Micros(l.Max), res.Outcomes["keys"], res.Outcomes["bursts"])
	return nil
}
