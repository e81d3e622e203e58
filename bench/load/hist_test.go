package load

import (
	"math"
	"testing"
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

func TestSummarizePercentiles(t *testing.T) {
	h := NewHistogram()
	for us := int64(1); us <= 1000; us++ {
		record(h, us*1000) // 1µs .. 1000µs, once each
	}
	s := Summarize(h)
	if s.Count != 1000 {
		t.Errorf("count %d, want 1000", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"mean", s.Mean, 500.5}, {"p50", s.P50, 500}, {"p90", s.P90, 900}, {"p99", s.P99, 990},
		{"p99.9", s.P999, 999}, {"max", s.Max, 1000}} {
		if !near(c.got, c.want, 0.002) { // 3 significant digits
			t.Errorf("%s = %vµs, want %vµs", c.name, c.got, c.want)
		}
	}
}

func TestSummarizeSkewed(t *testing.T) {
	// 990 fast replies and 10 stalls: p99 must still be fast, p99.9 and max the stall.
	h := NewHistogram()
	for i := 0; i < 990; i++ {
		record(h, 20_000)
	}
	for i := 0; i < 10; i++ {
		record(h, 250_000_000)
	}
	s := Summarize(h)
	if !near(s.P50, 20, 0.002) || !near(s.P99, 20, 0.002) {
		t.Errorf("p50 %vµs p99 %vµs, want 20µs", s.P50, s.P99)
	}
	if !near(s.P999, 250_000, 0.002) || !near(s.Max, 250_000, 0.002) {
		t.Errorf("p99.9 %vµs max %vµs, want 250ms", s.P999, s.Max)
	}
}

func TestSummarizeEmptyAndClamped(t *testing.T) {
	if s := Summarize(NewHistogram()); s != (Summary{}) {
		t.Errorf("empty histogram summarized as %+v", s)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("nil histogram summarized as %+v", s)
	}
	h := NewHistogram()
	record(h, -5)
	record(h, 1<<62)
	if h.TotalCount() != 2 {
		t.Fatalf("out-of-range values dropped: count %d", h.TotalCount())
	}
	if s := Summarize(h); !near(s.Max, maxLatency/1e3, 0.002) {
		t.Errorf("max %vµs, want the clamp %vµs", s.Max, maxLatency/1e3)
	}
}

func TestRecorderKeepsOnlyTheWindowInTotal(t *testing.T) {
	rec := newRecorder()
	warm := tally{lat: []int64{1_000_000, 1_000_000}, reqs: 4, ops: 2}
	warm.outcomes[OK] = 4
	rec.flush(&warm)
	in := tally{lat: []int64{5_000, 7_000, 9_000}, reqs: 6, ops: 3, measured: true}
	in.outcomes[OK] = 5
	in.outcomes[Busy] = 1
	in.errs[errIO] = 2
	rec.flush(&in)
	if len(in.lat) != 0 || in.reqs != 0 || !in.measured {
		t.Errorf("flush left the tally %+v; want it empty and still measured", in)
	}
	if rec.totalN.ops != 3 || rec.totalN.reqs != 6 || rec.total.TotalCount() != 3 {
		t.Errorf("total has %d ops %d reqs %d latencies, want 3, 6, 3",
			rec.totalN.ops, rec.totalN.reqs, rec.total.TotalCount())
	}
	if got := Summarize(rec.total).Max; !near(got, 9, 0.002) {
		t.Errorf("total max %vµs includes the warm-up", got)
	}
	c, s := rec.lap()
	if c.ops != 5 || s.Count != 5 || c.errors() != 2 || c.refusals() != 1 {
		t.Errorf("lap: ops %d, latencies %d, errors %d, refusals %d; want 5, 5, 2, 1", c.ops, s.Count, c.errors(), c.refusals())
	}
	if c, s := rec.lap(); c.ops != 0 || s.Count != 0 {
		t.Errorf("second lap not empty: %d ops, %d latencies", c.ops, s.Count)
	}
}

func TestMergeAddsRounds(t *testing.T) {
	a := &Result{Seconds: 2, Requests: 200, Ops: 100, Rounds: 1, hist: NewHistogram(),
		Outcomes: map[string]uint64{"ok": 200}, Errors: map[string]uint64{}}
	b := &Result{Seconds: 3, Requests: 400, Ops: 200, Rounds: 1, hist: NewHistogram(),
		Outcomes: map[string]uint64{"ok": 398, "busy": 2}, Errors: map[string]uint64{"io": 1}}
	record(a.hist, 10_000)
	record(b.hist, 30_000)
	a.OpsPerSec, b.OpsPerSec = 50, 70
	m := Merge(a, b)
	if len(m.ByRound) != 2 || m.ByRound[0] != 50 || m.ByRound[1] != 70 || !near(m.Spread(), 20.0/60, 1e-9) {
		t.Errorf("rounds %v, spread %v; want [50 70], 1/3", m.ByRound, m.Spread())
	}
	if Merge(a).Spread() != 0 {
		t.Error("one round has a spread")
	}
	if m.Rounds != 2 || m.Seconds != 5 || m.Ops != 300 || m.OpsPerSec != 60 || m.ReqPerSec != 120 {
		t.Errorf("merged %+v", m)
	}
	if m.Outcomes["ok"] != 598 || m.Outcomes["busy"] != 2 || m.Errors["io"] != 1 {
		t.Errorf("merged counts %v %v", m.Outcomes, m.Errors)
	}
	if m.Latency.Count != 2 || !near(m.Latency.Max, 30, 0.002) {
		t.Errorf("merged latency %+v", m.Latency)
	}
	if a.Ops != 100 || a.hist.TotalCount() != 1 {
		t.Error("Merge changed its input")
	}
}

func TestFormatting(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -45678: "-45,678"} {
		if got := Grouped(v); got != want {
			t.Errorf("Grouped(%v) = %q, want %q", v, got, want)
		}
	}
	for us, want := range map[float64]string{0: "-", 3.256: "3.26µs", 45.67: "45.7µs", 1500: "1.50ms", 2.5e6: "2.50s"} {
		if got := Micros(us); got != want {
			t.Errorf("Micros(%v) = %q, want %q", us, got, want)
		}
	}
}
