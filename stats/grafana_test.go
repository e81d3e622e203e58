package stats

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// fullSnapshot has every part a server can publish: all four protocols, the logs, a cluster.
func fullSnapshot() *Snapshot {
	h := Histogram{Bounds: []float64{0.001}, Counts: []uint64{1, 0}, Count: 1, Sum: 0.0005}
	s := &Snapshot{At: time.Now(), Started: time.Now(), Version: "test", TickLag: h, Loop: Loop{Turns: h},
		Logs: []Log{{Name: "aof", Fsync: h}, {Name: "raft", Fsync: h}},
		Held: []LevelCount{{"QUORUM", 1}},
		Raft: &Raft{Role: "leader", ProposalCommit: h, Peers: []Peer{{ID: 2, Match: 1, Up: true}},
			ClusterDown: []ReasonCount{{"no_leader", 1}}}}
	for _, name := range []string{"counter", "semaphore", "pool", "slock"} {
		s.Protos = append(s.Protos, Proto{Name: name, Latency: h, HasWaits: true,
			Requests: []RequestCount{{"get", "ok", 1}}, WaitsOut: []WaitCount{{"granted", 1}}})
	}
	return s
}

// exprNames pulls the metric names out of a PromQL expression: the words that start as
// tallyd's, the Go runtime's and the process's metrics do, outside quoted label values.
var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	metricRef = regexp.MustCompile(`\b(?:tallyd|go|process|promhttp)_[a-zA-Z0-9_:]+`)
)

// Every metric the Grafana dashboard's queries name is one the server exports (a scrape of
// the metrics server publishing a snapshot with every part filled in), and every tallyd
// metric exported has a row in docs/metrics.md.
func TestGrafanaDashboardMetrics(t *testing.T) {
	var p Publisher
	p.Publish(fullSnapshot())
	h := serveHTTP(t, &p, HTTPConfig{})
	_, body := get(t, h, "/metrics")
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`).FindAllStringSubmatch(body, -1) {
		exported[m[1]] = true
		if m[2] == "histogram" || m[2] == "summary" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[m[1]+suffix] = true
			}
		}
	}

	raw, err := os.ReadFile("../deploy/grafana/tallyd.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/tallyd.json: %v", err)
	}
	exprs := 0
	for _, panel := range dash.Panels {
		for _, tg := range panel.Targets {
			exprs++
			names := metricRef.FindAllString(quoted.ReplaceAllString(tg.Expr, `""`), -1)
			if len(names) == 0 {
				t.Errorf("panel %q: expression %q names no metric", panel.Title, tg.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q: %s is not exported (expression %q)", panel.Title, n, tg.Expr)
				}
			}
		}
	}
	if exprs < 20 {
		t.Fatalf("the dashboard has %d queries; want the throughput, latency, connection, raft and log panels", exprs)
	}

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	var undocumented []string
	for n := range exported {
		if strings.HasPrefix(n, "tallyd_") && !strings.Contains(string(doc), "`"+n+"`") && !strings.HasSuffix(n, "_bucket") &&
			!strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") {
			undocumented = append(undocumented, n)
		}
	}
	sort.Strings(undocumented)
	if len(undocumented) > 0 {
		t.Errorf("docs/metrics.md has no row for %v", undocumented)
	}
}
