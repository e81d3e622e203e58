package stats

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
)

// Fresh waits for the next Publish after it asked, and no longer than its context.
func TestPublisherFresh(t *testing.T) {
	var p Publisher
	if p.Latest() != nil || p.Asked() {
		t.Fatal("a new Publisher has a snapshot or a reader")
	}
	old := &Snapshot{Version: "old"}
	p.Publish(old)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s, err := p.Fresh(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || s != old {
		t.Fatalf("Fresh with nobody publishing: %v, %v; want the old snapshot and a deadline error", s, err)
	}

	p.Publish(old) // answers the ask that timed out
	if p.Asked() {
		t.Fatal("Asked still true after a Publish")
	}

	got := make(chan *Snapshot)
	go func() {
		s, err := p.Fresh(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	for !p.Asked() { // the loop polls Asked at each tick
		time.Sleep(time.Millisecond)
	}
	fresh := &Snapshot{Version: "fresh"}
	p.Publish(fresh)
	if s := <-got; s != fresh {
		t.Fatalf("Fresh returned %+v, want the snapshot published after it asked", s)
	}
	if p.Asked() {
		t.Fatal("Asked still true after the Publish that answered it")
	}

	p.Close("going away")
	if s, err := p.Fresh(context.Background()); err == nil || err.Error() != "going away" || s != fresh {
		t.Fatalf("Fresh after Close: %v, %v", s, err)
	}
}

// Health is ok while the newest snapshot is younger than staleAfter, and says why not.
func TestPublisherHealth(t *testing.T) {
	var p Publisher
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := p.Health(now, time.Second); err == nil || !strings.Contains(err.Error(), "not published") {
		t.Fatalf("Health before any snapshot: %v", err)
	}
	p.Publish(&Snapshot{At: now.Add(-900 * time.Millisecond)})
	if err := p.Health(now, time.Second); err != nil {
		t.Fatalf("Health with a 900 ms old snapshot: %v", err)
	}
	p.Publish(&Snapshot{At: now.Add(-2500 * time.Millisecond)})
	err := p.Health(now, time.Second)
	want := "the event loop last published a snapshot 2.5s ago (at 2026-01-02T03:04:02.5Z), more than 1s: it is stuck or overloaded"
	if err == nil || err.Error() != want {
		t.Fatalf("Health with a stale snapshot: %v, want %q", err, want)
	}
	p.Close("tallyd is shutting down")
	if err := p.Health(now, time.Hour); err == nil || err.Error() != "tallyd is shutting down" {
		t.Fatalf("Health after Close: %v", err)
	}
}

func TestHistogramCumulative(t *testing.T) {
	h := Histogram{Bounds: []float64{0.1, 1, 10}, Counts: []uint64{2, 0, 3, 4}, Count: 9}
	got := h.Cumulative()
	want := map[float64]uint64{0.1: 2, 1: 2, 10: 5}
	if len(got) != len(want) {
		t.Fatalf("Cumulative() = %v, want %v", got, want)
	}
	for b, n := range want {
		if got[b] != n {
			t.Fatalf("Cumulative() = %v, want %v", got, want)
		}
	}
}

// sampleSnapshot has one protocol of each shape.
func sampleSnapshot(at time.Time) *Snapshot {
	lat := Histogram{Bounds: []float64{0.001, 0.01}, Counts: []uint64{5, 1, 0}, Count: 6, Sum: 0.012}
	return &Snapshot{
		At: at, Started: time.Unix(1700000000, 0), Version: "9.9.9", Ticks: 42,
		TickLag: Histogram{Bounds: []float64{0.001}, Counts: []uint64{41, 1}, Count: 42, Sum: 0.05},
		Protos: []Proto{
			{Name: "counter", Connections: 2, ConnectionsTotal: 7, Rejected: 1, BytesIn: 100, BytesOut: 200,
				Requests: []RequestCount{{"acquire", "ok", 4}, {"release", "not_acquired", 2}},
				Latency:  lat, Objects: 3, Memory: 300, GCRuns: 2, GCSeconds: 0.5},
			{Name: "pool", Connections: 1, ConnectionsTotal: 1, Latency: lat, HasWaits: true, WaitsIn: 5,
				WaitsOut: []WaitCount{{"granted", 3}, {"timed_out", 1}, {"done", 0}, {"other", 0}},
				Waiting:  1, Held: 2, Objects: 1},
		},
	}
}

// get fetches path from h and returns the status and body.
func get(t *testing.T, h *HTTPServer, path string) (int, string) {
	t.Helper()
	res, err := http.Get("http://" + h.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func serveHTTP(t *testing.T, p *Publisher, cfg HTTPConfig) *HTTPServer {
	t.Helper()
	h, err := ListenHTTP("127.0.0.1:0", p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Serve() }()
	t.Cleanup(func() {
		if err := h.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return h
}

// Every field of a snapshot reaches /metrics under its name, over HTTP.
func TestCollectorOverHTTP(t *testing.T) {
	var p Publisher
	p.Publish(sampleSnapshot(time.Now()))
	h := serveHTTP(t, &p, HTTPConfig{ScrapeWait: time.Millisecond}) // nobody publishes: the latest is served
	code, body := get(t, h, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d\n%s", code, body)
	}
	var tp expfmt.TextParser
	fams, err := tp.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing: %v\n%s", err, body)
	}
	for _, line := range []string{
		`tallyd_build_info{goversion="go`,
		`tallyd_start_time_seconds 1.7e+09`,
		`tallyd_ticks_total 42`,
		`tallyd_tick_lag_seconds_bucket{le="0.001"} 41`,
		`tallyd_tick_lag_seconds_count 42`,
		`tallyd_connections{proto="counter"} 2`,
		`tallyd_connections_total{proto="counter"} 7`,
		`tallyd_connections_rejected_total{proto="counter"} 1`,
		`tallyd_requests_total{command="acquire",outcome="ok",proto="counter"} 4`,
		`tallyd_requests_total{command="release",outcome="not_acquired",proto="counter"} 2`,
		`tallyd_received_bytes_total{proto="counter"} 100`,
		`tallyd_sent_bytes_total{proto="counter"} 200`,
		`tallyd_request_duration_seconds_bucket{proto="counter",le="0.001"} 5`,
		`tallyd_request_duration_seconds_bucket{proto="counter",le="0.01"} 6`,
		`tallyd_request_duration_seconds_bucket{proto="counter",le="+Inf"} 6`,
		`tallyd_request_duration_seconds_sum{proto="counter"} 0.012`,
		`tallyd_objects{proto="counter"} 3`,
		`tallyd_objects_memory_bytes{proto="counter"} 300`,
		`tallyd_gc_runs_total{proto="counter"} 2`,
		`tallyd_gc_duration_seconds_total{proto="counter"} 0.5`,
		`tallyd_waits_started_total{proto="pool"} 5`,
		`tallyd_waits_ended_total{outcome="granted",proto="pool"} 3`,
		`tallyd_waits_ended_total{outcome="timed_out",proto="pool"} 1`,
		`tallyd_waiting{proto="pool"} 1`,
		`tallyd_held{proto="pool"} 2`,
		`go_goroutines `,
		`process_start_time_seconds `,
		`go_build_info{`,
		`promhttp_metric_handler_requests_total{code="200"} 0`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	// Waits exist only for protocols that have them; GC only for the yrmcds ones.
	if strings.Contains(body, `tallyd_waits_started_total{proto="counter"}`) ||
		strings.Contains(body, `tallyd_gc_runs_total{proto="pool"}`) {
		t.Error("a protocol exports metrics it does not have")
	}
	for name, f := range fams {
		if strings.HasPrefix(name, "tallyd_") && f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
	}
}

// A scrape waits for the loop's next snapshot, taken after it arrived.
func TestScrapeWaitsForAFreshSnapshot(t *testing.T) {
	var p Publisher
	p.Publish(sampleSnapshot(time.Now()))
	h := serveHTTP(t, &p, HTTPConfig{ScrapeWait: time.Minute})
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the loop: publish when asked
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if p.Asked() {
				s := sampleSnapshot(time.Now())
				s.Ticks = 4242
				p.Publish(s)
			}
		}
	}()
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "tallyd_ticks_total 4242") {
		t.Fatalf("the scrape did not use the snapshot published after it asked:\n%s", body)
	}
}

func TestHealthzOverHTTP(t *testing.T) {
	var p Publisher
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute})
	if code, body := get(t, h, "/healthz"); code != http.StatusServiceUnavailable ||
		body != "the event loop has not published a snapshot yet\n" {
		t.Fatalf("/healthz with no snapshot: %d %q", code, body)
	}
	p.Publish(&Snapshot{At: time.Now()})
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz with a fresh snapshot: %d %q", code, body)
	}
	p.Publish(&Snapshot{At: time.Now().Add(-time.Hour)})
	if code, body := get(t, h, "/healthz"); code != http.StatusServiceUnavailable ||
		!strings.Contains(body, "it is stuck or overloaded") {
		t.Fatalf("/healthz with an hour-old snapshot: %d %q", code, body)
	}
	// /metrics still answers with what there is.
	if code, body := get(t, h, "/metrics"); code != http.StatusOK || !strings.Contains(body, "tallyd_build_info") {
		t.Fatalf("/metrics with a stale snapshot: %d\n%s", code, body)
	}
}

func TestListenHTTPBadAddress(t *testing.T) {
	var p Publisher
	_, err := ListenHTTP("127.0.0.1:99999", &p, HTTPConfig{})
	if err == nil || !strings.Contains(err.Error(), `metrics address "127.0.0.1:99999"`) {
		t.Fatalf("ListenHTTP on a bad port: %v", err)
	}
}
