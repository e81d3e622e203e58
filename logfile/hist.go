package logfile

import (
	"sync/atomic"
	"time"
)

// FsyncBounds are the upper bounds of an FsyncHist's buckets: 50 µs to 2.5 s.
var FsyncBounds = [...]time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond}

// FsyncHist is a histogram of fsync durations that a log's writer goroutine observes and any
// goroutine reads, without a lock: each bucket is an atomic counter. A reader may see an
// observation in Count and not yet in its bucket (or the reverse); the next read agrees.
type FsyncHist struct {
	counts [len(FsyncBounds) + 1]atomic.Uint64 // counts[i]: at most FsyncBounds[i]; the last: the rest
	count  atomic.Uint64
	sumNs  atomic.Uint64
	errs   atomic.Uint64 // writes and fsyncs of the log that failed
}

// Observe adds one fsync of duration d.
func (h *FsyncHist) Observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(FsyncBounds) && d > FsyncBounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d))
	h.count.Add(1)
}

// Time runs fsync and observes how long it took (failed or not).
func (h *FsyncHist) Time(fsync func() error) error {
	t := time.Now()
	err := fsync()
	h.Observe(time.Since(t))
	return err
}

// Error counts a failed write (or fsync) of the log.
func (h *FsyncHist) Error() { h.errs.Add(1) }

// FsyncCounts is a copy of an FsyncHist.
type FsyncCounts struct {
	Counts [len(FsyncBounds) + 1]uint64 // not cumulative, as FsyncHist's buckets
	Count  uint64
	Sum    time.Duration
	Errors uint64 // failed writes and fsyncs
}

// Read copies the histogram.
func (h *FsyncHist) Read() FsyncCounts {
	var c FsyncCounts
	c.Count = h.count.Load()
	c.Sum = time.Duration(h.sumNs.Load())
	for i := range h.counts {
		c.Counts[i] = h.counts[i].Load()
	}
	c.Errors = h.errs.Load()
	return c
}
