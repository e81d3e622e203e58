// Package resp encodes and decodes RESP2, the Redis serialization protocol, for servers and their clients.
//
// A request is an array of bulk strings, as redis-cli and redis-benchmark
// send it:
//
//	*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n
//
// The package is a pure codec with no I/O: [Decoder.Parse] splits one
// request into argument views into the caller's buffer without copying or
// allocating, and the Append functions write replies onto a caller's
// buffer without allocating when it has room. Inline commands (a request
// line not starting with '*') are reported as [ErrInline] and not parsed.
//
// The client side ([AppendCommand], [ParseReply]) serves tests, benchmarks
// and tools; it may allocate.
//
// Numbers follow Redis's string2ll: [ParseInt] accepts exactly the
// canonical decimal form of an int64, so "-0", "+1", "007", " 1" and
// "9223372036854775808" are not numbers, in arguments and in length
// lines alike.
package resp

import (
	"errors"
	"strconv"
)

// ErrInline reports a request that does not start with '*': an inline
// command (or stray bytes such as an empty line). Parse does not read it;
// a server that serves arrays only closes the connection.
var ErrInline = errors.New("resp: inline command (request does not start with '*')")

// ProtocolError reports a malformed request or reply, or one over a
// Decoder's limits. Framing is lost after it: the connection must be
// closed.
type ProtocolError struct {
	Offset int    // offset of the offending byte in the buffer that was parsed
	Msg    string // what was wrong, e.g. "bulk length has byte 'x'"

	// Reply is the error a Redis server answers before it closes the connection, without
	// its "ERR " prefix: "Protocol error: invalid multibulk length" for a bad or too large
	// argument count, "Protocol error: invalid bulk length" for a bad or too large argument
	// length, "Protocol error: expected '$', got 'x'" (networking.c, processMultibulkBuffer).
	// Decoder.Parse sets it; ParseReply does not.
	Reply string

	over bool // a length over its limit
}

func (e *ProtocolError) Error() string {
	return "resp: " + e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Is reports whether arg equals name with ASCII letters compared without
// case: Is(arg, "SET") holds for "set", "Set" and "SET". Other bytes,
// non-ASCII ones included, must match exactly.
func Is(arg []byte, name string) bool {
	if len(arg) != len(name) {
		return false
	}
	for i := range len(arg) {
		a, b := arg[i], name[i]
		if a == b {
			continue
		}
		if a|0x20 != b|0x20 || a|0x20 < 'a' || a|0x20 > 'z' {
			return false
		}
	}
	return true
}

// ParseInt parses arg as Redis's string2ll does: an optional '-' and
// decimal digits, no leading zeros ("0" alone is zero), no '+', no spaces,
// no "-0", and a value that fits an int64. It reports false for anything
// else, the empty string included. Every int64 has exactly one accepted
// form, the one strconv.FormatInt gives.
func ParseInt(arg []byte) (int64, bool) {
	neg := len(arg) > 0 && arg[0] == '-'
	digits := arg
	if neg {
		digits = arg[1:]
	}
	if len(digits) == 0 || digits[0] < '0' || digits[0] > '9' ||
		digits[0] == '0' && (len(digits) > 1 || neg) {
		return 0, false
	}
	var v uint64
	for _, c := range digits {
		if c < '0' || c > '9' || v > (1<<63)/10 {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
		if v > 1<<63 { // with the check above, v*10 never wraps
			return 0, false
		}
	}
	if neg {
		return -int64(v), true // v == 1<<63 wraps to MinInt64, as intended
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}
