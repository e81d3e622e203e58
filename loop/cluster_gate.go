package loop

// The reply gate of a cluster member (output.go's replyGate): on a leader a reply waits
// until the raft entry that carries its change reaches its connection's consistency level,
// and, at QUORUM and ALL, for a read barrier begun after its command ran.

// raftGate is the reply gate of a cluster: on a leader, a reply waits until the changes made
// before it reach its connection's level in raft.
type raftGate struct{ s *Server }

func (g raftGate) turn() { g.s.clusterTurn() }

func (g raftGate) failing() string {
	if g.s.cl.m.St.Log == nil {
		return ""
	}
	return g.s.cl.m.St.Log.Failing()
}

// mark runs as a reply is added to slock connection cs's output at offset from, on a leader:
// it waits until the changes made so far reach cs's level and, at QUORUM and ALL, until a
// read barrier confirms this node still leads.
func (g raftGate) mark(cs *conn, from int) {
	s := g.s
	cl := s.cl
	if !cl.isLeader() {
		return
	}
	if cs.slock.local {
		return // a connection's own setting: it goes out behind the replies before it
	}
	lvl := cs.slock.level()
	pending := cl.m.Acks.Seq > cl.m.Acks.Acked[lvl] || s.st.locks.Journaled()
	if !pending && (lvl == LevelOne || mutant == "no-read-barrier") { // the mutant: a read answered with no barrier
		return
	}
	if n := len(cs.gates); n > 0 && !cs.gates[n-1].settled {
		return // the mark before covers it (made in the same turn, with the same proposal count)
	}
	cs.gates = append(cs.gates, gateMark{at: from, lvl: lvl, since: s.persist.lastNow, after: cl.m.Acks.Seq})
	s.hold(cs)
}

// writable returns how much of cs's output may be written now.
func (rg raftGate) writable(cs *conn) int {
	s := rg.s
	cl := s.cl
	g := cs.gates
	for j := range g {
		if !g[j].settled {
			g[j].settled = true
			g[j].seq = cl.m.Acks.Seq
			if s.st.locks.Journaled() {
				g[j].seq++ // its change waits for the next proposal, which takes the whole journal
			}
			stale := mutant == "stale-commit" && g[j].seq > cl.m.Acks.Acked[g[j].lvl] // released on an older proposal's commit
			if g[j].lvl >= LevelQuorum && g[j].seq <= g[j].after && !stale {
				// The proposal it would wait for was made before its command ran: its commit
				// proves only that this node led then, and a new leader may have acknowledged
				// writes (or granted locks) since. A read barrier that begins now proves it
				// still leads after the command ran (issue 19).
				g[j].rd = cl.m.Reads.Want()
			}
		}
	}
	i := 0
	for i < len(g) && g[i].seq <= cl.m.Acks.Acked[g[i].lvl] && g[i].rd <= cl.m.Reads.Done {
		i++
	}
	cs.gates = g[:copy(g, g[i:])]
	if len(cs.gates) == 0 {
		return len(cs.out)
	}
	s.hold(cs)
	return cs.gates[0].at
}
