package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/pool"
)

// The PoolCounter stampede (issue 25): MediaWiki's use of PoolCounter when a popular page
// expires. Many clients ask for few keys at once, each "ACQ4ME key workers maxqueue
// timeout"; the granted ones hold the lock a short while (the page render) and RELEASE it,
// the others wait in the key's queue or, with the queue full, get QUEUE_FULL and come back
// after a pause. Grants are bound by the hold: Keys x Workers / Hold a second at most.

// StampedeConfig describes a stampede run.
type StampedeConfig struct {
	Addr     string        // a PoolCounter server
	Clients  int           // connections, each one acquire at a time (300)
	Keys     int           // hot keys, client i on key i mod Keys (4)
	Workers  uint32        // ACQ4ME's workers (2)
	MaxQueue uint32        // ACQ4ME's maxqueue (50)
	Timeout  uint32        // ACQ4ME's timeout in seconds (5)
	Hold     time.Duration // how long a granted client holds the lock (5 ms)
	Pause    time.Duration // how long a refused client waits before it asks again (10 ms)
	Duration time.Duration // measured time
	Warmup   time.Duration // before the measured window, the stampede already running
	Label    string        // names the run in progress lines
	Progress io.Writer     // a line per second, or nil
}

// Defaults fills the zero fields of c with MediaWiki's stampede shape.
func (c *StampedeConfig) Defaults() {
	if c.Clients < 1 {
		c.Clients = 300
	}
	if c.Keys < 1 {
		c.Keys = 4
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 50
	}
	if c.Timeout == 0 {
		c.Timeout = 5
	}
	if c.Hold <= 0 {
		c.Hold = 5 * time.Millisecond
	}
	if c.Pause <= 0 {
		c.Pause = 10 * time.Millisecond
	}
	if c.Duration <= 0 {
		c.Duration = 5 * time.Second
	}
}

// Stampede is the workload name of a stampede run's Result.
const Stampede = "stampede"

// The Outcomes of a stampede Result besides the usual ones: grants (LOCKED), refusals
// (QUEUE_FULL, "busy"), timeouts (TIMEOUT, "timed_out"), and over-grants: a LOCKED that made
// more than Workers clients hold one key at once, as the generator sees it (a client counts
// itself holding from its LOCKED to just before its RELEASE, inside the server's view, so an
// over-grant seen is a real one).
const (
	StampedeGrants     = "ok"
	StampedeQueueFull  = "busy"
	StampedeTimeouts   = "timed_out"
	StampedeOverGrants = "over_grants"
)

// stampedeKey is one hot key: its name and how many clients hold it now.
type stampedeKey struct {
	name    []byte
	holders atomic.Int32
	freed   atomic.Int64 // when the latest RELEASE on it was sent, ns since the run began
}

// stampedeCount is what one client counted in the measured window.
type stampedeCount struct {
	grants, full, timeouts, over uint64
	lat                          []int64 // ACQ4ME sent to LOCKED received, ns
	handover                     []int64 // the key's latest RELEASE sent to a waiter's LOCKED received, ns
	hold                         []int64 // LOCKED received to RELEASE sent, ns: the hold as slept
}

// RunStampede runs Clients clients, each on its own connection and goroutine, for Warmup
// then Duration. The Result's ops are the grants in the window, its latency their wait
// (ACQ4ME sent to LOCKED read); Outcomes counts grants, QUEUE_FULL, TIMEOUT and
// over-grants; Requests counts every request (ACQ4ME and RELEASE) answered.
func RunStampede(ctx context.Context, cfg StampedeConfig) (*Result, error) {
	cfg.Defaults()
	keys := make([]*stampedeKey, cfg.Keys)
	prefix := "stampede:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range keys {
		keys[i] = &stampedeKey{name: []byte(prefix + strconv.Itoa(i))}
	}
	conns := make([]net.Conn, cfg.Clients)
	for i := range conns {
		c, err := net.DialTimeout("tcp", cfg.Addr, 5*time.Second)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("stampede: connection %d: %w", i, err)
		}
		conns[i] = c
	}
	begin := time.Now()
	var measuring, done atomic.Bool
	var reqs atomic.Uint64
	counts := make([]stampedeCount, cfg.Clients)
	errs := make([]error, cfg.Clients)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stampedeClient(c, keys[i%len(keys)], &cfg, &counts[i], begin, &measuring, &done, &reqs)
		}()
	}
	start := time.Now()
	measureAt := start.Add(cfg.Warmup)
	end := measureAt.Add(cfg.Duration)
	tick := time.NewTicker(100 * time.Millisecond)
	var cpu0 float64
	var req0 uint64
	nextLine := measureAt.Add(time.Second)
	for now := range tick.C {
		if ctx.Err() != nil || now.After(end) {
			break
		}
		if !measuring.Load() && !now.Before(measureAt) {
			cpu0, req0 = cpuSeconds(), reqs.Load()
			measuring.Store(true)
		}
		if cfg.Progress != nil && now.After(nextLine) {
			fmt.Fprintf(cfg.Progress, "%s %d requests answered\n", cfg.Label, reqs.Load()-req0)
			nextLine = now.Add(time.Second)
		}
	}
	tick.Stop()
	measuring.Store(false)
	secs := time.Since(measureAt).Seconds()
	cpu := cpuSeconds() - cpu0
	requests := reqs.Load() - req0
	done.Store(true)
	for _, c := range conns {
		c.Close() // unblocks the clients' reads
	}
	wg.Wait()

	res := &Result{Label: cfg.Label, Addr: cfg.Addr, Proto: "pool", Workload: Stampede, Conns: cfg.Clients, Pipeline: 1,
		Keys: cfg.Keys, Max: cfg.Workers, Timeout: float64(cfg.Timeout) * 1e3, Grant: true, Rounds: 1,
		Seconds: secs, Requests: requests, CPU: cpu, Outcomes: map[string]uint64{}, Errors: map[string]uint64{}}
	h, ho, hd := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range counts {
		ct := &counts[i]
		res.Ops += ct.grants
		res.Outcomes[StampedeGrants] += ct.grants
		res.Outcomes[StampedeQueueFull] += ct.full
		res.Outcomes[StampedeTimeouts] += ct.timeouts
		res.Outcomes[StampedeOverGrants] += ct.over
		for _, ns := range ct.lat {
			record(h, ns)
		}
		for _, ns := range ct.handover {
			record(ho, ns)
		}
		for _, ns := range ct.hold {
			record(hd, ns)
		}
		if err := errs[i]; err != nil {
			res.Errors["protocol"]++
			if res.FirstError == "" {
				res.FirstError = err.Error()
			}
		}
	}
	res.hist = h
	res.finish()
	if cfg.Progress != nil {
		o, d := Summarize(ho), Summarize(hd)
		fmt.Fprintf(cfg.Progress, "%s hand-over (RELEASE sent to the next LOCKED read) p50 %s p99 %s; hold as slept p50 %s p99 %s; generator CPU %.0f%%\n",
			cfg.Label, Micros(o.P50), Micros(o.P99), Micros(d.P50), Micros(d.P99), 100*cpu/secs)
	}
	return res, ctx.Err()
}

// stampedeClient is one client of a stampede: acquire, hold, release, or pause and retry,
// until done. It returns the first protocol error, or nil once the run closed its connection.
func stampedeClient(c net.Conn, k *stampedeKey, cfg *StampedeConfig, ct *stampedeCount, begin time.Time, measuring, done *atomic.Bool, reqs *atomic.Uint64) error {
	r := bufio.NewReaderSize(c, 256)
	acq := pool.AppendAcq4Me(nil, k.name, cfg.Workers, cfg.MaxQueue, cfg.Timeout)
	rel := pool.AppendRelease(nil)
	// read returns the next reply line, or nil once the run is over.
	read := func() ([]byte, error) {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if done.Load() {
				return nil, nil
			}
			return nil, fmt.Errorf("stampede: reading a reply: %w", err)
		}
		reqs.Add(1)
		return bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'}), nil
	}
	locked, released := pool.Locked.String(), pool.Released.String()
	for !done.Load() {
		t0 := time.Now()
		if _, err := c.Write(acq); err != nil {
			return stampedeErr(done, err)
		}
		line, err := read()
		if line == nil {
			return err
		}
		m := measuring.Load()
		switch string(line) {
		case locked:
			got := time.Since(begin).Nanoseconds()
			wait := got - t0.Sub(begin).Nanoseconds()
			if n := k.holders.Add(1); n > int32(cfg.Workers) && m {
				ct.over++
			}
			if m {
				ct.grants++
				ct.lat = append(ct.lat, wait)
				if freed := k.freed.Load(); freed > t0.Sub(begin).Nanoseconds() {
					ct.handover = append(ct.handover, got-freed) // it waited, and a RELEASE handed it the slot
				}
			}
			time.Sleep(cfg.Hold)
			k.holders.Add(-1) // before the RELEASE leaves: the server frees the slot after
			sent := time.Since(begin).Nanoseconds()
			k.freed.Store(sent)
			if m {
				ct.hold = append(ct.hold, sent-got)
			}
			if _, err := c.Write(rel); err != nil {
				return stampedeErr(done, err)
			}
			line, err := read()
			if line == nil {
				return err
			}
			if string(line) != released {
				return fmt.Errorf("stampede: RELEASE answered %q", line)
			}
		case pool.QueueFull.String():
			if m {
				ct.full++
			}
			time.Sleep(cfg.Pause)
		case pool.Timeout.String():
			if m {
				ct.timeouts++
			}
			time.Sleep(cfg.Pause)
		default:
			return fmt.Errorf("stampede: ACQ4ME answered %q", line)
		}
	}
	return nil
}

// stampedeErr is a write's error, or nil if the run closed the connection.
func stampedeErr(done *atomic.Bool, err error) error {
	if done.Load() || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("stampede: writing a request: %w", err)
}
