package load

import (
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds from 1 ns to maxLatency with 3 significant
// digits; longer ones are recorded as maxLatency.
const (
	maxLatency = 60_000_000_000
	sigFigs    = 3
)

// NewHistogram returns an empty latency histogram (nanoseconds).
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, maxLatency, sigFigs)
}

// Summary is a latency distribution in microseconds.
type Summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p99_9_us"`
	Max   float64 `json:"max_us"`
}

// Summarize returns h's count, mean, percentiles and maximum in microseconds.
func Summarize(h *hdrhistogram.Histogram) Summary {
	if h == nil || h.TotalCount() == 0 {
		return Summary{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Summary{
		Count: uint64(h.TotalCount()),
		Mean:  h.Mean() / 1e3,
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}

// record adds ns to h, clamping it into the histogram's range.
func record(h *hdrhistogram.Histogram, ns int64) {
	if ns < 1 {
		ns = 1
	} else if ns > maxLatency {
		ns = maxLatency
	}
	h.RecordValue(ns) // cannot fail inside the range
}

// tally is what a connection counted since it last flushed.
type tally struct {
	lat      []int64 // op latencies, ns
	reqs     uint64  // replies received
	ops      uint64  // ops completed
	waited   uint64  // acquires that waited for the lock (seen by their probes)
	acquired uint64  // acquires answered OK
	released uint64  // releases answered OK
	outcomes [NumOutcomes]uint64
	errs     [numErrKinds]uint64
	measured bool // whether these fall inside the measured window
}

func (t *tally) reset() {
	lat, measured := t.lat[:0], t.measured
	*t = tally{lat: lat, measured: measured}
}

func (t *tally) empty() bool {
	if len(t.lat) > 0 || t.reqs > 0 || t.ops > 0 || t.waited > 0 || t.acquired > 0 || t.released > 0 {
		return false
	}
	for _, e := range t.errs {
		if e > 0 {
			return false
		}
	}
	for _, o := range t.outcomes {
		if o > 0 {
			return false
		}
	}
	return true
}

// counts is the sum of many tallies.
type counts struct {
	reqs     uint64
	ops      uint64
	waited   uint64
	acquired uint64
	released uint64
	outcomes [NumOutcomes]uint64
	errs     [numErrKinds]uint64
}

func (c *counts) add(t *tally) {
	c.reqs += t.reqs
	c.ops += t.ops
	c.waited += t.waited
	c.acquired += t.acquired
	c.released += t.released
	for i, v := range t.outcomes {
		c.outcomes[i] += v
	}
	for i, v := range t.errs {
		c.errs[i] += v
	}
}

// errors returns the number of error replies and transport errors.
func (c *counts) errors() uint64 {
	var n uint64
	for o, v := range c.outcomes {
		if Outcome(o).Error() {
			n += v
		}
	}
	for _, v := range c.errs {
		n += v
	}
	return n
}

// refusals returns the number of Busy, NotHeld, NotFound and TimedOut replies.
func (c *counts) refusals() uint64 {
	var n uint64
	for o, v := range c.outcomes {
		if o != int(OK) && !Outcome(o).Error() {
			n += v
		}
	}
	return n
}

// recorder gathers the tallies of all connections: the current second for progress
// lines, and the measured window for the result.
type recorder struct {
	mu       sync.Mutex
	tick     *hdrhistogram.Histogram
	tickN    counts
	total    *hdrhistogram.Histogram
	totalN   counts
	scratchH *hdrhistogram.Histogram
}

func newRecorder() *recorder {
	return &recorder{tick: NewHistogram(), total: NewHistogram(), scratchH: NewHistogram()}
}

// flush moves t into the recorder and empties t.
func (r *recorder) flush(t *tally) {
	if t.empty() {
		return
	}
	r.mu.Lock()
	for _, ns := range t.lat {
		record(r.tick, ns)
	}
	r.tickN.add(t)
	if t.measured {
		for _, ns := range t.lat {
			record(r.total, ns)
		}
		r.totalN.add(t)
	}
	r.mu.Unlock()
	t.reset()
}

// lap returns the current second's counts and latency summary and starts the next.
func (r *recorder) lap() (counts, Summary) {
	r.mu.Lock()
	c, h := r.tickN, r.tick
	r.tickN = counts{}
	r.tick, r.scratchH = r.scratchH, h
	r.tick.Reset()
	r.mu.Unlock()
	return c, Summarize(h)
}
