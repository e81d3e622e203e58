package resp

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestSkipReply(t *testing.T) {
	for _, tc := range replies {
		buf := []byte(tc.in + "+NEXT\r\n")
		if n, err := SkipReply(buf); n != len(tc.in) || err != nil {
			t.Errorf("SkipReply(%q) = %d, %v; want %d", buf, n, err, len(tc.in))
		}
		for k := range len(tc.in) {
			if n, err := SkipReply(buf[:k]); n != 0 || err != nil {
				t.Errorf("SkipReply(%q) = %d, %v; want incomplete", buf[:k], n, err)
			}
		}
	}
	// A stream of random replies splits where ParseReply splits it.
	rng := rand.New(rand.NewPCG(5, 6))
	var stream []byte
	var ends []int
	for range 500 {
		stream = encodeReply(stream, randomReply(rng, 5))
		ends = append(ends, len(stream))
	}
	at := 0
	for i, end := range ends {
		n, err := SkipReply(stream[at:])
		if err != nil || at+n != end {
			t.Fatalf("reply %d: SkipReply = %d, %v; want %d", i, n, err, end-at)
		}
		at += n
	}
}

// SkipReply rejects what ParseReply rejects, with the same error.
func TestSkipReplyMalformed(t *testing.T) {
	deep := strings.Repeat("*1\r\n", MaxReplyDepth) + ":7\r\n"
	if n, err := SkipReply([]byte(deep)); n != len(deep) || err != nil {
		t.Fatalf("%d nested arrays: SkipReply = %d, %v", MaxReplyDepth, n, err)
	}
	for _, in := range []string{
		"x\r\n", "_\r\n", "\r\n", "+O\nK\r\n", "+OK\rx\r\n", ":1.5\r\n", ":-0\r\n", "$01\r\na\r\n",
		"$-2\r\n", "*-2\r\n", "$3\r\nabcd\r\n", "$3\r\nabc\n", "*2\r\n+a\r\n?\r\n", "*1\r\n*1\r\n$1\r\nab",
		"*3\r\n*0\r\n*-1\r\n*1\r\n:x\r\n", "*1\r\n" + deep,
	} {
		n, err := SkipReply([]byte(in))
		_, _, want := ParseReply([]byte(in))
		var pe *ProtocolError
		if want == nil || n != 0 || !errors.As(err, &pe) || !reflect.DeepEqual(err, want) {
			t.Errorf("SkipReply(%q) = %d, %v; want %v", in, n, err, want)
		}
	}
}

func TestSkipReplyAllocs(t *testing.T) {
	for _, in := range []string{
		"+OK\r\n", "$5\r\nvalue\r\n", "*3\r\n:1\r\n*2\r\n+x\r\n$-1\r\n-E\r\n", "*2000000000\r\n:1\r\n",
		"$9223372036854775807\r\n", strings.Repeat("*1\r\n", MaxReplyDepth) + ":7\r\n",
	} {
		buf := []byte(in)
		var n int
		var err error
		if allocs := testing.AllocsPerRun(100, func() { n, err = SkipReply(buf) }); allocs != 0 || err != nil {
			t.Errorf("SkipReply(%.20q) = %d, %v, allocating %.1f times", in, n, err, allocs)
		}
	}
}

func FuzzSkipReply(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzSkipReply.
	for _, tc := range replies {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("*2\r\n*1\r\n$3\r\nabc\r\n:5\r\n+OK\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for buf := data; ; {
			n, err := SkipReply(buf)
			_, wn, werr := ParseReply(buf)
			if n != wn || !reflect.DeepEqual(err, werr) {
				t.Fatalf("SkipReply(%q) = %d, %v; ParseReply says %d, %v", buf, n, err, wn, werr)
			}
			if n == 0 {
				return
			}
			buf = buf[n:]
		}
	})
}

func BenchmarkSkipReply(b *testing.B) {
	buf := []byte("*3\r\n:1\r\n*2\r\n$5\r\nvalue\r\n$-1\r\n-ERR no\r\n")
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := SkipReply(buf); n != len(buf) || err != nil {
			b.Fatalf("SkipReply = %d, %v", n, err)
		}
	}
}
