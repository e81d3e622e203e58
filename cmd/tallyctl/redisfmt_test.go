package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// redisServer starts a throwaway redis-server on a free port and returns the port; the test
// is skipped when redis-server or redis-cli is missing (make deps installs both).
func redisServer(t *testing.T) int {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (scripts/ensure-python-redis.sh)")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli is not installed (scripts/ensure-redis-tools.sh)")
	}
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server did not listen on %d:\n%s", port, log)
		}
	}
}

// rawCases are replies of every shape: status, bulk strings needing escapes, nil, integers,
// errors, empty, nested and ten-plus-element arrays, errors inside arrays, and the
// commands redis-cli prints as text whatever the output is.
var rawCases = [][]string{
	{"PING"},
	{"SET", "k", "v"},
	{"GET", "k"},
	{"GET", "nokey"},
	{"STRLEN", "k"},
	{"SET", "q", "a\"b\\c\nd\r\t\a\b\x01\x7f é ~"},
	{"GET", "q"},
	{"ECHO", ""},
	{"MGET", "k", "nokey", "q"},
	{"EVAL", "return {1,{2,'x',{}},'y',{}}", "0"},
	{"EVAL", "return {}", "0"},
	{"EVAL", "return {1,2,3,4,5,6,7,8,9,10,{11,{12,{}}}}", "0"},
	{"EVAL", "return {1,{err='E1 nested'},'z'}", "0"},
	{"EVAL", "return redis.error_reply('MYERR bad')", "0"},
	{"NOSUCHCOMMAND", "a"},
	{"MEMORY", "DOCTOR"},
	{"LATENCY", "DOCTOR"},
	{"CLUSTER", "INFO"},
}

// tallyctl raw prints each reply byte for byte as redis-cli does, both renderings: --raw
// (a pipe's), --no-raw (a terminal's), and with neither the one that fits stdout.
func TestRawLikeRedisCLI(t *testing.T) {
	port := redisServer(t)
	p := strconv.Itoa(port)
	for _, args := range rawCases {
		for _, mode := range []string{"--raw", "--no-raw", ""} {
			cli := append([]string{"-p", p}, args...)
			ctl := append([]string{"--slock-port", p, "raw"}, args...)
			if mode != "" {
				cli = append([]string{mode}, cli...)
				ctl = append([]string{"--slock-port", p, "raw", mode, "--"}, args...)
			}
			want, _ := exec.Command("redis-cli", cli...).Output()
			cmd := exec.Command(ctlBin, ctl...)
			got, err := cmd.Output()
			code := cmd.ProcessState.ExitCode()
			if !bytes.Equal(got, want) {
				t.Errorf("raw %s %q:\n got %q\nwant %q (redis-cli)\n%v", mode, args, got, want, err)
			}
			if wantCode := map[bool]int{true: 2, false: 0}[bytes.Contains(got, []byte("ERR"))]; code != wantCode {
				t.Errorf("raw %s %q: exit %d, want %d", mode, args, code, wantCode)
			}
		}
	}
	// On a terminal both pick the terminal's rendering.
	for _, args := range [][]string{{"GET", "q"}, {"MGET", "k", "nokey"}, {"EVAL", "return {1,{2,'x'}}", "0"}, {"NOSUCHCOMMAND"}} {
		want := onTerminal(t, "redis-cli", append([]string{"-p", p}, args...)...)
		got := onTerminal(t, ctlBin, append([]string{"--slock-port", p, "raw"}, args...)...)
		if got != want || !strings.ContainsAny(got, "\"(") {
			t.Errorf("raw %q on a terminal:\n got %q\nwant %q (redis-cli)", args, got, want)
		}
	}
}

// tallyd's INFO, through tallyctl raw, is its text with its line ends, not a quoted string.
func TestRawInfoIsText(t *testing.T) {
	s := startServer(t, false)
	for _, mode := range []string{"--raw", "--no-raw"} {
		r := s.ctl(t, "raw", mode, "INFO")
		if r.code != 0 || !strings.HasPrefix(r.out, "# Server\r\n") || strings.Contains(r.out, `\r\n`) {
			t.Errorf("raw %s INFO:\n%v", mode, r)
		}
	}
	expect(t, s.ctl(t, "raw", "--no-raw", "ECHO", "hi there"), 0, []string{"\"hi there\"\n"}, nil)
	expect(t, s.ctl(t, "raw", "ECHO", "hi there"), 0, []string{"hi there\n"}, nil)
	expect(t, s.ctl(t, "raw", "--raw", "--no-raw", "PING"), 1, nil, []string{"--raw and --no-raw exclude each other"})
}

// onTerminal runs bin with a pseudo-terminal as its stdout and returns what it printed.
func onTerminal(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(ptm); done <- b }() // ends with EIO once the child has gone
	_ = cmd.Wait()
	select {
	case b := <-done:
		return strings.ReplaceAll(string(b), "\r\n", "\n")
	case <-time.After(10 * time.Second):
		t.Fatalf("%s %q: no end of output on the terminal", bin, args)
	}
	return ""
}
