package resp

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// encodeReply writes r back with the package's reply writers.
func encodeReply(dst []byte, r Reply) []byte {
	switch r.Kind {
	case '+':
		return AppendSimple(dst, string(r.Str))
	case '-':
		return AppendError(dst, string(r.Str))
	case ':':
		return AppendInt(dst, r.Int)
	case '$':
		if r.Null {
			return AppendNull(dst)
		}
		return AppendBulk(dst, r.Str)
	case '*':
		if r.Null {
			return AppendNullArray(dst)
		}
		dst = AppendArray(dst, len(r.Elems))
		for _, e := range r.Elems {
			dst = encodeReply(dst, e)
		}
		return dst
	}
	panic("encodeReply: kind " + quoteByte(r.Kind))
}

// sameReply compares replies ignoring nil versus empty slices.
func sameReply(a, b Reply) bool {
	if a.Kind != b.Kind || string(a.Str) != string(b.Str) || a.Int != b.Int || a.Null != b.Null || len(a.Elems) != len(b.Elems) {
		return false
	}
	for i := range a.Elems {
		if !sameReply(a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

func str(kind byte, s string) Reply { return Reply{Kind: kind, Str: []byte(s)} }

var replies = []struct {
	in   string
	want Reply
}{
	{"+OK\r\n", str('+', "OK")},
	{"+\r\n", str('+', "")},
	{"-ERR Unknown Command\r\n", str('-', "ERR Unknown Command")},
	{":0\r\n", Reply{Kind: ':'}},
	{":-9223372036854775808\r\n", Reply{Kind: ':', Int: math.MinInt64}},
	{":9223372036854775807\r\n", Reply{Kind: ':', Int: math.MaxInt64}},
	{"$5\r\nvalue\r\n", str('$', "value")},
	{"$0\r\n\r\n", str('$', "")},
	{"$6\r\na\r\nb\x00c\r\n", str('$', "a\r\nb\x00c")},
	{"$-1\r\n", Reply{Kind: '$', Null: true}},
	{"*-1\r\n", Reply{Kind: '*', Null: true}},
	{"*0\r\n", Reply{Kind: '*'}},
	{"*4\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n$1\r\nc\r\n", Reply{Kind: '*', Elems: []Reply{str('$', "a"), str('$', "b"), str('$', ""), str('$', "c")}}},
	{"*3\r\n:1\r\n*2\r\n+x\r\n$-1\r\n-E\r\n", Reply{Kind: '*', Elems: []Reply{
		{Kind: ':', Int: 1},
		{Kind: '*', Elems: []Reply{str('+', "x"), {Kind: '$', Null: true}}},
		str('-', "E"),
	}}},
	{"*2\r\n*-1\r\n*0\r\n", Reply{Kind: '*', Elems: []Reply{{Kind: '*', Null: true}, {Kind: '*'}}}},
}

func TestParseReply(t *testing.T) {
	for _, tc := range replies {
		buf := []byte(tc.in + "+NEXT\r\n")
		r, n, err := ParseReply(buf)
		if err != nil || n != len(tc.in) || !sameReply(r, tc.want) {
			t.Errorf("ParseReply(%q) = %+v, %d, %v; want %+v, %d", tc.in, r, n, err, tc.want, len(tc.in))
			continue
		}
		if got := encodeReply(nil, r); string(got) != tc.in {
			t.Errorf("%q re-encodes as %q", tc.in, got)
		}
		for k := range len(tc.in) {
			if r, n, err := ParseReply(buf[:k]); n != 0 || err != nil || !reflect.DeepEqual(r, Reply{}) {
				t.Errorf("ParseReply(%q) = %+v, %d, %v; want incomplete", buf[:k], r, n, err)
			}
		}
	}
}

func TestParseReplyViews(t *testing.T) {
	buf := []byte("*2\r\n$3\r\nabc\r\n+de\r\n")
	r, _, err := ParseReply(buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Elems {
		if cap(e.Str) != len(e.Str) {
			t.Errorf("%q has capacity %d", e.Str, cap(e.Str))
		}
	}
	buf[8] = 'A'
	if string(r.Elems[0].Str) != "Abc" {
		t.Errorf("Str = %q after changing buf: not a view", r.Elems[0].Str)
	}
}

func TestParseReplyMalformed(t *testing.T) {
	for _, tc := range []struct {
		in  string
		off int
		msg string
	}{
		{"x\r\n", 0, "unknown reply type 'x'"},
		{"_\r\n", 0, "unknown reply type '_'"}, // RESP3 null
		{",1.5\r\n", 0, "unknown reply type ','"},
		{"%1\r\n", 0, "unknown reply type '%'"},
		{"\r\n", 0, "unknown reply type 0x0d"},
		{"+O\nK\r\n", 2, `reply line has "\n" without "\r"`},
		{"+OK\rx\r\n", 4, `reply line has "\r" without "\n"`},
		{"+OK\n", 3, `reply line has "\n" without "\r"`},
		{":1.5\r\n", 1, `reply ':' has a bad number "1.5"`},
		{":+1\r\n", 1, `reply ':' has a bad number "+1"`},
		{":\r\n", 1, `reply ':' has a bad number ""`},
		{":-0\r\n", 1, `reply ':' has a bad number "-0"`},
		{":9223372036854775808\r\n", 1, `reply ':' has a bad number "9223372036854775808"`},
		{"$01\r\na\r\n", 1, `reply '$' has a bad number "01"`},
		{"$-2\r\n", 1, `reply '$' has a negative length "-2"`},
		{"*-2\r\n", 1, `reply '*' has a negative length "-2"`},
		{"$3\r\nabcd\r\n", 7, `bulk of 3 bytes is followed by 'd', not "\r\n"`},
		{"$3\r\nabc\n", 7, `bulk of 3 bytes is followed by 0x0a, not "\r\n"`},
		{"*2\r\n+a\r\n?\r\n", 8, "unknown reply type '?'"},
		{"*1\r\n*1\r\n$1\r\nab", 13, `bulk of 1 bytes is followed by 'b', not "\r\n"`},
	} {
		r, n, err := ParseReply([]byte(tc.in))
		var pe *ProtocolError
		if n != 0 || !errors.As(err, &pe) || pe.Offset != tc.off || pe.Msg != tc.msg || !reflect.DeepEqual(r, Reply{}) {
			t.Errorf("ParseReply(%q) = %+v, %d, %v; want %q at offset %d", tc.in, r, n, err, tc.msg, tc.off)
		}
	}
}

func TestParseReplyDepth(t *testing.T) {
	deep := strings.Repeat("*1\r\n", MaxReplyDepth) + ":7\r\n"
	r, n, err := ParseReply([]byte(deep))
	if err != nil || n != len(deep) {
		t.Fatalf("%d nested arrays: ParseReply = %d, %v", MaxReplyDepth, n, err)
	}
	for range MaxReplyDepth {
		r = r.Elems[0]
	}
	if r.Kind != ':' || r.Int != 7 {
		t.Fatalf("innermost = %+v", r)
	}
	_, n, err = ParseReply([]byte("*1\r\n" + deep))
	var pe *ProtocolError
	if n != 0 || !errors.As(err, &pe) || pe.Offset != 4*MaxReplyDepth {
		t.Fatalf("%d nested arrays: ParseReply = %d, %v", MaxReplyDepth+1, n, err)
	}
}

// TestParseReplyClaims checks that lengths far beyond the buffer only make
// ParseReply wait, without reserving memory for them.
func TestParseReplyClaims(t *testing.T) {
	for _, in := range []string{"*9223372036854775807\r\n", "$9223372036854775807\r\n", "*2000000000\r\n:1\r\n", "$2000000000\r\nab"} {
		buf := []byte(in)
		var n int
		var err error
		allocs := testing.AllocsPerRun(10, func() { _, n, err = ParseReply(buf) })
		if n != 0 || err != nil || allocs > 1 {
			t.Errorf("ParseReply(%q) = %d, %v with %.0f allocations; want incomplete and at most 1", in, n, err, allocs)
		}
	}
}

// randomReply builds a random reply tree of at most the given depth.
func randomReply(rng *rand.Rand, depth int) Reply {
	text := func() []byte {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	line := func() []byte { // no "\r" or "\n": those would be written as spaces
		b := text()
		for i, c := range b {
			if c == '\r' || c == '\n' {
				b[i] = '.'
			}
		}
		return b
	}
	switch k := rng.IntN(8); {
	case k == 0:
		return Reply{Kind: '+', Str: line()}
	case k == 1:
		return Reply{Kind: '-', Str: line()}
	case k == 2:
		return Reply{Kind: ':', Int: int64(rng.Uint64())}
	case k == 3:
		return Reply{Kind: '$', Null: true}
	case k == 4 && depth > 0:
		r := Reply{Kind: '*', Null: rng.IntN(5) == 0}
		if !r.Null {
			for range rng.IntN(5) {
				r.Elems = append(r.Elems, randomReply(rng, depth-1))
			}
		}
		return r
	}
	return Reply{Kind: '$', Str: text()}
}

func TestParseReplyRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var want []Reply
	for range 500 {
		r := randomReply(rng, 4)
		want = append(want, r)
		stream = encodeReply(stream, r)
	}
	for i, w := range want {
		r, n, err := ParseReply(stream)
		if err != nil || n == 0 || !sameReply(r, w) {
			t.Fatalf("reply %d: ParseReply = %+v, %d, %v; want %+v", i, r, n, err, w)
		}
		stream = stream[n:]
	}
	if len(stream) != 0 {
		t.Fatalf("%d bytes left", len(stream))
	}
}

// TestCommandRoundTrip checks that what AppendCommand writes, Parse reads.
func TestCommandRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var d Decoder
	for range 300 {
		args := make([]string, rng.IntN(10))
		for i := range args {
			b := make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			args[i] = string(b)
		}
		buf := AppendCommand(nil, args...)
		out, n, err := d.Parse(buf, nil)
		if err != nil || n != len(buf) || !equal(strs(out), args) && len(args) > 0 {
			t.Fatalf("Parse(AppendCommand(%q)) = %q, %d, %v", args, out, n, err)
		}
	}
}
