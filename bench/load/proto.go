// Package load drives a workload at a server over one of tallyd's wire protocols and
// measures throughput and latency the way tallyd-bench reports them.
package load

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Kind is what a request asks of the server.
type Kind uint8

// Request kinds. A protocol maps each to its own command; a protocol that has no
// equivalent for a kind returns ErrUnsupported from Supports.
const (
	Acquire Kind = iota // take N resources of Key (counter Acquire, RESP INCR)
	Release             // give N resources of Key back (counter Release, RESP DECR)
	Get                 // read Key (counter Get, RESP GET)
	Wait                // acquire that may wait up to Timeout (waiting protocols)
	Noop                // do nothing (counter Noop, RESP PING)
)

var kindNames = [...]string{"acquire", "release", "get", "wait", "noop"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Req is one request as the workload means it; a Proto turns it into bytes.
type Req struct {
	Key []byte
	N   uint32 // resources to acquire or release (counters; the lock protocols take one)
	// Max is the counter maximum, the semaphore initial value, the PoolCounter workers
	// (holders at once) or slock's COUNT (holders at once; sent as Max-1).
	Max     uint32
	Queue   uint32 // PoolCounter maxqueue: holders and waiters on the key (0: no limit)
	Timeout uint32 // milliseconds an acquire may wait for the lock (0: not at all)
	// Expiry is how many milliseconds a slock lock may be held before the server frees
	// it (0: the protocol's default, 10 s; HoldWhileConnected: while the connection lives).
	Expiry uint32
	Opaque uint32 // serial number of the request on its connection, echoed where the protocol can
	Op     uint32 // serial number of the op: the requests of one op share it (slock's LockId)
	Kind   Kind
}

// HoldWhileConnected as a Req.Expiry asks for a lock that lasts as long as the connection
// that took it (slock KEEPLIVED), as the wait workload's holders take theirs.
const HoldWhileConnected = math.MaxUint32

// Outcome is how the server answered one request.
type Outcome uint8

// Outcomes. OK, NotFound, Busy, NotHeld, TimedOut, Expired and Resent are answers a
// correct server may give; the rest are errors.
const (
	OK       Outcome = iota
	NotFound         // the key does not exist
	Busy             // resources not available
	NotHeld          // release of resources this connection does not hold
	TimedOut         // a wait ran out of time
	Expired          // a held lock ran out of time and the server said so (slock's pushed EXPRIED)
	Resent           // the server asked for the request again, which the runner resends (Redis's NOSCRIPT)
	Invalid          // the server called the request invalid
	Unknown          // the server does not know the command
	NoMemory         // the server is out of memory
	Failed           // any other error reply
	Lost             // a release found its lock gone or another's, which the workload never allows
	NumOutcomes
)

var outcomeNames = [...]string{"ok", "not_found", "busy", "not_held", "timed_out", "expired", "resent",
	"invalid", "unknown_command", "out_of_memory", "failed", "lock_lost"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Error reports whether o is an error rather than a refusal a correct server may give.
func (o Outcome) Error() bool { return o >= Invalid }

// Proto encodes requests and parses replies of one wire protocol. Replies come back in
// request order unless the Proto is also a Matcher. A Proto may keep per-connection
// state: the runner makes one per connection with the protocol's constructor.
type Proto interface {
	// Append appends the encoding of *r to dst. The Req is the runner's (in its ring of
	// requests in flight): read it, do not keep it.
	Append(dst []byte, r *Req) []byte
	// Parse parses the reply to sent from the front of buf. It returns n == 0 and a nil
	// error when buf holds only part of a reply; an error means the stream cannot be
	// trusted any more and the connection must be closed.
	Parse(buf []byte, sent *Req) (n int, o Outcome, err error)
}

// Matcher is implemented by protocols whose replies may come out of request order: slock
// names the request a binary reply answers by its RequestId, and a PoolCounter acquire
// that waits is answered after the requests behind it. The runner then calls Match
// instead of Parse.
type Matcher interface {
	// Match parses the reply at the front of buf and finds the request it answers among
	// those in flight. It returns that request's index in in, the bytes the reply took
	// (n == 0 and a nil error: buf holds only part of it) and how the server answered.
	// An index of -1 is a reply no request is waiting for that the protocol may push
	// (slock's EXPRIED for a lock already released): counted as an outcome, not as a
	// reply. An error means the stream cannot be trusted any more.
	Match(buf []byte, in InFlight) (i, n int, o Outcome, err error)
}

// InFlight is the requests a connection has in flight, oldest first. A request answered
// out of order stays in it, marked answered, until those before it are answered too.
type InFlight interface {
	Len() int
	At(i int) (r *Req, answered bool)
}

// Server is implemented by protocols that can answer their own requests with a canned
// success, for the trivial sink server.
type Server interface {
	// Answer appends a success reply for the request at the front of buf and returns
	// how many bytes of buf the request took (0: buf holds only part of it).
	Answer(dst, buf []byte) (out []byte, n int, err error)
}

// Dialect describes a protocol to the runner.
type Dialect struct {
	Name  string
	Port  int          // the server's default port
	Kinds []Kind       // request kinds the protocol supports
	New   func() Proto // one per connection
	Doc   string

	// Waits says an acquire may wait for the lock rather than be refused (PoolCounter,
	// slock). Pairs on shared keys then send each release only once its acquire is
	// granted: a release sent behind an acquire that waits would cancel it or fail.
	Waits bool
	// WaitDepth is how many acquires that may wait one connection may have in flight;
	// 0 is no limit. PoolCounter answers a second one ERROR WAIT_FOR_RESPONSE, and a
	// slock text LOCK blocks its connection.
	WaitDepth int
	// Holds is how many locks one connection may hold at once (PoolCounter: 4, its
	// server's default); 0 is no limit.
	Holds int
	// TimeoutUnit is the resolution of its wait timeouts: --timeout is rounded up to it.
	TimeoutUnit time.Duration
	// Durable says locks and queued waits outlive the connection (slock): the wait
	// workload's holders then unlock only once the last waits have timed out.
	Durable bool
	// CountLocks says the result counts the acquires granted and the releases done apart
	// (Result.Acquired, Result.Released), and the report shows them.
	CountLocks bool
}

var dialects = map[string]*Dialect{}

// Register makes a protocol available by name. It panics on a duplicate name.
func Register(d *Dialect) {
	if _, dup := dialects[d.Name]; dup {
		panic("load: protocol " + d.Name + " registered twice")
	}
	dialects[d.Name] = d
}

// Lookup returns the protocol registered under name.
func Lookup(name string) (*Dialect, error) {
	d, ok := dialects[name]
	if !ok {
		return nil, fmt.Errorf("unknown protocol %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return d, nil
}

// Names returns the registered protocol names, sorted.
func Names() []string {
	var s []string
	for n := range dialects {
		s = append(s, n)
	}
	sort.Strings(s)
	return s
}

// Supports reports whether the protocol has a command for k.
func (d *Dialect) Supports(k Kind) bool {
	for _, x := range d.Kinds {
		if x == k {
			return true
		}
	}
	return false
}
