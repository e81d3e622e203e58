package pool

import (
	"bytes"
	"errors"
	"math"
)

// Request is one decoded request line.
type Request struct {
	Cmd Cmd

	// Key is the first argument of ACQ4ME and ACQ4ANY, as sent (never
	// percent-decoded); it is empty when the line has no arguments, which
	// the store answers with BadSyntax. It is a view into the buffer passed
	// to Parse, valid only while that buffer is, and its capacity ends with
	// the key so appending to it never overwrites the buffer.
	Key []byte

	// The numeric arguments of ACQ4ME and ACQ4ANY. A missing argument, or
	// one that is not all decimal digits, is 0; values above 2^32-1 are
	// 2^32-1.
	Workers, MaxQueue, Timeout uint32

	// StatArg is, for STATS, the rest of the line after "STATS ", not yet
	// interpreted (a view into the buffer, like Key).
	StatArg []byte
}

// Decoder parses request lines.
type Decoder struct {
	// MaxLine is the longest line accepted, without its "\n" (a "\r"
	// before the "\n" counts). Zero or less means DefaultMaxLine.
	MaxLine int
}

// ErrLineTooLong reports input whose first line is longer than
// Decoder.MaxLine: framing is lost, the server replies LineTooLong and
// closes the connection.
var ErrLineTooLong = errors.New("pool: request line longer than the line limit")

// Parse decodes the line at the start of buf into *req and returns the
// number of bytes it took, "\n" included. Parse looks at most MaxLine+1
// bytes into buf.
//
// It returns n == 0 and a nil error when buf holds no "\n" yet and no more
// than MaxLine bytes: the caller waits for more. It returns n == 0 and
// ErrLineTooLong as soon as the first MaxLine+1 bytes hold no "\n", line
// complete or not. Whenever n == 0, *req is left untouched.
//
// A line is never an error: anything that is not a command is CmdBad.
// Commands are case-sensitive prefixes: "ACQ4ME " and "ACQ4ANY " (with
// the space), "RELEASE" (whatever follows) and "STATS " (with the space).
// Arguments are separated by runs of spaces, nothing else (a tab is part of
// an argument); arguments after the fourth are ignored.
func (d *Decoder) Parse(buf []byte, req *Request) (n int, err error) {
	limit := d.MaxLine
	if limit <= 0 {
		limit = DefaultMaxLine
	}
	scan := buf
	if limit < math.MaxInt && len(scan) > limit+1 {
		scan = scan[:limit+1]
	}
	i := bytes.IndexByte(scan, '\n')
	if i < 0 {
		if len(buf) > limit {
			return 0, ErrLineTooLong
		}
		return 0, nil
	}
	line := buf[:i:i]
	if i > 0 && line[i-1] == '\r' {
		line = line[: i-1 : i-1]
	}
	*req = Request{}
	switch {
	case hasPrefix(line, "ACQ4ME "):
		req.Cmd = CmdAcq4Me
		acquire(line[len("ACQ4ME "):], req)
	case hasPrefix(line, "ACQ4ANY "):
		req.Cmd = CmdAcq4Any
		acquire(line[len("ACQ4ANY "):], req)
	case hasPrefix(line, "RELEASE"):
		req.Cmd = CmdRelease
	case hasPrefix(line, "STATS "):
		req.Cmd = CmdStats
		req.StatArg = line[len("STATS "):]
	}
	return i + 1, nil
}

func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// acquire reads "key workers maxqueue timeout" into req.
func acquire(args []byte, req *Request) {
	var tok []byte
	tok, args = token(args)
	req.Key = tok
	tok, args = token(args)
	req.Workers = number(tok)
	tok, args = token(args)
	req.MaxQueue = number(tok)
	tok, _ = token(args)
	req.Timeout = number(tok)
}

// token splits off the first space-separated token of b, skipping the run
// of spaces before it. tok is empty when b has nothing but spaces; its
// capacity ends with it.
func token(b []byte) (tok, rest []byte) {
	i := 0
	for i < len(b) && b[i] == ' ' {
		i++
	}
	j := bytes.IndexByte(b[i:], ' ')
	if j < 0 {
		return b[i:len(b):len(b)], nil
	}
	j += i
	return b[i:j:j], b[j:]
}

// number is the value of a token of decimal digits, saturating at
// 2^32-1, or 0 for a token with any other byte in it (or none at all).
func number(tok []byte) uint32 {
	var v uint64
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0
		}
		if v <= math.MaxUint32 {
			v = v*10 + uint64(c-'0')
		}
	}
	return uint32(min(v, math.MaxUint32))
}
