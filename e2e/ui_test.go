package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The status page (/ui, issue 35) in a real browser: headless Chromium (Debian's, installed
// by scripts/ensure-chromium.sh, which make deps runs) driven over the DevTools protocol.

// chromium returns the browser to drive, or skips the test when there is none and CI is not
// set (under CI=true make deps installs it: its absence is a failure).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH under CI: make deps (scripts/ensure-chromium.sh) installs it")
	}
	t.Skip("no chromium on PATH: run scripts/ensure-chromium.sh as root (apt-get install chromium) to test the status page in a browser")
	return ""
}

// browser starts a headless Chromium and returns its tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // as root (CI) Chromium refuses to start sandboxed
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1400),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelB(); cancelA() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// pageText is the page's visible text as the browser laid it out.
func pageText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	return s
}

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitPage waits until ok holds of the page (which its own script refreshes), up to d.
func waitPage(t *testing.T, ctx context.Context, d time.Duration, what string, ok func(text string) bool) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		text := pageText(t, ctx)
		if ok(text) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s; it shows:\n%s", what, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func hasAll(want ...string) func(string) bool {
	return func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}
}

// screenshot saves the whole page as a PNG where the test output is kept ($TESTLOG, which
// make test sets, else a directory under the system's temporary one) and logs its path.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG (below it, a JPEG)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("TESTLOG")
	if dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // make test's is relative to the repository
	}
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tallyd-testlog")
	}
	dir = filepath.Join(dir, "ui")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
	return path
}

// In a live three-member cluster the leader's page shows it leads, a held lock with its
// fencing token, a waiter on it and a PoolCounter pool's queue; a follower's page, kept open,
// shows every member reachable and who leads; with the leader killed, that same page (its
// script refreshing it, no reload) shows the quorum banner and the new leader.
func TestUIBrowserCluster(t *testing.T) {
	needCluster(t)
	ctx := browser(t)
	var poolPorts []int
	for range 3 {
		poolPorts = append(poolPorts, quietPort(t))
	}
	c := newClusterSlots(t, newProxyNet(t, 3), 3, func(slot int) []string {
		return []string{"--pool-port", strconv.Itoa(poolPorts[slot])}
	}, "--metrics-addr", "127.0.0.1:0")
	c.bound(3 * time.Minute)
	lead := c.leader(nil)
	leadID := c.nodes[lead].id
	page := func(slot int) string { return "http://" + c.nodes[slot].p.metricsAddr(t) + "/ui" }

	// A held lock, a waiter on it, and a pool with one worker busy and one queued.
	holder := c.client(lead)
	held, err := holder.lock(5*time.Second, "LOCK", "orders", "TIMEOUT", "30", "EXPRIED", "300")
	if err != nil || !held.granted() || !held.hasToken {
		t.Fatalf("LOCK orders: %+v %v", held, err)
	}
	waiter := c.client(lead)
	waiting := waiter.async(90*time.Second, "LOCK", "orders", "TIMEOUT", "90", "EXPRIED", "300")
	var pool []net.Conn
	for i := range 2 {
		pc, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(poolPorts[lead])), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		if _, err := fmt.Fprintf(pc, "ACQ4ME render-pool 1 4 90\n"); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			if l, err := bufio.NewReader(pc).ReadString('\n'); err != nil || l != "LOCKED\n" {
				t.Fatalf("first ACQ4ME: %q %v", l, err)
			}
		}
		pool = append(pool, pc)
	}

	if err := open(ctx, page(lead), "locks"); err != nil {
		t.Fatalf("open the leader's page: %v", err)
	}
	// A Redis lock taken while the page is open (acquires are followed only then) shows up
	// with its holder's token without a reload.
	if got, err := holder.do(5*time.Second, "SET", "lock:cart", "tok-7f3a", "NX", "PX", "60000"); err != nil || got != "+OK" {
		t.Fatalf("SET NX PX: %q %v", got, err)
	}
	token := strconv.FormatUint(held.token, 10)
	text := waitPage(t, ctx, 15*time.Second, "the lock, its token, its waiter, the pool's queue and the Redis lock",
		hasAll("All 3 members reachable", "orders", token, "render-pool", "1 of 1", "1 of 4", "lock:cart", "tok-7f3a"))
	if got := evalJS[string](t, ctx, `document.querySelector("tr.member[data-role=leader]").dataset.id`); got != strconv.FormatUint(leadID, 10) {
		t.Errorf("the leader's page says %s leads, INFO says %d", got, leadID)
	}
	if got := evalJS[string](t, ctx, `(function(){for (const r of document.querySelectorAll("#hot-locks tr.lock")) { if (r.innerText.includes("orders")) return r.querySelector(".waiters").innerText } return ""})()`); got != "1" {
		t.Errorf("waiters on orders: %q\n%s", got, text)
	}
	if !strings.Contains(text, "not TLS") {
		t.Error("the page does not say it is not served over TLS")
	}
	// Each follower's row shows what it reported with its append responses: its applied
	// index and its raft log's fsync time (the lock and the SET above were fsynced there).
	for _, f := range c.others(lead) {
		id := strconv.FormatUint(c.nodes[f].id, 10)
		waitPage(t, ctx, 15*time.Second, "follower "+id+"'s applied index and fsync time", func(string) bool {
			row, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){const r=document.querySelector('tr.member[data-id="`+id+`"]'); return r ? r.innerText : ""})()`))
			return strings.Contains(row, "mean") // an fsync time: only what the member reported has one
		})
	}
	screenshot(t, ctx, "leader.png")

	// A follower's page, left open while the leader dies.
	f := c.others(lead)[0]
	if err := open(ctx, page(f), "banner"); err != nil {
		t.Fatalf("open a follower's page: %v", err)
	}
	waitPage(t, ctx, 10*time.Second, "every member reachable", hasAll("All 3 members reachable"))
	if got := evalJS[string](t, ctx, `document.querySelector("tr.member[data-role=leader]").dataset.id`); got != strconv.FormatUint(leadID, 10) {
		t.Errorf("the follower's page says %s leads, INFO says %d", got, leadID)
	}
	loaded := evalJS[string](t, ctx, `String(performance.timeOrigin)`)
	c.kill(lead)
	text = waitPage(t, ctx, 30*time.Second, "the banner and a new leader", func(s string) bool {
		if !strings.Contains(s, "One member unreachable") {
			return false
		}
		id, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(function(){const r=document.querySelector("tr.member[data-role=leader]"); return r ? r.dataset.id : ""})()`))
		return id != "" && id != strconv.FormatUint(leadID, 10)
	})
	if now := evalJS[string](t, ctx, `String(performance.timeOrigin)`); now != loaded {
		t.Error("the page was reloaded: its script should have refreshed it")
	}
	if !strings.Contains(text, "down") {
		t.Errorf("the dead leader's link is not shown down:\n%s", text)
	}
	newLead := c.leader(c.others(lead))
	if got := evalJS[string](t, ctx, `document.querySelector("tr.member[data-role=leader]").dataset.id`); got != strconv.FormatUint(c.nodes[newLead].id, 10) {
		t.Errorf("the page says %s leads, INFO says %d", got, c.nodes[newLead].id)
	}
	screenshot(t, ctx, "leader-killed.png")
	_ = waiting // its connection stays open (with the page's waiter) until the test ends
	_ = pool
}

// open navigates to url and waits (15 s at most) for the element with id to show.
func open(ctx context.Context, url, id string) error {
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return chromedp.Do(tctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID(id)))
}
