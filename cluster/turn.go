package cluster

import (
	"crypto/rand"
	"errors"
	"math"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// A member's turn: raft's Readies handed to the host, as etcdserver's raftNode hands its
// apply routine the committed entries (here on the host's one goroutine, at once).

// Turn runs at every flush of the host, after its Propose: a read barrier is asked for if a
// reply waits on one, the members' reads it holds are stepped once they may be, and raft's
// Readies are handed to h. Storage writes are asynchronous (raft's AsyncStorageWrites):
// appends go to the log writer and answer when durable, committed entries are applied at
// once, so neither waits for the other and a leader goes on replicating while its own
// fsync runs.
func (m *Member) Turn(h Host) {
	if m.IsLeader() {
		m.Reads.Ask(m.rn)
		if m.reready && m.rn.BasicStatus().LeadTransferee == 0 && m.rn.Propose(nil) == nil {
			m.reready = false // its entry, applied, makes this leader ready (applyEntry)
		}
	}
	m.stepHeldReads(h)
	HandleReadies(m.rn, memberReadies{m, h})
	m.received = receivedSnap{} // taken by its append, or refused by raft
	// Committed means on a majority's disks already: QUORUM replies need not wait for this
	// node's own write of the commit index.
	if c := m.rn.BasicStatus().GetCommit(); c > m.commit {
		m.commit = c
	}
	m.updateAcks(h)
}

// Synced takes the log's report that its batches up to seq are durable, and delivers the
// responses of the appends they made durable.
func (m *Member) Synced(seq uint64, h Host) {
	m.St.Synced(seq)
	m.deliverAppends(h)
}

// memberReadies is the member's side of raft's Readies (HandleReadies).
type memberReadies struct {
	m *Member
	h Host
}

func (r memberReadies) SoftState(ss *raft.SoftState) { r.m.softState(r.h, ss) }
func (r memberReadies) Append(msg *raftpb.Message)   { r.m.storageAppend(r.h, msg) }
func (r memberReadies) Apply(msg *raftpb.Message)    { r.m.storageApply(r.h, msg) }
func (r memberReadies) Send(msg *raftpb.Message)     { r.m.send(r.h, msg) }

// ReadState: a read barrier this leader asked for, or this member's own read, has passed.
func (r memberReadies) ReadState(ctx []byte, index uint64) { r.m.Reads.Passed(ctx, index) }

// storageAppend hands one of raft's appends (entries, hard state, a snapshot) to the log
// writer; its responses wait until it is durable.
func (m *Member) storageAppend(h Host, msg *raftpb.Message) {
	m.snapshotData(msg.GetSnapshot())
	durable := m.St.Append(msg, AppendHooks{
		Snapshot: func(snap *raftpb.Snapshot) { m.installSnapshot(h, snap) },
		Entries: func(ents []*raftpb.Entry) {
			m.Fresh.Appended(ents[len(ents)-1].GetIndex()) // a leader's entries end the rule: its log is a prefix of the leader's
			m.applyEarly(h, ents)
			if m.IsLeader() {
				m.Acks.Note(ents, m.term)
			}
		},
		Fail: func(what string, err error) { m.log.Error().Err(err).Msg("cluster: " + what) },
	})
	if durable {
		m.deliverAppends(h)
	}
}

// deliverAppends delivers the responses of the appends the log has made durable, in order.
func (m *Member) deliverAppends(h Host) {
	m.St.Deliver(m.ID, func(r *raftpb.Message) { _ = m.rn.Step(r) }, func(r *raftpb.Message) { m.send(h, r) })
}

// storageApply applies committed entries (at once) and tells raft.
func (m *Member) storageApply(h Host, msg *raftpb.Message) {
	now := m.now().UnixNano()
	for _, e := range msg.GetEntries() {
		if e.GetIndex() <= m.applied {
			continue // a snapshot has it already
		}
		m.applyEntry(h, e, now)
	}
	if !m.IsLeader() || m.reapply {
		h.AppliedBatch() // (a leader reapplying its own entries: they are not new changes to propose)
	}
	for _, r := range msg.GetResponses() {
		_ = m.rn.Step(r)
	}
}

// softState follows role and leader changes.
func (m *Member) softState(h Host, ss *raft.SoftState) {
	was, wasLeader, wasTerm := m.leader, m.IsLeader(), m.term
	m.role, m.leader = ss.RaftState, ss.Lead
	term := m.rn.BasicStatus().GetTerm()
	if wasLeader && (!m.IsLeader() || term != wasTerm) {
		h.Abdicate("leader changed")
	}
	if m.IsLeader() && (!wasLeader || term != wasTerm) {
		m.term, m.ready, m.reready, m.reapply = term, false, false, false // raft appends the term's empty entry
		m.Acks.Lead()
		m.log.Info().Uint64("node_id", m.ID).Uint64("term", term).Msg("cluster: this node leads")
	}
	if m.leader != was && m.leader != 0 {
		m.log.Info().Uint64("leader_id", m.leader).Uint64("term", term).Msg("cluster: leader known")
	}
	h.RoleChanged(was)
}

// updateAcks moves each level's acknowledged proposal to what the indexes now cover.
func (m *Member) updateAcks(h Host) {
	if !m.IsLeader() {
		return
	}
	idx, all := Levels(m.rn, m.ID, m.St.Stable(), m.commit, m.Members.Conf)
	m.all = all
	done := m.Acks.Ack(idx)
	h.Acked() // before the acks forget indexes: what raft learned of the followers may answer blocked WAITs
	m.Acks.Drop(done)
}

// applyEntry applies one committed entry.
func (m *Member) applyEntry(h Host, e *raftpb.Entry, now int64) {
	m.applied = e.GetIndex()
	switch e.GetType() {
	case raftpb.EntryType_EntryConfChange:
		var cc raftpb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			m.log.Error().Err(err).Msg("cluster: bad configuration change")
			return
		}
		m.applyConfChange(h, &cc)
		return
	case raftpb.EntryType_EntryConfChangeV2:
		var cc raftpb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
			m.log.Error().Err(err).Msg("cluster: bad configuration change")
			return
		}
		m.Members.SetConf(m.rn.ApplyConfChange(&cc))
		return
	}
	d := e.GetData()
	if m.IsLeader() && e.GetTerm() == m.term && !(m.reapply && len(d) > 0) {
		if !m.ready && len(d) == 0 {
			m.ready, m.reapply = true, false // this term's first entry (or Unready's): everything before it is applied
			m.readyIdx = e.GetIndex()
			if !m.Secret.Known {
				m.proposeSecret(h)
			}
			m.log.Info().Uint64("index", e.GetIndex()).Msg("cluster: leader ready")
			h.LeaderReady()
		}
		return // this leader's own change: its store has it already
	}
	if len(d) == 0 {
		return
	}
	switch d[0] {
	case EntRecords:
		if Mutant == "apply-uncommitted" && earlyApplied[m][e.GetIndex()] {
			return // the mutant applied it already
		}
		if len(d) >= ProposalHead {
			h.ApplyRecords(d[ProposalHead:], now)
		}
	case EntSecret:
		if k, ok := ParseSecret(d); ok {
			m.Secret = Secret{Known: true, Key: k}
			h.SetSecret(k)
		}
	}
}

// proposeSecret has a new cluster's first leader choose the key-name secret every node uses.
func (m *Member) proposeSecret(h Host) {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("cluster: no random source: " + err.Error())
	}
	if err := m.rn.Propose(SecretEntry(k)); err == nil {
		m.Secret = Secret{Known: true, Key: k}
		h.SetSecret(k)
	}
}

// applyConfChange applies a membership change: raft's configuration, and the peer table.
func (m *Member) applyConfChange(h Host, cc *raftpb.ConfChange) {
	m.Members.Apply(m.rn, cc)
	id := cc.GetNodeId()
	switch cc.GetType() {
	case raftpb.ConfChangeType_ConfChangeAddNode, raftpb.ConfChangeType_ConfChangeAddLearnerNode:
		h.MemberAdded(id, m.Members.Addrs[id])
		// raft takes a snapshot only if its configuration has the member: one taken after
		// this change is what a new member catching up from a snapshot needs.
		m.SnapSoon = true
		m.log.Info().Uint64("node_id", id).Str("addr", m.Members.Addrs[id]).Stringer("change", cc.GetType()).Msg("cluster: member added")
	case raftpb.ConfChangeType_ConfChangeRemoveNode:
		h.MemberRemoved(id)
		m.log.Info().Uint64("node_id", id).Msg("cluster: member removed")
	}
	m.St.writer().SavePeers(m.Members.Addrs)
}

// send hands a message to the host for its link, and tells raft when there is none (and
// how a snapshot's sending ended).
func (m *Member) send(h Host, msg *raftpb.Message) {
	to := msg.GetTo()
	m.stampStatus(msg)
	err := h.Send(to, Message{msg})
	switch {
	case errors.Is(err, ErrUnreachable):
		m.rn.ReportUnreachable(to)
		if msg.GetType() == raftpb.MessageType_MsgSnap {
			m.rn.ReportSnapshot(to, raft.SnapshotFailure)
		}
	case err != nil:
		m.log.Error().Err(err).Msg("cluster: marshal")
	case msg.GetType() == raftpb.MessageType_MsgSnap:
		m.rn.ReportSnapshot(to, raft.SnapshotFinish)
	}
}

// Replay hands the committed state in raft's storage to the host, to rebuild its store
// from: the snapshot's data (restore), then the records of the entries up to the applied
// index (apply).
func (m *Member) Replay(restore func(data []byte), apply func(recs []byte)) {
	snap, err := m.St.Snap()
	if err == nil && !raft.IsEmptySnap(snap) {
		restore(snap.GetData())
	}
	first, _ := m.St.Mem.FirstIndex()
	if m.applied >= first {
		ents, err := m.St.Mem.Entries(first, m.applied+1, math.MaxUint64)
		if err != nil {
			m.log.Error().Err(err).Msg("cluster: rebuilding the store")
		}
		for _, e := range ents {
			if e.GetType() == raftpb.EntryType_EntryNormal && len(e.GetData()) > ProposalHead && e.GetData()[0] == EntRecords {
				apply(e.GetData()[ProposalHead:])
			}
		}
	}
}
