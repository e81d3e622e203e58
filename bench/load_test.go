package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/bench/load"
	"github.com/tallyd/tallyd/bench/report"
)

// make bench-publish carries a run's load averages, CPU model and busy-machine warning
// into its BENCHMARKS.md section.
func TestPublishCarriesLoad(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "results")
	doc := filepath.Join(filepath.Dir(to), "BENCH.md")
	os.WriteFile(doc, []byte("<!-- latest:begin -->\nold\n<!-- latest:end -->\n"), 0o644)
	res := &load.Result{Proto: "counter", Workload: "pairs", Conns: 1, Pipeline: 1, OpsPerSec: 1000, ReqPerSec: 2000,
		Latency: load.Summary{Count: 10, P50: 50, P99: 99}, Outcomes: map[string]uint64{"ok": 20}, Errors: map[string]uint64{}}
	rep := &report.Report{Machine: report.Machine{CPU: "Test CPU @ 2GHz", Cores: 2}, Duration: "5s", Rounds: 1,
		LoadStart: &report.LoadAvg{1.75, 1.5, 1.25}, LoadEnd: &report.LoadAvg{2.5, 1.75, 1.5},
		Targets: []report.Target{{Name: "tallyd", Proto: "counter", Addr: "127.0.0.1:1"}},
		Cases:   []*report.Case{{Name: "pairs 1x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res}}}}
	var out, errOut bytes.Buffer
	if err := writeSuite(rep, from, "latest", "png", &out); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"publish", "--from", from, "--to", to, "--update", doc, "latest"}, &out, &errOut); code != 0 {
		t.Fatalf("publish: exit %d\n%s", code, errOut.String())
	}
	b, _ := os.ReadFile(doc)
	for _, want := range []string{"Test CPU @ 2GHz", "Load average (1, 5, 15 minutes): 1.75 1.50 1.25 at the start, 2.50 1.75 1.50 at the end.",
		"**Warning: the machine was busy**", "above half the 2 cores"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the published section lacks %q:\n%s", want, b)
		}
	}
}
