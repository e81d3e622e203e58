package stats

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// uiSnapshot is a follower's snapshot in a three-member cluster whose leader (3) is
// unreachable, with one of each kind of hot key.
func uiSnapshot(at time.Time) *Snapshot {
	s := sampleSnapshot(at)
	s.Started = at.Add(-time.Hour)
	s.Raft = &Raft{Role: "follower", Term: 7, Commit: 120, Applied: 119, NodeID: 1, Leader: 3,
		Peers: []Peer{{ID: 2, Match: -1, Up: true, LastContact: 0.05}, {ID: 3, Match: -1, Up: false, LastContact: 4}}}
	s.Hot = &Hot{
		Locks: []HotLock{{DB: 0, Key: "orders/42", Holders: []LockHolder{{LockID: "worker-a", Token: 98765432101, Lease: 12.5, Levels: 1}},
			Waiters: 2, LongestWait: 1.5, Waits: 9}},
		Pools:      []HotPool{{Name: "render-pool", Processing: 2, Waiting: 3, Workers: 2, MaxQueue: 4, QueueFull: 5}},
		Counters:   []HotCounter{{Proto: "counter", Name: "api-quota", Consumption: 7, Max: 10}},
		RedisLocks: []RedisLock{{Key: "lock:cart", Value: "tok-<b>", Lease: 29.9}},
	}
	return s
}

func getAuth(t *testing.T, h *HTTPServer, path, user, pass string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+h.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b), res.Header
}

// The page is whole without JavaScript: the banner, every member, the hot keys with their
// holder, token and waiters, the pool's queue, the counter and the Redis lock are in the HTML
// the server sends; it says it is not TLS; it loads nothing from outside the node.
func TestUIPageServerRendered(t *testing.T) {
	var p Publisher
	p.Publish(uiSnapshot(time.Now()))
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute})
	code, body, hdr := getAuth(t, h, "/ui", "", "")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
		t.Fatalf("/ui: %d %s\n%s", code, hdr.Get("Content-Type"), body)
	}
	for _, want := range []string{
		`id="banner"`, "One member unreachable: quorum holds with 2 of 3",
		`data-id="3" data-role="leader"`, `<td class="down">down</td>`, "4.0 s ago",
		"orders/42", "worker-a", "98765432101", "12.5 s", `<td class="num waiters">2</td>`, "1.5 s",
		"render-pool", "2 of 2", "3 of 4", "7 of 10", "lock:cart", "tok-&lt;b&gt;", "29.9 s",
		`id="not-tls"`, "not TLS", "<svg", `action="/ui"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/ui lacks %q", want)
		}
	}
	if strings.Contains(body, "tok-<b>") {
		t.Error("a client's value reached the page unescaped")
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		if !strings.HasPrefix(m[1], "/ui/") {
			t.Errorf("the page loads %q: not from this node", m[1])
		}
		code, asset, _ := getAuth(t, h, m[1], "", "")
		if code != http.StatusOK || len(asset) == 0 {
			t.Errorf("%s: %d", m[1], code)
		}
	}
	if code, live, _ := getAuth(t, h, "/ui/live", "", ""); code != http.StatusOK || !strings.Contains(live, "orders/42") || strings.Contains(live, "<html") {
		t.Errorf("/ui/live: %d, %d bytes", code, len(live))
	}
	if code, _, _ := getAuth(t, h, "/ui/static/ui.html", "", ""); code != http.StatusNotFound {
		t.Errorf("the template is served: %d", code)
	}
}

// The banner follows what this node can reach: all, one short, a majority gone.
func TestUIQuorumBanner(t *testing.T) {
	var p Publisher
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute})
	for _, c := range []struct {
		up   []bool
		want string
	}{
		{[]bool{true, true}, "All 3 members reachable: quorum holds."},
		{[]bool{true, false}, "One member unreachable"},
		{[]bool{false, false}, "A majority is unreachable (1 of 3 members reachable from this node)"},
	} {
		s := uiSnapshot(time.Now())
		for i, u := range c.up {
			s.Raft.Peers[i].Up = u
		}
		p.Publish(s)
		if _, body, _ := getAuth(t, h, "/ui/live", "", ""); !strings.Contains(body, c.want) {
			t.Errorf("links %v: no %q", c.up, c.want)
		}
	}
}

type access struct{ user, pass string }

func (a access) Required() bool { return true }
func (a access) Allowed(user, pass string) bool {
	return user == a.user && BasicAllowed(pass, a.pass)
}

// With access required, every /ui path asks for basic auth and takes only the allowed
// user; /metrics, /healthz and /readyz stay as they were.
func TestUIBasicAuth(t *testing.T) {
	var p Publisher
	p.Publish(uiSnapshot(time.Now()))
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute, UI: UIConfig{Access: access{"ops", "s3cret"}}})
	for _, path := range []string{"/ui", "/ui/live", "/ui/static/ui.js", "/ui?key=x"} {
		for _, cred := range []access{{}, {"ops", "wrong"}, {"other", "s3cret"}} {
			code, body, hdr := getAuth(t, h, path, cred.user, cred.pass)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Basic ") || strings.Contains(body, "orders/42") {
				t.Errorf("%s as %q/%q: %d %q", path, cred.user, cred.pass, code, hdr.Get("WWW-Authenticate"))
			}
		}
		if code, _, _ := getAuth(t, h, path, "ops", "s3cret"); code != http.StatusOK {
			t.Errorf("%s as ops: %d", path, code)
		}
	}
	if code, _ := get(t, h, "/metrics"); code != http.StatusOK {
		t.Errorf("/metrics: %d", code)
	}
}

// A search goes to Search once with the key, and its answer is on the page; a key longer than
// MaxSearchKey never reaches it.
func TestUISearch(t *testing.T) {
	var p Publisher
	p.Publish(uiSnapshot(time.Now()))
	asked := make(chan string, 4)
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute, UI: UIConfig{Search: func(_ context.Context, key string) (*KeyReport, error) {
		asked <- key
		return &KeyReport{Items: []KeyItem{{Kind: "PoolCounter pool", Key: key, State: "3 of 4 queued"}}}, nil
	}}})
	_, body, _ := getAuth(t, h, "/ui?key=render%20pool", "", "")
	if got := <-asked; got != "render pool" {
		t.Fatalf("searched %q", got)
	}
	if !strings.Contains(body, `id="search-result"`) || !strings.Contains(body, "3 of 4 queued") || !strings.Contains(body, `value="render pool"`) {
		t.Errorf("no result on the page")
	}
	_, body, _ = getAuth(t, h, "/ui?key="+strings.Repeat("k", MaxSearchKey+1), "", "")
	if !strings.Contains(body, "a key of at most") || len(asked) != 0 {
		t.Errorf("a long key: searched %d times", len(asked))
	}
}

// The rates and the charts come from the snapshots sampled a second apart.
func TestUIRates(t *testing.T) {
	var hi history
	at := time.Now()
	a := uiSnapshot(at.Add(-5 * time.Second))
	b := uiSnapshot(at)
	b.Protos = append([]Proto(nil), b.Protos...)
	for i := range b.Protos {
		rs := append([]RequestCount(nil), b.Protos[i].Requests...)
		for j := range rs {
			rs[j].N += 50 // 50 more of each over 5 s
		}
		b.Protos[i].Requests = rs
	}
	hi.add(a)
	hi.add(b)
	pts, old := hi.series()
	if len(pts) != 2 || old != a {
		t.Fatalf("%d points, old %v", len(pts), old)
	}
	h := &HTTPServer{}
	v := &uiView{}
	h.viewTraffic(v, b, old, pts)
	if len(v.Commands) == 0 || v.Commands[0].Rate == "–" {
		t.Fatalf("commands: %+v", v.Commands)
	}
	for _, c := range v.Commands {
		if c.Rate == "0.0" {
			t.Errorf("%+v", c)
		}
	}
	if len(b.Protos) < 2 || !strings.Contains(string(v.Charts[0].Legend), b.Protos[1].Name) ||
		strings.Count(string(v.Charts[0].SVG), "<polyline") != len(b.Protos) {
		t.Errorf("requests/s is not charted by protocol: %s %s", v.Charts[0].Legend, v.Charts[0].SVG)
	}
	if v.Protos[0].Rate == "–" || v.Charts[0].Now == "–" {
		t.Errorf("protos %+v charts %+v", v.Protos[0], v.Charts[0].Now)
	}
}

// On the leader's page each follower's row shows what it last reported with its append
// responses: its commit and applied indexes and its raft log's mean fsync.
func TestUIFollowerStatus(t *testing.T) {
	var p Publisher
	s := uiSnapshot(time.Now())
	s.Raft = &Raft{Role: "leader", Term: 9, Commit: 500, Applied: 500, NodeID: 1, Leader: 1,
		Peers: []Peer{{ID: 2, Match: 498, Up: true, LastContact: 0.01, Status: true, Reported: 0.02, Commit: 497, Applied: 496, FsyncMean: 0.0023},
			{ID: 3, Match: -1, Up: false, LastContact: 4}}}
	p.Publish(s)
	h := serveHTTP(t, &p, HTTPConfig{StaleAfter: time.Minute})
	code, body, _ := getAuth(t, h, "/ui", "", "")
	if code != http.StatusOK {
		t.Fatalf("/ui: %d", code)
	}
	row := regexp.MustCompile(`(?s)<tr[^>]*data-id="2".*?</tr>`).FindString(body)
	for _, want := range []string{">497<", ">496<", "2.3 ms mean", ">2<"} {
		if !strings.Contains(row, want) {
			t.Errorf("member 2's row lacks %q:\n%s", want, row)
		}
	}
	if row3 := regexp.MustCompile(`(?s)<tr[^>]*data-id="3".*?</tr>`).FindString(body); strings.Contains(row3, "mean") {
		t.Errorf("member 3 reported nothing, yet its row shows an fsync time:\n%s", row3)
	}
}
