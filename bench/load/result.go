package load

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Merge returns the sum of rs: counts, time and latency histograms added up, rates
// over the total time. The rs must be runs of the same workload; RSS is the last one's.
func Merge(rs ...*Result) *Result {
	if len(rs) == 0 {
		return nil
	}
	m := *rs[0]
	m.hist = NewHistogram()
	m.Outcomes = map[string]uint64{}
	m.Errors = map[string]uint64{}
	m.Rounds, m.Seconds, m.Requests, m.Ops, m.CPU, m.Waited, m.Acquired, m.Released = 0, 0, 0, 0, 0, 0, 0, 0
	m.ByRound = nil
	if rs[0].Churn != nil {
		m.churn = NewHistogram()
		m.Churn = &ChurnResult{Rate: rs[0].Churn.Rate}
	}
	for _, r := range rs {
		if len(r.ByRound) > 0 {
			m.ByRound = append(m.ByRound, r.ByRound...)
		} else {
			m.ByRound = append(m.ByRound, r.OpsPerSec)
		}
		m.Rounds += r.Rounds
		m.Seconds += r.Seconds
		m.Requests += r.Requests
		m.Ops += r.Ops
		m.Waited += r.Waited
		m.Acquired += r.Acquired
		m.Released += r.Released
		m.CPU += r.CPU
		if r.hist != nil {
			m.hist.Merge(r.hist)
		}
		for k, v := range r.Outcomes {
			m.Outcomes[k] += v
		}
		for k, v := range r.Errors {
			m.Errors[k] += v
		}
		if r.Churn != nil && m.Churn != nil {
			m.Churn.Cycles += r.Churn.Cycles
			m.Churn.Failed += r.Churn.Failed
			m.Churn.Skipped += r.Churn.Skipped
			if r.churn != nil {
				m.churn.Merge(r.churn)
			}
		}
		if r.RSS != nil {
			m.RSS = r.RSS
		}
		if m.FirstError == "" {
			m.FirstError = r.FirstError
		}
	}
	m.finish()
	return &m
}

// Spread returns how far apart the rounds' ops/s are, (max - min) / mean, or 0 for
// fewer than two rounds.
func (r *Result) Spread() float64 {
	if len(r.ByRound) < 2 {
		return 0
	}
	lo, hi, sum := r.ByRound[0], r.ByRound[0], 0.0
	for _, v := range r.ByRound {
		lo, hi, sum = min(lo, v), max(hi, v), sum+v
	}
	if sum == 0 {
		return 0
	}
	return (hi - lo) / (sum / float64(len(r.ByRound)))
}

// Grouped formats v rounded to an integer with thousands separators: 1,234,567.
func Grouped(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Micros formats a latency given in microseconds with a fitting unit.
func Micros(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 10:
		return strconv.FormatFloat(us, 'f', 2, 64) + "µs"
	case us < 1000:
		return strconv.FormatFloat(us, 'f', 1, 64) + "µs"
	case us < 1e6:
		return strconv.FormatFloat(us/1e3, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(us/1e6, 'f', 2, 64) + "s"
}

// Describe returns a one-line description of the run's shape.
func (r *Result) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s on %s: %d conns", r.Proto, r.Workload, r.Addr, r.Conns)
	if r.Idle > 0 {
		fmt.Fprintf(&b, " + %d idle", r.Idle)
	}
	if r.Rate > 0 {
		fmt.Fprintf(&b, ", open loop at %s ops/s", Grouped(r.Rate))
	} else {
		fmt.Fprintf(&b, " x %d pipelined", r.Pipeline)
	}
	if r.Keys > 0 {
		fmt.Fprintf(&b, ", %d keys", r.Keys)
		if r.Dist != "" {
			fmt.Fprintf(&b, " %s", r.Dist)
		}
	} else {
		b.WriteString(", a key per conn")
	}
	if r.Max > 0 {
		fmt.Fprintf(&b, ", %s holder(s) a key, timeout %s", Grouped(float64(r.Max)), Micros(r.Timeout*1e3))
	}
	if r.Grant {
		b.WriteString(", release once granted")
	}
	if r.Churn != nil {
		fmt.Fprintf(&b, ", churn %s/s", Grouped(r.Churn.Rate))
	}
	return b.String()
}

// Figure is one line of a summary: a name and how to get it from a Result.
type Figure struct {
	Name   string
	Value  func(*Result) float64
	Format func(float64) string
	Higher bool // whether more is better
}

// Figures are the lines of the summary, in order.
var Figures = []Figure{
	{"ops/s", func(r *Result) float64 { return r.OpsPerSec }, Grouped, true},
	{"requests/s", func(r *Result) float64 { return r.ReqPerSec }, Grouped, true},
	{"latency p50", func(r *Result) float64 { return r.Latency.P50 }, Micros, false},
	{"latency p90", func(r *Result) float64 { return r.Latency.P90 }, Micros, false},
	{"latency p99", func(r *Result) float64 { return r.Latency.P99 }, Micros, false},
	{"latency p99.9", func(r *Result) float64 { return r.Latency.P999 }, Micros, false},
	{"latency max", func(r *Result) float64 { return r.Latency.Max }, Micros, false},
	{"errors", func(r *Result) float64 { return float64(r.errorCount()) }, Grouped, false},
}

func (r *Result) errorCount() uint64 {
	var n uint64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// WriteText writes a human summary of r.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.Describe())
	fmt.Fprintf(w, "  %.1fs measured", r.Seconds)
	if r.Rounds > 1 {
		fmt.Fprintf(w, " over %d rounds (ops/s spread %.0f%%)", r.Rounds, 100*r.Spread())
	}
	fmt.Fprintf(w, ", %s ops, %s requests\n", Grouped(float64(r.Ops)), Grouped(float64(r.Requests)))
	for _, f := range Figures {
		fmt.Fprintf(w, "  %-14s %s\n", f.Name, f.Format(f.Value(r)))
	}
	writeCounts(w, "  replies", r.Outcomes)
	if r.Acquired > 0 || r.Released > 0 {
		fmt.Fprintf(w, "  locks          %s acquired, %s released\n", Grouped(float64(r.Acquired)), Grouped(float64(r.Released)))
	}
	if r.Waited > 0 {
		fmt.Fprintf(w, "  waited         %s acquires waited for the lock (their probe was answered first)\n", Grouped(float64(r.Waited)))
	}
	writeCounts(w, "  errors by kind", r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first protocol error: %s\n", r.FirstError)
	}
	if c := r.Churn; c != nil {
		fmt.Fprintf(w, "  churn          %s cycles (%s/s asked), %d failed, %d skipped, cycle p50 %s p99 %s\n",
			Grouped(float64(c.Cycles)), Grouped(c.Rate), c.Failed, c.Skipped, Micros(c.Latency.P50), Micros(c.Latency.P99))
	}
	if r.CPUPerReq > 0 {
		fmt.Fprintf(w, "  generator cpu  %.2fs, %.0f ns per request (%s requests/s on a core of its own)\n",
			r.CPU, r.CPUPerReq, Grouped(1e9/r.CPUPerReq))
	}
	if s := r.RSS; s != nil {
		fmt.Fprintf(w, "  server rss     start %s KiB, active %s KiB, held %s KiB, end %s KiB",
			Grouped(float64(s.Start)), Grouped(float64(s.Active)), Grouped(float64(s.Held)), Grouped(float64(s.End)))
		if r.Idle > 0 {
			fmt.Fprintf(w, ", %s B per idle conn", Grouped(s.PerIdle))
		}
		fmt.Fprintln(w)
	}
}

func writeCounts(w io.Writer, title string, m map[string]uint64) {
	if len(m) == 0 {
		fmt.Fprintf(w, "%s: none\n", title)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "%s:", title)
	for _, k := range keys {
		fmt.Fprintf(w, " %s %s", k, Grouped(float64(m[k])))
	}
	fmt.Fprintln(w)
}

// Ratio returns a / b, or NaN when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// WriteCompare writes each figure of a and b side by side with the ratio a/b.
func WriteCompare(w io.Writer, a, b *Result) {
	fmt.Fprintf(w, "A: %s\nB: %s\n", a.Describe(), b.Describe())
	fmt.Fprintf(w, "  %.1fs measured each over %d rounds, alternating A and B; ops/s spread between rounds: A %.0f%%, B %.0f%%\n",
		a.Seconds, a.Rounds, 100*a.Spread(), 100*b.Spread())
	fmt.Fprintf(w, "  %-14s %16s %16s %8s\n", "", "A", "B", "A/B")
	for _, f := range Figures {
		va, vb := f.Value(a), f.Value(b)
		ratio := "-"
		if x := Ratio(va, vb); !math.IsNaN(x) {
			ratio = strconv.FormatFloat(x, 'f', 2, 64)
		}
		fmt.Fprintf(w, "  %-14s %16s %16s %8s\n", f.Name, f.Format(va), f.Format(vb), ratio)
	}
	writeCounts(w, "  A errors by kind", a.Errors)
	writeCounts(w, "  B errors by kind", b.Errors)
}
