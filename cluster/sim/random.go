package sim

import (
	"fmt"
	"time"

	"github.com/tallyd/tallyd/cluster"
)

// Random is the shape of a random run (RunRandom): clients and faults drawn from the seed.
type Random struct {
	Duration time.Duration // of load and faults, before the cluster settles; 3 s
	Clients  int           // concurrent clients, one operation at a time each; 4
	Keys     int           // keys (counters and values) and locks; 3
	Faults   bool          // partitions, one-way loss, delays, crashes (torn too), leader transfers
	Settle   time.Duration // the limit to settle after; 30 s
	Check    time.Duration // porcupine's time limit; 5 s
}

func (r *Random) defaults() {
	if r.Duration == 0 {
		r.Duration = 3 * time.Second
	}
	if r.Clients == 0 {
		r.Clients = 4
	}
	if r.Keys == 0 {
		r.Keys = 3
	}
	if r.Settle == 0 {
		r.Settle = 30 * time.Second
	}
	if r.Check == 0 {
		r.Check = 5 * time.Second
	}
}

// RunRandom runs a random history on s: r.Clients clients send operations to the member
// they believe leads (another at random when it does not), while faults come and go; then
// every fault heals, the cluster settles, each key is read at QUORUM, and every checker runs
// (Check). The error says what broke; s keeps the history and the trace.
func (s *Sim) RunRandom(r Random) error {
	r.defaults()
	rng := s.Rng
	end := s.now + r.Duration
	for c := range r.Clients {
		owner := fmt.Sprintf("c%d", c)
		leaderGuess := uint64(1) // each client's own: the member it believes leads
		pick := func() uint64 {
			if n := s.Node(leaderGuess); n != nil && n.Up && n.M.Leader() != 0 && n.M.Leader() != leaderGuess {
				leaderGuess = n.M.Leader() // it names the leader
			}
			if rng.IntN(8) == 0 {
				return uint64(rng.IntN(len(s.nodes)) + 1)
			}
			return leaderGuess
		}
		var next func()
		next = func() {
			if s.now >= end {
				return
			}
			id := pick()
			lvl := cluster.LevelQuorum
			switch x := rng.IntN(20); {
			case x < 3:
				lvl = cluster.LevelOne
			case x < 6:
				lvl = cluster.LevelAll
			}
			key := fmt.Sprintf("k%d", rng.IntN(r.Keys))
			lock := fmt.Sprintf("l%d", rng.IntN(r.Keys))
			var op *Op
			switch x := rng.IntN(20); {
			case x < 7:
				op = s.Incr(id, key, lvl)
			case x < 10:
				op = s.Put(id, "v"+key, fmt.Sprintf("%s-%d", owner, len(s.History)), lvl)
			case x < 14:
				if rng.IntN(2) == 0 {
					key = "v" + key
				}
				op = s.Get(id, key, lvl)
			case x < 17:
				op = s.Lock(id, lock, owner, lvl)
			default:
				op = s.Unlock(id, lock, owner, lvl)
			}
			var wait func()
			wait = func() {
				if !op.Done {
					s.after(time.Millisecond, wait)
					return
				}
				if op.Err == "NOTLEADER" || op.Err == "closed" {
					leaderGuess = uint64(rng.IntN(len(s.nodes)) + 1)
				}
				s.after(time.Duration(rng.Int64N(int64(20*time.Millisecond))), next)
			}
			s.after(time.Millisecond, wait)
		}
		s.after(time.Duration(rng.Int64N(int64(50*time.Millisecond))), next)
	}
	if r.Faults {
		s.randomFaults(end)
	}
	s.Run(r.Duration)
	if err := s.Settle(r.Settle); err != nil {
		return err
	}
	l := s.Leader()
	var reads []*Op
	for k := range r.Keys {
		reads = append(reads, s.Get(l, fmt.Sprintf("k%d", k), cluster.LevelQuorum), s.Get(l, fmt.Sprintf("vk%d", k), cluster.LevelQuorum))
	}
	for _, op := range reads {
		if !s.Wait(op, s.Opt.Timeout+time.Second) || !op.OK() {
			return fmt.Errorf("final read %s failed on a settled cluster", op)
		}
	}
	if err := s.Settle(r.Settle); err != nil { // the reads' leader may have changed meanwhile
		return err
	}
	return s.Check(r.Check)
}

// randomFaults schedules faults until end: one every 50-400 ms, each ended 50-800 ms later
// (a crashed member restarts then). At most a minority of members is crashed at a time.
func (s *Sim) randomFaults(end time.Duration) {
	rng := s.Rng
	down := 0
	var next func()
	next = func() {
		if s.now >= end {
			return
		}
		ids := s.ids()
		a := ids[rng.IntN(len(ids))]
		b := ids[rng.IntN(len(ids))]
		for b == a {
			b = ids[rng.IntN(len(ids))]
		}
		undo := func() {}
		switch x := rng.IntN(10); {
		case x < 2:
			s.Partition(a)
			undo = func() {
				for _, o := range ids {
					if o != a {
						s.Link(a, o).Down, s.Link(o, a).Down = false, false
					}
				}
			}
		case x < 3:
			s.Hold(a, b)
			undo = func() { s.Link(a, b).Down = false }
		case x < 4:
			s.Loss(a, b, 0.3)
			undo = func() { s.Link(a, b).Loss = 0 }
		case x < 5 && rng.IntN(2) == 0:
			s.Delay(a, b, time.Duration(rng.Int64N(int64(200*time.Millisecond))))
			undo = func() { s.Link(a, b).Delay = 0 }
		case x < 5:
			// A delay that grows a little every tick: what b hears of a comes later and later
			// but keeps coming (a leader hearing its followers this way keeps its quorum while
			// the others elect another: the deposed leader of TestDeposedLeader).
			s.note("fault", a, b, []byte("ramp"), false, func() string { return fmt.Sprintf("delay ramp m%d -> m%d", a, b) })
			l := s.Link(a, b)
			l.ramp++
			gen := l.ramp
			var ramp func()
			ramp = func() {
				if l.ramp != gen {
					return
				}
				l.Delay += time.Duration(rng.Int64N(int64(s.Opt.Tick / 2)))
				s.after(s.Opt.Tick, ramp)
			}
			s.after(s.Opt.Tick, ramp)
			undo = func() {
				if l.ramp == gen {
					l.ramp++
					l.Delay = 0
				}
			}
		case x < 9:
			if n := s.Node(a); n.Up && 2*(down+1) < len(ids) {
				down++
				if rng.IntN(2) == 0 {
					s.CrashTorn(a)
				} else {
					s.Crash(a)
				}
				undo = func() {
					down--
					if !n.Up && n.Fatal == nil {
						_ = s.Restart(a)
					}
				}
			}
		case x < 10 && rng.IntN(2) == 0:
			s.depose(a)
		case rng.IntN(2) == 0:
			if l := s.Leader(); l != 0 {
				if o := s.Others(l); len(o) > 0 {
					s.Transfer(o[rng.IntN(len(o))]) // to a member it may not reach
				}
			}
		default:
			s.Heal()
		}
		s.after(50*time.Millisecond+time.Duration(rng.Int64N(int64(750*time.Millisecond))), undo)
		s.after(50*time.Millisecond+time.Duration(rng.Int64N(int64(350*time.Millisecond))), next)
	}
	s.after(100*time.Millisecond, next)
}

// depose makes the leader a deposed leader that goes on believing it leads (issue 19, as
// TestDeposedLeader): its links to one follower are cut, what the other sends it comes later
// and later (it keeps hearing a quorum), and a while later what it sends that one is lost;
// the followers elect another. With no serving leader, member a is cut off instead.
func (s *Sim) depose(a uint64) {
	l := s.Leader()
	if l == 0 {
		s.Partition(a)
		return
	}
	fs := s.Others(l)
	if len(fs) < 2 {
		return
	}
	f1, f2 := fs[s.Rng.IntN(len(fs))], fs[s.Rng.IntN(len(fs))]
	for f2 == f1 {
		f2 = fs[s.Rng.IntN(len(fs))]
	}
	s.note("fault", l, f1, []byte("depose"), false, func() string { return fmt.Sprintf("depose m%d (cut from m%d, m%d slowing)", l, f1, f2) })
	s.Cut(l, f1)
	lk := s.Link(f2, l)
	lk.ramp++
	gen := lk.ramp
	var ramp func()
	ramp = func() {
		if lk.ramp == gen {
			lk.Delay += time.Duration(s.Rng.Int64N(int64(s.Opt.Tick))) // half a tick a tick: it keeps coming
			s.after(s.Opt.Tick, ramp)
		}
	}
	s.after(s.Opt.Tick, ramp)
	s.after(time.Duration(40+s.Rng.IntN(40))*s.Opt.Tick, func() { // the delay is past an election timeout
		if lk.ramp == gen {
			s.Hold(l, f2)
		}
	})
}
