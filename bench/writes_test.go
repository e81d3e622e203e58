package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/bench/load"
)

// The writes command's flags land in the configuration, the defaults are make
// bench-cluster's shape, and bad values are refused before anything connects.
func TestWritesFlags(t *testing.T) {
	var errOut bytes.Buffer
	f, err := parseWrites(nil, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	c := f.cfg
	if c.Addr != "127.0.0.1:6379" || c.Conns != 64 || c.Pipeline != 16 || c.Keys != 100_000 ||
		c.Duration != 10*time.Second || c.Warmup != time.Second || c.WaitReplicas != 0 || c.Consistency != "" ||
		c.Progress == nil || f.json || c.Locks {
		t.Errorf("defaults: %+v", c)
	}
	f, err = parseWrites([]string{"--addr", "127.0.0.1:7", "--conns", "3", "--pipeline", "5", "--keys", "9",
		"--duration", "2s", "--warmup", "0s", "--wait", "1", "--wait-timeout", "250ms", "--consistency", "ALL",
		"--prefix", "p:", "--seed", "4", "--label", "L", "--json", "-q", "--locks", "--await-grant"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	c = f.cfg
	if c.Addr != "127.0.0.1:7" || c.Conns != 3 || c.Pipeline != 5 || c.Keys != 9 || c.Duration != 2*time.Second ||
		c.Warmup != 0 || c.WaitReplicas != 1 || c.WaitTimeout != 250*time.Millisecond || c.Consistency != "ALL" ||
		c.Prefix != "p:" || c.Seed != 4 || c.Label != "L" || !f.json || c.Progress != nil || !c.Locks || !c.AwaitGrant {
		t.Errorf("parsed: %+v json=%v", c, f.json)
	}
	for _, args := range [][]string{
		{"--conns", "0"}, {"--pipeline", "0"}, {"--keys", "0"}, {"--duration", "0s"}, {"--warmup", "-1s"},
		{"--wait", "-1"}, {"--wait-timeout", "-1s"}, {"--conns", "x"}, {"extra"}, {"--bogus"}, {"--await-grant"},
	} {
		if _, err := parseWrites(args, &errOut); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// Against the RESP sink (":1" to every command) the writes command counts every INCR as a
// write and not the WAITs, and times rounds.
func TestWritesCommandJSON(t *testing.T) {
	s, addr := sink(t, "resp")
	var out, errOut bytes.Buffer
	err := writesCmd(context.Background(), []string{"--addr", addr, "--conns", "2", "--pipeline", "4", "--keys", "10",
		"--duration", "300ms", "--warmup", "0s", "--wait", "1", "--json", "-q"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res load.WritesResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if res.Rounds == 0 || res.Writes != 4*res.Rounds || res.Latency.Count != res.Rounds || res.Wait != "WAIT 1 0" ||
		len(res.Errors) != 0 || res.WritesPerSec <= 0 || s.Requests() < 5*res.Rounds {
		t.Errorf("result %+v; sink answered %d", res, s.Requests())
	}
	if errOut.Len() != 0 {
		t.Errorf("-q still wrote %q", errOut.String())
	}
	out.Reset()
	if err := writesCmd(context.Background(), []string{"--addr", addr, "--conns", "1", "--duration", "200ms",
		"--warmup", "0s", "-q"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"writes on " + addr, "rounds of 16 x INCR", "writes/s", "round latency p50", "errors by kind: none"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
