package loop

// /metrics and /healthz over real HTTP, scraped while real TCP load runs on every protocol.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/prometheus/common/expfmt"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/stats"
)

// countConn counts the bytes a client writes (the server receives) and reads (it sent).
type countConn struct {
	net.Conn
	wrote, read atomic.Int64
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.wrote.Add(int64(n))
	return n, err
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

// metricsServer is a test server with all four protocols and the metrics HTTP server.
type metricsServer struct {
	*testServer
	base string // http://host:port
}

func startMetrics(t *testing.T, httpCfg stats.HTTPConfig, mod func(*Config)) *metricsServer {
	t.Helper()
	ts := startServer(t, func(c *Config) {
		c.Listeners = append(c.Listeners,
			Listener{Proto: ProtoPool, Addr: "127.0.0.1:0"},
			Listener{Proto: ProtoSlock, Addr: "127.0.0.1:0"})
		if mod != nil {
			mod(c)
		}
	})
	h, err := stats.ListenHTTP("127.0.0.1:0", ts.Metrics(), httpCfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- h.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			t.Errorf("metrics Shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("metrics Serve: %v", err)
		}
	})
	return &metricsServer{testServer: ts, base: "http://" + h.Addr().String()}
}

// series is one scrape: sample values by `name{label="value",...}`, labels sorted by name.
type series map[string]float64

// scrape GETs /metrics and parses the Prometheus text.
func scrape(t testing.TB, base string) series {
	t.Helper()
	s, err := tryScrape(base)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tryScrape(base string) (series, error) {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return nil, fmt.Errorf("GET /metrics: %s\n%s", res.Status, b)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	out := series{}
	for name, f := range fams {
		for _, m := range f.Metric {
			labels := make([]string, 0, len(m.Label))
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+key[len(name):]] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"+key[len(name):]] = m.Histogram.GetSampleSum()
			case m.Untyped != nil:
				out[key] = m.Untyped.GetValue()
			}
		}
	}
	return out, nil
}

// sum adds the values of every series of metric name whose labels include all of with.
func (s series) sum(name string, with ...string) float64 {
	var v float64
	for k, x := range s {
		base, labels, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, w := range with {
			ok = ok && strings.Contains(labels, w)
		}
		if ok {
			v += x
		}
	}
	return v
}

// expect checks exact values; keys are name{labels} as scrape builds them.
func (s series) expect(t testing.TB, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		got, ok := s[k]
		if !ok {
			t.Errorf("%s missing from /metrics", k)
			continue
		}
		if got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
}

// waitMetric scrapes until name{labels} equals v.
func (ms *metricsServer) waitMetric(t *testing.T, key string, v float64) series {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := scrape(t, ms.base)
		if s[key] == v {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %v, want %v", key, s[key], v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func req(proto, command, outcome string) string {
	return fmt.Sprintf("tallyd_requests_total{command=%q,outcome=%q,proto=%q}", command, outcome, proto)
}

func lbl(name, proto string) string { return fmt.Sprintf("%s{proto=%q}", name, proto) }

func waitEnd(proto, outcome string) string {
	return fmt.Sprintf("tallyd_waits_ended_total{outcome=%q,proto=%q}", outcome, proto)
}

// checkLive checks what must hold in every snapshot: each counted request was observed once
// by its protocol's latency histogram.
func checkLive(t testing.TB, s series) {
	t.Helper()
	for _, p := range []string{"counter", "semaphore", "pool", "slock"} {
		n := s.sum("tallyd_requests_total", fmt.Sprintf("proto=%q", p))
		if c := s[lbl("tallyd_request_duration_seconds_count", p)]; c != n {
			t.Errorf("%s: latency histogram count %v, but %v requests counted", p, c, n)
		}
	}
}

// The numbers /metrics shows, scraped while clients of every protocol run known workloads
// over TCP, and exactly once they are done.
func TestMetricsUnderLoad(t *testing.T) {
	ms := startMetrics(t, stats.HTTPConfig{}, func(c *Config) {
		c.Listeners[1].MaxConnections = 1 // semaphore: the second connection is refused
	})

	// Scrape continuously while the load runs: counters never go back, every snapshot is
	// consistent, and scrapes succeed.
	stopScraping := make(chan struct{})
	scraped := make(chan int, 1)
	var stopOnce sync.Once
	scrapes := 0
	stop := func() int { stopOnce.Do(func() { close(stopScraping); scrapes = <-scraped }); return scrapes }
	defer stop()
	go func() {
		n := 0
		var prev series
		defer func() { scraped <- n }()
		for {
			select {
			case <-stopScraping:
				return
			default:
			}
			s, err := tryScrape(ms.base)
			if err != nil {
				t.Errorf("scrape during the load: %v", err)
				return
			}
			checkLive(t, s)
			for k, v := range prev {
				if (strings.HasSuffix(strings.SplitN(k, "{", 2)[0], "_total") || strings.Contains(k, "_count")) && s[k] < v {
					t.Errorf("%s went back from %v to %v", k, v, s[k])
				}
			}
			prev = s
			n++
		}
	}()

	// Counter load: 4 clients, each 300 acquire+release pairs on its own counter.
	const clients, pairs = 4, 300
	var wg sync.WaitGroup
	conns := make([]*countConn, clients+1)
	for g := range clients {
		cl := dial(t, ms.counterAddr)
		cc := &countConn{Conn: cl.c}
		cl.c, conns[g] = cc, cc
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("c%d", g)
			for range pairs {
				if f := cl.acquire(name, 1, 10); f.Status != counter.StatusOK {
					t.Errorf("acquire: status %v", f.Status)
					return
				}
				if f := cl.release(name, 1); f.Status != counter.StatusOK {
					t.Errorf("release: status %v", f.Status)
					return
				}
			}
		}()
	}
	// One counter client with one request of each outcome.
	cl := dial(t, ms.counterAddr)
	cc := &countConn{Conn: cl.c}
	cl.c, conns[clients] = cc, cc
	expectStatus(t, cl.acquire("x", 1, 1), counter.StatusOK)
	expectStatus(t, cl.acquire("x", 1, 1), counter.StatusNotAvailable)
	expectStatus(t, cl.release("x", 5), counter.StatusNotAcquired)
	expectStatus(t, cl.get("nosuch"), counter.StatusNotFound)
	expectStatus(t, cl.get("x"), counter.StatusOK)
	expectStatus(t, cl.simple(counter.OpNoop), counter.StatusOK)
	cl.stats()
	expectStatus(t, cl.release("x", 1), counter.StatusOK)
	expectStatus(t, cl.simple(counter.Opcode(0x12)), counter.StatusUnknownCommand)

	// Semaphore: one connection admitted, the next refused.
	sem := dial(t, ms.semaphoreAddr)
	expectStatus(t, sem.simple(counter.OpNoop), counter.StatusOK)
	dial(t, ms.semaphoreAddr).expectClosed()

	// PoolCounter: a hand-over, a DONE, a timeout, and three kinds of bad request.
	var poolIn, poolOut int64
	pc := func() (*lineClient, *countConn) {
		lc := dialPool(t, ms.poolAddr)
		c := &countConn{Conn: lc.c}
		lc.c, lc.r = c, bufio.NewReader(c)
		return lc, c
	}
	a, ac := pc()
	b, bc := pc()
	c, ccc := pc()
	a.expect("ACQ4ME k 1 10 30", "LOCKED")
	b.send("ACQ4ME k 1 10 30\n")
	s := ms.waitMetric(t, lbl("tallyd_waiting", "pool"), 1)
	s.expect(t, map[string]float64{lbl("tallyd_waits_started_total", "pool"): 1, lbl("tallyd_held", "pool"): 1,
		req("pool", "acq4me", "queued"): 1, lbl("tallyd_objects", "pool"): 1})
	c.send("ACQ4ANY k 1 10 30\n")
	ms.waitMetric(t, lbl("tallyd_waiting", "pool"), 2)
	a.expect("RELEASE", "RELEASED")
	if got := c.line(); got != "DONE" {
		t.Fatalf("ACQ4ANY waiter got %q, want DONE", got)
	}
	if got := b.line(); got != "LOCKED" {
		t.Fatalf("ACQ4ME waiter got %q, want LOCKED", got)
	}
	b.expect("RELEASE", "RELEASED")
	d, dc := pc()
	e, ec := pc()
	d.expect("ACQ4ME t 1 10 30", "LOCKED")
	e.send("ACQ4ME t 1 10 1\n")
	if got := e.line(); got != "TIMEOUT" { // after a second
		t.Fatalf("waiter got %q, want TIMEOUT", got)
	}
	d.expect("RELEASE", "RELEASED")
	f, fc := pc()
	f.expect("FOO", "ERROR BAD_COMMAND")
	f.expect("STATS nosuch", "ERROR WRONG_STAT")
	f.send("STATS UPTIME\n")
	if got := f.line(); !strings.HasPrefix(got, "uptime: 0 days, 0h 0m ") {
		t.Fatalf("STATS UPTIME -> %q", got)
	}
	// A line split across reads: its first part stays buffered, and is counted once.
	before := scrape(t, ms.base)[lbl("tallyd_received_bytes_total", "pool")]
	f.send("STATS UP")
	ms.waitMetric(t, lbl("tallyd_received_bytes_total", "pool"), before+8)
	f.send("TIME\n")
	if got := f.line(); !strings.HasPrefix(got, "uptime: ") {
		t.Fatalf("split STATS UPTIME -> %q", got)
	}
	for _, c := range []*countConn{ac, bc, ccc, dc, ec, fc} {
		poolIn += c.wrote.Load()
		poolOut += c.read.Load()
	}

	// slock binary: a wait that is granted, one that times out, a PING.
	x, y, z := dialSlock(t, ms.slockAddr), dialSlock(t, ms.slockAddr), dialSlock(t, ms.slockAddr)
	k, k2 := key16("k"), key16("k2")
	xl := newLock(x, k, 5, 30)
	yl := newLock(y, k, 5, 30)
	xl.Lock().want(slock.ResultOK)
	yop := yl.Lock()
	s = ms.waitMetric(t, lbl("tallyd_waiting", "slock"), 1)
	s.expect(t, map[string]float64{lbl("tallyd_waits_started_total", "slock"): 1, req("slock", "lock", "queued"): 1})
	xl.Unlock().want(slock.ResultOK)
	yop.want(slock.ResultOK)
	yl.Unlock().want(slock.ResultOK)
	xl2 := newLock(x, k2, 5, 30)
	xl2.Lock().want(slock.ResultOK)
	newLock(z, k2, uint32(50)|tfMillis, 30).Lock().want(slock.ResultTimeout)
	xl2.Unlock().want(slock.ResultOK)
	x.ping()
	const slockFrames = 8 // each frame and each reply is 64 bytes

	// slock Redis text.
	raw, err := net.DialTimeout("tcp", ms.slockAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tc := &countConn{Conn: raw}
	var rbuf []byte
	cmd := func(args ...string) resp.Reply {
		t.Helper()
		if _, err := tc.Write(resp.AppendCommand(nil, args...)); err != nil {
			t.Fatal(err)
		}
		_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			r, n, err := resp.ParseReply(rbuf)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if n > 0 {
				rbuf = rbuf[n:]
				return r
			}
			var tmp [4096]byte
			m, err := tc.Read(tmp[:])
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			rbuf = append(rbuf, tmp[:m]...)
		}
	}
	if r := cmd("PING"); string(r.Str) != "PONG" {
		t.Fatalf("PING: %+v", r)
	}
	if r := cmd("LOCK", "tk", "TIMEOUT", "0", "EXPRIED", "30"); r.Kind != '*' || string(r.Elems[0].Str) != "0" {
		t.Fatalf("LOCK: %+v", r)
	}
	if r := cmd("LOCK", "tk", "TIMEOUT", "0"); r.Kind != '*' || string(r.Elems[0].Str) != "8" {
		t.Fatalf("second LOCK: %+v", r)
	}
	if r := cmd("UNLOCK", "tk"); r.Kind != '*' || string(r.Elems[0].Str) != "0" {
		t.Fatalf("UNLOCK: %+v", r)
	}
	kvWant := map[string]int64{"INCR": 1, "INCRBY": 6}
	for _, args := range [][]string{{"INCR", "tcnt"}, {"INCRBY", "tcnt", "5"}} {
		if r := cmd(args...); r.Kind != ':' || r.Int != kvWant[args[0]] {
			t.Errorf("%v -> %c %q %d, want :%d (issue 6's key/value commands)", args, r.Kind, r.Str, r.Int, kvWant[args[0]])
		}
	}
	if r := cmd("GET", "tcnt"); r.Kind != '$' || string(r.Str) != "6" {
		t.Errorf("GET tcnt -> %c %q %d, want $6 (a counter is a string to GET, as in Redis)", r.Kind, r.Str, r.Int)
	}
	if r := cmd("NOPE"); r.Kind != '-' {
		t.Fatalf("NOPE: %+v", r)
	}

	wg.Wait()
	if n := stop(); n == 0 {
		t.Fatal("no scrape finished while the load ran")
	} else {
		t.Logf("%d scrapes while the load ran", n)
	}

	// Exactly, once everything is answered: a scrape gets a snapshot taken after it asked.
	var counterIn, counterOut int64
	for _, c := range conns {
		counterIn += c.wrote.Load()
		counterOut += c.read.Load()
	}
	s = scrape(t, ms.base)
	checkLive(t, s)
	s.expect(t, map[string]float64{
		`tallyd_build_info{goversion="` + runtime.Version() + `",version="dev"}`: 1,

		lbl("tallyd_connections", "counter"):                    clients + 1,
		lbl("tallyd_connections_total", "counter"):              clients + 1,
		lbl("tallyd_connections_rejected_total", "counter"):     0,
		req("counter", "acquire", "ok"):                         clients*pairs + 1,
		req("counter", "release", "ok"):                         clients*pairs + 1,
		req("counter", "acquire", "not_available"):              1,
		req("counter", "release", "not_acquired"):               1,
		req("counter", "get", "not_found"):                      1,
		req("counter", "get", "ok"):                             1,
		req("counter", "noop", "ok"):                            1,
		req("counter", "stats", "ok"):                           1,
		req("counter", "other", "unknown_command"):              1,
		lbl("tallyd_received_bytes_total", "counter"):           float64(counterIn),
		lbl("tallyd_sent_bytes_total", "counter"):               float64(counterOut),
		lbl("tallyd_request_duration_seconds_count", "counter"): 2*clients*pairs + 9,
		lbl("tallyd_objects", "counter"):                        clients + 1, // released counters live until GC
		lbl("tallyd_gc_runs_total", "counter"):                  1,           // at start

		lbl("tallyd_connections", "semaphore"):                1,
		lbl("tallyd_connections_total", "semaphore"):          1,
		lbl("tallyd_connections_rejected_total", "semaphore"): 1,
		req("semaphore", "noop", "ok"):                        1,

		lbl("tallyd_connections_total", "pool"):    6,
		req("pool", "acq4me", "locked"):            2,
		req("pool", "acq4me", "queued"):            2,
		req("pool", "acq4any", "queued"):           1,
		req("pool", "release", "released"):         3,
		req("pool", "other", "bad_command"):        1,
		req("pool", "stats", "wrong_stat"):         1,
		req("pool", "stats", "ok"):                 2,
		lbl("tallyd_waits_started_total", "pool"):  3,
		waitEnd("pool", "granted"):                 1,
		waitEnd("pool", "done"):                    1,
		waitEnd("pool", "timed_out"):               1,
		lbl("tallyd_waiting", "pool"):              0,
		lbl("tallyd_held", "pool"):                 0,
		lbl("tallyd_objects", "pool"):              0,
		lbl("tallyd_received_bytes_total", "pool"): float64(poolIn),
		lbl("tallyd_sent_bytes_total", "pool"):     float64(poolOut),

		lbl("tallyd_connections_total", "slock"):    4,
		req("slock", "lock", "ok"):                  3,
		req("slock", "lock", "queued"):              2,
		req("slock", "lock", "timeout"):             1,
		req("slock", "unlock", "ok"):                4,
		req("slock", "ping", "ok"):                  2,
		req("slock", "incr", "ok"):                  1,
		req("slock", "incrby", "ok"):                1,
		req("slock", "get", "ok"):                   1,
		req("slock", "other", "error"):              1,
		lbl("tallyd_waits_started_total", "slock"):  2,
		waitEnd("slock", "granted"):                 1,
		waitEnd("slock", "timed_out"):               1,
		waitEnd("slock", "other"):                   0,
		lbl("tallyd_waiting", "slock"):              0,
		lbl("tallyd_received_bytes_total", "slock"): float64(64*slockFrames + tc.wrote.Load()),
		lbl("tallyd_sent_bytes_total", "slock"):     float64(64*slockFrames + tc.read.Load()),
	})
	if t.Failed() {
		return
	}
	for _, p := range []string{"counter", "pool", "slock"} {
		if s.sum("tallyd_request_duration_seconds_sum", fmt.Sprintf("proto=%q", p)) <= 0 {
			t.Errorf("%s: request durations add up to nothing", p)
		}
	}
	if s["tallyd_ticks_total"] == 0 || s["tallyd_tick_lag_seconds_count"] == 0 {
		t.Errorf("ticks %v, tick lags observed %v: the loop ran no timed work", s["tallyd_ticks_total"], s["tallyd_tick_lag_seconds_count"])
	}
	if s["go_goroutines"] == 0 || s["process_open_fds"] == 0 {
		t.Error("the Go and process collectors are missing")
	}

	// Closed connections leave the gauges at once.
	for _, c := range conns {
		_ = c.Close()
	}
	ms.waitMetric(t, lbl("tallyd_connections", "counter"), 0)
}

// /healthz: ok while the loop publishes (also before the first connection, when the loop has
// nothing to do), 503 with the reason while it is stuck, and while shutting down.
func TestMetricsHealthz(t *testing.T) {
	ms := startMetrics(t, stats.HTTPConfig{StaleAfter: 300 * time.Millisecond}, nil)
	health := func() (int, string) {
		t.Helper()
		res, err := http.Get(ms.base + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz: %v", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	waitHealth := func(code int, body string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, b := health()
			if c == code && strings.Contains(b, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/healthz stayed %d %q, want %d with %q", c, b, code, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// No connection yet: after more than StaleAfter the snapshot taken at start would be
	// stale; the ticker keeps it current.
	time.Sleep(time.Second)
	waitHealth(http.StatusOK, "ok\n")
	if c, b := health(); c != http.StatusOK || b != "ok\n" {
		t.Fatalf("/healthz: %d %q", c, b)
	}

	// A stuck loop: /healthz says so until it runs again.
	cl := dial(t, ms.counterAddr)
	expectStatus(t, cl.simple(counter.OpNoop), counter.StatusOK)
	el := ms.run.el.Load().(gnet.EventLoop)
	release := make(chan struct{})
	if err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		<-release
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	waitHealth(http.StatusServiceUnavailable, "it is stuck or overloaded")
	// A scrape of a stuck loop still answers, from the last snapshot, and says how old it is.
	s := scrape(t, ms.base)
	if s["tallyd_snapshot_age_seconds"] <= 0 {
		t.Errorf("snapshot age %v while the loop is stuck", s["tallyd_snapshot_age_seconds"])
	}
	close(release)
	waitHealth(http.StatusOK, "ok\n")
	expectStatus(t, cl.simple(counter.OpNoop), counter.StatusOK)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ms.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if c, b := health(); c != http.StatusServiceUnavailable || b != "tallyd is shutting down\n" {
		t.Fatalf("/healthz after Stop: %d %q", c, b)
	}
}

// Unknown paths and methods are refused.
func TestMetricsHTTPRoutes(t *testing.T) {
	ms := startMetrics(t, stats.HTTPConfig{}, nil)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/", http.StatusNotFound},
		{"GET", "/metricz", http.StatusNotFound},
		{"POST", "/metrics", http.StatusMethodNotAllowed},
		{"HEAD", "/healthz", http.StatusOK},
	} {
		r, err := http.NewRequest(c.method, ms.base+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, res.StatusCode, c.code)
		}
	}
}

// The label tables fit count's packed index, and every Redis-text name maps to its own label.
func TestMetricsLabelTables(t *testing.T) {
	for p := range numProtos {
		if len(commandNames[p]) > 64 || len(outcomeNames[p]) > 16 {
			t.Errorf("%s: %d commands, %d outcomes: more than count packs", p, len(commandNames[p]), len(outcomeNames[p]))
		}
	}
	s := &Server{}
	for _, name := range []string{"echo", "INCRBY", "Get", "push", "PING", "lock"} {
		tm := s.m.textBegin(&conn{}, []byte(name))
		want := strings.ToLower(name)
		if want == "push" {
			want = "lock"
		}
		if got := commandNames[ProtoSlock][tm.cmd]; got != want {
			t.Errorf("%q counts as %q, want %q", name, got, want)
		}
	}
	if tm := s.m.textBegin(&conn{}, []byte("FLUSHALLX")); commandNames[ProtoSlock][tm.cmd] != "other" {
		t.Errorf("an unknown command counts as %q", commandNames[ProtoSlock][tm.cmd])
	}
}

// BenchmarkPublishSnapshot is one snapshot of a server with every protocol and some traffic
// counted: what each publication (every 250 ms, or per scrape) costs the loop.
func BenchmarkPublishSnapshot(b *testing.B) {
	cfg := Defaults()
	for _, p := range []Proto{ProtoCounter, ProtoSemaphore, ProtoPool, ProtoSlock} {
		cfg.Listeners = append(cfg.Listeners, Listener{Proto: p, Addr: "127.0.0.1:0"})
	}
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for p := range numProtos {
		for c := range commandNames[p] {
			s.m.count(p, uint8(c), 0)
			s.m.count(p, uint8(c), 1)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s.m.pub.Publish(s.snapshot(time.Now()))
	}
}
