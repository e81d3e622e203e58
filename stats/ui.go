package stats

import (
	"context"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The status page, /ui: server-rendered HTML from the snapshots the loop publishes for
// /metrics (the HTTP goroutines never touch the loop's state), with a small script that
// refreshes its live part once a second. Snapshot.Hot, the key lists, is filled in by the loop
// only while a page has asked for it in the last hotFor; a key search is the one thing that
// goes to the loop, through UIConfig.Search, bounded to one key.

//go:embed web
var webFS embed.FS

var (
	uiTemplates = template.Must(template.ParseFS(webFS, "web/ui.html"))
	uiStatic    = func() fs.FS { f, _ := fs.Sub(webFS, "web"); return f }()
)

const (
	hotFor       = 5 * time.Second // how long after a page view the loop keeps filling Hot
	historyLen   = 300             // one point a second: the charts' five minutes
	rateWindow   = 5               // seconds the rates are measured over
	uiSearchWait = time.Second
	// MaxSearchKey is the longest key the search box takes.
	MaxSearchKey = 512
)

// UIConfig is what the status page needs beyond the snapshots.
type UIConfig struct {
	// Access decides who may see the page; nil: anyone who reaches the listener.
	Access UIAccess
	// Search looks one key up on the loop; nil: no search box answers.
	Search func(ctx context.Context, key string) (*KeyReport, error)
	// Node names this node in the page's title (its client address, say).
	Node string
}

// UIAccess is who may see the status page: when Required, HTTP basic auth with a user Allowed.
type UIAccess interface {
	Required() bool
	Allowed(user, pass string) bool
}

// KeyReport is what a search found of one key, in every namespace that has it.
type KeyReport struct {
	Items []KeyItem
}

// KeyItem is one namespace's view of the key searched.
type KeyItem struct {
	Kind  string // "slock lock (db 0)", "PoolCounter pool", "counter", "Redis key", ...
	Key   string
	State string
}

// point is one second of the charts.
type point struct {
	at    time.Time
	reqs  uint64   // requests of every protocol since start
	by    []uint64 // requests since start by protocol, in the snapshot's order
	lat   []uint64 // latency bucket counts since start, every protocol merged
	conns uint64
	mem   uint64
}

// history samples the newest snapshot once a second for the charts and the rates.
type history struct {
	mu     sync.Mutex
	points [historyLen]point
	n      int // points kept
	next   int
	snaps  [rateWindow + 1]*Snapshot // the last seconds' snapshots, for per-command rates
	sn     int
}

func (h *history) add(s *Snapshot) {
	if s == nil {
		return
	}
	p := point{at: s.At, mem: s.Memory.Input + s.Memory.Output + s.Memory.Wills + s.Memory.Store}
	for i := range s.Protos {
		pr := &s.Protos[i]
		p.conns += pr.Connections
		n := sumReq(pr.Requests)
		p.reqs += n
		p.by = append(p.by, n)
		if p.lat == nil {
			p.lat = make([]uint64, len(pr.Latency.Counts))
		}
		for j, c := range pr.Latency.Counts {
			if j < len(p.lat) {
				p.lat[j] += c
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.points[h.next] = p
	h.next = (h.next + 1) % historyLen
	h.n = min(h.n+1, historyLen)
	h.snaps[h.sn%len(h.snaps)] = s
	h.sn++
}

// series returns the points kept, oldest first, and the snapshot about rateWindow seconds old.
func (h *history) series() ([]point, *Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]point, 0, h.n)
	for i := range h.n {
		out = append(out, h.points[(h.next-h.n+i+historyLen)%historyLen])
	}
	var old *Snapshot
	if h.sn > 0 {
		k := max(h.sn-len(h.snaps), 0)
		old = h.snaps[k%len(h.snaps)]
	}
	return out, old
}

// sample adds a point a second until ctx is done. Reading the newest snapshot is one atomic
// load: it costs the loop nothing.
func (h *HTTPServer) sample(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	h.hist.add(h.pub.Latest())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.hist.add(h.pub.Latest())
		}
	}
}

func (h *HTTPServer) uiRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", h.uiAuth(h.uiPage))
	mux.HandleFunc("GET /ui/{$}", h.uiAuth(h.uiPage))
	mux.HandleFunc("GET /ui/live", h.uiAuth(h.uiLive))
	static := http.StripPrefix("/ui/static/", http.FileServerFS(uiStatic))
	mux.Handle("GET /ui/static/", h.uiAuth(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".html") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	}))
}

// uiAuth asks for HTTP basic auth when the node has passwords or ACL users.
func (h *HTTPServer) uiAuth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a := h.cfg.UI.Access; a != nil && a.Required() {
			user, pass, ok := r.BasicAuth()
			if !ok || !a.Allowed(user, pass) {
				w.Header().Set("WWW-Authenticate", `Basic realm="tallyd", charset="UTF-8"`)
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, "the status page needs a user allowed +@admin (HTTP basic auth: the user name and its password; the default user's name is \"default\")")
				return
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:")
		next(w, r)
	}
}

// BasicAllowed compares a password in constant time (for UIAccess implementations).
func BasicAllowed(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (h *HTTPServer) uiPage(w http.ResponseWriter, r *http.Request) {
	h.uiRender(w, r, "page")
}

func (h *HTTPServer) uiLive(w http.ResponseWriter, r *http.Request) {
	h.uiRender(w, r, "live")
}

func (h *HTTPServer) uiRender(w http.ResponseWriter, r *http.Request, name string) {
	now := time.Now()
	h.pub.WantHot(now.Add(hotFor))
	s := h.pub.Latest()
	if s == nil || s.Hot == nil && h.pub.HotWanted(now.UnixNano()) {
		// The first view after a while: wait (briefly) for a snapshot with the key lists.
		s = h.snapshot()
	}
	v := h.view(s, now, r)
	if name == "page" {
		if key := r.URL.Query().Get("key"); key != "" {
			v.SearchKey = key
			switch {
			case len(key) > MaxSearchKey:
				v.SearchErr = fmt.Sprintf("a key of at most %d bytes", MaxSearchKey)
			case h.cfg.UI.Search == nil:
				v.SearchErr = "search is not available on this node"
			default:
				ctx, cancel := context.WithTimeout(r.Context(), uiSearchWait)
				rep, err := h.cfg.UI.Search(ctx, key)
				cancel()
				if err != nil {
					v.SearchErr = "search: " + err.Error()
				} else {
					v.Search = rep
				}
			}
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := uiTemplates.ExecuteTemplate(w, name, v); err != nil {
		fmt.Fprintf(w, "<p>render: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

// uiView is what the templates show.
type uiView struct {
	Node, Version, Uptime, Taken string
	NotTLS, AuthOn               bool
	MaxKey                       int
	Stale, Unready               string
	Banner                       *uiBanner
	Members                      []uiMember
	Charts                       []uiChart
	Protos                       []uiProto
	Commands                     []uiCommand
	Memory                       string
	HotNote                      string
	Locks                        []uiLock
	RedisLocks                   []uiRedisLock
	Pools                        []uiPool
	Counters                     []uiCounter
	SearchKey, SearchErr         string
	Search                       *KeyReport
}

type uiBanner struct{ Class, Text string }

type uiMember struct {
	ID                                     uint64
	Self                                   bool
	Role, Term, Commit, Applied, Lag, Link string
	LinkClass, LastContact, Fsync          string
}

type uiChart struct {
	Title, Now, Span string
	SVG, Legend      template.HTML // Legend: one line per series, when several
}

type uiProto struct{ Name, Rate, P99, Conns, Waiting, Held string }

type uiCommand struct{ Proto, Command, Rate string }

type uiLock struct {
	DB                                              uint8
	Key, Holder, Token, Lease, Waiters, Wait, Waits string
}

type uiRedisLock struct{ Key, Value, Lease string }

type uiPool struct {
	Name, Busy, Queued, Fill, FillClass, FullRate string
	FillPct                                       float64
}

type uiCounter struct {
	Proto, Name, Use, FillClass string
	FillPct                     float64
}

func (h *HTTPServer) view(s *Snapshot, now time.Time, r *http.Request) *uiView {
	v := &uiView{Node: h.cfg.UI.Node, NotTLS: r.TLS == nil, MaxKey: MaxSearchKey}
	if v.Node == "" {
		v.Node = h.Addr().String()
	}
	v.AuthOn = h.cfg.UI.Access != nil && h.cfg.UI.Access.Required()
	if s == nil {
		v.Stale = "the event loop has not published a snapshot yet"
		return v
	}
	if err := h.pub.Health(now, h.cfg.StaleAfter); err != nil {
		v.Stale = "Stale: " + err.Error()
	}
	v.Version = s.Version
	v.Uptime = s.At.Sub(s.Started).Round(time.Second).String()
	v.Taken = s.At.UTC().Format("15:04:05.000 UTC")
	v.Unready = s.Unready
	h.viewCluster(v, s)
	points, old := h.hist.series()
	h.viewTraffic(v, s, old, points)
	h.viewHot(v, s, old)
	return v
}

func (h *HTTPServer) viewCluster(v *uiView, s *Snapshot) {
	r := s.Raft
	if r == nil {
		return
	}
	fsync := "–"
	for _, l := range s.Logs {
		if l.Name == "raft" && l.Fsync.Count > 0 {
			fsync = dur(l.Fsync.Sum/float64(l.Fsync.Count)) + " mean"
		}
	}
	self := uiMember{ID: r.NodeID, Self: true, Role: r.Role, Term: u64(r.Term), Commit: u64(r.Commit),
		Applied: u64(r.Applied), Lag: "–", Link: "this node", LastContact: "–", Fsync: fsync}
	if r.Role == "leader" {
		self.Lag = "0"
	}
	v.Members = append(v.Members, self)
	up := 1
	for _, p := range r.Peers {
		m := uiMember{ID: p.ID, Role: "follower", Term: "–", Commit: "–", Applied: "–", Lag: "–",
			Link: "up", LinkClass: "up", LastContact: "never", Fsync: "–"}
		if p.ID == r.Leader && r.Leader != 0 {
			m.Role = "leader"
		}
		if p.Match >= 0 {
			m.Lag = u64(r.Commit - min(uint64(p.Match), r.Commit))
		}
		if p.Up {
			up++
		} else {
			m.Link, m.LinkClass = "down", "down"
		}
		if p.LastContact >= 0 {
			m.LastContact = dur(p.LastContact) + " ago"
		}
		if p.Status { // what it told the leader (this node) with its last append response
			m.Term, m.Commit, m.Applied = u64(r.Term), u64(p.Commit), u64(p.Applied)
			if p.FsyncMean > 0 {
				m.Fsync = dur(p.FsyncMean) + " mean"
			}
		}
		v.Members = append(v.Members, m)
	}
	sort.Slice(v.Members, func(i, j int) bool { return v.Members[i].ID < v.Members[j].ID })
	n := len(r.Peers) + 1
	down := n - up
	switch {
	case down == 0:
		v.Banner = &uiBanner{"ok", fmt.Sprintf("All %d members reachable: quorum holds.", n)}
	case up > n/2:
		what := "One member unreachable"
		if down > 1 {
			what = fmt.Sprintf("%d members unreachable", down)
		}
		v.Banner = &uiBanner{"warn", fmt.Sprintf("%s: quorum holds with %d of %d, %d more lost and writes stop.", what, up, n, up-n/2)}
	default:
		v.Banner = &uiBanner{"bad", fmt.Sprintf("A majority is unreachable (%d of %d members reachable from this node): no quorum, writes are refused.", up, n)}
	}
	if r.Leader == 0 && r.Role != "leader" {
		v.Banner.Text += " No leader is known."
	}
}

func (h *HTTPServer) viewTraffic(v *uiView, s *Snapshot, old *Snapshot, points []point) {
	secs := 0.0
	if old != nil {
		secs = s.At.Sub(old.At).Seconds()
	}
	for i := range s.Protos {
		p := &s.Protos[i]
		row := uiProto{Name: p.Name, Rate: "–", P99: "–", Conns: u64(p.Connections), Waiting: "–", Held: "–"}
		if p.HasWaits {
			row.Waiting, row.Held = u64(p.Waiting), u64(p.Held)
		}
		var op *Proto
		if old != nil && secs > 0.2 {
			op = old.Proto(p.Name)
		}
		if op != nil {
			row.Rate = rate(sumReq(p.Requests)-sumReq(op.Requests), secs)
			row.P99 = p99(p.Latency.Bounds, p.Latency.Counts, op.Latency.Counts)
			prev := map[[2]string]uint64{}
			for _, rc := range op.Requests {
				prev[[2]string{rc.Command, rc.Outcome}] = rc.N
			}
			byCmd := map[string]uint64{}
			for _, rc := range p.Requests {
				if d := rc.N - min(prev[[2]string{rc.Command, rc.Outcome}], rc.N); d > 0 {
					byCmd[rc.Command] += d
				}
			}
			for c, n := range byCmd {
				v.Commands = append(v.Commands, uiCommand{Proto: p.Name, Command: c, Rate: rate(n, secs)})
			}
		}
		v.Protos = append(v.Protos, row)
	}
	sort.Slice(v.Commands, func(i, j int) bool {
		a, b := v.Commands[i], v.Commands[j]
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return a.Command < b.Command
	})
	m := s.Memory
	used := m.Input + m.Output + m.Wills + m.Store
	if m.Budget > 0 {
		v.Memory = fmt.Sprintf("%s of the %s budget (%.1f%%): store %s, buffers %s", bytes(used), bytes(m.Budget),
			100*float64(used)/float64(m.Budget), bytes(m.Store), bytes(m.Input+m.Output+m.Wills))
	} else {
		v.Memory = fmt.Sprintf("%s counted (no --max-memory budget): store %s, buffers %s", bytes(used), bytes(m.Store), bytes(m.Input+m.Output+m.Wills))
	}
	// Charts: one value a second from the sampled points.
	var bounds []float64
	for i := range s.Protos {
		bounds = s.Protos[i].Latency.Bounds
	}
	var reqs, lat, conns, mem []float64
	by := make([][]float64, len(s.Protos))
	for i := 1; i < len(points); i++ {
		a, b := &points[i-1], &points[i]
		d := b.at.Sub(a.at).Seconds()
		if d <= 0 {
			continue
		}
		reqs = append(reqs, float64(b.reqs-min(a.reqs, b.reqs))/d)
		for j := range by {
			x := 0.0
			if j < len(a.by) && j < len(b.by) {
				x = float64(b.by[j]-min(a.by[j], b.by[j])) / d
			}
			by[j] = append(by[j], x)
		}
		lat = append(lat, p99Seconds(bounds, b.lat, a.lat)*1e3)
		conns = append(conns, float64(b.conns))
		mem = append(mem, float64(b.mem))
	}
	span := "–"
	if len(points) > 1 {
		span = points[len(points)-1].at.Sub(points[0].at).Round(time.Second).String()
	}
	last := func(xs []float64, f func(float64) string) string {
		if len(xs) == 0 {
			return "–"
		}
		return f(xs[len(xs)-1])
	}
	perSec := func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
	reqChart := uiChart{Title: "requests/s", Now: last(reqs, perSec), Span: span, SVG: spark(reqs)}
	if len(by) > 1 {
		var legend []string
		for j := range by {
			legend = append(legend, fmt.Sprintf(`<span class="s%d">%s %s</span>`, j%4, template.HTMLEscapeString(s.Protos[j].Name), last(by[j], perSec)))
		}
		reqChart.Legend = template.HTML(strings.Join(legend, " ")) //nolint:gosec // escaped above
		reqChart.SVG = sparks(by)
	}
	memTitle := "memory"
	if m.Budget > 0 {
		memTitle = "memory (budget " + bytes(m.Budget) + ")"
	}
	v.Charts = []uiChart{
		reqChart,
		{Title: "p99 latency", Now: last(lat, func(x float64) string { return dur(x / 1e3) }), Span: span, SVG: spark(lat)},
		{Title: "connections", Now: last(conns, func(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }), Span: span, SVG: spark(conns)},
		{Title: memTitle, Now: last(mem, func(x float64) string { return bytes(uint64(x)) }), Span: span, SVG: spark(mem)},
	}
}

func (h *HTTPServer) viewHot(v *uiView, s, old *Snapshot) {
	hot := s.Hot
	if hot == nil {
		v.HotNote = "The key lists are kept while a page is open: they fill from now on."
		return
	}
	for _, l := range hot.Locks {
		row := uiLock{DB: l.DB, Key: l.Key, Holder: "–", Token: "–", Lease: "–", Waiters: strconv.Itoa(l.Waiters),
			Wait: "–", Waits: u64(l.Waits)}
		if len(l.Holders) > 0 {
			hd := l.Holders[0]
			row.Holder, row.Token = hd.LockID, u64(hd.Token)
			row.Lease = "no expiry"
			if hd.Lease >= 0 {
				row.Lease = dur(hd.Lease)
			}
			if n := len(l.Holders) - 1 + l.MoreHolders; n > 0 {
				row.Holder += fmt.Sprintf(" (+%d)", n)
			}
		}
		if l.Waiters > 0 {
			row.Wait = dur(l.LongestWait)
		}
		v.Locks = append(v.Locks, row)
	}
	for _, l := range hot.RedisLocks {
		v.RedisLocks = append(v.RedisLocks, uiRedisLock{Key: l.Key, Value: l.Value, Lease: dur(l.Lease)})
	}
	prevFull := map[string]uint64{}
	secs := 0.0
	if old != nil && old.Hot != nil {
		secs = s.At.Sub(old.At).Seconds()
		for _, p := range old.Hot.Pools {
			prevFull[p.Name] = p.QueueFull
		}
	}
	for _, p := range hot.Pools {
		row := uiPool{Name: p.Name, Busy: fmt.Sprintf("%d of %d", p.Processing, p.Workers), Queued: strconv.Itoa(int(p.Waiting)), FullRate: "–"}
		if p.MaxQueue > 0 {
			row.FillPct = math.Min(100, 100*float64(p.Waiting)/float64(p.MaxQueue))
			row.Fill = fmt.Sprintf("%d of %d", p.Waiting, p.MaxQueue)
			if p.Waiting >= p.MaxQueue {
				row.FillClass = "full"
			}
		} else {
			row.Fill = "no queue"
		}
		if was, ok := prevFull[p.Name]; ok && secs > 0.2 {
			row.FullRate = rate(p.QueueFull-min(was, p.QueueFull), secs)
		}
		v.Pools = append(v.Pools, row)
	}
	for _, c := range hot.Counters {
		row := uiCounter{Proto: c.Proto, Name: c.Name, Use: fmt.Sprintf("%d of %d", c.Consumption, c.Max)}
		if c.Max > 0 {
			row.FillPct = math.Min(100, 100*float64(c.Consumption)/float64(c.Max))
			if c.Consumption >= c.Max {
				row.FillClass = "full"
			}
		}
		v.Counters = append(v.Counters, row)
	}
}

func sumReq(rs []RequestCount) uint64 {
	var n uint64
	for _, r := range rs {
		n += r.N
	}
	return n
}

// p99 is the 99th percentile of the observations between two readings of a histogram, as the
// bound of the bucket it falls in.
func p99(bounds []float64, now, was []uint64) string {
	s := p99Seconds(bounds, now, was)
	if s < 0 {
		return "–"
	}
	if math.IsInf(s, 1) {
		return "> " + dur(bounds[len(bounds)-1])
	}
	return "≤ " + dur(s)
}

// p99Seconds is p99's number: -1 when nothing was observed, +Inf past the last bound.
func p99Seconds(bounds []float64, now, was []uint64) float64 {
	var total uint64
	d := make([]uint64, len(now))
	for i := range now {
		var w uint64
		if i < len(was) {
			w = was[i]
		}
		d[i] = now[i] - min(w, now[i])
		total += d[i]
	}
	if total == 0 {
		return -1
	}
	want := uint64(math.Ceil(float64(total) * 0.99))
	var n uint64
	for i, c := range d {
		n += c
		if n >= want {
			if i < len(bounds) {
				return bounds[i]
			}
			return math.Inf(1)
		}
	}
	return math.Inf(1)
}

// spark draws values as a small inline SVG line (no script needed to see it).
func spark(xs []float64) template.HTML { return sparks([][]float64{xs}) }

// sparks draws several series on one scale, the i-th with class s<i%4>.
func sparks(series [][]float64) template.HTML {
	const w, hgt = 240.0, 48.0
	top := 0.0
	for _, xs := range series {
		for _, x := range xs {
			if !math.IsInf(x, 0) && x > top {
				top = x
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="chart">`, int(w), int(hgt), int(w), int(hgt))
	for k, xs := range series {
		fmt.Fprintf(&b, `<polyline class="s%d" points="`, k%4)
		sparkPoints(&b, xs, top, w, hgt)
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers only
}

// sparkMin is how many seconds a chart spans at least.
const sparkMin = 60

func sparkPoints(b *strings.Builder, xs []float64, top, w, hgt float64) {
	for i, x := range xs {
		if x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			x = math.Max(0, math.Min(top, x))
			if math.IsNaN(x) {
				x = 0
			}
		}
		px := w
		if len(xs) > 1 {
			px = w - w*float64(len(xs)-1-i)/float64(max(len(xs)-1, sparkMin)) // a minute fills it; then it scrolls to five
		}
		py := hgt - 1
		if top > 0 {
			py = hgt - 1 - (hgt-2)*x/top
		}
		fmt.Fprintf(b, "%.1f,%.1f ", px, py)
	}
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func rate(n uint64, secs float64) string {
	if secs <= 0 {
		return "–"
	}
	r := float64(n) / secs
	if r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}

// dur shows seconds with a unit a person reads at once.
func dur(s float64) string {
	switch {
	case s < 0:
		return "–"
	case s < 1e-3:
		return strconv.FormatFloat(s*1e6, 'f', 0, 64) + " µs"
	case s < 1:
		return strconv.FormatFloat(s*1e3, 'f', 1, 64) + " ms"
	case s < 120:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	default:
		return time.Duration(s * float64(time.Second)).Round(time.Second).String()
	}
}

func bytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatUint(n, 10) + " B"
}
