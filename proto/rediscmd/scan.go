package rediscmd

import (
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
)

// This file holds SCAN, with a cursor the store gives (it walks a bounded number of keys
// per call), and the bounded KEYS.

// Scan is a parsed SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].
type Scan struct {
	Cursor uint64
	Match  []byte // nil: every key (a view into the request)
	Count  int    // keys to examine in this call: COUNT, 10 by default, at most MaxScanCount
	Type   []byte // nil: any type; else "string", "hash" (any case); another name matches nothing
}

// ScanCount is SCAN's default COUNT, as in Redis.
const ScanCount = 10

// MaxScanCount bounds the keys one SCAN call examines, whatever COUNT asks: COUNT is a
// hint in Redis too, and a call that returns fewer keys with a cursor other than 0 is a
// normal one. A thousand keys take well under a millisecond.
const MaxScanCount = 1000

// ParseScan parses SCAN args (args[0] is the name) into s. Errors are *TextError with the
// Redis error text.
func ParseScan(args [][]byte, s *Scan) error {
	*s = Scan{Count: ScanCount}
	if len(args) < 2 {
		return arity("SCAN")
	}
	c, ok := cursor(args[1])
	if !ok {
		return &kvErr{Msg: "invalid cursor"}
	}
	s.Cursor = c
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return errSyntax
		}
		switch o, v := args[i], args[i+1]; {
		case resp.Is(o, "MATCH"):
			s.Match = v
			if len(v) == 1 && v[0] == '*' {
				s.Match = nil
			}
		case resp.Is(o, "COUNT"):
			n, ok := resp.ParseInt(v)
			if !ok {
				return errNotInt
			}
			if n < 1 {
				return errSyntax
			}
			s.Count = int(min(n, MaxScanCount))
		case resp.Is(o, "TYPE"):
			s.Type = v
		default:
			return errSyntax
		}
	}
	return nil
}

// Wants returns the name of the key whose value record is rec if SCAN s returns it: the
// record has a KEY property that matches MATCH, and its type is TYPE.
func (s *Scan) Wants(rec []byte) ([]byte, bool) {
	name, ok := KeyName(rec)
	if !ok {
		return nil, false
	}
	if s.Type != nil && !resp.Is(s.Type, TypeName(rec)) {
		return nil, false
	}
	if s.Match != nil && !Match(s.Match, name) {
		return nil, false
	}
	return name, true
}

// AppendScanReply renders SCAN's reply: the next cursor (0: the scan is complete) and the
// key names.
func AppendScanReply(dst []byte, next uint64, names [][]byte) []byte {
	dst = resp.AppendArray(dst, 2)
	var b [20]byte
	dst = resp.AppendBulk(dst, strconv.AppendUint(b[:0], next, 10))
	dst = resp.AppendArray(dst, len(names))
	for _, n := range names {
		dst = resp.AppendBulk(dst, n)
	}
	return dst
}

// KeysLimit is the default number of keys with a value past which KEYS is refused. KEYS
// answers one array whose length comes first, so it examines every key before it can
// send a byte: about 20 ns a key for the store's walk and 55 ns for the name, the pattern
// and the bulk string, so 100,000 keys hold the loop about 8 ms (a map walk of 300,000
// took 266-413 ms before). Past it SCAN does the same job in bounded steps.
const KeysLimit = 100_000

// KeysRefused is the error of a KEYS over a database of n keys with a value, more than
// limit.
func KeysRefused(n, limit int) error {
	return &kvErr{Msg: "KEYS would examine " + strconv.Itoa(n) + " keys, more than the " + strconv.Itoa(limit) +
		" it examines at once: use SCAN"}
}

// cursor reads a SCAN cursor as Redis 7 does (C's strtoul): decimal digits, after an
// optional sign; a negative one wraps around (-1 is the largest cursor: past the end).
func cursor(b []byte) (uint64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return 0, false
	}
	c, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		c = -c
	}
	return c, true
}
