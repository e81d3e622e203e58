package e2e

// The append-only log through the binary: writes survive kill -9, a damaged log is cut or
// refused, and the aof.* config keys.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestKill9KeepsAcknowledgedWrites kills the server with SIGKILL while clients write, then
// restarts it on the same log: every write that was answered is there, with each fsync
// policy (the kernel keeps what was written; always also fsyncs before answering).
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"always", "everysec", "no"} {
		t.Run(policy, func(t *testing.T) {
			dir := t.TempDir()
			port := freePort(t)
			addr := "127.0.0.1:" + strconv.Itoa(port)
			args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir, "--appendfsync=" + policy}
			p := start(t, 0, args...)
			p.waitLog(t, "tallyd listening")
			const clients = 4
			acked := make([]int64, clients)
			sets := make([][]string, clients)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for g := range clients {
				rc := dialR(t, addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; ; n++ {
						select {
						case <-stop:
							return
						default:
						}
						if n%10 == 9 {
							k := fmt.Sprintf("s%d:%d", g, n)
							if v, err := rc.do("SET", k, "v"+k); err != nil || v != "+OK" {
								return
							}
							sets[g] = append(sets[g], k)
							continue
						}
						v, err := rc.do("INCR", fmt.Sprintf("c%d", g))
						if err != nil {
							return
						}
						acked[g], _ = strconv.ParseInt(strings.TrimPrefix(v, ":"), 10, 64)
					}
				}()
			}
			time.Sleep(400 * time.Millisecond)
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			close(stop)
			wg.Wait()
			<-p.done
			p.done <- nil

			p = start(t, 0, args...)
			p.waitLog(t, "tallyd listening")
			rc := dialR(t, addr)
			nsets := 0
			for g := range clients {
				if acked[g] == 0 {
					t.Fatalf("client %d got no INCR answered in 400 ms", g)
				}
				v, err := rc.do("GET", fmt.Sprintf("c%d", g))
				n, perr := strconv.ParseInt(strings.TrimPrefix(v, "$"), 10, 64) // a counter is a string to GET
				if perr != nil {
					t.Fatalf("c%d after kill -9: %q is not a counter's bulk string", g, v)
				}
				// The write in flight at the kill may or may not have made it.
				if err != nil || n < acked[g] || n > acked[g]+1 {
					t.Fatalf("c%d after kill -9: %q (%v), last answered %d", g, v, err, acked[g])
				}
				for _, k := range sets[g] {
					rc.must(t, "$v"+k, "GET", k)
					nsets++
				}
			}
			t.Logf("%s: INCRs answered %v, SETs %d, all back", policy, acked, nsets)
		})
	}
}

// TestLogDamage: a torn tail is cut off with a warning; a flipped byte in the middle stops
// start-up (exit 65) with a message naming the offset, leaving the file for the operator.
func TestLogDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir}
	p := start(t, 0, args...)
	p.waitLog(t, "tallyd listening")
	rc := dialR(t, addr)
	for i := range 20 {
		rc.must(t, "+OK", "SET", fmt.Sprintf("key%02d", i), fmt.Sprintf("value%02d", i))
	}
	// Killed, so that the log holds each key once (a graceful stop journals every key
	// again); every SET was written before it was answered.
	kill9(t, p)
	path := filepath.Join(dir, "tallyd.aof")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Torn tail: the last record loses its last bytes.
	if err := os.WriteFile(path, full[:len(full)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, 0, args...)
	p.waitLog(t, "tallyd listening")
	if !strings.Contains(p.log.String(), "torn or corrupt tail cut off") {
		t.Fatalf("no warning about the torn tail:\n%s", p.log.String())
	}
	rc = dialR(t, addr)
	rc.must(t, "$value18", "GET", "key18")
	rc.must(t, "$-1", "GET", "key19")
	rc.must(t, ":19", "DBSIZE")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.exitCode(t)

	// Corrupt middle: a flipped byte in the third SET's record.
	cut, _ := os.ReadFile(path)
	off := recordStarts(cut, 2)[2]
	cut[off+20] ^= 0x10
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, 0, args...)
	if code := p.exitCode(t); code != 65 {
		t.Fatalf("start on a log with a corrupt middle: exit %d\n%s", code, p.log.String())
	}
	if want := fmt.Sprintf("damaged at offset %d", off); !strings.Contains(p.log.String(), want) {
		t.Fatalf("the error does not say %q:\n%s", want, p.log.String())
	}
	if after, _ := os.ReadFile(path); len(after) != len(cut) {
		t.Fatal("start-up changed a log it refused")
	}
}

// TestLogConfigKeys: the aof.* keys of the config file set the log, flags win over them,
// and a bad value stops start-up naming the line.
func TestLogConfigKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "tallyd.conf")
	data := filepath.Join(dir, "logdir")
	if err := os.WriteFile(conf, []byte("aof.dir = "+data+"\naof.fsync = always\naof.lock_persist_after = 250ms\naof.rewrite_size = 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--config", conf, "--appendonly=true", "--appendfsync=no")
	p.waitLog(t, "tallyd listening")
	rc := dialR(t, "127.0.0.1:"+strconv.Itoa(port))
	if err := rc.c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	info, err := rc.do("INFO", "persistence")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"aof_file:" + filepath.Join(data, "tallyd.aof"), "aof_fsync_policy:no", "aof_lock_persist_after_ms:250", "aof_rewrite_size:4096"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO persistence lacks %q:\n%s", want, info)
		}
	}
	if err := os.WriteFile(conf, []byte("\naof.lock_persist_after = soon\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, 0, "--counter-port=0", "--config", conf, "--appendonly=true")
	if code := p.exitCode(t); code != 1 || !strings.Contains(p.log.String(), `tallyd.conf:2: aof.lock_persist_after "soon"`) {
		t.Fatalf("bad aof.lock_persist_after: exit %d\n%s", code, p.log.String())
	}
}
