package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tallyd/tallyd/cluster"
)

// Checkers over a simulation's history (Sim.History) and its members. Each returns nil, or
// an error naming the operations that break the property.

// kvIn and kvOut are an operation on one key, for porcupine.
type kvIn struct {
	kind  Kind
	value string
}

type kvOut struct {
	value   string
	unknown bool // failed, may have taken effect: any output
}

// kvModel is one key's register: PUT sets it, INCR adds one (a missing key is 0), GET reads.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Metadata.(*Op).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(kvIn), output.(kvOut)
		switch in.kind {
		case Put:
			return true, in.value
		case Incr:
			v, _ := strconv.ParseInt(st, 10, 64)
			nv := strconv.FormatInt(v+1, 10)
			return out.unknown || out.value == nv, nv
		default:
			return out.value == st, st
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvIn), output.(kvOut)
		return fmt.Sprintf("%s %s -> %q unknown %v", in.kind, in.value, out.value, out.unknown)
	},
}

// CheckLinearizable checks that the keys' operations are linearizable (porcupine): reads at
// QUORUM and ALL, and every write (a write at ONE, or one whose reply failed after it ran,
// may or may not have taken effect: it may be placed anywhere after its call). Reads at ONE
// are left out (they read one member's store), and so are operations that never ran.
func (s *Sim) CheckLinearizable(timeout time.Duration) error {
	var h []porcupine.Operation
	for _, op := range s.History {
		if op.Kind != Put && op.Kind != Get && op.Kind != Incr {
			continue
		}
		read := op.Kind == Get
		switch {
		case !op.Done && read, op.Done && op.Err != "" && (read || !op.Unknown):
			continue // never answered a read, or failed without running
		case read && op.Level == cluster.LevelOne:
			continue
		}
		ret := int64(op.Return)
		out := kvOut{value: op.Out}
		if !op.Done || op.Err != "" || op.Level == cluster.LevelOne {
			ret, out.unknown = math.MaxInt64, true // anywhere after its call, or never
		}
		h = append(h, porcupine.Operation{ClientId: op.ID, Input: kvIn{op.Kind, op.Value}, Call: int64(op.Call),
			Output: out, Return: ret, Metadata: op})
	}
	switch porcupine.CheckOperationsTimeout(kvModel, h, timeout) {
	case porcupine.Illegal:
		return errors.New("the keys' history is not linearizable")
	case porcupine.Unknown:
		return nil // out of time: not proven either way
	}
	return nil
}

// CheckLocks checks the locks: two clients never both hold a lock acknowledged at QUORUM or
// ALL (between a grant to one and a grant to another, the first released it, or asked to),
// and fencing tokens grow: a grant acknowledged at QUORUM or ALL carries a token below every
// grant asked for after it was answered (a grant at ONE may be lost at failover, and its
// token given again).
func (s *Sim) CheckLocks() error {
	var grants []*Op
	for _, op := range s.History {
		if op.Kind == Acquire && op.OK() && op.Granted {
			grants = append(grants, op)
		}
	}
	for _, g1 := range grants {
		if g1.Level == cluster.LevelOne {
			continue
		}
		for _, g2 := range grants {
			if g2 == g1 {
				continue
			}
			if g1.Return < g2.Call && g2.Token <= g1.Token && !g2.Again && g2.Level != cluster.LevelOne {
				return fmt.Errorf("fencing token went back: %s, then %s", g1, g2)
			}
			if g2.Key != g1.Key || g2.Value == g1.Value || g2.Level == cluster.LevelOne || g2.Return < g1.Return {
				continue
			}
			if !s.releasedBetween(g1, g2) {
				return fmt.Errorf("two holders: %s, then %s, with no release by %s between", g1, g2, g1.Value)
			}
		}
	}
	return nil
}

// releasedBetween says whether g1's owner asked to release its lock after g1 was called and
// before g2 was answered, and the release did not fail without running.
func (s *Sim) releasedBetween(g1, g2 *Op) bool {
	for _, op := range s.History {
		if op.Kind == Release && op.Key == g1.Key && op.Value == g1.Value && op.Call >= g1.Call && op.Call <= g2.Return &&
			(op.OK() && op.Granted || !op.Done || op.Unknown) {
			return true
		}
	}
	return false
}

// CheckCounters checks that no acknowledged increment was lost: each counter a serving
// leader holds now is at least the increments acknowledged at QUORUM or ALL, and at most
// every increment that may have run. Call it once the cluster has settled (Settle).
func (s *Sim) CheckCounters() error {
	l := s.Node(s.Leader())
	if l == nil {
		return errors.New("no serving leader to read the counters on")
	}
	type count struct{ acked, maybe int64 }
	counts := map[string]*count{}
	var keys []string
	for _, op := range s.History {
		if op.Kind != Incr {
			continue
		}
		c := counts[op.Key]
		if c == nil {
			c = &count{}
			counts[op.Key] = c
			keys = append(keys, op.Key)
		}
		switch {
		case op.OK() && op.Level != cluster.LevelOne:
			c.acked++
			c.maybe++
		case op.OK() || op.Unknown || !op.Done:
			c.maybe++
		}
	}
	for _, k := range keys {
		c := counts[k]
		v, _ := strconv.ParseInt(l.Model.Vals[k], 10, 64)
		if v < c.acked || v > c.maybe {
			return fmt.Errorf("counter %s is %d on the leader m%d: %d increments were acknowledged, %d may have run", k, v, l.ID, c.acked, c.maybe)
		}
	}
	return nil
}

// CheckConverged checks that every member up that belongs to the configuration has applied
// the same index, and holds the same state.
func (s *Sim) CheckConverged() error {
	var first *Node
	for _, n := range s.nodes {
		if !n.Up || !n.M.Members.IsMember(n.ID) {
			continue
		}
		if first == nil {
			first = n
			continue
		}
		if n.M.Applied() != first.M.Applied() || n.Model.Digest() != first.Model.Digest() {
			return fmt.Errorf("m%d applied %d (state %x, %d keys), m%d applied %d (state %x, %d keys)", first.ID,
				first.M.Applied(), first.Model.Digest(), len(first.Model.Vals), n.ID, n.M.Applied(), n.Model.Digest(), len(n.Model.Vals))
		}
	}
	return nil
}

// Settle heals every fault, restarts the members down (but those that stopped themselves),
// and runs until a leader serves and every member applied what it committed, at most limit.
func (s *Sim) Settle(limit time.Duration) error {
	s.Heal()
	for _, n := range s.nodes {
		if !n.Up && n.Fatal == nil {
			if err := s.Restart(n.ID); err != nil {
				return fmt.Errorf("restarting m%d: %w", n.ID, err)
			}
		}
	}
	ok := s.RunUntil(func() bool {
		l := s.Node(s.Leader())
		if l == nil || len(l.journal) > 0 || len(l.held) > 0 {
			return false
		}
		for _, n := range s.nodes {
			if n.Up && n.M.Members.IsMember(n.ID) && (n.M.Applied() != l.M.Applied() || n.M.Installing() != 0) {
				return false
			}
		}
		return l.M.Applied() == l.M.Commit()
	}, limit)
	if !ok {
		var st []string
		for _, n := range s.nodes {
			st = append(st, n.State())
		}
		return fmt.Errorf("not settled after %v: %v", limit, st)
	}
	return nil
}

// State is the member's state in words.
func (n *Node) State() string {
	if !n.Up {
		if n.Fatal != nil {
			return fmt.Sprintf("m%d stopped: %v", n.ID, n.Fatal)
		}
		return fmt.Sprintf("m%d down", n.ID)
	}
	st := n.M.Status()
	return fmt.Sprintf("m%d %s term %d lead %d commit %d applied %d", n.ID, st.Role, st.Term, st.Lead, st.Commit, n.M.Applied())
}

// Check runs every checker: locks, counters, members converged, keys linearizable (with
// porcupine's timeout). Call it once the cluster has settled.
func (s *Sim) Check(timeout time.Duration) error {
	if len(s.Failures) > 0 {
		return errors.New("failures: " + s.Failures[0])
	}
	for _, c := range []func() error{s.CheckLocks, s.CheckCounters, s.CheckConverged} {
		if err := c(); err != nil {
			return err
		}
	}
	return s.CheckLinearizable(timeout)
}

// HistoryText returns the history's operations in words, for a failure's report.
func (s *Sim) HistoryText() []string {
	out := make([]string, 0, len(s.History))
	for _, op := range s.History {
		out = append(out, op.String())
	}
	return slices.Clip(out)
}
