package pool

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
)

const max32 = 1<<32 - 1

func acq(c Cmd, key string, w, q, t uint32) Request {
	return Request{Cmd: c, Key: []byte(key), Workers: w, MaxQueue: q, Timeout: t}
}

func me(key string, w, q, t uint32) Request     { return acq(CmdAcq4Me, key, w, q, t) }
func anyone(key string, w, q, t uint32) Request { return acq(CmdAcq4Any, key, w, q, t) }

var (
	bad     = Request{Cmd: CmdBad}
	release = Request{Cmd: CmdRelease}
)

func stats(arg string) Request { return Request{Cmd: CmdStats, StatArg: []byte(arg)} }

// eqRequest compares requests, telling an empty Key or StatArg from a missing one only
// by length (both read as "not there").
func eqRequest(a, b Request) bool {
	return a.Cmd == b.Cmd && bytes.Equal(a.Key, b.Key) && a.Workers == b.Workers &&
		a.MaxQueue == b.MaxQueue && a.Timeout == b.Timeout && bytes.Equal(a.StatArg, b.StatArg)
}

// parseCases are lines without their "\n"; each is tried with "\n" and "\r\n".
var parseCases = []struct {
	name string
	line string
	want Request
}{
	// The four commands.
	{"acq4me", "ACQ4ME key 1 2 3", me("key", 1, 2, 3)},
	{"acq4any", "ACQ4ANY key 4 5 6", anyone("key", 4, 5, 6)},
	{"release", "RELEASE", release},
	{"stats/full", "STATS FULL", stats("FULL")},
	{"stats/uptime", "STATS UPTIME", stats("UPTIME")},

	// Prefix rules: case-sensitive, and the space is part of ACQ4ME, ACQ4ANY, STATS.
	{"acq4me/no-space", "ACQ4ME", bad},
	{"acq4me/tab", "ACQ4ME\tkey 1 2 3", bad},
	{"acq4me/glued", "ACQ4MEkey 1 2 3", bad},
	{"acq4any/no-space", "ACQ4ANY", bad},
	{"acq4any/glued", "ACQ4ANYkey 1 2 3", bad},
	{"acq4/neither", "ACQ4 key 1 2 3", bad},
	{"acq4me/lower", "acq4me key 1 2 3", bad},
	{"acq4me/mixed", "Acq4Me key 1 2 3", bad},
	{"acq4any/lower", "acq4any key 1 2 3", bad},
	{"release/lower", "release", bad},
	{"release/short", "RELEAS", bad},
	{"release/key", "RELEASE foo", release},
	{"release/suffix", "RELEASED", release},
	{"release/junk", "RELEASE\x00\xff\t  x y z", release},
	{"stats/alone", "STATS", bad},
	{"stats/tab", "STATS\tFULL", bad},
	{"stats/lower", "stats FULL", bad},
	{"stats/lower-arg", "STATS full", stats("full")},
	{"stats/empty-arg", "STATS ", stats("")},
	{"stats/rest-of-line", "STATS  FULL x ", stats(" FULL x ")},
	{"stats/tab-in-arg", "STATS FU\tLL", stats("FU\tLL")},
	{"empty", "", bad},
	{"space", " ", bad},
	{"leading-space", " ACQ4ME key 1 2 3", bad},
	{"leading-space-release", " RELEASE", bad},
	{"garbage", "\x00\x01\xff", bad},
	{"unknown", "PING", bad},

	// Tokens: runs of spaces only; tabs belong to tokens; extra tokens ignored.
	{"spaces/runs", "ACQ4ME   key    1  2     3", me("key", 1, 2, 3)},
	{"spaces/trailing", "ACQ4ME key 1 2 3   ", me("key", 1, 2, 3)},
	{"tabs/in-key", "ACQ4ME k\tey 1 2 3", me("k\tey", 1, 2, 3)},
	{"tabs/as-separator", "ACQ4ME key\t1 2 3", me("key\t1", 2, 3, 0)},
	{"tabs/in-number", "ACQ4ME key 1\t 2 3", me("key", 0, 2, 3)},
	{"tabs/leading-key", "ACQ4ME \tkey 1 2 3", me("\tkey", 1, 2, 3)},
	{"tabs/leading-number", "ACQ4ME key 1 \t2 3", me("key", 1, 0, 3)},
	{"tabs/only", "ACQ4ME \t \t", me("\t", 0, 0, 0)},
	{"extra/tokens", "ACQ4ANY key 1 2 3 4 5 six", anyone("key", 1, 2, 3)},
	{"extra/junk", "ACQ4ME key 1 2 3 \x00\xff", me("key", 1, 2, 3)},

	// Missing arguments are 0 (the store answers BAD_SYNTAX for key, workers, maxqueue).
	{"missing/all", "ACQ4ME ", me("", 0, 0, 0)},
	{"missing/all-spaces", "ACQ4ANY     ", anyone("", 0, 0, 0)},
	{"missing/workers", "ACQ4ME key", me("key", 0, 0, 0)},
	{"missing/maxqueue", "ACQ4ME key 1", me("key", 1, 0, 0)},
	{"missing/timeout", "ACQ4ANY key 1 2", anyone("key", 1, 2, 0)},

	// Numbers: decimal digits only, anything else 0, saturating.
	{"num/zero", "ACQ4ME key 0 0 0", me("key", 0, 0, 0)},
	{"num/leading-zeros", "ACQ4ME key 007 000010 0000000000000000000000000001", me("key", 7, 10, 1)},
	{"num/max", "ACQ4ME key 4294967295 4294967295 4294967295", me("key", max32, max32, max32)},
	{"num/max+1", "ACQ4ME key 4294967296 1 1", me("key", max32, 1, 1)},
	{"num/huge", "ACQ4ME key 1 99999999999999999999999999999999999 2", me("key", 1, max32, 2)},
	{"num/huge-then-letter", "ACQ4ME key 1 99999999999999999999999x 2", me("key", 1, 0, 2)},
	{"num/negative", "ACQ4ME key -1 2 3", me("key", 0, 2, 3)},
	{"num/plus", "ACQ4ME key +1 2 3", me("key", 0, 2, 3)},
	{"num/trailing-letter", "ACQ4ME key 1 2x 3", me("key", 1, 0, 3)},
	{"num/leading-letter", "ACQ4ME key 1 2 x3", me("key", 1, 2, 0)},
	{"num/hex", "ACQ4ME key 0x10 2 3", me("key", 0, 2, 3)},
	{"num/float", "ACQ4ANY key 1 2 1.5", anyone("key", 1, 2, 0)},
	{"num/unicode-digit", "ACQ4ME key \u0661 2 3", me("key", 0, 2, 3)},
	{"num/underscore", "ACQ4ME key 1_000 2 3", me("key", 0, 2, 3)},

	// Keys are opaque: never percent-decoded, any byte but space and "\n".
	{"key/percent", "ACQ4ME a%20b%zz% 1 2 3", me("a%20b%zz%", 1, 2, 3)},
	{"key/odd-bytes", "ACQ4ANY \x00\x01\xff\x7f\xc3\xa9 1 2 3", anyone("\x00\x01\xff\x7f\xc3\xa9", 1, 2, 3)},
	{"key/cr-inside", "ACQ4ME a\rb 1 2 3", me("a\rb", 1, 2, 3)},
	{"key/digits", "ACQ4ME 123 1 2 3", me("123", 1, 2, 3)},
	{"key/command-name", "ACQ4ME RELEASE 1 2 3", me("RELEASE", 1, 2, 3)},
}

func TestParse(t *testing.T) {
	d := Decoder{}
	for _, tc := range parseCases {
		for _, eol := range []string{"\n", "\r\n"} {
			// Alone, then followed by more input: n must stop after the "\n".
			for _, suffix := range []string{"", "ACQ4ME next 1 1 1", "RELEASE\n"} {
				buf := []byte(tc.line + eol + suffix)
				r := Request{Cmd: CmdStats, Key: []byte("stale"), Workers: 9, StatArg: []byte("stale")}
				n, err := d.Parse(buf, &r)
				if err != nil || n != len(tc.line)+len(eol) {
					t.Fatalf("%s %q: Parse = %d, %v; want %d, nil", tc.name, buf, n, err, len(tc.line)+len(eol))
				}
				if !eqRequest(r, tc.want) {
					t.Fatalf("%s %q:\n got %+v\nwant %+v", tc.name, buf, r, tc.want)
				}
				checkViews(t, buf[:n], r)
			}
		}
	}
}

// checkViews fails unless Key and StatArg are views into line with no spare capacity.
func checkViews(t *testing.T, line []byte, r Request) {
	t.Helper()
	for _, v := range [][]byte{r.Key, r.StatArg} {
		if len(v) == 0 {
			continue
		}
		if cap(v) != len(v) {
			t.Errorf("%q: view %q has capacity %d, want %d", line, v, cap(v), len(v))
		}
		if !inside(v, line) {
			t.Errorf("%q: %q is not a view into the line", line, v)
		}
	}
}

// inside reports whether sub's memory lies within s.
func inside(sub, s []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if &s[i] == &sub[0] {
			return true
		}
	}
	return false
}

// TestParseCR checks that exactly one "\r" before the "\n" is stripped.
func TestParseCR(t *testing.T) {
	d := Decoder{}
	for _, tc := range []struct {
		line string
		want Request
	}{
		{"STATS FULL\r\r\n", stats("FULL\r")},
		{"ACQ4ME key 1 2 3\r\r\n", me("key", 1, 2, 0)},
		{"ACQ4ME key 1 2\r\n", me("key", 1, 2, 0)},
		{"ACQ4ME key\r\n", me("key", 0, 0, 0)},
		{"ACQ4ME key\r 1 2 3\n", me("key\r", 1, 2, 3)},
		{"\r\n", bad},
		{"\r\r\n", bad},
		{"\rRELEASE\n", bad},
		{"RELEASE\r\r\n", release},
		{"STATS \r\n", stats("")},
		{"STATS\r\n", bad},
		{"ACQ4ME\r\n", bad},
	} {
		var r Request
		if n, err := d.Parse([]byte(tc.line), &r); n != len(tc.line) || err != nil || !eqRequest(r, tc.want) {
			t.Errorf("Parse(%q) = %d, %v, %+v; want %d, nil, %+v", tc.line, n, err, r, len(tc.line), tc.want)
		}
	}
}

// TestParseKeyIsView checks that Key aliases the buffer and that appending to it cannot
// overwrite what follows.
func TestParseKeyIsView(t *testing.T) {
	d := Decoder{}
	buf := []byte("ACQ4ME abc 1 2 3\nSTATS FULL\n")
	var r Request
	n, err := d.Parse(buf, &r)
	if n != 17 || err != nil {
		t.Fatalf("Parse = %d, %v", n, err)
	}
	buf[8] = 'X'
	if string(r.Key) != "aXc" {
		t.Fatalf("Key = %q after changing buf, want %q", r.Key, "aXc")
	}
	_ = append(r.Key, "!!!!"...)
	if string(buf[10:17]) != " 1 2 3\n" {
		t.Fatalf("append to Key changed buf: %q", buf)
	}
	var s Request
	if n2, _ := d.Parse(buf[n:], &s); n2 != 11 || string(s.StatArg) != "FULL" {
		t.Fatalf("second line: n = %d, StatArg %q", n2, s.StatArg)
	}
	_ = append(s.StatArg, "!"...)
	if buf[len(buf)-1] != '\n' {
		t.Fatalf("append to StatArg changed buf: %q", buf)
	}
}

// parseAll parses lines from buf until one is incomplete, like a connection would.
func parseAll(t *testing.T, d *Decoder, buf []byte) (reqs []Request, rest []byte) {
	t.Helper()
	for {
		var r Request
		n, err := d.Parse(buf, &r)
		if err != nil {
			t.Fatalf("Parse(%q): %v", buf, err)
		}
		if n == 0 {
			return reqs, buf
		}
		if n > len(buf) {
			t.Fatalf("n = %d beyond buffer of %d", n, len(buf))
		}
		// Copy the views: the caller's buffer moves on.
		r.Key = bytes.Clone(r.Key)
		r.StatArg = bytes.Clone(r.StatArg)
		reqs = append(reqs, r)
		buf = buf[n:]
	}
}

var stream = "ACQ4ME a 1 2 3\nACQ4ANY b%20c 4 5 6\r\nRELEASE\n\nSTATS FULL\r\nbogus\nACQ4ME  d  7  8\nRELEASE x\nSTATS lock_mismatch\n"

var streamWant = []Request{
	me("a", 1, 2, 3), anyone("b%20c", 4, 5, 6), release, bad, stats("FULL"), bad,
	me("d", 7, 8, 0), release, stats("lock_mismatch"),
}

func TestParsePipelined(t *testing.T) {
	d := Decoder{}
	reqs, rest := parseAll(t, &d, []byte(stream+"ACQ4ME partial 1"))
	if string(rest) != "ACQ4ME partial 1" {
		t.Fatalf("left over %q, want the partial line", rest)
	}
	if len(reqs) != len(streamWant) {
		t.Fatalf("got %d requests, want %d: %+v", len(reqs), len(streamWant), reqs)
	}
	for i := range reqs {
		if !eqRequest(reqs[i], streamWant[i]) {
			t.Errorf("request %d: got %+v, want %+v", i, reqs[i], streamWant[i])
		}
	}
}

// TestParseSplit feeds the stream in two writes, split at every byte, then in writes of
// one byte each, and expects the same requests every time.
func TestParseSplit(t *testing.T) {
	d := Decoder{}
	check := func(what string, reqs []Request) {
		t.Helper()
		if len(reqs) != len(streamWant) {
			t.Fatalf("%s: got %d requests, want %d", what, len(reqs), len(streamWant))
		}
		for i := range reqs {
			if !eqRequest(reqs[i], streamWant[i]) {
				t.Fatalf("%s: request %d: got %+v, want %+v", what, i, reqs[i], streamWant[i])
			}
		}
	}
	for k := 0; k <= len(stream); k++ {
		first, rest := parseAll(t, &d, []byte(stream[:k]))
		second, left := parseAll(t, &d, append(bytes.Clone(rest), stream[k:]...))
		if len(left) != 0 {
			t.Fatalf("split at %d: %q left over", k, left)
		}
		check("split at "+strconv.Itoa(k), append(first, second...))
	}
	var buf []byte
	var reqs []Request
	for i := range len(stream) {
		buf = append(buf, stream[i])
		got, rest := parseAll(t, &d, buf)
		reqs = append(reqs, got...)
		buf = bytes.Clone(rest)
	}
	check("byte by byte", reqs)
}

// TestParseIncomplete checks that every proper prefix of a line waits and leaves *req alone.
func TestParseIncomplete(t *testing.T) {
	d := Decoder{}
	for _, line := range []string{"ACQ4ME key 1 2 3\n", "RELEASE\r\n", "STATS FULL\n", "\n", "x\n"} {
		for i := range len(line) {
			sentinel := Request{Cmd: Cmd(77), Key: []byte("s"), Workers: 1, MaxQueue: 2, Timeout: 3, StatArg: []byte("t")}
			r := sentinel
			if n, err := d.Parse([]byte(line[:i]), &r); n != 0 || err != nil {
				t.Fatalf("Parse(%q) = %d, %v; want 0, nil", line[:i], n, err)
			}
			if !eqRequest(r, sentinel) {
				t.Fatalf("Parse(%q) wrote *req: %+v", line[:i], r)
			}
		}
	}
}

func TestParseMaxLine(t *testing.T) {
	for _, limit := range []int{1, 2, 16, DefaultMaxLine, 4000} {
		d := Decoder{MaxLine: limit}
		if limit == DefaultMaxLine {
			d.MaxLine = 0 // the default
		}
		// A RELEASE line padded to exactly n bytes before its "\n".
		line := func(n int) []byte {
			if n < len("RELEASE") {
				return bytes.Repeat([]byte{'x'}, n)
			}
			return append([]byte("RELEASE"), bytes.Repeat([]byte{' '}, n-len("RELEASE"))...)
		}
		var r Request

		// Exactly MaxLine bytes, with "\n" or "\r\n" (the "\r" counts): accepted.
		exact := append(line(limit), '\n')
		if n, err := d.Parse(exact, &r); n != limit+1 || err != nil {
			t.Errorf("limit %d: line of %d: Parse = %d, %v; want %d, nil", limit, limit, n, err, limit+1)
		}
		if limit >= 2 {
			crlf := append(line(limit-1), '\r', '\n')
			if n, err := d.Parse(crlf, &r); n != limit+1 || err != nil {
				t.Errorf("limit %d: line of %d with \\r: Parse = %d, %v; want %d, nil", limit, limit, n, err, limit+1)
			}
		}
		// MaxLine bytes and no "\n" yet: wait.
		if n, err := d.Parse(line(limit), &r); n != 0 || err != nil {
			t.Errorf("limit %d: %d bytes without \\n: Parse = %d, %v; want 0, nil", limit, limit, n, err)
		}
		// One more byte, with or without its "\n", and with more lines after it: too long.
		for _, buf := range [][]byte{
			line(limit + 1),
			append(line(limit+1), '\n'),
			append(line(limit), '\r', '\n'),
			append(append(line(limit+1), '\n'), "RELEASE\n"...),
			append(line(limit+1), bytes.Repeat([]byte{'y'}, 1<<20)...),
		} {
			r := release
			n, err := d.Parse(buf, &r)
			if n != 0 || !errors.Is(err, ErrLineTooLong) {
				t.Errorf("limit %d: %d bytes: Parse = %d, %v; want 0, ErrLineTooLong", limit, len(buf), n, err)
			}
			if !eqRequest(r, release) {
				t.Errorf("limit %d: too long line wrote *req: %+v", limit, r)
			}
		}
	}
}

// TestParseLongLineNotScanned checks that Parse decides on a huge buffer from its first
// MaxLine+1 bytes: a "\n" further on does not make the line acceptable.
func TestParseLongLineNotScanned(t *testing.T) {
	d := Decoder{MaxLine: 8}
	buf := []byte(strings.Repeat("z", 1<<16) + "\n")
	var r Request
	if n, err := d.Parse(buf, &r); n != 0 || err != ErrLineTooLong {
		t.Fatalf("Parse = %d, %v; want 0, ErrLineTooLong", n, err)
	}
	if !strings.Contains(ErrLineTooLong.Error(), "line") {
		t.Errorf("ErrLineTooLong says %q", ErrLineTooLong)
	}
}

func TestNumber(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want uint32
	}{
		{"", 0}, {"0", 0}, {"9", 9}, {"42", 42}, {"4294967294", 4294967294}, {"4294967295", max32},
		{"4294967296", max32}, {"42949672950", max32}, {"18446744073709551616", max32},
		{strings.Repeat("9", 100), max32}, {strings.Repeat("9", 100) + "a", 0}, {"1a", 0},
		{"a1", 0}, {"-0", 0}, {" 1", 0}, {"1 ", 0}, {"\t1", 0}, {"1\r", 0}, {"/", 0}, {":", 0},
	} {
		if got := number([]byte(tc.tok)); got != tc.want {
			t.Errorf("number(%q) = %d, want %d", tc.tok, got, tc.want)
		}
	}
}
