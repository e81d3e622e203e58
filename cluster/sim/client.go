package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tallyd/tallyd/cluster"
)

// Kind is what a client operation does.
type Kind uint8

// The operations.
const (
	Put     Kind = iota + 1 // Key = Value
	Get                     // Out = Key's value ("" for none)
	Incr                    // Key's value + 1 (a missing key is 0); Out = the new value
	Acquire                 // the lock Key for Value (the owner): Granted, Token
	Release                 // the lock Key held by Value: Granted says it was held
)

var kindNames = [...]string{Put: "PUT", Get: "GET", Incr: "INCR", Acquire: "LOCK", Release: "UNLOCK"}

func (k Kind) String() string { return kindNames[k] }

// Op is one client operation and its reply.
type Op struct {
	ID    int
	Node  uint64 // the member it was sent to
	Kind  Kind
	Key   string
	Value string // Put's value; Acquire's and Release's owner
	Level cluster.Level

	Call, Return time.Duration // invoked, answered (simulated time)
	Done         bool          // answered
	Err          string        // the error answered; "" for success
	Unknown      bool          // failed, but it may have taken effect (it ran on a leader)
	Out          string        // Get's and Incr's value
	Granted      bool
	Again        bool // Acquire: the owner held the lock already (its token is the grant's)
	Token        uint64

	// The reply's gate (the loop's gateMark): held until the proposal seq is acknowledged
	// at Level and the read barrier rd passed.
	mark           cluster.WriteMark // its change's, for WAIT (Replicas)
	ran            bool
	settled        bool
	after, seq, rd uint64
	since          time.Duration
}

func (op *Op) String() string {
	s := fmt.Sprintf("#%d %s %s", op.ID, op.Kind, op.Key)
	if op.Kind == Put || op.Kind == Acquire || op.Kind == Release {
		s += " " + op.Value
	}
	s += fmt.Sprintf(" @%s on m%d", op.Level, op.Node)
	switch {
	case !op.Done:
		return s + " (no reply)"
	case op.Err != "":
		s += " -> -" + op.Err
		if op.Unknown {
			s += " (outcome unknown)"
		}
		return s
	case op.Kind == Get || op.Kind == Incr:
		return s + " -> " + strconv.Quote(op.Out)
	case op.Kind == Acquire:
		return s + fmt.Sprintf(" -> granted %v token %d", op.Granted, op.Token)
	case op.Kind == Release:
		return s + fmt.Sprintf(" -> released %v", op.Granted)
	}
	return s + " -> OK"
}

// OK says whether the operation was answered without an error.
func (op *Op) OK() bool { return op.Done && op.Err == "" }

// Submit sends op to member id now; it runs there as the next event. The op is answered
// (Done) when its reply is released, or fails.
func (s *Sim) Submit(id uint64, kind Kind, key, value string, lvl cluster.Level) *Op {
	op := &Op{ID: len(s.History) + 1, Node: id, Kind: kind, Key: key, Value: value, Level: lvl, Call: s.now}
	s.History = append(s.History, op)
	s.note("call", id, uint64(op.ID), []byte(op.String()), false, func() string { return "call " + op.String() })
	n := s.Node(id)
	if n == nil || !n.Up {
		s.finish(op, "closed", false)
		return op
	}
	n.event(func() { n.exec(op) })
	gen := n.gen
	s.after(0, func() {
		if !op.ran && !op.Done && (!n.Up || n.gen != gen) {
			s.finish(op, "closed", false) // the member went down before it ran
		}
	})
	return op
}

// Shorthands.

func (s *Sim) Put(id uint64, key, val string, lvl cluster.Level) *Op {
	return s.Submit(id, Put, key, val, lvl)
}
func (s *Sim) Get(id uint64, key string, lvl cluster.Level) *Op {
	return s.Submit(id, Get, key, "", lvl)
}
func (s *Sim) Incr(id uint64, key string, lvl cluster.Level) *Op {
	return s.Submit(id, Incr, key, "", lvl)
}
func (s *Sim) Lock(id uint64, key, owner string, lvl cluster.Level) *Op {
	return s.Submit(id, Acquire, key, owner, lvl)
}
func (s *Sim) Unlock(id uint64, key, owner string, lvl cluster.Level) *Op {
	return s.Submit(id, Release, key, owner, lvl)
}

// Wait runs until op is answered, at most limit; it says whether it was.
func (s *Sim) Wait(op *Op, limit time.Duration) bool {
	return s.RunUntil(func() bool { return op.Done }, limit)
}

// Do submits an operation and waits for its reply (the timeout and a second more).
func (s *Sim) Do(id uint64, kind Kind, key, value string, lvl cluster.Level) *Op {
	op := s.Submit(id, kind, key, value, lvl)
	s.Wait(op, s.Opt.Timeout+time.Second)
	return op
}

// finish answers op: err "" for success; unknown says a failure may have taken effect.
func (s *Sim) finish(op *Op, err string, unknown bool) {
	if op.Done {
		return
	}
	op.Done, op.Return, op.Err, op.Unknown = true, s.now, err, unknown && err != ""
	if err != "" {
		op.Out, op.Granted, op.Token = "", false, 0
	}
	s.note("reply", op.Node, uint64(op.ID), []byte(op.String()), false, func() string { return "reply " + op.String() })
}

// exec runs op on the member: only a serving leader runs commands (forwarding is the loop's).
func (n *Node) exec(op *Op) {
	s := n.s
	op.ran = true
	if !n.M.Serving() {
		s.finish(op, "NOTLEADER", false)
		return
	}
	m := n.Model
	j := n.journal
	switch op.Kind {
	case Put:
		j = m.set(j, op.Key, op.Value)
	case Get:
		op.Out = m.Vals[op.Key]
	case Incr:
		v, _ := strconv.ParseInt(m.Vals[op.Key], 10, 64)
		op.Out = strconv.FormatInt(v+1, 10)
		j = m.set(j, op.Key, op.Out)
	case Acquire:
		op.Granted, op.Again, op.Token, j = m.lock(j, op.Key, op.Value, s.Opt.FenceBlock)
	case Release:
		op.Granted, j = m.unlock(j, op.Key, op.Value)
	}
	if len(j) > len(n.journal) {
		op.mark = n.M.NoteWrite() // WAIT's mark of the change: the next proposal carries it
	}
	n.journal = j
	// The gate (the loop's raftGate.mark): a reply waits while changes made so far are not
	// acknowledged at its level; at ONE with nothing pending it goes at once.
	a := &n.M.Acks
	if !(a.Seq > a.Acked[op.Level] || len(n.journal) > 0) && op.Level == cluster.LevelOne {
		s.finish(op, "", false)
		return
	}
	op.after, op.since = a.Seq, s.now
	n.held = append(n.held, op)
}

// settle sets the marks of the replies added since the last turn (raftGate.writable): the
// proposal that carries their change, and a read barrier when that proposal was made before
// their command ran.
func (n *Node) settle() {
	for _, op := range n.held {
		if op.settled {
			continue
		}
		op.settled = true
		op.seq = n.M.Acks.Seq
		if len(n.journal) > 0 {
			op.seq++ // its change waits for the next proposal, which takes the whole journal
		}
		if op.Level >= cluster.LevelQuorum && op.seq <= op.after {
			op.rd = n.M.Reads.Want()
		}
	}
}

// release answers the replies whose marks are now acknowledged.
func (n *Node) release() {
	for _, op := range n.held {
		if op.settled && op.seq <= n.M.Acks.Acked[op.Level] && op.rd <= n.M.Reads.Done {
			n.s.finish(op, "", false)
		}
	}
	n.dropFinished()
}

// failHeld fails a held reply: it was never acknowledged, and its outcome is unknown.
func (n *Node) failHeld(err string, op *Op) { n.s.finish(op, err, true) }

// dropFinished forgets the replies answered.
func (n *Node) dropFinished() {
	k := 0
	for _, op := range n.held {
		if !op.Done {
			n.held[k] = op
			k++
		}
	}
	clear(n.held[k:])
	n.held = n.held[:k]
}

// Replicas is WAIT's count on the member op ran on: how many voters other than it hold op's
// change in their raft log (every other voter for an operation that changed nothing), as
// the loop's WAIT asks Member.ReplicasHolding.
func (s *Sim) Replicas(op *Op) int64 {
	n := s.Node(op.Node)
	if n == nil || !n.Up || !n.M.IsLeader() {
		return 0
	}
	return n.M.ReplicasHolding(&op.mark, len(n.journal) > 0)
}
