package loop

import (
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
)

// SLOWLOG, as Redis's slowlog.c: every Redis-text command whose run took at least
// --slowlog-log-slower-than microseconds (negative: none; 0: every command) is kept, newest
// first, up to --slowlog-max-len entries, with its arguments as Redis keeps them (32, each cut
// at 128 bytes), the client's address and its name. A command's run is the loop's time in it:
// for one that goes on across turns (KEYS, MGET: textcont.go) the sum of its steps, not the
// time others were served in between. As in Redis, EXEC is not logged, the commands it runs
// are, each on its own; nor are commands that carry a password (AUTH, HELLO).
//
// The figures are read from the monotonic clock once a text command (about 30 ns), as it ends:
// that reading is where the next command of the turn starts (its parse included), and it
// also serves the connection's slice (fair.go).

// Defaults of the SLOWLOG settings, Redis's.
const (
	DefaultSlowlogSlowerThan = 10_000 // µs
	DefaultSlowlogMaxLen     = 128
)

// slowlog is the loop's SLOWLOG.
type slowlog struct {
	ring  []resp.SlowlogEntry // oldest first once full: next is the oldest
	next  int                 // where the next entry goes once the ring is full
	id    uint64              // the next entry's id
	total uint64              // entries ever logged
	cfg   *Config             // the loop's: SlowlogSlowerThan and SlowlogMaxLen, as a reload leaves them
	now   func() time.Time    // the loop's clock
}

// threshold is the duration (ns) from which a command is logged; -1: none.
func (sl *slowlog) threshold() int64 {
	if sl.cfg.SlowlogSlowerThan < 0 || sl.cfg.SlowlogMaxLen <= 0 {
		return -1
	}
	return sl.cfg.SlowlogSlowerThan * 1000
}

// note logs the command args of cs if its run of d ns is slow enough.
func (sl *slowlog) note(cs *conn, args [][]byte, d int64) {
	th := sl.threshold()
	if th < 0 || d < th || len(args) == 0 || cs.virt != nil {
		return
	}
	if resp.Is(args[0], "EXEC") || resp.Is(args[0], "AUTH") || resp.Is(args[0], "HELLO") {
		return
	}
	e := resp.SlowlogEntry{ID: sl.id, Time: sl.now().Unix(), Micros: d / 1000,
		Args: resp.AppendSlowlogArgs(nil, args)}
	if sc := cs.slock; sc != nil {
		e.Name = sc.name
		if sc.remote != nil { // the client's address as accepted (a TLS client's, not the bridge's)
			e.Addr = sc.remote.String()
		}
	}
	sl.id++
	sl.total++
	max := sl.cfg.SlowlogMaxLen
	switch {
	case len(sl.ring) < max:
		sl.ring = append(sl.ring, e)
	default:
		if len(sl.ring) > max { // --slowlog-max-len shrank at a reload: keep the newest
			sl.ring = append(sl.ring[:0:0], sl.newest(max-1)...)
			sl.next = 0
			sl.ring = append(sl.ring, e)
			return
		}
		sl.ring[sl.next] = e
		sl.next = (sl.next + 1) % max
	}
}

// newest returns up to n entries, oldest first.
func (sl *slowlog) newest(n int) []resp.SlowlogEntry {
	all := append(append([]resp.SlowlogEntry(nil), sl.ring[sl.next:]...), sl.ring[:sl.next]...)
	return all[max(0, len(all)-n):]
}

// command answers SLOWLOG GET [count] | LEN | RESET | HELP, appending to b.
func (sl *slowlog) command(b []byte, args [][]byte) []byte {
	sub := args[1]
	n := len(args)
	switch {
	case resp.Is(sub, "GET") && n <= 3:
		count := int64(10)
		if n == 3 {
			c, ok := resp.ParseInt(args[2])
			if !ok || c < -1 {
				b = resp.AppendError(b, "ERR count should be greater than or equal to -1")
				break
			}
			count = c
		}
		k := len(sl.ring)
		if count >= 0 {
			k = int(min(count, int64(k)))
		}
		all := sl.newest(k) // oldest first
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
		b = resp.AppendSlowlog(b, all)
	case resp.Is(sub, "GET"):
		b = rediscmd.AppendTextError(b, &rediscmd.TextError{Msg: "unknown subcommand or wrong number of arguments for '" +
			string(truncArg(sub)) + "'. Try SLOWLOG HELP."})
	case resp.Is(sub, "LEN") && n == 2:
		b = resp.AppendInt(b, int64(len(sl.ring)))
	case resp.Is(sub, "RESET") && n == 2:
		clear(sl.ring)
		sl.ring, sl.next = sl.ring[:0], 0
		b = resp.AppendSimple(b, "OK")
	case resp.Is(sub, "HELP") && n == 2:
		b = resp.AppendArray(b, len(resp.SlowlogHelp))
		for _, l := range resp.SlowlogHelp {
			b = resp.AppendSimple(b, l)
		}
	default:
		b = subcommandError(b, "SLOWLOG", sub, []string{"LEN", "RESET", "HELP"})
	}
	return b
}

// truncArg is an argument as an error quotes it (Redis's %.128s).
func truncArg(a []byte) []byte {
	if len(a) > 128 {
		return a[:128]
	}
	return a
}

// textClock is the time a Redis-text command starts at: the reading the one before it took as
// it ended, when nothing but its parse came in between (one clock read a command, not two).
func (s *Server) textClock() int64 {
	if s.fair.fresh {
		return s.fair.clock
	}
	return nanotime()
}

// textRan runs after each Redis-text command of cs that began at start (nanotime): it reads
// the clock once, for SLOWLOG and for the connection's slice. A command that goes on in a
// later turn is logged when it ends (textcont.go).
func (s *Server) textRan(cs *conn, args [][]byte, start int64) {
	end := nanotime()
	s.fair.clockRead(end)
	if c := cs.slock.cont; c != nil && c.active {
		c.spent += end - start
		return
	}
	s.slow.note(cs, args, end-start)
}
