package loop

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tallyd/tallyd/stats"
	"github.com/tallyd/tallyd/store"
)

// startUI is a server with every protocol and the metrics listener with the status page.
func startUI(t *testing.T, mod func(*Config)) *metricsServer {
	t.Helper()
	var srv atomic.Pointer[Server] // made after the HTTP config
	ms := startMetrics(t, stats.HTTPConfig{UI: stats.UIConfig{
		Access: lateAccess{&srv},
		Search: func(ctx context.Context, key string) (*stats.KeyReport, error) { return srv.Load().SearchKey(ctx, key) },
	}}, mod)
	srv.Store(ms.Server)
	return ms
}

// uiGet fetches path from the status page with basic auth (user "" for none).
func uiGet(t *testing.T, base, path, user, pass string) (int, string) {
	t.Helper()
	r, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		r.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// uiWait polls the live part of the page until it has every one of want.
func uiWait(t *testing.T, base string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := uiGet(t, base, "/ui/live", "", "")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("the status page never showed %q:\n%s", missing, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The page lists, from the loop's own small lists: a contended slock key with its holder's
// fencing token and its waiter, a PoolCounter pool with its queue and QUEUE_FULL, a yrmcds
// counter against its max and a Redis lock key (SET NX PX) with its lease; a search finds one
// key on the loop. (Before issue 35 there was no /ui: 404.)
func TestUIHotKeysOverTCP(t *testing.T) {
	ms := startUI(t, nil)
	if code, _ := uiGet(t, ms.base, "/ui", "", ""); code != http.StatusOK {
		t.Fatalf("/ui: %d", code)
	}
	a, b := dialResp(t, ms.slockAddr), dialResp(t, ms.slockAddr)
	if r := a.cmd("SET", "lock:cart", "tok-77", "NX", "PX", "30000"); r.Kind != '+' {
		t.Fatalf("SET NX PX: %s", showResp(r))
	}
	r := a.cmd("LOCK", "orders", "TIMEOUT", "30", "EXPRIED", "60")
	token := ""
	for i := 0; i+1 < len(r.Elems); i++ {
		if string(r.Elems[i].Str) == "TOKEN" {
			token = string(r.Elems[i+1].Str)
		}
	}
	if _, err := strconv.ParseUint(token, 10, 64); err != nil {
		t.Fatalf("LOCK: no token in %s", showResp(r))
	}
	b.send("LOCK", "orders", "TIMEOUT", "30", "EXPRIED", "60") // waits
	var pools []*lineClient
	for range 3 {
		pc := dialPool(t, ms.poolAddr)
		pc.send("ACQ4ME render 1 2 20\n")
		pools = append(pools, pc)
	}
	if l := pools[0].line(); l != "LOCKED" {
		t.Fatalf("first ACQ4ME: %q", l)
	}
	if l := pools[2].line(); l != "QUEUE_FULL" {
		t.Fatalf("third ACQ4ME: %q", l)
	}
	cc := dial(t, ms.counterAddr)
	cc.acquire("quota", 3, 10)
	body := uiWait(t, ms.base, "<code>orders</code>", token, `<td class="num waiters">1</td>`,
		"<code>render</code>", "1 of 1", "1 of 2", "<code>quota</code>", "3 of 10",
		"<code>lock:cart</code>", "<code>tok-77</code>")
	if !strings.Contains(body, `data-role`) && strings.Contains(body, `id="cluster"`) {
		t.Error("a single node shows a cluster table")
	}
	_, page := uiGet(t, ms.base, "/ui?key=orders", "", "")
	if !strings.Contains(page, "lock key (db 0)") || !strings.Contains(page, "token "+token) || !strings.Contains(page, "1 waiting") {
		t.Errorf("search for orders:\n%s", page)
	}
	_, page = uiGet(t, ms.base, "/ui?key=render", "", "")
	if !strings.Contains(page, "1 of 1 workers busy, 1 queued (queue of 2)") {
		t.Errorf("search for render:\n%s", page)
	}
	_, page = uiGet(t, ms.base, "/ui?key=nothing-here", "", "")
	if !strings.Contains(page, "no such key anywhere on this node") {
		t.Errorf("search for a missing key")
	}
	// Released, the keys leave the lists.
	a.cmd("UNLOCK", "orders")
	b.reply()
	b.cmd("UNLOCK", "orders")
	a.cmd("DEL", "lock:cart")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, live := uiGet(t, ms.base, "/ui/live", "", "")
		if !strings.Contains(live, "<code>orders</code>") && !strings.Contains(live, "<code>lock:cart</code>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released keys stay listed:\n%s", live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// With --requirepass the page takes the default user and its password; with an ACL file only a
// user allowed all of +@admin; without either, anyone who reaches the listener.
func TestUIBasicAuthUsers(t *testing.T) {
	ms := startUI(t, nil)
	if code, _ := uiGet(t, ms.base, "/ui", "", ""); code != http.StatusOK {
		t.Errorf("no password: /ui answered %d", code)
	}
	ms = startUI(t, func(c *Config) { c.RequirePass = "pw-1" })
	for _, c := range []struct {
		user, pass string
		code       int
	}{{"", "", 401}, {"default", "nope", 401}, {"default", "pw-1", 200}} {
		if code, _ := uiGet(t, ms.base, "/ui", c.user, c.pass); code != c.code {
			t.Errorf("requirepass, %q/%q: %d, want %d", c.user, c.pass, code, c.code)
		}
	}
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte("user default off\nuser ops on >ops-pw ~* +@all\nuser app on >app-pw ~* +@all -@admin\nuser off-ops off >x ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms = startUI(t, func(c *Config) { c.ACLFile = path })
	for _, c := range []struct {
		user, pass string
		code       int
	}{{"", "", 401}, {"ops", "ops-pw", 200}, {"ops", "app-pw", 401}, {"app", "app-pw", 401}, {"off-ops", "x", 401}, {"default", "", 401}} {
		if code, _ := uiGet(t, ms.base, "/ui", c.user, c.pass); code != c.code {
			t.Errorf("aclfile, %q/%q: %d, want %d", c.user, c.pass, code, c.code)
		}
	}
}

// lateAccess defers to the server made after the HTTP config.
type lateAccess struct{ srv *atomic.Pointer[Server] }

func (a lateAccess) Required() bool { return a.srv.Load().UIAccess().Required() }
func (a lateAccess) Allowed(user, pass string) bool {
	return a.srv.Load().UIAccess().Allowed(user, pass)
}

// uiLargeKeys and uiLargeWaiters are the store the issue sets the render goal at.
const (
	uiLargeKeys    = 1_000_000
	uiLargeWaiters = 10_000
)

// The page renders in well under 100 ms with 1M keys and 10k waiters (on 100 contended
// keys): it reads the published snapshot and looks up the listed keys alone, so the store's
// size does not show. Also measures a key search, which runs on the loop.
func TestUIRenderLargeStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1M keys")
	}
	ms := startUI(t, func(c *Config) { c.MaxObjects = 2 * uiLargeKeys; c.MaxMemory = 0 })
	cc := dial(t, ms.counterAddr)
	cc.acquire("warm", 1, 10) // the loop has seen a connection: onLoop works
	for from := 0; from < uiLargeKeys; from += 100_000 {
		ms.onLoop(t, func() {
			l := ms.st.counters.NewLedger(store.Owner(1 << 40))
			now := ms.now().UnixNano()
			name := make([]byte, 0, 16)
			for i := from; i < from+100_000; i++ {
				name = strconv.AppendInt(append(name[:0], "key-"...), int64(i), 10)
				if r := ms.st.counters.Acquire(l, name, 1, 10, now); r != store.OK {
					t.Errorf("acquire %s: %v", name, r)
					return
				}
			}
		})
	}
	ms.onLoop(t, func() {
		now := ms.now().UnixNano()
		var replies []store.LockReply
		var execs []store.Exec
		for i := range uiLargeWaiters + uiLargeWaiters/100 {
			var key, id, req [16]byte
			copy(key[16-8:], fmt.Sprintf("hot%05d", i%(uiLargeWaiters/100)))
			binary.BigEndian.PutUint64(id[8:], uint64(i+1))
			binary.BigEndian.PutUint64(req[8:], uint64(i+1))
			cmd := store.LockCommand{Kind: store.KindLock, RequestID: req, LockID: id, Key: key,
				Wait: store.Wait{N: 600}, Hold: store.Hold{N: 600}}
			replies, execs = ms.st.locks.Do(store.Owner(1<<41+i), &cmd, now, replies[:0], execs[:0])
			if i >= uiLargeWaiters/100 {
				ms.m.hot.waited(0, key) // as a wait that arrived over a connection counts it
			}
		}
	})
	uiGet(t, ms.base, "/ui", "", "") // the first asks the loop for the key lists
	body := uiWait(t, ms.base, "<code>hot00", `<td class="num waiters">100</td>`)
	s := ms.Metrics().Latest()
	if s.Protos[0].Objects < uiLargeKeys {
		t.Fatalf("%d counters, want %d", s.Protos[0].Objects, uiLargeKeys)
	}
	if sl := s.Proto("slock"); sl == nil || sl.Waiting != uiLargeWaiters {
		t.Fatalf("slock waiting: %+v", sl)
	}
	t.Logf("store: %d counters, %d waiters; /ui/live %d bytes", s.Protos[0].Objects, s.Proto("slock").Waiting, len(body))
	// What the loop pays per snapshot for the lists (16 keys of 100 waiters each), four times
	// a second while a page is open.
	var took time.Duration
	ms.onLoop(t, func() {
		start := time.Now()
		for range 100 {
			ms.hotSnapshot(ms.now().UnixNano())
		}
		took = time.Since(start) / 100
	})
	t.Logf("the key lists at a snapshot: %v on the loop", took)
	for _, path := range []string{"/ui", "/ui/live", "/ui?key=hot00042", "/ui?key=key-999999"} {
		var times []time.Duration
		for range 21 {
			start := time.Now()
			code, page := uiGet(t, ms.base, path, "", "")
			times = append(times, time.Since(start))
			if code != http.StatusOK || strings.Contains(path, "key=") && !strings.Contains(page, "search-result") {
				t.Fatalf("%s: %d", path, code)
			}
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("%s: median %v, max %v", path, times[len(times)/2], times[len(times)-1])
		if times[len(times)/2] > 100*time.Millisecond {
			t.Errorf("%s takes %v (median of 21): the goal is under 100 ms", path, times[len(times)/2])
		}
	}
}

// What a request pays for the lists while a page is open, at worst: every SET NX PX on a new
// key (each one replaces the list's least-hit key), and on a key already listed.
func BenchmarkUIHotRedisLockNewKeys(b *testing.B) {
	var h hotState
	h.on = true
	names := make([][]byte, 4096)
	for i := range names {
		names[i] = fmt.Appendf(nil, "lock:%08d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var key [16]byte
		key[15] = byte(i)
		h.redisLock(0, key, names[i%len(names)])
	}
}

func BenchmarkUIHotRedisLockListed(b *testing.B) {
	var h hotState
	h.on = true
	name := []byte("lock:cart")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.redisLock(0, [16]byte{15: 1}, name)
	}
}

// With no page open a request pays one branch.
func BenchmarkUIHotOff(b *testing.B) {
	var h hotState
	name := []byte("lock:cart")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h.redisLock(0, [16]byte{15: 1}, name)
		h.counter(ProtoCounter, name, 10)
	}
}

// A list counts every acquire up to hotBusy in a publication window, then one of every
// hotSample: a key acquired once is listed, a hot stream is sampled (its cost bounded) and its
// key stays on top; the next window counts whole again.
func TestUIHotSampled(t *testing.T) {
	var h hotState
	h.on = true
	h.counter(ProtoCounter, []byte("rare"), 5)
	if h.counters[ProtoCounter].n != 1 {
		t.Fatal("a counter acquired once is not listed")
	}
	for range 100_000 {
		h.counter(ProtoCounter, []byte("hot"), 10)
	}
	l := &h.counters[ProtoCounter]
	var hot *hotEntry
	for i := range l.n {
		if string(l.e[i].key) == "hot" {
			hot = &l.e[i]
		}
	}
	if hot == nil {
		t.Fatal("the hot counter is not listed")
	}
	if want := uint64(hotBusy-1) + (100_000-(hotBusy-1))/hotSample; hot.hits < want-2 || hot.hits > want+2 {
		t.Fatalf("the hot counter counted %d hits of 100,000 acquires, want about %d (sampled past %d)", hot.hits, want, hotBusy)
	}
	h.hotReset()
	h.counter(ProtoCounter, []byte("late"), 1)
	found := false
	for i := range l.n {
		found = found || string(l.e[i].key) == "late"
	}
	if !found {
		t.Fatal("a counter acquired once in a new window is not listed")
	}
}
