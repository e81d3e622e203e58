package counter

import "testing"

// allocFrames holds one request of each kind for the allocation checks.
var allocFrames = map[string][]byte{
	"noop":      req(0x00, 1),
	"noop/body": req(0x00, 1, str("body")),
	"get":       req(0x01, 2, be16(3), str("foo")),
	"acquire":   req(0x02, 3, be32(1), be32(10), be16(3), str("foo")),
	"release":   req(0x03, 4, be32(1), be16(3), str("foo")),
	"stats":     req(0x10, 5),
	"dump":      req(0x11, 6),
	"invalid":   req(0x02, 7, be32(0), be32(10), be16(3), str("foo")),
	"unknown":   req(0x55, 8),
	"bad-magic": frame(0x00, 0x01, 0, 0, 9, be16(3), str("foo")),
}

func TestParseAllocs(t *testing.T) {
	for _, dialect := range []Dialect{Counter, Semaphore} {
		d := &Decoder{Dialect: dialect, MaxBody: DefaultMaxBody}
		for name, f := range allocFrames {
			var r Request
			var n int
			allocs := testing.AllocsPerRun(100, func() {
				n, _ = d.Parse(f, &r)
			})
			if n != len(f) {
				t.Fatalf("%v %s: n = %d, want %d", dialect, name, n, len(f))
			}
			if allocs != 0 {
				t.Errorf("%v %s: Parse allocates %.1f times", dialect, name, allocs)
			}
			// Incomplete frames do not allocate either.
			if allocs := testing.AllocsPerRun(100, func() { n, _ = d.Parse(f[:len(f)-1], &r) }); allocs != 0 {
				t.Errorf("%v %s: incomplete Parse allocates %.1f times", dialect, name, allocs)
			}
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	name := []byte("some-counter-name")
	stats := []Stat{{"objects", 123456}, {"used_memory", 1 << 40}, {"command:acquire", 0}, {"total_connections", 99}}
	resp := AppendUint32(nil, OpGet, 1, 2)
	dump := AppendDumpEntry(nil, 1, 2, 3, name)[HeaderLen:]
	dst := make([]byte, 0, 1024)
	var r Response
	for fname, f := range map[string]func(){
		"AppendHeader":    func() { dst = AppendHeader(dst[:0], OpGet, StatusOK, 4, 1) },
		"AppendOK":        func() { dst = AppendOK(dst[:0], OpRelease, 1) },
		"AppendError":     func() { dst = AppendError(dst[:0], OpAcquire, StatusNotAvailable, 1) },
		"AppendUint32":    func() { dst = AppendUint32(dst[:0], OpAcquire, 1, 5) },
		"AppendDumpEntry": func() { dst = AppendDumpEntry(dst[:0], 1, 2, 3, name) },
		"AppendStats":     func() { dst = AppendStats(dst[:0], 1, stats) },
		"AppendRequest":   func() { dst = AppendRequest(dst[:0], OpNoop, 1, name) },
		"AppendGet":       func() { dst = AppendGet(dst[:0], 1, name) },
		"AppendAcquire":   func() { dst = AppendAcquire(dst[:0], 1, 1, 2, name) },
		"AppendRelease":   func() { dst = AppendRelease(dst[:0], 1, 1, name) },
		"ParseResponse":   func() { _, _ = ParseResponse(resp, 64, &r) },
		"ParseDumpBody":   func() { _, _, _, _ = ParseDumpBody(dump) },
	} {
		dst = dst[:0]
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", fname, allocs)
		}
	}
}

func benchParse(b *testing.B, f []byte) {
	d := &Decoder{MaxBody: DefaultMaxBody}
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(f)))
	for b.Loop() {
		if n, err := d.Parse(f, &r); n != len(f) || err != nil || r.Status != StatusOK {
			b.Fatalf("Parse = %d, %v, %v", n, err, r.Status)
		}
	}
}

func BenchmarkParseAcquire(b *testing.B) { benchParse(b, allocFrames["acquire"]) }
func BenchmarkParseRelease(b *testing.B) { benchParse(b, allocFrames["release"]) }
func BenchmarkParseGet(b *testing.B)     { benchParse(b, allocFrames["get"]) }

func BenchmarkAppendUint32(b *testing.B) {
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendUint32(dst[:0], OpAcquire, 7, 42)
	}
}

func BenchmarkAppendStats(b *testing.B) {
	names := []string{"objects", "total_objects", "used_memory", "conflicts", "gc_count",
		"last_gc_elapsed", "total_gc_elapsed", "curr_connections", "total_connections",
		"command:noop", "command:get", "command:acquire", "command:release", "command:stats", "command:dump"}
	stats := make([]Stat, len(names))
	for i, n := range names {
		stats[i] = Stat{n, uint64(i+1) * 987654321}
	}
	dst := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendStats(dst[:0], 7, stats)
	}
}
