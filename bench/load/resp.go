package load

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
)

func init() {
	Register(&Dialect{Name: "resp", Port: 6379, Kinds: []Kind{Acquire, Release, Get, Noop},
		New: func() Proto { return respCounter{} },
		Doc: "RESP counters (Redis): INCR/DECR (INCRBY/DECRBY for N > 1), GET, PING"})
}

// respCounter speaks RESP2 to a Redis-compatible server: Acquire is INCR, Release is DECR.
type respCounter struct{}

// maxRESPDepth bounds the nesting of arrays in a reply.
const maxRESPDepth = 8

// Commands of respCounter.
var (
	wordIncr   = []byte("INCR")
	wordIncrBy = []byte("INCRBY")
	wordDecr   = []byte("DECR")
	wordDecrBy = []byte("DECRBY")
	wordGet    = []byte("GET")
)

func (respCounter) Append(dst []byte, r *Req) []byte {
	one, by := wordIncr, wordIncrBy
	switch r.Kind {
	case Release:
		one, by = wordDecr, wordDecrBy
	case Get:
		return resp.AppendCommandBytes(dst, wordGet, r.Key)
	case Noop:
		return resp.AppendCommand(dst, "PING")
	}
	if r.N == 1 {
		return resp.AppendCommandBytes(dst, one, r.Key)
	}
	var tmp [10]byte
	return resp.AppendCommandBytes(dst, by, r.Key, strconv.AppendUint(tmp[:0], uint64(r.N), 10))
}

func (respCounter) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	n, typ, null, err := parseRESP(buf, 0)
	if err != nil || n == 0 {
		return 0, 0, err
	}
	switch {
	case typ == '-':
		return n, Failed, nil
	case null:
		return n, NotFound, nil
	}
	return n, OK, nil
}

// parseRESP parses one RESP2 value at the front of buf. It returns the bytes it took
// (0 when buf holds only part of the value), the value's type byte, and whether it is
// a null bulk string or array.
func parseRESP(buf []byte, depth int) (n int, typ byte, null bool, err error) {
	if len(buf) == 0 {
		return 0, 0, false, nil
	}
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		if len(buf) > 64<<10 {
			return 0, 0, false, fmt.Errorf("RESP reply line longer than %d bytes", 64<<10)
		}
		return 0, 0, false, nil
	}
	if i == 0 || buf[i-1] != '\r' {
		return 0, 0, false, fmt.Errorf("RESP reply line %q does not end in CRLF", trim(buf[:i+1]))
	}
	line := buf[1 : i-1]
	n = i + 1
	typ = buf[0]
	switch typ {
	case '+', '-':
		return n, typ, false, nil
	case ':':
		if _, ok := atoi(line); !ok {
			return 0, 0, false, fmt.Errorf("RESP integer reply %q is not a number", trim(buf[:i+1]))
		}
		return n, typ, false, nil
	case '$':
		size, ok := atoi(line)
		if !ok || size < -1 || size > maxReplyBody {
			return 0, 0, false, fmt.Errorf("RESP bulk reply has bad length %q", trim(line))
		}
		if size == -1 {
			return n, typ, true, nil
		}
		end := n + int(size) + 2
		if len(buf) < end {
			return 0, 0, false, nil
		}
		if buf[end-2] != '\r' || buf[end-1] != '\n' {
			return 0, 0, false, fmt.Errorf("RESP bulk reply of %d bytes is not followed by CRLF", size)
		}
		return end, typ, false, nil
	case '*':
		count, ok := atoi(line)
		if !ok || count < -1 || count > 1<<20 {
			return 0, 0, false, fmt.Errorf("RESP array reply has bad length %q", trim(line))
		}
		if count == -1 {
			return n, typ, true, nil
		}
		if depth >= maxRESPDepth {
			return 0, 0, false, fmt.Errorf("RESP reply nests arrays deeper than %d", maxRESPDepth)
		}
		for ; count > 0; count-- {
			m, _, _, err := parseRESP(buf[n:], depth+1)
			if err != nil || m == 0 {
				return 0, 0, false, err
			}
			n += m
		}
		return n, typ, false, nil
	}
	return 0, 0, false, fmt.Errorf("RESP reply starts with %q, not one of + - : $ *", typ)
}

// respArray frames the RESP array reply at the front of buf, as parseRESP does, and
// records in at where each of its first len(at) elements starts. It returns the bytes
// the array took (0: buf holds only part of it) and its element count; a reply that is
// not an array is an error.
func respArray(buf []byte, at []int) (n int, count int64, err error) {
	i := bytes.IndexByte(buf, '\n')
	switch {
	case len(buf) > 0 && buf[0] != '*':
		return 0, 0, fmt.Errorf("RESP reply %q is not an array", trim(buf[:max(i+1, min(len(buf), 40))]))
	case i < 0:
		return 0, 0, nil
	case buf[i-1] != '\r':
		return 0, 0, fmt.Errorf("RESP reply line %q does not end in CRLF", trim(buf[:i+1]))
	}
	count, ok := atoi(buf[1 : i-1])
	if !ok || count < 0 || count > 1<<20 {
		return 0, 0, fmt.Errorf("RESP array reply has bad length %q", trim(buf[1:i-1]))
	}
	n = i + 1
	for e := int64(0); e < count; e++ {
		if e < int64(len(at)) {
			at[e] = n
		}
		m, _, _, err := parseRESP(buf[n:], 1)
		if err != nil || m == 0 {
			return 0, 0, err
		}
		n += m
	}
	return n, count, nil
}

// atoi parses a decimal integer with an optional minus sign, without allocating.
func atoi(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// trim shortens b for an error message.
func trim(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// Answer is the sink's side: every complete command array gets ":1\r\n".
func (respCounter) Answer(dst, buf []byte) ([]byte, int, error) {
	n, typ, _, err := parseRESP(buf, 0)
	if err != nil || n == 0 {
		return dst, 0, err
	}
	if typ != '*' {
		return dst, 0, fmt.Errorf("RESP request starts with %q, want an array", typ)
	}
	return append(dst, ":1\r\n"...), n, nil
}
