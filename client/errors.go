package client

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tallyd/tallyd/proto/counter"
)

// Errors a server's reply maps to. A refusal comes back as an *Error that
// unwraps to one of these, so errors.Is(err, client.ErrNotAvailable) tests
// for one status and errors.As(err, &e) gives the whole reply.
var (
	// yrmcds counter and semaphore statuses.
	ErrNotFound       = errors.New("not found")              // 0x01; also a durable value's GET of a missing key
	ErrInvalid        = errors.New("invalid arguments")      // 0x04; PoolCounter ERROR BAD_SYNTAX; names the client cannot send
	ErrNotAvailable   = errors.New("resource not available") // 0x21
	ErrNotAcquired    = errors.New("not acquired")           // 0x22
	ErrUnknownCommand = errors.New("unknown command")        // 0x81; PoolCounter ERROR BAD_COMMAND; Redis "ERR unknown command"
	ErrOutOfMemory    = errors.New("out of memory")          // 0x82

	// PoolCounter replies.
	ErrQueueFull       = errors.New("queue full")        // QUEUE_FULL
	ErrTimeout         = errors.New("timeout")           // TIMEOUT: no slot freed up in time; slock TIMEOUT: the lock stayed held
	ErrLockHeld        = errors.New("lock held")         // LOCK_HELD: the connection holds too many locks
	ErrNotLocked       = errors.New("not locked")        // NOT_LOCKED
	ErrDone            = errors.New("done by another")   // DONE: an ACQ4ANY waiter woken by another's release; it holds nothing
	ErrWaitForResponse = errors.New("wait for response") // ERROR WAIT_FOR_RESPONSE
	ErrWrongStat       = errors.New("wrong stat")        // ERROR WRONG_STAT
	ErrLineTooLong     = errors.New("line too long")     // ERROR LINE_TOO_LONG

	// Redis errors of durable values.
	ErrNotInteger = errors.New("not an integer") // "ERR value is not an integer or out of range"; a GET of a string
	ErrWrongType  = errors.New("wrong type")     // "WRONGTYPE ..."

	// ErrFenced: "FENCED ...", a fenced write refused because the key has
	// seen a higher fencing token: a newer holder of the lock has written.
	ErrFenced = errors.New("fenced off by a newer token")

	// ErrClusterDown: "CLUSTERDOWN ..." (or slock's RESULT_STATE_ERROR): the
	// tallyd cluster has no leader or no quorum just now, or the leader
	// changed while the command was in flight. It is retryable: the outcome
	// of a write is unknown, so retry what is idempotent (every Lock call
	// is, for its LockId is the same), once a new leader is elected.
	ErrClusterDown = errors.New("cluster unavailable")
)

// Errors of the client itself.
var (
	// ErrUnavailable: no server in the key's order could be reached. The
	// error also wraps the last *ConnError.
	ErrUnavailable = errors.New("no server reachable")

	// ErrHoldLost: a Hold's connection broke before Release. Its server
	// released what the hold had (a server releases everything a
	// connection holds when it closes), so another client may have taken
	// it meanwhile.
	ErrHoldLost = errors.New("hold lost with its connection")

	// ErrReleased: Release was called on a Hold already released.
	ErrReleased = errors.New("hold already released")

	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client closed")

	// ErrLockLost: the server says a Lock's LockId no longer holds its
	// name, at an Unlock or a Refresh: it expired (its ttl ran out before a
	// Refresh), or it was granted at CONSISTENCY ONE and a failover forgot
	// it, or someone unlocked it for its holder. Another client may have
	// taken it meanwhile: treat the work done under it as possibly
	// overlapping, and let its fencing token guard what it wrote.
	ErrLockLost = errors.New("lock lost")

	// ErrNotHeld: Unlock or Refresh of a Lock that this process has already
	// unlocked (or found lost); nothing was sent.
	ErrNotHeld = errors.New("lock not held")
)

// Error is a server's refusal of a request: a yrmcds status other than OK,
// a PoolCounter reply other than the one hoped for, or a Redis error. It
// unwraps to the matching Err value above, or to nothing for a reply this
// package has no value for.
type Error struct {
	Addr  string // the server that answered
	Op    string // the request: "acquire", "get", "stats"…; "ACQ4ME", "RELEASE"…; "INCRBY"…
	Key   string // the name or key it was about ("" for stats)
	Reply string // what the server said: "Resource not available", "QUEUE_FULL", "ERR Unknown Command"

	// Status is the yrmcds status (0 for the other protocols).
	Status counter.Status

	kind error
}

func (e *Error) Error() string {
	s := "client: " + e.Op
	if e.Key != "" {
		s += " " + strconv.Quote(e.Key)
	}
	return s + " at " + e.Addr + ": " + e.Reply
}

// Unwrap returns the Err value of the reply, or nil.
func (e *Error) Unwrap() error { return e.kind }

// ConnError is a failure to dial, write or read a server's connection,
// or a reply that makes no sense there. The server is marked down and,
// where it is safe, the request moves on to the next server in the key's
// order.
type ConnError struct {
	Addr string
	Op   string // "dial", "write", "read"
	Err  error
}

func (e *ConnError) Error() string { return "client: " + e.Op + " " + e.Addr + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConnError) Unwrap() error { return e.Err }

// statusKind maps a yrmcds status to its Err value.
func statusKind(s counter.Status) error {
	switch s {
	case counter.StatusNotFound:
		return ErrNotFound
	case counter.StatusInvalid:
		return ErrInvalid
	case counter.StatusNotAvailable:
		return ErrNotAvailable
	case counter.StatusNotAcquired:
		return ErrNotAcquired
	case counter.StatusUnknownCommand:
		return ErrUnknownCommand
	case counter.StatusOutOfMemory:
		return ErrOutOfMemory
	}
	return nil
}

// poolKind maps a PoolCounter reply line to its Err value; ok is false for
// a line that is no reply at all.
func poolKind(line string) (kind error, ok bool) {
	switch line {
	case "QUEUE_FULL":
		return ErrQueueFull, true
	case "TIMEOUT":
		return ErrTimeout, true
	case "LOCK_HELD":
		return ErrLockHeld, true
	case "NOT_LOCKED":
		return ErrNotLocked, true
	case "DONE":
		return ErrDone, true
	case "ERROR BAD_SYNTAX":
		return ErrInvalid, true
	case "ERROR BAD_COMMAND":
		return ErrUnknownCommand, true
	case "ERROR WAIT_FOR_RESPONSE":
		return ErrWaitForResponse, true
	case "ERROR WRONG_STAT":
		return ErrWrongStat, true
	case "ERROR LINE_TOO_LONG":
		return ErrLineTooLong, true
	}
	return nil, strings.HasPrefix(line, "ERROR ")
}

// redisKind maps a Redis error reply (without its "-") to its Err value.
func redisKind(msg string) error {
	switch {
	case hasPrefixFold(msg, "ERR unknown command"):
		return ErrUnknownCommand
	case hasPrefixFold(msg, "ERR value is not an integer"):
		return ErrNotInteger
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return ErrWrongType
	case strings.HasPrefix(msg, "FENCED"):
		return ErrFenced
	case strings.HasPrefix(msg, "CLUSTERDOWN"):
		return ErrClusterDown
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
