package resp

import (
	"strings"
	"testing"
)

var allocRequests = map[string]string{
	"ping":      "*1\r\n$4\r\nPING\r\n",
	"set":       "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
	"lock":      "*8\r\n$4\r\nLOCK\r\n$5\r\nmykey\r\n$7\r\nLOCK_ID\r\n$3\r\nabc\r\n$7\r\nTIMEOUT\r\n$1\r\n5\r\n$7\r\nEXPRIED\r\n$2\r\n10\r\n",
	"empty":     "*0\r\n",
	"pipelined": "*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n",
	"inline":    "PING\r\n",
}

func TestParseAllocs(t *testing.T) {
	var d Decoder
	args := make([][]byte, 0, 16)
	for name, in := range allocRequests {
		buf := []byte(in)
		var n int
		var err error
		if allocs := testing.AllocsPerRun(100, func() { args, n, err = d.Parse(buf, args) }); allocs != 0 {
			t.Errorf("%s: Parse allocates %.1f times", name, allocs)
		}
		if (n == 0) != (name == "inline") || (err == ErrInline) != (name == "inline") {
			t.Fatalf("%s: Parse = %d, %v", name, n, err)
		}
		part := buf[:len(buf)-1]
		if allocs := testing.AllocsPerRun(100, func() { args, n, err = d.Parse(part, args) }); allocs != 0 {
			t.Errorf("%s: incomplete Parse allocates %.1f times", name, allocs)
		}
		if n != 0 && name != "pipelined" {
			t.Errorf("%s: incomplete Parse took %d bytes", name, n)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	dst := make([]byte, 0, 256)
	val := []byte("value")
	for name, f := range map[string]func(){
		"AppendSimple":       func() { dst = AppendSimple(dst[:0], "OK") },
		"AppendSimple CRLF":  func() { dst = AppendSimple(dst[:0], "a\r\nb") },
		"AppendError":        func() { dst = AppendError(dst[:0], "ERR Unknown Command") },
		"AppendInt":          func() { dst = AppendInt(dst[:0], -1234567) },
		"AppendBulk":         func() { dst = AppendBulk(dst[:0], val) },
		"AppendBulkString":   func() { dst = AppendBulkString(dst[:0], "LOCK_ID") },
		"AppendBulkInt":      func() { dst = AppendBulkInt(dst[:0], 65535) },
		"AppendNull":         func() { dst = AppendNull(dst[:0]) },
		"AppendNullArray":    func() { dst = AppendNullArray(dst[:0]) },
		"AppendArray":        func() { dst = AppendArray(dst[:0], 12) },
		"AppendCommand":      func() { dst = AppendCommand(dst[:0], "SET", "key", "value") },
		"AppendCommandBytes": func() { dst = AppendCommandBytes(dst[:0], val, val) },
		"Is":                 func() { _ = Is(val, "VALUE") },
		"ParseInt":           func() { _, _ = ParseInt([]byte("-9223372036854775808")) },
	} {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", name, allocs)
		}
	}
}

func benchParse(b *testing.B, in string) {
	var d Decoder
	buf := []byte(in)
	args := make([][]byte, 0, 16)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		out, n, err := d.Parse(buf, args)
		if n != len(buf) || err != nil {
			b.Fatalf("Parse = %d, %v", n, err)
		}
		args = out
	}
}

func BenchmarkParsePing(b *testing.B) { benchParse(b, allocRequests["ping"]) }
func BenchmarkParseSet(b *testing.B)  { benchParse(b, allocRequests["set"]) }
func BenchmarkParseLock(b *testing.B) { benchParse(b, allocRequests["lock"]) }
func BenchmarkParseBigValue(b *testing.B) {
	benchParse(b, string(AppendCommand(nil, "SET", "key", strings.Repeat("v", 1<<20))))
}

// BenchmarkParseIncomplete is the cost of looking at a request whose last byte
// has not arrived: the loop pays it once per read.
func BenchmarkParseIncomplete(b *testing.B) {
	var d Decoder
	buf := []byte(allocRequests["lock"])
	buf = buf[:len(buf)-1]
	args := make([][]byte, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		out, n, err := d.Parse(buf, args)
		if n != 0 || err != nil {
			b.Fatalf("Parse = %d, %v", n, err)
		}
		args = out
	}
}

// BenchmarkAppendLockReply writes the 12-element reply of the slock text LOCK.
func BenchmarkAppendLockReply(b *testing.B) {
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendArray(dst[:0], 12)
		dst = AppendBulkInt(dst, 0)
		dst = AppendBulkString(dst, "OK")
		dst = AppendBulkString(dst, "LOCK_ID")
		dst = AppendBulkString(dst, "000000000000000000000000006d796b")
		for _, k := range [...]string{"LCOUNT", "COUNT", "LRCOUNT", "RCOUNT"} {
			dst = AppendBulkString(dst, k)
			dst = AppendBulkInt(dst, 1)
		}
	}
}

func BenchmarkAppendSimple(b *testing.B) {
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendSimple(dst[:0], "OK")
	}
}

func BenchmarkIs(b *testing.B) {
	arg := []byte("lock_id")
	b.ReportAllocs()
	for b.Loop() {
		if !Is(arg, "LOCK_ID") {
			b.Fatal("Is = false")
		}
	}
}

func BenchmarkParseInt(b *testing.B) {
	arg := []byte("-9223372036854775808")
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseInt(arg); !ok {
			b.Fatal("ParseInt = false")
		}
	}
}

func BenchmarkParseReply(b *testing.B) {
	buf := AppendCommand(nil, "0", "OK", "LOCK_ID", "000000000000000000000000006d796b", "LCOUNT", "1", "COUNT", "1", "LRCOUNT", "1", "RCOUNT", "1")
	b.ReportAllocs()
	for b.Loop() {
		if _, n, err := ParseReply(buf); n != len(buf) || err != nil {
			b.Fatalf("ParseReply = %d, %v", n, err)
		}
	}
}
