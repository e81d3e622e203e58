package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/bench/load"
	"github.com/tallyd/tallyd/bench/report"
)

func sink(t *testing.T, proto string) (*load.Sink, string) {
	t.Helper()
	return sinkOn(t, proto, nil)
}

// sinkOn is sink with its listener wrapped (by tls.NewListener, say) when wrap is not nil.
func sinkOn(t *testing.T, proto string, wrap func(net.Listener) net.Listener) (*load.Sink, string) {
	t.Helper()
	s, err := load.NewSink(proto)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	served := l
	if wrap != nil {
		served = wrap(l)
	}
	go func() { s.Serve(served); close(done) }()
	t.Cleanup(func() { l.Close(); <-done })
	return s, l.Addr().String()
}

func TestRunCommandJSON(t *testing.T) {
	s, addr := sink(t, "counter")
	var out, errOut bytes.Buffer
	err := runCmd(context.Background(), []string{"--addr", addr, "--conns", "3", "--pipeline", "4",
		"--requests", "600", "--json", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res load.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if res.Ops != 600 || res.Requests != 1200 || s.Requests() != 1200 || res.Conns != 3 || res.Latency.Count != 600 {
		t.Errorf("JSON result %+v; sink answered %d", res, s.Requests())
	}
	if errOut.Len() != 0 {
		t.Errorf("-q still wrote %q", errOut.String())
	}
}

func TestRunCommandText(t *testing.T) {
	_, addr := sink(t, "resp")
	var out, errOut bytes.Buffer
	err := runCmd(context.Background(), []string{"--addr", addr, "--proto", "resp", "--conns", "2",
		"--requests", "100", "--warmup", "0s", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"resp pairs on " + addr, "ops/s", "latency p99.9", "replies: ok 200", "errors by kind: none"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunCommandCompare(t *testing.T) {
	a, addrA := sink(t, "counter")
	b, addrB := sink(t, "resp")
	var out, errOut bytes.Buffer
	err := runCmd(context.Background(), []string{"--addr", addrA, "--compare", addrB, "--compare-proto", "resp",
		"--rounds", "2", "--conns", "2", "--requests", "200", "--warmup", "0s", "--json", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var c comparisonJSON
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	// Two rounds of 200 ops on each side, alternating.
	if c.A.Ops != 400 || c.B.Ops != 400 || c.A.Rounds != 2 || c.A.Proto != "counter" || c.B.Proto != "resp" {
		t.Errorf("A %+v\nB %+v", c.A, c.B)
	}
	if a.Requests() != 800 || b.Requests() != 800 {
		t.Errorf("sinks answered %d and %d, want 800 each", a.Requests(), b.Requests())
	}
	if r := c.Ratio["ops/s"]; r <= 0 || r != c.A.OpsPerSec/c.B.OpsPerSec {
		t.Errorf("ops/s ratio %v for %v / %v", r, c.A.OpsPerSec, c.B.OpsPerSec)
	}

	out.Reset()
	err = runCmd(context.Background(), []string{"--addr", addrA, "--compare", addrB, "--compare-proto", "resp",
		"--rounds", "1", "--conns", "1", "--requests", "50", "--warmup", "0s", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "A/B") || !strings.Contains(out.String(), "latency p99") {
		t.Errorf("compare table:\n%s", out.String())
	}
}

func TestRunCommandErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--conns", "x"},
		{"extra"},
		{"--proto", "semaphore"}, // no default port
		{"--proto", "gopher"},
	} {
		var out, errOut bytes.Buffer
		if err := runCmd(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestSuiteWritesReport(t *testing.T) {
	_, addr := sink(t, "counter")
	_, raddr := sink(t, "resp")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := suiteCmd(context.Background(), []string{"--target", "tallyd=counter@" + addr, "--target", "redis=resp@" + raddr,
		"--cases", `^pairs (1|4)x1$|^open`, "--quick", "--duration", "150ms", "--warmup", "0s", "--sink", addr,
		"--out", dir, "--note", "a note", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| **pairs 1x1** | tallyd |", "|  | redis |", "a note", "Load generator check",
		"| 64 conns x 16 pipelined pairs |", "not measured in this run", "](latest.png)", "tallyd ÷ server",
		"**Partial run**", "### Performance targets\n", "Load average (1, 5, 15 minutes): "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "pairs 4x1") || strings.Contains(string(md), "open 64") {
		t.Errorf("latest.md has cases outside --cases (quick has no 4x1; open needs pairs 64x1):\n%s", md)
	}
	if strings.Contains(strings.ToLower(string(md)), "issue") {
		t.Errorf("latest.md speaks of issues, not targets:\n%s", md)
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.LoadStart == nil || rep.LoadEnd == nil || rep.Machine.CPU == "" {
		t.Errorf("latest.json lacks the load averages or the CPU model: %+v %+v %q", rep.LoadStart, rep.LoadEnd, rep.Machine.CPU)
	}
	if len(rep.Cases) != 1 || rep.Cases[0].Results["tallyd"].Ops == 0 || rep.Cases[0].Results["redis"].Ops == 0 {
		t.Errorf("latest.json cases %+v", rep.Cases)
	}
	// Why the run is partial: each knob that made it less than the standard suite.
	partial := strings.Join(rep.Partial, "\n")
	for _, want := range []string{"--quick", "only the cases matching", "runs of 150ms after a 0s warm-up", "no soak run"} {
		if !strings.Contains(partial, want) {
			t.Errorf("partial reasons %q lack %q", rep.Partial, want)
		}
	}
	if strings.Contains(partial, "--sink") {
		t.Errorf("partial reasons %q name the sink, which ran", rep.Partial)
	}
	png, _ := os.ReadFile(filepath.Join(dir, "latest.png"))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("latest.png is not a PNG (%d bytes)", len(png))
	}
}

// wholeRun writes a report that is the whole suite (no partial reasons) as run name into
// dir, the way the suite does.
func wholeRun(t *testing.T, dir, name string, partial ...string) *report.Report {
	t.Helper()
	r := func(conns, pipeline int, ops float64) *load.Result {
		return &load.Result{Proto: "counter", Workload: "pairs", Conns: conns, Pipeline: pipeline, OpsPerSec: ops, ReqPerSec: 2 * ops,
			Latency: load.Summary{Count: 10, P50: 50, P99: 99}, Outcomes: map[string]uint64{"ok": 20}, Errors: map[string]uint64{}}
	}
	rep := &report.Report{Machine: report.ThisMachine(), Duration: "5s", Rounds: 1, Partial: partial,
		Targets: []report.Target{{Name: "tallyd", Proto: "counter", Addr: "127.0.0.1:1"}},
		Cases: []*report.Case{
			{Name: "pairs 1x1", Series: "pipeline 1", Results: map[string]*load.Result{"tallyd": r(1, 1, 20_000)}},
			{Name: "pairs 64x16", Series: "pipeline 16", Results: map[string]*load.Result{"tallyd": r(64, 16, 1.25e6)}},
		}}
	var out bytes.Buffer
	if err := writeSuite(rep, dir, name, "png", &out); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestPublishCopiesAWholeRun(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "results")
	doc := filepath.Join(filepath.Dir(to), "BENCH.md")
	os.WriteFile(doc, []byte("# Bench\n\nintro\n\n<!-- latest:begin -->\nold\n<!-- latest:end -->\n\ntail\n"), 0o644)
	rep := wholeRun(t, from, "latest")
	os.WriteFile(filepath.Join(from, "aof.json"), []byte("[]\n"), 0o644)
	os.WriteFile(filepath.Join(from, "aof.md"), []byte("# aof\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"publish", "--from", from, "--to", to, "--update", doc}, &out, &errOut); code != 0 {
		t.Fatalf("publish: exit %d\n%s", code, errOut.String())
	}
	for _, f := range []string{"latest.json", "latest.md", "latest.png", "aof.json", "aof.md"} {
		a, _ := os.ReadFile(filepath.Join(from, f))
		b, err := os.ReadFile(filepath.Join(to, f))
		if err != nil || !bytes.Equal(a, b) || len(b) == 0 {
			t.Errorf("%s: published %d bytes of %d (%v)", f, len(b), len(a), err)
		}
	}
	b, _ := os.ReadFile(doc)
	var body bytes.Buffer
	rep.Markdown(&body, "results/latest.png")
	want := "# Bench\n\nintro\n\n<!-- latest:begin -->\n" + body.String() + "<!-- latest:end -->\n\ntail\n"
	if string(b) != want {
		t.Errorf("spliced document:\n%s\nwant:\n%s", b, want)
	}
	if !strings.Contains(string(b), "](results/latest.png)") || !strings.Contains(string(b), "| **pairs 64x16** | tallyd | 1,250,000 |") {
		t.Errorf("spliced document lacks the chart or the table:\n%s", b)
	}
}

// A run whose chart cannot be drawn leaves no chart: not the one of an earlier run, which
// publish would copy beside this run's table.
func TestSuiteRemovesAnEarlierChart(t *testing.T) {
	dir := t.TempDir()
	wholeRun(t, dir, "latest")
	os.WriteFile(filepath.Join(dir, "latest.svg"), []byte("<svg/>"), 0o644)
	rep := &report.Report{Targets: []report.Target{{Name: "tallyd", Proto: "counter"}},
		Cases: []*report.Case{{Name: "hot 64x16", Results: map[string]*load.Result{"tallyd": {Conns: 64, OpsPerSec: 1}}}}}
	var out bytes.Buffer
	if err := writeSuite(rep, dir, "latest", "png", &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"latest.png", "latest.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v) after a run without a chart", f, err)
		}
	}
	if md, _ := os.ReadFile(filepath.Join(dir, "latest.md")); bytes.Contains(md, []byte("![")) {
		t.Errorf("latest.md refers to a chart:\n%s", md)
	}
}

func TestPublishRefusesAPartialRun(t *testing.T) {
	from, to := t.TempDir(), filepath.Join(t.TempDir(), "results")
	doc := filepath.Join(t.TempDir(), "BENCH.md")
	const orig = "<!-- latest:begin -->\nold\n<!-- latest:end -->\n"
	os.WriteFile(doc, []byte(orig), 0o644)
	wholeRun(t, from, "compare")
	wholeRun(t, from, "latest", `only the cases matching "^pairs 1x1$"`)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"publish", "--from", from, "--to", to, "--update", doc}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), `latest is a partial run: only the cases matching "^pairs 1x1$"`) ||
		!strings.Contains(errOut.String(), "nothing published") {
		t.Errorf("publish of a partial run: exit %d, %q", code, errOut.String())
	}
	// Not even the whole run beside it: a refusal writes nothing.
	if _, err := os.Stat(to); !os.IsNotExist(err) {
		t.Errorf("publish wrote %s (%v)", to, err)
	}
	if b, _ := os.ReadFile(doc); string(b) != orig {
		t.Errorf("publish changed the document:\n%s", b)
	}
	// Named, the whole run alone goes.
	errOut.Reset()
	if code := run(context.Background(), []string{"publish", "--from", from, "--to", to, "--update", doc, "compare"}, &out, &errOut); code != 0 {
		t.Fatalf("publish compare: exit %d, %s", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(to, "compare.json")); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(to, "latest.json")); !os.IsNotExist(err) {
		t.Errorf("the partial run was published too (%v)", err)
	}
	// Nothing to publish is an error, and so is a name that is a path.
	for _, args := range [][]string{{"publish", "--from", t.TempDir()}, {"publish", "--from", from, "../latest"}} {
		if code := run(context.Background(), args, &out, &errOut); code == 0 {
			t.Errorf("%q: exit 0", args)
		}
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"suite", "--help"}, {"sink", "--help"}, {"publish", "--help"}, {"run", "--help"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		if code != 0 || !strings.Contains(out.String(), "Usage") || !strings.Contains(out.String(), "--") || errOut.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--conns", "x"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--conns") {
		t.Errorf("a bad flag: exit %d, %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{"gopher"}, &out, &errOut); code != 2 {
		t.Errorf("an unknown command: exit %d", code)
	}
}

func TestTargetFlag(t *testing.T) {
	tg, err := targetFlag("redis=resp@127.0.0.1:6379")
	if err != nil || tg.Name != "redis" || tg.Proto != "resp" || tg.Addr != "127.0.0.1:6379" {
		t.Errorf("targetFlag = %+v, %v", tg, err)
	}
	for _, bad := range []string{"redis", "redis=resp", "=resp@x:1", "r=nope@x:1"} {
		if _, err := targetFlag(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSuiteRunsLockCasesWhereTargetsSpeakThem(t *testing.T) {
	_, addr := sink(t, "counter")
	_, raddr := sink(t, "resp")
	pool, paddr := sink(t, "pool")
	sl, saddr := sink(t, "slock")
	text, taddr := sink(t, "slock-text")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := suiteCmd(context.Background(), []string{"--target", "tallyd=counter@" + addr, "--target", "redis=resp@" + raddr,
		"--endpoint", "tallyd=pool@" + paddr, "--endpoint", "tallyd=slock@" + saddr, "--endpoint", "tallyd=slock-text@" + taddr,
		"--cases", `^(pool|slock|slock-text) pairs 16x1$|^pool contention|^pairs 1x1$`, "--duration", "500ms", "--warmup", "0s",
		"--out", dir, "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if pool.Requests() == 0 || sl.Requests() == 0 || text.Requests() == 0 {
		t.Errorf("sinks answered pool %d, slock %d, slock-text %d requests", pool.Requests(), sl.Requests(), text.Requests())
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	protos := map[string]string{}
	for _, c := range rep.Cases {
		protos[c.Name] = c.Proto
		if c.Proto != "" && (c.Results["redis"] != nil || c.Results["tallyd"] == nil || c.Results["tallyd"].Proto != c.Proto ||
			c.Results["tallyd"].Ops == 0) {
			t.Errorf("case %s (%s) results %+v: want tallyd's alone, in its protocol", c.Name, c.Proto, c.Results)
		}
	}
	want := map[string]string{"pairs 1x1": "", "pool pairs 16x1": "pool", "slock pairs 16x1": "slock",
		"slock-text pairs 16x1": "slock-text", "pool contention 64x1 8 keys": "pool"}
	if len(protos) != len(want) {
		t.Errorf("cases %v, want %v", protos, want)
	}
	for name, p := range want {
		if got, ok := protos[name]; !ok || got != p {
			t.Errorf("case %s: protocol %q (ran: %v), want %q", name, got, ok, p)
		}
	}
	if rep.Targets[0].Endpoints["slock-text"] != taddr {
		t.Errorf("targets %+v", rep.Targets)
	}
	for _, bad := range [][]string{{"--endpoint", "yrmcds=pool@" + paddr}, {"--endpoint", "tallyd=pool"}} {
		args := append([]string{"--target", "tallyd=counter@" + addr, "--out", dir, "-q"}, bad...)
		if err := suiteCmd(context.Background(), args, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--endpoint") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The TLS cases run where a target has a PROTO+tls endpoint, over TLS, beside the same cases
// in plain text; without --tls-ca the suite says what is missing.
func TestSuiteRunsTLSCases(t *testing.T) {
	dir := t.TempDir()
	var errOut, out bytes.Buffer
	if code := run(context.Background(), []string{"tls-cert", "--out", dir}, &out, &errOut); code != 0 {
		t.Fatalf("tls-cert: exit %d: %s", code, errOut.String())
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	_, addr := sink(t, "counter")
	text, taddr := sink(t, "slock-text")
	s, tlsAddr := sinkOn(t, "slock-text", func(l net.Listener) net.Listener {
		return tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
	})
	args := []string{"--target", "tallyd=counter@" + addr, "--endpoint", "tallyd=slock-text@" + taddr,
		"--endpoint", "tallyd=slock-text+tls@" + tlsAddr, "--cases", `^slock-text (pairs 16x1( TLS)?$|churn)`,
		"--duration", "200ms", "--warmup", "0s", "--out", dir, "-q"}
	if err := suiteCmd(context.Background(), args, &out, &errOut); err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Fatalf("TLS endpoints without --tls-ca: %v", err)
	}
	if err := suiteCmd(context.Background(), append(args, "--tls-ca", filepath.Join(dir, "cert.pem")), &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if text.Requests() == 0 || s.Requests() == 0 {
		t.Errorf("plain sink answered %d, TLS sink %d", text.Requests(), s.Requests())
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range rep.Cases {
		r := c.Results["tallyd"]
		got[c.Name] = r != nil && r.TLS
		if r == nil || (r.Ops == 0 && (r.Churn == nil || r.Churn.Cycles == 0)) {
			t.Errorf("case %s: %+v", c.Name, r)
		}
	}
	want := map[string]bool{"slock-text pairs 16x1": false, "slock-text pairs 16x1 TLS": true,
		"slock-text churn 200/s": false, "slock-text churn 200/s TLS": true}
	if len(got) != len(want) {
		t.Errorf("cases %v, want %v", got, want)
	}
	for name, tlsOn := range want {
		if g, ok := got[name]; !ok || g != tlsOn {
			t.Errorf("case %s: ran %v, over TLS %v; want over TLS %v", name, ok, g, tlsOn)
		}
	}
}

// The Redis lock cases run on both targets; one without DELEX runs the first as EVALSHA, and
// the report says so and counts acquisitions and releases.
func TestSuiteRunsRedisLockCasesBesideRedis(t *testing.T) {
	_, addr := sink(t, "counter")
	_, raddr := sink(t, "resp")
	delex, daddr := sink(t, "redis-lock")
	lua, laddr := sink(t, "redis-lock-lua")
	rlua, rladdr := sink(t, "redis-lock-lua")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := suiteCmd(context.Background(), []string{"--target", "tallyd=counter@" + addr, "--target", "redis=resp@" + raddr,
		"--endpoint", "tallyd=redis-lock@" + daddr, "--endpoint", "tallyd=redis-lock-lua@" + laddr,
		"--endpoint", "redis=redis-lock-lua@" + rladdr, "--cases", `^lock `, "--duration", "500ms", "--warmup", "0s",
		"--out", dir, "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if delex.Requests() == 0 || lua.Requests() == 0 || rlua.Requests() == 0 {
		t.Errorf("sinks answered DELEX %d, tallyd EVALSHA %d, redis EVALSHA %d requests", delex.Requests(), lua.Requests(), rlua.Requests())
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"lock SET NX PX + DELEX IFEQ": {"redis-lock", "redis-lock-lua"},
		"lock release by EVALSHA": {"redis-lock-lua", "redis-lock-lua"}}
	if len(rep.Cases) != len(want) {
		t.Fatalf("%d cases, want %d", len(rep.Cases), len(want))
	}
	for _, c := range rep.Cases {
		w, ok := want[c.Name]
		td, rd := c.Results["tallyd"], c.Results["redis"]
		if !ok || td == nil || rd == nil || td.Proto != w[0] || rd.Proto != w[1] {
			t.Errorf("case %s: results %+v, want tallyd in %s, redis in %s", c.Name, c.Results, w[0], w[1])
			continue
		}
		for _, r := range []*load.Result{td, rd} {
			if r.Acquired == 0 || r.Released == 0 || len(r.Errors) != 0 {
				t.Errorf("case %s on %s: acquired %d, released %d, errors %v", c.Name, r.Label, r.Acquired, r.Released, r.Errors)
			}
		}
	}
	md := out.String()
	for _, s := range []string{"lock SET NX PX + DELEX IFEQ on redis: ran as protocol redis-lock-lua, as redis does not speak redis-lock.",
		"lock release by EVALSHA on tallyd: ", " acquisitions/s ("} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "lock release by EVALSHA on tallyd: ran as") {
		t.Errorf("report says a case ran in another protocol where it did not:\n%s", md)
	}
}
