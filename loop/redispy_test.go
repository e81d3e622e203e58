package loop

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redisPy returns a Python 3 that imports redis-py (Debian's python3-redis), or skips.
func redisPy(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(py); err == nil && exec.Command(path, "-c", "import redis").Run() == nil {
			return path
		}
	}
	t.Skip("redis-py is not installed: run scripts/ensure-python-redis.sh (Debian package python3-redis)")
	return ""
}

// runRedisPy runs testdata/redispy_counters.py against addr and returns what it printed.
func runRedisPy(t *testing.T, py, addr string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/redispy_counters.py", host, port)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("redis-py against %s: %v\n%s\n%s", addr, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// startRedisServer starts a throwaway redis-server on a free port, or returns "" if none
// is installed.
func startRedisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return ""
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			var b [16]byte
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(b[:])
			_ = c.Close()
			if strings.HasPrefix(string(b[:n]), "+PONG") {
				return addr
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(dir + "/redis.log")
			t.Fatalf("redis-server did not answer on %s:\n%s", addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisPy drives tallyd with a real client library: redis-py's transactions
// (pipeline(transaction=True)) of INCRs, WATCH with a conflicting write, MGET/MSET/MSETNX
// and a read-your-writes pipeline; the script checks each answer. Where redis-server is
// installed, the same script runs against it and must print the same answers.
func TestRedisPy(t *testing.T) {
	py := redisPy(t)
	ts := startSlock(t, nil)
	got := runRedisPy(t, py, ts.slockAddr)
	ts.healthy(t)
	addr := startRedisServer(t)
	if addr == "" {
		t.Log("redis-server is not installed (scripts/ensure-python-redis.sh installs it): compared with the script's expectations only")
		return
	}
	if want := runRedisPy(t, py, addr); got != want {
		t.Fatalf("tallyd and redis-server answer differently:\ntallyd: %s\nredis:  %s", got, want)
	}
}
