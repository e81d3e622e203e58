package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/cluster"
)

// The loop's raft-level scenarios (loop/*_sim_test.go), run against Members without the
// loop. Each prints the simulation's trace when it fails.

const (
	one    = cluster.LevelOne
	quorum = cluster.LevelQuorum
	all    = cluster.LevelAll
)

// newSim starts a simulation for t, closed (its trace printed on failure) when t ends.
func newSim(t *testing.T, opt Options) *Sim {
	t.Helper()
	opt.Trace = true
	s := New(opt)
	t.Cleanup(func() {
		if t.Failed() {
			lines := s.Lines()
			if len(lines) > 400 {
				lines = lines[len(lines)-400:]
			}
			t.Logf("trace (the last 400 lines):\n%s", strings.Join(lines, "\n"))
		}
		if len(s.Failures) > 0 && !t.Failed() {
			t.Errorf("failures in the members: %v", s.Failures)
		}
		s.Close()
	})
	return s
}

// elect runs until a leader serves and everyone follows it.
func elect(t *testing.T, s *Sim) uint64 {
	t.Helper()
	l := s.Elect(10 * time.Second)
	if l == 0 {
		var st []string
		for _, n := range s.Nodes() {
			st = append(st, n.State())
		}
		t.Fatalf("no leader within 10 s: %v", st)
	}
	return l
}

// electOther runs until a leader other than old serves.
func electOther(t *testing.T, s *Sim, old uint64) uint64 {
	t.Helper()
	if !s.RunUntil(func() bool { l := s.Leader(); return l != 0 && l != old && s.reaches(s.Node(l)) }, 10*time.Second) {
		t.Fatalf("no leader other than m%d within 10 s", old)
	}
	return s.Leader()
}

// do runs an operation and fails the test unless it succeeds.
func do(t *testing.T, s *Sim, id uint64, kind Kind, key, value string, lvl cluster.Level) *Op {
	t.Helper()
	op := s.Do(id, kind, key, value, lvl)
	if !op.OK() {
		t.Fatalf("%s", op)
	}
	return op
}

// incrs runs n INCRs of key at QUORUM on member id.
func incrs(t *testing.T, s *Sim, id uint64, key string, n int) {
	t.Helper()
	for range n {
		do(t, s, id, Incr, key, "", quorum)
	}
}

var seeds = []uint64{1, 5, 7}

// TestElection (loop: TestSimElection): three members elect a leader everyone follows; a
// second of heartbeats on a healthy cluster changes nothing.
func TestElection(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			term := s.Node(l).M.Term()
			s.Run(time.Second)
			if s.Leader() != l || s.Node(l).M.Term() != term {
				t.Fatalf("seed %d: leadership moved on a healthy cluster: %s", seed, s.Node(l).State())
			}
		})
	}
}

// TestLeaderCrashKeepsAcknowledgedWrites (loop: TestSimLeaderKillKeepsAcknowledgedWrites):
// 50 INCRs acknowledged at QUORUM survive the leader's crash; the old leader restarts on its
// disk and catches up.
func TestLeaderCrashKeepsAcknowledgedWrites(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			incrs(t, s, l, "n", 50)
			s.Crash(l)
			n := electOther(t, s, l)
			if op := do(t, s, n, Get, "n", "", quorum); op.Out != "50" {
				t.Fatalf("seed %d: after m%d crashed, m%d reads n = %q; 50 INCRs were acknowledged", seed, l, n, op.Out)
			}
			if err := s.Restart(l); err != nil {
				t.Fatal(err)
			}
			if !s.RunUntil(func() bool { return s.Node(l).Model.Vals["n"] == "50" }, 5*time.Second) {
				t.Fatalf("seed %d: the old leader restarted holds n = %q", seed, s.Node(l).Model.Vals["n"])
			}
		})
	}
}

// TestLockSurvivesFailover (loop: TestSimYoungLockSurvivesFailover): A's lock acknowledged
// at QUORUM by the leader outlives the leader (crashed, or cut off): B is refused it by the
// new leader; and the new leader's tokens are above A's (the ceiling was replicated with the
// grant).
func TestLockSurvivesFailover(t *testing.T) {
	for _, isolate := range []bool{false, true} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("isolate=%v/seed%d", isolate, seed), func(t *testing.T) {
				s := newSim(t, Options{Seed: seed})
				l := elect(t, s)
				a := do(t, s, l, Acquire, "k", "A", quorum)
				if !a.Granted {
					t.Fatalf("A's lock on the leader: %s", a)
				}
				s.Run(time.Duration(s.Rng.Int64N(int64(500 * time.Millisecond))))
				if isolate {
					s.Partition(l)
				} else {
					s.Crash(l)
				}
				n := electOther(t, s, l)
				if b := do(t, s, n, Acquire, "k", "B", quorum); b.Granted {
					t.Fatalf("m%d granted k to B while A holds it from m%d: %s", n, l, b)
				}
				if c := do(t, s, n, Acquire, "k2", "B", quorum); !c.Granted || c.Token <= a.Token {
					t.Fatalf("a grant on the new leader m%d: %s; A's token was %d", n, c, a.Token)
				}
				if err := s.CheckLocks(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestLockOnIsolatedLeader (loop: TestSimLockOnIsolatedLeader): a LOCK sent to a leader cut
// off is never granted (the grant cannot be replicated): it fails, and B gets the lock on the
// majority's side.
func TestLockOnIsolatedLeader(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			s.Partition(l)
			a := s.Do(l, Acquire, "k", "A", quorum)
			if a.OK() {
				t.Fatalf("seed %d: A's lock on the isolated leader m%d: %s", seed, l, a)
			}
			n := electOther(t, s, l)
			if b := do(t, s, n, Acquire, "k", "B", quorum); !b.Granted {
				t.Fatalf("seed %d: B's lock on the majority's side (A was never granted k): %s", seed, b)
			}
		})
	}
}

// TestDeposedLeader (loop: TestSimDeposedLeader): the leader L loses one follower; the
// other's answers come later and later (L keeps believing it leads: check-quorum is
// satisfied); L has a proposal in flight; then L is cut off, and the followers elect N.
// Through N, B writes x=new and takes k. A, on L at QUORUM, then reads x and locks k: it
// must never read "old" nor be granted k (a read barrier begun after its command proves L
// no longer leads).
func TestDeposedLeader(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 3 * time.Second} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("delay%v/seed%d", d, seed), func(t *testing.T) {
				s := newSim(t, Options{Seed: seed, Tick: 100 * time.Millisecond, Timeout: 2 * time.Second})
				l := elect(t, s)
				fs := s.Others(l)
				f1, f2 := fs[0], fs[1]
				do(t, s, l, Put, "x", "old", quorum)
				s.Cut(l, f1)
				for i := 1; i <= 20; i++ { // f2's answers come later and later, but keep coming
					s.Delay(f2, l, d*time.Duration(i)/20)
					s.Run(d / 10)
				}
				if s.Leader() != l {
					t.Fatalf("m%d no longer leads before the proposal: %s", l, s.Node(l).State())
				}
				s.Put(l, "y", "1", quorum) // L's proposal in flight
				s.Run(5*time.Millisecond + time.Duration(s.Rng.Int64N(int64(20*time.Millisecond))))
				s.Hold(l, f2) // L is cut off: what it sends goes nowhere
				n := electOther(t, s, l)
				do(t, s, n, Put, "x", "new", quorum)
				if b := do(t, s, n, Acquire, "k", "B", quorum); !b.Granted {
					t.Fatalf("B's lock through the new leader m%d: %s", n, b)
				}
				g := s.Get(l, "x", quorum)
				k := s.Lock(l, "k", "A", quorum)
				s.Wait(g, 2*d)
				s.Wait(k, 2*d)
				if g.OK() && g.Out == "old" {
					t.Errorf("A read x = old on the deposed leader m%d after B's x = new was acknowledged by m%d: %s", l, n, g)
				}
				if k.OK() && k.Granted {
					t.Errorf("the deposed leader m%d granted k to A after m%d granted it to B: %s", l, n, k)
				}
				if err := s.CheckLinearizable(5 * time.Second); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestWipedMemberCannotElect (loop: TestSimWipedMemberCannotElect): A leads while B is down;
// 200 INCRs are acknowledged by A and C. A and C crash, C's disk is wiped. B and C restart
// (C with --initial-cluster-state new). C, empty, must not help B lead: every read at QUORUM
// answers 200 or fails. Once A is back, it is 200.
func TestWipedMemberCannotElect(t *testing.T) {
	for _, seed := range []uint64{5, 7} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			a := elect(t, s)
			rest := s.Others(a)
			b, w := rest[0], rest[1]
			s.Crash(b)
			const n = 200
			incrs(t, s, a, "n", n)
			s.Crash(a)
			s.Crash(w)
			s.Wipe(w)
			if err := s.Restart(b); err != nil {
				t.Fatal(err)
			}
			if err := s.Restart(w); err != nil {
				t.Fatal(err)
			}
			check := func(phase string) (saw bool) {
				for _, id := range []uint64{a, b, w} { // the loop forwards to the leader: here each is asked

					if !s.Node(id).Up {
						continue
					}
					op := s.Do(id, Get, "n", "", quorum)
					switch {
					case op.OK() && op.Out == strconv.Itoa(n):
						saw = true
					case op.OK():
						t.Fatalf("seed %d, %s: GET n at QUORUM on m%d: %s; %d INCRs were acknowledged", seed, phase, id, op, n)
					}
				}
				return saw
			}
			for range 10 {
				s.Run(500 * time.Millisecond)
				check("A away")
			}
			if err := s.Restart(a); err != nil {
				t.Fatal(err)
			}
			ok := false
			for i := 0; i < 20 && !ok; i++ {
				s.Run(500 * time.Millisecond)
				ok = check("A back")
			}
			if !ok {
				t.Fatalf("seed %d: A is back and GET n never answered %d", seed, n)
			}
		})
	}
}

// TestWipedMemberExistingRefuses (loop: TestSimWipedMemberExistingRefuses): a wiped member
// restarted without --initial-cluster-state new refuses to start, and says how to come back.
func TestWipedMemberExistingRefuses(t *testing.T) {
	s := newSim(t, Options{Seed: 1})
	l := elect(t, s)
	w := s.Others(l)[0]
	do(t, s, l, Put, "x", "1", quorum)
	s.Crash(w)
	s.Wipe(w)
	err := s.RestartExisting(w)
	if !errors.Is(err, cluster.ErrMemberState) || !strings.Contains(err.Error(), "--initial-cluster-state") {
		t.Fatalf("m%d restarted on an empty disk without --initial-cluster-state new: %v", w, err)
	}
}

// TestWipedMemberWithLeaderUp (loop: TestSimWipedMemberWithLeaderUp, TestSimWipedMemberInsecure):
// a wiped member comes back (--initial-cluster-state new, or --join under its old id) while
// the leader is up: the leader believes it holds entries it lost. With links that prove who
// sends, it stops (ErrMemberState), never panicking; without, a heartbeat could be forged, so
// it only drops the link. Either way reads through it never answer stale data, and the
// leader goes on serving.
func TestWipedMemberWithLeaderUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		join     bool
		insecure bool
	}{{"new", false, false}, {"join", true, false}, {"insecure", false, true}} {
		for _, seed := range []uint64{5, 7} {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				s := newSim(t, Options{Seed: seed, Insecure: tc.insecure})
				l := elect(t, s)
				w := s.Others(l)[0]
				const n = 60
				incrs(t, s, l, "n", n)
				s.Crash(w)
				s.Wipe(w)
				var err error
				if tc.join {
					err = s.RestartJoin(w)
				} else {
					err = s.Restart(w)
				}
				if err != nil {
					t.Fatal(err)
				}
				for range 6 {
					s.Run(500 * time.Millisecond)
					if s.Node(w).Up {
						if op := s.Do(w, Get, "n", "", quorum); op.OK() && op.Out != strconv.Itoa(n) {
							t.Fatalf("GET n at QUORUM through the wiped member m%d: %s", w, op)
						}
					}
				}
				m := s.Node(w)
				switch {
				case tc.insecure && !m.Up:
					t.Fatalf("the wiped member m%d stopped on an unauthenticated heartbeat: %v", w, m.Fatal)
				case tc.insecure && m.LinksDropped == 0:
					t.Fatalf("the wiped member m%d never dropped the leader's link", w)
				case !tc.insecure && (m.Up || !errors.Is(m.Fatal, cluster.ErrMemberState)):
					t.Fatalf("the wiped member m%d: %s; it must stop when the leader shows it lost its data", w, m.State())
				}
				if op := do(t, s, l, Get, "n", "", quorum); op.Out != strconv.Itoa(n) {
					t.Fatalf("GET n on the leader m%d: %s", l, op)
				}
			})
		}
	}
}

// TestNewClusterLosesFirstLeaderEarly (loop: TestSimNewClusterLosesFirstLeaderEarly): a new
// cluster's first leader is lost right after its election, before its followers heard its
// first entry commit: they started empty and must still elect one of them.
func TestNewClusterLosesFirstLeaderEarly(t *testing.T) {
	for _, isolate := range []bool{false, true} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
				s := newSim(t, Options{Seed: seed})
				if !s.RunUntil(func() bool {
					for _, n := range s.Nodes() {
						if n.M.IsLeader() {
							return true
						}
					}
					return false
				}, 10*time.Second) {
					t.Fatal("no first leader")
				}
				var l uint64
				for _, n := range s.Nodes() {
					if n.M.IsLeader() {
						l = n.ID
					}
				}
				if isolate {
					s.Partition(l)
				} else {
					s.Crash(l)
				}
				n := electOther(t, s, l)
				do(t, s, n, Put, "x", "1", quorum)
			})
		}
	}
}

// TestLockSurvivesLeaderChange (loop: TestSimMutexSurvivesLeaderChange, at the raft level):
// A's lock outlives a leadership transfer, or a blip of its member's links: B cannot release
// it, A can, and B takes it then.
func TestLockSurvivesLeaderChange(t *testing.T) {
	for _, blip := range []bool{false, true} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
				s := newSim(t, Options{Seed: seed})
				l := elect(t, s)
				g := s.Others(l)[0]
				do(t, s, l, Acquire, "m", "A", quorum)
				s.Run(time.Duration(s.Rng.Int64N(int64(300 * time.Millisecond))))
				if blip {
					s.Partition(l)
					s.Run(300 * time.Millisecond)
					s.Heal()
				} else {
					s.Transfer(g)
					if !s.RunUntil(func() bool { return s.Leader() == g }, 5*time.Second) {
						t.Fatalf("seed %d: leadership did not move to m%d", seed, g)
					}
				}
				n := elect(t, s)
				if op := do(t, s, n, Release, "m", "B", quorum); op.Granted {
					t.Fatalf("seed %d: B released A's lock: %s", seed, op)
				}
				if op := do(t, s, n, Release, "m", "A", quorum); !op.Granted {
					t.Fatalf("seed %d: A's release after the leader change: %s", seed, op)
				}
				if op := do(t, s, n, Acquire, "m", "B", quorum); !op.Granted {
					t.Fatalf("seed %d: B's lock after A's release: %s", seed, op)
				}
			})
		}
	}
}

// TestAckLevels: a reply waits for its level. With one follower cut off, a write at ALL is
// not acknowledged (it fails at the timeout, outcome unknown), at QUORUM and ONE it is. With
// the leader cut off, a write at ONE is acknowledged once on its disk, at QUORUM it is not.
// The replies at ALL go once the follower is back.
func TestAckLevels(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			f := s.Others(l)[0]
			s.Partition(f)
			allOp := s.Incr(l, "a", all)
			do(t, s, l, Incr, "q", "", quorum)
			do(t, s, l, Incr, "o", "", one)
			if allOp.Done {
				t.Fatalf("seed %d: a write at ALL acknowledged with m%d cut off: %s", seed, f, allOp)
			}
			s.Heal()
			if !s.Wait(allOp, 2*time.Second) || !allOp.OK() {
				t.Fatalf("seed %d: the write at ALL once m%d is back: %s", seed, f, allOp)
			}
			s.Partition(l)
			o := s.Do(l, Incr, "o", "", one)
			q := s.Do(l, Incr, "q", "", quorum)
			if !o.OK() || o.Out != "2" {
				t.Fatalf("seed %d: a write at ONE on the cut-off leader: %s", seed, o)
			}
			if q.OK() || !q.Unknown {
				t.Fatalf("seed %d: a write at QUORUM on the cut-off leader: %s", seed, q)
			}
		})
	}
}

// TestProposalWindow (loop: TestSimProposalWindow): a large proposal awaits its commit
// alone, and what arrives meanwhile goes into the next one; a small one lets the next go at
// once. Every write is acknowledged either way.
func TestProposalWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		window uint64
	}{{"large first proposal", cluster.SoloProposal, 1}, {"small first proposal", 10, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Options{Seed: 25})
			l := elect(t, s)
			m := s.Node(l).M
			seq0 := m.Acks.Seq
			a := s.Put(l, "a", strings.Repeat("v", tc.size), quorum)
			b := s.Incr(l, "b", quorum)
			c := s.Incr(l, "c", quorum)
			s.Run(50 * time.Microsecond) // all ran; nothing can commit yet
			if got, w := m.Acks.Seq-seq0, m.Acks.Window(); got != tc.window || w != tc.window {
				t.Fatalf("%d proposals made, %d awaiting their commit; want %d", got, w, tc.window)
			}
			for _, op := range []*Op{a, b, c} {
				if !s.Wait(op, time.Second) || !op.OK() {
					t.Fatalf("%s", op)
				}
			}
			if err := s.Settle(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			if err := s.CheckConverged(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestTokensGrowAcrossFailovers: fencing tokens come from a counter whose ceiling is
// reserved in the log with the grants: through three leaders lost one after another (one a
// crash that loses what its disk had not made durable), every grant's token is above every
// token granted before.
func TestTokensGrowAcrossFailovers(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed, FenceBlock: 3})
			l := elect(t, s)
			var last uint64
			for round := range 3 {
				for i := range 5 {
					op := do(t, s, l, Acquire, fmt.Sprintf("k%d-%d", round, i), "A", quorum)
					if op.Token <= last {
						t.Fatalf("seed %d: %s after a token %d", seed, op, last)
					}
					last = op.Token
				}
				if round == 1 {
					s.CrashTorn(l)
				} else {
					s.Crash(l)
				}
				n := electOther(t, s, l)
				if err := s.Restart(l); err != nil {
					t.Fatal(err)
				}
				l = n
			}
		})
	}
}

// TestSnapshotInstall: a member cut off while the leader compacts its log catches up from a
// snapshot, installed over several turns (InstallDelay): meanwhile raft does not count it
// applied, an entry committed after it waits, and the member does not campaign; once it is
// in, the member has every key and the write made during the install.
func TestSnapshotInstall(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed, SnapshotEntries: 20, InstallDelay: 300 * time.Millisecond})
			l := elect(t, s)
			f := s.Others(l)[0]
			s.Partition(f)
			for i := range 60 {
				do(t, s, l, Put, "k"+strconv.Itoa(i), "v", quorum)
			}
			lm := s.Node(l).M
			if !s.RunUntil(func() bool { return lm.SnapIndex() >= 60 }, 5*time.Second) {
				t.Fatalf("seed %d: the leader took no snapshot (at %d)", seed, lm.SnapIndex())
			}
			if err := lm.St.Mem.Compact(lm.SnapIndex()); err != nil { // it can send only the snapshot
				t.Fatal(err)
			}
			fn := s.Node(f)
			s.Heal()
			if !s.RunUntil(func() bool { return fn.M.Installing() != 0 }, 5*time.Second) {
				t.Fatalf("seed %d: m%d received no snapshot (applied %d)", seed, f, fn.M.Applied())
			}
			was := fn.M.Applied()
			w := s.Put(l, "during", "1", quorum)
			s.Run(200 * time.Millisecond)
			if fn.M.Applied() != was || fn.M.Status().RaftApplied != was || fn.Model.Vals["during"] != "" {
				t.Fatalf("seed %d: m%d applied %d (raft %d) while installing; it had %d", seed, f, fn.M.Applied(), fn.M.Status().RaftApplied, was)
			}
			if !w.OK() {
				t.Fatalf("seed %d: a write while m%d installs: %s", seed, f, w)
			}
			if !s.RunUntil(func() bool { return fn.Model.Vals["during"] == "1" }, 5*time.Second) {
				t.Fatalf("seed %d: m%d after the install: applied %d, %d keys", seed, f, fn.M.Applied(), len(fn.Model.Vals))
			}
			if len(fn.Model.Vals) != 61 || fn.Installs != 1 || fn.M.Status().Term != lm.Status().Term {
				t.Fatalf("seed %d: m%d has %d keys after %d installs, term %d (the leader's %d)", seed, f, len(fn.Model.Vals),
					fn.Installs, fn.M.Status().Term, lm.Status().Term)
			}
		})
	}
}

// TestMembership: a fourth member joins through the leader on an empty disk, catches up
// (from a snapshot once the log is compacted) and is promoted to voter; a member is removed
// and the others go on; the new member may lead.
func TestMembership(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed, SnapshotEntries: 20})
			l := elect(t, s)
			for i := range 50 {
				do(t, s, l, Put, "k"+strconv.Itoa(i), "v", quorum)
			}
			lm := s.Node(l).M
			if !s.RunUntil(func() bool { return lm.SnapIndex() >= 50 }, 5*time.Second) {
				t.Fatalf("seed %d: the leader took no snapshot", seed)
			}
			_ = lm.St.Mem.Compact(lm.SnapIndex())
			id, err := s.Add()
			if err != nil {
				t.Fatal(err)
			}
			nn := s.Node(id)
			if !s.RunUntil(func() bool { return lm.Members.IsVoter(id) && nn.Model.Vals["k49"] == "v" }, 10*time.Second) {
				t.Fatalf("seed %d: m%d joined: voter %v, %d keys (%s)", seed, id, lm.Members.IsVoter(id), len(nn.Model.Vals), nn.State())
			}
			if nn.Installs == 0 {
				t.Fatalf("seed %d: m%d caught up without the snapshot", seed, id)
			}
			gone := s.Others(l, id)[0]
			if err := s.Remove(gone); err != nil {
				t.Fatal(err)
			}
			if !s.RunUntil(func() bool { return !lm.Members.IsMember(gone) && !nn.M.Members.IsMember(gone) }, 5*time.Second) {
				t.Fatalf("seed %d: m%d not removed", seed, gone)
			}
			s.Crash(gone)
			do(t, s, l, Put, "after", "1", quorum)
			s.Crash(l) // the new member and the last of the first three elect a leader
			n := electOther(t, s, l)
			if op := do(t, s, n, Get, "after", "", quorum); op.Out != "1" {
				t.Fatalf("seed %d: after the removal and a crash, m%d reads %s", seed, n, op)
			}
		})
	}
}

// TestWaitReplicas (loop: TestSimWaitLeader, the raft part): WAIT's count of the voters that
// hold a write follows what the followers' logs hold: both, then one while a follower gets
// nothing from the leader, then both once it is back; a client that wrote nothing gets
// every voter.
func TestWaitReplicas(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			f := s.Others(l)
			w := do(t, s, l, Put, "k", "v1", quorum)
			if !s.RunUntil(func() bool { return s.Replicas(w) == 2 }, time.Second) {
				t.Fatalf("a write with every link up is held by %d replicas", s.Replicas(w))
			}
			s.Hold(l, f[1])
			w = do(t, s, l, Put, "k", "v2", quorum)
			s.Run(300 * time.Millisecond)
			if got := s.Replicas(w); got != 1 {
				t.Fatalf("a write with m%d held is held by %d replicas, want 1", f[1], got)
			}
			if r := do(t, s, l, Get, "k", "", quorum); s.Replicas(r) != 2 {
				t.Fatalf("a read (no write) counts %d replicas, want every other voter", s.Replicas(r))
			}
			s.Heal()
			if !s.RunUntil(func() bool { return s.Replicas(w) == 2 }, time.Second) {
				t.Fatalf("once m%d's link is back the write is held by %d replicas", f[1], s.Replicas(w))
			}
		})
	}
}

// TestTransferToCutMember: a leadership transfer to a member that cannot be reached is
// aborted after an election timeout, and the leader goes on serving. A write sent meanwhile
// waits for it and is then acknowledged. Before, raft dropped the write's proposal (it takes
// none while a transfer is pending), the loop abdicated for it, and the leader, still raft's
// leader in the same term, never became ready again: every later command answered
// CLUSTERDOWN (found by the simulator, seed 1).
func TestTransferToCutMember(t *testing.T) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			s := newSim(t, Options{Seed: seed})
			l := elect(t, s)
			f := s.Others(l)[0]
			do(t, s, l, Put, "x", "1", quorum)
			s.Partition(f)
			s.Transfer(f)
			do(t, s, l, Put, "x", "2", quorum)
			s.Run(2 * time.Second)
			if s.Leader() != l || !s.Node(l).M.Serving() {
				t.Fatalf("seed %d: after the transfer to cut-off m%d was abandoned, m%d: leader %v, serving %v",
					seed, f, l, s.Leader() == l, s.Node(l).M.Serving())
			}
			do(t, s, l, Put, "x", "3", quorum)
			if op := do(t, s, l, Get, "x", "", quorum); op.Out != "3" {
				t.Fatalf("seed %d: x = %q after the writes, want 3", seed, op.Out)
			}
		})
	}
}
