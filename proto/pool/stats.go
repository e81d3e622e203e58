package pool

import (
	"math"
	"strconv"
)

// Stats are the figures of a STATS reply (NOTES §3 "STATS"), as plain values
// the server fills in. Times are seconds.
type Stats struct {
	Uptime int64 // seconds since the server started

	TotalAcquired     uint64 // every LOCKED sent
	TotalReleases     uint64 // every RELEASED sent
	HashtableEntries  uint64 // live keys
	ProcessingWorkers uint64 // locks held
	WaitingWorkers    uint64 // requests waiting
	ConnectErrors     uint64
	FailedSends       uint64
	FullQueues        uint64 // QUEUE_FULL replies
	LockMismatch      uint64 // LOCK_HELD replies
	LockWhileWaiting  uint64 // ERROR WAIT_FOR_RESPONSE replies
	ReleaseMismatch   uint64 // NOT_LOCKED replies
	ProcessedCount    uint64 // held locks that ended

	TotalProcessingTime  float64 // hold time of every held lock that ended
	GainedTime           float64 // a releaser's hold time, once per DONE it caused
	WaitingTime          float64 // wait of every waiter that inherited a slot
	WaitingTimeForMe     float64 // the part of WaitingTime spent in ACQ4ME queues
	WaitingTimeForAnyone float64 // the part of WaitingTime spent in ACQ4ANY queues
	WaitingTimeForGood   float64 // wait of every DONE waiter
	WastedTimeoutTime    float64 // wait of every TIMEOUT waiter
}

// statNames names the twelve counters in STATS FULL order.
var statNames = [...]string{
	"total_acquired", "total_releases", "hashtable_entries", "processing_workers",
	"waiting_workers", "connect_errors", "failed_sends", "full_queues", "lock_mismatch",
	"lock_while_waiting", "release_mismatch", "processed_count",
}

// counter returns the value of statNames[i].
func (s *Stats) counter(i int) uint64 {
	switch i {
	case 0:
		return s.TotalAcquired
	case 1:
		return s.TotalReleases
	case 2:
		return s.HashtableEntries
	case 3:
		return s.ProcessingWorkers
	case 4:
		return s.WaitingWorkers
	case 5:
		return s.ConnectErrors
	case 6:
		return s.FailedSends
	case 7:
		return s.FullQueues
	case 8:
		return s.LockMismatch
	case 9:
		return s.LockWhileWaiting
	case 10:
		return s.ReleaseMismatch
	}
	return s.ProcessedCount
}

// AverageProcessingTime is TotalProcessingTime / ProcessedCount, or 0 when no
// lock has ended yet.
func (s *Stats) AverageProcessingTime() float64 {
	if s.ProcessedCount == 0 {
		return 0
	}
	return s.TotalProcessingTime / float64(s.ProcessedCount)
}

// AppendStatsReply appends the reply to "STATS arg" to dst, arg being the rest
// of the line after "STATS ", matched without regard to ASCII case (exactly:
// no spaces are trimmed):
//
//   - "UPTIME": "uptime: D days, Hh Mm Ss\n", H being total hours;
//   - one of the twelve counter names: "name: value\n";
//   - "FULL": the uptime line, eight time lines, the twelve counters and an
//     empty line.
//
// For any other arg it returns dst unchanged and ok == false: the caller
// replies WrongStat.
func AppendStatsReply(dst, arg []byte, s *Stats) (out []byte, ok bool) {
	switch {
	case equalFold(arg, "uptime"):
		return appendUptime(dst, s.Uptime), true
	case equalFold(arg, "full"):
		dst = appendUptime(dst, s.Uptime)
		for _, t := range [...]struct {
			name string
			v    float64
		}{
			{"total processing time: ", s.TotalProcessingTime},
			{"average processing time: ", s.AverageProcessingTime()},
			{"gained time: ", s.GainedTime},
			{"waiting time: ", s.WaitingTime},
			{"waiting time for me: ", s.WaitingTimeForMe},
			{"waiting time for anyone: ", s.WaitingTimeForAnyone},
			{"waiting time for good: ", s.WaitingTimeForGood},
			{"wasted timeout time: ", s.WastedTimeoutTime},
		} {
			dst = append(dst, t.name...)
			dst = AppendDuration(dst, t.v)
			dst = append(dst, '\n')
		}
		for i := range statNames {
			dst = s.appendCounter(dst, i)
		}
		return append(dst, '\n'), true
	}
	for i, name := range statNames {
		if equalFold(arg, name) {
			return s.appendCounter(dst, i), true
		}
	}
	return dst, false
}

func (s *Stats) appendCounter(dst []byte, i int) []byte {
	dst = append(dst, statNames[i]...)
	dst = append(dst, ": "...)
	dst = strconv.AppendUint(dst, s.counter(i), 10)
	return append(dst, '\n')
}

// appendUptime appends "uptime: D days, Hh Mm Ss\n"; H is total hours, as the
// reference prints it. A negative uptime counts as 0.
func appendUptime(dst []byte, s int64) []byte {
	s = max(s, 0)
	dst = append(dst, "uptime: "...)
	dst = strconv.AppendInt(dst, s/86400, 10)
	dst = append(dst, " days, "...)
	dst = strconv.AppendInt(dst, s/3600, 10)
	dst = append(dst, "h "...)
	dst = strconv.AppendInt(dst, s/60%60, 10)
	dst = append(dst, "m "...)
	dst = strconv.AppendInt(dst, s%60, 10)
	return append(dst, "s\n"...)
}

// equalFold reports whether b equals s, ignoring ASCII case only (like C's
// strcasecmp: "ſ" is not "s", nor "K" "k").
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// AppendDuration appends seconds as STATS FULL prints a time:
// "[[[N days ]Hh ]Mm ]S.ffffffs", with days only at 24 h or more, hours (TOTAL
// hours, not modulo 24) at 60 min or more, minutes (modulo 60) at 60 s or
// more, and seconds (modulo 60) always, with six decimals: "1m 4.250000s",
// "22h 14m 53.898438s", "85809 days 2059430h 0m 24.000000s".
//
// The value is rounded to the microsecond first (as C's "%f" rounds, to
// nearest, ties to even on the exact binary value) and only then split, so a
// carry moves up into the minutes: 59.9999996 prints "1m 0.000000s", never
// "60.000000s". NaN and negative values print as 0; values of 2^64 s or more
// saturate to 2^64-1 s.
func AppendDuration(dst []byte, seconds float64) []byte {
	whole, micros := splitSeconds(seconds)
	if whole >= 86400 {
		dst = strconv.AppendUint(dst, whole/86400, 10)
		dst = append(dst, " days "...)
	}
	if whole >= 3600 {
		dst = strconv.AppendUint(dst, whole/3600, 10)
		dst = append(dst, "h "...)
	}
	if whole >= 60 {
		dst = strconv.AppendUint(dst, whole/60%60, 10)
		dst = append(dst, "m "...)
	}
	dst = strconv.AppendUint(dst, whole%60, 10)
	dst = append(dst, '.')
	for div := uint32(100000); div > 0; div /= 10 {
		dst = append(dst, byte('0'+micros/div%10))
	}
	return append(dst, 's')
}

// splitSeconds rounds s to whole microseconds and returns the whole seconds
// and the microseconds (0..999999) of the result.
func splitSeconds(s float64) (whole uint64, micros uint32) {
	if !(s > 0) { // negative, zero or NaN
		return 0, 0
	}
	if s >= 1<<64 {
		return math.MaxUint64, 0
	}
	w := math.Floor(s)
	whole = uint64(w)
	// s-w is exact. Format it the way C's "%f" would, correctly rounded, and
	// read the digits back: "0.dddddd" or, rounding up, "1.000000".
	var b [32]byte
	f := strconv.AppendFloat(b[:0], s-w, 'f', 6, 64)
	if f[0] == '1' { // whole < 2^53 here: larger floats have no fraction
		return whole + 1, 0
	}
	for _, c := range f[2:] {
		micros = micros*10 + uint32(c-'0')
	}
	return whole, micros
}

// AppendKeyLine appends one line of STATS KEYS, a tallyd extension listing
// the busiest live keys: "KEY: processing P workers W waiting Q maxqueue M\n",
// W and M as the key's latest acquire asked. (Keys never hold whitespace, so
// ": " ends the key.)
func AppendKeyLine(dst []byte, key string, processing, workers, waiting, maxqueue uint32) []byte {
	dst = append(dst, key...)
	dst = append(dst, ": processing "...)
	dst = strconv.AppendUint(dst, uint64(processing), 10)
	dst = append(dst, " workers "...)
	dst = strconv.AppendUint(dst, uint64(workers), 10)
	dst = append(dst, " waiting "...)
	dst = strconv.AppendUint(dst, uint64(waiting), 10)
	dst = append(dst, " maxqueue "...)
	dst = strconv.AppendUint(dst, uint64(maxqueue), 10)
	return append(dst, '\n')
}
