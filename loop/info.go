package loop

import (
	"net"
	"os"
	rtmetrics "runtime/metrics"
	"strconv"
	"syscall"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/store"
)

// What INFO reports beyond the store's counts: the rates Redis calls instantaneous, the
// peak of the memory the budget counts, and the process's own figures.
//
// Rates are sampled as Redis samples them (trackInstantaneousMetric): every rateEvery a
// tick records the totals, and a rate is the change across the last rateSamples samples.

const (
	rateEvery   = int64(100e6) // ns between samples
	rateSamples = 16
	infoSample  = 10_000 // keys with a value looked at per database for expires and avg_ttl (an estimate beyond)
)

// rateSample is the totals at one sample.
type rateSample struct {
	at                int64 // Unix ns
	commands, in, out uint64
}

// infoState is what the loop keeps for INFO.
type infoState struct {
	started  int64 // Unix ns, for uptime
	samples  [rateSamples]rateSample
	next     int                // the slot the next sample goes to
	n        int                // samples taken, up to rateSamples
	memPeak  int64              // the most heapBytes has been, at a sample or an INFO
	heap     []rtmetrics.Sample // heap objects: used_memory
	hits     uint64             // GET and MGET keys that had a value
	misses   uint64             // and that had none
	pageSize int64
	latency  resp.InfoLatency // the Latency section (fair.go)
}

// infoTick runs at every tick: it takes a rate sample when one is due, and follows the
// memory peak at each.
func (s *Server) infoTick(now int64) {
	in := &s.info
	last := &in.samples[(in.next+rateSamples-1)%rateSamples]
	if in.n > 0 && now-last.at < rateEvery {
		return
	}
	in.memPeak = max(in.memPeak, s.info.heapBytes())
	in.samples[in.next] = rateSample{at: now, commands: s.m.commandsTotal(), in: sum(s.m.bytesIn[:]), out: sum(s.m.bytesOut[:])}
	in.next = (in.next + 1) % rateSamples
	in.n = min(in.n+1, rateSamples)
}

// rates returns the commands per second and the kilobytes per second in and out across the
// samples taken (0 until there are two).
func (in *infoState) rates() (ops int64, inKbps, outKbps float64) {
	if in.n < 2 {
		return 0, 0, 0
	}
	newest := &in.samples[(in.next+rateSamples-1)%rateSamples]
	oldest := &in.samples[(in.next+rateSamples-in.n)%rateSamples]
	secs := float64(newest.at-oldest.at) / 1e9
	if secs <= 0 {
		return 0, 0, 0
	}
	ops = int64(float64(newest.commands-oldest.commands)/secs + 0.5)
	inKbps = float64(newest.in-oldest.in) / secs / 1024
	outKbps = float64(newest.out-oldest.out) / secs / 1024
	return ops, inKbps, outKbps
}

// heapBytes is what the Go heap's objects take, live or not yet swept: what the allocator
// has handed out, as Redis's used_memory is. Reading it stops nothing.
func (in *infoState) heapBytes() int64 {
	if in.heap == nil {
		in.heap = []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	}
	rtmetrics.Read(in.heap)
	if in.heap[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(in.heap[0].Value.Uint64())
}

// commandsTotal is every request of every protocol counted so far.
func (m *metrics) commandsTotal() uint64 { return sum(m.requests[:]) }

func sum(v []uint64) (n uint64) {
	for _, x := range v {
		n += x
	}
	return n
}

// countLookup counts a GET of a key (of MGET's too) as a keyspace hit or miss.
func (in *infoState) countLookup(found bool) {
	if found {
		in.hits++
	} else {
		in.misses++
	}
}

// fillInfo fills in the INFO figures at now.
func (s *Server) fillInfo(in *resp.Info, now int64) {
	st := &s.ct.stats[ProtoSlock]
	in.Version, in.PID, in.Uptime = s.cfg.Version, os.Getpid(), (now-s.info.started)/1e9
	in.Clients, in.ConnectionsTotal, in.MaxClients = st.CurrConnections, st.TotalConnections, s.ct.fdCap
	for i, l := range s.cfg.Listeners {
		if a, ok := s.Addr(i).(*net.TCPAddr); ok && l.Proto == ProtoSlock {
			in.Port = a.Port
			break
		}
	}
	used := s.info.heapBytes()
	s.info.memPeak = max(s.info.memPeak, used)
	in.Memory = resp.InfoMemory{Used: used, RSS: s.info.rss(), Peak: s.info.memPeak, Budget: s.memUsed(),
		Dataset: s.st.store.Bytes(), Max: s.cfg.MaxMemory}
	if e := s.scr.eng; e != nil {
		n, b := e.Stats()
		in.Memory.Scripts, in.Memory.ScriptBytes = int64(n), b+e.Memory()
	}
	ops, inK, outK := s.info.rates()
	in.Stats = resp.InfoStats{Commands: s.m.commandsTotal(), OpsPerSec: ops, NetIn: sum(s.m.bytesIn[:]),
		NetOut: sum(s.m.bytesOut[:]), InKbps: inK, OutKbps: outK, Hits: s.info.hits, Misses: s.info.misses}
	for p := range s.ct.stats {
		in.Stats.Rejected += s.ct.stats[p].Rejected
	}
	for c := range commandNames[ProtoSlock] {
		in.Stats.ErrorReplies += s.m.requestCount(ProtoSlock, c, soError)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		in.CPUSys = float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6
		in.CPUUser = float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6
	}
	in.AOF = s.persistInfo()
	in.DBs = in.DBs[:0]
	for db := 0; db <= store.MaxLockDB; db++ {
		ls, ok := s.st.locks.State(uint8(db))
		if !ok {
			continue
		}
		d := resp.InfoDB{DB: uint8(db), Values: s.st.locks.ValueCount(uint8(db)), Keys: ls.KeyCount,
			Locked: ls.LockedCount, Waiting: ls.WaitCount, LockCount: ls.LockCount, UnlockCount: ls.UnLockCount,
			Timeouted: ls.TimeoutedCount, Expried: ls.ExpiredCount, UnlockErrors: ls.UnlockErrorCount}
		d.Expires, d.AvgTTL = s.st.locks.ValueExpiries(uint8(db), now, infoSample)
		in.DBs = append(in.DBs, d)
		in.Blocked += uint64(ls.WaitCount)
		in.Stats.Expired += uint64(ls.ExpiredCount)
	}
	in.Stats.Channels, in.Stats.Patterns = s.ps.pubsubCounts()
}

// rss is the process's resident set in bytes (/proc/self/statm), 0 where it cannot be read.
func (in *infoState) rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var fields [2][]byte
	n := 0
	start := 0
	for i := 0; i <= len(b) && n < 2; i++ {
		if i == len(b) || b[i] == ' ' || b[i] == '\n' {
			fields[n] = b[start:i]
			n++
			start = i + 1
		}
	}
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if n < 2 || err != nil {
		return 0
	}
	if in.pageSize == 0 {
		in.pageSize = int64(os.Getpagesize())
	}
	return pages * in.pageSize
}
