package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/cluster"
)

// runSeed runs a random history of seed on n members (RunRandom, faults on) and returns the
// simulation, closed, and what the checkers said.
func runSeed(n int, seed uint64, trace bool) (*Sim, error) {
	return runOpts(Options{Nodes: n, Seed: seed, Trace: trace})
}

// runOpts runs a random history with opt (faults on).
func runOpts(opt Options) (*Sim, error) {
	s := New(opt)
	defer s.Close()
	return s, s.RunRandom(Random{Faults: true})
}

// failSeed reports a failed seed: it replays it with the trace kept (the same run: its hash
// must be the same) and prints the trace's end and the command that replays it.
func failSeed(t *testing.T, n int, seed uint64, first *Sim, err error) {
	t.Helper()
	again, err2 := runSeed(n, seed, true)
	lines := again.Lines()
	if env := os.Getenv("TALLYD_SIM_TRACE"); env == "" && len(lines) > 300 {
		lines = lines[len(lines)-300:]
	}
	t.Logf("trace (TALLYD_SIM_TRACE=1 for all of it):\n%s", strings.Join(lines, "\n"))
	if again.Hash() != first.Hash() || fmt.Sprint(err2) != fmt.Sprint(err) {
		t.Errorf("the replay differs: hash %x then %x, %v then %v", first.Hash(), again.Hash(), err, err2)
	}
	t.Fatalf("%d members, seed %d: %v\nreplay: go test ./cluster/sim -run 'TestRandomSeeds/n%d/seed%d$' -v", n, seed, err, n, seed)
}

// TestRandomSeeds: random histories of clients and faults (partitions, one-way loss, delays,
// crashes that lose what was not durable, torn tails) on 3 and 5 members pass every checker:
// keys linearizable, a lock held by one client at a time with growing tokens, no
// acknowledged increment lost, members converged.
func TestRandomSeeds(t *testing.T) {
	div := uint64(1)
	if raceEnabled {
		div = 5 // 8 and 2 seeds: the race detector finds nothing more in more of them (one goroutine)
	}
	three, five := uint64(40), uint64(10)
	if n, err := strconv.ParseUint(os.Getenv("TALLYD_SIM_SEEDS"), 10, 64); err == nil && n > 0 {
		three, five = n, n/4 // TALLYD_SIM_SEEDS=N: N seeds on 3 members and N/4 on 5
	}
	for _, tc := range []struct {
		n     int
		seeds uint64
	}{{3, three}, {5, five}} {
		for seed := uint64(1); seed <= tc.seeds/div; seed++ {
			t.Run(fmt.Sprintf("n%d/seed%d", tc.n, seed), func(t *testing.T) {
				s, err := runSeed(tc.n, seed, false)
				if err != nil {
					failSeed(t, tc.n, seed, s, err)
				}
				if len(s.History) < 100 {
					t.Fatalf("only %d operations in 3 s", len(s.History))
				}
			})
		}
	}
}

// TestDeterministic: a seed replays bit for bit (the trace's hash, every reply), with the
// trace's lines kept or not; another seed gives another run.
func TestDeterministic(t *testing.T) {
	a, errA := runSeed(3, 7, false)
	b, errB := runSeed(3, 7, true)
	if a.Hash() != b.Hash() || fmt.Sprint(errA) != fmt.Sprint(errB) {
		t.Fatalf("seed 7 twice: hash %x then %x (%v, %v)", a.Hash(), b.Hash(), errA, errB)
	}
	if len(a.History) != len(b.History) {
		t.Fatalf("seed 7 twice: %d then %d operations", len(a.History), len(b.History))
	}
	for i := range a.History {
		if a.History[i].String() != b.History[i].String() || a.History[i].Return != b.History[i].Return {
			t.Fatalf("seed 7 twice: operation %d is %s at %v, then %s at %v", i, a.History[i], a.History[i].Return,
				b.History[i], b.History[i].Return)
		}
	}
	if len(b.Lines()) < 1000 {
		t.Fatalf("the trace has %d lines", len(b.Lines()))
	}
	if c, _ := runSeed(3, 8, false); c.Hash() == a.Hash() {
		t.Fatal("seeds 7 and 8 gave the same run: the seed is not used")
	}
}

// op is an answered operation of a planted history.
func op(id int, kind Kind, key, value string, lvl cluster.Level, call, ret time.Duration, out string) *Op {
	return &Op{ID: id, Node: 1, Kind: kind, Key: key, Value: value, Level: lvl, Call: call, Return: ret, Done: true, Out: out}
}

// TestCheckersCatch: each checker rejects a history that breaks its property (a checker that
// cannot fail is no checker), and accepts the same history without the break.
func TestCheckersCatch(t *testing.T) {
	const ms = time.Millisecond
	q := cluster.LevelQuorum
	s := New(Options{Seed: 1})
	defer s.Close()

	// Keys: a write acknowledged, then a read of the value before it.
	s.History = []*Op{op(1, Put, "x", "a", q, 0, 10*ms, ""), op(2, Put, "x", "b", q, 20*ms, 30*ms, ""),
		op(3, Get, "x", "", q, 40*ms, 50*ms, "a")}
	if err := s.CheckLinearizable(5 * time.Second); err == nil {
		t.Error("a stale read after an acknowledged write passed")
	}
	s.History[2].Out = "b"
	if err := s.CheckLinearizable(5 * time.Second); err != nil {
		t.Errorf("a good history: %v", err)
	}
	s.History[1].Err, s.History[1].Unknown, s.History[2].Out = "CLUSTERDOWN", true, "a" // b may never have been written
	if err := s.CheckLinearizable(5 * time.Second); err != nil {
		t.Errorf("a write whose outcome is unknown, not seen: %v", err)
	}

	// Locks: two holders, then a token going back.
	g1 := op(1, Acquire, "k", "A", q, 0, 10*ms, "")
	g1.Granted, g1.Token = true, 5
	g2 := op(2, Acquire, "k", "B", q, 20*ms, 30*ms, "")
	g2.Granted, g2.Token = true, 6
	s.History = []*Op{g1, g2}
	if err := s.CheckLocks(); err == nil {
		t.Error("two holders of k passed")
	}
	rel := op(3, Release, "k", "A", q, 12*ms, 15*ms, "")
	rel.Granted = true
	s.History = []*Op{g1, rel, g2}
	if err := s.CheckLocks(); err != nil {
		t.Errorf("a grant after a release: %v", err)
	}
	g2.Token = 5
	if err := s.CheckLocks(); err == nil {
		t.Error("a token given twice passed")
	}

	// Counters and convergence, on a real cluster.
	l := s.Elect(5 * time.Second)
	if l == 0 {
		t.Fatal("no leader")
	}
	s.History = nil
	for range 3 {
		if o := s.Do(l, Incr, "n", "", q); !o.OK() {
			t.Fatalf("INCR: %s", o)
		}
	}
	if err := s.Settle(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckCounters(); err != nil {
		t.Errorf("three increments: %v", err)
	}
	if err := s.CheckConverged(); err != nil {
		t.Errorf("a settled cluster: %v", err)
	}
	s.Node(l).Model.Vals["n"] = "2" // an acknowledged increment lost
	if err := s.CheckCounters(); err == nil {
		t.Error("a lost increment passed")
	}
	if err := s.CheckConverged(); err == nil {
		t.Error("a member with another state passed")
	}
}

// BenchmarkRandom measures random runs of 3 members with faults: simulated seconds per real
// second and runs per second (go test ./cluster/sim -run '^$' -bench Random).
func BenchmarkRandom(b *testing.B) {
	var simulated time.Duration
	start := time.Now()
	for i := range b.N {
		s, err := runSeed(3, uint64(i)+1000, false)
		if err != nil {
			b.Fatalf("seed %d: %v", i+1000, err)
		}
		simulated += s.Now()
	}
	real := time.Since(start)
	b.ReportMetric(simulated.Seconds()/real.Seconds(), "sim-s/s")
	b.ReportMetric(float64(b.N)/real.Seconds(), "runs/s")
}

// TestRandomSnapshots: random histories where members snapshot every 20 entries and keep no
// entry before a snapshot, so a member that fell behind (cut off, crashed) catches up from
// the leader's snapshot, installed over several turns (InstallDelay), while messages reorder:
// the checkers still pass, and snapshots were sent.
func TestRandomSnapshots(t *testing.T) {
	n := uint64(12)
	if raceEnabled {
		n = 3
	}
	installs := 0
	for seed := uint64(1); seed <= n; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			opt := Options{Seed: seed, SnapshotEntries: 20, CompactAll: true, InstallDelay: 30 * time.Millisecond, Reorder: true}
			s, err := runOpts(opt)
			if err != nil {
				opt.Trace = true
				again, _ := runOpts(opt)
				lines := again.Lines()
				if len(lines) > 300 {
					lines = lines[len(lines)-300:]
				}
				t.Fatalf("seed %d: %v (replayed: hash %x, then %x)\n%s", seed, err, s.Hash(), again.Hash(), strings.Join(lines, "\n"))
			}
			for _, nd := range s.Nodes() {
				installs += nd.Installs
			}
		})
	}
	if installs == 0 {
		t.Fatal("no member installed a snapshot from the leader")
	}
	t.Logf("%d snapshots installed", installs)
}
