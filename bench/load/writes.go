package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// The write benchmark of make bench-cluster: every connection sends rounds of Pipeline
// INCRs on random keys in one write, optionally followed by WAIT (Redis with a replica),
// and waits for every reply before it sends the next round. Latency is per round: from
// the round's write to its last reply. With Locks a round is Pipeline slock lock pairs
// instead, "LOCK k TIMEOUT 0 EXPRIED 30 LOCK_ID x" and "UNLOCK k LOCK_ID x", each pair on
// a key of its own (the connection's j-th), so that no two LOCKs contend.

// WritesConfig describes a write benchmark.
type WritesConfig struct {
	Addr     string        // target host:port, a Redis-text (RESP) server
	Conns    int           // connections
	Pipeline int           // INCRs per round, sent in one write
	Keys     int           // keys picked uniformly at random for each INCR
	Prefix   string        // key name prefix
	Duration time.Duration // measured time
	Warmup   time.Duration // load before the measured window
	// WaitReplicas > 0 ends each round with WAIT WaitReplicas WaitTimeout (Redis's
	// synchronous replication); its reply is not a write.
	WaitReplicas int
	WaitTimeout  time.Duration
	// Consistency, when set, is sent as CONSISTENCY <level> on each connection first
	// (tallyd's cluster mode); the reply must be +OK.
	Consistency string
	// Locks makes each round Pipeline LOCK+UNLOCK pairs (slock's Redis text) on keys of
	// the connection's own, in place of INCRs; a write is then a pair both of whose
	// replies say OK (result 0). A pair's LOCK and UNLOCK go in the same write, so the
	// server may run both in one turn of its loop; with AwaitGrant the round's UNLOCKs go
	// only once all its LOCKs are answered (a round is two round trips), so that every
	// grant is on its own before it is released.
	Locks      bool
	AwaitGrant bool
	Seed       uint64    // random seed (0: from the clock)
	Sources    int       // loopback source addresses to spread connections over
	Label      string    // names the run in progress lines and the result
	Progress   io.Writer // a line per second, or nil
}

// Defaults fills the zero fields of c with the tool's defaults.
func (c *WritesConfig) Defaults() {
	if c.Conns < 1 {
		c.Conns = 64
	}
	if c.Pipeline < 1 {
		c.Pipeline = 16
	}
	if c.Keys < 1 {
		c.Keys = 100_000
	}
	if c.Prefix == "" {
		c.Prefix = "bw:"
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

// WritesResult is what a write benchmark measured in its window.
type WritesResult struct {
	Label        string  `json:"label,omitempty"`
	Addr         string  `json:"addr"`
	Conns        int     `json:"conns"`
	Pipeline     int     `json:"pipeline"`
	Keys         int     `json:"keys"`
	Wait         string  `json:"wait,omitempty"` // "WAIT 1 0" when rounds end with one
	Consistency  string  `json:"consistency,omitempty"`
	LockPairs    bool    `json:"lock_pairs,omitempty"`  // rounds of LOCK+UNLOCK pairs, not INCRs
	AwaitGrant   bool    `json:"await_grant,omitempty"` // a round's UNLOCKs sent once its LOCKs were answered
	Seconds      float64 `json:"seconds"`
	Writes       uint64  `json:"writes"` // INCRs answered with an integer (and, with WAIT, replicated); lock pairs answered OK twice
	Rounds       uint64  `json:"rounds"`
	WritesPerSec float64 `json:"writes_per_sec"`
	RoundsPerSec float64 `json:"rounds_per_sec"`
	// Latency is per round: from writing its INCRs (and WAIT) to reading the last reply.
	Latency Summary `json:"round_latency"`
	// Errors counts error replies by their first word ("CLUSTERDOWN", "ERR"), WAIT
	// replies short of WaitReplicas ("wait_short"), LOCK and UNLOCK results other than
	// OK by their name ("TIMEOUT", "UNLOCK_ERROR") and broken connections ("io").
	Errors     map[string]uint64 `json:"errors"`
	FirstError string            `json:"first_error,omitempty"`
	ConnsLost  int               `json:"conns_lost"` // connections that broke before the end
	// CPU is the processor time the generator used in the window; CPUPerWrite is that
	// per write in nanoseconds.
	CPU         float64 `json:"client_cpu_s"`
	CPUPerWrite float64 `json:"client_cpu_ns_per_write"`
}

// Phases of a write benchmark.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseDone
)

// writesRun is the state the connections of one run share.
type writesRun struct {
	cfg   WritesConfig
	phase atomic.Int32

	mu       sync.Mutex
	hist     *hdrhistogram.Histogram
	errs     map[string]uint64
	firstErr string
	lost     int

	writes atomic.Uint64 // in the window
	rounds atomic.Uint64
	total  atomic.Uint64 // all writes, for progress lines
}

// RunWrites runs the write benchmark c describes.
func RunWrites(ctx context.Context, c WritesConfig) (*WritesResult, error) {
	c.Defaults()
	if c.Addr == "" {
		return nil, errors.New("no server address")
	}
	rn := &writesRun{cfg: c, hist: NewHistogram(), errs: map[string]uint64{}}
	ds, err := newDialers(c.Addr, c.Sources, 5*time.Second)
	if err != nil {
		return nil, err
	}
	conns := make([]*net.TCPConn, c.Conns)
	defer func() {
		for _, cn := range conns {
			if cn != nil {
				cn.Close()
			}
		}
	}()
	for i := range conns {
		if conns[i], err = ds.dial(i); err != nil {
			return nil, fmt.Errorf("connection %d to %s: %w", i+1, c.Addr, err)
		}
		if c.Consistency != "" {
			if err := consistency(conns[i], c.Consistency); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Addr, err)
			}
		}
	}

	var wg sync.WaitGroup
	for i, cn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rn.conn(cn, i)
		}()
	}
	stopProgress := rn.progress()
	allGone := make(chan struct{}) // every connection broke: the window ends early
	go func() { wg.Wait(); close(allGone) }()
	var start, end time.Time
	var cpu0, cpu1 float64
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-allGone:
			return true
		case <-t.C:
			return true
		}
	}
	ok := wait(c.Warmup)
	if ok {
		start, cpu0 = time.Now(), cpuSeconds()
		rn.phase.Store(phaseMeasure)
		ok = wait(c.Duration)
		end, cpu1 = time.Now(), cpuSeconds()
	}
	rn.phase.Store(phaseDone)
	// Wake every connection blocked on a reply; rounds in flight are not counted.
	for _, cn := range conns {
		cn.SetDeadline(time.Now())
	}
	wg.Wait()
	stopProgress()
	if !ok {
		return nil, ctx.Err()
	}
	res := &WritesResult{
		Label: c.Label, Addr: c.Addr, Conns: c.Conns, Pipeline: c.Pipeline, Keys: c.Keys,
		Consistency: c.Consistency,
		LockPairs:   c.Locks,
		AwaitGrant:  c.Locks && c.AwaitGrant,
		Seconds:     end.Sub(start).Seconds(),
		Writes:      rn.writes.Load(),
		Rounds:      rn.rounds.Load(),
		Latency:     Summarize(rn.hist),
		Errors:      rn.errs,
		FirstError:  rn.firstErr,
		ConnsLost:   rn.lost,
		CPU:         cpu1 - cpu0,
	}
	if c.WaitReplicas > 0 {
		res.Wait = fmt.Sprintf("WAIT %d %d", c.WaitReplicas, c.WaitTimeout.Milliseconds())
	}
	if res.Seconds > 0 {
		res.WritesPerSec = float64(res.Writes) / res.Seconds
		res.RoundsPerSec = float64(res.Rounds) / res.Seconds
	}
	if res.Writes > 0 {
		res.CPUPerWrite = res.CPU * 1e9 / float64(res.Writes)
	}
	return res, nil
}

// consistency sends CONSISTENCY level on c and expects +OK.
func consistency(c net.Conn, level string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(resp.AppendCommand(nil, "CONSISTENCY", level)); err != nil {
		return err
	}
	buf := make([]byte, 0, 256)
	for {
		if len(buf) == cap(buf) {
			return fmt.Errorf("CONSISTENCY %s: reply longer than %d bytes", level, cap(buf))
		}
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if r, m, perr := resp.ParseReply(buf); perr != nil {
			return fmt.Errorf("CONSISTENCY %s: %v", level, perr)
		} else if m > 0 {
			if r.Kind != '+' || string(r.Str) != "OK" {
				return fmt.Errorf("CONSISTENCY %s answered %q", level, trim(buf[:m]))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("CONSISTENCY %s: %w", level, err)
		}
	}
}

// fail records an error of kind; text, the first time, says what happened.
func (rn *writesRun) fail(kind, text string) {
	rn.mu.Lock()
	rn.errs[kind]++
	if rn.firstErr == "" {
		rn.firstErr = text
	}
	rn.mu.Unlock()
}

// conn drives connection number i until the run is done or the connection breaks.
func (rn *writesRun) conn(c *net.TCPConn, i int) {
	cfg := &rn.cfg
	src := seed(cfg.Seed, i)
	rng := rand.New(&src)
	incr := []byte("INCR")
	key := make([]byte, 0, len(cfg.Prefix)+20)
	out := make([]byte, 0, cfg.Pipeline*(32+cap(key))+64)
	var waitCmd []byte
	if cfg.WaitReplicas > 0 {
		waitCmd = resp.AppendCommand(nil, "WAIT", strconv.Itoa(cfg.WaitReplicas),
			strconv.FormatInt(cfg.WaitTimeout.Milliseconds(), 10))
	}
	in := make([]byte, 64<<10)
	var lr *lockRound // the same every round
	if cfg.Locks {
		lr = newLockRound(cfg, i, rng)
	}
	for rn.phase.Load() != phaseDone {
		out = out[:0]
		if lr != nil {
			out = append(out, lr.first...)
		} else {
			for range cfg.Pipeline {
				key = strconv.AppendInt(append(key[:0], cfg.Prefix...), int64(rng.IntN(cfg.Keys)), 10)
				out = resp.AppendCommandBytes(out, incr, key)
			}
		}
		if lr == nil || lr.second == nil {
			out = append(out, waitCmd...)
		}
		t0 := time.Now()
		if _, err := c.Write(out); err != nil {
			rn.broken(err)
			return
		}
		var writes int
		var short, ok bool
		switch {
		case lr == nil:
			writes, short, ok = rn.replies(c, in, cfg.Pipeline, nil, nil)
		case lr.second == nil:
			_, short, ok = rn.replies(c, in, 2*cfg.Pipeline, lr.names, lr.granted)
		default: // the UNLOCKs once the LOCKs are answered
			if _, _, ok = rn.replies(c, in, cfg.Pipeline, lr.names[:cfg.Pipeline], lr.granted[:cfg.Pipeline]); !ok {
				return
			}
			if _, err := c.Write(append(append(out[:0], lr.second...), waitCmd...)); err != nil {
				rn.broken(err)
				return
			}
			_, short, ok = rn.replies(c, in, cfg.Pipeline, lr.names[cfg.Pipeline:], lr.granted[cfg.Pipeline:])
		}
		if !ok {
			return
		}
		if lr != nil {
			writes = lr.pairs()
		}
		lat := time.Since(t0)
		if short {
			writes = 0 // not acknowledged by the replicas asked for
		}
		rn.total.Add(uint64(writes))
		if rn.phase.Load() != phaseMeasure {
			continue
		}
		rn.writes.Add(uint64(writes))
		rn.rounds.Add(1)
		rn.mu.Lock()
		record(rn.hist, lat.Nanoseconds())
		rn.mu.Unlock()
	}
}

// lockRound is connection i's round of lock pairs: for each j < Pipeline, "LOCK
// <prefix><i>:<j> TIMEOUT 0 EXPRIED 30 LOCK_ID x" and "UNLOCK <prefix><i>:<j> LOCK_ID x",
// x random hex (slock's text protocol decodes 32 hex digits to its 16-byte LockId). Each
// pair goes together in first; with AwaitGrant, first has the LOCKs and second the
// UNLOCKs, sent once the LOCKs are answered.
type lockRound struct {
	first, second []byte
	names         []string // the command of each reply, in order
	granted       []bool   // whether each reply said OK
	await         bool
}

func newLockRound(cfg *WritesConfig, i int, rng *rand.Rand) *lockRound {
	lr := &lockRound{granted: make([]bool, 2*cfg.Pipeline), await: cfg.AwaitGrant}
	var locks, unlocks []byte
	for j := range cfg.Pipeline {
		key := cfg.Prefix + strconv.Itoa(i) + ":" + strconv.Itoa(j)
		id := fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64())
		lock := resp.AppendCommand(nil, "LOCK", key, "TIMEOUT", "0", "EXPRIED", "30", "LOCK_ID", id)
		unlock := resp.AppendCommand(nil, "UNLOCK", key, "LOCK_ID", id)
		if cfg.AwaitGrant {
			locks, unlocks = append(locks, lock...), append(unlocks, unlock...)
			continue
		}
		lr.first = append(append(lr.first, lock...), unlock...)
		lr.names = append(lr.names, "LOCK", "UNLOCK")
	}
	if cfg.AwaitGrant {
		lr.first, lr.second = locks, unlocks
		for j := range 2 * cfg.Pipeline {
			lr.names = append(lr.names, [2]string{"LOCK", "UNLOCK"}[j/cfg.Pipeline])
		}
	}
	return lr
}

// pairs counts the pairs of the last round both of whose replies said OK.
func (lr *lockRound) pairs() int {
	n, p := 0, len(lr.granted)/2
	for j := range p {
		l, u := lr.granted[2*j], lr.granted[2*j+1]
		if lr.await {
			l, u = lr.granted[j], lr.granted[p+j]
		}
		if l && u {
			n++
		}
	}
	return n
}

// lockResult reads a LOCK or UNLOCK reply (an array whose element 0 is the result code):
// ok for result 0, else the kind of error to count (the result's name, or an error
// reply's first word) and what to say about it; protocol when it is no such reply.
func lockResult(b []byte) (ok bool, kind, text string, protocol bool) {
	if b[0] == '-' {
		line := bytes.TrimRight(b[1:], "\r\n")
		w, _, _ := bytes.Cut(line, []byte(" "))
		return false, string(w), "-" + string(line), false
	}
	var at [1]int
	n, count, err := respArray(b, at[:])
	if err != nil || n == 0 || count < 2 {
		return false, "protocol", fmt.Sprintf("reply %q is no LOCK/UNLOCK reply", trim(b)), true
	}
	r, _, err := resp.ParseReply(b[at[0]:n])
	code, isInt := resp.ParseInt(r.Str)
	if err != nil || r.Kind != '$' || !isInt || code < 0 || code > 0xff {
		return false, "protocol", fmt.Sprintf("reply %q has no result code", trim(b)), true
	}
	if code != 0 {
		name := slock.Result(code).String()
		return false, name, "result " + name, false
	}
	return true, "", "", false
}

// replies reads n replies from c, and a WAIT's behind them when WaitReplicas is set and
// names is not the first half of an await-grant round: it returns the INCRs answered with
// an integer, whether a WAIT reply fell short, and false if the connection is done. With
// names (LOCK and UNLOCK replies, names[k] the command of the k-th) it sets granted[k]
// for a reply that says OK instead of counting INCRs.
func (rn *writesRun) replies(c *net.TCPConn, in []byte, n int, names []string, granted []bool) (writes int, short, ok bool) {
	cfg := &rn.cfg
	waits := cfg.WaitReplicas > 0 && (names == nil || !cfg.AwaitGrant || names[0] == "UNLOCK")
	want := n
	if waits {
		want++
	}
	got, lo, hi := 0, 0, 0
	for got < want {
		var r resp.Reply
		var n int
		var err error
		if names != nil {
			n, err = resp.SkipReply(in[lo:hi]) // no allocation: lockResult reads what it needs
		} else {
			r, n, err = resp.ParseReply(in[lo:hi])
		}
		if err != nil {
			rn.fail("protocol", fmt.Sprintf("%s: reply %q: %v", cfg.Addr, trim(in[lo:hi]), err))
			return 0, false, false
		}
		if n == 0 {
			if lo > 0 {
				hi = copy(in, in[lo:hi])
				lo = 0
			}
			if hi == len(in) {
				rn.fail("protocol", fmt.Sprintf("%s: a reply longer than %d bytes", cfg.Addr, len(in)))
				return 0, false, false
			}
			m, err := c.Read(in[hi:])
			if m == 0 && err != nil {
				rn.broken(err)
				return 0, false, false
			}
			hi += m
			continue
		}
		lo += n
		got++
		isWait := waits && got == want
		if names != nil && !isWait {
			ok, kind, text, bad := lockResult(in[lo-n : lo])
			switch {
			case bad:
				rn.fail(kind, fmt.Sprintf("%s: %s", cfg.Addr, text))
				return 0, false, false
			case !ok:
				rn.fail(kind, fmt.Sprintf("%s: %s to %s", cfg.Addr, text, names[got-1]))
			}
			granted[got-1] = ok
			continue
		}
		if names != nil { // the WAIT
			r, _, _ = resp.ParseReply(in[lo-n : lo])
		}
		switch {
		case r.Kind == '-':
			w := r.Str
			for j, b := range w {
				if b == ' ' {
					w = w[:j]
					break
				}
			}
			rn.fail(string(w), fmt.Sprintf("%s: -%s", cfg.Addr, r.Str))
			if isWait {
				short = true
			}
		case r.Kind != ':':
			rn.fail("protocol", fmt.Sprintf("%s: reply %q is not an integer", cfg.Addr, trim(in[lo-n:lo])))
			return 0, false, false
		case isWait:
			if r.Int < int64(cfg.WaitReplicas) {
				rn.fail("wait_short", fmt.Sprintf("%s: WAIT answered %d replicas, want %d", cfg.Addr, r.Int, cfg.WaitReplicas))
				short = true
			}
		default:
			writes++
		}
	}
	if lo != hi {
		rn.fail("protocol", fmt.Sprintf("%s: %d bytes after the last reply of a round", cfg.Addr, hi-lo))
		return 0, false, false
	}
	return writes, short, true
}

// broken records a connection that failed, unless the run is over (its end sets
// deadlines to wake the connections).
func (rn *writesRun) broken(err error) {
	if rn.phase.Load() == phaseDone {
		return
	}
	rn.fail("io", fmt.Sprintf("%s: %v", rn.cfg.Addr, err))
	rn.mu.Lock()
	rn.lost++
	rn.mu.Unlock()
}

// progress writes a line a second to cfg.Progress until the returned func is called.
func (rn *writesRun) progress() func() {
	w := rn.cfg.Progress
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, lastT := rn.total.Load(), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				n := rn.total.Load()
				rn.mu.Lock()
				nerr := uint64(0)
				for _, v := range rn.errs {
					nerr += v
				}
				rn.mu.Unlock()
				var phase string
				switch rn.phase.Load() {
				case phaseWarmup:
					phase = "warm-up"
				case phaseMeasure:
					phase = "measured"
				default:
					continue
				}
				fmt.Fprintf(w, "%s%s: %s writes/s, errors %d\n", labelPrefix(rn.cfg.Label), phase,
					Grouped(float64(n-last)/now.Sub(lastT).Seconds()), nerr)
				last, lastT = n, now
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func labelPrefix(l string) string {
	if l == "" {
		return ""
	}
	return l + " "
}

// WriteText writes a human summary of r.
func (r *WritesResult) WriteText(w io.Writer) {
	what, keys, unit := fmt.Sprintf("%d x INCR", r.Pipeline), Grouped(float64(r.Keys))+" random keys", "writes"
	if r.LockPairs {
		what, keys, unit = fmt.Sprintf("%d x LOCK+UNLOCK", r.Pipeline), "a key a pair", "pairs"
		if r.AwaitGrant {
			what = fmt.Sprintf("%d x LOCK, then %d x UNLOCK", r.Pipeline, r.Pipeline)
		}
	}
	if r.Wait != "" {
		what += " + " + r.Wait
	}
	fmt.Fprintf(w, "%swrites on %s: %d conns, rounds of %s, %s, %.1fs\n",
		labelPrefix(r.Label), r.Addr, r.Conns, what, keys, r.Seconds)
	fmt.Fprintf(w, "  %s/s %s (rounds/s %s), %s %s\n", unit, Grouped(r.WritesPerSec), Grouped(r.RoundsPerSec), Grouped(float64(r.Writes)), unit)
	l := r.Latency
	fmt.Fprintf(w, "  round latency p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n",
		Micros(l.P50), Micros(l.P90), Micros(l.P99), Micros(l.P999), Micros(l.Max))
	writeCounts(w, "  errors by kind", r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error: %s\n", r.FirstError)
	}
	if r.ConnsLost > 0 {
		fmt.Fprintf(w, "  connections lost: %d of %d\n", r.ConnsLost, r.Conns)
	}
	fmt.Fprintf(w, "  generator CPU %.2fs, %.0f ns per write\n", r.CPU, r.CPUPerWrite)
}
