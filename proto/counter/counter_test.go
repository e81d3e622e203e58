package counter

import (
	"bytes"
	"errors"
	"testing"
)

type parseCase struct {
	name  string
	frame []byte
	want  Request  // in the Counter dialect
	sem   *Request // in the Semaphore dialect, if different
}

func ok(op Opcode, opaque uint32) Request { return Request{Opcode: op, Opaque: opaque} }

func bad(op Opcode, opaque uint32, st Status) Request {
	return Request{Opcode: op, Opaque: opaque, Status: st}
}

var parseCases = []parseCase{
	// Noop, Stats, Dump: any body is skipped.
	{"noop", req(0x00, 1), ok(OpNoop, 1), nil},
	{"noop/body", req(0x00, 2, str("ignored body")), ok(OpNoop, 2), nil},
	{"stats", req(0x10, 3), ok(OpStats, 3), nil},
	{"stats/body", req(0x10, 4, rep(0xff, 40)), ok(OpStats, 4), nil},
	{"dump", req(0x11, 5), ok(OpDump, 5), &Request{Opcode: OpDump, Opaque: 5, Status: StatusUnknownCommand}},
	{"dump/body", req(0x11, 6, str("xyz")), ok(OpDump, 6), &Request{Opcode: OpDump, Opaque: 6, Status: StatusUnknownCommand}},
	// tallyd's extension: the one-byte body DumpAcquired asks for the Acquires granted.
	{"dump/acquired", req(0x11, 7, []byte{DumpAcquired}), Request{Opcode: OpDump, Opaque: 7, DumpAcquired: true},
		&Request{Opcode: OpDump, Opaque: 7, Status: StatusUnknownCommand, DumpAcquired: true}},
	{"dump/acquired-and-more", req(0x11, 8, []byte{DumpAcquired, 0}), ok(OpDump, 8), &Request{Opcode: OpDump, Opaque: 8, Status: StatusUnknownCommand}},
	{"dump/other-byte", req(0x11, 9, []byte{0x02}), ok(OpDump, 9), &Request{Opcode: OpDump, Opaque: 9, Status: StatusUnknownCommand}},

	// Flags and Reserved are ignored; Opaque is taken verbatim.
	{"noop/flags", frame(0x90, 0x00, 0xff, 0xee, 0xdeadbeef), ok(OpNoop, 0xdeadbeef), nil},
	{"get/flags", frame(0x90, 0x01, 0x01, 0x80, 0xffffffff, be16(1), str("k")),
		Request{Opcode: OpGet, Opaque: 0xffffffff, Name: str("k")}, nil},

	// Get u16 NameLen, Name.
	{"get", req(0x01, 7, be16(3), str("foo")), Request{Opcode: OpGet, Opaque: 7, Name: str("foo")}, nil},
	{"get/nul-name", req(0x01, 7, be16(3), []byte{0, 'a', 0}), Request{Opcode: OpGet, Opaque: 7, Name: []byte{0, 'a', 0}}, nil},
	{"get/trailing", req(0x01, 8, be16(3), str("fooBAR")), Request{Opcode: OpGet, Opaque: 8, Name: str("foo")}, nil},
	{"get/empty-body", req(0x01, 9), bad(OpGet, 9, StatusInvalid), nil},
	{"get/body-1", req(0x01, 10, []byte{0}), bad(OpGet, 10, StatusInvalid), nil},
	{"get/namelen-0", req(0x01, 11, be16(0)), bad(OpGet, 11, StatusInvalid), nil},
	{"get/namelen-0-trailing", req(0x01, 12, be16(0), str("abc")), bad(OpGet, 12, StatusInvalid), nil},
	{"get/one-short", req(0x01, 13, be16(4), str("foo")), bad(OpGet, 13, StatusInvalid), nil},
	{"get/namelen-only", req(0x01, 14, be16(1)), bad(OpGet, 14, StatusInvalid), nil},
	{"get/max-name", req(0x01, 15, be16(MaxNameLen), rep('n', MaxNameLen)),
		Request{Opcode: OpGet, Opaque: 15, Name: rep('n', MaxNameLen)}, nil},

	// Acquire u32 Resources, u32 Maximum, u16 NameLen, Name.
	{"acquire", req(0x02, 20, be32(3), be32(10), be16(2), str("ab")),
		Request{Opcode: OpAcquire, Opaque: 20, Resources: 3, Maximum: 10, Name: str("ab")}, nil},
	{"acquire/max-eq-res", req(0x02, 21, be32(5), be32(5), be16(1), str("x")),
		Request{Opcode: OpAcquire, Opaque: 21, Resources: 5, Maximum: 5, Name: str("x")}, nil},
	{"acquire/big", req(0x02, 22, be32(0xffffffff), be32(0xffffffff), be16(1), str("x")),
		Request{Opcode: OpAcquire, Opaque: 22, Resources: 0xffffffff, Maximum: 0xffffffff, Name: str("x")}, nil},
	{"acquire/trailing", req(0x02, 23, be32(1), be32(2), be16(2), str("abcd")),
		Request{Opcode: OpAcquire, Opaque: 23, Resources: 1, Maximum: 2, Name: str("ab")}, nil},
	{"acquire/empty-body", req(0x02, 24), bad(OpAcquire, 24, StatusInvalid), nil},
	{"acquire/body-9", req(0x02, 25, be32(1), be32(2), []byte{0}), bad(OpAcquire, 25, StatusInvalid), nil},
	{"acquire/res-0", req(0x02, 26, be32(0), be32(2), be16(1), str("x")), bad(OpAcquire, 26, StatusInvalid), nil},
	{"acquire/res-0-max-0", req(0x02, 27, be32(0), be32(0), be16(1), str("x")), bad(OpAcquire, 27, StatusInvalid), nil},
	{"acquire/max-lt-res", req(0x02, 28, be32(5), be32(4), be16(1), str("x")), bad(OpAcquire, 28, StatusInvalid), nil},
	{"acquire/namelen-0", req(0x02, 29, be32(1), be32(1), be16(0)), bad(OpAcquire, 29, StatusInvalid), nil},
	{"acquire/namelen-0-trailing", req(0x02, 30, be32(1), be32(1), be16(0), str("x")), bad(OpAcquire, 30, StatusInvalid), nil},
	{"acquire/one-short", req(0x02, 31, be32(1), be32(1), be16(3), str("ab")), bad(OpAcquire, 31, StatusInvalid), nil},
	{"acquire/namelen-only", req(0x02, 32, be32(1), be32(1), be16(1)), bad(OpAcquire, 32, StatusInvalid), nil},
	{"acquire/max-name", req(0x02, 33, be32(1), be32(1), be16(MaxNameLen), rep(0, MaxNameLen)),
		Request{Opcode: OpAcquire, Opaque: 33, Resources: 1, Maximum: 1, Name: rep(0, MaxNameLen)}, nil},

	// Release u32 Resources, u16 NameLen, Name.
	{"release", req(0x03, 40, be32(2), be16(3), str("foo")),
		Request{Opcode: OpRelease, Opaque: 40, Resources: 2, Name: str("foo")}, nil},
	{"release/res-0", req(0x03, 41, be32(0), be16(1), str("f")),
		Request{Opcode: OpRelease, Opaque: 41, Name: str("f")}, nil},
	{"release/big", req(0x03, 42, be32(0xffffffff), be16(1), str("f")),
		Request{Opcode: OpRelease, Opaque: 42, Resources: 0xffffffff, Name: str("f")}, nil},
	{"release/trailing", req(0x03, 43, be32(1), be16(1), str("fXY")),
		Request{Opcode: OpRelease, Opaque: 43, Resources: 1, Name: str("f")}, nil},
	{"release/empty-body", req(0x03, 44), bad(OpRelease, 44, StatusInvalid), nil},
	{"release/body-5", req(0x03, 45, be32(1), []byte{0}), bad(OpRelease, 45, StatusInvalid), nil},
	{"release/namelen-0", req(0x03, 46, be32(1), be16(0)), bad(OpRelease, 46, StatusInvalid), nil},
	{"release/namelen-0-trailing", req(0x03, 47, be32(1), be16(0), str("zz")), bad(OpRelease, 47, StatusInvalid), nil},
	{"release/one-short", req(0x03, 48, be32(1), be16(4), str("foo")), bad(OpRelease, 48, StatusInvalid), nil},
	{"release/namelen-only", req(0x03, 49, be32(1), be16(1)), bad(OpRelease, 49, StatusInvalid), nil},

	// Unknown opcodes, echoed as sent.
	{"unknown/0x04", req(0x04, 50), bad(0x04, 50, StatusUnknownCommand), nil},
	{"unknown/0x12", req(0x12, 51, str("body")), bad(0x12, 51, StatusUnknownCommand), nil},
	{"unknown/0x0f", req(0x0f, 52), bad(0x0f, 52, StatusUnknownCommand), nil},
	{"unknown/0xff", req(0xff, 53, be16(1), str("x")), bad(0xff, 53, StatusUnknownCommand), nil},

	// Wrong magic: Invalid, opcode echoed, whatever the opcode and body.
	{"magic/0x91-noop", frame(0x91, 0x00, 0, 0, 60), bad(OpNoop, 60, StatusInvalid), nil},
	{"magic/0x00-get", frame(0x00, 0x01, 0, 0, 61, be16(1), str("x")), bad(OpGet, 61, StatusInvalid), nil},
	{"magic/0x80-acquire", frame(0x80, 0x02, 0, 0, 62, be32(1), be32(1), be16(1), str("x")), bad(OpAcquire, 62, StatusInvalid), nil},
	{"magic/0xff-release", frame(0xff, 0x03, 0, 0, 63, be32(1), be16(1), str("x")), bad(OpRelease, 63, StatusInvalid), nil},
	{"magic/unknown-op", frame(0x81, 0x42, 0, 0, 64, str("zz")), bad(0x42, 64, StatusInvalid), nil},
	{"magic/dump", frame(0x91, 0x11, 0, 0, 65), bad(OpDump, 65, StatusInvalid), nil},
}

func eqRequest(a, b Request) bool {
	return a.Opcode == b.Opcode && a.Opaque == b.Opaque && a.Status == b.Status &&
		a.Resources == b.Resources && a.Maximum == b.Maximum &&
		(a.Name == nil) == (b.Name == nil) && bytes.Equal(a.Name, b.Name)
}

func TestParse(t *testing.T) {
	for _, dialect := range []Dialect{Counter, Semaphore} {
		d := Decoder{Dialect: dialect, MaxBody: DefaultMaxBody}
		for _, tc := range parseCases {
			want := tc.want
			if dialect == Semaphore && tc.sem != nil {
				want = *tc.sem
			}
			// Alone, then followed by the start of another frame:
			// the result must not change and n must stop at the frame.
			for _, suffix := range [][]byte{nil, req(0x01, 99, be16(1), str("z"))[:5], req(0x00, 98)} {
				t.Run(dialect.String()+"/"+tc.name, func(t *testing.T) {
					buf := cat(tc.frame, suffix)
					r := Request{Name: str("stale"), Resources: 77}
					n, err := d.Parse(buf, &r)
					if err != nil {
						t.Fatalf("Parse: %v", err)
					}
					if n != len(tc.frame) {
						t.Fatalf("n = %d, want %d", n, len(tc.frame))
					}
					if !eqRequest(r, want) {
						t.Fatalf("got  %+v\nwant %+v", r, want)
					}
					if r.Name != nil {
						if cap(r.Name) != len(r.Name) {
							t.Errorf("cap(Name) = %d, want %d", cap(r.Name), len(r.Name))
						}
						// Name is a view into buf inside the frame.
						off := len(tc.frame) - len(r.Name)
						for off >= HeaderLen && &buf[off] != &r.Name[0] {
							off--
						}
						if off < HeaderLen {
							t.Errorf("Name is not a view into the frame's body")
						}
					}
				})
			}
		}
	}
}

// TestParseNameIsView checks that Name aliases the buffer rather than a copy.
func TestParseNameIsView(t *testing.T) {
	d := Decoder{MaxBody: DefaultMaxBody}
	buf := req(0x02, 1, be32(1), be32(1), be16(3), str("abc"))
	var r Request
	if n, err := d.Parse(buf, &r); n != len(buf) || err != nil || r.Status != StatusOK {
		t.Fatalf("Parse = %d, %v, status %v", n, err, r.Status)
	}
	buf[len(buf)-2] = 'X'
	if string(r.Name) != "aXc" {
		t.Fatalf("Name = %q after changing buf, want %q", r.Name, "aXc")
	}
	r.Name = append(r.Name, '!') // must not write past the name into buf
	if len(buf) != 25 || buf[len(buf)-1] != 'c' {
		t.Fatalf("append to Name changed buf: %q", buf)
	}
}

func TestParseIncomplete(t *testing.T) {
	frames := [][]byte{
		req(0x00, 1),
		req(0x01, 2, be16(3), str("foo")),
		req(0x02, 3, be32(1), be32(2), be16(3), str("bar")),
		req(0x03, 4, be32(1), be16(3), str("baz")),
		req(0x10, 5, str("junk")),
		req(0x11, 6),
		req(0x77, 7, str("unknown")),
		frame(0x13, 0x01, 0, 0, 8, str("bad magic")),
	}
	for _, dialect := range []Dialect{Counter, Semaphore} {
		d := Decoder{Dialect: dialect, MaxBody: 64}
		for _, f := range frames {
			for i := 0; i < len(f); i++ {
				sentinel := Request{Opcode: 0xee, Opaque: 0x5a5a, Status: 0x99, Name: str("s")}
				r := sentinel
				n, err := d.Parse(f[:i], &r)
				if n != 0 || err != nil {
					t.Fatalf("%v: Parse(% x) = %d, %v; want 0, nil", dialect, f[:i], n, err)
				}
				if !eqRequest(r, sentinel) {
					t.Fatalf("%v: Parse of %d bytes of % x wrote *req: %+v", dialect, i, f, r)
				}
			}
			var r Request
			if n, err := d.Parse(f, &r); n != len(f) || err != nil {
				t.Fatalf("%v: Parse(% x) = %d, %v; want %d, nil", dialect, f, n, err, len(f))
			}
		}
	}
}

func TestParseTooLarge(t *testing.T) {
	tests := []struct {
		max, blen uint32
		magic     byte
		op        byte
		tooLarge  bool
	}{
		{0, 0, 0x90, 0x00, false},
		{0, 1, 0x90, 0x00, true},
		{16, 16, 0x90, 0x01, false},
		{16, 17, 0x90, 0x01, true},
		{DefaultMaxBody, DefaultMaxBody, 0x90, 0x02, false},
		{DefaultMaxBody, DefaultMaxBody + 1, 0x90, 0x02, true},
		{DefaultMaxBody, 0xffffffff, 0x90, 0x03, true},
		{DefaultMaxBody, 2000000, 0x13, 0x10, true}, // wrong magic: the limit still applies
		{DefaultMaxBody, 2000000, 0x90, 0x99, true}, // unknown opcode too
		{0xffffffff, 0xffffffff, 0x90, 0x00, false},
	}
	for _, tc := range tests {
		d := Decoder{MaxBody: tc.max}
		h := rawHeader(tc.magic, tc.op, tc.blen, 1)
		var r Request
		for i := 0; i < HeaderLen; i++ {
			if n, err := d.Parse(h[:i], &r); n != 0 || err != nil {
				t.Fatalf("max %d blen %d: Parse(%d header bytes) = %d, %v; want 0, nil", tc.max, tc.blen, i, n, err)
			}
		}
		// The header alone decides, and a few body bytes change nothing.
		for _, buf := range [][]byte{h, cat(h, str("abc"))} {
			n, err := d.Parse(buf, &r)
			if !tc.tooLarge {
				if tc.blen > uint32(len(buf)-HeaderLen) && (n != 0 || err != nil) {
					t.Fatalf("max %d blen %d: Parse = %d, %v; want 0, nil (wait for body)", tc.max, tc.blen, n, err)
				}
				continue
			}
			var e *BodyTooLargeError
			if n != 0 || !errors.As(err, &e) {
				t.Fatalf("max %d blen %d: Parse = %d, %v; want 0, *BodyTooLargeError", tc.max, tc.blen, n, err)
			}
			if e.Length != tc.blen || e.Limit != tc.max {
				t.Fatalf("error = %+v, want Length %d Limit %d", *e, tc.blen, tc.max)
			}
		}
	}
	err := (&BodyTooLargeError{Length: 2000000, Limit: 1048576}).Error()
	if want := "counter: body length 2000000 exceeds limit 1048576"; err != want {
		t.Fatalf("Error() = %q, want %q", err, want)
	}
}

// TestParseZeroDecoder checks that the zero Decoder accepts only empty bodies.
func TestParseZeroDecoder(t *testing.T) {
	var d Decoder
	var r Request
	if n, err := d.Parse(req(0x00, 1), &r); n != HeaderLen || err != nil || r.Status != StatusOK {
		t.Fatalf("empty noop: %d, %v, %v", n, err, r.Status)
	}
	if _, err := d.Parse(req(0x01, 1, be16(1), str("x")), &r); err == nil {
		t.Fatalf("get with a body: no error from the zero Decoder")
	}
}

func TestParsePipelined(t *testing.T) {
	stream := cat(
		req(0x02, 1, be32(2), be32(5), be16(1), str("a")),
		frame(0x00, 0x02, 0, 0, 2, be32(2), be32(5), be16(1), str("a")), // bad magic
		req(0x01, 3, be16(1), str("a")),
		req(0x33, 4, str("skip me")),
		req(0x02, 5, be32(0), be32(5), be16(1), str("b")), // invalid
		req(0x10, 6),
		req(0x03, 7, be32(2), be16(1), str("a")),
		req(0x11, 8, str("ignored")),
		req(0x00, 9),
	)
	type want struct {
		op     Opcode
		st, ss Status // Counter, Semaphore
		name   string
	}
	wants := []want{
		{OpAcquire, StatusOK, StatusOK, "a"},
		{OpAcquire, StatusInvalid, StatusInvalid, ""},
		{OpGet, StatusOK, StatusOK, "a"},
		{0x33, StatusUnknownCommand, StatusUnknownCommand, ""},
		{OpAcquire, StatusInvalid, StatusInvalid, ""},
		{OpStats, StatusOK, StatusOK, ""},
		{OpRelease, StatusOK, StatusOK, "a"},
		{OpDump, StatusOK, StatusUnknownCommand, ""},
		{OpNoop, StatusOK, StatusOK, ""},
	}
	for _, dialect := range []Dialect{Counter, Semaphore} {
		d := Decoder{Dialect: dialect, MaxBody: DefaultMaxBody}
		buf := stream
		for i, w := range wants {
			var r Request
			n, err := d.Parse(buf, &r)
			if err != nil || n == 0 {
				t.Fatalf("%v frame %d: Parse = %d, %v", dialect, i, n, err)
			}
			st := w.st
			if dialect == Semaphore {
				st = w.ss
			}
			if r.Opcode != w.op || r.Status != st || r.Opaque != uint32(i+1) || string(r.Name) != w.name {
				t.Fatalf("%v frame %d: got %+v, want op %v status %v opaque %d name %q", dialect, i, r, w.op, st, i+1, w.name)
			}
			buf = buf[n:]
		}
		if len(buf) != 0 {
			t.Fatalf("%v: %d bytes left over", dialect, len(buf))
		}
	}
}

func TestOpcodeString(t *testing.T) {
	for op, want := range map[Opcode]string{
		OpNoop: "noop", OpGet: "get", OpAcquire: "acquire", OpRelease: "release",
		OpStats: "stats", OpDump: "dump", 0x04: "0x04", 0x12: "0x12", 0xab: "0xab", 0xff: "0xff",
	} {
		if got := op.String(); got != want {
			t.Errorf("Opcode(%d).String() = %q, want %q", uint8(op), got, want)
		}
	}
}

func TestStatusMessage(t *testing.T) {
	for st, want := range map[Status]string{
		StatusOK:             "",
		StatusNotFound:       "Not found",
		StatusInvalid:        "Invalid arguments",
		StatusNotAvailable:   "Resource not available",
		StatusNotAcquired:    "Not acquired",
		StatusUnknownCommand: "Unknown command",
		StatusOutOfMemory:    "Out of memory",
		0x05:                 "",
		0xff:                 "",
	} {
		if got := st.Message(); got != want {
			t.Errorf("Status(0x%02x).Message() = %q, want %q", uint8(st), got, want)
		}
	}
	for st, want := range map[Status]string{StatusOK: "OK", StatusNotFound: "Not found", 0x05: "0x05", 0xa0: "0xa0"} {
		if got := st.String(); got != want {
			t.Errorf("Status(0x%02x).String() = %q, want %q", uint8(st), got, want)
		}
	}
	// The wire values themselves.
	for st, want := range map[Status]uint8{StatusOK: 0, StatusNotFound: 1, StatusInvalid: 4, StatusNotAvailable: 0x21,
		StatusNotAcquired: 0x22, StatusUnknownCommand: 0x81, StatusOutOfMemory: 0x82} {
		if uint8(st) != want {
			t.Errorf("%v = 0x%02x, want 0x%02x", st, uint8(st), want)
		}
	}
}

func TestDialectString(t *testing.T) {
	if Counter.String() != "counter" || Semaphore.String() != "semaphore" || Dialect(7).String() != "counter" {
		t.Fatalf("Dialect strings: %q %q %q", Counter, Semaphore, Dialect(7))
	}
}
