package pool

import "testing"

var allocLines = map[string]string{
	"acq4me":    "ACQ4ME some-page-key 1 10 15\n",
	"acq4any":   "ACQ4ANY some-page-key 2 99999999999 15\r\n",
	"release":   "RELEASE\n",
	"stats":     "STATS FULL\n",
	"bad":       "HELLO\n",
	"pipelined": "RELEASE\nACQ4ME k 1 1 1\n",
}

func TestParseAllocs(t *testing.T) {
	d := &Decoder{}
	for name, line := range allocLines {
		buf := []byte(line)
		var r Request
		var n int
		if allocs := testing.AllocsPerRun(100, func() { n, _ = d.Parse(buf, &r) }); allocs != 0 {
			t.Errorf("%s: Parse allocates %.1f times", name, allocs)
		}
		if n == 0 {
			t.Fatalf("%s: Parse took nothing", name)
		}
		part := buf[:len(buf)-1]
		if allocs := testing.AllocsPerRun(100, func() { n, _ = d.Parse(part, &r) }); allocs != 0 || n != 0 && name != "pipelined" {
			t.Errorf("%s: incomplete Parse allocates %.1f times (n %d)", name, allocs, n)
		}
	}
	long := make([]byte, 2*DefaultMaxLine)
	var r Request
	var err error
	if allocs := testing.AllocsPerRun(100, func() { _, err = d.Parse(long, &r) }); allocs != 0 || err != ErrLineTooLong {
		t.Errorf("too long line: Parse allocates %.1f times, err %v", allocs, err)
	}
}

func TestAppendAllocs(t *testing.T) {
	key := []byte("some-page-key")
	dst := make([]byte, 0, 256)
	for name, f := range map[string]func(){
		"AppendReply":    func() { dst = AppendReply(dst[:0], WaitForResponse) },
		"AppendAcq4Me":   func() { dst = AppendAcq4Me(dst[:0], key, 1, 10, 15) },
		"AppendAcq4Any":  func() { dst = AppendAcq4Any(dst[:0], key, 1, 10, 15) },
		"AppendRelease":  func() { dst = AppendRelease(dst[:0]) },
		"AppendStats":    func() { dst = AppendStats(dst[:0], "FULL") },
		"ParseReplyLine": func() { _, _ = ParseReplyLine([]byte("LOCKED\n")) },
	} {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", name, allocs)
		}
	}
}

func benchParse(b *testing.B, line string) {
	d := &Decoder{}
	buf := []byte(line)
	var r Request
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if n, err := d.Parse(buf, &r); n != len(buf) || err != nil {
			b.Fatalf("Parse = %d, %v", n, err)
		}
	}
}

func BenchmarkParseAcq4Me(b *testing.B)  { benchParse(b, allocLines["acq4me"]) }
func BenchmarkParseRelease(b *testing.B) { benchParse(b, allocLines["release"]) }
func BenchmarkParseLongKey(b *testing.B) {
	benchParse(b, "ACQ4ANY "+string(make([]byte, 900))+" 1 1 1\n")
}

func BenchmarkAppendReply(b *testing.B) {
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendReply(dst[:0], Locked)
	}
}

func BenchmarkAppendAcq4Me(b *testing.B) {
	key := []byte("some-page-key")
	dst := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendAcq4Me(dst[:0], key, 1, 10, 15)
	}
}
