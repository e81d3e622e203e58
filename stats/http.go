package stats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
}

// HTTPServer serves /metrics (Prometheus text) and /healthz from what the event loop
// publishes: it never touches the loop's state, only the Publisher's snapshots.
type HTTPServer struct {
	pub *Publisher
	cfg HTTPConfig
	ln  net.Listener
	srv *http.Server
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	h := &HTTPServer{pub: pub, cfg: cfg, ln: ln}
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

// Serve answers requests until Shutdown; it then returns nil.
func (h *HTTPServer) Serve() error {
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
