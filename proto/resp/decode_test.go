package resp

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// commands are requests as redis-cli and redis-benchmark send them (see also
// testdata/captured), and the arguments each one parses to.
var commands = []struct {
	name string
	in   string
	args []string
}{
	{"ping", "*1\r\n$4\r\nPING\r\n", []string{"PING"}},
	{"set", "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", []string{"SET", "key", "value"}},
	{"get", "*2\r\n$3\r\nget\r\n$3\r\nkey\r\n", []string{"get", "key"}},
	{"binary", "*3\r\n$3\r\nset\r\n$3\r\nbin\r\n$6\r\na\r\nb\x00c\r\n", []string{"set", "bin", "a\r\nb\x00c"}},
	{"crlf-only", "*2\r\n$4\r\nECHO\r\n$2\r\n\r\n\r\n", []string{"ECHO", "\r\n"}},
	{"dollar-star", "*2\r\n$4\r\nECHO\r\n$4\r\n*1\r\n\r\n", []string{"ECHO", "*1\r\n"}},
	{"empty-arg", "*6\r\n$5\r\nrpush\r\n$1\r\nl\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n$1\r\nc\r\n", []string{"rpush", "l", "a", "b", "", "c"}},
	{"utf8", "*2\r\n$4\r\necho\r\n$12\r\nh\xc3\xa9llo world\r\n", []string{"echo", "héllo world"}},
	{"lock", "*8\r\n$4\r\nLOCK\r\n$5\r\nmykey\r\n$7\r\nLOCK_ID\r\n$3\r\nabc\r\n$7\r\nTIMEOUT\r\n$1\r\n5\r\n$7\r\nEXPRIED\r\n$2\r\n10\r\n",
		[]string{"LOCK", "mykey", "LOCK_ID", "abc", "TIMEOUT", "5", "EXPRIED", "10"}},
	{"config-get", "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$4\r\nsave\r\n", []string{"CONFIG", "GET", "save"}},
	{"ten-digit-bulk", "*1\r\n$10\r\n0123456789\r\n", []string{"0123456789"}},
	{"empty", "*0\r\n", nil},
	{"null", "*-1\r\n", nil},
	{"negative", "*-7\r\n", nil}, // Redis skips any negative count
	{"min-int64", "*-9223372036854775808\r\n", nil},
}

func strs(args [][]byte) []string {
	if args == nil {
		return nil
	}
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = string(a)
	}
	return s
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseCommands(t *testing.T) {
	var d Decoder
	for _, tc := range commands {
		buf := []byte(tc.in)
		out, n, err := d.Parse(buf, nil)
		if err != nil || n != len(buf) || !equal(strs(out), tc.args) {
			t.Errorf("%s: Parse(%q) = %q, %d, %v; want %q, %d", tc.name, tc.in, out, n, err, tc.args, len(buf))
		}
		// Trailing bytes of the next request are not taken.
		buf = append(buf, "*1\r\n$4\r\nPI"...)
		if out, n2, err := d.Parse(buf, nil); err != nil || n2 != n || !equal(strs(out), tc.args) {
			t.Errorf("%s with a partial request after it: Parse = %q, %d, %v", tc.name, out, n2, err)
		}
	}
}

func TestParseSplits(t *testing.T) {
	var d Decoder
	args := make([][]byte, 0, 8)
	for _, tc := range commands {
		for k := range len(tc.in) {
			out, n, err := d.Parse([]byte(tc.in[:k]), args)
			if n != 0 || err != nil || len(out) != 0 {
				t.Errorf("%s: Parse(%q) = %q, %d, %v; want incomplete", tc.name, tc.in[:k], out, n, err)
			}
		}
	}
}

// TestParseByteAtATime feeds a pipeline one byte at a time, parsing whatever has
// arrived after each byte, as a connection would.
func TestParseByteAtATime(t *testing.T) {
	var d Decoder
	var stream []byte
	var want [][]string
	for _, tc := range commands {
		stream = append(stream, tc.in...)
		want = append(want, tc.args)
	}
	var pending []byte
	var got [][]string
	var args [][]byte
	for _, c := range stream {
		pending = append(pending, c)
		for {
			out, n, err := d.Parse(pending, args)
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(pending), err)
			}
			args = out
			if n == 0 {
				break
			}
			got = append(got, strs(out))
			pending = pending[n:]
		}
	}
	if len(pending) != 0 || len(got) != len(want) {
		t.Fatalf("got %d requests, %d bytes left; want %d, 0", len(got), len(pending), len(want))
	}
	for i := range want {
		if !equal(got[i], want[i]) {
			t.Errorf("request %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestParsePipelined(t *testing.T) {
	var d Decoder
	buf := []byte("*1\r\n$4\r\nPING\r\n*0\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*-1\r\n*1\r\n$4\r\nQUIT\r\nPING\r\n")
	want := [][]string{{"PING"}, nil, {"GET", "k"}, nil, {"QUIT"}}
	for i, w := range want {
		out, n, err := d.Parse(buf, nil)
		if err != nil || n == 0 || !equal(strs(out), w) {
			t.Fatalf("request %d: Parse = %q, %d, %v; want %q", i, out, n, err, w)
		}
		buf = buf[n:]
	}
	if _, n, err := d.Parse(buf, nil); n != 0 || err != ErrInline {
		t.Fatalf("inline after arrays: Parse = %d, %v; want ErrInline", n, err)
	}
}

func TestParseInline(t *testing.T) {
	var d Decoder
	for _, in := range []string{"PING\r\n", "P", "\r\n", "\n", " *1\r\n$4\r\nPING\r\n", "$4\r\nPING\r\n", "+OK\r\n", "\x56\x01\x01"} {
		out, n, err := d.Parse([]byte(in), make([][]byte, 0, 4))
		if n != 0 || err != ErrInline || len(out) != 0 {
			t.Errorf("Parse(%q) = %q, %d, %v; want ErrInline", in, out, n, err)
		}
	}
	if out, n, err := d.Parse(nil, nil); n != 0 || err != nil || len(out) != 0 {
		t.Errorf("Parse(nil) = %q, %d, %v; want incomplete", out, n, err)
	}
}

// malformed lists bad requests, the offset of the byte at fault and a part of the
// message. Each is also checked at every prefix: incomplete up to the offending
// byte, then the same error.
var malformed = []struct {
	in  string
	off int
	msg string
}{
	{"*\r\n", 1, "multibulk length has no digits"},
	{"*x\r\n", 1, "multibulk length has byte 'x'"},
	{"*1x\r\n", 2, "multibulk length has byte 'x'"},
	{"* 1\r\n", 1, "multibulk length has byte ' '"},
	{"*+1\r\n", 1, "multibulk length has byte '+'"},
	{"*01\r\n", 2, "multibulk length has a leading zero"},
	{"*00\r\n", 2, "multibulk length has a leading zero"},
	{"*-0\r\n", 2, "multibulk length is -0"},
	{"*-\r\n", 2, "multibulk length has no digits"},
	{"*--1\r\n", 2, "multibulk length has byte '-'"},
	{"*1-\r\n", 2, "multibulk length has byte '-'"},
	{"*1\n$4\r\nPING\r\n", 2, "multibulk length has byte 0x0a"},
	{"*1\rx", 3, `multibulk length line ends in "\r" without "\n"`},
	{"*1\r\r\n", 3, `multibulk length line ends in "\r" without "\n"`},
	{"*-9223372036854775809\r\n", 20, "multibulk length overflows int64"},
	{"*-99999999999999999999\r\n", 20, "multibulk length overflows int64"},
	{"*-922337203685477580700\r\n", 21, "multibulk length overflows int64"},
	{"*1\r\n:4\r\n", 4, "expected '$', got ':'"},
	{"*1\r\n+PING\r\n", 4, "expected '$', got '+'"},
	{"*1\r\n*1\r\n$4\r\nPING\r\n", 4, "expected '$', got '*'"},
	{"*2\r\n$1\r\na\r\nb\r\n", 11, "expected '$', got 'b'"},
	{"*1\r\n\r\n", 4, "expected '$', got 0x0d"},
	{"*1\r\n$-1\r\n", 5, "bulk length is negative"},
	{"*1\r\n$\r\n", 5, "bulk length has no digits"},
	{"*1\r\n$04\r\nPING\r\n", 6, "bulk length has a leading zero"},
	{"*1\r\n$ 4\r\nPING\r\n", 5, "bulk length has byte ' '"},
	{"*1\r\n$4 \r\nPING\r\n", 6, "bulk length has byte ' '"},
	{"*1\r\n$4\nPING\r\n", 6, "bulk length has byte 0x0a"},
	{"*1\r\n$4\rPING\r\n", 7, `bulk length line ends in "\r" without "\n"`},
	{"*1\r\n$4\r\nPINGxx", 12, `bulk of 4 bytes is followed by 'x', not "\r\n"`},
	{"*1\r\n$4\r\nPING\rx", 13, `bulk of 4 bytes is followed by 'x', not "\r\n"`},
	{"*1\r\n$4\r\nPING\n\r", 12, `bulk of 4 bytes is followed by 0x0a, not "\r\n"`},
	{"*1\r\n$3\r\nPING\r\n", 11, `bulk of 3 bytes is followed by 'G', not "\r\n"`},
	{"*1\r\n$5\r\nPING\r\n", 13, `bulk of 5 bytes is followed by 0x0a, not "\r\n"`},
	{"*1\r\n$0\r\nx\r\n", 8, `bulk of 0 bytes is followed by 'x', not "\r\n"`},
}

func TestParseMalformed(t *testing.T) {
	var d Decoder
	for _, tc := range malformed {
		for k := 1; k <= len(tc.in); k++ {
			out, n, err := d.Parse([]byte(tc.in[:k]), nil)
			if n != 0 || len(out) != 0 {
				t.Fatalf("Parse(%q) = %q, %d, %v; want n == 0", tc.in[:k], out, n, err)
			}
			if k <= tc.off {
				if err != nil {
					t.Errorf("Parse(%q) = %v before the offending byte at %d", tc.in[:k], err, tc.off)
				}
				continue
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) || pe.Offset != tc.off || pe.Msg != tc.msg {
				t.Errorf("Parse(%q) = %v; want %q at offset %d", tc.in[:k], err, tc.msg, tc.off)
			}
		}
	}
}

func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		d   Decoder
		in  string // only as much as the limit check needs: no data after the header
		off int
		msg string
	}{
		{Decoder{}, "*1025\r\n", 4, "multibulk length of at least 1025 exceeds the limit 1024"},
		{Decoder{}, "*99999999999999999999999", 4, "multibulk length of at least 9999 exceeds the limit 1024"},
		{Decoder{MaxArgs: 3}, "*4", 1, "multibulk length of at least 4 exceeds the limit 3"},
		{Decoder{MaxArgs: 3}, "*30", 2, "multibulk length of at least 30 exceeds the limit 3"}, // "3" is fine: the error comes at the '0'
		{Decoder{}, "*1\r\n$1048641", 11, "bulk length of at least 1048641 exceeds the limit 1048640"},
		{Decoder{}, "*1\r\n$536870912\r\n", 11, "bulk length of at least 5368709 exceeds the limit 1048640"},
		{Decoder{MaxBulk: 5}, "*2\r\n$6", 5, "bulk length of at least 6 exceeds the limit 5"},
		{Decoder{MaxBulk: 5}, "*2\r\n$1\r\na\r\n$10", 13, "bulk length of at least 10 exceeds the limit 5"},
		{Decoder{MaxCommand: 20}, "*1\r\n$10\r\n", 6, "request of at least 21 bytes exceeds the limit 20"},
		{Decoder{MaxCommand: 20}, "*2\r\n$1\r\na\r\n$5\r\n", 12, "request of at least 22 bytes exceeds the limit 20"},
		{Decoder{MaxArgs: 8, MaxCommand: 2 << 20}, "*8\r\n$1048640\r\n" + strings.Repeat("x", 1048640) + "\r\n$1048640\r\n", 1048663,
			"request of at least 2097344 bytes exceeds the limit 2097152"}, // the 6 more args need 6 bytes each
		// A count of n needs at least 6 bytes per argument ("$0\r\n\r\n").
		{Decoder{MaxCommand: 20}, "*3", 1, "request of at least 22 bytes exceeds the limit 20"},
		{Decoder{MaxCommand: 3}, "*0", 1, "request of at least 4 bytes exceeds the limit 3"},
		{Decoder{MaxCommand: 4}, "*-1", 2, "request of at least 5 bytes exceeds the limit 4"},
		{Decoder{MaxArgs: 1 << 62, MaxCommand: 100}, "*17", 2, "request of at least 107 bytes exceeds the limit 100"},
	} {
		_, n, err := tc.d.Parse([]byte(tc.in), nil)
		var pe *ProtocolError
		if n != 0 || !errors.As(err, &pe) || pe.Offset != tc.off || !strings.HasPrefix(pe.Msg, tc.msg) {
			t.Errorf("%+v: Parse(%.40q) = %d, %v; want %q at offset %d", tc.d, tc.in, n, err, tc.msg, tc.off)
		}
	}
	// Just at the limits, everything passes.
	d := Decoder{MaxArgs: 3, MaxBulk: 5, MaxCommand: 32}
	in := "*3\r\n$5\r\naaaaa\r\n$5\r\nbbbbb\r\n$0\r\n\r\n" // 32 bytes
	if out, n, err := d.Parse([]byte(in), nil); err != nil || n != len(in) || len(out) != 3 {
		t.Errorf("%+v: Parse(%q) = %q, %d, %v", d, in, out, n, err)
	}
	d.MaxCommand = 31
	if _, n, err := d.Parse([]byte(in), nil); n != 0 || err == nil {
		t.Errorf("%+v: Parse(%q) = %d, %v; want an error", d, in, n, err)
	}
	var big Decoder
	in = "*1\r\n$1048640\r\n" + strings.Repeat("v", DefaultMaxBulk) + "\r\n"
	if out, n, err := big.Parse([]byte(in), nil); err != nil || n != len(in) || len(out) != 1 || len(out[0]) != DefaultMaxBulk {
		t.Errorf("a bulk of DefaultMaxBulk bytes: Parse = %d args, %d, %v", len(out), n, err)
	}
	args := strings.Repeat("$0\r\n\r\n", DefaultMaxArgs)
	in = "*" + strconv.Itoa(DefaultMaxArgs) + "\r\n" + args
	if out, n, err := big.Parse([]byte(in), nil); err != nil || n != len(in) || len(out) != DefaultMaxArgs {
		t.Errorf("DefaultMaxArgs empty args: Parse = %d args, %d, %v", len(out), n, err)
	}
}

func TestParseViews(t *testing.T) {
	var d Decoder
	buf := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n")
	out, _, err := d.Parse(buf, nil)
	if err != nil || len(out) != 3 {
		t.Fatalf("Parse = %q, %v", out, err)
	}
	for _, a := range out {
		if cap(a) != len(a) {
			t.Errorf("arg %q has capacity %d", a, cap(a))
		}
	}
	buf[len(buf)-7] = 'V' // the views point into buf
	if string(out[2]) != "Value" {
		t.Errorf("arg 2 = %q after changing buf, want a view", out[2])
	}
	_ = append(out[1], "XYZ"...) // appending must not write over "\r\n$5..."
	if !bytes.HasSuffix(buf, []byte("k\r\n$5\r\nValue\r\n")) {
		t.Errorf("appending to an argument changed buf: %q", buf)
	}
}

func TestParseReusesArgs(t *testing.T) {
	var d Decoder
	args := make([][]byte, 5, 16)
	out, n, err := d.Parse([]byte("*2\r\n$1\r\na\r\n$1\r\nb\r\n"), args)
	if err != nil || n == 0 || len(out) != 2 || &out[:1][0] != &args[:1][0] {
		t.Fatalf("Parse did not append to args[:0]: %q, %d, %v", out, n, err)
	}
	// An incomplete request hands back the grown slice, empty.
	part := []byte("*20\r\n" + strings.Repeat("$1\r\nx\r\n", 19))
	grown, n, err := d.Parse(part, nil)
	if n != 0 || err != nil || len(grown) != 0 || cap(grown) < 19 {
		t.Fatalf("incomplete Parse = len %d cap %d, %d, %v; want len 0 and the capacity kept", len(grown), cap(grown), n, err)
	}
	if allocs := testing.AllocsPerRun(10, func() { _, _, _ = d.Parse(part, grown) }); allocs != 0 {
		t.Errorf("reparsing into the grown slice allocates %.0f times", allocs)
	}
}

// TestParseNeed: a request cut inside an argument says where that argument ends; one cut
// inside a length line says nothing (any byte may complete it).
func TestParseNeed(t *testing.T) {
	full := "*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n"
	for _, c := range []struct {
		in   string
		need int
	}{
		{"", 0}, {"*2\r", 0}, {"*2\r\n$3\r\nG", 13}, {"*2\r\n$3\r\nGET\r\n$5\r\n", len(full)},
		{"*2\r\n$3\r\nGET\r\n$5\r\nhel", len(full)}, {"*2\r\n$3\r\nGET\r\n$5\r\nhello\r", len(full)},
	} {
		var d Decoder
		d.Need = 99
		if _, n, err := d.Parse([]byte(c.in), nil); n != 0 || err != nil || d.Need != c.need {
			t.Errorf("Parse(%q): n %d err %v Need %d, want 0 nil %d", c.in, n, err, d.Need, c.need)
		}
	}
}
