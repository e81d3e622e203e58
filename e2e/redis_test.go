package e2e

// The Redis text protocol of the slock port with real Redis tools.

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRedisToolsAgainstTallyd runs redis-cli and redis-benchmark -t set,get,incr against
// the key/value commands.
func TestRedisToolsAgainstTallyd(t *testing.T) {
	t.Parallel()
	cli, err1 := exec.LookPath("redis-cli")
	bench, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		t.Skip("redis-cli or redis-benchmark is not installed: run scripts/ensure-redis-tools.sh (Debian package redis-tools)")
	}
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port))
	p.waitLog(t, "tallyd listening")
	ps := strconv.Itoa(port)
	run := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, name, append([]string{"-h", "127.0.0.1", "-p", ps}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
		return strings.TrimRight(string(out), "\n")
	}
	for _, c := range []struct{ args, want string }{
		{"SET greeting hello", "OK"},
		{"GET greeting", "hello"},
		{"INCRBY visits 41", "41"},
		{"INCR visits", "42"},
		{"GET visits", "42"},
		{"EXISTS greeting visits nothere", "2"},
		{"DEL greeting", "1"},
		{"GET greeting", ""},
		{"INCR visits x", "ERR value is not an integer or out of range"},
	} {
		if got := run(cli, strings.Fields(c.args)...); got != c.want {
			t.Fatalf("redis-cli %s: %q, want %q", c.args, got, c.want)
		}
	}
	out := run(bench, "-t", "set,get,incr", "-n", "20000", "-c", "16", "-P", "8", "--csv")
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 2 || !strings.HasPrefix(f[0], `"SET"`) && !strings.HasPrefix(f[0], `"GET"`) && !strings.HasPrefix(f[0], `"INCR"`) {
			continue
		}
		rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		if err != nil || rps <= 0 {
			t.Fatalf("redis-benchmark row %q", line)
		}
		rows++
	}
	if rows != 3 || strings.Contains(out, "WARNING") || strings.Contains(out, "ERR") {
		t.Fatalf("redis-benchmark printed:\n%s", out)
	}
	// Every INCR of the benchmark counted: it increments one key, counter:__rand_int__.
	if got := run(cli, "GET", "counter:__rand_int__"); got != "20000" {
		t.Fatalf("counter after 20,000 INCRs: %q\n%s", got, out)
	}
	t.Logf("redis-benchmark:\n%s", out)
}
