package load

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// counterReply builds a yrmcds counter reply by hand.
func counterReply(op, status byte, opaque uint32, body []byte) []byte {
	b := []byte{0x91, op, status, 0}
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = binary.BigEndian.AppendUint32(b, opaque)
	return append(b, body...)
}

// parseAll parses the replies to sent from stream, fed in pieces of size step, the way
// a connection sees them across reads.
func parseAll(t *testing.T, p Proto, stream []byte, sent []Req, step int) []Outcome {
	t.Helper()
	var out []Outcome
	var buf []byte
	i := 0
	for off := 0; off < len(stream); off += step {
		buf = append(buf, stream[off:min(off+step, len(stream))]...)
		for i < len(sent) {
			n, o, err := p.Parse(buf, &sent[i])
			if err != nil {
				t.Fatalf("step %d, reply %d: %v", step, i, err)
			}
			if n == 0 {
				break
			}
			buf = buf[n:]
			out = append(out, o)
			i++
		}
	}
	if len(buf) != 0 {
		t.Fatalf("step %d: %d bytes left over", step, len(buf))
	}
	return out
}

func TestCounterRepliesAcrossPartialReads(t *testing.T) {
	sent := []Req{
		{Kind: Acquire, Key: []byte("a"), N: 1, Max: 5, Opaque: 1},
		{Kind: Acquire, Key: []byte("a"), N: 9, Max: 5, Opaque: 2},
		{Kind: Release, Key: []byte("a"), N: 1, Opaque: 3},
		{Kind: Release, Key: []byte("b"), N: 1, Opaque: 4},
		{Kind: Get, Key: []byte("zz"), Opaque: 5},
		{Kind: Get, Key: []byte("a"), Opaque: 6},
		{Kind: Noop, Opaque: 7},
		{Kind: Acquire, Key: []byte("a"), N: 1, Max: 5, Opaque: 8},
	}
	var stream []byte
	stream = append(stream, counterReply(0x02, 0x00, 1, []byte{0, 0, 0, 1})...)
	stream = append(stream, counterReply(0x02, 0x04, 2, []byte("Invalid arguments"))...)
	stream = append(stream, counterReply(0x03, 0x00, 3, nil)...)
	stream = append(stream, counterReply(0x03, 0x22, 4, []byte("Not acquired"))...)
	stream = append(stream, counterReply(0x01, 0x01, 5, []byte("Not found"))...)
	stream = append(stream, counterReply(0x01, 0x00, 6, []byte{0, 0, 0, 0})...)
	stream = append(stream, counterReply(0x00, 0x00, 7, nil)...)
	stream = append(stream, counterReply(0x02, 0x21, 8, []byte("Resource not available"))...)
	want := []Outcome{OK, Invalid, OK, NotHeld, NotFound, OK, OK, Busy}
	for step := 1; step <= len(stream); step++ {
		got := parseAll(t, yrmcds{}, stream, sent, step)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d replies, want %d", step, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: reply %d is %v, want %v", step, i, got[i], want[i])
			}
		}
	}
}

func TestCounterStatuses(t *testing.T) {
	for status, want := range map[byte]Outcome{0x00: OK, 0x01: NotFound, 0x04: Invalid, 0x21: Busy,
		0x22: NotHeld, 0x81: Unknown, 0x82: NoMemory, 0x7f: Failed} {
		_, o, err := yrmcds{}.Parse(counterReply(0x01, status, 9, nil), &Req{Kind: Get, Opaque: 9})
		if err != nil || o != want {
			t.Errorf("status %#x: %v, %v; want %v", status, o, err, want)
		}
	}
}

func TestCounterRejectsMismatchedReplies(t *testing.T) {
	for name, c := range map[string]struct {
		reply []byte
		want  string
	}{
		"opaque":  {counterReply(0x02, 0, 8, []byte{0, 0, 0, 1}), "opaque 8, want 7"},
		"opcode":  {counterReply(0x03, 0, 7, nil), "opcode 0x3"},
		"magic":   {append([]byte{0x90}, counterReply(0x02, 0, 7, nil)[1:]...), "magic"},
		"toolong": {[]byte{0x91, 2, 0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 7}, ""},
	} {
		_, _, err := yrmcds{}.Parse(c.reply, &Req{Kind: Acquire, Opaque: 7})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
}

func TestCounterAppendIsTheCodecs(t *testing.T) {
	b := yrmcds{}.Append(nil, &Req{Kind: Acquire, Key: []byte("key"), N: 2, Max: 10, Opaque: 0x01020304})
	want := []byte{0x90, 0x02, 0, 0, 0, 0, 0, 13, 1, 2, 3, 4, 0, 0, 0, 2, 0, 0, 0, 10, 0, 3, 'k', 'e', 'y'}
	if !bytes.Equal(b, want) {
		t.Errorf("acquire encoded as % x\nwant % x", b, want)
	}
	if b := (yrmcds{}).Append(nil, &Req{Kind: Release, Key: []byte("k"), N: 1}); b[1] != 0x03 || len(b) != 12+7 {
		t.Errorf("release encoded as % x", b)
	}
}

func TestSinkAnswersCounterRequests(t *testing.T) {
	var reqs []byte
	sent := []Req{{Kind: Acquire, Key: []byte("x"), N: 3, Max: 9, Opaque: 1}, {Kind: Get, Key: []byte("x"), Opaque: 2},
		{Kind: Release, Key: []byte("x"), N: 3, Opaque: 3}, {Kind: Noop, Opaque: 4}}
	for _, r := range sent {
		reqs = yrmcds{}.Append(reqs, &r)
	}
	var out []byte
	for len(reqs) > 0 {
		size := 12 + int(binary.BigEndian.Uint32(reqs[4:8]))
		if _, n, err := (yrmcds{}).Answer(nil, reqs[:size-1]); n != 0 || err != nil {
			t.Fatalf("answered a request missing its last byte: n %d, %v", n, err)
		}
		var n int
		var err error
		out, n, err = yrmcds{}.Answer(out, reqs)
		if err != nil || n != size {
			t.Fatalf("Answer: n %d, %v; want %d", n, err, size)
		}
		reqs = reqs[n:]
	}
	got := parseAll(t, yrmcds{}, out, sent, 5)
	for i, o := range got {
		if o != OK {
			t.Errorf("sink reply %d: %v", i, o)
		}
	}
	if !bytes.Equal(out[12:16], []byte{0, 0, 0, 3}) {
		t.Errorf("sink acquire reply body % x, want the resources echoed", out[12:16])
	}
	if _, _, err := (yrmcds{}).Answer(nil, []byte("GET / HTTP/1.1\r\n")); err == nil {
		t.Error("sink accepted a request with a wrong magic")
	}
}

func TestRESPAppend(t *testing.T) {
	for _, c := range []struct {
		r    Req
		want string
	}{
		{Req{Kind: Acquire, Key: []byte("tb:c1"), N: 1}, "*2\r\n$4\r\nINCR\r\n$5\r\ntb:c1\r\n"},
		{Req{Kind: Release, Key: []byte("k"), N: 1}, "*2\r\n$4\r\nDECR\r\n$1\r\nk\r\n"},
		{Req{Kind: Acquire, Key: []byte("k"), N: 12}, "*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$2\r\n12\r\n"},
		{Req{Kind: Release, Key: []byte("k"), N: 7}, "*3\r\n$6\r\nDECRBY\r\n$1\r\nk\r\n$1\r\n7\r\n"},
		{Req{Kind: Get, Key: []byte("k")}, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"},
		{Req{Kind: Noop}, "*1\r\n$4\r\nPING\r\n"},
	} {
		if got := string(respCounter{}.Append(nil, &c.r)); got != c.want {
			t.Errorf("%v %d: %q, want %q", c.r.Kind, c.r.N, got, c.want)
		}
	}
}

func TestRESPRepliesAcrossPartialReads(t *testing.T) {
	stream := ":1\r\n:0\r\n$-1\r\n$3\r\n4\r\n\r\n-ERR value is not an integer\r\n+PONG\r\n" +
		"*3\r\n$2\r\nok\r\n*2\r\n:1\r\n$-1\r\n+x\r\n*-1\r\n:-12\r\n"
	want := []Outcome{OK, OK, NotFound, OK, Failed, OK, OK, NotFound, OK}
	sent := make([]Req, len(want))
	for step := 1; step <= len(stream); step++ {
		got := parseAll(t, respCounter{}, []byte(stream), sent, step)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d replies, want %d", step, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d: reply %d is %v, want %v", step, i, got[i], want[i])
			}
		}
	}
}

func TestRESPRejectsGarbage(t *testing.T) {
	for _, bad := range []string{":12\n", ":1x\r\n", "$abc\r\n", "$5\r\nhelloXX", "$-2\r\n", "*x\r\n",
		"?what\r\n", strings.Repeat("*1\r\n", 20) + ":1\r\n", ":" + strings.Repeat("9", 30) + "\r\n"} {
		if _, _, err := (respCounter{}).Parse([]byte(bad), &Req{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, _, err := (respCounter{}).Parse(bytes.Repeat([]byte("a"), 70<<10), &Req{}); err == nil {
		t.Error("a 70 KiB line without a newline was waited on")
	}
}

func TestSinkAnswersRESP(t *testing.T) {
	req := respCounter{}.Append(nil, &Req{Kind: Acquire, Key: []byte("k"), N: 1})
	for i := 0; i < len(req); i++ {
		if _, n, err := (respCounter{}).Answer(nil, req[:i]); n != 0 || err != nil {
			t.Fatalf("answered %d of %d bytes: n %d, %v", i, len(req), n, err)
		}
	}
	out, n, err := respCounter{}.Answer(nil, req)
	if err != nil || n != len(req) || string(out) != ":1\r\n" {
		t.Errorf("Answer = %q, %d, %v", out, n, err)
	}
	if _, _, err := (respCounter{}).Answer(nil, []byte("+PING\r\n")); err == nil {
		t.Error("sink accepted an inline command")
	}
}

func TestLookup(t *testing.T) {
	for _, name := range []string{"counter", "semaphore", "resp", "pool", "slock", "slock-text", "redis-lock", "redis-lock-lua"} {
		d, err := Lookup(name)
		if err != nil || d.Name != name || d.New() == nil {
			t.Errorf("Lookup(%q) = %v, %v", name, d, err)
		}
	}
	if _, err := Lookup("memcache"); err == nil || !strings.Contains(err.Error(), "counter, pool, redis-lock, redis-lock-lua, resp, semaphore, slock, slock-text") {
		t.Errorf("Lookup(memcache): %v", err)
	}
	d, _ := Lookup("resp")
	if d.Supports(Wait) || !d.Supports(Acquire) || d.Waits {
		t.Error("resp: Supports wrong")
	}
	for _, name := range []string{"pool", "slock", "slock-text"} {
		d, _ := Lookup(name)
		if !d.Supports(Wait) || d.Supports(Get) || !d.Waits || d.TimeoutUnit == 0 {
			t.Errorf("%s: Supports or Waits wrong: %+v", name, d)
		}
		if _, ok := d.New().(Matcher); ok != (name != "slock-text") {
			t.Errorf("%s: Matcher %v", name, ok)
		}
	}
}
