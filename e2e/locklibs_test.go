package e2e

// Real Redis lock libraries against tallyd: redis-py's Lock, go-redsync/redsync v4 on
// go-redis v9, and Node's redlock on ioredis. Each scenario runs first against redis-server
// (the control: it shows the scenario itself is right) and then against tallyd, and the two
// must agree.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// llServer is one server a lock library runs against.
type llServer struct{ name, addr string }

// llServers starts redis-server (when installed; else the test compares with the scenario's
// own expectations only, and says so) and tallyd, in that order.
func llServers(t *testing.T) []llServer {
	t.Helper()
	var out []llServer
	if _, err := exec.LookPath("redis-server"); err == nil {
		out = append(out, llServer{"redis-server", rdStartRedis(t)})
	} else {
		t.Log("redis-server is not installed (scripts/ensure-python-redis.sh installs it): no control run")
	}
	return append(out, llServer{"tallyd", rdStartTallyd(t)})
}

// llRunScript runs a lock library's script (python3 or node) against each server and
// fails unless every run succeeds and all print the same transcript.
func llRunScript(t *testing.T, env []string, prog, script string) {
	t.Helper()
	var first llServer
	var want string
	for i, s := range llServers(t) {
		host, port, _ := strings.Cut(s.addr, ":")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, prog, script, host, port)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s against %s: %v\n%s", script, s.name, err, out)
		}
		if i == 0 {
			first, want = s, string(out)
			continue
		}
		if string(out) != want {
			t.Fatalf("%s differs\n%s:\n%s\n%s:\n%s", script, first.name, want, s.name, out)
		}
		t.Logf("%s against %s:\n%s", script, s.name, out)
	}
}

// TestLockLibRedisPy: redis-py's Lock (testdata/locklib_redispy.py) acquires, extends,
// reacquires, releases from another connection of its pool, waits with blocking_timeout
// for a held lock (failing while it is held, succeeding after release and after expiry), and
// raises LockNotOwnedError for a lock that expired and has another owner.
func TestLockLibRedisPy(t *testing.T) {
	t.Parallel()
	llRunScript(t, nil, needRedisPy(t), "testdata/locklib_redispy.py")
}

// needRedisPy returns a Python 3 that imports redis-py (Debian's python3-redis), or skips.
func needRedisPy(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import redis").Run() == nil {
			return path
		}
	}
	t.Skip("redis-py is not installed: run scripts/ensure-python-redis.sh (Debian package python3-redis)")
	return ""
}

// llNodeModules is where scripts/ensure-node-redlock.sh installs redlock and ioredis.
func llNodeModules() string {
	if d := os.Getenv("TALLYD_NODE_MODULES"); d != "" {
		return filepath.Join(d, "node_modules")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "tallyd", "node-redlock", "node_modules")
}

// TestLockLibNodeRedlock: Node's redlock 4.2.0 on ioredis (testdata/locklib_redlock.js)
// acquires, extends and releases (also from another connection and on two keys), fails to
// extend or release a lock lost to another owner, and hands one lock among 16 workers on
// four connections with a counter inside the critical section that never sees two holders.
func TestLockLibNodeRedlock(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: run scripts/ensure-node-redlock.sh (Debian packages nodejs, npm; npm redlock, ioredis)")
	}
	mods := llNodeModules()
	for _, pkg := range []string{"redlock", "ioredis"} {
		if _, err := os.Stat(filepath.Join(mods, pkg, "package.json")); err != nil {
			t.Skipf("npm package %s is not in %s: run scripts/ensure-node-redlock.sh", pkg, mods)
		}
	}
	llRunScript(t, []string{"NODE_PATH=" + mods}, node, "testdata/locklib_redlock.js")
}

// TestLockLibRedsync: go-redsync/redsync v4 with its go-redis v9 pool: Lock, Extend, Unlock,
// a release from another client, a lock lost to expiry and another owner, and contention.
func TestLockLibRedsync(t *testing.T) {
	t.Parallel()
	for _, s := range llServers(t) {
		t.Run(s.name, func(t *testing.T) {
			llRedsyncBasics(t, s.addr)
			llRedsyncContention(t, s.addr)
		})
	}
}

// llRedsync is a redsync on one go-redis client of addr.
func llRedsync(t *testing.T, addr string) (*redsync.Redsync, *redis.Client) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 8, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return redsync.New(goredis.NewPool(c)), c
}

// llRedsyncBasics checks the mutex's answers one step at a time.
func llRedsyncBasics(t *testing.T, addr string) {
	ctx := context.Background()
	rs, c := llRedsync(t, addr)
	must := func(what string, ok bool, err error) {
		t.Helper()
		if !ok || err != nil {
			t.Fatalf("%s: %v, %v", what, ok, err)
		}
	}
	pttl := func(key string, lo, hi time.Duration) {
		t.Helper()
		if d, err := c.PTTL(ctx, key).Result(); err != nil || d <= lo || d > hi {
			t.Fatalf("PTTL %s: %v, %v; want in (%v, %v]", key, d, err, lo, hi)
		}
	}

	m := rs.NewMutex("job", redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if v, err := c.Get(ctx, "job").Result(); err != nil || v != m.Value() {
		t.Fatalf("GET job: %q, %v; want the mutex's value %q", v, err, m.Value())
	}
	pttl("job", time.Second, 2*time.Second)
	var taken *redsync.ErrTaken
	if err := rs.NewMutex("job", redsync.WithTries(1)).Lock(); !errors.As(err, &taken) {
		t.Fatalf("a second mutex's Lock while held: %v, want ErrTaken", err)
	}
	_ = c.PExpire(ctx, "job", 500*time.Millisecond).Err()
	ok, err := m.Extend()
	must("Extend", ok, err)
	pttl("job", time.Second, 2*time.Second)
	ok, err = m.Unlock()
	must("Unlock", ok, err)
	if n, err := c.Exists(ctx, "job").Result(); n != 0 || err != nil {
		t.Fatalf("EXISTS job after Unlock: %d, %v", n, err)
	}
	if ok, err := m.Unlock(); ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
		t.Fatalf("second Unlock: %v, %v; want false, ErrLockAlreadyExpired", ok, err)
	}

	// Released through another client (another connection) that knows the value.
	m = rs.NewMutex("job2", redsync.WithExpiry(2*time.Second), redsync.WithTries(1))
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock job2: %v", err)
	}
	rs2, _ := llRedsync(t, addr)
	ok, err = rs2.NewMutex("job2", redsync.WithValue(m.Value())).Unlock()
	must("Unlock from another client", ok, err)
	if n, _ := c.Exists(ctx, "job2").Result(); n != 0 {
		t.Fatal("job2 still exists after the other client's Unlock")
	}

	// A lock that expired and was taken by another: its Extend and Unlock fail, and the new
	// owner keeps the key.
	old := rs.NewMutex("lost", redsync.WithExpiry(100*time.Millisecond), redsync.WithTries(1), redsync.WithTimeoutFactor(0.9))
	if err := old.Lock(); err != nil {
		t.Fatalf("Lock lost: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	now := rs2.NewMutex("lost", redsync.WithExpiry(5*time.Second), redsync.WithTries(1))
	if err := now.Lock(); err != nil {
		t.Fatalf("Lock after expiry: %v", err)
	}
	if ok, err := old.Extend(); ok {
		t.Fatalf("Extend of the lost lock: %v, %v; want false", ok, err)
	}
	if ok, err := old.Unlock(); ok || !errors.As(err, &taken) {
		t.Fatalf("Unlock of the lost lock: %v, %v; want false, ErrTaken", ok, err)
	}
	if v, _ := c.Get(ctx, "lost").Result(); v != now.Value() {
		t.Fatalf("GET lost: %q, want the new owner's %q", v, now.Value())
	}
	ok, err = now.Unlock()
	must("Unlock of the new owner", ok, err)
}

// llHold is one holder's time in the critical section, in ticks of a shared atomic counter:
// from after Lock returned (from) to before the Unlock that said whether the lock was still
// ours (to). Only confirmed holds prove anything: the key held this holder's value from the
// SET to that Unlock, so no other SET NX could have succeeded in between.
type llHold struct {
	who       string
	from, to  int64
	confirmed bool
}

// llDoubleHolds returns every pair of confirmed holds whose ticks overlap: two clients that
// held an unexpired lock at once.
func llDoubleHolds(holds []llHold) []string {
	var c []llHold
	for _, h := range holds {
		if h.confirmed {
			c = append(c, h)
		}
	}
	sort.Slice(c, func(i, j int) bool { return c[i].from < c[j].from })
	var out []string
	for i := range c {
		for j := i + 1; j < len(c) && c[j].from < c[i].to; j++ {
			out = append(out, fmt.Sprintf("%s [%d,%d] and %s [%d,%d]", c[i].who, c[i].from, c[i].to, c[j].who, c[j].from, c[j].to))
		}
	}
	return out
}

// TestLockLibDoubleHoldCheck: the contention test's check finds an overlap when there is one
// (so that test can fail), and ignores holders whose Unlock found the lock gone.
func TestLockLibDoubleHoldCheck(t *testing.T) {
	t.Parallel()
	good := []llHold{{"a", 1, 4, true}, {"b", 5, 9, true}, {"c", 6, 12, false}, {"d", 13, 14, true}}
	if d := llDoubleHolds(good); len(d) != 0 {
		t.Fatalf("found %v in holds that do not overlap", d)
	}
	bad := append(good, llHold{"e", 8, 10, true})
	if d := llDoubleHolds(bad); len(d) != 1 || !strings.Contains(d[0], "b [5,9] and e [8,10]") {
		t.Fatalf("double holds of b and e: %v", d)
	}
}

// llRedsyncContention has 32 goroutines take one redsync mutex 8 times each, with a short
// expiry; two of them sleep past it once. Every hold whose Unlock confirms it must not overlap
// another confirmed hold; the sleepers' Extend and Unlock must fail.
func llRedsyncContention(t *testing.T, addr string) {
	const workers, rounds, expiry, margin = 32, 8, 150 * time.Millisecond, 50 * time.Millisecond
	rs, _ := llRedsync(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	delay := redsync.WithRetryDelayFunc(func(int) time.Duration { return time.Duration(1+rand.IntN(4)) * time.Millisecond })
	var (
		tick, inside, maxInside, late atomic.Int64
		mu                            sync.Mutex
		holds                         []llHold
		failures                      []string
		wg                            sync.WaitGroup
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, a...))
		mu.Unlock()
		cancel() // the others' Locks end at once
	}
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				m := rs.NewMutex("busy", redsync.WithExpiry(expiry), redsync.WithTries(1<<20), delay)
				if err := m.LockContext(ctx); err != nil {
					fail("worker %d round %d: Lock: %v", w, i, err)
					return
				}
				h := llHold{who: fmt.Sprintf("w%d/%d", w, i), from: tick.Add(1)}
				if n := inside.Add(1); n > maxInside.Load() {
					maxInside.Store(n) // a rough maximum, for the log
				}
				sleeper := w < 2 && i == 1
				if sleeper {
					time.Sleep(expiry + 100*time.Millisecond)
				}
				// A request sent well before the mutex's Until must find it held; one sent
				// later (a stalled machine) may not, and its hold is not counted.
				valid := time.Now().Add(margin).Before(m.Until())
				ok, err := m.ExtendContext(ctx)
				switch {
				case sleeper && ok:
					fail("%s: Extend %v after sleeping past the expiry", h.who, ok)
				case valid && !ok:
					fail("%s: Extend of a held lock: %v, %v", h.who, ok, err)
				}
				inside.Add(-1)
				h.to = tick.Add(1)
				valid = time.Now().Add(margin).Before(m.Until())
				ok, err = m.UnlockContext(ctx)
				h.confirmed = ok
				switch {
				case sleeper && ok:
					fail("%s: Unlock %v after sleeping past the expiry", h.who, ok)
				case valid && !ok:
					fail("%s: Unlock of a held lock: %v", h.who, err)
				case !sleeper && !ok:
					late.Add(1)
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d failures, the first: %s", len(failures), strings.Join(failures[:min(len(failures), 10)], "\n"))
	}
	confirmed := 0
	for _, h := range holds {
		if h.confirmed {
			confirmed++
		}
	}
	if want := workers*rounds - 2 - int(late.Load()); len(holds) != workers*rounds || confirmed != want {
		t.Fatalf("%d holds, %d confirmed; want %d and %d", len(holds), confirmed, workers*rounds, want)
	}
	if d := llDoubleHolds(holds); len(d) > 0 {
		t.Fatalf("%d double holds of an unexpired lock, the first: %s", len(d), strings.Join(d[:min(len(d), 10)], "\n"))
	}
	t.Logf("%d holds (%d confirmed by Unlock, %d past their Until on a stalled machine) in %v; at most %d in the section at once, counting holders past their expiry",
		len(holds), confirmed, late.Load(), time.Since(start).Round(time.Millisecond), maxInside.Load())
}

// llToken reads the fencing token of the lock a library holds on key, with the value it
// stored there: GET and TOKEN in one transaction, so the token is this holder's only if the
// value is still its own.
func llToken(ctx context.Context, c *redis.Client, key, value string) (uint64, error) {
	var get *redis.StringCmd
	var tok *redis.Cmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		tok = p.Do(ctx, "TOKEN", key)
		return nil
	}); err != nil {
		return 0, err
	}
	if get.Val() != value {
		return 0, fmt.Errorf("key %q holds %q, not this holder's %q: the lock is lost", key, get.Val(), value)
	}
	n, err := tok.Uint64()
	if err != nil {
		return 0, fmt.Errorf("TOKEN %s: %w", key, err)
	}
	return n, nil
}

// TestLockLibFencingToken: docs/lock-libraries.md's recipe for a fencing token of a redsync lock (MULTI, GET,
// TOKEN, EXEC) gives a token that grows from one holder to the next and that Extend keeps,
// and a write fenced with the older holder's token is refused once the newer one has written.
func TestLockLibFencingToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs, c := llRedsync(t, rdStartTallyd(t))
	// A 100 ms lease; redsync's default time limit for a node's reply is 5% of it (5 ms),
	// which a loaded CI machine misses: 90 % here.
	first := rs.NewMutex("job", redsync.WithExpiry(100*time.Millisecond), redsync.WithTries(1), redsync.WithTimeoutFactor(0.9))
	if err := first.Lock(); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	t1, err := llToken(ctx, c, "job", first.Value())
	if err != nil || t1 == 0 {
		t.Fatalf("the first holder's token: %d, %v", t1, err)
	}
	time.Sleep(200 * time.Millisecond)
	second := rs.NewMutex("job", redsync.WithExpiry(5*time.Second), redsync.WithTries(1))
	if err := second.Lock(); err != nil {
		t.Fatalf("Lock after the first expired: %v", err)
	}
	if _, err := llToken(ctx, c, "job", first.Value()); err == nil {
		t.Fatal("the first holder got a token for a lock it lost")
	}
	t2, err := llToken(ctx, c, "job", second.Value())
	if err != nil || t2 <= t1 {
		t.Fatalf("the second holder's token: %d, %v; want more than %d", t2, err, t1)
	}
	if ok, err := second.Extend(); !ok || err != nil {
		t.Fatalf("Extend: %v, %v", ok, err)
	}
	if n, err := llToken(ctx, c, "job", second.Value()); err != nil || n != t2 {
		t.Fatalf("the token after Extend: %d, %v; want %d, kept", n, err, t2)
	}
	if err := c.Do(ctx, "SET", "report", "v2", "FENCE", t2).Err(); err != nil {
		t.Fatalf("SET FENCE with the newer token: %v", err)
	}
	want := fmt.Sprintf("FENCED token %d is older than %d, already seen by this key", t1, t2)
	if err := c.Do(ctx, "SET", "report", "v1", "FENCE", t1).Err(); err == nil || err.Error() != want {
		t.Fatalf("SET FENCE with the older token: %v; want %q", err, want)
	}
	if ok, err := second.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v, %v", ok, err)
	}
}

// TestLockLibRedsyncCluster: redsync pointed at one member of a three-member cluster (at
// QUORUM, the default) locks and extends through a follower; the lock survives the leader's
// kill, and through another member after the failover a second mutex is refused, while the
// holder's value still extends (redsync answers a NOSCRIPT with EVAL) and unlocks.
func TestLockLibRedsyncCluster(t *testing.T) {
	c := newCluster(t, 3)
	c.bound(60 * time.Second)
	lead := c.waitLeader(5*time.Second, nil)
	fol := c.others(lead)
	rs, _ := llRedsync(t, c.net.clientAddr(fol[0]))
	m := rs.NewMutex("job", redsync.WithExpiry(30*time.Second), redsync.WithTries(1))
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock through a follower: %v", err)
	}
	if ok, err := m.Extend(); !ok || err != nil {
		t.Fatalf("Extend through a follower: %v, %v", ok, err)
	}
	c.kill(lead)
	c.waitLeader(10*time.Second, fol)
	rs2, _ := llRedsync(t, c.net.clientAddr(fol[1]))
	// Until the new leader serves, commands may answer CLUSTERDOWN: ask again.
	var err error
	var taken *redsync.ErrTaken
	if !waitUntil(time.Now().Add(10*time.Second), 50*time.Millisecond, func() bool {
		err = rs2.NewMutex("job", redsync.WithTries(1)).Lock()
		return !strings.Contains(fmt.Sprint(err), "CLUSTERDOWN")
	}) || !errors.As(err, &taken) {
		t.Fatalf("another mutex's Lock after the failover: %v, want ErrTaken", err)
	}
	held := rs2.NewMutex("job", redsync.WithValue(m.Value()), redsync.WithExpiry(30*time.Second))
	if ok, err := held.Extend(); !ok || err != nil {
		t.Fatalf("the holder's Extend after the failover: %v, %v", ok, err)
	}
	if ok, err := held.Unlock(); !ok || err != nil {
		t.Fatalf("the holder's Unlock after the failover: %v, %v", ok, err)
	}
	if err := rs2.NewMutex("job", redsync.WithTries(1)).Lock(); err != nil {
		t.Fatalf("Lock after the Unlock: %v", err)
	}
}
