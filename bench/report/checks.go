package report

import (
	"fmt"

	"github.com/tallyd/tallyd/bench/load"
)

// Names of the suite cases the targets are judged on.
const (
	CaseHeadline = "pairs 64x16"
	CaseSerial   = "pairs 16x1"
	CaseActive   = "pairs 1000x1"
	CaseHeld     = "pairs 1000x1 + 18000 idle"
	CaseSoak     = "soak 64x16"
	CasePool     = "pool lock-then-release 16x1"
	CaseSlock    = "slock pairs 16x16"
	CaseFair     = "fairness: PING during 2,000 KEYS"
)

// The performance targets tallyd is built to.
const (
	minHeadline   = 1_000_000 // pairs/s at 64x16
	minOverRedis  = 1.15      // headline, tallyd over Redis
	maxHeldDrop   = 0.20      // throughput lost with 18,000 idle connections
	maxIdleBytes  = 3 << 10   // RSS per idle connection
	maxSoakGrowth = 1 << 10   // KiB of RSS growth during the soak
	maxFairP99    = 10_000    // µs: another client's p99 while one pipelines 2,000 KEYS
	maxFairMax    = 50_000    // µs: and its maximum

	// Orientation figures of the servers tallyd replaces.
	minPool  = 40_000    // PoolCounter pairs/s at 16 connections, two round trips a pair (poolcounterd)
	minSlock = 1_650_000 // slock commands/s with 16 clients: 1.5x slock's own 1.1M
)

// Checks judges the first target (tallyd) against its performance targets, comparing
// with the target named "redis" where there is one, and against the figures of the
// PoolCounter and slock servers it replaces.
func (r *Report) Checks() []Check {
	if len(r.Targets) == 0 {
		return nil
	}
	me := r.Targets[0].Name
	redis := ""
	for _, t := range r.Targets[1:] {
		if t.Name == "redis" {
			redis = t.Name
		}
	}
	var out []Check

	head := r.result(CaseHeadline, me)
	c := Check{What: "64 conns x 16 pipelined pairs: >= 1.0M pairs/s"}
	if head == nil {
		c.Missing = true
	} else {
		c.Measured = load.Grouped(head.OpsPerSec) + " pairs/s"
		c.Met = head.OpsPerSec >= minHeadline
		c.Short = short(head.OpsPerSec, minHeadline)
	}
	out = append(out, c)

	out = append(out, r.versus(CaseHeadline, me, redis, minOverRedis, "64x16: >= 1.15x Redis INCR+DECR pairs"))
	out = append(out, r.versus(CaseSerial, me, redis, 1, "16 conns, no pipelining: >= Redis pairs/s"))

	act, held := r.result(CaseActive, me), r.result(CaseHeld, me)
	c = Check{What: "19,000 conns held, 1,000 active: within 20% of 1,000 alone"}
	if act == nil || held == nil {
		c.Missing = true
	} else {
		ratio := load.Ratio(held.OpsPerSec, act.OpsPerSec)
		c.Measured = fmt.Sprintf("%s vs %s pairs/s (%.0f%%)", load.Grouped(held.OpsPerSec), load.Grouped(act.OpsPerSec), 100*ratio)
		c.Met = ratio >= 1-maxHeldDrop
		c.Short = short(held.OpsPerSec, (1-maxHeldDrop)*act.OpsPerSec)
	}
	out = append(out, c)

	c = Check{What: "server RSS growth <= 3 KiB per idle conn"}
	if held == nil || held.RSS == nil || held.Idle == 0 {
		c.Missing = true
	} else {
		c.Measured = fmt.Sprintf("%s B per idle conn (%s idle)", load.Grouped(held.RSS.PerIdle), load.Grouped(float64(held.Idle)))
		c.Met = held.RSS.PerIdle <= maxIdleBytes
		c.Short = fmt.Sprintf("by %s B per conn", load.Grouped(held.RSS.PerIdle-maxIdleBytes))
	}
	out = append(out, c)

	soak := r.result(CaseSoak, me)
	c = Check{What: "memory flat under steady load (RSS over the soak run)"}
	if soak == nil || soak.RSS == nil || len(soak.RSS.Series) < 2 {
		c.Missing = true
	} else {
		s := soak.RSS.Series
		grow := s[len(s)-1] - s[0]
		c.Measured = fmt.Sprintf("%s -> %s KiB over %.0fs", load.Grouped(float64(s[0])), load.Grouped(float64(s[len(s)-1])), soak.Seconds)
		c.Met = grow <= maxSoakGrowth
		c.Short = fmt.Sprintf("grew %s KiB", load.Grouped(float64(grow)))
	}
	out = append(out, c)

	fair := r.result(CaseFair, me)
	c = Check{What: "while one client pipelines 2,000 KEYS over 100k keys: another's p99 < 10 ms, max < 50 ms"}
	if fair == nil || fair.Latency.Count == 0 {
		c.Missing = true
	} else {
		c.Measured = fmt.Sprintf("p99 %s, max %s (%s PINGs)", load.Micros(fair.Latency.P99), load.Micros(fair.Latency.Max),
			load.Grouped(float64(fair.Latency.Count)))
		c.Met = fair.Latency.P99 < maxFairP99 && fair.Latency.Max < maxFairMax
		c.Short = fmt.Sprintf("p99 %s of %s, max %s of %s", load.Micros(fair.Latency.P99), load.Micros(maxFairP99),
			load.Micros(fair.Latency.Max), load.Micros(maxFairMax))
	}
	out = append(out, c)

	out = append(out, r.atLeast(CasePool, me, minPool, false,
		"PoolCounter, 16 conns, RELEASE once LOCKED: >= 40k pairs/s (poolcounterd's)"))
	out = append(out, r.atLeast(CaseSlock, me, minSlock, true,
		"slock binary, 16 conns: >= 1.65M commands/s (1.5x slock's own 1.1M)"))
	return out
}

// atLeast checks that target me reached want ops/s (requests/s if reqs) in case name.
func (r *Report) atLeast(name, me string, want float64, reqs bool, what string) Check {
	c := Check{What: what}
	res := r.result(name, me)
	if res == nil {
		c.Missing = true
		return c
	}
	got, unit := res.OpsPerSec, " pairs/s"
	if reqs {
		got, unit = res.ReqPerSec, " commands/s"
	}
	c.Measured = load.Grouped(got) + unit + " (" + name + ")"
	c.Met = got >= want
	c.Short = short(got, want)
	if busy := res.CPUPerReq * res.ReqPerSec / 1e9; busy >= 0.9 && !c.Met {
		c.Short += fmt.Sprintf("; the generator kept %.0f%% of its core busy: its bound, not only the server's", 100*busy)
	}
	return c
}

// versus checks that target me did at least factor times what other did in case name.
func (r *Report) versus(name, me, other string, factor float64, what string) Check {
	c := Check{What: what}
	a, b := r.result(name, me), r.result(name, other)
	if a == nil || b == nil || other == "" {
		c.Missing = true
		return c
	}
	ratio := load.Ratio(a.OpsPerSec, b.OpsPerSec)
	c.Measured = fmt.Sprintf("%s vs %s pairs/s (%.2fx)", load.Grouped(a.OpsPerSec), load.Grouped(b.OpsPerSec), ratio)
	c.Met = ratio >= factor
	c.Short = short(a.OpsPerSec, factor*b.OpsPerSec)
	return c
}

// short says by how much got falls below want.
func short(got, want float64) string {
	if want <= 0 {
		return ""
	}
	return fmt.Sprintf("by %.0f%% (%s below %s)", 100*(want-got)/want, load.Grouped(want-got), load.Grouped(want))
}
