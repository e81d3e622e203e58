package e2e

// scripts/yc-cnt, a client written from the spec alone, against tallyd and against a scripted
// server that checks the bytes it sends.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const ycPath = "../scripts/yc-cnt"

var (
	ycOnce   sync.Once
	ycPython string // the interpreter itself: a version manager's shim costs 0.4 s a start
)

// ycInterpreter finds python3 or skips the test.
func ycInterpreter(t *testing.T) string {
	t.Helper()
	ycOnce.Do(func() {
		py, err := exec.LookPath("python3")
		if err != nil {
			return
		}
		ycPython = py
		if out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output(); err == nil {
			if p := strings.TrimSpace(string(out)); p != "" {
				ycPython = p
			}
		}
	})
	if ycPython == "" {
		t.Skip("python3 is not installed")
	}
	return ycPython
}

// ycRun runs yc-cnt with stdin and returns its stdout, stderr and exit status.
func ycRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	py := ycInterpreter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{ycPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code, ok := exitStatus(err)
	if !ok || err != nil && ctx.Err() != nil { // not run, or killed at the timeout
		t.Fatalf("yc-cnt %q: %v\nstderr: %s", args, err, e.String())
	}
	return o.String(), e.String(), code
}

// ycWaitZero runs `yc-cnt get NAME` until it prints 0 (10 s at most), and returns whether
// it did and what it printed last.
func ycWaitZero(t *testing.T, srv []string, name string) (bool, string) {
	t.Helper()
	var out string
	ok := waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		out, _, _ = ycRun(t, "", append(srv, "get", name)...)
		return out == "0\n"
	})
	return ok, out
}

func ycLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestYcCntSession(t *testing.T) {
	t.Parallel()
	ycInterpreter(t)
	if fi, err := os.Stat(ycPath); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is missing or not executable: %v", ycPath, err)
	}
	t.Run("wire format against a scripted server", ycFakeServer)

	addr := cfStartTallyd(t, "--max-objects", "4")
	_, port, _ := net.SplitHostPort(addr)
	srv := []string{"-s", "127.0.0.1", "-p", port}

	t.Run("scripted session", func(t *testing.T) {
		session := `# every kind of answer, on one connection
noop
acquire s1 3 10
acquire s1 5 10
get s1
acquire s1 3 10          # 8 + 3 > 10
release s1 2
get s1
release s1 7             # holds 6
release s1 0
release nosuch 1
get nosuch
acquire a\x00\x20b 1 1
get a\x00\x20b
acquire s2 1 1
acquire s3 1 1
acquire s4 1 1           # a fifth counter with --max-objects 4

acquire s1 0 1
acquire s1 2 1
acquire s1 x 1
acquire s1 1 4294967296
get
frobnicate s1
get \q
dump
stats
`
		out, errOut, code := ycRun(t, session, srv...)
		if code != 1 {
			t.Errorf("exit %d, want 1 (local errors happened)\nstderr: %s", code, errOut)
		}
		lines := ycLines(out)
		want := []string{
			"OK", "OK 3", "OK 5", "8", "ERROR 0x21 Resource not available", "OK", "6",
			"ERROR 0x22 Not acquired", "OK", "ERROR 0x01 Not found", "ERROR 0x01 Not found",
			"OK 1", "1", "OK 1", "OK 1", "ERROR 0x82 Out of memory",
		}
		if len(lines) < len(want)+4+15 {
			t.Fatalf("output too short:\n%s\nstderr: %s", out, errOut)
		}
		for i, w := range want {
			if lines[i] != w {
				t.Errorf("line %d: %q, want %q", i+1, lines[i], w)
			}
		}
		dump := append([]string(nil), lines[len(want):len(want)+4]...)
		sort.Strings(dump)
		if got, w := strings.Join(dump, "|"), `a\x00\x20b 1 1|s1 6 8|s2 1 1|s3 1 1`; got != w {
			t.Errorf("dump lines (sorted) %q, want %q", got, w)
		}
		stats := lines[len(want)+4:]
		names := []string{"objects", "total_objects", "used_memory", "conflicts", "gc_count",
			"last_gc_elapsed", "total_gc_elapsed", "curr_connections", "total_connections",
			"command:noop", "command:get", "command:acquire", "command:release",
			"command:stats", "command:dump"}
		if len(stats) != len(names) {
			t.Fatalf("stats: %d lines, want %d:\n%s", len(stats), len(names), strings.Join(stats, "\n"))
		}
		values := map[string]string{}
		for i, l := range stats {
			name, value, _ := strings.Cut(l, " ")
			if name != names[i] {
				t.Errorf("stats line %d is %q, want the name %s", i+1, l, names[i])
			}
			if _, err := strconv.ParseUint(value, 10, 64); err != nil {
				t.Errorf("stats line %q: the value is not a number", l)
			}
			values[name] = value
		}
		for k, v := range map[string]string{"objects": "4", "curr_connections": "1",
			"command:noop": "1", "command:get": "4", "command:release": "4", "command:dump": "1"} {
			if values[k] != v {
				t.Errorf("stats %s = %q, want %s", k, values[k], v)
			}
		}
		errs := ycLines(errOut)
		wantErr := []string{
			"line 19: resources must be at least 1",
			"line 20: resources 2 is larger than maximum 1",
			"line 21: resources 'x' is not a whole number",
			"line 22: maximum 4294967296 is larger than 4294967295",
			"line 23: usage: get NAME",
			"line 24: unknown command 'frobnicate'",
			"line 25: name '\\\\q': unknown escape",
		}
		if len(errs) != len(wantErr) {
			t.Fatalf("stderr has %d lines, want %d:\n%s", len(errs), len(wantErr), errOut)
		}
		for i, w := range wantErr {
			if !strings.HasPrefix(errs[i], "yc-cnt: "+w) {
				t.Errorf("stderr line %d: %q, want it to start with %q", i+1, errs[i], "yc-cnt: "+w)
			}
		}
	})

	t.Run("exit statuses of single commands", func(t *testing.T) {
		// The session above has ended: its holdings of s1 went with its connection.
		if ok, _ := ycWaitZero(t, srv, "s1"); !ok {
			t.Fatal("s1 is still held 10 s after the session ended")
		}
		for _, c := range []struct {
			args       []string
			out, inErr string
			code       int
		}{
			{[]string{"get", "s1"}, "0\n", "", 0},
			{[]string{"noop"}, "OK\n", "", 0},
			{[]string{"get", "nosuch"}, "ERROR 0x01 Not found\n", "", 2},
			{[]string{"release", "s2", "1"}, "ERROR 0x22 Not acquired\n", "", 2},
			{[]string{"acquire", "s1", "0", "1"}, "", "resources must be at least 1", 1},
			{[]string{"acquire", "s1", "2", "1"}, "", "resources 2 is larger than maximum 1", 1},
			{[]string{"get", ""}, "", "name '' is empty", 1},
			{[]string{"get", strings.Repeat("n", 65536)}, "", "name is 65536 bytes long, the limit is 65535", 1},
			{[]string{"get", strings.Repeat("n", 65535)}, "ERROR 0x01 Not found\n", "", 2},
			{[]string{"bogus"}, "", "unknown command 'bogus'", 1},
			{[]string{"acquire", "s1", "1"}, "", "usage: acquire NAME RESOURCES MAXIMUM", 1},
		} {
			out, errOut, code := ycRun(t, "", append(srv, c.args...)...)
			if code != c.code || out != c.out || !strings.Contains(errOut, c.inErr) || (c.inErr == "") != (errOut == "") {
				t.Errorf("yc-cnt %.40q: exit %d, out %q, err %q; want exit %d, out %q, err containing %q",
					c.args, code, out, errOut, c.code, c.out, c.inErr)
			}
		}
		// Nothing listening: a connection error.
		_, errOut, code := ycRun(t, "", "-s", "127.0.0.1", "-p", strconv.Itoa(freePort(t)), "noop")
		if code != 1 || !strings.Contains(errOut, "connect to 127.0.0.1 port") {
			t.Errorf("closed port: exit %d, stderr %q", code, errOut)
		}
		// -d dumps both frames.
		_, errOut, code = ycRun(t, "", append([]string{"-d"}, append(srv, "noop")...)...)
		if code != 0 || !strings.Contains(errOut, "> 0000  90 00 00 00 00 00 00 00 00 00 00 01") ||
			!strings.Contains(errOut, "< 0000  91 00 00 00 00 00 00 00 00 00 00 01") {
			t.Errorf("-d: exit %d, stderr:\n%s", code, errOut)
		}
	})

	t.Run("holdings end with the session", func(t *testing.T) {
		addr := cfStartTallyd(t)
		_, port, _ := net.SplitHostPort(addr)
		srv := []string{"-s", "127.0.0.1", "-p", port}
		holder := exec.Command(ycInterpreter(t), append([]string{ycPath}, srv...)...)
		in, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outPipe, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var holderErr bytes.Buffer
		holder.Stderr = &holderErr
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(outPipe)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		next := func() string {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("holder ended early; stderr: %s", holderErr.String())
				}
				return l
			case <-time.After(15 * time.Second):
				t.Fatal("holder printed nothing for 15 s")
			}
			return ""
		}
		if _, err := io.WriteString(in, "acquire held 4 10\nacquire held 2 10 # two acquires, one ledger entry\n"); err != nil {
			t.Fatal(err)
		}
		if l1, l2 := next(), next(); l1 != "OK 4" || l2 != "OK 2" {
			t.Fatalf("holder: %q, %q", l1, l2)
		}
		check := func(want string, wantCode int, args ...string) {
			t.Helper()
			out, errOut, code := ycRun(t, "", append(srv, args...)...)
			if out != want || code != wantCode {
				t.Errorf("%q while held: %q exit %d, want %q exit %d (stderr %q)", args, out, code, want, wantCode, errOut)
			}
		}
		check("6\n", 0, "get", "held")
		check("ERROR 0x21 Resource not available\n", 2, "acquire", "held", "5", "10")
		check("ERROR 0x22 Not acquired\n", 2, "release", "held", "1")
		check("held 6 6\n", 0, "dump")
		// The holder gives back part of it, then its input ends and it exits.
		if _, err := io.WriteString(in, "release held 1\nget held\n"); err != nil {
			t.Fatal(err)
		}
		if l1, l2 := next(), next(); l1 != "OK" || l2 != "5" {
			t.Fatalf("holder: %q, %q", l1, l2)
		}
		in.Close()
		if err := holder.Wait(); err != nil {
			t.Fatalf("holder: %v; stderr: %s", err, holderErr.String())
		}
		if ok, out := ycWaitZero(t, srv, "held"); !ok {
			t.Fatalf("held is still %q 10 s after its holder exited", out)
		}
		check("OK 10\n", 0, "acquire", "held", "10", "10")
	})
}

// ycFakeServer runs yc-cnt against a scripted server to check the exact bytes it sends,
// its serials, and how it treats bad replies.
func ycFakeServer(t *testing.T) {
	type exchange struct {
		req   []byte   // the request yc-cnt must send
		reply [][]byte // what the server answers
	}
	serve := func(t *testing.T, script []exchange) (port string, wait func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			defer ln.Close()
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(15 * time.Second))
			for i, x := range script {
				got := make([]byte, len(x.req))
				if _, err := io.ReadFull(c, got); err != nil {
					errc <- fmt.Errorf("request %d: %v", i+1, err)
					return
				}
				if !bytes.Equal(got, x.req) {
					errc <- fmt.Errorf("request %d: % x, want % x", i+1, got, x.req)
					return
				}
				for _, r := range x.reply {
					if _, err := c.Write(r); err != nil {
						errc <- err
						return
					}
				}
			}
			// Then nothing more may come but the close.
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				errc <- fmt.Errorf("after the script: %d bytes, %v", n, err)
				return
			}
			errc <- nil
		}()
		_, port, _ = net.SplitHostPort(ln.Addr().String())
		return port, func() {
			t.Helper()
			select {
			case err := <-errc:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(15 * time.Second):
				t.Error("the scripted server never finished")
			}
		}
	}
	stat := func(name, value string) []byte {
		b := binary.BigEndian.AppendUint16(nil, uint16(len(name)))
		b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
		return append(append(b, name...), value...)
	}
	for _, c := range []struct {
		name   string
		args   []string
		stdin  string
		script []exchange
		out    string
		inErr  string
		code   int
	}{
		{
			name: "acquire encodes as the spec says",
			args: []string{"acquire", "x", "3", "10"},
			script: []exchange{{
				req:   []byte{0x90, 0x02, 0, 0, 0, 0, 0, 0x0b, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0x0a, 0, 1, 'x'},
				reply: [][]byte{cfReply(cfAcquire, 0, 1, cfU32(3))},
			}},
			out: "OK 3\n",
		},
		{
			name:  "serials count up from 1 on one connection; every opcode",
			stdin: "noop\nget n\\x00\\\\\nrelease n 0\nstats\ndump\n",
			script: []exchange{
				{cfReq(cfNoop, 1, nil), [][]byte{cfOK(cfNoop, 1)}},
				{cfReq(cfGet, 2, cfGetBody("n\x00\\")), [][]byte{cfReply(cfGet, 0, 2, cfU32(4294967295))}},
				{cfReq(cfRelease, 3, cfRelBody(0, "n")), [][]byte{cfOK(cfRelease, 3)}},
				{cfReq(cfStats, 4, nil), [][]byte{cfReply(cfStats, 0, 4, cfCat(stat("objects", "2"), stat("command:get", "17")))}},
				{cfReq(cfDump, 5, nil), [][]byte{cfDumpEntry(5, 1, 2, "a b"), cfDumpEntry(5, 0, 9, "\\\xff"), cfOK(cfDump, 5)}},
			},
			out: "OK\n4294967295\nOK\nobjects 2\ncommand:get 17\na\\x20b 1 2\n\\\\\\xff 0 9\n",
		},
		{
			name:   "the error message comes from the reply body",
			args:   []string{"get", "y"},
			script: []exchange{{cfReq(cfGet, 1, cfGetBody("y")), [][]byte{cfReply(cfGet, 0x04, 1, []byte("Invalid arguments"))}}},
			out:    "ERROR 0x04 Invalid arguments\n",
			code:   2,
		},
		{
			name:   "a reply with the wrong magic is an error",
			args:   []string{"noop"},
			script: []exchange{{cfReq(cfNoop, 1, nil), [][]byte{cfRaw(0x90, cfNoop, 0, 0, 1, nil)}}},
			inErr:  "reply magic 0x90, want 0x91",
			code:   1,
		},
		{
			name:   "a reply to another serial is an error",
			args:   []string{"noop"},
			script: []exchange{{cfReq(cfNoop, 1, nil), [][]byte{cfOK(cfNoop, 2)}}},
			inErr:  "reply opaque 2 does not match request serial 1",
			code:   1,
		},
		{
			name:   "a short get reply is an error",
			args:   []string{"get", "z"},
			script: []exchange{{cfReq(cfGet, 1, cfGetBody("z")), [][]byte{cfReply(cfGet, 0, 1, []byte{1, 2})}}},
			inErr:  "get reply body is 2 bytes, want 4",
			code:   1,
		},
		{
			name:  "an interactive session stops at a connection error",
			stdin: "noop\nnoop\nnoop\n",
			script: []exchange{
				{cfReq(cfNoop, 1, nil), [][]byte{cfOK(cfNoop, 1)}},
				{cfReq(cfNoop, 2, nil), [][]byte{cfReply(cfGet, 0, 2, nil)}},
			},
			out:   "OK\n",
			inErr: "line 2: reply opcode 0x01 to a request with opcode 0x00",
			code:  1,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			port, wait := serve(t, c.script)
			out, errOut, code := ycRun(t, c.stdin, append([]string{"-s", "127.0.0.1", "-p", port}, c.args...)...)
			wait()
			if out != c.out || code != c.code || !strings.Contains(errOut, c.inErr) || (c.inErr == "") != (errOut == "") {
				t.Errorf("exit %d, out %q, err %q; want exit %d, out %q, err containing %q", code, out, errOut, c.code, c.out, c.inErr)
			}
		})
	}
}
