package resp

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
)

// Model outcomes.
const (
	modelDone = iota
	modelMore
	modelBad
	modelInline
)

// canon is a second reading of string2ll: the canonical decimal form of an int64.
func canon(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != string(b) {
		return 0, false
	}
	return v, true
}

// modelParse is a second, deliberately plain reading of the request grammar that
// FuzzParse checks Parse against. It knows no limits: it reports the claimed count,
// the largest bulk and the size for the caller to check.
func modelParse(buf []byte) (args []string, n, outcome int, count int64, maxBulk int) {
	if len(buf) == 0 {
		return nil, 0, modelMore, 0, 0
	}
	if buf[0] != '*' {
		return nil, 0, modelInline, 0, 0
	}
	line := func(p int) ([]byte, int) { // the line after the type byte at p, and the offset past its "\r\n"
		i := bytes.Index(buf[p+1:], []byte("\r\n"))
		if i < 0 {
			return nil, -1
		}
		return buf[p+1 : p+1+i], p + 1 + i + 2
	}
	l, p := line(0)
	if p < 0 {
		return nil, 0, modelMore, 0, 0
	}
	count, ok := canon(l)
	if !ok {
		return nil, 0, modelBad, 0, 0
	}
	for i := int64(0); i < count; i++ {
		if p >= len(buf) {
			return nil, 0, modelMore, 0, 0
		}
		if buf[p] != '$' {
			return nil, 0, modelBad, 0, 0
		}
		l, q := line(p)
		if q < 0 {
			return nil, 0, modelMore, 0, 0
		}
		size, ok := canon(l)
		if !ok || size < 0 {
			return nil, 0, modelBad, 0, 0
		}
		if int64(len(buf)-q) < size+2 {
			return nil, 0, modelMore, 0, 0
		}
		end := q + int(size)
		if string(buf[end:end+2]) != "\r\n" {
			return nil, 0, modelBad, 0, 0
		}
		args = append(args, string(buf[q:end]))
		maxBulk = max(maxBulk, int(size))
		p = end + 2
	}
	return args, p, modelDone, count, maxBulk
}

type parseResult struct {
	args []string
	n    int
	err  error
}

func sameResult(a, b parseResult) bool {
	var pa, pb *ProtocolError
	if errors.As(a.err, &pa) != errors.As(b.err, &pb) {
		return false
	}
	if pa != nil {
		return *pa == *pb && a.n == 0 && b.n == 0
	}
	return a.err == b.err && a.n == b.n && equal(a.args, b.args)
}

func FuzzParse(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzParse.
	for _, tc := range commands {
		f.Add([]byte(tc.in), uint8(0), uint16(0), uint16(0))
	}
	for _, tc := range malformed {
		f.Add([]byte(tc.in), uint8(0), uint16(0), uint16(0))
	}
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"), uint8(2), uint16(4), uint16(30))
	f.Fuzz(func(t *testing.T, data []byte, maxArgs uint8, maxBulk, maxCmd uint16) {
		d := Decoder{MaxArgs: int(maxArgs), MaxBulk: int(maxBulk), MaxCommand: int(maxCmd)}
		lim := Decoder{MaxArgs: DefaultMaxArgs, MaxBulk: DefaultMaxBulk, MaxCommand: DefaultMaxCommand}
		if maxArgs > 0 {
			lim.MaxArgs = int(maxArgs)
		}
		if maxBulk > 0 {
			lim.MaxBulk = int(maxBulk)
		}
		if maxCmd > 0 {
			lim.MaxCommand = int(maxCmd)
		}
		args := make([][]byte, 0, 4)
		parse := func(b []byte) parseResult {
			out, n, err := d.Parse(b, args)
			args = out
			if n == 0 && len(out) != 0 {
				t.Fatalf("Parse(%q) = %q with n == 0", b, out)
			}
			return parseResult{strs(out), n, err}
		}
		for buf := data; ; {
			got := parse(buf)
			margs, mn, outcome, count, mbulk := modelParse(buf)
			var pe *ProtocolError
			isPE := errors.As(got.err, &pe)
			switch {
			case outcome == modelInline:
				if got.n != 0 || got.err != ErrInline {
					t.Fatalf("Parse(%q) = %d, %v; want ErrInline", buf, got.n, got.err)
				}
			case outcome == modelBad:
				if got.n != 0 || !isPE {
					t.Fatalf("Parse(%q) = %q, %d, %v; want a *ProtocolError", buf, got.args, got.n, got.err)
				}
			case outcome == modelMore:
				if got.n != 0 || got.err != nil && !isPE {
					t.Fatalf("Parse(%q) = %q, %d, %v; want incomplete or a *ProtocolError", buf, got.args, got.n, got.err)
				}
			case count > int64(lim.MaxArgs) || mbulk > lim.MaxBulk || mn > lim.MaxCommand:
				if got.n != 0 || !isPE {
					t.Fatalf("%+v: Parse(%q) = %q, %d, %v; want a limit error", lim, buf, got.args, got.n, got.err)
				}
			default:
				if got.err != nil || got.n != mn || !equal(got.args, margs) {
					t.Fatalf("Parse(%q) = %q, %d, %v; want %q, %d", buf, got.args, got.n, got.err, margs, mn)
				}
			}
			if pe != nil && (pe.Offset < 0 || pe.Offset >= len(buf)) {
				t.Fatalf("Parse(%q): error offset %d outside the buffer", buf, pe.Offset)
			}
			checkPrefixes(t, buf, got, pe, parse)
			if got.n == 0 {
				return
			}
			if enc := AppendCommand(nil, got.args...); len(got.args) > 0 && !bytes.Equal(enc, buf[:got.n]) {
				t.Fatalf("Parse(%q) took %q, which re-encodes as %q", buf, buf[:got.n], enc)
			}
			buf = buf[got.n:]
		}
	})
}

// checkPrefixes checks that every prefix of buf parses as incomplete until the
// bytes that decide the result are in, and to the same result from then on.
func checkPrefixes(t *testing.T, buf []byte, full parseResult, pe *ProtocolError, parse func([]byte) parseResult) {
	decided := len(buf) + 1 // the shortest prefix that gives the full result
	switch {
	case full.n > 0:
		decided = full.n
	case pe != nil:
		decided = pe.Offset + 1
	case full.err == ErrInline:
		decided = 1
	}
	step := 1
	if len(buf) > 1024 {
		step = len(buf)/256 + 1
	}
	for k := 0; k <= len(buf); k += step {
		got := parse(buf[:k])
		if k < decided {
			if got.n != 0 || got.err != nil {
				t.Fatalf("Parse(%q) = %d, %v before byte %d decides %q", buf[:k], got.n, got.err, decided-1, buf)
			}
		} else if !sameResult(got, full) {
			t.Fatalf("Parse(%q) = %q, %d, %v; Parse(%q) = %q, %d, %v", buf[:k], got.args, got.n, got.err, buf, full.args, full.n, full.err)
		}
	}
}

func FuzzParseReply(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzParseReply.
	for _, tc := range replies {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for buf := data; ; {
			r, n, err := ParseReply(buf)
			var pe *ProtocolError
			if err != nil && (!errors.As(err, &pe) || n != 0 || pe.Offset < 0 || pe.Offset >= len(buf)) {
				t.Fatalf("ParseReply(%q) = %d, %v", buf, n, err)
			}
			// Every prefix is incomplete up to some length, and from there on
			// gives the same result as the whole.
			decided := -1
			for k := 0; k <= len(buf) && len(buf) <= 1024; k++ {
				rk, nk, errk := ParseReply(buf[:k])
				var pk *ProtocolError
				switch {
				case decided < 0 && nk == 0 && errk == nil:
				case n > 0:
					if nk != n || errk != nil || !sameReply(rk, r) {
						t.Fatalf("ParseReply(%q) = %+v, %d, %v; of %q: %+v, %d", buf[:k], rk, nk, errk, buf, r, n)
					}
					decided = k
				case err == nil || !errors.As(errk, &pk) || *pk != *pe:
					t.Fatalf("ParseReply(%q) = %d, %v; of %q: %d, %v", buf[:k], nk, errk, buf, n, err)
				default:
					decided = k
				}
			}
			if n == 0 {
				return
			}
			// Only canonical replies are accepted, so writing one back gives the same bytes.
			if enc := encodeReply(nil, r); !bytes.Equal(enc, buf[:n]) {
				t.Fatalf("ParseReply(%q) = %+v, which re-encodes as %q", buf[:n], r, enc)
			}
			buf = buf[n:]
		}
	})
}

func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "007", "+1", "-9223372036854775808", "9223372036854775808", " 1", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := ParseInt(b)
		mv, mok := canon(b)
		if v != mv || ok != mok {
			t.Fatalf("ParseInt(%q) = %d, %v; want %d, %v", b, v, ok, mv, mok)
		}
	})
}

func FuzzIs(f *testing.F) {
	f.Add([]byte("set"), "SET")
	f.Add([]byte("LOCK\x7fID"), "LOCK_ID")
	f.Add([]byte("ſ"), "S")
	f.Fuzz(func(t *testing.T, arg []byte, name string) {
		lower := func(c byte) byte {
			if 'A' <= c && c <= 'Z' {
				return c + 'a' - 'A'
			}
			return c
		}
		want := len(arg) == len(name)
		for i := 0; want && i < len(arg); i++ {
			want = lower(arg[i]) == lower(name[i])
		}
		if got := Is(arg, name); got != want {
			t.Fatalf("Is(%q, %q) = %v, want %v", arg, name, got, want)
		}
	})
}
