package load

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startSink serves a sink for proto on 127.0.0.1 until the test ends.
func startSink(t *testing.T, proto string) (*Sink, string) {
	t.Helper()
	s, err := NewSink(proto)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("sink: %v", err)
		}
	})
	return s, l.Addr().String()
}

func TestRunAgainstSinkCountsEveryRequest(t *testing.T) {
	sink, addr := startSink(t, "counter")
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "counter", Conns: 4, Pipeline: 8,
		Requests: 10_000, Sources: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 10_000 || res.Requests != 20_000 || sink.Requests() != 20_000 {
		t.Errorf("ops %d, requests %d, sink answered %d; want 10,000, 20,000, 20,000", res.Ops, res.Requests, sink.Requests())
	}
	if res.Outcomes["ok"] != 20_000 || len(res.Outcomes) != 1 || len(res.Errors) != 0 {
		t.Errorf("outcomes %v, errors %v", res.Outcomes, res.Errors)
	}
	if res.Latency.Count != 10_000 || res.Latency.P50 <= 0 || res.Latency.Max < res.Latency.P999 ||
		res.Latency.P999 < res.Latency.P99 || res.Latency.P99 < res.Latency.P90 || res.Latency.P90 < res.Latency.P50 {
		t.Errorf("latency %+v", res.Latency)
	}
	if res.Seconds <= 0 || res.OpsPerSec != float64(res.Ops)/res.Seconds {
		t.Errorf("seconds %v, ops/s %v", res.Seconds, res.OpsPerSec)
	}

	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	lat, _ := m["latency"].(map[string]any)
	if m["ops"] != 10_000.0 || m["requests"] != 20_000.0 || m["conns"] != 4.0 || m["pipeline"] != 8.0 ||
		m["proto"] != "counter" || m["workload"] != "pairs" || lat["count"] != 10_000.0 || lat["p99_us"] == nil {
		t.Errorf("JSON %s", b)
	}
	if _, ok := m["ops_per_sec"].(float64); !ok {
		t.Errorf("JSON has no ops_per_sec: %s", b)
	}
}

func TestRunRESPMix(t *testing.T) {
	sink, addr := startSink(t, "resp")
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "resp", Workload: Mix, Gets: 0.5,
		Keys: 50, Dist: "zipf", Conns: 3, Pipeline: 5, Requests: 3000, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// An op is a get (1 request) or a pair (2): about 4,500 requests for 3,000 ops.
	if res.Ops != 3000 || res.Requests != sink.Requests() || res.Requests < 4000 || res.Requests > 5000 {
		t.Errorf("ops %d, requests %d, sink %d", res.Ops, res.Requests, sink.Requests())
	}
	if res.Dist != "zipf" || res.Keys != 50 {
		t.Errorf("result says keys %d dist %q", res.Keys, res.Dist)
	}
}

func TestRunForDurationWithIdleAndChurn(t *testing.T) {
	sink, addr := startSink(t, "counter")
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				if n := sink.Conns(); n > peak.Load() {
					peak.Store(n)
				}
			}
		}
	}()
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "counter", Conns: 2, Idle: 30,
		Churn: 200, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond, Sources: 8})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if res.Seconds != 0.3 {
		t.Errorf("measured %vs, want exactly the 0.3s asked", res.Seconds)
	}
	if res.Idle != 30 || peak.Load() < 32 {
		t.Errorf("idle %d, peak connections at the sink %d; want 30 and at least 32", res.Idle, peak.Load())
	}
	if res.Churn == nil || res.Churn.Cycles == 0 || res.Churn.Failed != 0 || res.Churn.Latency.Count != res.Churn.Cycles {
		t.Errorf("churn %+v", res.Churn)
	}
	if res.Ops == 0 || len(res.Errors) != 0 {
		t.Errorf("ops %d errors %v", res.Ops, res.Errors)
	}
	// Every connection is closed at the end.
	for i := 0; i < 200 && sink.Conns() > 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if n := sink.Conns(); n != 0 {
		t.Errorf("%d connections still open after the run", n)
	}
}

func TestRunOpenLoop(t *testing.T) {
	_, addr := startSink(t, "counter")
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "counter", Conns: 2, Rate: 2000,
		Requests: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops != 100 || res.Rate != 2000 || len(res.Errors) != 0 {
		t.Errorf("ops %d rate %v errors %v", res.Ops, res.Rate, res.Errors)
	}
}

// flaky answers OK like a sink but closes every connection after its 10th request.
func flaky(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 0, 4096)
				tmp := make([]byte, 4096)
				served := 0
				for served < 10 {
					n, err := c.Read(tmp)
					if err != nil {
						return
					}
					buf = append(buf, tmp[:n]...)
					var out []byte
					for served < 10 {
						var m int
						out, m, _ = yrmcds{}.Answer(out, buf)
						if m == 0 {
							break
						}
						buf = buf[m:]
						served++
					}
					c.Write(out)
				}
			}()
		}
	}()
	return l.Addr().String()
}

func TestRunSurvivesClosedConnections(t *testing.T) {
	addr := flaky(t)
	res, err := Run(context.Background(), Config{Addr: addr, Proto: "counter", Conns: 2, Pipeline: 1,
		Requests: 30})
	if err != nil {
		t.Fatal(err)
	}
	// 5 pairs per connection, then a close: the run reconnects until 30 ops are done,
	// which takes at least 6 connections, of which only the last of each worker may
	// end without an error. (A close with a request unread reaches the client as a
	// reset: an io error.)
	if res.Ops != 30 || res.Errors["closed"]+res.Errors["io"] < 4 {
		t.Errorf("ops %d errors %v; want 30 ops and at least 4 closes", res.Ops, res.Errors)
	}
}

// TestPortableDriver runs the end-to-end tests on the goroutine-per-connection driver
// that non-Linux systems, the open loop and failed connections use.
func TestPortableDriver(t *testing.T) {
	t.Setenv("TALLYD_BENCH_NO_EPOLL", "1")
	t.Run("counts", TestRunAgainstSinkCountsEveryRequest)
	t.Run("closes", TestRunSurvivesClosedConnections)
	t.Run("duration", TestRunForDurationWithIdleAndChurn)
	t.Run("locks", TestRunLockProtocolsAgainstSinks)
	t.Run("waits", TestRunPoolWaits)
}

func TestRunStopsOnCancel(t *testing.T) {
	sk, addr := startSink(t, "counter")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // cancel once requests flow: on a loaded machine a fixed 100 ms may pass before the first
		for sk.Requests() == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	time.AfterFunc(30*time.Second, cancel)
	res, err := Run(ctx, Config{Addr: addr, Proto: "counter", Conns: 2, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seconds >= 3600 || res.Ops == 0 {
		t.Errorf("cancelled run: %vs, %d ops", res.Seconds, res.Ops)
	}
}

func TestRunRejectsBadConfigs(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := closed.Addr().String()
	closed.Close()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Addr: dead, Proto: "counter", Workload: Waits, Conns: 1}, "no wait request"},
		{Config{Addr: dead, Proto: "nope", Conns: 1}, "unknown protocol"},
		{Config{Addr: dead, Workload: "sleep", Conns: 1}, "not one of"},
		{Config{Addr: dead, Conns: 0}, "nothing to do"},
		{Config{Addr: dead, Conns: 1, Gets: 2}, "--gets"},
		{Config{Addr: dead, Conns: 1, Keys: 10, Dist: "pareto"}, "pareto"},
		{Config{Addr: dead, Conns: 1, Requests: 1}, "could not connect"},
		{Config{Addr: "nowhere", Conns: 1}, "nowhere"},
	} {
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c.cfg, err, c.want)
		}
	}
}

// firstOnly passes the first connection it accepts on and closes the rest at once, as a
// server over its connection limit does.
type firstOnly struct {
	net.Listener
	passed bool
}

func (l *firstOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.passed {
			l.passed = true
			return c, err
		}
		c.Close()
	}
}

func TestRunNoticesIdleConnectionsClosedByTheServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSink("counter")
	done := make(chan struct{})
	go func() { s.Serve(&firstOnly{Listener: l}); close(done) }()
	defer func() { l.Close(); <-done }()
	res, err := Run(context.Background(), Config{Addr: l.Addr().String(), Conns: 1, Idle: 5, Requests: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Idle != 0 || res.Errors["idle_closed_at_start"] != 5 || res.Ops != 10 {
		t.Errorf("idle %d, errors %v, ops %d; want 0 idle held, 5 closed, 10 ops", res.Idle, res.Errors, res.Ops)
	}
}
