// Package report turns the results of a tallyd-bench suite into a Markdown table,
// a check against tallyd's performance targets, and a chart.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tallyd/tallyd/bench/load"
)

// Target is a server the suite ran against.
type Target struct {
	Name  string `json:"name"`
	Proto string `json:"proto"`
	Addr  string `json:"addr"`
	PID   int    `json:"pid,omitempty"`
	// Endpoints are where the same server speaks other protocols, by protocol name: the
	// cases of those protocols run there.
	Endpoints map[string]string `json:"endpoints,omitempty"`
}

// Endpoint returns where t speaks proto ("" is its own protocol), and false if nowhere.
func (t *Target) Endpoint(proto string) (string, bool) {
	if proto == "" || proto == t.Proto {
		return t.Addr, true
	}
	addr, ok := t.Endpoints[proto]
	return addr, ok
}

// Case is one workload of the suite and its result on each target.
type Case struct {
	Name    string                  `json:"name"`
	About   string                  `json:"about"`
	Proto   string                  `json:"proto,omitempty"`  // the case's protocol; "": each target's own
	Series  string                  `json:"series,omitempty"` // chart line, e.g. "pipeline 16"
	Results map[string]*load.Result `json:"results"`          // by target name
}

// Report is a whole suite run.
type Report struct {
	Started  time.Time `json:"started"`
	Machine  Machine   `json:"machine"`
	Notes    []string  `json:"notes,omitempty"`
	Targets  []Target  `json:"targets"`
	Cases    []*Case   `json:"cases"`
	Duration string    `json:"duration_per_run"`
	Rounds   int       `json:"rounds"`
	// Generator holds runs against a trivial sink: what the load generator can do.
	Generator []*load.Result `json:"generator,omitempty"`
	// Partial says why the run is not the whole standard suite (a case filter, a shorter
	// duration, a failed case, ...); a partial run is not published.
	Partial []string `json:"partial,omitempty"`
	// LoadStart and LoadEnd are the machine's load averages when the suite started and
	// when it ended (nil where unknown): a busy machine makes the figures low (Busy).
	LoadStart *LoadAvg `json:"load_start,omitempty"`
	LoadEnd   *LoadAvg `json:"load_end,omitempty"`
}

// Machine describes where the suite ran.
type Machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory string `json:"memory"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
}

// ThisMachine reads the machine's description from /proc where it can.
func ThisMachine() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), Memory: "unknown", Kernel: runtime.GOOS, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.Cores = 0
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				m.CPU = strings.TrimSpace(v)
			case "processor":
				m.Cores++
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kib, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.Memory = fmt.Sprintf("%.1f GiB", kib/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	return m
}

// Case returns the case named name, or nil.
func (r *Report) Case(name string) *Case {
	for _, c := range r.Cases {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// result returns the result of case name on target, or nil.
func (r *Report) result(name, target string) *load.Result {
	if c := r.Case(name); c != nil {
		return c.Results[target]
	}
	return nil
}

// ReadFile reads a report that WriteJSON wrote.
func ReadFile(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return r, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown writes the machine, the targets check and the table of every case.
func (r *Report) Markdown(w io.Writer, chart string) {
	m := r.Machine
	fmt.Fprintf(w, "Run %s on %s, %d cores, %s, %s, %s.\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), m.CPU, m.Cores, m.Memory, m.Kernel, m.Go)
	r.loadMarkdown(w)
	fmt.Fprintf(w, "Each figure: %s measured per run after a warm-up, %d round(s) per target", r.Duration, r.Rounds)
	if len(r.Targets) > 1 {
		fmt.Fprintf(w, ", targets alternating")
	}
	fmt.Fprintf(w, ". An op is an acquire+release pair (two requests) unless the case says otherwise.")
	if r.Rounds > 1 {
		fmt.Fprintf(w, " Spread: (max - min) / mean of the rounds' ops/s; a large one means something else loaded the machine during a round.")
	}
	fmt.Fprintln(w)
	if len(r.Partial) > 0 {
		fmt.Fprintf(w, "**Partial run**, not the whole standard suite (make bench-publish refuses it): %s.\n", strings.Join(r.Partial, "; "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%s\n", n)
	}
	fmt.Fprintf(w, "\nTargets:")
	for _, t := range r.Targets {
		fmt.Fprintf(w, " %s (%s at %s", t.Name, t.Proto, t.Addr)
		protos := make([]string, 0, len(t.Endpoints))
		for p := range t.Endpoints {
			protos = append(protos, p)
		}
		sort.Strings(protos)
		for _, p := range protos {
			fmt.Fprintf(w, ", %s at %s", p, t.Endpoints[p])
		}
		fmt.Fprintf(w, ");")
	}
	fmt.Fprintf(w, "\n\n")
	if checks := r.Checks(); len(checks) > 0 {
		fmt.Fprintf(w, "### Performance targets\n\n| target | measured | verdict |\n|---|---|---|\n")
		for _, c := range checks {
			fmt.Fprintf(w, "| %s | %s | %s |\n", c.What, c.Measured, c.Verdict())
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "### Results\n\n")
	spread := r.Rounds > 1
	fmt.Fprintf(w, "| case | server | ops/s | requests/s | p50 | p90 | p99 | p99.9 | max | errors |")
	if spread {
		fmt.Fprintf(w, " spread |")
	}
	ref := ""
	if len(r.Targets) > 1 {
		ref = r.Targets[0].Name
		fmt.Fprintf(w, " %s ÷ server |", ref)
	}
	fmt.Fprintf(w, "\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	if spread {
		fmt.Fprintf(w, "--:|")
	}
	if ref != "" {
		fmt.Fprintf(w, "--:|")
	}
	fmt.Fprintln(w)
	for _, c := range r.Cases {
		for i, t := range r.Targets {
			res := c.Results[t.Name]
			if res == nil {
				continue
			}
			name := ""
			if i == 0 || c.Results[r.Targets[0].Name] == nil {
				name = "**" + c.Name + "**"
			}
			l := res.Latency
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", name, t.Name,
				load.Grouped(res.OpsPerSec), load.Grouped(res.ReqPerSec), load.Micros(l.P50), load.Micros(l.P90),
				load.Micros(l.P99), load.Micros(l.P999), load.Micros(l.Max), errorText(res))
			if spread {
				fmt.Fprintf(w, " %.0f%% |", 100*res.Spread())
			}
			if ref != "" {
				ratio := "-"
				if a := c.Results[ref]; a != nil && t.Name != ref {
					ratio = fmtRatio(load.Ratio(a.OpsPerSec, res.OpsPerSec))
				}
				fmt.Fprintf(w, " %s |", ratio)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\nCases:\n\n")
	for _, c := range r.Cases {
		fmt.Fprintf(w, "- **%s**: %s\n", c.Name, c.About)
	}
	extra := r.extras()
	if extra != "" {
		fmt.Fprintf(w, "\n%s", extra)
	}
	if len(r.Generator) > 0 {
		fmt.Fprintf(w, "\n### Load generator check\n\nThe same tool against `tallyd-bench sink`, a trivial server that answers every request OK, pinned to the server's core:\n\n")
		fmt.Fprintf(w, "| load | requests/s | p50 | p99 | generator CPU per request | requests/s per generator core |\n|---|--:|--:|--:|--:|--:|\n")
		for _, g := range r.Generator {
			perCore := "-"
			if g.CPUPerReq > 0 {
				perCore = load.Grouped(1e9 / g.CPUPerReq)
			}
			fmt.Fprintf(w, "| %d conns x %d pipelined pairs | %s | %s | %s | %.0f ns | %s |\n", g.Conns, g.Pipeline,
				load.Grouped(g.ReqPerSec), load.Micros(g.Latency.P50), load.Micros(g.Latency.P99), g.CPUPerReq, perCore)
		}
		fmt.Fprintf(w, "\nThe last column is requests divided by the CPU time the generator used: what it sends with a core to itself, whatever else shares the machine.\n")
	}
	if chart != "" {
		fmt.Fprintf(w, "\n![throughput against connections, and latency percentiles](%s)\n", chart)
	}
}

// errorText sums a result's errors, naming the kinds.
func errorText(r *load.Result) string {
	var n uint64
	var kinds []string
	for k, v := range r.Errors {
		n += v
		kinds = append(kinds, k)
	}
	if n == 0 {
		var notes []string
		if v := r.Outcomes["busy"] + r.Outcomes["not_held"]; v > 0 {
			notes = append(notes, "refused "+load.Grouped(float64(v)))
		}
		if v := r.Outcomes["timed_out"]; v > 0 {
			notes = append(notes, "timed out "+load.Grouped(float64(v)))
		}
		if len(notes) > 0 {
			return "0 (" + strings.Join(notes, ", ") + ")"
		}
		return "0"
	}
	return fmt.Sprintf("%s (%s)", load.Grouped(float64(n)), strings.Join(kinds, ", "))
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "x"
}

// extras describes what the table cannot: churn, RSS and the generator check.
func (r *Report) extras() string {
	var b bytes.Buffer
	for _, c := range r.Cases {
		for _, t := range r.Targets {
			res := c.Results[t.Name]
			if res == nil {
				continue
			}
			if res.Waited > 0 && res.Ops > 0 {
				fmt.Fprintf(&b, "- %s on %s: %s acquires waited for the lock, %.0f%% of the ops (each probe answered before its acquire).\n",
					c.Name, t.Name, load.Grouped(float64(res.Waited)), 100*float64(res.Waited)/float64(res.Ops))
			}
			if c.Proto != "" && res.Proto != "" && res.Proto != c.Proto {
				fmt.Fprintf(&b, "- %s on %s: ran as protocol %s, as %s does not speak %s.\n", c.Name, t.Name, res.Proto, t.Name, c.Proto)
			}
			if d, _ := load.Lookup(res.Proto); d != nil && d.CountLocks && res.Seconds > 0 {
				fmt.Fprintf(&b, "- %s on %s: %s acquisitions/s (%s in all), %s releases, %s SETs refused (key held), %s releases that found the lock gone, %s NOSCRIPT resends.\n",
					c.Name, t.Name, load.Grouped(float64(res.Acquired)/res.Seconds), load.Grouped(float64(res.Acquired)),
					load.Grouped(float64(res.Released)), load.Grouped(float64(res.Outcomes["busy"])),
					load.Grouped(float64(res.Outcomes["lock_lost"])), load.Grouped(float64(res.Outcomes["resent"])))
			}
			if res.Workload == load.Stampede && res.Seconds > 0 {
				fmt.Fprintf(&b, "- %s on %s: %s grants/s, %s QUEUE_FULL/s, %s TIMEOUT/s, wait p99 %s, %d over-grants; generator CPU %.0f%% of a core.\n",
					c.Name, t.Name, load.Grouped(float64(res.Outcomes[load.StampedeGrants])/res.Seconds),
					load.Grouped(float64(res.Outcomes[load.StampedeQueueFull])/res.Seconds),
					load.Grouped(float64(res.Outcomes[load.StampedeTimeouts])/res.Seconds), load.Micros(res.Latency.P99),
					res.Outcomes[load.StampedeOverGrants], 100*res.CPU/res.Seconds)
			}
			if ch := res.Churn; ch != nil {
				fmt.Fprintf(&b, "- %s on %s: %s connect/op/close cycles (%s/s asked, %d failed, %d not started), cycle p50 %s, p99 %s.\n",
					c.Name, t.Name, load.Grouped(float64(ch.Cycles)), load.Grouped(ch.Rate), ch.Failed, ch.Skipped,
					load.Micros(ch.Latency.P50), load.Micros(ch.Latency.P99))
			}
			s := res.RSS
			switch {
			case s == nil:
			case res.Idle > 0:
				fmt.Fprintf(&b, "- %s on %s: server RSS %s KiB with %s active connections, %s KiB once %s idle ones more were open: %s B per idle connection.\n",
					c.Name, t.Name, load.Grouped(float64(s.Active)), load.Grouped(float64(res.Conns)),
					load.Grouped(float64(s.Held)), load.Grouped(float64(res.Idle)), load.Grouped(s.PerIdle))
			case c.Name == CaseSoak && len(s.Series) > 1:
				fmt.Fprintf(&b, "- %s on %s: server RSS %s KiB after the first second of load, %s KiB after %.0fs.\n",
					c.Name, t.Name, load.Grouped(float64(s.Series[0])), load.Grouped(float64(s.Series[len(s.Series)-1])), res.Seconds)
			}
		}
	}
	return b.String()
}

// Check is one performance target and how the run did against it.
type Check struct {
	What     string
	Measured string
	Met      bool
	Short    string // by how much it fell short
	Missing  bool   // the run lacked the figures
}

// Verdict says met, short by how much, or not measured.
func (c Check) Verdict() string {
	switch {
	case c.Missing:
		return "not measured in this run"
	case c.Met:
		return "met"
	}
	return "**short** " + c.Short
}
