package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/raftlog"
)

// Member is this node's raft member, as etcdserver's raftNode is etcd's: it owns the
// RawNode, raft's storage over the raft log, the proposals and what acknowledges them at
// each consistency level (Acks), read barriers and member reads (Reads), the membership
// (Members), the vote rule of a member that started empty (Fresh), the key-name secret,
// the proposal window and the entries' encoding. It does no I/O of its own but the raft
// log's (whose writer is a goroutine of raftlog) and never touches the store: the host (the
// loop) proposes the records its commands journaled (Propose), steps what its peer links
// carry (Step), ticks it (Tick), and at each turn (Turn) is handed what raft made ready:
// records to apply, messages to send, a snapshot to restore, role changes, and the moment
// acknowledgements moved (Host). Everything runs on the host's one goroutine.
type Member struct {
	ID uint64
	St *Storage // raft's storage: its memory and the raft log on disk

	Members Members // the configuration and the peer addresses
	Acks    Acks    // proposals and what acknowledges them
	Reads   Reads   // read barriers (ReadIndex), and this member's own reads
	Fresh   Fresh   // the vote rule of a member that started empty (fresh.go)
	Secret  Secret  // the key-name secret, once known (replicated)
	DropLog RateLog // raft messages (and link frames) dropped, for the log

	// SnapSoon: the membership changed, so a snapshot is due at the next chance (raft sends
	// a new member only a snapshot whose configuration has it).
	SnapSoon bool

	rn  *raft.RawNode
	log *zerolog.Logger
	now func() time.Time

	role    raft.StateType
	leader  uint64
	term    uint64 // the term this node leads, while it leads
	ready   bool   // leading, and every entry of earlier terms is applied: commands run here
	reready bool   // unready while still leading this term: an empty entry is to be proposed (Unready)
	// reapply says this leader, unready in the term it still leads, rebuilt its store from
	// the committed log: its own entries of the term committed from then on are applied
	// like anyone's, until its empty entry makes it ready again (applyEntry).
	reapply bool
	// transferring says a leadership transfer may be pending (TransferLeader, or a member's
	// MsgTransferLeader stepped): WindowOpen asks raft until it is over.
	transferring bool
	readyIdx     uint64 // the index of this leader's first entry of its term
	loadedTo     uint64 // the commit index found at start: local reads wait until it is applied
	applied      uint64
	commit       uint64
	all          uint64 // the index every voter's log reaches (on a leader)
	snapIndex    uint64 // the last snapshot's index

	// The status page's view of the members (peerstatus.go).
	fsyncMicros uint32                // this member's raft log's mean fsync (µs), from the host
	statusBuf   []byte                // the Context stamped on this member's append responses
	peerStatus  map[uint64]PeerStatus // leader: what each member last reported

	lastProposal int        // the size of this leader's last proposal (WindowOpen)
	heldReads    []heldRead // other members' reads this leader holds (HoldMemberRead)

	installConf *raftpb.ConfState // the configuration of the snapshot the host installs (install.go)
	received    receivedSnap      // the data of a snapshot the leader sent, kept from raft (install.go)
}

// Host is what a member's host (the loop) does for it at its turns.
type Host interface {
	// ApplyRecords applies the records of a committed entry another leader (or this node in
	// an earlier term) proposed; now is the batch's clock.
	ApplyRecords(recs []byte, now int64)
	// AppliedBatch runs after a follower applied a batch of committed entries.
	AppliedBatch()
	// SetSecret adopts the cluster's key-name secret.
	SetSecret(k [32]byte)
	// RestoreSnapshot begins replacing the replicated state by the data of a snapshot the
	// leader sent. The host may restore it a slice at a time, over later turns: the member
	// counts it applied, and raft hears it is, only once the host calls
	// Member.SnapshotInstalled (which it may do before returning). A newer snapshot may
	// come meanwhile: a RestoreSnapshot of it replaces the one in progress.
	RestoreSnapshot(data []byte)
	// MemberAdded and MemberRemoved follow the membership as changes are applied.
	MemberAdded(id uint64, addr string)
	MemberRemoved(id uint64)
	// Abdicate runs when this node stops leading (or leads a new term): what it ran and did
	// not get committed may never be.
	Abdicate(why string)
	// RoleChanged runs at every change of role or leader; oldLeader is the leader before.
	RoleChanged(oldLeader uint64)
	// LeaderReady runs once this leader applied every entry of earlier terms.
	LeaderReady()
	// Acked runs when the acknowledgements moved, before the proposals' indexes they cover
	// are forgotten.
	Acked()
	// Send puts a message on the link to member to; ErrUnreachable when there is no link.
	Send(to uint64, m Message) error
	// Fatal stops the member for err (raft is not driven any more).
	Fatal(err error)
}

// ErrUnreachable is Host.Send's answer when no link to the member is up.
var ErrUnreachable = errors.New("no link to the member")

// ErrMemberState is the error (wrapped) of a member that must not run as it is: it has no
// raft log and was not told to bootstrap a new cluster, or the cluster shows that it lost
// data it had acknowledged.
var ErrMemberState = errors.New("this member must not run as it is")

// Message is a raft message on its way to another member.
type Message struct{ m *raftpb.Message }

// Size is the message's encoded size.
func (x Message) Size() int { return proto.Size(x.m) }

// AppendTo appends the message's encoding (its peer frame's body) to b.
func (x Message) AppendTo(b []byte) ([]byte, error) {
	return proto.MarshalOptions{}.MarshalAppend(b, x.m)
}

// To is the member the message goes to.
func (x Message) To() uint64 { return x.m.GetTo() }

// RateLog lets a line through at most once a second, and counts those it held back.
type RateLog struct {
	last   time.Time
	missed uint64
}

// Allow says whether a line may be logged at now, and how many were held back since the last.
func (r *RateLog) Allow(now time.Time) (missed uint64, ok bool) {
	if now.Sub(r.last) < time.Second {
		r.missed++
		return 0, false
	}
	missed, r.missed, r.last = r.missed, 0, now
	return missed, true
}

// NewMember returns member id, logging to log, with the clock now; Open starts it.
func NewMember(id uint64, log *zerolog.Logger, now func() time.Time) *Member {
	return &Member{ID: id, St: NewStorage(), Members: NewMembers(), log: log, now: now}
}

// Boot is how a member starts when its raft log is empty.
type Boot struct {
	Peers   map[uint64]string // the initial voters (--cluster)
	Join    string            // a member to join through (--join)
	New     bool              // bootstrap a new cluster (--initial-cluster-state new)
	DataDir string            // for the error's text
}

// Open puts what the raft log read back (rs) into raft's storage, has restore fill the store
// from its snapshot, and builds the RawNode: a log read back goes on, an empty one joins
// (joining true) or bootstraps a new cluster, or is refused (ErrMemberState).
func (m *Member) Open(rs *raftlog.RaftState, boot Boot, restore func(data []byte)) (joining bool, err error) {
	for id, a := range boot.Peers {
		m.Members.Addrs[id] = a
	}
	for id, a := range rs.Peers {
		m.Members.Addrs[id] = a
	}
	fresh, err := m.St.Load(rs)
	if err != nil {
		return false, err
	}
	if rs.Snapshot != nil && !raft.IsEmptySnap(rs.Snapshot) {
		restore(rs.Snapshot.GetData())
		m.snapIndex = rs.Snapshot.GetMetadata().GetIndex()
		m.applied = m.snapIndex
		if cs := rs.Snapshot.GetMetadata().GetConfState(); cs != nil {
			m.Members.SetConf(cs)
		}
	}
	if rs.HardState != nil && !raft.IsEmptyHardState(rs.HardState) {
		m.loadedTo = rs.HardState.GetCommit()
	}
	m.rn, err = raft.NewRawNode(RaftConfig(m.ID, m.applied, m.St, Logger{Log: m.log}))
	if err != nil {
		return false, fmt.Errorf("raft: %w", err)
	}
	m.Fresh.On = fresh
	if !fresh && BootstrapOnly(rs.Snapshot, rs.Entries) {
		// It bootstrapped (or restarted after bootstrapping) and no leader's entry ever
		// reached it: as empty as a new member, whatever it held before it lost its data.
		m.Fresh.On = true
		m.Fresh.BootLast, _ = m.St.Mem.LastIndex()
	}
	switch {
	case !fresh:
		m.log.Info().Uint64("node_id", m.ID).Uint64("snapshot_index", m.snapIndex).Int("entries", len(rs.Entries)).
			Uint64("commit", m.loadedTo).Msg("cluster: raft log read back")
	case boot.Join != "":
		m.log.Info().Uint64("node_id", m.ID).Str("join", boot.Join).Msg("cluster: joining")
		return true, nil
	case !boot.New:
		return false, fmt.Errorf("%w: the data directory %s holds no raft log. To bootstrap a new cluster, start every "+
			"member once with --initial-cluster-state new. If this member belonged to a cluster it lost its data: "+
			"remove it (tallyctl cluster remove %d, on a member that has a quorum) and start it with a new --node-id "+
			"and --join HOST:PORT (a member's peer address) instead of --cluster", ErrMemberState, boot.DataDir, m.ID)
	default:
		peers := make([]raft.Peer, 0, len(boot.Peers))
		for id, a := range boot.Peers {
			peers = append(peers, raft.Peer{ID: id, Context: []byte(a)})
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].ID < peers[j].ID })
		if err := m.rn.Bootstrap(peers); err != nil {
			return false, fmt.Errorf("raft bootstrap: %w", err)
		}
		m.Fresh.BootLast = uint64(len(peers))
		m.log.Info().Uint64("node_id", m.ID).Int("voters", len(peers)).Msg("cluster: new cluster bootstrapped")
	}
	return false, nil
}

// The member's state, as the host reads it.

// IsLeader says whether this member leads.
func (m *Member) IsLeader() bool { return m.role == raft.StateLeader }

// Serving says whether commands run on this node's store: it leads and has applied every
// entry of earlier terms.
func (m *Member) Serving() bool { return m.role == raft.StateLeader && m.ready }

// Leader is the leader known (0: none).
func (m *Member) Leader() uint64 { return m.leader }

// Term is the term this node leads, while it leads.
func (m *Member) Term() uint64 { return m.term }

// ReadyIndex is the index of this leader's first entry of its term.
func (m *Member) ReadyIndex() uint64 { return m.readyIdx }

// Applied is the index applied to the host's store.
func (m *Member) Applied() uint64 { return m.applied }

// Commit is the commit index this member knows.
func (m *Member) Commit() uint64 { return m.commit }

// All is the index every voter's log reaches (on a leader, at its last turn).
func (m *Member) All() uint64 { return m.all }

// SnapIndex is the last snapshot's index.
func (m *Member) SnapIndex() uint64 { return m.snapIndex }

// Loaded says whether the store has applied what the log held committed at start (local
// reads wait until it has).
func (m *Member) Loaded() bool { return m.applied >= m.loadedTo }

// LastProposal is the size of this leader's last proposal.
func (m *Member) LastProposal() int { return m.lastProposal }

// Status is a member's raft status, for INFO and the metrics.
type Status struct {
	Role         string // leader, candidate, learner or follower
	Lead         uint64
	Term, Commit uint64
	RaftApplied  uint64 // what raft counts applied (a snapshot being installed is not, yet)
}

// Status returns the member's raft status.
func (m *Member) Status() Status {
	st := m.rn.BasicStatus()
	s := Status{Role: "follower", Lead: st.Lead, Term: st.GetTerm(), Commit: st.GetCommit(), RaftApplied: st.Applied}
	switch {
	case st.RaftState == raft.StateLeader:
		s.Role = "leader"
	case st.RaftState == raft.StateCandidate || st.RaftState == raft.StatePreCandidate:
		s.Role = "candidate"
	case m.Members.IsLearner(m.ID):
		s.Role = "learner"
	}
	return s
}

// RaftTerm is raft's current term.
func (m *Member) RaftTerm() uint64 { return m.rn.BasicStatus().GetTerm() }

// Matches calls f with each member's log match, as the leader knows them (nothing on a
// member that does not lead).
func (m *Member) Matches(f func(id, match uint64)) {
	if m.rn.BasicStatus().RaftState != raft.StateLeader {
		return
	}
	m.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) { f(id, pr.Match) })
}

// VotersHolding is how many voters other than this leader have its log up to idx.
func (m *Member) VotersHolding(idx uint64) int64 {
	var n int64
	m.rn.WithProgress(func(id uint64, typ raft.ProgressType, pr tracker.Progress) { // does not escape: no allocation
		if typ == raft.ProgressTypePeer && id != m.ID && pr.Match >= idx && m.Members.IsVoter(id) {
			n++
		}
	})
	return n
}

// Driving the member.

// Tick advances raft's clock by one tick.
func (m *Member) Tick() { m.rn.Tick() }

// TransferLeader asks the leader to hand its leadership to member id.
func (m *Member) TransferLeader(id uint64) {
	m.transferring = true
	m.rn.TransferLeader(id)
}

// ProposeWindow is how many of this leader's proposals may await their commit: changes
// made meanwhile wait in the store's journal and go, all together, into the next proposal
// once one commits (group commit: one raft round, and one fsync on each member, for
// everything that arrived while the last rounds were in flight).
const ProposeWindow = 2

// SoloProposal is the size from which a proposal awaits its commit alone (a window of one).
// Under load what arrives meanwhile then goes, all together, into the next proposal: fewer,
// larger entries, and each entry costs every member an fsync, a message each way and a few
// wake-ups of the loop (about 500 µs of CPU over three members on a 2-core test machine), which is
// what bounds the rate when members share CPUs. A small proposal (a light load) lets the
// next go at once, for latency.
const SoloProposal = 4 << 10

// WindowOpen says whether a new proposal may go now. Not while this leader hands its
// leadership over: raft drops every proposal then, and a leader that had to abdicate for a
// dropped one would stay raft's leader, unready, for the rest of its term (a transfer to a
// member it cannot reach is abandoned after an election timeout, and the leader goes on).
// The changes wait in the journal meanwhile, their replies held.
func (m *Member) WindowOpen() bool {
	if m.transferring {
		if m.rn.BasicStatus().LeadTransferee != raft.None {
			return false
		}
		m.transferring = false
	}
	w := m.Acks.Window()
	return w == 0 || w < ProposeWindow && m.lastProposal < SoloProposal
}

// ProposalHead is the room a proposal's data begins with (ProposalBuf): its kind and its
// sequence number, stamped by Propose.
const ProposalHead = 9

// ProposalBuf returns b emptied, with the room of a proposal's head: the host appends the
// records after it and hands it to Propose.
func ProposalBuf(b []byte) []byte { return append(b[:0], EntRecords, 0, 0, 0, 0, 0, 0, 0, 0) }

// Propose proposes data (ProposalBuf's head, then records) as one entry, numbered as the
// next proposal, and returns its number. data stays the caller's: raft keeps a copy of the
// entry it appends (raft.appendEntry clones it, raft v3.7.0 raft.go:817), and a member
// proposes only while it leads (proposals are never forwarded: DisableProposalForwarding),
// so no message holds data after the call. An error means raft dropped it.
func (m *Member) Propose(data []byte) (uint64, error) {
	m.Acks.Seq++
	binary.BigEndian.PutUint64(data[1:9], m.Acks.Seq)
	m.lastProposal = len(data)
	return m.Acks.Seq, m.rn.Propose(data)
}

// ProposeLearner proposes id, at peer address addr, as a learner.
func (m *Member) ProposeLearner(id uint64, addr string) error { return ProposeLearner(m.rn, id, addr) }

// ProposeRemove proposes id's removal.
func (m *Member) ProposeRemove(id uint64) error {
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(id)}
	return m.rn.ProposeConfChange(cc)
}

// PromoteLearners makes caught-up learners voters (a serving leader only).
func (m *Member) PromoteLearners() {
	if !m.Serving() {
		return
	}
	m.Members.Promote(m.rn, m.commit, func(id, match uint64) {
		m.log.Info().Uint64("node_id", id).Uint64("match", match).Msg("cluster: promoting a caught-up learner")
	})
}

// AskMemberRead begins a read of this member's own (a SNAPSHOT on a member that does not
// lead) and returns its number.
func (m *Member) AskMemberRead() uint64 { return m.Reads.AskMember(m.rn) }

// Unready ends this node's readiness to serve (it stops leading). A leader that stays leader
// of the same term (its proposal was dropped: raft refuses them while it hands leadership
// over) proposes an empty entry once it can (Turn): applied, it makes it ready again, as the
// empty entry raft appends at the start of a term does. Without it such a leader never
// served again, and its heartbeats kept the others from electing another (the explorer's
// seed 196: a transfer to a member that had just been cut off; WindowOpen now keeps a
// transfer from dropping proposals, and this stays for any other drop). The host rebuilt its
// store from the committed log, so this leader's own entries of the term that commit until
// then are applied as anyone's (reapply), not taken as already in its store.
func (m *Member) Unready() {
	m.ready = false
	m.reready = m.IsLeader()
	m.reapply = m.IsLeader()
}
