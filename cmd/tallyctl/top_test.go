package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

// load holds a known set of resources until the test ends:
//
//	counters  big 5/5 (100 % of its peak), warm 4 of peak 5 (80 %),
//	          mid 2 of peak 3 (67 %), idle 0 of peak 1
//	slock     job held by one LockId with one waiter; free held (max 2 holders, 1 held)
//	pool      page held (processing 1)
//	values    cfg "on", hits 2 (durable values, which slock keeps as locks)
func load(t *testing.T, s *server) {
	t.Helper()
	hold := func(args ...string) *proc {
		p := s.start(t, args...)
		p.waitOut(t, "holding")
		return p
	}
	hold("counter", "acquire", "big", "5", "5", "--hold", "120s")
	hold("counter", "acquire", "warm", "4", "10", "--hold", "120s")
	hold("counter", "acquire", "mid", "2", "10", "--hold", "120s")
	for _, c := range [][]string{{"warm", "1"}, {"mid", "1"}, {"idle", "1"}} {
		expect(t, s.ctl(t, "counter", "acquire", c[0], c[1], "10", "--hold", "1ms"), 0, []string{"released"}, nil)
	}
	hold("slock", "lock", "job", "--lock-id", "holder", "--hold", "120s")
	s.start(t, "slock", "lock", "job", "--lock-id", "waiter", "--timeout", "120")
	hold("slock", "lock", "free", "--count", "2", "--hold", "120s")
	hold("pool", "acq4me", "page", "1", "5", "0", "--hold", "120s")
	s.start(t, "pool", "acq4me", "page", "1", "5", "120") // waits for the slot
	hold("pool", "acq4any", "report", "2", "10", "0", "--hold", "120s")
	expect(t, s.ctl(t, "set", "cfg", "on"), 0, nil, nil)
	expect(t, s.ctl(t, "incr", "hits", "2"), 0, nil, nil)
	eventually(t, "the slock waiter is queued", func() string {
		if r := s.ctl(t, "slock", "waits", "job"); !strings.Contains(r.out, "1 waiter(s)") {
			return r.String()
		}
		return ""
	})
	eventually(t, "the pool waiter is queued", func() string {
		if r := s.ctl(t, "pool", "stats", "waiting_workers"); !strings.Contains(r.out, "waiting_workers: 1") {
			return r.String()
		}
		return ""
	})
}

// checkScreen checks what top shows for load: every protocol's line, the
// counters busiest first, the pools and the locks fullest first.
func checkScreen(t *testing.T, screen string) {
	t.Helper()
	var rows []string
	for _, l := range strings.Split(screen, "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	find := func(re string) int {
		t.Helper()
		rx := regexp.MustCompile(re)
		for i, r := range rows {
			if rx.MatchString(r) {
				return i
			}
		}
		t.Errorf("no line matches %q in\n%s", re, screen)
		return -1
	}
	find(`^counter \d+ \d+ \d+\.\d \d+\.\d 4$`)
	find(`^semaphore \d+ off \(nothing listens here; tallyd serves its other ports\)$`) // off by default: not unreachable
	find(`^pool \d+ - \d+\.\d \d+\.\d 2 processing 2 waiting 1 full_queues/s 0\.0$`)
	// INFO counts 4 locked keys; two of them are values.
	find(`^slock \d+ \d+ \d+\.\d \d+\.\d 4 locked 2 values 2 waiting 1$`)
	find(`^COUNTERS 4, 3 in use`)
	big := find(`^big 5 5 100% 0\.0 \+0\.0$`)
	warm := find(`^warm 4 5 80% 0\.0 \+0\.0$`)
	mid := find(`^mid 2 3 67% 0\.0 \+0\.0$`)
	idle := find(`^idle 0 1 0% 0\.0 \+0\.0$`)
	if !(big < warm && warm < mid && mid < idle) {
		t.Errorf("counters not busiest first (big %d, warm %d, mid %d, idle %d):\n%s", big, warm, mid, idle, screen)
	}
	find(`^POOLS 2 live keys, 1 with waiters`)
	page := find(`^page 1 1 1 5 100%$`)
	report := find(`^report 1 2 0 10 50%$`)
	if !(page < report) {
		t.Errorf("pools not fullest first (page %d, report %d):\n%s", page, report, screen)
	}
	locks := find(`^LOCKS 2 keys locked, 1 with waiters`)
	job := find(`^0 job 1 1 1 100%$`)
	free := find(`^0 free 1 2 0 50%$`)
	if !(job < free) {
		t.Errorf("locks not fullest first (job %d, free %d):\n%s", job, free, screen)
	}
	// Values have their own section, by name, and are not locks at 100 %.
	values := find(`^VALUES 2 keys with a durable value`)
	cfg := find(`^0 cfg on$`)
	hits := find(`^0 hits 2$`)
	if !(locks < job && free < values && values < cfg && cfg < hits) {
		t.Errorf("values not in their own section after the locks (locks %d, job %d, free %d, values %d, cfg %d, hits %d):\n%s",
			locks, job, free, values, cfg, hits, screen)
	}
	for i, r := range rows {
		if i > locks && i < values && (strings.Contains(r, " cfg ") || strings.Contains(r, " hits ")) {
			t.Errorf("a value is listed as a lock: %q\n%s", r, screen)
		}
	}
}

// pairs sends acquire+release pairs of name to the counter port until the test ends, and
// returns how many it has had answered OK so far.
func pairs(t *testing.T, port int, name string) func() int64 {
	t.Helper()
	nc, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	stop := make(chan struct{})
	finished := make(chan struct{})
	t.Cleanup(func() { close(stop); nc.Close(); <-finished })
	go func() {
		defer close(finished)
		var req, buf []byte
		rd := make([]byte, 4096)
		for op := uint32(0); ; op += 2 {
			select {
			case <-stop:
				return
			default:
			}
			req = counter.AppendAcquire(req[:0], op, 1, 1, []byte(name))
			req = counter.AppendRelease(req, op+1, 1, []byte(name))
			if _, err := nc.Write(req); err != nil {
				return
			}
			for got := 0; got < 2; {
				var r counter.Response
				n, err := counter.ParseResponse(buf, 1<<20, &r)
				if err != nil {
					return
				}
				if n == 0 {
					m, err := nc.Read(rd)
					if err != nil {
						return
					}
					buf = append(buf, rd[:m]...)
					continue
				}
				if r.Status != counter.StatusOK {
					t.Errorf("pair %d on %s: status %v", op/2, name, r.Status)
					return
				}
				buf = buf[n:]
				got++
			}
			done.Add(1)
		}
	}()
	return done.Load
}

// TestTopCounterRate: a counter driven by acquire+release pairs is never held between
// readings, so its consumption does not change; its ACQ/S shows the traffic.
func TestTopCounterRate(t *testing.T) {
	s := startServer(t, false)
	done := pairs(t, s.counter, "busy")
	eventually(t, "pairs are answered", func() string {
		if done() < 100 {
			return fmt.Sprintf("%d pairs", done())
		}
		return ""
	})
	before := done()
	r := s.ctl(t, "top", "--once", "--interval", "1s")
	during := done() - before
	expect(t, r, 0, nil, nil)
	var row []string
	for _, l := range strings.Split(r.out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "busy" {
			row = f
		}
	}
	if row == nil {
		t.Fatalf("no row for the busy counter:\n%s", r.out)
	}
	rate, err := strconv.ParseFloat(row[4], 64)
	// The pairs done while top ran span its two readings and a little more.
	if err != nil || rate < 10 || rate > 1.5*float64(during)+10 || row[5] != "+0.0" {
		t.Errorf("busy: ACQ/S %q, CHANGE/S %q, with %d pairs while top ran (over 1s); want the rate of pairs and +0.0:\n%s",
			row[4], row[5], during, r.out)
	}
}

func TestTopOnce(t *testing.T) {
	s := startServer(t, false)
	load(t, s)
	r := s.ctl(t, "top", "--once", "--interval", "300ms")
	expect(t, r, 0, []string{"tallyctl top — tallyd at 127.0.0.1"}, nil)
	checkScreen(t, r.out)
}

// TestTopInTmux runs `tallyctl top` in a real terminal (a detached tmux
// session), reads its screen, and quits it with q.
func TestTopInTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed: run scripts/ensure-tmux.sh as root (or apt-get install tmux) to test tallyctl top in a terminal")
	}
	s := startServer(t, false)
	load(t, s)

	dir := t.TempDir()
	rcFile := filepath.Join(dir, "rc")
	sock := "tallyctl-test-" + strconv.Itoa(os.Getpid())
	tm := func(args ...string) (string, error) {
		cmd := exec.Command(tmux, append([]string{"-L", sock}, args...)...)
		cmd.Env = append(os.Environ(), "TMUX=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	args := append([]string{ctlBin}, s.flags()...)
	args = append(args, "top")
	script := strings.Join(quoteAll(args), " ") + "; echo $? > " + rcFile + "; sleep 60"
	if out, err := tm("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", script); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })

	// Wait for the second refresh: the rates are numbers once there are two readings.
	var screen string
	eventually(t, "top shows rates", func() string {
		out, err := tm("capture-pane", "-p", "-t", "0")
		if err != nil {
			return err.Error() + ": " + out
		}
		screen = out
		if !regexp.MustCompile(`(?m)^counter +\d+ +\d+ +\d+\.\d`).MatchString(out) {
			return "no rates yet:\n" + out
		}
		return ""
	})
	checkScreen(t, screen)
	if !strings.Contains(screen, "q quits") {
		t.Errorf("no title line:\n%s", screen)
	}

	// Colours: the full counter red, the one at 80 % yellow, the one at 67 % plain.
	colored, err := tm("capture-pane", "-p", "-e", "-t", "0")
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(prefix string) string {
		for _, l := range strings.Split(colored, "\n") {
			plain := regexp.MustCompile(`\x1b\[[0-9;]*m`).ReplaceAllString(l, "")
			if strings.HasPrefix(plain, prefix) {
				return l
			}
		}
		t.Errorf("no line starts with %q in\n%q", prefix, colored)
		return ""
	}
	// Red and yellow, normal (31, 33) or bright (91, 93).
	red, yellow := regexp.MustCompile(`\x1b\[(?:[0-9;]*;)?[39]1(?:;[0-9;]*)?m`), regexp.MustCompile(`\x1b\[(?:[0-9;]*;)?[39]3(?:;[0-9;]*)?m`)
	if l := lineOf("big "); !red.MatchString(l) {
		t.Errorf("the full counter is not red: %q", l)
	}
	if l := lineOf("warm "); !yellow.MatchString(l) || red.MatchString(l) {
		t.Errorf("the counter at 80%% is not yellow: %q", l)
	}
	if l := lineOf("mid "); red.MatchString(l) || yellow.MatchString(l) {
		t.Errorf("the counter at 67%% is coloured: %q", l)
	}
	if l := lineOf("page "); !red.MatchString(l) {
		t.Errorf("the pool with a waiter is not red: %q", l)
	}
	if l := lineOf("   0  job "); !red.MatchString(l) {
		t.Errorf("the lock with a waiter is not red: %q", l)
	}

	if out, err := tm("send-keys", "-t", "0", "q"); err != nil {
		t.Fatalf("send-keys: %v\n%s", err, out)
	}
	eventually(t, "top exits on q", func() string {
		b, err := os.ReadFile(rcFile)
		if err != nil {
			return err.Error()
		}
		if strings.TrimSpace(string(b)) != "0" {
			return "exit status " + string(b)
		}
		return ""
	})
	// The terminal is restored: top's screen is gone from the pane.
	time.Sleep(100 * time.Millisecond)
	if out, _ := tm("capture-pane", "-p", "-t", "0"); strings.Contains(out, "COUNTERS") {
		t.Errorf("top's screen is still shown after it exited:\n%s", out)
	}
}

// quoteAll quotes arguments for sh.
func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}
