package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"github.com/tallyd/tallyd/bench/load"
)

func res(conns, pipeline int, ops float64) *load.Result {
	return &load.Result{Proto: "counter", Workload: "pairs", Conns: conns, Pipeline: pipeline, OpsPerSec: ops,
		ReqPerSec: 2 * ops, Latency: load.Summary{Count: 10, P50: 50, P90: 90, P99: 99, P999: 120, Max: 300},
		Outcomes: map[string]uint64{"ok": 20}, Errors: map[string]uint64{}}
}

func sample() *Report {
	held := res(1000, 1, 90_000)
	held.Idle = 18000
	held.RSS = &load.RSS{Active: 10_000, Held: 10_000 + 18000*2, PerIdle: 2048}
	soak := res(64, 16, 1.2e6)
	soak.Seconds = 60
	soak.RSS = &load.RSS{Series: []int64{20_000, 20_100, 20_300}}
	contention := res(64, 1, 20_000)
	contention.Proto, contention.Ops, contention.Waited = "pool", 100_000, 80_000
	wait := res(64, 1, 64)
	wait.Proto, wait.Workload, wait.Outcomes = "pool", "wait", map[string]uint64{"timed_out": 320}
	fair := res(2, 1, 5000)
	fair.Proto, fair.Workload, fair.Latency.P99, fair.Latency.Max = "slock-text", "fair", 2_000, 9_000
	return &Report{
		Targets: []Target{{Name: "tallyd", Proto: "counter", Addr: "127.0.0.1:1",
			Endpoints: map[string]string{"slock": "127.0.0.1:4", "pool": "127.0.0.1:3"}},
			{Name: "redis", Proto: "resp", Addr: "127.0.0.1:2"}},
		Cases: []*Case{
			{Name: "pairs 16x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(16, 1, 60_000), "redis": res(16, 1, 65_000)}},
			{Name: "pairs 64x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(64, 1, 100_000), "redis": res(64, 1, 90_000)}},
			{Name: "pairs 64x16", Series: "pipeline 16", Results: map[string]*load.Result{"tallyd": res(64, 16, 1.1e6), "redis": res(64, 16, 880_000)}},
			{Name: "pairs 1000x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(1000, 1, 100_000)}},
			{Name: CaseHeld, Results: map[string]*load.Result{"tallyd": held}},
			{Name: CaseSoak, Results: map[string]*load.Result{"tallyd": soak}},
			{Name: "pool pairs 16x1", Proto: "pool", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(16, 1, 50_000)}},
			{Name: "pool pairs 64x1", Proto: "pool", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(64, 1, 70_000)}},
			{Name: "pool contention", Proto: "pool", Series: "8 shared keys", Results: map[string]*load.Result{"tallyd": contention}},
			{Name: "pool wait", Proto: "pool", Results: map[string]*load.Result{"tallyd": wait}},
			{Name: CasePool, Proto: "pool", Results: map[string]*load.Result{"tallyd": res(16, 1, 45_000)}},
			{Name: CaseSlock, Proto: "slock", Results: map[string]*load.Result{"tallyd": res(16, 16, 800_000)}}, // 1.6M requests/s
			{Name: CaseFair, Proto: "slock-text", Results: map[string]*load.Result{"tallyd": fair}},
		},
		Duration: "5s", Rounds: 2,
	}
}

func TestChecks(t *testing.T) {
	got := map[string]Check{}
	for _, c := range sample().Checks() {
		got[c.What[:10]] = c
	}
	for prefix, want := range map[string]struct {
		met   bool
		short string
	}{
		"64 conns x": {true, ""},
		"64x16: >= ": {true, ""}, // 1.25x Redis
		"16 conns, ": {false, "by 8%"},
		"19,000 con": {true, ""},       // 90%
		"server RSS": {true, ""},       // 2 KiB
		"memory fla": {true, ""},       // 300 KiB
		"PoolCounte": {true, ""},       // 45,000 pairs/s
		"slock bina": {false, "by 3%"}, // 1.6M commands/s
		"while one ": {true, ""},       // p99 2 ms, max 9 ms
	} {
		c, ok := got[prefix]
		if !ok || c.Missing || c.Met != want.met || !strings.Contains(c.Verdict(), want.short) {
			t.Errorf("%s...: %+v (verdict %q), want met %v %s", prefix, c, c.Verdict(), want.met, want.short)
		}
	}

	r := sample()
	r.Cases = r.Cases[:1]
	r.Targets = r.Targets[:1]
	for _, c := range r.Checks() {
		if !c.Missing || c.Verdict() != "not measured in this run" {
			t.Errorf("without the figures: %+v", c)
		}
	}
}

func TestChecksFailures(t *testing.T) {
	r := sample()
	r.Case(CaseHeld).Results["tallyd"].OpsPerSec = 50_000
	r.Case(CaseHeld).Results["tallyd"].RSS.PerIdle = 5000
	r.Case("pairs 64x16").Results["tallyd"].OpsPerSec = 900_000
	r.Case(CaseSoak).Results["tallyd"].RSS.Series = []int64{20_000, 30_000}
	r.Case(CasePool).Results["tallyd"].OpsPerSec = 39_000
	r.Case(CasePool).Results["tallyd"].ReqPerSec = 78_000
	r.Case(CasePool).Results["tallyd"].CPUPerReq = 12_500 // 97.5% of a core
	r.Case(CaseFair).Results["tallyd"].Latency.Max = 60_000
	for _, c := range r.Checks() {
		if c.Met {
			t.Errorf("%s: met with %s", c.What, c.Measured)
		}
		if !strings.HasPrefix(c.Verdict(), "**short**") {
			t.Errorf("%s: verdict %q", c.What, c.Verdict())
		}
		if strings.HasPrefix(c.What, "PoolCounter") && !strings.Contains(c.Verdict(), "the generator kept 98% of its core busy") {
			t.Errorf("%s: verdict %q does not say the generator was the bound", c.What, c.Verdict())
		}
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	r := sample()
	r.Notes = []string{"pinned"}
	r.Generator = []*load.Result{res(64, 16, 1.5e6)}
	r.Markdown(&b, "x.png")
	md := b.String()
	for _, want := range []string{
		"| **pairs 64x16** | tallyd | 1,100,000 | 2,200,000 | 50.0µs | 90.0µs | 99.0µs | 120.0µs | 300.0µs | 0 | 0% | - |",
		"|  | redis | 880,000 | 1,760,000 |", " 1.25x |", "pinned", "2,048 B per idle connection",
		"| 64 conns x 16 pipelined pairs | 3,000,000 | 50.0µs | 99.0µs |", "![throughput against connections, and latency percentiles](x.png)",
		"| 16 conns, no pipelining: >= Redis pairs/s | 60,000 vs 65,000 pairs/s (0.92x) | **short** by 8%",
		"Targets: tallyd (counter at 127.0.0.1:1, pool at 127.0.0.1:3, slock at 127.0.0.1:4); redis (resp at 127.0.0.1:2);",
		"| **pool pairs 16x1** | tallyd | 50,000 |", "| 0 (timed out 320) |",
		"- pool contention on tallyd: 80,000 acquires waited for the lock, 80% of the ops",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestChart(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"c.png", "c.svg"} {
		path := filepath.Join(dir, name)
		if err := sample().Chart(path); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		if len(b) < 1000 {
			t.Errorf("%s: %d bytes", name, len(b))
		}
		if name != "c.svg" {
			continue
		}
		if !bytes.Contains(b, []byte("<svg")) {
			t.Errorf("c.svg has no svg element")
		}
		// A line for each target and protocol and series with results; none for cases
		// outside any series.
		for _, want := range []string{"tallyd counter, pipeline 16", "redis resp, pipeline 1", "tallyd pool, pipeline 1",
			"tallyd pool, 8 shared keys", "tallyd p99.9", "redis p50", "Latency (pipeline 16)"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("c.svg lacks %q", want)
			}
		}
		if bytes.Contains(b, []byte("redis pool")) || bytes.Contains(b, []byte("wait")) {
			t.Errorf("c.svg has lines for results that are not there")
		}
	}
	if err := sample().Chart(filepath.Join(dir, "c.gif")); err == nil {
		t.Error("a .gif chart was accepted")
	}
	if err := (&Report{}).Chart(filepath.Join(dir, "e.png")); err == nil {
		t.Error("a chart without series was drawn")
	}
}

func TestSplice(t *testing.T) {
	got, err := Splice([]byte("a\n<!-- x:begin -->\nold\n<!-- x:end -->\nb\n"), "x", []byte("new\n"))
	if err != nil || string(got) != "a\n<!-- x:begin -->\nnew\n<!-- x:end -->\nb\n" {
		t.Errorf("Splice = %q, %v", got, err)
	}
	got, err = Splice([]byte("a"), "x", []byte("new\n"))
	if err != nil || string(got) != "a\n<!-- x:begin -->\nnew\n<!-- x:end -->\n" {
		t.Errorf("Splice without markers = %q, %v", got, err)
	}
	if _, err := Splice([]byte("<!-- x:end --><!-- x:begin -->"), "x", nil); err == nil {
		t.Error("markers out of order accepted")
	}
	// Other names' markers are left alone.
	got, _ = Splice([]byte("<!-- y:begin -->\nkeep\n<!-- y:end -->\n"), "x", []byte("n\n"))
	if !strings.Contains(string(got), "keep") || !strings.Contains(string(got), "<!-- x:begin -->") {
		t.Errorf("Splice touched another name's region: %q", got)
	}
}

func TestThisMachine(t *testing.T) {
	m := ThisMachine()
	if m.Cores < 1 || m.Go == "" || m.CPU == "" {
		t.Errorf("ThisMachine = %+v", m)
	}
}

func TestChartLabelsTheConnectionCountsOfAShortRun(t *testing.T) {
	// A short run's counts, 16 and 64, span no power of ten: the log axis alone labels
	// nothing between them.
	r := &Report{Targets: []Target{{Name: "tallyd", Proto: "counter"}}, Cases: []*Case{
		{Name: "pairs 16x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": res(16, 1, 60_000)}},
		{Name: "pairs 64x16", Series: "pipeline 16", Results: map[string]*load.Result{"tallyd": res(64, 16, 1e6)}},
	}}
	tput, _, lat, err := r.plots()
	if err != nil {
		t.Fatal(err)
	}
	// The labels an axis draws: those of ticks within its range.
	drawn := func(m plot.Ticker, a plot.Axis) (labels []string) {
		for _, tk := range m.Ticks(a.Min, a.Max) {
			if tk.Label != "" && tk.Value >= a.Min && tk.Value <= a.Max {
				labels = append(labels, tk.Label)
			}
		}
		return labels
	}
	if got := drawn(plot.LogTicks{Prec: -1}, tput.X); len(got) != 0 {
		t.Fatalf("plain log ticks label %q in [%g, %g]: the case does not show the fault", got, tput.X.Min, tput.X.Max)
	}
	if got := drawn(tput.X.Tick.Marker, tput.X); strings.Join(got, " ") != "16 64" {
		t.Errorf("throughput x axis [%g, %g]: labels %q, want 16 and 64", tput.X.Min, tput.X.Max, got)
	}
	if got := drawn(lat.X.Tick.Marker, lat.X); strings.Join(got, " ") != "64" {
		t.Errorf("latency x axis [%g, %g] (pipeline 16 only): labels %q, want 64", lat.X.Min, lat.X.Max, got)
	}
	// One count: still labelled, and so are thousands.
	r.Cases = r.Cases[:1]
	r.Cases[0].Results["tallyd"] = res(1000, 1, 50_000)
	tput, _, _, err = r.plots()
	if err != nil {
		t.Fatal(err)
	}
	if got := drawn(tput.X.Tick.Marker, tput.X); len(got) != 1 || got[0] != "1k" {
		t.Errorf("one count of 1000: labels %q, want [1k]", got)
	}
}

func TestMarkdownOfAPartialRun(t *testing.T) {
	r := sample()
	r.Partial = []string{"--quick: fewer connection counts", "no soak run"}
	var b bytes.Buffer
	r.Markdown(&b, "")
	md := b.String()
	if !strings.Contains(md, "**Partial run**, not the whole standard suite (make bench-publish refuses it): --quick: fewer connection counts; no soak run.\n") {
		t.Errorf("Markdown does not say the run is partial:\n%s", md)
	}
	if !strings.Contains(md, "### Performance targets\n") || strings.Contains(strings.ToLower(md), "issue") {
		t.Errorf("Markdown speaks of issues, not targets:\n%s", md)
	}
	b.Reset()
	sample().Markdown(&b, "")
	if strings.Contains(b.String(), "Partial") {
		t.Errorf("a whole run's Markdown says partial")
	}
}

func TestReportRoundTripsThroughJSON(t *testing.T) {
	r := sample()
	r.Partial = []string{"no soak run"}
	r.Generator = []*load.Result{res(64, 16, 1.5e6)}
	path := filepath.Join(t.TempDir(), "r.json")
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, js.Bytes(), 0o644)
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	r.Markdown(&a, "c.png")
	back.Markdown(&b, "c.png")
	if a.String() != b.String() {
		t.Errorf("Markdown of the report read back differs:\n%s\nwant:\n%s", b.String(), a.String())
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing file was read")
	}
}

// A run that completed no op in a case (a stall longer than a short run) has 0 ops/s,
// which a log axis cannot place: the chart leaves it out, and a chart with nothing to
// draw is an error, not a panic that loses the run's other files.
func TestChartWithoutThroughput(t *testing.T) {
	dir := t.TempDir()
	zero := res(1, 1, 0)
	zero.Latency = load.Summary{}
	r := &Report{Targets: []Target{{Name: "tallyd", Proto: "counter"}}, Cases: []*Case{
		{Name: "pairs 1x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": zero}}}}
	if err := r.Chart(filepath.Join(dir, "z.png")); err == nil {
		t.Error("a chart of no completed op was drawn")
	}
	r.Cases = append(r.Cases, &Case{Name: "pool pairs 16x1", Proto: "pool", Series: "pipeline 1",
		Results: map[string]*load.Result{"tallyd": res(16, 1, 50_000)}})
	if err := r.Chart(filepath.Join(dir, "z.png")); err != nil {
		t.Errorf("a chart with one line beside a case of 0 ops/s: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "z.png")); !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("z.png is not a PNG (%d bytes)", len(b))
	}
}
