package e2e

// A full disk under the log (issue 12 item 2), on a real small tmpfs: once a write to the
// log fails, writes are refused with Redis's MISCONF error until one succeeds again, reads
// go on, nothing is acknowledged that is not in the file, and after kill -9 every
// acknowledged SET is back. Needs root (mount); skipped otherwise.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// smallDisk mounts a tmpfs of size bytes at a new directory, unmounted when the test ends
// (after the server started later is killed).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs (the writer's own tests inject ENOSPC instead)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size)+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// doWithin sends a command and waits at most d for its reply; errHeld if none came.
var errHeld = errors.New("no reply: held")

func (r *rconn) doWithin(d time.Duration, args ...string) (string, error) {
	_ = r.c.SetDeadline(time.Now().Add(d))
	got, err := r.do2(args...)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "", errHeld
	}
	return got, err
}

// readWithin reads one reply (a simple one: +, - or :) that is owed, waiting at most d.
func (r *rconn) readWithin(d time.Duration) (string, error) {
	_ = r.c.SetDeadline(time.Now().Add(d))
	line, err := r.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// do2 is do without its own deadline.
func (r *rconn) do2(args ...string) (string, error) {
	c := r.c
	r.c = deadlineConn{c}
	defer func() { r.c = c }()
	return r.do(args...)
}

// deadlineConn keeps the deadline its caller set (do sets 10 s).
type deadlineConn struct{ net.Conn }

func (deadlineConn) SetDeadline(time.Time) error { return nil }

func TestDiskFullRefusesWritesAndLosesNothing(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"everysec", "no"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			dir := smallDisk(t, 1<<20)
			ballast := filepath.Join(dir, "ballast")
			if err := os.WriteFile(ballast, make([]byte, 256<<10), 0o600); err != nil {
				t.Fatal(err)
			}
			port := freePort(t)
			addr := "127.0.0.1:" + strconv.Itoa(port)
			args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir,
				"--appendfsync=" + policy, "--aof-rewrite-size=1073741824"}
			p := start(t, 0, args...)
			p.waitLog(t, "tallyd listening")
			a, b, c := dialR(t, addr), dialR(t, addr), dialR(t, addr)
			c.must(t, "+OK", "MULTI") // a transaction queued before the disk fills
			c.must(t, "+QUEUED", "SET", "tx", "1")
			value := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("v", 16<<10) }

			// Fill the disk: SETs are answered +OK until a write fails; the one whose
			// record did not fit is held, not acknowledged.
			var acked []int
			held, heldHow := -1, ""
			for i := 0; i < 200 && held < 0; i++ {
				got, err := a.doWithin(2*time.Second, "SET", fmt.Sprintf("k%d", i), value(i))
				switch {
				case errors.Is(err, errHeld):
					held, heldHow = i, "held"
				case err != nil:
					t.Fatalf("SET k%d: %v", i, err)
				case got == "+OK":
					acked = append(acked, i)
				case strings.HasPrefix(got, "-MISCONF"):
					held, heldHow = i, got // refused outright: the loop had already seen the failure
				default:
					t.Fatalf("SET k%d: %q", i, got)
				}
			}
			if held < 0 {
				t.Fatalf("200 SETs of 16 KiB all acknowledged on a 1 MiB disk: a full disk is not noticed")
			}
			const want = "-MISCONF Errors writing to the AOF file: No space left on device"
			b.must(t, want, "SET", "other", "x")
			b.must(t, want, "INCR", "n")
			b.must(t, want, "PING")
			b.must(t, "$"+value(acked[0]), "GET", fmt.Sprintf("k%d", acked[0])) // reads still work
			b.must(t, "+OK", "MULTI")
			b.must(t, want, "DEL", "k0")
			b.must(t, "+QUEUED", "GET", "k0")
			b.must(t, "-EXECABORT Transaction discarded because of previous errors.", "EXEC")
			c.must(t, "-EXECABORT Transaction discarded because of: "+want[1:], "EXEC")
			binaryLocks(t, addr)
			if info, _ := b.do("INFO", "persistence"); !strings.Contains(info, "aof_last_write_status:err") {
				t.Fatalf("INFO while failing: %q", info)
			}
			t.Logf("%s: %d SETs acknowledged, then k%d not (%v); writes refused", policy, len(acked), held, heldHow)

			// Space comes back: the record that did not fit is written, its reply goes out,
			// and writes are taken again.
			if err := os.Remove(ballast); err != nil {
				t.Fatal(err)
			}
			got, err := a.readWithin(5 * time.Second)
			if err != nil || got != "+OK" {
				t.Fatalf("the held SET k%d after space came back: %q, %v", held, got, err)
			}
			acked = append(acked, held)
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, _ := b.do("SET", "after", "1")
				if got == "+OK" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("writes still refused after space came back: %q", got)
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.must(t, "+OK", "SET", "after2", "2")
			b.must(t, "+PONG", "PING")
			if info, _ := b.do("INFO", "persistence"); !strings.Contains(info, "aof_last_write_status:ok") {
				t.Fatalf("INFO after space came back: %q", info)
			}

			// Fill it again and kill -9 while full: nothing acknowledged may be lost, and the
			// log must replay whole (no torn record to cut).
			for i := 1000; i < 1200; i++ {
				got, err := a.doWithin(2*time.Second, "SET", fmt.Sprintf("k%d", i), value(i))
				if err != nil || got != "+OK" {
					break
				}
				acked = append(acked, i)
			}
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.done
			p.done <- nil
			p = start(t, 0, args...)
			p.waitLog(t, "tallyd listening")
			if strings.Contains(p.log.String(), "tail cut off") {
				t.Fatalf("the log had a torn record after a full disk:\n%s", p.log.String())
			}
			rc := dialR(t, addr)
			for _, i := range acked {
				rc.must(t, "$"+value(i), "GET", fmt.Sprintf("k%d", i))
			}
			rc.must(t, "$1", "GET", "after")
			rc.must(t, "$2", "GET", "after2")
			rc.must(t, "$-1", "GET", "other")
			rc.must(t, "$-1", "GET", "tx")
			rc.must(t, "$-1", "GET", "bin")
			t.Logf("%s: all %d acknowledged SETs back after kill -9", policy, len(acked))
		})
	}
}

// binaryLocks: while the log fails, a binary slock lock frame carrying a data command, or
// asking to persist at once (ExpriedFlag 0x0100), which the log must take before it is
// answered, is refused with ResultUnknownError; a plain lock, which changes nothing logged
// yet, is granted and released.
func binaryLocks(t *testing.T, addr string) {
	t.Helper()
	c := dialRetry(t, addr)
	defer c.Close()
	round := func(f *slock.Frame) slock.Reply {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(slock.AppendLockRequest(nil, f)); err != nil {
			t.Fatal(err)
		}
		var buf []byte
		tmp := make([]byte, 4096)
		for {
			var r slock.Reply
			if n, err := slock.ParseReply(buf, 1<<20, &r); err != nil {
				t.Fatal(err)
			} else if n > 0 {
				return r
			}
			n, err := c.Read(tmp)
			if err != nil {
				t.Fatalf("binary %v frame: no reply: %v", f.Type, err)
			}
			buf = append(buf, tmp[:n]...)
		}
	}
	f := slock.Frame{Type: slock.TypeLock, Expried: 10}
	copy(f.Key[:], "bin")
	copy(f.LockID[:], "l1")
	f.Data = slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("value"))
	if r := round(&f); r.Result != slock.ResultUnknownError {
		t.Fatalf("lock with a SET data command while the log fails: result %d, want %d", r.Result, slock.ResultUnknownError)
	}
	f.Data = nil
	f.ExpriedFlag = 0x0100 // logged as soon as granted
	copy(f.Key[:], "now")
	if r := round(&f); r.Result != slock.ResultUnknownError {
		t.Fatalf("lock to persist at once while the log fails: result %d, want %d", r.Result, slock.ResultUnknownError)
	}
	f.ExpriedFlag = 0
	copy(f.Key[:], "plain")
	if r := round(&f); r.Result != slock.ResultOK {
		t.Fatalf("plain lock while the log fails: result %d", r.Result)
	}
	f.Type = slock.TypeUnlock
	if r := round(&f); r.Result != slock.ResultOK {
		t.Fatalf("plain unlock while the log fails: result %d", r.Result)
	}
}

// TestDataDirModes is issue 12 item 10: the data directory tallyd creates is 0700 and its
// log 0600, whatever the umask lets through.
func TestDataDirModes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--data-dir="+dir)
	p.waitLog(t, "tallyd listening")
	rc := dialR(t, "127.0.0.1:"+strconv.Itoa(port))
	rc.must(t, "+OK", "SET", "secret", "value")
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "tallyd.aof"): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Fatalf("%s is %v, want %v", path, st.Mode().Perm(), want)
		}
	}
}
