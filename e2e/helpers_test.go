package e2e

// What the tests of this package share: the binary and its processes, connections over
// TCP, and the counter protocol's frames built by hand from the spec.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/resp"
)

var binPath string

// TestMain builds the real binary once: these tests run it as a process, the way
// deployment scripts do. It is built by import path, so the tests work from any directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tallyd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "tallyd")
	out, err := exec.Command("go", "build", "-o", binPath, "github.com/tallyd/tallyd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runBin runs the binary to its end and returns its exit status and everything it printed.
func runBin(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(binPath, args...).CombinedOutput()
	code, ok := exitStatus(err)
	if !ok {
		t.Fatalf("tallyd %q: %v", args, err)
	}
	return code, string(out)
}

// exitStatus is the exit status that a Wait or Run error stands for (-1: killed by a
// signal); false if it stands for none (the process could not be run or waited for).
func exitStatus(err error) (int, bool) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, true
	case errors.As(err, &ee):
		return ee.ExitCode(), true
	}
	return -1, false
}

// waitUntil asks cond every interval until it says true or the deadline passes, and
// returns its last answer.
func waitUntil(deadline time.Time, every time.Duration, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
}

// syncBuf is a bytes.Buffer safe for the process's writer and the test's reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// proc is a server process: tallyd or the reference yrmcdsd.
type proc struct {
	cmd  *exec.Cmd
	log  *syncBuf
	done chan error // Wait's result, put back by whoever takes it
}

// start runs the binary (through bash when a ulimit is wanted) and kills it when the test ends.
//
// Tests never use the default ports: unless args name --pool-port or --slock-port, those are off.
func start(t *testing.T, ulimit int, args ...string) *proc {
	t.Helper()
	if !strings.Contains(strings.Join(args, " "), "--pool-port") {
		args = append(args, "--pool-port=0")
	}
	if !strings.Contains(strings.Join(args, " "), "--slock-port") {
		args = append(args, "--slock-port=0")
	}
	if j := strings.Join(args, " "); !strings.Contains(j, "--data-dir") && !strings.Contains(j, "--appendonly") {
		args = append(args, "--data-dir="+t.TempDir())
	}
	if ulimit > 0 {
		return startCmd(t, exec.Command("bash", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, ulimit), binPath}, args...)...))
	}
	return startCmd(t, exec.Command(binPath, args...))
}

// startCmd starts a server process, its output going to its log, and kills it when the
// test ends.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, log: &syncBuf{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) waitLog(t *testing.T, substr string) {
	t.Helper()
	if !waitUntil(time.Now().Add(10*time.Second), 10*time.Millisecond, func() bool {
		return strings.Contains(p.log.String(), substr)
	}) {
		t.Fatalf("log never said %q:\n%s", substr, p.log.String())
	}
}

// exited tells, without waiting, whether the process has ended, and Wait's error if so.
func (p *proc) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err // for exitCode and the cleanup
		return true, err
	default:
		return false, nil
	}
}

// exitCode waits for the process to end.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if code, ok := exitStatus(err); ok {
			return code
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatalf("process did not exit; log:\n%s", p.log.String())
	}
	return -1
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// freePort returns a port of 127.0.0.1 that was free a moment ago and that no other test of
// this process was given. It is below the kernel's ephemeral range, from which the
// outbound connections of tests running in parallel take their ports: a server restarted
// later on it finds it still free.
func freePort(t *testing.T) int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		port := 10000 + rand.IntN(max(lo-10000, 1000))
		if portsGiven[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[port] = true
		return port
	}
	t.Fatal("no free port below the ephemeral range")
	return 0
}

func dialRetry(t *testing.T, addr string) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		c, err = net.DialTimeout("tcp", addr, time.Second)
		return err == nil
	}) {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// call sends one request and reads its response.
func call(t *testing.T, c net.Conn, req []byte) counter.Response {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf, err := readFrame(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var r counter.Response
	if _, err := counter.ParseResponse(buf, 1<<20, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// rconn is a minimal Redis client for these tests.
type rconn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialR(t *testing.T, addr string) *rconn {
	c := dialRetry(t, addr)
	return &rconn{c: c, br: bufio.NewReader(c)}
}

// do sends one command and returns its reply as text: "+OK", ":5", "$v", "$-1", "-ERR ...".
func (r *rconn) do(args ...string) (string, error) {
	_ = r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Write(resp.AppendCommand(nil, args...)); err != nil {
		return "", err
	}
	return r.read()
}

// read reads one reply, as do returns it.
func (r *rconn) read() (string, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return readReplyText(r.br)
}

// readReplyText reads one RESP reply and renders it: "+OK", ":5", "$v", "$-1", "*3", "-ERR ...".
func readReplyText(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return "", err
		}
		buf = append(buf, line...)
		rep, n, err := resp.ParseReply(buf)
		if err != nil {
			return "", err
		}
		if n == 0 {
			continue
		}
		switch rep.Kind {
		case ':':
			return ":" + strconv.FormatInt(rep.Int, 10), nil
		case '$':
			if rep.Null {
				return "$-1", nil
			}
			return "$" + string(rep.Str), nil
		case '*':
			return fmt.Sprintf("*%d", len(rep.Elems)), nil
		}
		return string(rep.Kind) + string(rep.Str), nil
	}
}

func (r *rconn) must(t *testing.T, want string, args ...string) {
	t.Helper()
	got, err := r.do(args...)
	if err != nil || got != want {
		t.Fatalf("%s: got %q (%v), want %q", strings.Join(args, " "), got, err, want)
	}
}

// ---------------------------------------------------------------------------------------
// Frames, built by hand from NOTES §1 (not with tallyd's codec: this is the yardstick).

const (
	cfNoop    = 0x00
	cfGet     = 0x01
	cfAcquire = 0x02
	cfRelease = 0x03
	cfStats   = 0x10
	cfDump    = 0x11
)

// cfRaw is a request frame with every header byte chosen by the caller.
func cfRaw(magic, op, flags, reserved byte, opaque uint32, body []byte) []byte {
	b := []byte{magic, op, flags, reserved, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[8:], opaque)
	return append(b, body...)
}

// cfReq is a well-formed request frame.
func cfReq(op byte, opaque uint32, body []byte) []byte { return cfRaw(0x90, op, 0, 0, opaque, body) }

// cfName is `u16 NameLen, Name`.
func cfName(name string) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(name))), name...)
}

func cfGetBody(name string) []byte { return cfName(name) }

func cfAcqBody(res, max uint32, name string) []byte {
	b := binary.BigEndian.AppendUint32(nil, res)
	b = binary.BigEndian.AppendUint32(b, max)
	return append(b, cfName(name)...)
}

func cfRelBody(res uint32, name string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, res), cfName(name)...)
}

func cfU32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// cfReply is a reply frame as the spec says it must be.
func cfReply(op, status byte, opaque uint32, body []byte) []byte {
	b := []byte{0x91, op, status, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[8:], opaque)
	return append(b, body...)
}

var cfMessages = map[byte]string{
	0x01: "Not found", 0x04: "Invalid arguments", 0x21: "Resource not available",
	0x22: "Not acquired", 0x81: "Unknown command", 0x82: "Out of memory",
}

// cfErr is an error reply: the message is the body.
func cfErr(op, status byte, opaque uint32) []byte {
	return cfReply(op, status, opaque, []byte(cfMessages[status]))
}

func cfOK(op byte, opaque uint32) []byte { return cfReply(op, 0, opaque, nil) }

// cfDumpEntry is one entry of a Dump reply: `u32 Current, u32 Maximum, u16 NameLen, Name`.
func cfDumpEntry(opaque, cur, max uint32, name string) []byte {
	return cfReply(cfDump, 0, opaque, append(append(cfU32(cur), cfU32(max)...), cfName(name)...))
}

func cfCat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// ---------------------------------------------------------------------------------------
// One connection, read frame by frame.

type cfConn struct {
	name string // "yrmcds" or "tallyd"
	c    net.Conn
	r    *bufio.Reader
}

func cfDial(t *testing.T, name, addr string) *cfConn {
	t.Helper()
	c := dialRetry(t, addr)
	return &cfConn{name: name, c: c, r: bufio.NewReader(c)}
}

// frame reads one reply frame, waiting at most 5 s.
func (c *cfConn) frame() ([]byte, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := readFrame(c.r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	return f, nil
}

// readFrame reads one yrmcds frame: its 12-byte header and the body the header announces
// (1 MiB at most).
func readFrame(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 12)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("reading a reply header: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > 1<<20 {
		return nil, fmt.Errorf("reply header % x claims a %d-byte body", hdr, n)
	}
	f := make([]byte, 12+n)
	copy(f, hdr)
	if _, err := io.ReadFull(r, f[12:]); err != nil {
		return nil, fmt.Errorf("reading a %d-byte reply body: %w", n, err)
	}
	return f, nil
}

// cfPartial tells whether a reply frame is a Dump entry, which more replies follow.
func cfPartial(f []byte) bool {
	return f[1] == cfDump && f[2] == 0 && binary.BigEndian.Uint32(f[4:]) > 0
}

// replies reads frames until n final ones (anything but a Dump entry) have come.
func (c *cfConn) replies(n int) ([][]byte, error) {
	var out [][]byte
	for n > 0 {
		f, err := c.frame()
		if err != nil {
			return out, err
		}
		out = append(out, f)
		if !cfPartial(f) {
			n--
		}
	}
	return out, nil
}

// quiet reports bytes that arrive within d (none should).
func (c *cfConn) quiet(d time.Duration) error {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	b, err := c.r.Peek(1)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: connection ended instead of staying quiet: %v", c.name, err)
	}
	return fmt.Errorf("%s: unexpected reply byte %#x", c.name, b[0])
}

// closed waits (up to 5 s) for the server to close the connection.
func (c *cfConn) closed() error {
	_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := c.r.Peek(1)
	if err == nil {
		return fmt.Errorf("%s: got byte %#x instead of a close", c.name, b[0])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: connection still open after 5 s", c.name)
	}
	return nil
}

func (c *cfConn) write(t *testing.T, b []byte) {
	t.Helper()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write(b); err != nil {
		t.Fatalf("%s: write: %v", c.name, err)
	}
}

// call sends one request and returns its concatenated replies.
func (c *cfConn) call(t *testing.T, req []byte) []byte {
	t.Helper()
	c.write(t, req)
	fs, err := c.replies(1)
	if err != nil {
		t.Fatal(err)
	}
	return cfCat(fs...)
}

func cfStartTallyd(t *testing.T, args ...string) string {
	t.Helper()
	port := freePort(t)
	p := start(t, 0, append([]string{"-l", "127.0.0.1", "--counter-port", strconv.Itoa(port), "--log-format", "json"}, args...)...)
	p.waitLog(t, "tallyd listening")
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
