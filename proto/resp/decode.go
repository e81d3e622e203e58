package resp

import "strconv"

// Defaults for the Decoder's limits.
const (
	// DefaultMaxArgs is the default for Decoder.MaxArgs.
	DefaultMaxArgs = 1024

	// DefaultMaxBulk is the default for Decoder.MaxBulk: a 1 MiB value,
	// the largest the lock store keeps, and 64 bytes to spare.
	DefaultMaxBulk = 1<<20 + 64

	// DefaultMaxCommand is the default for Decoder.MaxCommand. Without it
	// MaxArgs arguments of MaxBulk bytes would let one request claim a
	// gigabyte of buffer.
	DefaultMaxCommand = 8 << 20
)

// Decoder parses requests. Its zero value uses the default limits.
type Decoder struct {
	// MaxArgs is the most arguments one request may have. Zero or less
	// means DefaultMaxArgs.
	MaxArgs int

	// MaxBulk is the longest argument, in bytes. Zero or less means
	// DefaultMaxBulk.
	MaxBulk int

	// MaxCommand is the longest request, in bytes, length lines and
	// CRLFs included; it bounds what one connection makes the caller
	// buffer. Zero or less means DefaultMaxCommand.
	MaxCommand int

	// Unauthenticated applies Redis's limits for a connection that must log
	// in first (networking.c, authRequired): at most UnauthMaxArgs arguments
	// of at most UnauthMaxBulk bytes, the errors saying "unauthenticated".
	Unauthenticated bool

	// Need is set by each Parse that returns n == 0 and a nil error: the fewest bytes
	// buf must hold before Parse can return the request, as far as the bytes in show
	// (the end of the argument it stopped in), or 0 when any byte may complete it. A
	// caller that must copy its input to call Parse waits for that many.
	Need int
}

// Redis's limits on a request of a connection that has not logged in yet.
const (
	UnauthMaxArgs = 10
	UnauthMaxBulk = 16384
)

// Parse decodes the request at the start of buf: a RESP array of bulk
// strings. It appends a view of each argument to args[:0] and returns the
// result as out, and the number of bytes the request took as n. The views
// point into buf, valid only while buf is, and each one's capacity ends
// with it, so appending to an argument never overwrites buf. Parse does not
// allocate unless args lacks the capacity for the arguments.
//
// Whenever n == 0, out is args[:0] (with any capacity it grew) and:
//   - err == nil: buf does not hold a whole request yet (this includes an
//     empty buf); the caller waits for more bytes and calls Parse again
//     with them appended;
//   - err == ErrInline: buf does not start with '*';
//   - err is a *ProtocolError: buf starts with a malformed request or one
//     over a limit; the caller closes the connection.
//
// Malformed input is reported as soon as the byte at fault (the
// ProtocolError's Offset) is in buf. A length that breaks a limit is
// reported as soon as enough of its digits are in, before any of the data
// it announces: for MaxCommand, a request still needs at least 6 bytes
// ("$0\r\n\r\n") for each argument its count announces. So Parse never
// waits toward a claimed length it would refuse, and a result never
// changes as more bytes arrive.
//
// Lengths are strict: decimal digits without leading zeros or '+' (see
// [ParseInt]), each line ending in "\r\n", and each argument followed by
// "\r\n". As in Redis, an array of zero or negative length ("*0\r\n",
// "*-1\r\n") is a request with no arguments, which the caller skips, and
// a bulk of negative length ("$-1\r\n") is an error.
func (d *Decoder) Parse(buf []byte, args [][]byte) (out [][]byte, n int, err error) {
	out = args[:0]
	d.Need = 0
	if len(buf) == 0 {
		return out, 0, nil
	}
	if buf[0] != '*' {
		return out, 0, ErrInline
	}
	maxArgs, maxBulk, maxCmd := d.MaxArgs, d.MaxBulk, d.MaxCommand
	if maxArgs <= 0 {
		maxArgs = DefaultMaxArgs
	}
	if maxBulk <= 0 {
		maxBulk = DefaultMaxBulk
	}
	if maxCmd <= 0 {
		maxCmd = DefaultMaxCommand
	}
	countReply, bulkReply := "Protocol error: invalid multibulk length", "Protocol error: invalid bulk length"
	if d.Unauthenticated {
		maxArgs, maxBulk = min(maxArgs, UnauthMaxArgs), min(maxBulk, UnauthMaxBulk)
	}
	count, p, err := length(buf, 0, maxArgs, maxCmd, 6, 0, true)
	if p == 0 {
		if d.Unauthenticated && overLimit(err) {
			countReply = "Protocol error: unauthenticated multibulk length"
		}
		return out, 0, redisReply(err, countReply)
	}
	for j := range count {
		if p >= len(buf) {
			return out[:0], 0, nil
		}
		if buf[p] != '$' {
			return out[:0], 0, &ProtocolError{Offset: p, Msg: "expected '$', got " + quoteByte(buf[p]),
				Reply: "Protocol error: expected '$', got '" + string(rune(printable(buf[p]))) + "'"}
		}
		size, q, err := length(buf, p, maxBulk, maxCmd, 1, 2+6*(count-j-1), false)
		if q == 0 {
			if d.Unauthenticated && overLimit(err) {
				bulkReply = "Protocol error: unauthenticated bulk length"
			}
			return out[:0], 0, redisReply(err, bulkReply)
		}
		end := q + size
		for i := end; i < end+2 && i < len(buf); i++ {
			if buf[i] != "\r\n"[i-end] {
				msg := "bulk of " + strconv.Itoa(size) + " bytes is followed by " + quoteByte(buf[i]) + ", not \"\\r\\n\""
				return out[:0], 0, &ProtocolError{Offset: i, Msg: msg, Reply: "Protocol error: " + msg}
			}
		}
		if len(buf) < end+2 {
			d.Need = end + 2
			return out[:0], 0, nil
		}
		out = append(out, buf[q:end:end])
		p = end + 2
	}
	return out, p, nil
}

// length reads the length line whose type byte ('*' or '$') is at buf[at]:
// a decimal number up to "\r\n". A multibulk length may be negative (any
// negative value reads as 0); a bulk length may not. It returns the value
// and the offset just past the "\r\n", or next == 0 with a nil error when
// the line is incomplete, or next == 0 with a *ProtocolError.
//
// The limits are checked digit by digit, so that a number that is going to
// exceed one is an error as soon as enough of its digits are in: a positive
// value may not exceed limit, and the request must fit in maxCmd bytes,
// knowing that it needs at least this line, per bytes for each unit of the
// value, and rest bytes more.
func length(buf []byte, at, limit, maxCmd, per, rest int, multibulk bool) (v, next int, err error) {
	what := "bulk length"
	if multibulk {
		what = "multibulk length"
	}
	i := at + 1
	neg := false
	if i < len(buf) && buf[i] == '-' {
		if !multibulk {
			return 0, 0, &ProtocolError{Offset: i, Msg: "bulk length is negative"}
		}
		neg = true
		i++
	}
	start := i
	var u uint64 // magnitude; at most 1<<63 (negative), or limit
	for ; i < len(buf); i++ {
		c := buf[i]
		switch {
		case c >= '0' && c <= '9':
			if i > start && buf[start] == '0' {
				return 0, 0, &ProtocolError{Offset: i, Msg: what + " has a leading zero"}
			}
			if neg && c == '0' && i == start {
				return 0, 0, &ProtocolError{Offset: i, Msg: what + " is -0"}
			}
			if u > (1<<63)/10 {
				return 0, 0, &ProtocolError{Offset: i, Msg: what + " overflows int64"}
			}
			u = u*10 + uint64(c-'0')
			if neg {
				if u > 1<<63 {
					return 0, 0, &ProtocolError{Offset: i, Msg: what + " overflows int64"}
				}
				if need := i + 3; need > maxCmd { // this line, with its "\r\n"
					return 0, 0, tooLong(uint64(need), maxCmd, i)
				}
				continue
			}
			if u > uint64(limit) {
				return 0, 0, &ProtocolError{Offset: i, Msg: what + " of at least " + strconv.FormatUint(u, 10) +
					" exceeds the limit " + strconv.Itoa(limit), over: true}
			}
			// u <= limit <= MaxInt, and per <= 6: need cannot overflow a uint64.
			if need := uint64(i+3+rest) + uint64(per)*u; need > uint64(maxCmd) {
				return 0, 0, tooLong(need, maxCmd, i)
			}
		case c == '\r':
			if i == start {
				return 0, 0, &ProtocolError{Offset: i, Msg: what + " has no digits"}
			}
			if i+1 == len(buf) {
				return 0, 0, nil
			}
			if buf[i+1] != '\n' {
				return 0, 0, &ProtocolError{Offset: i + 1, Msg: what + " line ends in \"\\r\" without \"\\n\""}
			}
			if neg {
				return 0, i + 2, nil
			}
			return int(u), i + 2, nil
		default:
			return 0, 0, &ProtocolError{Offset: i, Msg: what + " has byte " + quoteByte(c)}
		}
	}
	return 0, 0, nil
}

// overLimit reports whether err is a length over its limit (not one malformed, nor a request
// too long for MaxCommand).
func overLimit(err error) bool {
	pe, ok := err.(*ProtocolError)
	return ok && pe.over
}

// redisReply sets the Redis reply of err, a *ProtocolError of a length line, to reply.
func redisReply(err error, reply string) error {
	if pe, ok := err.(*ProtocolError); ok {
		pe.Reply = reply
	}
	return err
}

// printable is c if it is printable ASCII, else '?': what an error reply may quote.
func printable(c byte) byte {
	if c >= 0x20 && c < 0x7f {
		return c
	}
	return '?'
}

func tooLong(need uint64, maxCmd, at int) error {
	return &ProtocolError{Offset: at, Msg: "request of at least " + strconv.FormatUint(need, 10) +
		" bytes exceeds the limit " + strconv.Itoa(maxCmd)}
}

// quoteByte renders c for an error message: 'x' when printable ASCII,
// else 0xNN.
func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f && c != '\'' && c != '\\' {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "0x" + string([]byte{hex[c>>4], hex[c&15]})
}
