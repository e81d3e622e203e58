package pool

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// hms is h hours, m minutes and s seconds, in seconds.
func hms(h, m int64, s float64) float64 { return float64(h*3600+m*60) + s }

func TestAppendDuration(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		// Seconds only, six decimals.
		{0, "0.000000s"},
		{0.957994, "0.957994s"},
		{1, "1.000000s"},
		{0.0000004, "0.000000s"},
		{0.0000006, "0.000001s"},
		{5e-7, "0.000000s"}, // the double is just below half a microsecond, as C's %f sees it
		{1.5e-6, "0.000002s"},
		{59.999999, "59.999999s"},
		{59.9999994, "59.999999s"},
		// Rounding to the microsecond carries into the minutes.
		{59.9999996, "1m 0.000000s"},
		{59.9999999, "1m 0.000000s"},
		{60, "1m 0.000000s"},
		{64.25, "1m 4.250000s"},
		{119.9999999, "2m 0.000000s"},
		{3599.5, "59m 59.500000s"},
		{3599.9999999, "1h 0m 0.000000s"},
		{3600, "1h 0m 0.000000s"},
		{3661.000001, "1h 1m 1.000001s"},
		// Hours are total hours; days appear at 24 h.
		{86399.999999, "23h 59m 59.999999s"},
		{86399.9999999, "1 days 24h 0m 0.000000s"},
		{86400, "1 days 24h 0m 0.000000s"},
		{90061.5, "1 days 25h 1m 1.500000s"},
		{2 * 86400, "2 days 48h 0m 0.000000s"},
		// The sample in poolcounter.md (its float32 artefacts aside) and NOTES §3.
		{hms(2059430, 0, 24), "85809 days 2059430h 0m 24.000000s"},
		{hms(44820, 50, 24), "1867 days 44820h 50m 24.000000s"},
		{hms(9365, 18, 24), "390 days 9365h 18m 24.000000s"},
		{hms(9343, 3, 28), "389 days 9343h 3m 28.000000s"},
		{hms(22, 14, 53.898438), "22h 14m 53.898438s"},
		{hms(12503, 48, 24), "520 days 12503h 48m 24.000000s"},
		{hms(11375, 2, 44), "473 days 11375h 2m 44.000000s"},
		{hms(0, 1, 4.25), "1m 4.250000s"},
		// Out of range.
		{-1, "0.000000s"},
		{math.Copysign(0, -1), "0.000000s"},
		{math.NaN(), "0.000000s"},
		{math.Inf(-1), "0.000000s"},
		{math.Inf(1), "213503982334601 days 5124095576030431h 0m 15.000000s"},
		{1 << 64, "213503982334601 days 5124095576030431h 0m 15.000000s"},
		{1 << 63, "106751991167300 days 2562047788015215h 30m 8.000000s"},
	} {
		if got := string(AppendDuration(nil, tc.in)); got != tc.want {
			t.Errorf("AppendDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
		if got := string(AppendDuration([]byte("x: "), tc.in)); got != "x: "+tc.want {
			t.Errorf("AppendDuration onto a prefix = %q", got)
		}
	}
}

// readDuration parses AppendDuration's output back into whole seconds and microseconds,
// checking its shape on the way.
func readDuration(t *testing.T, s string) (whole uint64, micros uint64) {
	t.Helper()
	f := strings.Split(s, " ")
	num := func(tok, suffix string) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(strings.TrimSuffix(tok, suffix), 10, 64)
		if err != nil || !strings.HasSuffix(tok, suffix) {
			t.Fatalf("%q: bad field %q", s, tok)
		}
		return v
	}
	last := f[len(f)-1]
	dot := strings.IndexByte(last, '.')
	if dot < 0 || len(last)-dot != 8 || last[len(last)-1] != 's' {
		t.Fatalf("%q: seconds field %q is not S.ffffffs", s, last)
	}
	sec, micros := num(last[:dot], ""), num(last[dot+1:], "s")
	if sec >= 60 {
		t.Fatalf("%q: %d seconds", s, sec)
	}
	var days, hours, mins uint64
	switch len(f) {
	case 1:
	case 2:
		mins = num(f[0], "m")
	case 3:
		hours, mins = num(f[0], "h"), num(f[1], "m")
	case 5:
		if f[1] != "days" {
			t.Fatalf("%q: no days", s)
		}
		days, hours, mins = num(f[0], ""), num(f[2], "h"), num(f[3], "m")
	default:
		t.Fatalf("%q: %d fields", s, len(f))
	}
	whole = hours*3600 + mins*60 + sec
	switch {
	case mins >= 60:
		t.Fatalf("%q: %d minutes", s, mins)
	case len(f) >= 2 && whole < 60, len(f) >= 3 && whole < 3600, len(f) == 5 && whole < 86400:
		t.Fatalf("%q: a unit printed below its threshold", s)
	case len(f) < 5 && whole >= 86400, len(f) < 3 && whole >= 3600, len(f) < 2 && whole >= 60:
		t.Fatalf("%q: a unit missing above its threshold", s)
	case days != hours/24:
		t.Fatalf("%q: %d days for %d hours", s, days, hours)
	}
	return whole, micros
}

func FuzzAppendDuration(f *testing.F) {
	for _, s := range []float64{0, 0.5, 59.9999996, 60, 3599.5, 86400, 7413948024, 80093.898438, 1e12} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s float64) {
		out := string(AppendDuration(nil, s))
		whole, micros := readDuration(t, out)
		if !(s > 0) {
			if whole != 0 || micros != 0 {
				t.Fatalf("AppendDuration(%v) = %q, want 0", s, out)
			}
			return
		}
		if s >= 1e15 { // beyond here microseconds are past float64's precision
			return
		}
		// The printed value is s to the nearest microsecond.
		back := float64(whole) + float64(micros)/1e6
		if d := math.Abs(back - s); d > 5e-7+s*1e-15 {
			t.Fatalf("AppendDuration(%v) = %q, off by %g", s, out, d)
		}
	})
}

func TestAppendStatsUptime(t *testing.T) {
	var p Stats
	for _, tc := range []struct {
		up   int64
		want string
	}{
		{0, "uptime: 0 days, 0h 0m 0s\n"},
		{59, "uptime: 0 days, 0h 0m 59s\n"},
		{3661, "uptime: 0 days, 1h 1m 1s\n"},
		{86399, "uptime: 0 days, 23h 59m 59s\n"},
		{86400, "uptime: 1 days, 24h 0m 0s\n"},
		{15209*3600 + 42*60 + 26, "uptime: 633 days, 15209h 42m 26s\n"}, // poolcounter.md
		{-5, "uptime: 0 days, 0h 0m 0s\n"},
	} {
		for _, arg := range []string{"UPTIME", "uptime", "UpTiMe"} {
			p.Uptime = tc.up
			got, ok := AppendStatsReply([]byte("pre"), []byte(arg), &p)
			if !ok || string(got) != "pre"+tc.want {
				t.Errorf("STATS %s at %d: %q, %v; want %q", arg, tc.up, got, ok, tc.want)
			}
		}
	}
}

// samplePool is the poolcounter.md sample in tallyd's units, plus lock_while_waiting.
func samplePool() *Stats {
	return &Stats{
		TotalAcquired:        7739031655,
		TotalReleases:        7736374042,
		ConnectErrors:        0,
		FailedSends:          1,
		FullQueues:           10294544,
		LockMismatch:         227,
		LockWhileWaiting:     42,
		ReleaseMismatch:      0,
		ProcessedCount:       7739031536,
		TotalProcessingTime:  hms(2059430, 0, 24),
		GainedTime:           hms(44820, 50, 24),
		WaitingTime:          hms(9365, 18, 24),
		WaitingTimeForMe:     hms(9343, 3, 28),
		WaitingTimeForAnyone: hms(22, 14, 53.898438),
		WaitingTimeForGood:   hms(12503, 48, 24),
		WastedTimeoutTime:    hms(11375, 2, 44),
		HashtableEntries:     119,
		ProcessingWorkers:    118,
		WaitingWorkers:       216,
	}
}

const sampleFull = `uptime: 633 days, 15209h 42m 26s
total processing time: 85809 days 2059430h 0m 24.000000s
average processing time: 0.957994s
gained time: 1867 days 44820h 50m 24.000000s
waiting time: 390 days 9365h 18m 24.000000s
waiting time for me: 389 days 9343h 3m 28.000000s
waiting time for anyone: 22h 14m 53.898438s
waiting time for good: 520 days 12503h 48m 24.000000s
wasted timeout time: 473 days 11375h 2m 44.000000s
total_acquired: 7739031655
total_releases: 7736374042
hashtable_entries: 119
processing_workers: 118
waiting_workers: 216
connect_errors: 0
failed_sends: 1
full_queues: 10294544
lock_mismatch: 227
lock_while_waiting: 42
release_mismatch: 0
processed_count: 7739031536

`

func TestAppendStatsFull(t *testing.T) {
	p := samplePool()
	p.Uptime = 15209*3600 + 42*60 + 26
	for _, arg := range []string{"FULL", "full", "Full", "fULl"} {
		got, ok := AppendStatsReply(nil, []byte(arg), p)
		if !ok {
			t.Fatalf("STATS %s: not ok", arg)
		}
		gl, wl := strings.Split(string(got), "\n"), strings.Split(sampleFull, "\n")
		for i := range max(len(gl), len(wl)) {
			var a, b string
			if i < len(gl) {
				a = gl[i]
			}
			if i < len(wl) {
				b = wl[i]
			}
			if a != b {
				t.Errorf("STATS %s line %d: got %q, want %q", arg, i+1, a, b)
			}
		}
		if len(gl) != len(wl) {
			t.Errorf("STATS %s: %d lines, want %d", arg, len(gl), len(wl))
		}
	}
}

func TestAppendStatsFullEmpty(t *testing.T) {
	p := Stats{Uptime: 5, WaitingWorkers: 3}
	got, ok := AppendStatsReply(nil, []byte("FULL"), &p)
	want := "uptime: 0 days, 0h 0m 5s\n" +
		"total processing time: 0.000000s\naverage processing time: 0.000000s\n" +
		"gained time: 0.000000s\nwaiting time: 0.000000s\nwaiting time for me: 0.000000s\n" +
		"waiting time for anyone: 0.000000s\nwaiting time for good: 0.000000s\n" +
		"wasted timeout time: 0.000000s\n" +
		"total_acquired: 0\ntotal_releases: 0\nhashtable_entries: 0\nprocessing_workers: 0\n" +
		"waiting_workers: 3\nconnect_errors: 0\nfailed_sends: 0\nfull_queues: 0\n" +
		"lock_mismatch: 0\nlock_while_waiting: 0\nrelease_mismatch: 0\nprocessed_count: 0\n\n"
	if !ok || string(got) != want {
		t.Fatalf("STATS FULL of nothing:\n%s\nwant\n%s", got, want)
	}
	if p.AverageProcessingTime() != 0 {
		t.Fatalf("AverageProcessingTime with no locks = %v", p.AverageProcessingTime())
	}
}

func TestAppendStatsCounters(t *testing.T) {
	// Every counter a distinct value, so a swapped field shows.
	p := &Stats{
		TotalAcquired: 101, TotalReleases: 102, ConnectErrors: 106, FailedSends: 107,
		FullQueues: 108, LockMismatch: 109, LockWhileWaiting: 110, ReleaseMismatch: 111,
		ProcessedCount: 112, TotalProcessingTime: 1,
		HashtableEntries: 103, ProcessingWorkers: 104, WaitingWorkers: 105,
	}
	names := []string{
		"total_acquired", "total_releases", "hashtable_entries", "processing_workers",
		"waiting_workers", "connect_errors", "failed_sends", "full_queues", "lock_mismatch",
		"lock_while_waiting", "release_mismatch", "processed_count",
	}
	for i, name := range names {
		want := name + ": " + strconv.Itoa(101+i) + "\n"
		for _, arg := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			got, ok := AppendStatsReply([]byte("pre"), []byte(arg), p)
			if !ok || string(got) != "pre"+want {
				t.Errorf("STATS %s = %q, %v; want %q", arg, got, ok, want)
			}
		}
	}
	// The same counters, in the same order, end the FULL block.
	full, _ := AppendStatsReply(nil, []byte("FULL"), p)
	lines := strings.Split(strings.TrimSuffix(string(full), "\n\n"), "\n")
	for i, name := range names {
		if got, want := lines[len(lines)-len(names)+i], name+": "+strconv.Itoa(101+i); got != want {
			t.Errorf("FULL counter line %d = %q, want %q", i, got, want)
		}
	}
	got, _ := AppendStatsReply(nil, []byte("processed_count"), &Stats{ProcessedCount: 1 << 63})
	if string(got) != "processed_count: 9223372036854775808\n" {
		t.Errorf("STATS processed_count of 2^63 = %q", got)
	}
}

func TestAppendStatsWrongStat(t *testing.T) {
	p := samplePool()
	p.Uptime = 1
	for _, arg := range []string{
		"", " ", "FULL ", " FULL", "FULLX", "FUL", "FULL\r", "UPTIME ", "UP TIME", "uptime\x00",
		"total processing time", "total_processing_time", "average processing time",
		"processed_count ", "processed-count", "processedcount", "processed_count\t",
		"STATS", "FULL FULL", "lock_while_waitin",
		"proce\u017f\u017fed_count", // ſ folds to s in Unicode, not in ASCII
		"lo\u212a_mismatch",         // K (Kelvin) folds to k in Unicode
		"lock_mismatch\n",
	} {
		dst := []byte("keep")
		got, ok := AppendStatsReply(dst, []byte(arg), p)
		if ok || string(got) != "keep" {
			t.Errorf("STATS %q = %q, %v; want WRONG_STAT with dst unchanged", arg, got, ok)
		}
	}
}

func TestEqualFold(t *testing.T) {
	for _, tc := range []struct {
		b, s string
		want bool
	}{
		{"", "", true}, {"a", "A", true}, {"FULL", "full", true}, {"Z_9", "z_9", true},
		{"@", "`", false}, {"[", "{", false}, {"a", "b", false}, {"ab", "a", false},
		{"\xc0", "\xe0", false},
	} {
		if got := equalFold([]byte(tc.b), tc.s); got != tc.want {
			t.Errorf("equalFold(%q, %q) = %v, want %v", tc.b, tc.s, got, tc.want)
		}
	}
}

func TestPoolAllocs(t *testing.T) {
	p := samplePool()
	p.Uptime = 1e6
	dst := make([]byte, 0, 2048)
	for name, f := range map[string]func(){
		"AppendDuration":        func() { dst = AppendDuration(dst[:0], 80093.898438) },
		"AppendStatsReply/FULL": func() { dst, _ = AppendStatsReply(dst[:0], []byte("full"), p) },
		"AppendStatsReply/one":  func() { dst, _ = AppendStatsReply(dst[:0], []byte("PROCESSED_COUNT"), p) },
		"AppendStatsReply/bad":  func() { dst, _ = AppendStatsReply(dst[:0], []byte("nope"), p) },
		"AppendKeyLine":         func() { dst = AppendKeyLine(dst[:0], "some-key", 1, 2, 3, 4) },
	} {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", name, allocs)
		}
	}
}

func BenchmarkAppendDuration(b *testing.B) {
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendDuration(dst[:0], 7413948024.123456)
	}
}

func BenchmarkAppendStatsFull(b *testing.B) {
	p := samplePool()
	p.Uptime = 54754946
	dst := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = AppendStatsReply(dst[:0], []byte("FULL"), p)
	}
}

func TestAppendKeyLine(t *testing.T) {
	got := string(AppendKeyLine([]byte("pre\n"), "db/host-1", 2, 3, 1, 9))
	if want := "pre\ndb/host-1: processing 2 workers 3 waiting 1 maxqueue 9\n"; got != want {
		t.Fatalf("AppendKeyLine = %q, want %q", got, want)
	}
	got = string(AppendKeyLine(nil, "k", 0, 4294967295, 0, 4294967295))
	if want := "k: processing 0 workers 4294967295 waiting 0 maxqueue 4294967295\n"; got != want {
		t.Fatalf("AppendKeyLine of extremes = %q, want %q", got, want)
	}
}
