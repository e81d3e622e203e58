package pool

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// model is a second, deliberately plain reading of NOTES §3 that FuzzParse checks Parse
// against. line is one whole line without its "\n".
func model(line string) Request {
	line = strings.TrimSuffix(line, "\r")
	var r Request
	var args string
	switch {
	case strings.HasPrefix(line, "ACQ4ME "):
		r.Cmd, args = CmdAcq4Me, line[7:]
	case strings.HasPrefix(line, "ACQ4ANY "):
		r.Cmd, args = CmdAcq4Any, line[8:]
	case strings.HasPrefix(line, "RELEASE"):
		return Request{Cmd: CmdRelease}
	case strings.HasPrefix(line, "STATS "):
		return Request{Cmd: CmdStats, StatArg: []byte(line[6:])}
	default:
		return Request{Cmd: CmdBad}
	}
	var toks []string
	for _, t := range strings.Split(args, " ") {
		if t != "" {
			toks = append(toks, t)
		}
	}
	num := func(i int) uint32 {
		if i >= len(toks) || strings.TrimLeft(toks[i], "0123456789") != "" {
			return 0
		}
		v, err := strconv.ParseUint(toks[i], 10, 32)
		if err != nil { // out of range: all digits were checked above
			return 1<<32 - 1
		}
		return uint32(v)
	}
	if len(toks) > 0 {
		r.Key = []byte(toks[0])
	}
	r.Workers, r.MaxQueue, r.Timeout = num(1), num(2), num(3)
	return r
}

func FuzzParse(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzParse.
	f.Add([]byte("ACQ4ME k 1 2 3\nRELEASE\n"), uint16(0))
	f.Add([]byte("ACQ4ANY k\t 4294967296 x 3\r\nSTATS FULL\n"), uint16(16))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16) {
		d := Decoder{MaxLine: int(maxLine)}
		limit := d.MaxLine
		if limit == 0 {
			limit = DefaultMaxLine
		}
		// Parse line after line, as a connection would.
		for buf := data; ; {
			r := Request{Cmd: Cmd(99)}
			n, err := d.Parse(buf, &r)
			i := bytes.IndexByte(buf, '\n')
			switch {
			case i > limit || (i < 0 && len(buf) > limit):
				if n != 0 || !errors.Is(err, ErrLineTooLong) {
					t.Fatalf("limit %d, line of %d in %d bytes: Parse = %d, %v; want ErrLineTooLong", limit, i, len(buf), n, err)
				}
				return
			case i < 0:
				if n != 0 || err != nil || r.Cmd != 99 {
					t.Fatalf("no newline in %d bytes: Parse = %d, %v, %+v", len(buf), n, err, r)
				}
				return
			case err != nil || n != i+1 || n > len(buf):
				t.Fatalf("line of %d: Parse = %d, %v", i, n, err)
			}
			line := buf[:i]
			if want := model(string(line)); !eqRequest(r, want) {
				t.Fatalf("Parse(%q)\n got %+v\nwant %+v", line, r, want)
			}
			for _, v := range [][]byte{r.Key, r.StatArg} {
				if len(v) > 0 && (!inside(v, line) || cap(v) != len(v)) {
					t.Fatalf("%q is not a capped view into the line %q", v, line)
				}
			}
			reencode(t, r)
			buf = buf[n:]
		}
	})
}

// reencode writes r back with the client appenders, when it can be, and checks that it
// parses to the same request.
func reencode(t *testing.T, r Request) {
	var enc []byte
	switch r.Cmd {
	case CmdAcq4Me, CmdAcq4Any:
		if len(r.Key) == 0 {
			return // a missing key cannot be sent (the line would read the next token as the key)
		}
		if r.Cmd == CmdAcq4Me {
			enc = AppendAcq4Me(nil, r.Key, r.Workers, r.MaxQueue, r.Timeout)
		} else {
			enc = AppendAcq4Any(nil, r.Key, r.Workers, r.MaxQueue, r.Timeout)
		}
	case CmdRelease:
		enc = AppendRelease(nil)
	case CmdStats:
		enc = AppendStats(nil, string(r.StatArg))
		if bytes.HasSuffix(r.StatArg, []byte("\r")) {
			// That "\r" would be stripped: it needs another one.
			enc = append(enc[:len(enc)-1], '\r', '\n')
		}
	default:
		return
	}
	d := Decoder{MaxLine: len(enc)}
	var back Request
	if n, err := d.Parse(enc, &back); n != len(enc) || err != nil || !eqRequest(back, r) {
		t.Fatalf("re-encoded %q: Parse = %d, %v, %+v; want %+v", enc, n, err, back, r)
	}
}
