// Package load drives a workload at a server over one of tallyd's wire protocols and
// measures throughput and latency the way tallyd-bench reports them.
package load

import (
	"fmt"
	"sort"
	"strings"
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
	Kind    Kind
	Key     []byte
	N       uint32 // resources to acquire or release
	Max     uint32 // counter maximum, semaphore initial value
	Timeout uint32 // milliseconds a Wait may wait
	Opaque  uint32 // serial number, echoed by protocols that have one
}

// Outcome is how the server answered one request.
type Outcome uint8

// Outcomes. OK, NotFound, Busy, NotHeld and TimedOut are answers a correct server gives
// under contention; the rest are errors.
const (
	OK       Outcome = iota
	NotFound         // the key does not exist
	Busy             // resources not available
	NotHeld          // release of resources this connection does not hold
	TimedOut         // a wait ran out of time
	Invalid          // the server called the request invalid
	Unknown          // the server does not know the command
	NoMemory         // the server is out of memory
	Failed           // any other error reply
	NumOutcomes
)

var outcomeNames = [...]string{"ok", "not_found", "busy", "not_held", "timed_out",
	"invalid", "unknown_command", "out_of_memory", "failed"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Error reports whether o is an error rather than a refusal a correct server may give.
func (o Outcome) Error() bool { return o >= Invalid }

// Proto encodes requests and parses replies of one wire protocol. Replies must come
// back in request order. A Proto may keep per-connection state: the runner makes one
// per connection with the protocol's constructor.
type Proto interface {
	// Append appends the encoding of r to dst.
	Append(dst []byte, r Req) []byte
	// Parse parses the reply to sent from the front of buf. It returns n == 0 and a nil
	// error when buf holds only part of a reply; an error means the stream cannot be
	// trusted any more and the connection must be closed.
	Parse(buf []byte, sent Req) (n int, o Outcome, err error)
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
