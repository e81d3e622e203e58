package load

import (
	"math"
	"testing"
	"time"
)

// testWorker returns worker 0 of a run of cfg that is measuring from time 0 and never
// ends, with no connection: tests feed it replies by hand.
func testWorker(t testing.TB, cfg Config) *worker {
	t.Helper()
	cfg.Addr = "127.0.0.1:1"
	rn, err := newRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rn.base = time.Now()
	rn.workers = []*worker{newWorker(rn, 0)}
	return rn.workers[0]
}

// answer makes the sink's replies to what w sent and puts them in w's read buffer.
func answer(t testing.TB, w *worker, scratch []byte) []byte {
	srv := w.proto.(Server)
	out := scratch[:0]
	for in := w.wbuf; len(in) > 0; {
		var n int
		var err error
		out, n, err = srv.Answer(out, in)
		if err != nil || n == 0 {
			t.Fatalf("sink: n %d, %v", n, err)
		}
		in = in[n:]
	}
	w.w += copy(w.rbuf[w.w:], out)
	return out
}

const ms = int64(time.Millisecond)

func TestOpenLoopMeasuresFromIntendedTime(t *testing.T) {
	// 1,000 ops/s on one connection: an op is due every millisecond from 0.
	w := testWorker(t, Config{Proto: "counter", Conns: 1, Rate: 1000})
	if w.rn.gap != ms {
		t.Fatalf("gap %d, want 1ms", w.rn.gap)
	}
	// The server stalls: nothing is answered for 100ms, while the schedule goes on.
	w.fillOpen(99*ms + ms/2)
	if w.inflight != 100 || w.size != 200 {
		t.Fatalf("%d ops (%d requests) sent by 99.5ms, want 100 (200)", w.inflight, w.size)
	}
	answer(t, w, nil)
	if err := w.consume(101 * ms); err != nil {
		t.Fatal(err)
	}
	w.rn.rec.flush(&w.t)
	s := Summarize(w.rn.rec.total)
	// Op k was due at k ms and answered at 101ms: latencies 101ms down to 2ms. A
	// generator measuring from its (late) send would see one slow op, not a hundred.
	if s.Count != 100 || !near(s.Max, 101_000, 0.002) || !near(s.P50, 51_000, 0.02) || s.P90 < 90_000 {
		t.Errorf("latency %+v, want 100 ops from 2ms to 101ms, p50 about 51ms", s)
	}
	if w.inflight != 0 || w.size != 0 || w.w != 0 {
		t.Errorf("after all replies: %d ops, %d slots, %d bytes left", w.inflight, w.size, w.w)
	}
	if w.next != 100*ms {
		t.Errorf("next op due at %v, want 100ms", time.Duration(w.next))
	}
}

func TestOpenLoopCapsOpsInFlight(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1, Rate: 1e6})
	w.fillOpen(math.MaxInt64 / 2)
	if w.inflight != openCap {
		t.Errorf("%d ops in flight after a long stall, want the cap %d", w.inflight, openCap)
	}
}

func TestClosedLoopKeepsPipelineFull(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1, Pipeline: 16})
	var scratch []byte
	now := 10 * ms
	w.fillClosed(now)
	if w.inflight != 16 || w.size != 32 {
		t.Fatalf("%d ops (%d requests) in flight, want 16 (32)", w.inflight, w.size)
	}
	// Half the replies arrive: the connection tops up by exactly that many ops.
	out := answer(t, w, scratch)
	w.w = copy(w.rbuf, out[:len(out)/2])
	if err := w.consume(now + 3*ms); err != nil {
		t.Fatal(err)
	}
	if w.inflight != 8 {
		t.Fatalf("%d ops in flight after half the replies, want 8", w.inflight)
	}
	w.wbuf = w.wbuf[:0]
	w.fillClosed(now + 3*ms)
	if w.inflight != 16 || len(w.wbuf) == 0 {
		t.Errorf("after topping up: %d ops in flight, %d bytes to send", w.inflight, len(w.wbuf))
	}
	w.rn.rec.flush(&w.t)
	if s := Summarize(w.rn.rec.total); s.Count != 8 || !near(s.Max, 3000, 0.002) || !near(s.P50, 3000, 0.002) {
		t.Errorf("latency %+v, want 8 ops of 3ms (closed loop: from the send)", s)
	}
}

func TestRequestsBudgetIsExact(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1, Pipeline: 16, Requests: 20})
	w.fillClosed(0)
	if w.inflight != 16 {
		t.Fatalf("%d ops, want 16", w.inflight)
	}
	answer(t, w, nil)
	w.consume(ms)
	w.wbuf = w.wbuf[:0]
	w.fillClosed(ms)
	if w.inflight != 4 {
		t.Errorf("%d ops after the budget of 20 ran out, want 4 more", w.inflight)
	}
	if n := w.rn.claim(5); n != 0 {
		t.Errorf("claim after the budget ran out got %d", n)
	}
}

func TestHotHoldsUntilTheNextOp(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1, Pipeline: 1, Workload: Hot})
	if w.rn.cfg.Max != 1 || w.rn.keys == nil || w.rn.keys.Len() != 1 {
		t.Fatalf("hot: max %d, keys %v; want 1 key of maximum 1", w.rn.cfg.Max, w.rn.keys)
	}
	w.fillClosed(0)
	if w.size != 1 || w.ring[0].req.Kind != Acquire {
		t.Fatalf("first hot op: %d requests, first %v; want one acquire", w.size, w.ring[0].req.Kind)
	}
	answer(t, w, nil)
	w.consume(ms)
	if w.held != 1 {
		t.Fatalf("held %d after a granted acquire, want 1", w.held)
	}
	w.wbuf = w.wbuf[:0]
	w.fillClosed(ms)
	if w.size != 2 || w.ring[w.head].req.Kind != Release || w.ring[(w.head+1)&w.mask].req.Kind != Acquire {
		t.Errorf("second hot op: %d requests, want release then acquire", w.size)
	}
}

func TestConsumeRejectsUnaskedReplies(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1})
	w.w = copy(w.rbuf, counterReply(0x02, 0, 1, []byte{0, 0, 0, 1}))
	if err := w.consume(0); err != errUnasked {
		t.Errorf("reply with nothing in flight: %v, want errUnasked", err)
	}
}

func TestGrowKeepsPartialReply(t *testing.T) {
	w := testWorker(t, Config{Proto: "counter", Conns: 1})
	w.rbuf = make([]byte, 8)
	w.w = copy(w.rbuf, "abcdefgh")
	w.r = 3
	w.grow()
	if string(w.rbuf[w.r:w.w]) != "defgh" {
		t.Errorf("after compacting: %q", w.rbuf[w.r:w.w])
	}
	w.w = copy(w.rbuf, "abcdefgh")
	w.r = 0
	w.grow()
	if len(w.rbuf) != 16 || string(w.rbuf[:w.w]) != "abcdefgh" {
		t.Errorf("after growing: len %d, %q", len(w.rbuf), w.rbuf[:w.w])
	}
}

// cycle sends a pipeline of ops, answers them like a sink and consumes the replies, and
// so on while the replies ask for more requests (releases of granted acquires).
func cycle(t testing.TB, w *worker, scratch []byte, now int64) []byte {
	w.wbuf = w.wbuf[:0]
	w.fillClosed(now)
	for len(w.wbuf) > 0 {
		scratch = answer(t, w, scratch)
		w.wbuf = w.wbuf[:0]
		if err := w.consume(now + 1000); err != nil {
			t.Fatal(err)
		}
	}
	return scratch
}

func TestRequestPathDoesNotAllocate(t *testing.T) {
	for _, c := range []Config{
		{Proto: "counter", Conns: 1, Pipeline: 16},
		{Proto: "counter", Conns: 1, Pipeline: 16, Workload: Mix, Keys: 1000, Dist: "zipf"},
		{Proto: "counter", Conns: 1, Pipeline: 4, Workload: Hot},
		{Proto: "resp", Conns: 1, Pipeline: 16},
		{Proto: "semaphore", Conns: 1, Pipeline: 16, Keys: 100},
		{Proto: "counter", Conns: 1, Pipeline: 16, AwaitGrant: true},
		{Proto: "pool", Conns: 1, Pipeline: 16},
		{Proto: "pool", Conns: 1, Pipeline: 1, Keys: 8},
		{Proto: "slock", Conns: 1, Pipeline: 16},
		{Proto: "slock", Conns: 1, Pipeline: 16, Keys: 8},
		{Proto: "slock-text", Conns: 1, Pipeline: 16},
		{Proto: "slock-text", Conns: 1, Pipeline: 1, Keys: 8},
		{Proto: "redis-lock", Conns: 1, Pipeline: 16, Keys: 1000, AwaitGrant: true},
		{Proto: "redis-lock-lua", Conns: 1, Pipeline: 16, Keys: 1000, AwaitGrant: true},
	} {
		w := testWorker(t, c)
		scratch := make([]byte, 0, 64<<10)
		now := int64(0)
		scratch = cycle(t, w, scratch, now) // warm the buffers
		allocs := testing.AllocsPerRun(2000, func() {
			now += 2000
			scratch = cycle(t, w, scratch, now)
		})
		if allocs != 0 {
			t.Errorf("%s %s keys %d: %v allocations per pipeline of requests, want 0", c.Proto, c.Workload, c.Keys, allocs)
		}
		// The flush into the shared histograms too.
		allocs = testing.AllocsPerRun(200, func() {
			now += 2000
			scratch = cycle(t, w, scratch, now)
			w.rn.rec.flush(&w.t)
			w.rn.rec.lap()
		})
		if allocs != 0 {
			t.Errorf("%s %s: %v allocations per flush, want 0", c.Proto, c.Workload, allocs)
		}
		if w.rn.rec.totalN.errors() != 0 || w.rn.rec.totalN.ops == 0 {
			t.Errorf("%s: %d ops, %d errors", c.Proto, w.rn.rec.totalN.ops, w.rn.rec.totalN.errors())
		}
	}
}

func benchCycle(b *testing.B, cfg Config) {
	w := testWorker(b, cfg)
	scratch := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	now := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now += 2000
		scratch = cycle(b, w, scratch, now)
	}
	b.StopTimer()
	reqs := float64(w.rn.rec.totalN.reqs) + float64(w.t.reqs)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/reqs, "ns/req")
}

// BenchmarkCycleCounter: one op is a pipeline of 16 acquire+release pairs (32
// requests) encoded, answered by the sink code, parsed and recorded.
func BenchmarkCycleCounter(b *testing.B) {
	benchCycle(b, Config{Proto: "counter", Conns: 1, Pipeline: 16})
}

// BenchmarkCycleRESP is BenchmarkCycleCounter with INCR/DECR pairs.
func BenchmarkCycleRESP(b *testing.B) { benchCycle(b, Config{Proto: "resp", Conns: 1, Pipeline: 16}) }

// BenchmarkCycleMixZipf: 16 ops of 90% gets over 10,000 zipf keys.
func BenchmarkCycleMixZipf(b *testing.B) {
	benchCycle(b, Config{Proto: "counter", Conns: 1, Pipeline: 16, Workload: Mix, Keys: 10000, Dist: "zipf"})
}

// BenchmarkCyclePool: 16 pipelined ACQ4ME+RELEASE pairs on the connection's own key.
func BenchmarkCyclePool(b *testing.B) { benchCycle(b, Config{Proto: "pool", Conns: 1, Pipeline: 16}) }

// BenchmarkCyclePoolContention: one op on shared keys: ACQ4ME with its STATS probe, then
// the RELEASE once LOCKED (two exchanges).
func BenchmarkCyclePoolContention(b *testing.B) {
	benchCycle(b, Config{Proto: "pool", Conns: 1, Pipeline: 1, Keys: 8})
}

// BenchmarkCycleSlock: 16 pipelined Lock+Unlock frame pairs.
func BenchmarkCycleSlock(b *testing.B) { benchCycle(b, Config{Proto: "slock", Conns: 1, Pipeline: 16}) }

// BenchmarkCycleSlockContention: 16 Locks with their Ping probes on shared keys, replies
// matched by RequestId, then the 16 Unlocks.
func BenchmarkCycleSlockContention(b *testing.B) {
	benchCycle(b, Config{Proto: "slock", Conns: 1, Pipeline: 16, Keys: 8})
}

// BenchmarkCycleSlockText: 16 pipelined LOCK+UNLOCK command pairs.
func BenchmarkCycleSlockText(b *testing.B) {
	benchCycle(b, Config{Proto: "slock-text", Conns: 1, Pipeline: 16})
}
