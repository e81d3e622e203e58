package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	ctlOnce sync.Once
	ctlPath string
	ctlErr  error
)

// tallyctl builds the real tallyctl once and runs it; it returns its exit status and output.
func tallyctl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctlOnce.Do(func() {
		ctlPath = filepath.Join(filepath.Dir(binPath), "tallyctl")
		if out, err := exec.Command("go", "build", "-o", ctlPath, "github.com/tallyd/tallyd/cmd/tallyctl").CombinedOutput(); err != nil {
			ctlErr = fmt.Errorf("go build tallyctl: %v\n%s", err, out)
		}
	})
	if ctlErr != nil {
		t.Fatal(ctlErr)
	}
	out, err := exec.Command(ctlPath, args...).CombinedOutput()
	code, ok := exitStatus(err)
	if !ok {
		t.Fatalf("tallyctl %q: %v", args, err)
	}
	return code, string(out)
}

// ctlAt is tallyctl's flags for the slock port at addr.
func ctlAt(addr string) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{"--host", host, "--slock-port", port}
}

// ack is an acknowledged SET: its value, and when its reply came.
type ack struct {
	val string
	at  time.Time
}

// writeLog is what writers tried and what was acknowledged.
type writeLog struct {
	mu    sync.Mutex
	tried map[string]string // every key a SET was sent for, and its value
	acked map[string]ack
}

func newWriteLog() *writeLog {
	return &writeLog{tried: map[string]string{}, acked: map[string]ack{}}
}

// writer SETs keys prefix:0, prefix:1, ... until stop, each once, through addrs[0]; a SET
// with no reply or an error reply is sent again (a SET of the same value is idempotent)
// through the next member, as a client that follows a cluster's failover does. It gives
// up on a key only at stop.
func (w *writeLog) writer(addrs []string, prefix string, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	k := &cclient{addr: addrs[0]}
	defer k.close()
	at := 0
	for j := 0; ; j++ {
		key, val := prefix+":"+strconv.Itoa(j), "v"+strconv.Itoa(j)+"-"+prefix
		w.mu.Lock()
		w.tried[key] = val
		w.mu.Unlock()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := k.do(opTimeout, "SET", key, val)
			if err == nil && got == "+OK" {
				w.mu.Lock()
				w.acked[key] = ack{val, time.Now()}
				w.mu.Unlock()
				break
			}
			k.close()
			at = (at + 1) % len(addrs)
			k = &cclient{addr: addrs[at]}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// checkRestored checks the store at addr against w (go-redis, at consistency ONE in a
// cluster: the member's own replica): every SET acknowledged before cut (the zero time: all)
// is there with its value, and every key there was written with its value.
func (w *writeLog) checkRestored(t *testing.T, addr string, cut time.Time, one bool) (checked int) {
	t.Helper()
	opt := &redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, ReadTimeout: opTimeout}
	if one {
		opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.Do(ctx, "CONSISTENCY", "ONE").Err() }
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	w.mu.Lock()
	defer w.mu.Unlock()
	var keys, want []string
	for key, a := range w.acked {
		if cut.IsZero() || a.at.Before(cut) {
			keys, want = append(keys, key), append(want, a.val)
		}
	}
	names, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatalf("KEYS * at %s: %v", addr, err)
	}
	for _, n := range names {
		if _, ok := w.tried[n]; !ok {
			t.Fatalf("%q at %s was never written", n, addr)
		}
	}
	got := make([]any, 0, len(names)+len(keys))
	for i := 0; i < len(names)+len(keys); i += 500 {
		all := append(append([]string(nil), names...), keys...)
		vs, err := rdb.MGet(ctx, all[i:min(i+500, len(all))]...).Result()
		if err != nil {
			t.Fatalf("MGET at %s: %v", addr, err)
		}
		got = append(got, vs...)
	}
	for i, n := range names {
		if got[i] != w.tried[n] {
			t.Fatalf("%s at %s: %v, but only %q was written", n, addr, got[i], w.tried[n])
		}
	}
	for i, key := range keys {
		if v := got[len(names)+i]; v != want[i] {
			t.Fatalf("%s at %s: %v, want %q, acknowledged %v before the cut", key, addr, v, want[i], cut.Sub(w.acked[key].at))
		}
	}
	return len(keys)
}

// TestBackupRestoreUnderLoad: a single node's backup taken while writers SET keys holds
// every SET acknowledged before the save began, with its value, and nothing never written
// (the file, megabytes, streamed through an output limit of 256 kB);
// tallyd restore refuses a damaged or cut file and a data dir that is not empty.
func TestBackupRestoreUnderLoad(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// --max-output far below the file's size: SNAPSHOT must send it a chunk at a time.
	start(t, 0, "--counter-port", "0", "--slock-port", strconv.Itoa(port), "--data-dir", filepath.Join(dir, "live"),
		"--max-output", "262144")
	dialRetry(t, addr)
	tallyctl(t, "--help") // built before the clock starts

	w := newWriteLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go w.writer([]string{addr}, "w"+strconv.Itoa(i), stop, &wg)
	}
	time.Sleep(300 * time.Millisecond)
	file := filepath.Join(dir, "backup.snap")
	cut := time.Now()
	code, out := tallyctl(t, append(ctlAt(addr), "snapshot", "save", file)...)
	done := time.Now()
	if code != 0 || !strings.Contains(out, "single snapshot") {
		t.Fatalf("snapshot save: exit %d: %s", code, out)
	}
	t.Logf("%s (while 4 writers SET; %v)", strings.TrimSpace(out), done.Sub(cut).Round(time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if _, err := os.Stat(file + ".part"); !os.IsNotExist(err) {
		t.Fatalf("%s.part left behind: %v", file, err)
	}
	if code, out := tallyctl(t, "snapshot", "status", file); code != 0 || !strings.Contains(out, "checksum ok") {
		t.Fatalf("snapshot status: exit %d: %s", code, out)
	}

	// Damage: every refusal writes nothing.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"cut":     b[:len(b)-1],
		"flipped": append(append(append([]byte(nil), b[:len(b)/2]...), b[len(b)/2]^1), b[len(b)/2+1:]...),
	} {
		f := filepath.Join(dir, name+".snap")
		if err := os.WriteFile(f, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, name)
		code, out := runBin(t, "restore", f, "--data-dir", d)
		if code != 1 || !strings.Contains(out, map[string]string{"cut": "cut off", "flipped": "checksum"}[name]) {
			t.Fatalf("restore of a %s file: exit %d: %s", name, code, out)
		}
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("restore of a %s file made %s", name, d)
		}
		if code, out := tallyctl(t, "snapshot", "status", f); code == 0 {
			t.Fatalf("snapshot status of a %s file: exit 0: %s", name, out)
		}
	}
	// The live data dir is refused: its tallyd holds it (issue 31: one owner per data dir).
	if code, out := runBin(t, "restore", file, "--data-dir", filepath.Join(dir, "live")); code != 1 || !strings.Contains(out, "is in use by process") {
		t.Fatalf("restore into the live data dir: exit %d: %s", code, out)
	}

	rdir := filepath.Join(dir, "restored")
	if code, out := runBin(t, "restore", file, "--data-dir", rdir); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, out)
	}
	rport := freePort(t)
	raddr := "127.0.0.1:" + strconv.Itoa(rport)
	rp := start(t, 0, "--counter-port", "0", "--slock-port", strconv.Itoa(rport), "--data-dir", rdir)
	if !waitUntil(time.Now().Add(10*time.Second), 20*time.Millisecond, func() bool {
		got, err := (&cclient{addr: raddr}).do(time.Second, "PING")
		return err == nil && got == "+PONG"
	}) {
		t.Fatalf("the restored node does not answer:\n%s", rp.log.String())
	}
	n := w.checkRestored(t, raddr, cut, false)
	if n == 0 {
		t.Fatal("no SET was acknowledged before the save: the test checked nothing")
	}
	t.Logf("%d SETs acknowledged before the save, all restored; %d acknowledged in all", n, len(w.acked))
}

// TestBackupRestoreCluster: a backup taken on a cluster's follower while writers SET keys
// through every member, restored into every member of a new cluster: every member holds
// every SET acknowledged before the save, and nothing never written. The leader serves one
// too.
func TestBackupRestoreCluster(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(120 * time.Second)
	lead := c.waitLeader(10*time.Second, nil)
	w := newWriteLog()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go w.writer([]string{c.net.clientAddr(i)}, "c"+strconv.Itoa(i), stop, &wg)
	}
	time.Sleep(300 * time.Millisecond)
	// The leader's file, then a follower's (raft's ReadIndex through the leader): the
	// follower's is restored, and must hold every SET acknowledged before its save began,
	// through any member.
	if code, out := tallyctl(t, append(ctlAt(c.net.clientAddr(lead)), "snapshot", "save", filepath.Join(c.dir, "leader.snap"))...); code != 0 || !strings.Contains(out, "cluster snapshot") {
		t.Fatalf("snapshot save on the leader: exit %d: %s", code, out)
	}
	f := c.others(lead)[0]
	file := filepath.Join(c.dir, "cluster.snap")
	cut := time.Now()
	code, out := tallyctl(t, append(ctlAt(c.net.clientAddr(f)), "snapshot", "save", file)...)
	if code != 0 || !strings.Contains(out, "cluster snapshot") {
		t.Fatalf("snapshot save on a follower: exit %d: %s", code, out)
	}
	t.Logf("on a follower: %s", strings.TrimSpace(out))
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	for s := range c.nodes {
		c.kill(s)
	}
	for s, nd := range c.nodes {
		nd.dataDir = filepath.Join(c.dir, fmt.Sprintf("restored%d", s))
		code, out := runBin(t, "restore", file, "--data-dir", nd.dataDir, "--cluster", c.net.clusterArg(s, c.ids),
			"--node-id", strconv.FormatUint(nd.id, 10))
		if code != 0 {
			t.Fatalf("restore node %d: exit %d: %s", nd.id, code, out)
		}
	}
	for s := range c.nodes {
		c.start(s)
	}
	for s := range c.nodes {
		c.waitServing(s, 10*time.Second)
	}
	c.waitLeader(10*time.Second, nil)
	n := 0
	for s := range c.nodes {
		n = w.checkRestored(t, c.net.clientAddr(s), cut, true)
	}
	if n == 0 {
		t.Fatal("no SET was acknowledged before the save: the test checked nothing")
	}
	c.mustDo(c.waitLeader(10*time.Second, nil), "+OK", "SET", "after", "restore") // the new cluster takes writes
	c.check()
	t.Logf("%d SETs acknowledged before the save, on every restored member; %d acknowledged in all", n, len(w.acked))
}
