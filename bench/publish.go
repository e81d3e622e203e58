package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/bench/report"
)

// publishable are the runs publish looks for when it is given no names: the suite's
// (make bench, make bench-compare) and make bench-aof's table, which is copied as is.
var publishable = []string{"latest", "compare", "aof"}

// published is one run's files to publish.
type published struct {
	name  string
	rep   *report.Report // nil for a run that is copied as is (aof)
	files []string       // base names in the source directory
}

func publishCmd(args []string, out, errOut io.Writer) error {
	fs := pflag.NewFlagSet("tallyd-bench publish", pflag.ContinueOnError)
	from := fs.String("from", "bench/out", "directory the runs wrote (make bench's BENCH_OUT)")
	to := fs.String("to", "bench/results", "directory of the published results")
	update := fs.String("update", "BENCHMARKS.md", "Markdown file whose <!-- NAME:begin --> ... <!-- NAME:end --> sections get the suite runs' tables (\"\" for none)")
	if err := parseFlags(fs, args, `Usage: tallyd-bench publish [flags] [NAME...]

Copies the runs NAME (default: whichever of latest, compare and aof are in --from) to the
published results and splices each suite run's table into --update. A run that is not the
whole standard suite (a case filter, --quick, shorter runs, no soak, a failed case) is
refused, and then nothing is written.

Flags:
`, out); err != nil {
		return err
	}
	names := fs.Args()
	explicit := len(names) > 0
	if !explicit {
		for _, n := range publishable {
			if _, err := os.Stat(filepath.Join(*from, n+".json")); err == nil {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return fmt.Errorf("no runs in %s to publish (make bench writes them there)", *from)
		}
	}
	// Everything is read and judged before anything is written.
	var runs []published
	var refused []string
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, `/\`) {
			return fmt.Errorf("run name %q is not a base name", n)
		}
		p := published{name: n}
		if n == "aof" {
			p.files = []string{"aof.json", "aof.md"}
		} else {
			rep, err := report.ReadFile(filepath.Join(*from, n+".json"))
			if err != nil {
				return err
			}
			if len(rep.Targets) == 0 || len(rep.Cases) == 0 {
				return fmt.Errorf("%s: not a suite report (no targets or cases)", filepath.Join(*from, n+".json"))
			}
			if len(rep.Partial) > 0 {
				refused = append(refused, fmt.Sprintf("%s is a partial run: %s", n, strings.Join(rep.Partial, "; ")))
				continue
			}
			p.rep = rep
			p.files = []string{n + ".json", n + ".md"}
			for _, ext := range []string{".png", ".svg"} {
				if _, err := os.Stat(filepath.Join(*from, n+ext)); err == nil {
					p.files = append(p.files, n+ext)
					break
				}
			}
		}
		for _, f := range p.files {
			if _, err := os.Stat(filepath.Join(*from, f)); err != nil {
				return fmt.Errorf("run %s: %v", n, err)
			}
		}
		runs = append(runs, p)
	}
	if len(refused) > 0 {
		return fmt.Errorf("refused, nothing published: %s; publish a whole run of make bench (no BENCH_QUICK, BENCH_CASES, shorter BENCH_DURATION or BENCH_SOAK=0)",
			strings.Join(refused, "; "))
	}
	if err := os.MkdirAll(*to, 0o755); err != nil {
		return err
	}
	for _, p := range runs {
		chart := ""
		for _, f := range p.files {
			b, err := os.ReadFile(filepath.Join(*from, f))
			if err != nil {
				return err
			}
			if f == p.name+".png" || f == p.name+".svg" {
				chart = filepath.Join(*to, f)
			}
			if err := os.WriteFile(filepath.Join(*to, f), b, 0o644); err != nil {
				return err
			}
		}
		if p.rep == nil || *update == "" {
			fmt.Fprintf(out, "published %s: %s into %s\n", p.name, strings.Join(p.files, ", "), *to)
			continue
		}
		ref := ""
		if chart != "" {
			var err error
			if ref, err = filepath.Rel(filepath.Dir(*update), chart); err != nil {
				ref = chart
			}
			ref = filepath.ToSlash(ref)
		}
		var body bytes.Buffer
		p.rep.Markdown(&body, ref)
		if err := report.SpliceFile(*update, p.name, body.Bytes()); err != nil {
			return err
		}
		fmt.Fprintf(out, "published %s: %s into %s, and its table into %s\n", p.name, strings.Join(p.files, ", "), *to, *update)
	}
	return nil
}
