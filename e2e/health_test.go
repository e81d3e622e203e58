package e2e

// /readyz on the real binary (issue 24): ready while the log takes writes; 503 with the
// log's error while a full disk refuses them, and ready again once space comes back. The
// log's metrics move: fsyncs timed with appendfsync always, write errors on a full disk.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue returns the value of the sample line starting with series in /metrics, or -1.
func metricValue(t *testing.T, base, series string) float64 {
	t.Helper()
	_, body := httpGet(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

// waitReady polls /readyz until its status is code and its body starts with prefix.
func waitReady(t *testing.T, base string, code int, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, body := httpGet(t, base+"/readyz")
		if got == code && strings.HasPrefix(body, prefix) && strings.Count(body, "\n") == 1 {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %q, want %d %q...", got, body, code, prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestReadyzLogFailing(t *testing.T) {
	t.Parallel()
	dir := smallDisk(t, 1<<20)
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--data-dir="+dir,
		"--appendfsync=everysec", "--aof-rewrite-size=1073741824", "--metrics-addr=127.0.0.1:0")
	base := "http://" + p.metricsAddr(t)
	p.waitLog(t, "tallyd listening")
	a, b := dialR(t, addr), dialR(t, addr)
	a.must(t, "+OK", "SET", "first", "1")
	waitReady(t, base, http.StatusOK, "ready\n")
	if v := metricValue(t, base, `tallyd_log_write_errors_total{log="aof"}`); v != 0 {
		t.Fatalf("tallyd_log_write_errors_total before the disk filled: %v", v)
	}

	value := strings.Repeat("v", 16<<10)
	full := false
	for i := 0; i < 200 && !full; i++ {
		got, err := a.doWithin(2*time.Second, "SET", fmt.Sprintf("k%d", i), value)
		switch {
		case errors.Is(err, errHeld), err == nil && strings.HasPrefix(got, "-MISCONF"):
			full = true
		case err != nil || got != "+OK":
			t.Fatalf("SET k%d: %q, %v", i, got, err)
		}
	}
	if !full {
		t.Fatal("200 SETs of 16 KiB all acknowledged on a 1 MiB disk")
	}
	waitReady(t, base, http.StatusServiceUnavailable, "log: No space left on device\n")
	if v := metricValue(t, base, `tallyd_log_write_errors_total{log="aof"}`); v < 1 {
		t.Fatalf("tallyd_log_write_errors_total on a full disk: %v", v)
	}
	if v := metricValue(t, base, "tallyd_ready"); v != 0 {
		t.Fatalf("tallyd_ready on a full disk: %v", v)
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz on a full disk (the loop answers): %d %q", code, body)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitReady(t, base, http.StatusOK, "ready\n")
	b.must(t, "+OK", "SET", "after", "1")
	if v := metricValue(t, base, `tallyd_log_bytes{log="aof"}`); v < 16<<10 {
		t.Fatalf("tallyd_log_bytes after SETs of 16 KiB: %v", v)
	}
}

// With appendfsync always every acknowledged write was fsynced: the fsync histogram counts
// them; the held-replies gauge is there, and a single node exports no raft metrics.
func TestLogFsyncMetrics(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--data-dir="+t.TempDir(),
		"--appendfsync=always", "--metrics-addr=127.0.0.1:0")
	base := "http://" + p.metricsAddr(t)
	p.waitLog(t, "tallyd listening")
	a := dialR(t, addr)
	a.must(t, "+OK", "SET", "k0", "v")
	waitReady(t, base, http.StatusOK, "ready\n")
	series := `tallyd_log_fsync_seconds_count{log="aof"}`
	before := metricValue(t, base, series)
	if before < 1 {
		t.Fatalf("%s after an acknowledged SET with appendfsync always: %v", series, before)
	}
	for i := 1; i <= 10; i++ {
		a.must(t, "+OK", "SET", fmt.Sprint("k", i), "v")
	}
	if after := metricValue(t, base, series); after < before+1 {
		t.Fatalf("%s: %v before 10 SETs, %v after", series, before, after)
	}
	if v := metricValue(t, base, `tallyd_held_replies{level="log"}`); v != 0 {
		t.Fatalf(`tallyd_held_replies{level="log"} with nothing pending: %v`, v)
	}
	if _, body := httpGet(t, base+"/metrics"); strings.Contains(body, "tallyd_raft_") {
		t.Fatal("a single node exports raft metrics")
	}
}
