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

// snapshotCmd runs the backup benchmark once: a store of --keys keys, a writer and a reader,
// and a SNAPSHOT meanwhile; the reader's latency during the save and the server's long loop
// turns are reported (issue 30, item 7; scripts/snapshot-latency.sh runs it at 1M and 5M).
func snapshotCmd(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench snapshot", pflag.ContinueOnError)
	fs.SetOutput(errOut)
	var c load.SnapshotConfig
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:5658", "tallyd's slock port `host:port` (RESP)")
	fs.IntVar(&c.Keys, "keys", 1_000_000, "keys in the store (snap:N), filled with MSETs if DBSIZE has fewer")
	fs.IntVar(&c.Value, "value", 8, "bytes of each key's value")
	fs.DurationVar(&c.Before, "before", time.Second, "the reader's baseline before the save")
	fs.StringVar(&c.Out, "out", "", "write the backup file here (default: read and discarded)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "for the SNAPSHOT's reply")
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
	res, err := load.RunSnapshot(ctx, c)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	d, b := res.During, res.Baseline
	fmt.Fprintf(out, "SNAPSHOT of %d keys: %d bytes in %.2fs, %d writes meanwhile\n", res.Keys, res.Bytes, res.SaveSecs, res.Writes)
	fmt.Fprintf(out, "another client's GET during the save: %d, p50 %s, p99 %s, max %s (before: p50 %s, p99 %s, max %s)\n",
		d.Count, load.Micros(d.P50), load.Micros(d.P99), load.Micros(d.Max), load.Micros(b.P50), load.Micros(b.P99), load.Micros(b.Max))
	fmt.Fprintf(out, "loop turns during the save over 1ms %d, 10ms %d, 100ms %d, 1s %d; longest turn since start %s (before the save %s)\n",
		res.TurnsOver["1ms"], res.TurnsOver["10ms"], res.TurnsOver["100ms"], res.TurnsOver["1s"],
		load.Micros(float64(res.MaxTurnUS)), load.Micros(float64(res.MaxTurnBefore)))
	return nil
}
