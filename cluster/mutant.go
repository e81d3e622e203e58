package cluster

import "go.etcd.io/raft/v3/raftpb"

// Mutant names a bug planted on purpose, to prove that the loop's explorer finds it
// (loop/explore_mutant_test.go): set only by tests, "" in every real run. Each name is
// checked at one point of the code, which says what the bug would be.
var Mutant string

// earlyApplied is what the "apply-uncommitted" mutant applied of a member's entries as
// they were appended, before they committed (by member, then index).
var earlyApplied = map[*Member]map[uint64]bool{}

// applyEarly is the "apply-uncommitted" mutant: a follower applies entries as they are
// appended, before they commit (an entry a new leader overwrites stays applied).
func (m *Member) applyEarly(h Host, ents []*raftpb.Entry) {
	if Mutant != "apply-uncommitted" || m.IsLeader() {
		return
	}
	if earlyApplied[m] == nil {
		earlyApplied[m] = map[uint64]bool{}
	}
	now := m.now().UnixNano()
	for _, e := range ents {
		if d := e.GetData(); e.GetType() == raftpb.EntryType_EntryNormal && len(d) > ProposalHead && d[0] == EntRecords &&
			e.GetIndex() > m.applied && !earlyApplied[m][e.GetIndex()] {
			earlyApplied[m][e.GetIndex()] = true
			h.ApplyRecords(d[ProposalHead:], now)
		}
	}
}
