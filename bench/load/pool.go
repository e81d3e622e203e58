package load

import (
	"bytes"
	"fmt"
	"math"
	"time"

	"github.com/tallyd/tallyd/proto/pool"
)

func init() {
	Register(&Dialect{Name: "pool", Port: 7531, Kinds: []Kind{Acquire, Release, Wait, Noop},
		New:   func() Proto { return poolProto{} },
		Waits: true, WaitDepth: 1, Holds: 4, TimeoutUnit: time.Second,
		Doc: "PoolCounter (lines, port 7531): ACQ4ME key --max --maxqueue timeout, RELEASE; timeouts in whole seconds"})
}

// poolProto speaks the PoolCounter line protocol. An acquire is
// "ACQ4ME key workers maxqueue timeout" with workers Req.Max, maxqueue Req.Queue (0: no
// limit) and the timeout rounded up to whole seconds, the protocol's unit; a release is
// "RELEASE", which gives back the connection's newest lock whatever its key; a no-op is
// "STATS UPTIME", the probe that tells a waiting acquire (see Match).
//
// Replies come in request order except the reply to an acquire that waits, which comes
// when the lock is handed over or the wait times out, after the replies to whatever the
// connection sent behind it. So pairs on a connection's own key (never contended) may be
// pipelined, ACQ4ME and RELEASE together; pairs on shared keys send the RELEASE only once
// LOCKED arrives, one acquire in flight per connection.
type poolProto struct{}

// maxPoolLine bounds the reply lines poolProto waits for.
const maxPoolLine = 1024

// poolReplies maps each single-line reply to the Reply it is.
var poolReplies = func() map[string]pool.Reply {
	m := map[string]pool.Reply{}
	for r := pool.Locked; r <= pool.LineTooLong; r++ {
		m[r.String()] = r
	}
	return m
}()

// uptimePrefix starts the reply to STATS UPTIME, the probe.
var uptimePrefix = []byte("uptime: ")

func (poolProto) Append(dst []byte, r *Req) []byte {
	switch r.Kind {
	case Acquire, Wait:
		queue := r.Queue
		if queue == 0 {
			queue = math.MaxUint32
		}
		secs := (uint64(r.Timeout) + 999) / 1000 // rounded up, as Config.Defaults does
		return pool.AppendAcq4Me(dst, r.Key, max(r.Max, 1), queue, uint32(secs))
	case Release:
		return pool.AppendRelease(dst)
	}
	return pool.AppendStats(dst, "UPTIME")
}

func (p poolProto) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	line, n, err := poolLine(buf)
	if err != nil || n == 0 {
		return 0, 0, err
	}
	o, err := poolOutcome(line, sent.Kind)
	return n, o, err
}

// Match finds the request a reply line answers: the reply to STATS (the probe) answers
// the oldest STATS in flight, any other the oldest acquire or release. A probe answered
// while the acquire before it is not tells the runner that acquire waited.
func (poolProto) Match(buf []byte, in InFlight) (int, int, Outcome, error) {
	line, n, err := poolLine(buf)
	if err != nil || n == 0 {
		return 0, 0, 0, err
	}
	stat := bytes.HasPrefix(line, uptimePrefix) || bytes.Equal(line, wrongStat)
	for i := 0; i < in.Len(); i++ {
		r, answered := in.At(i)
		if !answered && (r.Kind == Noop) == stat {
			o, err := poolOutcome(line, r.Kind)
			return i, n, o, err
		}
	}
	return 0, 0, 0, fmt.Errorf("pool reply %q answers no request in flight", trim(line))
}

var wrongStat = []byte(pool.WrongStat.String())

// poolLine returns the first reply line of buf, without its "\n" (and "\r").
func poolLine(buf []byte) (line []byte, n int, err error) {
	line, n = pool.ParseReplyLine(buf)
	if n == 0 {
		if len(buf) > maxPoolLine {
			return nil, 0, fmt.Errorf("pool reply line longer than %d bytes", maxPoolLine)
		}
		return nil, 0, nil
	}
	return bytes.TrimSuffix(line, []byte{'\r'}), n, nil
}

// poolOutcome maps a reply line to an Outcome, checking it is a reply to a request of
// kind k.
func poolOutcome(line []byte, k Kind) (Outcome, error) {
	if k == Noop {
		switch {
		case bytes.HasPrefix(line, uptimePrefix):
			return OK, nil
		case bytes.Equal(line, wrongStat):
			return Invalid, nil
		}
		return 0, fmt.Errorf("pool reply %q to STATS UPTIME", trim(line))
	}
	r, ok := poolReplies[string(line)]
	if !ok {
		return 0, fmt.Errorf("pool reply %q to %v is not a PoolCounter reply", trim(line), k)
	}
	switch r {
	case pool.BadSyntax, pool.LineTooLong:
		return Invalid, nil
	case pool.BadCommand:
		return Unknown, nil
	}
	switch k {
	case Acquire, Wait:
		switch r {
		case pool.Locked:
			return OK, nil
		case pool.QueueFull:
			return Busy, nil
		case pool.Timeout:
			return TimedOut, nil
		case pool.LockHeld, pool.WaitForResponse:
			return Failed, nil // the connection broke the protocol's limits: the bench's fault
		}
	case Release:
		switch r {
		case pool.Released:
			return OK, nil
		case pool.NotLocked:
			return NotHeld, nil
		}
	}
	return 0, fmt.Errorf("pool reply %q to %v", r, k)
}

// Answer is the sink's side: LOCKED to every acquire, RELEASED to RELEASE, the uptime to
// STATS and ERROR BAD_COMMAND to anything else.
func (poolProto) Answer(dst, buf []byte) ([]byte, int, error) {
	var dec pool.Decoder
	var req pool.Request
	n, err := dec.Parse(buf, &req)
	if err != nil || n == 0 {
		return dst, 0, err
	}
	switch req.Cmd {
	case pool.CmdAcq4Me, pool.CmdAcq4Any:
		dst = pool.AppendReply(dst, pool.Locked)
	case pool.CmdRelease:
		dst = pool.AppendReply(dst, pool.Released)
	case pool.CmdStats:
		var ok bool
		if dst, ok = pool.AppendStatsReply(dst, req.StatArg, &pool.Stats{}); !ok {
			dst = pool.AppendReply(dst, pool.WrongStat)
		}
	default:
		dst = pool.AppendReply(dst, pool.BadCommand)
	}
	return dst, n, nil
}
