package e2e

// --metrics-addr on the real binary: the address it logs, /metrics and /healthz over HTTP,
// the config key, and a clean stop.

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// metricsAddr waits for the line that names the metrics address and returns it.
func (p *proc) metricsAddr(t *testing.T) string {
	t.Helper()
	p.waitLog(t, "metrics_addr=")
	m := regexp.MustCompile(`metrics_addr=(\S+)`).FindStringSubmatch(p.log.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", p.log.String())
	}
	return m[1]
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

func TestMetricsFlagServesMetricsAndHealthz(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	p := start(t, 0, "--counter-port", strconv.Itoa(port), "--metrics-addr", "127.0.0.1:0")
	base := "http://" + p.metricsAddr(t)
	p.waitLog(t, "tallyd listening")

	c := dialRetry(t, "127.0.0.1:"+strconv.Itoa(port))
	if r := call(t, c, counter.AppendAcquire(nil, 1, 2, 5, []byte("m"))); r.Status != counter.StatusOK {
		t.Fatalf("acquire: %v", r.Status)
	}
	if r := call(t, c, counter.AppendRelease(nil, 2, 9, []byte("m"))); r.Status != counter.StatusNotAcquired {
		t.Fatalf("release: %v", r.Status)
	}
	// The version build_info must carry is the one the binary prints.
	_, out := runBin(t, "--version")
	version, ok := strings.CutPrefix(strings.TrimSpace(out), "tallyd ")
	if !ok || version == "" {
		t.Fatalf("--version printed %q", out)
	}
	code, body := httpGet(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	for _, line := range []string{
		`tallyd_build_info{goversion="go`,
		`,version="` + version + `"} 1`,
		`tallyd_connections{proto="counter"} 1`,
		`tallyd_requests_total{command="acquire",outcome="ok",proto="counter"} 1`,
		`tallyd_requests_total{command="release",outcome="not_acquired",proto="counter"} 1`,
		`tallyd_objects{proto="counter"} 1`,
		`process_open_fds `,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit %d after SIGTERM; log:\n%s", code, p.log.String())
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the metrics server still answers after exit")
	}
}

func TestMetricsAddrFromConfigFile(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "tallyd.conf")
	if err := os.WriteFile(conf, []byte("metrics.addr = \"127.0.0.1:0\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, 0, "--counter-port", strconv.Itoa(freePort(t)), "--config", conf)
	base := "http://" + p.metricsAddr(t)
	var code int
	var body string
	if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		code, body = httpGet(t, base+"/healthz")
		return code == http.StatusOK
	}) {
		t.Fatalf("/healthz: %d %q", code, body)
	}
}

func TestMetricsAddrInvalidExits1(t *testing.T) {
	t.Parallel()
	p := start(t, 0, "--counter-port", strconv.Itoa(freePort(t)), "--metrics-addr", "127.0.0.1:99999")
	if code := p.exitCode(t); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(p.log.String(), `--metrics-addr: metrics address "127.0.0.1:99999"`) {
		t.Fatalf("log does not say what was wrong:\n%s", p.log.String())
	}
}
