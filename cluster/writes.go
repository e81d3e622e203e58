package cluster

// WriteMark is the proposal that carries a connection's last change on a leader, for WAIT:
// the host keeps one per connection (NoteWrite) and asks how many replicas hold it
// (ReplicasHolding).
type WriteMark struct {
	Term uint64 // the term this node led when the change was made; 0: no change
	seq  uint64 // the proposal, numbered as Acks.Seq, that carries it
	idx  uint64 // that proposal's raft index, once known
}

// NoteWrite returns the mark of a change a serving leader's host just made (it gave the
// journal a record): the next proposal takes the whole journal, so that proposal carries it.
func (m *Member) NoteWrite() WriteMark { return WriteMark{Term: m.term, seq: m.Acks.Seq + 1} }

// WriteIndex returns the raft index of the entry that holds w's change (0 for none); false
// while that entry is not in this leader's log yet. journaled says the host's store has
// changes not yet proposed.
func (m *Member) WriteIndex(w *WriteMark, journaled bool) (uint64, bool) {
	switch {
	case w.seq == 0:
		return 0, true
	case w.Term != m.term:
		// Made while this node led before: if it was committed, this term's first entry
		// follows it; if not, it was answered -CLUSTERDOWN and may be lost.
		return m.readyIdx, true
	case w.idx != 0:
		return w.idx, true
	case w.seq > m.Acks.Seq:
		if journaled {
			return 0, false // not proposed yet
		}
		w.seq = m.Acks.Seq // its change left nothing to log: what came before it is what it waits for
	}
	if i, ok := m.Acks.Index(w.seq); ok {
		w.idx = i
		return w.idx, true
	}
	if w.seq <= m.Acks.Acked[LevelAll] {
		w.idx = m.all // every voter had it when it was forgotten: every voter's log reaches m.all
		return w.idx, true
	}
	return 0, false
}

// ReplicasHolding is how many voters other than this leader have w's change in their raft
// log (every other voter when there was none).
func (m *Member) ReplicasHolding(w *WriteMark, journaled bool) int64 {
	idx, ok := m.WriteIndex(w, journaled)
	if !ok {
		return 0
	}
	return m.VotersHolding(idx)
}
