package stats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPConfig tunes an HTTPServer; zero fields take the defaults noted.
type HTTPConfig struct {
	// StaleAfter is how old the newest snapshot may be for /healthz to answer 200
	// (default 1 s: four of the loop's 250 ms publications).
	StaleAfter time.Duration
	// ScrapeWait is how long a scrape waits for the loop to publish a snapshot taken after it
	// arrived before it serves the newest one there is (default 250 ms).
	ScrapeWait time.Duration
	// MaxConns caps the server's open connections (default DefaultMaxConns); one more is
	// accepted and closed at once.
	MaxConns int
	// Budget, when set, is the process's descriptor budget: each connection takes one
	// descriptor from it and gives it back when it closes; when none is left, a new
	// connection is accepted and closed at once.
	Budget Budget
	// UI configures the status page at /ui.
	UI UIConfig
}

// DefaultMaxConns is HTTPConfig.MaxConns's default: enough for scrapers and probes.
const DefaultMaxConns = 32

// Budget is a budget of descriptors shared with other listeners (loop.Descriptors).
type Budget interface {
	Take() bool // takes one, or reports false if none is left
	Give()      // gives back one taken
}

// HTTPServer serves /metrics (Prometheus text), /healthz (the loop answers), /readyz (the
// node can acknowledge writes) and the status page /ui (ui.go) from what the event loop
// publishes: it never touches the loop's state, only the Publisher's snapshots.
type HTTPServer struct {
	pub *Publisher
	cfg HTTPConfig
	ln  *limitListener
	srv *http.Server

	hist history // the status page's charts: sampled while Serve runs
}

// ListenHTTP binds addr (host:port; port 0 picks one, see Addr) for the metrics of pub.
// Nothing is served until Serve.
func ListenHTTP(addr string, pub *Publisher, cfg HTTPConfig) (*HTTPServer, error) {
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = time.Second
	}
	if cfg.ScrapeWait <= 0 {
		cfg.ScrapeWait = 250 * time.Millisecond
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	h := &HTTPServer{pub: pub, cfg: cfg, ln: &limitListener{Listener: ln, max: int64(cfg.MaxConns), budget: cfg.Budget}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(h.snapshot),
		collectors.NewBuildInfoCollector(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})))
	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	h.uiRoutes(mux)
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	return h, nil
}

// Addr is the address the server is bound to.
func (h *HTTPServer) Addr() net.Addr { return h.ln.Addr() }

// Refused is how many connections were closed at accept for want of room (MaxConns or
// the budget).
func (h *HTTPServer) Refused() uint64 { return h.ln.refused.Load() }

// Serve answers requests until Shutdown; it then returns nil.
func (h *HTTPServer) Serve() error {
	ctx, cancel := context.WithCancel(context.Background())
	go h.sample(ctx)
	defer cancel()
	if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// Shutdown stops accepting, lets requests in progress finish until ctx is done, and closes.
func (h *HTTPServer) Shutdown(ctx context.Context) error { return h.srv.Shutdown(ctx) }

// snapshot is what a scrape renders: one taken after the scrape arrived, or the newest there
// is if the loop does not publish within ScrapeWait (the scrape then shows its age in
// tallyd_snapshot_age_seconds).
func (h *HTTPServer) snapshot() *Snapshot {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.ScrapeWait)
	defer cancel()
	s, _ := h.pub.Fresh(ctx)
	return s
}

// healthz answers 200 "ok" while the loop publishes, else 503 and why not.
func (h *HTTPServer) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := h.pub.Health(time.Now(), h.cfg.StaleAfter); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ready" while the node can acknowledge writes at its default level (as
// the newest snapshot says, and that snapshot is fresh), else 503 and why not, on one line.
func (h *HTTPServer) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if why := h.unready(time.Now()); why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, why)
		return
	}
	fmt.Fprintln(w, "ready")
}

// unready says why /readyz answers 503 at now, "" when it answers 200.
func (h *HTTPServer) unready(now time.Time) string {
	if err := h.pub.Health(now, h.cfg.StaleAfter); err != nil {
		return "snapshot stale: " + err.Error()
	}
	if s := h.pub.Latest(); s.Unready != "" {
		return s.Unready
	}
	return ""
}

// limitListener admits a connection only while fewer than max are open and the budget
// gives it a descriptor; it closes the others as soon as they are accepted.
type limitListener struct {
	net.Listener
	max     int64
	budget  Budget
	live    atomic.Int64
	refused atomic.Uint64
}

// Accept returns the next connection there is room for. An error accepting (EMFILE
// included) goes to http.Server, which waits and tries again.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.take() {
			return &budgetConn{Conn: c, l: l}, nil
		}
		l.refused.Add(1)
		_ = c.Close()
	}
}

func (l *limitListener) take() bool {
	if l.live.Add(1) > l.max {
		l.live.Add(-1)
		return false
	}
	if l.budget != nil && !l.budget.Take() {
		l.live.Add(-1)
		return false
	}
	return true
}

func (l *limitListener) give() {
	l.live.Add(-1)
	if l.budget != nil {
		l.budget.Give()
	}
}

// budgetConn gives its descriptor back when it is first closed.
type budgetConn struct {
	net.Conn
	l    *limitListener
	done atomic.Bool
}

func (c *budgetConn) Close() error {
	err := c.Conn.Close()
	if !c.done.Swap(true) {
		c.l.give()
	}
	return err
}
