package main

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tallyctl health against a real tallyd (ready, exit 0), a server answering 503 as /readyz
// does (unready, exit 2), nothing listening and a server that is not tallyd's (exit 1).
func TestHealth(t *testing.T) {
	maddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cmd := exec.Command(tallydBin, "--counter-port", strconv.Itoa(freePort(t)), "--semaphore-port", "0",
		"--metrics-addr", maddr)
	cmd.Dir = t.TempDir()
	log := &syncBuf{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	var s *server
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := s.ctl(t, "health", "--metrics-addr", maddr)
		if r.code == 0 {
			expect(t, r, 0, []string{"ready\n"}, nil)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tallyd never ready: %v\n%s", r, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The address from the environment, and --json.
	r := s.startEnv(t, []string{envMetricsAddr + "=" + maddr}, "--json", "health").wait(t)
	expect(t, r, 0, []string{`{"ok":true,"ready":true}`}, nil)

	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/readyz" {
			http.NotFound(w, req)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("no quorum: 1 of 3 voters reachable\n"))
	}))
	defer unready.Close()
	uaddr := strings.TrimPrefix(unready.URL, "http://")
	r = s.ctl(t, "health", "--metrics-addr", uaddr)
	expect(t, r, 2, []string{"unready: no quorum: 1 of 3 voters reachable\n"}, nil)
	if r.err != "" {
		t.Errorf("unready printed on stderr too: %q", r.err)
	}
	r = s.ctl(t, "--json", "health", "--metrics-addr", uaddr)
	expect(t, r, 2, []string{`"ready":false`, `"reason":"no quorum: 1 of 3 voters reachable"`}, nil)

	notTallyd := httptest.NewServer(http.NotFoundHandler())
	defer notTallyd.Close()
	r = s.ctl(t, "health", "--metrics-addr", strings.TrimPrefix(notTallyd.URL, "http://"))
	expect(t, r, 1, nil, []string{"404 Not Found, not /readyz's 200 or 503"})

	down := "127.0.0.1:" + strconv.Itoa(freePort(t))
	expect(t, s.ctl(t, "health", "--metrics-addr", down), 1, nil, []string{"cannot connect to tallyd's metrics server at " + down, "connection refused"})
	expect(t, s.ctl(t, "health", "--metrics-addr", "nocolon"), 1, nil, []string{`--metrics-addr "nocolon": want HOST:PORT`})
	expect(t, s.ctl(t, "health", "extra"), 1, nil, []string{"takes no arguments"})
	expect(t, s.ctl(t, "--help"), 0, []string{"health", "(its /readyz)"}, nil)
}
