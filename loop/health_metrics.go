package loop

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/stats"
)

// Readiness and the metrics of the logs and the cluster: what /readyz and /metrics show beyond
// the request counts. Everything here is read at publication (a snapshot every 250 ms or per
// scrape) from state the loop keeps anyway; what it counts itself are plain fields bumped
// where a leader changes, a proposal is made or committed, or -CLUSTERDOWN is answered: never
// per request.

// Reasons a reply is answered -CLUSTERDOWN.
const (
	downNoLeader = iota
	downNoQuorum
	downLeaderChanged
	downOther
	numDown
)

var downNames = [numDown]string{"no_leader", "no_quorum", "leader_changed", "other"}

// propTimes is how many proposals' start times are kept: more than proposeWindow, so every
// proposal awaiting its commit has one.
const propTimes = 8

// propTime is when a proposal was made.
type propTime struct {
	seq uint64
	at  int64 // Unix ns
}

// clusterMetrics is what the loop counts of the cluster for /metrics.
type clusterMetrics struct {
	leaderChanges uint64
	down          [numDown]uint64
	props         [propTimes]propTime // by seq % propTimes
	timedTo       uint64              // the last proposal whose commit was looked at
	commit        hist                // proposal to commit, ns
}

// leaderKnown counts a new leader becoming known.
func (m *clusterMetrics) leaderKnown() { m.leaderChanges++ }

// clusterDown counts n replies answered with err (a -CLUSTERDOWN error's text).
func (m *clusterMetrics) clusterDown(err string, n int) {
	r := downOther
	switch err {
	case "CLUSTERDOWN no leader":
		r = downNoLeader
	case "CLUSTERDOWN no quorum":
		r = downNoQuorum
	case "CLUSTERDOWN leader changed":
		r = downLeaderChanged
	}
	m.down[r] += uint64(max(n, 0))
}

// proposed notes when this leader made proposal seq.
func (m *clusterMetrics) proposed(seq uint64, now func() time.Time) {
	m.props[seq%propTimes] = propTime{seq, now().UnixNano()}
}

// committed observes the time to commit of the proposals up to acked (the last one a quorum
// acknowledged) not yet observed; it reads the clock only when there is one.
func (m *clusterMetrics) committed(acked uint64, now func() time.Time) {
	if acked <= m.timedTo {
		return
	}
	if acked-m.timedTo > propTimes {
		m.timedTo = acked - propTimes // a new term's numbering jumped: those were not timed here
	}
	t := now().UnixNano()
	for m.timedTo < acked {
		m.timedTo++
		if p := &m.props[m.timedTo%propTimes]; p.seq == m.timedTo && p.at != 0 {
			m.commit.observe(commitBounds, t-p.at, 1)
			p.at = 0
		}
	}
}

// Bounds of the proposal-to-commit histogram, in ns: 100 µs to 10 s.
var (
	commitBounds = []int64{100e3, 250e3, 500e3, 1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6,
		250e6, 500e6, 1e9, 2.5e9, 5e9, 10e9}
	commitSeconds = seconds(commitBounds)
	fsyncSeconds  = func() []float64 {
		s := make([]float64, len(logfile.FsyncBounds))
		for i, d := range logfile.FsyncBounds {
			s[i] = d.Seconds()
		}
		return s
	}()
)

// unready says why this node cannot acknowledge writes at its default level (QUORUM in a
// cluster) now, "" when it can: its log must take writes and, in a cluster, it must lead with
// a quorum of voters reachable, or follow a known leader over a link that is up.
func (s *Server) unready() string {
	if e := s.persist.fatal.Load(); e != nil {
		return (*e).Error()
	}
	if why := s.replies.failing(); why != "" {
		return "log: " + why
	}
	cl := s.cl
	if cl == nil {
		return ""
	}
	switch {
	case cl.stopping:
		return "stopping"
	case cl.isLeader():
		voters := cl.m.Members.Voters()
		up := 0
		for _, id := range voters {
			if id == cl.cfg.NodeID || cl.links[id].ready() {
				up++
			}
		}
		if up <= len(voters)/2 {
			return fmt.Sprintf("no quorum: %d of %d voters reachable", up, len(voters))
		}
		if !cl.serving() {
			return "leader not ready: applying the entries of earlier terms"
		}
	case cl.m.Leader() == 0:
		return "no leader"
	case !cl.links[cl.m.Leader()].ready():
		return "no link to the leader (node " + strconv.FormatUint(cl.m.Leader(), 10) + ")"
	}
	return ""
}

// logsSnapshot returns the numbers of the logs this node writes. It reads only what the
// writers publish for any goroutine.
func (s *Server) logsSnapshot() []stats.Log {
	var logs []stats.Log
	if w := s.persist.w; w != nil {
		logs = append(logs, logSnapshot("aof", uint64(w.Stats().Size), w.FsyncHist()))
	}
	if s.cl != nil && s.cl.m.St.Log != nil {
		lg := s.cl.m.St.Log
		logs = append(logs, logSnapshot("raft", uint64(lg.Stats().LogSize), lg.FsyncHist()))
	}
	return logs
}

func logSnapshot(name string, size uint64, h *logfile.FsyncHist) stats.Log {
	c := h.Read()
	return stats.Log{Name: name, Bytes: size, WriteErrors: c.Errors, Fsync: stats.Histogram{Bounds: fsyncSeconds,
		Counts: append([]uint64(nil), c.Counts[:]...), Count: c.Count, Sum: c.Sum.Seconds()}}
}

// healthSnapshot fills in readiness, the logs, the held replies and the cluster (on the loop).
func (s *Server) healthSnapshot(snap *stats.Snapshot) {
	snap.Unready = s.unready()
	snap.Logs = s.logsSnapshot()
	var held [LevelAll + 1]uint64 // [0]: the append-only log's
	for _, cs := range s.persist.held {
		for _, g := range cs.gates {
			held[min(g.lvl, LevelAll)]++
		}
	}
	if s.persist.w != nil {
		snap.Held = append(snap.Held, stats.LevelCount{Level: "log", N: held[0]})
	}
	cl := s.cl
	if cl == nil {
		return
	}
	for l := LevelOne; l <= LevelAll; l++ {
		snap.Held = append(snap.Held, stats.LevelCount{Level: l.String(), N: held[l]})
	}
	for _, l := range snap.Logs {
		if l.Name == "raft" && l.Fsync.Count > 0 { // goes to the leader with append responses
			cl.m.SetFsyncMicros(uint32(min(l.Fsync.Sum/float64(l.Fsync.Count)*1e6, 1<<32-1)))
		}
	}
	st := cl.m.Status()
	r := &stats.Raft{Role: st.Role, Term: st.Term, Commit: st.Commit, Applied: cl.m.Applied(),
		SnapshotIndex: cl.m.SnapIndex(), LeaderChanges: s.m.cl.leaderChanges,
		ProposalCommit: s.m.cl.commit.snapshot(commitSeconds), NodeID: cl.cfg.NodeID, Leader: cl.m.Leader()}
	if st.Role == "leader" {
		r.InFlight = cl.m.Acks.Window()
	}
	for id := range cl.m.Members.Addrs {
		if id != cl.cfg.NodeID {
			p := stats.Peer{ID: id, Match: -1, Up: cl.links[id].ready(), LastContact: -1}
			if l := cl.links[id]; l != nil && l.heard != 0 {
				p.LastContact = max(float64(s.now().UnixNano()-l.heard)/1e9, 0)
			}
			if ps := cl.m.PeerStatus(id); !ps.At.IsZero() && st.Role == "leader" { // what it last reported
				p.Status, p.Reported = true, max(s.now().Sub(ps.At).Seconds(), 0)
				p.Applied, p.Commit, p.FsyncMean = ps.Applied, ps.Commit, float64(ps.FsyncMicros)/1e6
			}
			r.Peers = append(r.Peers, p)
		}
	}
	sort.Slice(r.Peers, func(i, j int) bool { return r.Peers[i].ID < r.Peers[j].ID })
	cl.m.Matches(func(id, match uint64) {
		for i := range r.Peers {
			if r.Peers[i].ID == id {
				r.Peers[i].Match = int64(match)
			}
		}
	})
	r.ClusterDown = make([]stats.ReasonCount, numDown)
	for i := range numDown {
		r.ClusterDown[i] = stats.ReasonCount{Reason: downNames[i], N: s.m.cl.down[i]}
	}
	snap.Raft = r
}

// idleUnready is unready before the loop has run (in New, or on the ticker goroutine while
// nothing has connected): it reads only what any goroutine may. A cluster member is not ready
// until its loop runs raft.
func (s *Server) idleUnready() string {
	if e := s.persist.fatal.Load(); e != nil {
		return (*e).Error()
	}
	if w := s.persist.w; w != nil && w.Failing() != "" {
		return "log: " + w.Failing()
	}
	if s.cfg.Cluster != nil {
		return "starting"
	}
	return ""
}
