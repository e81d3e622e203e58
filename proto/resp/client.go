package resp

import (
	"bytes"
	"strconv"
)

// The client side: requests out, replies in.

// AppendCommand appends a request of the given arguments to dst, as
// redis-cli sends it: "*N\r\n" and a bulk string for each argument.
func AppendCommand(dst []byte, args ...string) []byte {
	dst = appendHeader(dst, '*', len(args))
	for _, a := range args {
		dst = AppendBulkString(dst, a)
	}
	return dst
}

// AppendCommandBytes is AppendCommand for byte-slice arguments.
func AppendCommandBytes(dst []byte, args ...[]byte) []byte {
	dst = appendHeader(dst, '*', len(args))
	for _, a := range args {
		dst = AppendBulk(dst, a)
	}
	return dst
}

// MaxReplyDepth is how deeply ParseReply lets arrays nest: an array at
// depth MaxReplyDepth+1 is an error.
const MaxReplyDepth = 256

// Reply is one decoded RESP2 reply.
type Reply struct {
	// Kind is the reply's type byte: '+' simple string, '-' error,
	// ':' integer, '$' bulk string or '*' array.
	Kind byte

	// Str is the text of a simple string or error (without "+" or "-")
	// or the bytes of a bulk string: a view into the buffer passed to
	// ParseReply, valid only while that buffer is, with its capacity
	// ending with it. Copy it to keep it.
	Str []byte

	Int   int64   // the value of an integer reply
	Null  bool    // "$-1" or "*-1": a null bulk string or null array
	Elems []Reply // the elements of an array; empty for a null or empty one
}

// ParseReply decodes the reply at the start of buf and returns it and the
// number of bytes it took. It returns n == 0 and a nil error when buf does
// not yet hold a whole reply, and n == 0 and a *ProtocolError when it
// starts with something that is not a RESP2 reply: an unknown type byte
// (RESP3 types included), a number that [ParseInt] rejects, a negative
// length other than -1, a line with a "\r" or "\n" not in its final
// "\r\n", a bulk string not followed by "\r\n", or arrays nested deeper
// than MaxReplyDepth.
//
// Unlike the server side, ParseReply allocates (the slices of Elems).
func ParseReply(buf []byte) (r Reply, n int, err error) {
	r, n, err = parseReply(buf, 0, 0)
	if n == 0 {
		r = Reply{}
	}
	return r, n, err
}

// SkipReply returns the length of the reply at the start of buf, as
// ParseReply does, without decoding it: it tells where one reply ends in a
// stream of them. It returns n == 0 and a nil error while buf holds only
// part of a reply, and n == 0 and the *ProtocolError ParseReply returns for
// a malformed one. It never allocates, but for the error.
func SkipReply(buf []byte) (n int, err error) {
	var left [MaxReplyDepth]int64 // elements still to come of each array open, innermost last
	depth := 0
	at := 0
	for {
		if at >= len(buf) {
			return 0, nil
		}
		kind := buf[at]
		switch kind {
		case '+', '-', ':', '$', '*':
		default:
			return 0, &ProtocolError{Offset: at, Msg: "unknown reply type " + quoteByte(kind)}
		}
		line, next, err := replyLine(buf, at)
		if next == 0 {
			return 0, err
		}
		if kind != '+' && kind != '-' {
			v, ok := ParseInt(line)
			switch {
			case !ok:
				return 0, &ProtocolError{Offset: at + 1, Msg: "reply " + quoteByte(kind) + " has a bad number " + strconv.Quote(string(line))}
			case kind == ':' || v == -1:
			case v < 0:
				return 0, &ProtocolError{Offset: at + 1, Msg: "reply " + quoteByte(kind) + " has a negative length " + strconv.Quote(string(line))}
			case kind == '$':
				if uint64(v) > uint64(len(buf)-next) {
					return 0, nil
				}
				end := next + int(v)
				for i := end; i < end+2 && i < len(buf); i++ {
					if buf[i] != "\r\n"[i-end] {
						return 0, &ProtocolError{Offset: i, Msg: "bulk of " + strconv.FormatInt(v, 10) +
							" bytes is followed by " + quoteByte(buf[i]) + ", not \"\\r\\n\""}
					}
				}
				if len(buf) < end+2 {
					return 0, nil
				}
				next = end + 2
			case depth >= MaxReplyDepth:
				return 0, &ProtocolError{Offset: at, Msg: "arrays nested deeper than " + strconv.Itoa(MaxReplyDepth)}
			case v > 0:
				left[depth] = v
				depth++
				at = next
				continue
			}
		}
		// A whole element ends at next, and with it every array it was the last of.
		at = next
		for depth > 0 {
			if left[depth-1]--; left[depth-1] > 0 {
				break
			}
			depth--
		}
		if depth == 0 {
			return at, nil
		}
	}
}

// parseReply decodes the reply at buf[at:], an element at the given
// depth. next is the offset past it, or 0 with err nil when incomplete.
func parseReply(buf []byte, at, depth int) (r Reply, next int, err error) {
	if at >= len(buf) {
		return r, 0, nil
	}
	r.Kind = buf[at]
	switch r.Kind {
	case '+', '-', ':', '$', '*':
	default:
		return r, 0, &ProtocolError{Offset: at, Msg: "unknown reply type " + quoteByte(r.Kind)}
	}
	line, next, err := replyLine(buf, at)
	if next == 0 {
		return r, 0, err
	}
	if r.Kind == '+' || r.Kind == '-' {
		r.Str = line
		return r, next, nil
	}
	v, ok := ParseInt(line)
	if !ok {
		return r, 0, &ProtocolError{Offset: at + 1, Msg: "reply " + quoteByte(r.Kind) + " has a bad number " + strconv.Quote(string(line))}
	}
	switch {
	case r.Kind == ':':
		r.Int = v
		return r, next, nil
	case v == -1:
		r.Null = true
		return r, next, nil
	case v < 0:
		return r, 0, &ProtocolError{Offset: at + 1, Msg: "reply " + quoteByte(r.Kind) + " has a negative length " + strconv.Quote(string(line))}
	case r.Kind == '$':
		if uint64(v) > uint64(len(buf)-next) {
			return r, 0, nil // also keeps next+v from overflowing
		}
		end := next + int(v)
		for i := end; i < end+2 && i < len(buf); i++ {
			if buf[i] != "\r\n"[i-end] {
				return r, 0, &ProtocolError{Offset: i, Msg: "bulk of " + strconv.FormatInt(v, 10) +
					" bytes is followed by " + quoteByte(buf[i]) + ", not \"\\r\\n\""}
			}
		}
		if len(buf) < end+2 {
			return r, 0, nil
		}
		r.Str = buf[next:end:end]
		return r, end + 2, nil
	}
	if depth >= MaxReplyDepth {
		return r, 0, &ProtocolError{Offset: at, Msg: "arrays nested deeper than " + strconv.Itoa(MaxReplyDepth)}
	}
	// Every element takes 3 bytes or more: never trust v to size Elems.
	r.Elems = make([]Reply, 0, min(v, int64(len(buf)-next)/3))
	for range v {
		var e Reply
		e, next, err = parseReply(buf, next, depth+1)
		if next == 0 {
			return r, 0, err
		}
		r.Elems = append(r.Elems, e)
	}
	return r, next, nil
}

// replyLine returns the content of the line whose type byte is at buf[at]
// and the offset past its "\r\n"; next == 0 with err nil when the line is
// incomplete.
func replyLine(buf []byte, at int) (line []byte, next int, err error) {
	rest := buf[at+1:]
	i := bytes.IndexByte(rest, '\r')
	if j := bytes.IndexByte(rest, '\n'); j >= 0 && (i < 0 || j < i) {
		return nil, 0, &ProtocolError{Offset: at + 1 + j, Msg: "reply line has \"\\n\" without \"\\r\""}
	}
	if i < 0 || i+1 == len(rest) {
		return nil, 0, nil
	}
	if rest[i+1] != '\n' {
		return nil, 0, &ProtocolError{Offset: at + 2 + i, Msg: "reply line has \"\\r\" without \"\\n\""}
	}
	return rest[:i:i], at + 1 + i + 2, nil
}
