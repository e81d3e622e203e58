package counter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestAppendRequests(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"raw/noop", AppendRequest(nil, OpNoop, 1, nil),
			[]byte{0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"raw/unknown-body", AppendRequest(nil, 0x42, 0x01020304, []byte("hi")),
			[]byte{0x90, 0x42, 0, 0, 0, 0, 0, 2, 1, 2, 3, 4, 'h', 'i'}},
		{"get", AppendGet(nil, 2, []byte("foo")),
			[]byte{0x90, 0x01, 0, 0, 0, 0, 0, 5, 0, 0, 0, 2, 0, 3, 'f', 'o', 'o'}},
		{"get/empty-name", AppendGet(nil, 3, nil),
			[]byte{0x90, 0x01, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0}},
		{"acquire", AppendAcquire(nil, 4, 1, 0x01020304, []byte("ab")),
			[]byte{0x90, 0x02, 0, 0, 0, 0, 0, 12, 0, 0, 0, 4, 0, 0, 0, 1, 1, 2, 3, 4, 0, 2, 'a', 'b'}},
		{"acquire/invalid-values", AppendAcquire(nil, 5, 0, 0, nil),
			[]byte{0x90, 0x02, 0, 0, 0, 0, 0, 10, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"release", AppendRelease(nil, 6, 0xfffffffe, []byte("x")),
			[]byte{0x90, 0x03, 0, 0, 0, 0, 0, 7, 0, 0, 0, 6, 0xff, 0xff, 0xff, 0xfe, 0, 1, 'x'}},
		{"append/keeps-prefix", AppendGet([]byte{9}, 7, []byte("k")),
			[]byte{9, 0x90, 0x01, 0, 0, 0, 0, 0, 3, 0, 0, 0, 7, 0, 1, 'k'}},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s:\n got % x\nwant % x", tc.name, tc.got, tc.want)
		}
	}
}

// TestRequestRoundTrip sends client-encoded requests through the server's
// Decoder in both dialects.
func TestRequestRoundTrip(t *testing.T) {
	long := bytes.Repeat([]byte{'L'}, MaxNameLen)
	tests := []struct {
		frame []byte
		want  Request
	}{
		{AppendGet(nil, 1, []byte("n")), Request{Opcode: OpGet, Opaque: 1, Name: []byte("n")}},
		{AppendGet(nil, 2, long), Request{Opcode: OpGet, Opaque: 2, Name: long}},
		{AppendAcquire(nil, 3, 2, 9, []byte("n\x00m")), Request{Opcode: OpAcquire, Opaque: 3, Resources: 2, Maximum: 9, Name: []byte("n\x00m")}},
		{AppendAcquire(nil, 4, 1, 1, long), Request{Opcode: OpAcquire, Opaque: 4, Resources: 1, Maximum: 1, Name: long}},
		{AppendAcquire(nil, 5, 3, 2, []byte("n")), Request{Opcode: OpAcquire, Opaque: 5, Status: StatusInvalid}},
		{AppendRelease(nil, 6, 0, []byte("n")), Request{Opcode: OpRelease, Opaque: 6, Name: []byte("n")}},
		{AppendRelease(nil, 7, 5, nil), Request{Opcode: OpRelease, Opaque: 7, Status: StatusInvalid}},
		{AppendRequest(nil, OpStats, 8, nil), Request{Opcode: OpStats, Opaque: 8}},
		{AppendRequest(nil, OpNoop, 9, []byte("x")), Request{Opcode: OpNoop, Opaque: 9}},
		{AppendRequest(nil, 0x20, 10, nil), Request{Opcode: 0x20, Opaque: 10, Status: StatusUnknownCommand}},
	}
	for _, dialect := range []Dialect{Counter, Semaphore} {
		d := Decoder{Dialect: dialect, MaxBody: MaxRequestLen}
		for _, tc := range tests {
			var r Request
			n, err := d.Parse(tc.frame, &r)
			if n != len(tc.frame) || err != nil || !eqRequest(r, tc.want) {
				t.Errorf("%v: Parse(%v frame) = %d, %v, %+v; want %d, nil, %+v", dialect, tc.want.Opcode, n, err, r, len(tc.frame), tc.want)
			}
		}
	}
}

// TestResponseRoundTrip reads server-encoded replies back with ParseResponse.
func TestResponseRoundTrip(t *testing.T) {
	stats := []Stat{{"objects", 12}, {"command:acquire", 0}, {"", 7}}
	stream := AppendOK(nil, OpNoop, 1)
	stream = AppendError(stream, 0x12, StatusUnknownCommand, 2)
	stream = AppendUint32(stream, OpGet, 3, 42)
	stream = AppendDumpEntry(stream, 4, 5, 6, []byte("cnt"))
	stream = AppendOK(stream, OpDump, 4)
	stream = AppendStats(stream, 5, stats)
	stream = AppendError(stream, OpAcquire, StatusNotAvailable, 6)

	var resps []Response
	for buf := stream; len(buf) > 0; {
		var r Response
		n, err := ParseResponse(buf, 1<<16, &r)
		if n == 0 || err != nil {
			t.Fatalf("ParseResponse at %d = %d, %v", len(stream)-len(buf), n, err)
		}
		if cap(r.Body) != len(r.Body) {
			t.Fatalf("cap(Body) = %d, want %d", cap(r.Body), len(r.Body))
		}
		resps = append(resps, r)
		buf = buf[n:]
	}
	want := []Response{
		{OpNoop, StatusOK, 1, []byte{}},
		{0x12, StatusUnknownCommand, 2, []byte("Unknown command")},
		{OpGet, StatusOK, 3, []byte{0, 0, 0, 42}},
		{OpDump, StatusOK, 4, []byte{0, 0, 0, 5, 0, 0, 0, 6, 0, 3, 'c', 'n', 't'}},
		{OpDump, StatusOK, 4, []byte{}},
		{OpStats, StatusOK, 5, nil}, // body checked below
		{OpAcquire, StatusNotAvailable, 6, []byte("Resource not available")},
	}
	if len(resps) != len(want) {
		t.Fatalf("%d replies, want %d", len(resps), len(want))
	}
	for i, w := range want {
		r := resps[i]
		if r.Opcode != w.Opcode || r.Status != w.Status || r.Opaque != w.Opaque || (w.Body != nil && !bytes.Equal(r.Body, w.Body)) {
			t.Errorf("reply %d = %+v, want %+v", i, r, w)
		}
	}
	cur, max, name, err := ParseDumpBody(resps[3].Body)
	if cur != 5 || max != 6 || string(name) != "cnt" || err != nil {
		t.Errorf("ParseDumpBody = %d, %d, %q, %v", cur, max, name, err)
	}
	got, err := ParseStatsBody(resps[5].Body)
	wantText := []StatText{{"objects", "12"}, {"command:acquire", "0"}, {"", "7"}}
	if err != nil || !reflect.DeepEqual(got, wantText) {
		t.Errorf("ParseStatsBody = %q, %v; want %q", got, err, wantText)
	}
}

func TestParseResponseFraming(t *testing.T) {
	f := []byte{0x91, 0x02, 0x00, 0x7f, 0, 0, 0, 4, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 9}
	for i := 0; i < len(f); i++ {
		r := Response{Opaque: 0x55}
		if n, err := ParseResponse(f[:i], 64, &r); n != 0 || err != nil || r.Opaque != 0x55 {
			t.Fatalf("ParseResponse(%d bytes) = %d, %v, %+v; want 0, nil, untouched", i, n, err, r)
		}
	}
	var r Response
	n, err := ParseResponse(append(f, 0x91, 0x00), 64, &r) // Reserved 0x7f ignored; next frame not included
	if n != len(f) || err != nil || r.Opcode != OpAcquire || r.Status != StatusOK || r.Opaque != 0xaabbccdd || !bytes.Equal(r.Body, []byte{0, 0, 0, 9}) {
		t.Fatalf("ParseResponse = %d, %v, %+v", n, err, r)
	}

	// Bad magic: an error as soon as the header is there, whatever the length claims.
	bad := []byte{0x90, 0x01, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}
	if n, err := ParseResponse(bad[:11], 64, &r); n != 0 || err != nil {
		t.Fatalf("bad magic, 11 bytes: %d, %v; want 0, nil", n, err)
	}
	n, err = ParseResponse(bad, 64, &r)
	var me *MagicError
	if n != 0 || !errors.As(err, &me) || me.Magic != 0x90 {
		t.Fatalf("bad magic: %d, %v; want 0, *MagicError{0x90}", n, err)
	}
	if want := "counter: reply magic 0x90, want 0x91"; err.Error() != want {
		t.Fatalf("Error() = %q, want %q", err, want)
	}

	// Too large: an error from the header alone.
	big := []byte{0x91, 0x11, 0, 0, 0, 0, 0, 65, 0, 0, 0, 1}
	n, err = ParseResponse(big, 64, &r)
	var te *BodyTooLargeError
	if n != 0 || !errors.As(err, &te) || te.Length != 65 || te.Limit != 64 {
		t.Fatalf("too large: %d, %v", n, err)
	}
	if n, err = ParseResponse(big, 65, &r); n != 0 || err != nil {
		t.Fatalf("at the limit, no body yet: %d, %v; want 0, nil", n, err)
	}
}

func TestParseStatsBodyErrors(t *testing.T) {
	tests := []struct {
		body []byte
		err  string
	}{
		{[]byte{0}, "counter: stats reply body at offset 0: item header needs 4 bytes, 1 left"},
		{[]byte{0, 1, 0}, "counter: stats reply body at offset 0: item header needs 4 bytes, 3 left"},
		{[]byte{0, 1, 0, 1, 'a'}, "counter: stats reply body at offset 0: name length 1 and value length 1 need 2 bytes, 1 left"},
		{[]byte{0, 1, 0, 1, 'a', '1', 0, 0, 0}, "counter: stats reply body at offset 6: item header needs 4 bytes, 3 left"},
		{[]byte{0, 1, 0, 1, 'a', '1', 0xff, 0xff, 0, 0, 'x'}, "counter: stats reply body at offset 6: name length 65535 and value length 0 need 65535 bytes, 1 left"},
	}
	for _, tc := range tests {
		got, err := ParseStatsBody(tc.body)
		if got != nil || err == nil || err.Error() != tc.err {
			t.Errorf("ParseStatsBody(% x) = %q, %v; want nil, %q", tc.body, got, err, tc.err)
		}
	}
	if got, err := ParseStatsBody(nil); got != nil || err != nil {
		t.Errorf("ParseStatsBody(empty) = %q, %v", got, err)
	}
	got, err := ParseStatsBody([]byte{0, 0, 0, 0, 0, 2, 0, 0, 'h', 'i'})
	if want := []StatText{{"", ""}, {"hi", ""}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("empty names and values: %q, %v; want %q", got, err, want)
	}
}

func TestParseDumpBodyErrors(t *testing.T) {
	tests := []struct {
		body []byte
		err  string
	}{
		{nil, "counter: dump reply body at offset 0: entry needs at least 10 bytes, have 0"},
		{make([]byte, 9), "counter: dump reply body at offset 0: entry needs at least 10 bytes, have 9"},
		{[]byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 2, 'a'}, "counter: dump reply body at offset 8: name length 2 needs a body of 12 bytes, have 11"},
		{[]byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 'a', 'b'}, "counter: dump reply body at offset 8: name length 1 needs a body of 11 bytes, have 12"},
	}
	for _, tc := range tests {
		_, _, name, err := ParseDumpBody(tc.body)
		if name != nil || err == nil || err.Error() != tc.err {
			t.Errorf("ParseDumpBody(% x) = %q, %v; want nil, %q", tc.body, name, err, tc.err)
		}
	}
	cur, max, name, err := ParseDumpBody([]byte{0xff, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	if cur != 0xff000001 || max != 0 || len(name) != 0 || err != nil {
		t.Errorf("empty-name entry: %d, %d, %q, %v", cur, max, name, err)
	}
}

func TestParseDumpEntry(t *testing.T) {
	for _, name := range [][]byte{[]byte("cnt"), {}, bytes.Repeat([]byte{0}, 8)} {
		r := AppendDumpEntryAcquired(nil, 4, 5, 6, name, 1<<40+7)
		cur, max, got, ac, has, err := ParseDumpEntry(r[HeaderLen:])
		if err != nil || cur != 5 || max != 6 || !bytes.Equal(got, name) || ac != 1<<40+7 || !has {
			t.Errorf("extended entry of %q: %d %d %q %d %v %v", name, cur, max, got, ac, has, err)
		}
		if cap(got) != len(got) {
			t.Errorf("name view of %q has capacity past the name", name)
		}
		if n := int(binary.BigEndian.Uint32(r[4:8])); n != len(r)-HeaderLen || n != 18+len(name) {
			t.Errorf("extended entry of %q: body length %d, frame %d", name, n, len(r))
		}
		// A plain entry (yrmcds's, or tallyd's without the request body) reads as one.
		r = AppendDumpEntry(nil, 4, 5, 6, name)
		cur, max, got, ac, has, err = ParseDumpEntry(r[HeaderLen:])
		if err != nil || cur != 5 || max != 6 || !bytes.Equal(got, name) || ac != 0 || has {
			t.Errorf("plain entry of %q: %d %d %q %d %v %v", name, cur, max, got, ac, has, err)
		}
	}
	for _, bad := range [][]byte{{0, 0, 0}, {0, 0, 0, 1, 0, 0, 0, 1, 0, 3, 'a'}, {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 'a', 0, 0}} {
		if _, _, _, _, _, err := ParseDumpEntry(bad); err == nil {
			t.Errorf("entry %x accepted", bad)
		}
	}
}
