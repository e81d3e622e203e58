package stats

import (
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics a Collector exports. Every one but the build info and the snapshot's own
// time has a proto label.
var (
	descBuild = prometheus.NewDesc("tallyd_build_info",
		"Always 1; the labels say which tallyd and Go built this process.", []string{"version", "goversion"}, nil)
	descStart = prometheus.NewDesc("tallyd_start_time_seconds",
		"When the server started, in Unix seconds.", nil, nil)
	descAge = prometheus.NewDesc("tallyd_snapshot_age_seconds",
		"How old the event loop's snapshot behind this scrape was when it was served.", nil, nil)
	descTicks = prometheus.NewDesc("tallyd_ticks_total",
		"Turns of timed work (timeouts, expiries, garbage collection) the event loop has run.", nil, nil)
	descTickLag = prometheus.NewDesc("tallyd_tick_lag_seconds",
		"Delay from the ticker handing a turn of timed work to the event loop to the loop running it.", nil, nil)

	descTurns = prometheus.NewDesc("tallyd_loop_turn_seconds",
		"How long each turn of the event loop took (a connection's read batch, a tick): while one runs no other client is served.", nil, nil)
	descMaxTurn = prometheus.NewDesc("tallyd_loop_turn_max_seconds",
		"The longest turn of the event loop since start: the worst stall every client saw.", nil, nil)
	descYields = prometheus.NewDesc("tallyd_loop_yields_total",
		"Times a connection's slice of a turn (--conn-slice) ended with requests left, which it served in a later turn.", nil, nil)
	descSlowlog = prometheus.NewDesc("tallyd_slowlog_entries_total",
		"Redis-text commands logged in SLOWLOG (run longer than --slowlog-log-slower-than) since start.", nil, nil)
	descPubsub = prometheus.NewDesc("tallyd_pubsub_subscriptions",
		"Pub/sub channels and patterns with at least one subscriber now.", []string{"kind"}, nil)
	descPubsubMessages = prometheus.NewDesc("tallyd_pubsub_messages_total",
		"Pub/sub messages delivered to subscribers (PUBLISH, keyspace notifications), one per receiver.", nil, nil)
	descPubsubCut = prometheus.NewDesc("tallyd_pubsub_subscribers_cut_total",
		"Subscribers closed over client-output-buffer-limit pubsub: they did not read their messages.", nil, nil)

	descConns = prometheus.NewDesc("tallyd_connections",
		"Client connections open now.", []string{"proto"}, nil)
	descConnsTotal = prometheus.NewDesc("tallyd_connections_total",
		"Client connections accepted since start (refused ones not included).", []string{"proto"}, nil)
	descRejected = prometheus.NewDesc("tallyd_connections_rejected_total",
		"Connections closed at accept because a connection limit or the open-file cap was reached.", []string{"proto"}, nil)
	descRequests = prometheus.NewDesc("tallyd_requests_total",
		"Requests served, by command and outcome (a request that waits counts as outcome queued; how its wait ends is in tallyd_waits_ended_total).",
		[]string{"proto", "command", "outcome"}, nil)
	descBytesIn = prometheus.NewDesc("tallyd_received_bytes_total",
		"Bytes read from clients.", []string{"proto"}, nil)
	descBytesOut = prometheus.NewDesc("tallyd_sent_bytes_total",
		"Bytes of replies handed to the sockets of clients.", []string{"proto"}, nil)
	descLatency = prometheus.NewDesc("tallyd_request_duration_seconds",
		"Time each request spent inside the event loop: from the start of the read batch that carried it to the write of that batch's replies.",
		[]string{"proto"}, nil)
	descWaitsIn = prometheus.NewDesc("tallyd_waits_started_total",
		"Requests that could not be answered at once and started to wait.", []string{"proto"}, nil)
	descWaitsOut = prometheus.NewDesc("tallyd_waits_ended_total",
		"Waits that ended, by outcome: granted (the lock or slot was handed over), timed_out, done (a PoolCounter ACQ4ANY waiter released by the holder), other.",
		[]string{"proto", "outcome"}, nil)
	descWaiting = prometheus.NewDesc("tallyd_waiting",
		"Requests waiting now.", []string{"proto"}, nil)
	descHeld = prometheus.NewDesc("tallyd_held",
		"PoolCounter slots or slock lock levels held now.", []string{"proto"}, nil)
	descObjects = prometheus.NewDesc("tallyd_objects",
		"Live objects: counters, semaphores, PoolCounter keys, slock keys with holders or waiters.", []string{"proto"}, nil)
	descMemory = prometheus.NewDesc("tallyd_objects_memory_bytes",
		"The store's estimate of the memory its counters or semaphores take (names plus a fixed overhead per object).", []string{"proto"}, nil)
	descGCRuns = prometheus.NewDesc("tallyd_gc_runs_total",
		"Garbage collections of released counters or semaphores.", []string{"proto"}, nil)
	descGCSeconds = prometheus.NewDesc("tallyd_gc_duration_seconds_total",
		"Time spent in those garbage collections.", []string{"proto"}, nil)
	descExpired = prometheus.NewDesc("tallyd_expired_total",
		"slock holds that ran out (EXPRIED).", []string{"proto"}, nil)

	descMemBudget = prometheus.NewDesc("tallyd_memory_budget_bytes",
		"The memory budget (--max-memory); 0 = none.", nil, nil)
	descMemUsed = prometheus.NewDesc("tallyd_memory_used_bytes",
		"What the memory budget counts, by part: input (buffered requests, counted twice), output (buffered replies), wills (pending slock WILL commands), store (stored state: names, keys, values, holders and queued requests).",
		[]string{"part"}, nil)
	descMemClosed = prometheus.NewDesc("tallyd_memory_closed_total",
		"Connections closed because memory was over the budget and they buffered the most.", nil, nil)
	descMemRefused = prometheus.NewDesc("tallyd_memory_refused_total",
		"Writes refused with an out-of-memory error because memory was over the budget.", nil, nil)
	descMemEvicted = prometheus.NewDesc("tallyd_memory_evicted_total",
		"Released counters, idle semaphores and queued slock requests of closed connections evicted because memory was over the budget.", nil, nil)
)

// The metrics of the logs, the cluster and readiness (present only where they apply: the
// log metrics with a data directory, the raft ones in cluster mode).
var (
	descReady = prometheus.NewDesc("tallyd_ready",
		"1 when the node can acknowledge writes at its default level (/readyz answers 200), else 0.", nil, nil)
	descLogBytes = prometheus.NewDesc("tallyd_log_bytes",
		"Size of the log's file in bytes: aof (the append-only log) or raft (the raft log).", []string{"log"}, nil)
	descLogFsync = prometheus.NewDesc("tallyd_log_fsync_seconds",
		"How long each fsync of the log took, timed on its writer goroutine.", []string{"log"}, nil)
	descLogErrors = prometheus.NewDesc("tallyd_log_write_errors_total",
		"Writes and fsyncs of the log that failed (each is retried; while they fail, writes are refused or held).", []string{"log"}, nil)
	descHeldReplies = prometheus.NewDesc("tallyd_held_replies",
		"Replies held until their change is durable, by level: log (the append-only log) or ONE, QUORUM, ALL (cluster); a run of replies of one connection waiting for the same point counts once.",
		[]string{"level"}, nil)
	descRaftRole = prometheus.NewDesc("tallyd_raft_role",
		"1 for this member's raft role now (leader, follower, candidate or learner), 0 for the others.", []string{"role"}, nil)
	descRaftTerm = prometheus.NewDesc("tallyd_raft_term",
		"The raft term this member is in.", nil, nil)
	descRaftCommit = prometheus.NewDesc("tallyd_raft_commit_index",
		"The highest raft log index this member knows committed.", nil, nil)
	descRaftApplied = prometheus.NewDesc("tallyd_raft_applied_index",
		"The highest raft log index applied to this member's store.", nil, nil)
	descRaftSnapshot = prometheus.NewDesc("tallyd_raft_snapshot_index",
		"The raft log index of this member's last snapshot.", nil, nil)
	descRaftLeaderChanges = prometheus.NewDesc("tallyd_raft_leader_changes_total",
		"Times a new leader became known to this member.", nil, nil)
	descRaftInFlight = prometheus.NewDesc("tallyd_raft_proposals_in_flight",
		"This leader's proposals awaiting their commit (0 on other members).", nil, nil)
	descRaftCommitTime = prometheus.NewDesc("tallyd_raft_proposal_commit_seconds",
		"Time from this leader's proposal of an entry to its commit by a quorum.", nil, nil)
	descPeerMatch = prometheus.NewDesc("tallyd_raft_peer_match_index",
		"The raft log index each other member is known to match (on the leader only).", []string{"peer"}, nil)
	descPeerUp = prometheus.NewDesc("tallyd_raft_peer_link_up",
		"1 when this member's link to the other member is connected and authenticated, else 0.", []string{"peer"}, nil)
	descClusterDown = prometheus.NewDesc("tallyd_clusterdown_total",
		"Replies answered -CLUSTERDOWN, by reason: no_leader, no_quorum (its level not reached in --cluster-timeout), leader_changed.",
		[]string{"reason"}, nil)
)

// Collector renders the snapshot that its source returns as Prometheus metrics, taking it
// once per scrape. Create it with NewCollector.
type Collector struct {
	source func() *Snapshot
	now    func() time.Time
}

// NewCollector returns a Collector of what source returns (a nil snapshot exports nothing
// but the build info).
func NewCollector(source func() *Snapshot) *Collector {
	return &Collector{source: source, now: time.Now}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuild, descStart, descAge, descTicks, descTickLag,
		descTurns, descMaxTurn, descYields, descSlowlog, descPubsub, descPubsubMessages, descPubsubCut,
		descConns, descConnsTotal, descRejected, descRequests, descBytesIn, descBytesOut, descLatency,
		descWaitsIn, descWaitsOut, descWaiting, descHeld, descObjects, descMemory, descGCRuns, descGCSeconds,
		descExpired, descMemBudget, descMemUsed, descMemClosed, descMemRefused, descMemEvicted,
		descReady, descLogBytes, descLogFsync, descLogErrors, descHeldReplies, descRaftRole, descRaftTerm,
		descRaftCommit, descRaftApplied, descRaftSnapshot, descRaftLeaderChanges, descRaftInFlight,
		descRaftCommitTime, descPeerMatch, descPeerUp, descClusterDown} {
		ch <- d
	}
}

// Collect sends the metrics of one snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.source()
	version := "unknown"
	if s != nil && s.Version != "" {
		version = s.Version
	}
	ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, version, runtime.Version())
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descStart, float64(s.Started.UnixNano())/1e9)
	gauge(descAge, max(0, c.now().Sub(s.At).Seconds()))
	counter(descTicks, float64(s.Ticks))
	histogram(ch, descTickLag, &s.TickLag)
	if s.Loop.Turns.Bounds != nil {
		histogram(ch, descTurns, &s.Loop.Turns)
	}
	gauge(descMaxTurn, s.Loop.MaxTurn)
	counter(descYields, float64(s.Loop.Yields))
	counter(descSlowlog, float64(s.Loop.Slowlog))
	gauge(descPubsub, float64(s.Loop.PubsubChannels), "channel")
	gauge(descPubsub, float64(s.Loop.PubsubPatterns), "pattern")
	counter(descPubsubMessages, float64(s.Loop.PubsubMessages))
	counter(descPubsubCut, float64(s.Loop.PubsubCut))
	gauge(descMemBudget, float64(s.Memory.Budget))
	gauge(descMemUsed, float64(s.Memory.Input), "input")
	gauge(descMemUsed, float64(s.Memory.Output), "output")
	gauge(descMemUsed, float64(s.Memory.Wills), "wills")
	gauge(descMemUsed, float64(s.Memory.Store), "store")
	counter(descMemClosed, float64(s.Memory.Closed))
	counter(descMemRefused, float64(s.Memory.Refused))
	counter(descMemEvicted, float64(s.Memory.Evicted))
	collectHealth(ch, s)
	for i := range s.Protos {
		p := &s.Protos[i]
		gauge(descConns, float64(p.Connections), p.Name)
		counter(descConnsTotal, float64(p.ConnectionsTotal), p.Name)
		counter(descRejected, float64(p.Rejected), p.Name)
		for _, r := range p.Requests {
			counter(descRequests, float64(r.N), p.Name, r.Command, r.Outcome)
		}
		counter(descBytesIn, float64(p.BytesIn), p.Name)
		counter(descBytesOut, float64(p.BytesOut), p.Name)
		histogram(ch, descLatency, &p.Latency, p.Name)
		gauge(descObjects, float64(p.Objects), p.Name)
		switch p.Name {
		case "counter", "semaphore":
			gauge(descMemory, float64(p.Memory), p.Name)
			counter(descGCRuns, float64(p.GCRuns), p.Name)
			counter(descGCSeconds, p.GCSeconds, p.Name)
		case "slock":
			counter(descExpired, float64(p.Expired), p.Name)
		}
		if p.HasWaits {
			counter(descWaitsIn, float64(p.WaitsIn), p.Name)
			for _, w := range p.WaitsOut {
				counter(descWaitsOut, float64(w.N), p.Name, w.Outcome)
			}
			gauge(descWaiting, float64(p.Waiting), p.Name)
			gauge(descHeld, float64(p.Held), p.Name)
		}
	}
}

func histogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h *Histogram, labels ...string) {
	ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Cumulative(), labels...)
}

// raftRoles are the values of tallyd_raft_role's role label.
var raftRoles = []string{"leader", "follower", "candidate", "learner"}

// collectHealth sends readiness and the metrics of the logs and the cluster.
func collectHealth(ch chan<- prometheus.Metric, s *Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descReady, bool01(s.Unready == ""))
	for i := range s.Logs {
		l := &s.Logs[i]
		gauge(descLogBytes, float64(l.Bytes), l.Name)
		histogram(ch, descLogFsync, &l.Fsync, l.Name)
		counter(descLogErrors, float64(l.WriteErrors), l.Name)
	}
	for _, h := range s.Held {
		gauge(descHeldReplies, float64(h.N), h.Level)
	}
	r := s.Raft
	if r == nil {
		return
	}
	for _, role := range raftRoles {
		gauge(descRaftRole, bool01(r.Role == role), role)
	}
	gauge(descRaftTerm, float64(r.Term))
	gauge(descRaftCommit, float64(r.Commit))
	gauge(descRaftApplied, float64(r.Applied))
	gauge(descRaftSnapshot, float64(r.SnapshotIndex))
	counter(descRaftLeaderChanges, float64(r.LeaderChanges))
	gauge(descRaftInFlight, float64(r.InFlight))
	histogram(ch, descRaftCommitTime, &r.ProposalCommit)
	for _, p := range r.Peers {
		id := strconv.FormatUint(p.ID, 10)
		if p.Match >= 0 {
			gauge(descPeerMatch, float64(p.Match), id)
		}
		gauge(descPeerUp, bool01(p.Up), id)
	}
	for _, d := range r.ClusterDown {
		counter(descClusterDown, float64(d.N), d.Reason)
	}
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
