package main

import (
	"bytes"
	"context"
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
	s, err := load.NewSink(proto)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Serve(l); close(done) }()
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
	doc := filepath.Join(dir, "BENCH.md")
	os.WriteFile(doc, []byte("# Bench\n\nintro\n\n<!-- latest:begin -->\nold\n<!-- latest:end -->\n\ntail\n"), 0o644)
	var out, errOut bytes.Buffer
	err := suiteCmd(context.Background(), []string{"--target", "tallyd=counter@" + addr, "--target", "redis=resp@" + raddr,
		"--cases", `^pairs (1|4)x1$|^open`, "--quick", "--duration", "150ms", "--warmup", "0s", "--sink", addr,
		"--out", dir, "--update", doc, "--note", "a note", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "latest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| **pairs 1x1** | tallyd |", "|  | redis |", "a note", "Load generator check",
		"| 64 conns x 16 pipelined pairs |", "not measured in this run", "![throughput", "tallyd ÷ server"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latest.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(string(md), "pairs 4x1") || strings.Contains(string(md), "open 64") {
		t.Errorf("latest.md has cases outside --cases (quick has no 4x1; open needs pairs 64x1):\n%s", md)
	}
	var rep report.Report
	js, _ := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Cases) != 1 || rep.Cases[0].Results["tallyd"].Ops == 0 || rep.Cases[0].Results["redis"].Ops == 0 {
		t.Errorf("latest.json cases %+v", rep.Cases)
	}
	png, _ := os.ReadFile(filepath.Join(dir, "latest.png"))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("latest.png is not a PNG (%d bytes)", len(png))
	}
	b, _ := os.ReadFile(doc)
	if !strings.HasPrefix(string(b), "# Bench\n\nintro\n\n<!-- latest:begin -->\n") || !strings.HasSuffix(string(b), "<!-- latest:end -->\n\ntail\n") ||
		strings.Contains(string(b), "old") || !strings.Contains(string(b), "](latest.png)") {
		t.Errorf("spliced document:\n%s", b)
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
		"--cases", `^(pool|slock|slock-text) pairs 16x1$|^pool contention|^pairs 1x1$`, "--duration", "150ms", "--warmup", "0s",
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
