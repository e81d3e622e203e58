package cluster

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tallyd/tallyd/raftlog"
)

// Members without the loop: each Member has a fake host that records what it is handed,
// and the links are a queue of encoded messages, stepped as a peer link's frames are
// (Member.Step). The raft logs are real and stepped (raftlog.StepRaftLogs), so a run is the
// same every time.

// fakeHost is a Member's host: it keeps what it is handed.
type fakeHost struct {
	id      uint64
	net     *memberNet
	records [][]byte // the records of the entries applied, in order
	secret  [32]byte
	secrets int
	ready   int // LeaderReady calls
	abdic   int // Abdicate calls
	acked   int // Acked calls
	fatal   error
	// The snapshots the leader sent (RestoreSnapshot); with holdInstall the host does not
	// call SnapshotInstalled at once (as the loop's sliced install), the test does.
	restored    [][]byte
	holdInstall bool
}

func (h *fakeHost) ApplyRecords(recs []byte, now int64) {
	h.records = append(h.records, append([]byte(nil), recs...))
}
func (h *fakeHost) AppliedBatch()        {}
func (h *fakeHost) SetSecret(k [32]byte) { h.secret, h.secrets = k, h.secrets+1 }
func (h *fakeHost) RestoreSnapshot(data []byte) {
	h.restored = append(h.restored, data)
	if !h.holdInstall {
		h.net.ms[h.id-1].SnapshotInstalled()
	}
}
func (h *fakeHost) MemberAdded(id uint64, addr string) {}
func (h *fakeHost) MemberRemoved(id uint64)            {}
func (h *fakeHost) Abdicate(why string)                { h.abdic++ }
func (h *fakeHost) RoleChanged(oldLeader uint64)       {}
func (h *fakeHost) LeaderReady()                       { h.ready++ }
func (h *fakeHost) Acked()                             { h.acked++ }
func (h *fakeHost) Fatal(err error)                    { h.fatal = err }

func (h *fakeHost) Send(to uint64, m Message) error {
	if h.net.cut[to] || h.net.cut[h.id] {
		return ErrUnreachable
	}
	b, err := m.AppendTo(make([]byte, 0, m.Size()))
	if err != nil {
		return err
	}
	h.net.queue = append(h.net.queue, frame{from: h.id, to: to, b: b})
	return nil
}

// frame is a message on a fake link, encoded as a peer link carries it.
type frame struct {
	from, to uint64
	b        []byte
}

// memberNet is N Members, their hosts and the links between them.
type memberNet struct {
	t      *testing.T
	ms     []*Member
	hosts  []*fakeHost
	synced []*atomic.Uint64
	queue  []frame
	cut    map[uint64]bool
}

func newMemberNet(t *testing.T, n int) *memberNet {
	t.Helper()
	raftlog.StepRaftLogs(true)
	t.Cleanup(func() { raftlog.StepRaftLogs(false) })
	net := &memberNet{t: t, cut: map[uint64]bool{}}
	peers := map[uint64]string{}
	for id := uint64(1); id <= uint64(n); id++ {
		peers[id] = fmt.Sprintf("m%d", id)
	}
	clock := func() time.Time { return time.Unix(1700000000, 0) }
	for id := uint64(1); id <= uint64(n); id++ {
		synced := &atomic.Uint64{}
		lg, rs, err := raftlog.OpenRaft(t.TempDir(), func(pr raftlog.RaftProgress) { synced.Store(pr.Synced) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lg.Unstepped(); lg.Close() })
		m := NewMember(id, &nopLog, clock)
		m.St.Log = lg
		joining, err := m.Open(rs, Boot{Peers: peers, New: true}, func([]byte) { t.Fatal("a new member restores no snapshot") })
		if err != nil || joining {
			t.Fatalf("member %d: open: joining %v, %v", id, joining, err)
		}
		net.ms = append(net.ms, m)
		net.hosts = append(net.hosts, &fakeHost{id: id, net: net})
		net.synced = append(net.synced, synced)
	}
	return net
}

// round turns every member (its log writes what it was handed), then delivers the frames.
func (net *memberNet) round() {
	for i, m := range net.ms {
		m.Turn(net.hosts[i])
		m.St.Log.Step()
		m.Synced(net.synced[i].Load(), net.hosts[i])
	}
	q := net.queue
	net.queue = nil
	for _, f := range q {
		if net.cut[f.from] || net.cut[f.to] {
			continue
		}
		if net.ms[f.to-1].Step(f.b, f.from, true, net.hosts[f.to-1]) {
			net.t.Fatalf("member %d dropped the link from %d", f.to, f.from)
		}
	}
}

// until ticks and runs rounds until ok holds; it fails the test after limit ticks.
func (net *memberNet) until(what string, limit int, ok func() bool) {
	net.t.Helper()
	for range limit {
		if ok() {
			return
		}
		for _, m := range net.ms {
			m.Tick()
		}
		net.round()
	}
	if !ok() {
		net.t.Fatalf("%s: not after %d ticks", what, limit)
	}
}

// leader returns the serving leader's index, -1 if none.
func (net *memberNet) leader() int {
	for i, m := range net.ms {
		if m.Serving() && !net.cut[m.ID] {
			return i
		}
	}
	return -1
}

// TestMemberReplicates: three Members elect a leader that becomes ready and chooses the
// key-name secret every member adopts; the records it proposes reach the other members'
// hosts, in order, and not its own (its store has them); its proposals are acknowledged at
// QUORUM and ALL; a member cut off catches up once the cut heals, and WAIT's count of the
// replicas holding a write follows.
func TestMemberReplicates(t *testing.T) {
	net := newMemberNet(t, 3)
	net.until("a ready leader", 200, func() bool { return net.leader() >= 0 })
	l := net.leader()
	lm, lh := net.ms[l], net.hosts[l]
	if lh.ready != 1 || lh.secrets != 1 {
		t.Fatalf("leader: %d LeaderReady, %d secrets", lh.ready, lh.secrets)
	}
	net.until("the secret everywhere", 50, func() bool {
		for _, h := range net.hosts {
			if h.secrets == 0 || h.secret != lh.secret {
				return false
			}
		}
		return true
	})

	// One buffer for every proposal, scribbled over once proposed, as the loop reuses its
	// own: the member does not copy it (raft copies what it keeps), so an entry that held
	// it would apply the scribble.
	var buf []byte
	propose := func(rec string) uint64 {
		t.Helper()
		if !lm.WindowOpen() {
			t.Fatalf("window closed before %q", rec)
		}
		buf = append(ProposalBuf(buf), rec...)
		seq, err := lm.Propose(buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		return seq
	}
	applied := func(except int, want ...string) func() bool {
		return func() bool {
			for i, h := range net.hosts {
				if i == except || net.cut[uint64(i+1)] {
					continue
				}
				if len(h.records) != len(want) {
					return false
				}
				for j, r := range want {
					if !bytes.Equal(h.records[j], []byte(r)) {
						return false
					}
				}
			}
			return true
		}
	}
	s1 := propose("rec-a")
	s2 := propose("rec-b")
	if s2 != s1+1 {
		t.Fatalf("proposals numbered %d then %d", s1, s2)
	}
	net.until("a and b on the followers", 50, applied(l, "rec-a", "rec-b"))
	net.until("b acknowledged at ALL", 50, func() bool { return lm.Acks.Acked[LevelAll] >= s2 })
	if lm.Acks.Acked[LevelQuorum] < s2 || lm.Acks.Acked[LevelOne] < s2 || lm.Acks.Window() != 0 || lh.acked == 0 {
		t.Fatalf("acks %v, window %d, Acked calls %d", lm.Acks.Acked, lm.Acks.Window(), lh.acked)
	}
	if len(lh.records) != 0 {
		t.Fatalf("the leader's host was handed its own records: %q", lh.records)
	}

	f := (l + 1) % 3
	net.cut[uint64(f+1)] = true
	w := lm.NoteWrite() // a change made before the proposal that carries it (WAIT's mark)
	if n := lm.ReplicasHolding(&w, true); n != 0 {
		t.Fatalf("a change not proposed yet held by %d replicas", n)
	}
	s3 := propose("rec-c")
	net.until("c on the connected follower", 50, applied(l, "rec-a", "rec-b", "rec-c"))
	net.until("c held by one replica", 50, func() bool { return lm.ReplicasHolding(&w, false) == 1 })
	if lm.Acks.Acked[LevelQuorum] < s3 {
		t.Fatalf("c not acknowledged at QUORUM with one follower cut off: %v", lm.Acks.Acked)
	}
	if lm.Acks.Acked[LevelAll] >= s3 {
		t.Fatalf("c acknowledged at ALL with a follower cut off: %v", lm.Acks.Acked)
	}
	delete(net.cut, uint64(f+1))
	net.until("c on the member cut off", 100, applied(l, "rec-a", "rec-b", "rec-c"))
	net.until("c acknowledged at ALL", 50, func() bool { return lm.Acks.Acked[LevelAll] >= s3 })
	if n := lm.ReplicasHolding(&w, false); n != 2 {
		t.Fatalf("c held by %d replicas once every member has it", n)
	}
	for i, h := range net.hosts {
		if h.fatal != nil || i != l && h.abdic != 0 {
			t.Fatalf("member %d: fatal %v, %d abdications", i+1, h.fatal, h.abdic)
		}
	}
	// Each follower's status reached the leader with its append responses (the status
	// page's view of the members): what it applied, its commit, its fsync time.
	for i, fm := range net.ms {
		if i == l {
			continue
		}
		fm.SetFsyncMicros(uint32(100 + i))
		propose(fmt.Sprint("rec-status-", i))
		id := uint64(i + 1)
		net.until("the follower's status on the leader", 50, func() bool {
			st := lm.PeerStatus(id)
			return st.FsyncMicros == uint32(100+i) && st.Applied >= fm.Applied() && st.Commit > 0 && !st.At.IsZero()
		})
	}
}

// TestMemberStepRejects: what a link carries that is not a raft message for this member
// from another member drops the link, and raft never sees it.
func TestMemberStepRejects(t *testing.T) {
	net := newMemberNet(t, 3)
	m, h := net.ms[0], net.hosts[0]
	enc := func(msg *raftpb.Message) []byte {
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	hb := func(from, to uint64) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: new(from), To: new(to), Term: new(uint64(1))}
	}
	for _, c := range []struct {
		what string
		b    []byte
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}},
		{"from a node that is not a member", enc(hb(9, 1))},
		{"to another member", enc(hb(2, 3))},
		{"from itself", enc(hb(1, 1))},
		{"a local message", enc(&raftpb.Message{Type: raftpb.MessageType_MsgHup.Enum(), From: new(uint64(2)), To: new(uint64(1))})},
	} {
		if !m.Step(c.b, 2, true, h) {
			t.Errorf("%s: stepped, the link kept", c.what)
		}
	}
	if st := m.Status(); st.Lead != 0 || h.fatal != nil {
		t.Fatalf("raft saw a rejected message: leader %d, fatal %v", st.Lead, h.fatal)
	}
	// A heartbeat whose commit is past this member's log: it lost its data. On a link that
	// proved nothing the link is dropped; on a proved one the member stops.
	lost := hb(2, 1)
	lost.Commit = new(uint64(100))
	if !m.Step(enc(lost), 2, false, h) || h.fatal != nil {
		t.Fatalf("unproved link: fatal %v", h.fatal)
	}
	if m.Step(enc(lost), 2, true, h) || h.fatal == nil {
		t.Fatal("a proved heartbeat past the log did not stop the member")
	}
}

// TestMemberLeaderChange: a leader cut off abdicates (check-quorum) and what it proposed
// meanwhile is never applied anywhere; the new leader's records reach every member, the old
// leader included, once the cut heals; the new leader numbers its proposals on its own.
func TestMemberLeaderChange(t *testing.T) {
	net := newMemberNet(t, 3)
	net.until("a ready leader", 200, func() bool { return net.leader() >= 0 })
	old := net.leader()
	om, oh := net.ms[old], net.hosts[old]
	if _, err := om.Propose(append(ProposalBuf(nil), "rec-a"...)); err != nil {
		t.Fatal(err)
	}
	net.until("a acknowledged at ALL", 50, func() bool { return om.Acks.Acked[LevelAll] >= om.Acks.Seq })

	net.cut[om.ID] = true
	if _, err := om.Propose(append(ProposalBuf(nil), "rec-lost"...)); err != nil {
		t.Fatal(err)
	}
	net.until("a new leader", 200, func() bool { return net.leader() >= 0 && net.leader() != old })
	net.until("the old leader abdicates", 100, func() bool { return oh.abdic > 0 && !om.IsLeader() })
	nl := net.leader()
	nm := net.ms[nl]
	seq, err := nm.Propose(append(ProposalBuf(nil), "rec-b"...))
	if err != nil {
		t.Fatal(err)
	}
	if seq != 1 {
		t.Fatalf("the new leader's first proposal is numbered %d", seq)
	}
	delete(net.cut, om.ID)
	net.until("b everywhere but on its leader", 100, func() bool {
		for i, h := range net.hosts {
			if i != nl && (len(h.records) == 0 || string(h.records[len(h.records)-1]) != "rec-b") {
				return false
			}
		}
		return true
	})
	for i, h := range net.hosts {
		for _, r := range h.records {
			if string(r) == "rec-lost" {
				t.Fatalf("member %d applied what a cut-off leader proposed", i+1)
			}
		}
	}
	if om.Leader() != nm.ID || om.Applied() != nm.Applied() {
		t.Fatalf("old leader: leader %d applied %d; new leader %d applied %d", om.Leader(), om.Applied(), nm.ID, nm.Applied())
	}
}

// TestMemberSnapshotInstallWaits (issue 30, item 7): a member cut off while the leader
// compacted its log is sent the leader's snapshot, its data whole (kept from raft's copies,
// put back for storing). While its host installs it (holdInstall: the loop's install, a
// slice at a time) neither the member nor raft counts it applied, an entry committed after
// it is not handed over, and no snapshot of the member's own is due; once the host says
// it is installed the member has the snapshot's index and the entry follows.
func TestMemberSnapshotInstallWaits(t *testing.T) {
	net := newMemberNet(t, 3)
	net.until("a ready leader", 200, func() bool { return net.leader() >= 0 })
	l := net.leader()
	lm := net.ms[l]
	f := (l + 1) % 3
	fm, fh := net.ms[f], net.hosts[f]
	fh.holdInstall = true
	net.cut[fm.ID] = true
	for i := range 5 {
		if _, err := lm.Propose(append(ProposalBuf(nil), "rec-"+fmt.Sprint(i)...)); err != nil {
			t.Fatal(err)
		}
		net.until("the proposal committed", 50, func() bool { return lm.Acks.Acked[LevelQuorum] >= lm.Acks.Seq })
	}
	idx := lm.Applied()
	data := append(lm.SnapshotHead(nil), "the records"...)
	if taken, err := lm.TakeSnapshot(idx, lm.SnapshotConf(), data); !taken || err != nil {
		t.Fatalf("leader's snapshot at %d: taken %v, %v", idx, taken, err)
	}
	if err := lm.St.Mem.Compact(idx); err != nil {
		t.Fatal(err)
	}
	was := fm.Applied()
	delete(net.cut, fm.ID)
	net.until("the snapshot handed to the follower's host", 100, func() bool { return len(fh.restored) > 0 })
	if !bytes.Equal(fh.restored[0], data) {
		t.Fatalf("the follower's host was handed %q, want %q", fh.restored[0], data)
	}
	if _, err := lm.Propose(append(ProposalBuf(nil), "rec-after"...)); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		for _, m := range net.ms {
			m.Tick()
		}
		net.round()
		if fm.Installing() != idx || fm.Applied() != was || fm.Status().RaftApplied >= idx || fm.SnapshotDue(0, false) {
			t.Fatalf("while installing: installing %d (want %d), applied %d (was %d), raft's applied %d, snapshot due %v",
				fm.Installing(), idx, fm.Applied(), was, fm.Status().RaftApplied, fm.SnapshotDue(0, false))
		}
		for _, r := range fh.records {
			if string(r) == "rec-after" {
				t.Fatal("an entry committed after the snapshot was applied before it was installed")
			}
		}
	}
	if lm.Acks.Acked[LevelQuorum] < lm.Acks.Seq {
		t.Fatal("the leader's proposal was not committed meanwhile")
	}
	if s, _ := fm.St.Mem.Snapshot(); s.GetMetadata().GetIndex() != idx || len(s.GetData()) != 0 {
		t.Fatalf("raft's memory has the snapshot at %d with %d bytes; want its metadata alone", s.GetMetadata().GetIndex(), len(s.GetData()))
	}
	fm.SnapshotInstalled()
	if fm.Applied() != idx || fm.SnapIndex() != idx || fm.Installing() != 0 {
		t.Fatalf("installed: applied %d, snapshot %d, installing %d; want %d", fm.Applied(), fm.SnapIndex(), fm.Installing(), idx)
	}
	net.until("the entry after the snapshot applied", 50, func() bool {
		return len(fh.records) > 0 && string(fh.records[len(fh.records)-1]) == "rec-after"
	})
	if len(fh.restored) != 1 || fh.fatal != nil {
		t.Fatalf("%d snapshots handed over, fatal %v", len(fh.restored), fh.fatal)
	}
}

// TestMemberUnreadyLeaderRecovers: a leader that had to give up serving while raft keeps it
// leader of the same term (the host abdicated, rebuilt its store from the committed log and
// called Unready: a dropped proposal) is ready again once an empty entry of its own is
// applied, and the entries it had proposed before, committed after the rebuild, are applied
// by its host like anyone's (its rebuilt store lacks them), not skipped as its own.
func TestMemberUnreadyLeaderRecovers(t *testing.T) {
	net := newMemberNet(t, 3)
	net.until("a ready leader", 200, func() bool { return net.leader() >= 0 })
	l := net.leader()
	lm, lh := net.ms[l], net.hosts[l]
	for i := range net.ms {
		if i != l {
			net.cut[uint64(i+1)] = true
		}
	}
	if _, err := lm.Propose(append(ProposalBuf(nil), "rec-inflight"...)); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		net.round()
	}
	lm.Unready() // as the loop's abdicate does, having rebuilt its store from the committed log
	if lm.Serving() {
		t.Fatal("serving after Unready")
	}
	for i := range net.ms {
		delete(net.cut, uint64(i+1))
	}
	net.until("the leader ready again", 200, func() bool { return lm.Serving() })
	if lh.ready != 2 || net.leader() != l {
		t.Fatalf("LeaderReady %d times, leader %d (was %d)", lh.ready, net.leader()+1, l+1)
	}
	got := 0
	for _, r := range lh.records {
		if string(r) == "rec-inflight" {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("the leader's host applied the entry proposed before the rebuild %d times, want once: %q", got, lh.records)
	}
}
