package load

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Workloads.
const (
	Pairs = "pairs" // acquire+release pairs
	Mix   = "mix"   // gets, with a share of acquire+release pairs
	Hot   = "hot"   // acquires on one key whose maximum is small, each held until the next op
	Waits = "wait"  // waits on a held key that time out (waiting protocols)
)

// Config describes one run.
type Config struct {
	Addr     string        // target host:port
	Proto    string        // protocol name, see Names
	Workload string        // Pairs, Mix, Hot or Waits
	Conns    int           // active connections
	Idle     int           // extra connections that only stay open
	Pipeline int           // ops in flight per connection (closed loop)
	Duration time.Duration // measured time
	Requests int64         // if > 0, stop after this many ops
	Warmup   time.Duration // load before the measured window
	Rate     float64       // ops/s over all connections: open loop; 0: closed loop
	Keys     int           // shared keys; 0: each connection its own key
	Dist     string        // "uniform" or "zipf" over shared keys
	Theta    float64       // zipf skew in (0, 1)
	Gets     float64       // share of gets in the Mix workload
	N        uint32        // resources per acquire and release
	Max      uint32        // counter maximum, semaphore initial, pool workers, slock holders
	Queue    uint32        // PoolCounter maxqueue (0: no limit)
	Timeout  time.Duration // how long an acquire of a waiting protocol may wait
	Expiry   time.Duration // how long a slock lock may be held before the server frees it
	// AwaitGrant sends each pair's release only once its acquire is answered: two round
	// trips a pair, as lock clients do. Always so on shared keys of a waiting protocol.
	AwaitGrant bool
	Churn      float64       // connect, one op, close: cycles per second
	Sources    int           // loopback source addresses to spread connections over
	Prefix     string        // key name prefix
	Seed       uint64        // random seed (0: from the clock)
	PID        int           // a server process whose RSS to sample (0: none)
	Progress   io.Writer     // a line per second, or nil
	Label      string        // names the run in progress lines
	Spin       time.Duration // epoll driver: poll this long before sleeping (0: never)
	// TLS, when set, makes every connection a TLS client of the target (crypto/tls, on
	// goroutines: the epoll driver is not used); its ServerName defaults to the target's host.
	TLS *tls.Config
}

// Defaults fills the zero fields of c with the tool's defaults.
func (c *Config) Defaults() {
	if c.Proto == "" {
		c.Proto = "counter"
	}
	if c.Workload == "" {
		c.Workload = Pairs
	}
	if c.Pipeline < 1 {
		c.Pipeline = 1
	}
	if c.Duration == 0 && c.Requests == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Dist == "" {
		c.Dist = "uniform"
	}
	if c.Theta == 0 {
		c.Theta = 0.99
	}
	if c.N == 0 {
		c.N = 1
	}
	d, _ := Lookup(c.Proto)
	if c.Max == 0 {
		c.Max = math.MaxUint32
		if c.Workload == Hot || c.Workload == Waits || d != nil && d.Waits {
			c.Max = c.N // one holder at a time: a lock
		}
	}
	if (c.Workload == Hot || c.Workload == Waits) && c.Keys == 0 {
		c.Keys = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 100 * time.Millisecond
	}
	if d != nil && d.TimeoutUnit > 0 {
		c.Timeout = (c.Timeout + d.TimeoutUnit - 1) / d.TimeoutUnit * d.TimeoutUnit
	}
	if c.Expiry == 0 {
		c.Expiry = 10 * time.Second
	}
	if c.Prefix == "" {
		c.Prefix = "tb:"
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

func (c *Config) check(d *Dialect) error {
	switch {
	case c.Conns < 0 || c.Idle < 0:
		return fmt.Errorf("--conns %d and --idle %d must not be negative", c.Conns, c.Idle)
	case c.Conns == 0 && c.Churn <= 0:
		return errors.New("nothing to do: --conns is 0 and there is no --churn")
	case c.Pipeline > 1<<14:
		return fmt.Errorf("--pipeline %d is over %d", c.Pipeline, 1<<14)
	case c.Rate < 0 || c.Churn < 0:
		return fmt.Errorf("--rate %v and --churn %v must not be negative", c.Rate, c.Churn)
	case c.Gets < 0 || c.Gets > 1:
		return fmt.Errorf("--gets %v is not a share in [0, 1]", c.Gets)
	case c.Keys < 0:
		return fmt.Errorf("--keys %d is negative", c.Keys)
	case c.Duration < 0 || c.Warmup < 0:
		return errors.New("--duration and --warmup must not be negative")
	case c.Timeout < 0 || c.Timeout > math.MaxUint32*time.Millisecond:
		return fmt.Errorf("--timeout %v is out of range", c.Timeout)
	case c.Expiry < time.Millisecond || c.Expiry >= math.MaxUint32*time.Millisecond:
		return fmt.Errorf("--expiry %v is out of range (1ms to 49 days)", c.Expiry)
	case c.TLS != nil && c.Idle > 0:
		return errors.New("idle connections are plain TCP: not with TLS")
	}
	need := []Kind{Acquire, Release}
	switch c.Workload {
	case Pairs, Hot:
	case Mix:
		need = append(need, Get)
	case Waits:
		need = []Kind{Wait, Release}
	default:
		return fmt.Errorf("workload %q is not one of pairs, mix, hot, wait", c.Workload)
	}
	for _, k := range need {
		if !d.Supports(k) {
			return fmt.Errorf("protocol %s has no %v request, which workload %s needs", d.Name, k, c.Workload)
		}
	}
	if !d.Waits {
		return nil
	}
	if c.Workload == Hot {
		return fmt.Errorf("workload hot does not fit %s, whose acquires wait for the lock: use pairs with --keys 1 (and --max 1) for contention", d.Name)
	}
	if c.Workload == Waits && c.Keys*int(min(c.Max, 1<<16)) > 1<<16 {
		return fmt.Errorf("workload wait takes each of its --keys %d --max %d times before the run: at most 65,536 holds", c.Keys, c.Max)
	}
	if d.WaitDepth > 0 && (c.Workload == Waits || c.AwaitGrant || c.Keys > 0) {
		why := fmt.Sprintf("a %s connection may have only %d acquire(s) that may wait in flight", d.Name, d.WaitDepth)
		switch d.Name {
		case "pool":
			why += " (PoolCounter answers another ERROR WAIT_FOR_RESPONSE, and a RELEASE behind a waiting acquire cancels it)"
		case "slock-text":
			why += " (a text LOCK blocks its connection until it resolves)"
		}
		switch {
		case c.Rate > 0 && c.Conns > 0:
			return fmt.Errorf("the open loop (--rate) sends on a schedule, but %s: use the closed loop", why)
		case c.Pipeline > d.WaitDepth:
			return fmt.Errorf("--pipeline %d with shared keys or waits: %s; use more --conns instead", c.Pipeline, why)
		}
	}
	return nil
}

// Result is the outcome of a run, or of several merged.
type Result struct {
	Label    string  `json:"label,omitempty"`
	Addr     string  `json:"addr"`
	TLS      bool    `json:"tls,omitempty"` // every connection was TLS
	Proto    string  `json:"proto"`
	Workload string  `json:"workload"`
	Conns    int     `json:"conns"`
	Idle     int     `json:"idle"`
	Pipeline int     `json:"pipeline"`
	Rate     float64 `json:"rate,omitempty"`
	Keys     int     `json:"keys"`
	Dist     string  `json:"dist,omitempty"`
	Max      uint32  `json:"max,omitempty"`         // of the lock protocols: holders at once
	Timeout  float64 `json:"timeout_ms,omitempty"`  // of the lock protocols and waits
	Grant    bool    `json:"await_grant,omitempty"` // releases went out once granted
	Waited   uint64  `json:"waited,omitempty"`      // acquires that waited for the lock
	// Acquired and Released count the acquires granted and the releases done, of the
	// protocols that count them apart (Dialect.CountLocks).
	Acquired uint64 `json:"acquired,omitempty"`
	Released uint64 `json:"released,omitempty"`
	// FirstError is the first reply that broke a connection's stream (a protocol error),
	// with the bytes the server sent.
	FirstError string            `json:"first_protocol_error,omitempty"`
	Rounds     int               `json:"rounds"`
	ByRound    []float64         `json:"ops_per_sec_by_round,omitempty"` // of merged runs
	Seconds    float64           `json:"seconds"`
	Requests   uint64            `json:"requests"`
	Ops        uint64            `json:"ops"`
	ReqPerSec  float64           `json:"requests_per_sec"`
	OpsPerSec  float64           `json:"ops_per_sec"`
	Latency    Summary           `json:"latency"`
	Outcomes   map[string]uint64 `json:"outcomes"`
	Errors     map[string]uint64 `json:"errors"`
	Churn      *ChurnResult      `json:"churn,omitempty"`
	RSS        *RSS              `json:"server_rss,omitempty"`
	// CPU is the processor time tallyd-bench itself used in the measured window.
	CPU float64 `json:"client_cpu_s"`
	// CPUPerReq is CPU per request in nanoseconds: 1e9/CPUPerReq requests per second
	// is what the generator could send on one core of its own.
	CPUPerReq float64 `json:"client_cpu_ns_per_request"`

	hist  *hdrhistogram.Histogram
	churn *hdrhistogram.Histogram
}

// ChurnResult counts connect/op/close cycles; Latency is of whole cycles.
type ChurnResult struct {
	Rate    float64 `json:"rate"`
	Cycles  uint64  `json:"cycles"`
	Failed  uint64  `json:"failed"`
	Skipped uint64  `json:"skipped"` // cycles not started: too many still open
	Latency Summary `json:"latency"`
}

// RSS is the sampled resident set of the server process, in KiB.
type RSS struct {
	Start   int64   `json:"start_kib"`  // before any connection
	Active  int64   `json:"active_kib"` // active connections open, idle not yet
	Held    int64   `json:"held_kib"`   // every connection open, before load
	End     int64   `json:"end_kib"`    // at the end of the load
	PerIdle float64 `json:"per_idle_b"` // (Held - Active) / idle connections, bytes
	Series  []int64 `json:"series_kib"` // one sample per second of load
}

// Error kinds of the transport, counted beside the error replies.
type errKind uint8

const (
	errConnect  errKind = iota // a dial failed
	errClosed                  // the server closed a connection
	errIO                      // a read or write failed
	errProtocol                // a reply could not be parsed or did not match
	errLost                    // ops in flight on a connection that broke
	numErrKinds
)

var errNames = [...]string{"connect", "closed", "io", "protocol", "lost_in_flight"}

var (
	errStop = errors.New("run over")
	errDone = errors.New("requests done")
)

// runner is the shared state of one run.
type runner struct {
	cfg     Config
	dialect *Dialect
	dial    *dialers
	keys    *Keys
	own     [][]byte
	rec     *recorder
	base    time.Time
	mStart  int64 // measured window, ns since base
	mEnd    int64
	end     atomic.Int64 // stop sending and reading at this time
	open    bool
	gap     int64  // open loop: ns between ops of one connection
	perOp   int    // most requests an op sends
	hot     bool   // the Hot workload
	grant   bool   // pairs send their release once the acquire is granted
	probe   bool   // and a probe behind the acquire, which tells whether it waited
	timeout uint32 // Req.Timeout, ms
	expiry  uint32 // Req.Expiry, ms
	budget  *atomic.Int64
	workers []*worker
	epolled bool // the closed loop runs on the epoll driver

	churnMu sync.Mutex
	churnH  *hdrhistogram.Histogram
	churnN  ChurnResult

	errMu    sync.Mutex
	firstErr string
}

// noteErr keeps the first protocol error of the run for the result.
func (rn *runner) noteErr(err error) {
	rn.errMu.Lock()
	if rn.firstErr == "" {
		rn.firstErr = err.Error()
	}
	rn.errMu.Unlock()
}

func (rn *runner) now() int64 { return int64(time.Since(rn.base)) }

// wall returns the time ns after the start as a deadline; none for math.MaxInt64.
func (rn *runner) wall(ns int64) time.Time {
	if ns == math.MaxInt64 {
		return time.Time{}
	}
	return rn.base.Add(time.Duration(ns))
}

// claim takes up to want ops from the --requests budget.
func (rn *runner) claim(want int) int {
	if rn.budget == nil || want <= 0 {
		return want
	}
	for {
		left := rn.budget.Load()
		if left <= 0 {
			return 0
		}
		n := min(int64(want), left)
		if rn.budget.CompareAndSwap(left, left-n) {
			return int(n)
		}
	}
}

// Run carries out one run described by cfg (after Defaults) and returns its result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	rn, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	cfg = rn.cfg
	res := &Result{Label: cfg.Label, Addr: cfg.Addr, TLS: cfg.TLS != nil, Proto: cfg.Proto, Workload: cfg.Workload,
		Conns: cfg.Conns, Idle: cfg.Idle, Pipeline: cfg.Pipeline, Rate: cfg.Rate, Keys: cfg.Keys,
		Rounds: 1, Grant: rn.grant}
	if cfg.Keys > 1 {
		res.Dist = cfg.Dist
	}
	if rn.dialect.Waits {
		res.Max, res.Timeout = cfg.Max, float64(cfg.Timeout)/1e6
	}
	if cfg.PID > 0 {
		res.RSS = &RSS{Start: rssKiB(cfg.PID)}
	}

	// Connect: active connections first, then the idle ones.
	rn.workers = make([]*worker, cfg.Conns)
	for i := range rn.workers {
		rn.workers[i] = newWorker(rn, i)
	}
	connect := func(i int) error { return rn.workers[i].connect() }
	if rn.epolled {
		connect = func(i int) error { return rn.workers[i].connectRaw() }
	}
	failed := parallel(cfg.Conns, connect)
	if cfg.Conns > 0 && failed == cfg.Conns {
		return nil, fmt.Errorf("could not connect to %s: %v", cfg.Addr, rn.workers[0].dialErr)
	}
	if res.RSS != nil {
		res.RSS.Active = rssKiB(cfg.PID)
	}
	idle := make([]*net.TCPConn, cfg.Idle)
	idleFailed := parallel(cfg.Idle, func(i int) error {
		c, err := rn.dial.dial(cfg.Conns + i)
		idle[i] = c
		return err
	})
	defer func() {
		for _, c := range idle {
			if c != nil {
				c.Close()
			}
		}
	}()
	if cfg.Idle > 0 {
		time.Sleep(100 * time.Millisecond) // let the server finish accepting
	}
	// A server over its connection limit may accept and close at once.
	idleClosed := countClosed(idle)
	res.Idle = cfg.Idle - idleFailed - idleClosed
	if res.RSS != nil {
		res.RSS.Held = rssKiB(cfg.PID)
		if res.Idle > 0 {
			res.RSS.PerIdle = float64(res.RSS.Held-res.RSS.Active) * 1024 / float64(res.Idle)
		}
	}
	if cfg.Workload == Waits {
		// Every key taken for the whole run, so that every wait waits.
		hs, err := rn.takeKeys()
		if err != nil {
			return nil, err
		}
		defer hs.release()
	}

	// Load.
	rn.base = time.Now()
	rn.mStart = int64(cfg.Warmup)
	rn.mEnd = math.MaxInt64
	if cfg.Duration > 0 {
		rn.mEnd = rn.mStart + int64(cfg.Duration)
	}
	rn.end.Store(rn.mEnd)
	var wg sync.WaitGroup
	wg.Add(len(rn.workers))
	if rn.epolled {
		// One epoll loop per processor, the connections dealt out among them.
		loops := min(runtime.GOMAXPROCS(0), len(rn.workers))
		for l := 0; l < loops; l++ {
			var ws []*worker
			for i := l; i < len(rn.workers); i += loops {
				ws = append(ws, rn.workers[i])
			}
			go rn.epoll(ws, wg.Done)
		}
	} else {
		for _, w := range rn.workers {
			go func() { defer wg.Done(); w.loop() }()
		}
	}
	cpuStart := make(chan float64, 1)
	cpuTimer := time.AfterFunc(cfg.Warmup, func() { cpuStart <- cpuSeconds() })
	defer cpuTimer.Stop()
	churnDone := make(chan struct{})
	if cfg.Churn > 0 {
		go rn.churn(churnDone)
	} else {
		close(churnDone)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); <-churnDone; close(finished) }()

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastDone int64
loop:
	for sec := 1; ; sec++ {
		select {
		case <-finished:
			lastDone = rn.now()
			break loop
		case <-ctx.Done():
			rn.stop()
			<-finished
			lastDone = rn.now()
			break loop
		case <-tick.C:
			rn.progress(sec, res.RSS)
		}
	}
	select {
	case c0 := <-cpuStart:
		res.CPU = cpuSeconds() - c0
	default:
	}
	res.Errors = map[string]uint64{}
	if idleFailed > 0 {
		res.Errors["idle_connect"] = uint64(idleFailed)
	}
	if idleClosed > 0 {
		res.Errors["idle_closed_at_start"] = uint64(idleClosed)
	}
	if n := countClosed(idle) - idleClosed; n > 0 {
		res.Errors["idle_closed_during_run"] = uint64(n)
	}
	rn.result(res, lastDone)
	return res, nil
}

// newRunner checks cfg (after Defaults) and prepares the shared state of a run.
func newRunner(cfg Config) (*runner, error) {
	cfg.Defaults()
	d, err := Lookup(cfg.Proto)
	if err != nil {
		return nil, err
	}
	if err := cfg.check(d); err != nil {
		return nil, err
	}
	rn := &runner{cfg: cfg, dialect: d, rec: newRecorder(), churnH: NewHistogram(), perOp: 2,
		timeout: uint32(cfg.Timeout / time.Millisecond), expiry: uint32(cfg.Expiry / time.Millisecond)}
	rn.hot = cfg.Workload == Hot
	if cfg.Workload == Pairs || cfg.Workload == Mix {
		rn.grant = cfg.AwaitGrant || d.Waits && cfg.Keys > 0
	}
	if rn.grant && cfg.Keys > 0 && d.Supports(Noop) {
		_, rn.probe = d.New().(Matcher)
	}
	if rn.probe {
		rn.perOp = 3
	}
	if rn.dial, err = newDialers(cfg.Addr, cfg.Sources, 5*time.Second); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		rn.dial.tls = cfg.TLS
		if cfg.TLS.ServerName == "" {
			rn.dial.tls = cfg.TLS.Clone()
			rn.dial.tls.ServerName, _, _ = net.SplitHostPort(cfg.Addr)
		}
	}
	if cfg.Keys > 0 {
		shared := cfg.Prefix + "k"
		if d.Durable {
			// Locks outlive the run (until they expire): fresh names keep a run from
			// waiting on the locks the one before left held.
			shared = cfg.Prefix + "r" + strconv.FormatUint(cfg.Seed%1e6, 10) + ":"
		}
		if rn.keys, err = NewKeys(shared, cfg.Keys, cfg.Dist, cfg.Theta); err != nil {
			return nil, err
		}
	} else {
		rn.own = names(cfg.Prefix+"c"+strconv.FormatUint(cfg.Seed%1e6, 10)+":", 0, cfg.Conns+1)
	}
	if cfg.Requests > 0 {
		rn.budget = new(atomic.Int64)
		rn.budget.Store(cfg.Requests)
	}
	if cfg.Rate > 0 && cfg.Conns > 0 {
		rn.open = true
		rn.gap = int64(float64(cfg.Conns) * 1e9 / cfg.Rate)
		if rn.gap < 1 {
			rn.gap = 1
		}
	}
	rn.epolled = canEpoll && !rn.open && rn.dial.ip.IsValid() && cfg.TLS == nil && os.Getenv("TALLYD_BENCH_NO_EPOLL") == ""
	rn.mEnd = math.MaxInt64
	rn.end.Store(rn.mEnd)
	return rn, nil
}

// stop makes every worker return soon.
func (rn *runner) stop() {
	rn.end.Store(rn.now())
	for _, w := range rn.workers {
		w.mu.Lock()
		if w.c != nil {
			w.c.SetDeadline(time.Now())
		}
		w.mu.Unlock()
	}
}

// progress prints the line for second sec and samples the server's RSS.
func (rn *runner) progress(sec int, rss *RSS) {
	c, s := rn.rec.lap()
	var kib int64
	if rss != nil {
		kib = rssKiB(rn.cfg.PID)
		if int64(sec)*1e9 > rn.mStart {
			rss.Series = append(rss.Series, kib)
		}
	}
	if rn.cfg.Progress == nil {
		return
	}
	b := make([]byte, 0, 160)
	if rn.cfg.Label != "" {
		b = append(b, rn.cfg.Label...)
		b = append(b, ' ')
	}
	b = fmt.Appendf(b, "%3ds ", sec)
	if int64(sec)*1e9 <= rn.mStart {
		b = append(b, "warmup "...)
	}
	b = fmt.Appendf(b, " ops/s %s  req/s %s  p50 %s  p99 %s  errors %d",
		Grouped(float64(c.ops)), Grouped(float64(c.reqs)), Micros(s.P50), Micros(s.P99), c.errors())
	if r := c.refusals(); r > 0 {
		b = fmt.Appendf(b, "  refused %d", r)
	}
	if c.waited > 0 {
		b = fmt.Appendf(b, "  waited %d", c.waited)
	}
	if kib > 0 {
		b = fmt.Appendf(b, "  server rss %.1f MiB", float64(kib)/1024)
	}
	b = append(b, '\n')
	rn.cfg.Progress.Write(b)
}

// result fills res from the recorder; done is when the last worker finished.
func (rn *runner) result(res *Result, done int64) {
	for _, w := range rn.workers {
		rn.rec.flush(&w.t)
	}
	end := rn.mEnd
	if done < end {
		end = done
	}
	if secs := float64(end-rn.mStart) / 1e9; secs > 0 {
		res.Seconds = secs
	}
	rn.rec.mu.Lock()
	n := rn.rec.totalN
	res.hist = rn.rec.total
	rn.rec.mu.Unlock()
	res.Requests, res.Ops, res.Waited = n.reqs, n.ops, n.waited
	if rn.dialect.CountLocks {
		res.Acquired, res.Released = n.acquired, n.released
	}
	rn.errMu.Lock()
	res.FirstError = rn.firstErr
	rn.errMu.Unlock()
	res.Outcomes = map[string]uint64{}
	for o, v := range n.outcomes {
		if v == 0 {
			continue
		}
		res.Outcomes[Outcome(o).String()] = v
		if Outcome(o).Error() {
			res.Errors[Outcome(o).String()] += v
		}
	}
	for k, v := range n.errs {
		if v > 0 {
			res.Errors[errNames[k]] += v
		}
	}
	if rn.cfg.Churn > 0 {
		rn.churnMu.Lock()
		c := rn.churnN
		c.Rate = rn.cfg.Churn
		c.Latency = Summarize(rn.churnH)
		res.Churn = &c
		res.churn = rn.churnH
		rn.churnMu.Unlock()
	}
	if res.RSS != nil {
		res.RSS.End = rssKiB(rn.cfg.PID)
	}
	res.finish()
}

// finish computes the rates and the latency summary.
func (res *Result) finish() {
	if res.Requests > 0 {
		res.CPUPerReq = res.CPU * 1e9 / float64(res.Requests)
	}
	if res.Seconds > 0 {
		res.ReqPerSec = float64(res.Requests) / res.Seconds
		res.OpsPerSec = float64(res.Ops) / res.Seconds
	}
	res.Latency = Summarize(res.hist)
	if res.Churn != nil {
		res.Churn.Latency = Summarize(res.churn)
	}
}

// parallel runs f(0) .. f(n-1), 64 at a time, and returns how many failed.
func parallel(n int, f func(int) error) int {
	var failed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 64 && g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if f(i) != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// countClosed returns how many of cs (nil ones aside) the server has closed.
func countClosed(cs []*net.TCPConn) int {
	n := 0
	for _, c := range cs {
		if c != nil && !alive(c) {
			n++
		}
	}
	return n
}

// cpuSeconds returns the processor time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rssKiB returns the resident set of process pid in KiB, or 0 if unknown.
func rssKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	const tag = "VmRSS:"
	for len(b) > 0 {
		line := b
		if i := indexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) > len(tag) && string(line[:len(tag)]) == tag {
			var v int64
			for _, c := range line[len(tag):] {
				if c >= '0' && c <= '9' {
					v = v*10 + int64(c-'0')
				}
			}
			return v
		}
	}
	return 0
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// seed returns a per-connection random source.
func seed(s uint64, i int) rand.PCG {
	return *rand.NewPCG(s, uint64(i)*0x9e3779b97f4a7c15+1)
}
