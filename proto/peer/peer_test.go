package peer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// frames is one frame of each type, encoded, with what Parse must make of it.
var frames = []struct {
	name string
	enc  []byte
	want Frame
}{
	{"hello", AppendHello(nil, 1, 0xfeedface, "10.0.0.1:7000"),
		Frame{Type: TypeHello, From: 1, ClusterID: 0xfeedface, Addr: []byte("10.0.0.1:7000")}},
	{"hello without cluster", AppendHello(nil, 1<<63, 0, ""), Frame{Type: TypeHello, From: 1 << 63}},
	{"raft", AppendRaft(nil, []byte{8, 3, 16, 1, 24, 2}), Frame{Type: TypeRaft, Msg: []byte{8, 3, 16, 1, 24, 2}}},
	{"raft empty", AppendRaft(nil, nil), Frame{Type: TypeRaft}},
	{"forward", AppendForward(nil, 42, 42<<32|5, KindBinary, LevelAll, 3, 0x1234, 0x8400, []byte("binary command")),
		Frame{Type: TypeForward, Session: 42, Client: 42<<32 | 5, Kind: KindBinary, Level: LevelAll, DB: 3, Timeout: 0x1234,
			TimeoutFlag: 0x8400, Data: []byte("binary command")}},
	{"forward slock text", AppendForward(nil, 8, 8<<32|5, KindSlock, LevelQuorum, 0, 15, 0, []byte("SETNX k v\r\n")),
		Frame{Type: TypeForward, Session: 8, Client: 8<<32 | 5, Kind: KindSlock, Level: LevelQuorum, Timeout: 15, Data: []byte("SETNX k v\r\n")}},
	{"forward text", AppendForward(nil, 7, 7<<32|5, KindText, LevelOne, 255, 0, 0, []byte("GET k\r\nINCR k\r\n")),
		Frame{Type: TypeForward, Session: 7, Client: 7<<32 | 5, Kind: KindText, Level: LevelOne, DB: 255, Data: []byte("GET k\r\nINCR k\r\n")}},
	{"forward as a user", AppendForwardAs(nil, 7, 7<<32|5, KindText, LevelQuorum, 0, 0, 0, "alice", []byte("EVAL s 0\r\n")),
		Frame{Type: TypeForward, Session: 7, Client: 7<<32 | 5, Kind: KindText, Level: LevelQuorum, User: []byte("alice"),
			Data: []byte("EVAL s 0\r\n")}},
	{"forward as a user, no data", AppendForwardAs(nil, 7, 7<<32|5, KindBinary, LevelOne, 0, 0, 0, "default", nil),
		Frame{Type: TypeForward, Session: 7, Client: 7<<32 | 5, Kind: KindBinary, Level: LevelOne, User: []byte("default")}},
	{"reply", AppendReply(nil, 42, []byte(":1\r\n")), Frame{Type: TypeReply, Session: 42, Data: []byte(":1\r\n")}},
	{"close", AppendClose(nil, 42, 9), Frame{Type: TypeClose, Session: 42, Why: 9}},
	{"join", AppendJoin(nil, 4, "[::1]:7004"), Frame{Type: TypeJoin, ID: 4, Addr: []byte("[::1]:7004")}},
	{"join reply ok", AppendJoinReply(nil, true, 1, "10.0.0.1:7000", ""),
		Frame{Type: TypeJoinReply, OK: true, LeaderID: 1, LeaderAddr: []byte("10.0.0.1:7000")}},
	{"join reply refused", AppendJoinReply(nil, false, 0, "", "no leader"),
		Frame{Type: TypeJoinReply, Err: []byte("no leader")}},
}

func TestRoundTrip(t *testing.T) {
	var stream []byte
	for _, tc := range frames {
		f, n, err := Parse(tc.enc)
		if err != nil || n != len(tc.enc) || !eqFrame(f, tc.want) {
			t.Errorf("%s: Parse(%q) = %+v, %d, %v; want %+v, %d", tc.name, tc.enc, f, n, err, tc.want, len(tc.enc))
		}
		stream = append(stream, tc.enc...)
	}
	// Back to back, as on a link, and fed a byte at a time.
	var got []Frame
	for end := 0; end <= len(stream); end++ {
		f, n, err := Parse(stream[:end])
		if err != nil {
			t.Fatalf("after %d bytes: %v", end, err)
		}
		if n > 0 {
			got = append(got, f)
			stream, end = stream[n:], -1+(end-n)
		}
	}
	if len(got) != len(frames) || len(stream) != 0 {
		t.Fatalf("a byte at a time: %d frames, %d bytes left; want %d, 0", len(got), len(stream), len(frames))
	}
	for i, f := range got {
		if !eqFrame(f, frames[i].want) {
			t.Errorf("a byte at a time, %s: %+v", frames[i].name, f)
		}
	}
}

func TestHeader(t *testing.T) {
	if got := AppendClose(nil, 1, 2); !bytes.Equal(got[:HeaderLen], []byte{0, 0, 0, 10, byte(TypeClose)}) {
		t.Fatalf("Close header % x", got[:HeaderLen])
	}
	// A body written in place after AppendHeader parses as AppendRaft's.
	msg := []byte("marshalled")
	if got, want := append(AppendHeader(nil, TypeRaft, len(msg)), msg...), AppendRaft(nil, msg); !bytes.Equal(got, want) {
		t.Fatalf("AppendHeader + body = %q, AppendRaft = %q", got, want)
	}
	dst := []byte("kept")
	if got := AppendReply(dst, 1, nil); !bytes.HasPrefix(got, []byte("kept")) || len(got) != 4+HeaderLen+8 {
		t.Fatalf("AppendReply onto %q = %q", "kept", got)
	}
}

// Strings longer than a u16 are cut, and the frame still parses.
func TestLongStringsCut(t *testing.T) {
	long := strings.Repeat("x", MaxString+10)
	f, n, err := Parse(AppendJoinReply(nil, false, 1, long, long))
	if err != nil || n == 0 || len(f.LeaderAddr) != MaxString || len(f.Err) != MaxString {
		t.Fatalf("Parse = %d, %v, addr %d, err %d bytes", n, err, len(f.LeaderAddr), len(f.Err))
	}
}

// Views are capped: appending to one never overwrites the next frame.
func TestViewsCapped(t *testing.T) {
	buf := AppendReply(AppendReply(nil, 1, []byte("one")), 2, []byte("two"))
	f, n, _ := Parse(buf)
	_ = append(f.Data, "XXXXXXXXXXXXXXXX"...)
	if g, _, err := Parse(buf[n:]); err != nil || string(g.Data) != "two" {
		t.Fatalf("second frame after appending to the first's Data: %q, %v", g.Data, err)
	}
}

func TestParseErrors(t *testing.T) {
	hdr := func(size uint32, typ byte) []byte {
		return append([]byte{byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}, typ)
	}
	forward := AppendForward(nil, 1, 1<<32|5, KindText, LevelQuorum, 0, 0, 0, []byte("x"))
	with := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	joinReply := AppendJoinReply(nil, true, 1, "a", "b")
	for _, tc := range []struct {
		name  string
		buf   []byte
		limit int
		want  error
	}{
		{"length 0", []byte{0, 0, 0, 0}, 0, ErrMalformed},
		{"over MaxFrame, header only", []byte{0x04, 0, 0, 1}, 0, ErrTooLarge},
		{"over the limit", AppendRaft(nil, make([]byte, 100)), 100, ErrTooLarge},
		{"type 0, nothing else yet", hdr(100, 0), 0, ErrType},
		{"type 10", hdr(1, 10), 0, ErrType},
		{"Challenge too short", hdr(1, byte(TypeChallenge)), 0, ErrMalformed},
		{"Proof with a byte too many", append(hdr(34, byte(TypeProof)), make([]byte, 33)...), 0, ErrMalformed},
		{"type 255", hdr(1, 255), 0, ErrType},
		{"Close too short for its fields, body not here yet", hdr(9, byte(TypeClose)), 0, ErrMalformed},
		{"Close with a byte too many", append(hdr(11, byte(TypeClose)), make([]byte, 10)...), 0, ErrMalformed},
		{"Hello, body still to come", hdr(20, byte(TypeHello)), 0, nil},
		{"Hello whose Addr runs past the end", append(append(hdr(20, byte(TypeHello)), make([]byte, 16)...), 0, 2, 'a'), 0, ErrMalformed},
		{"Hello with a byte after Addr", append(append(hdr(20, byte(TypeHello)), make([]byte, 16)...), 0, 0, 'a'), 0, ErrMalformed},
		{"Forward of kind 0", with(forward, HeaderLen+16, 0), 0, ErrMalformed},
		{"Forward of kind 4", with(forward, HeaderLen+16, 4), 0, ErrMalformed},
		{"Forward at level 0", with(forward, HeaderLen+17, 0), 0, ErrMalformed},
		{"Forward at level 4", with(forward, HeaderLen+17, 4), 0, ErrMalformed},
		{"Forward whose user runs past the end", with(forward, HeaderLen+16, KindText|KindUser), 0, ErrMalformed},
		{"Forward with an empty user", with(AppendForward(nil, 1, 2, KindText, LevelQuorum, 0, 0, 0, []byte{0, 0, 'x'}),
			HeaderLen+16, KindText|KindUser), 0, ErrMalformed},
		{"Forward as a user of kind 4", with(AppendForwardAs(nil, 1, 2, KindText, LevelQuorum, 0, 0, 0, "u", nil),
			HeaderLen+16, 4|KindUser), 0, ErrMalformed},
		{"JoinReply with OK 2", with(joinReply, HeaderLen, 2), 0, ErrMalformed},
		{"JoinReply whose Err runs past the end", with(joinReply, HeaderLen+9+3+1, 2), 0, ErrMalformed},
	} {
		f, n, err := ParseLimit(tc.buf, tc.limit)
		if tc.want == nil {
			if err != nil || n != 0 {
				t.Errorf("%s: ParseLimit = %d, %v; want to wait", tc.name, n, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) || n != 0 || !eqFrame(f, Frame{}) {
			t.Errorf("%s: ParseLimit(% x) = %+v, %d, %v; want %v", tc.name, tc.buf, f, n, err, tc.want)
		}
	}
	// At the limit exactly is fine.
	if _, n, err := ParseLimit(AppendRaft(nil, make([]byte, 99)), 100); err != nil || n != 104 {
		t.Errorf("frame at the limit: ParseLimit = %d, %v", n, err)
	}
}

func TestTypeString(t *testing.T) {
	if TypeJoinReply.String() != "JoinReply" || Type(0).String() != "Type(0)" || Type(99).String() != "Type(99)" {
		t.Fatalf("String: %v %v %v", TypeJoinReply, Type(0), Type(99))
	}
}

func TestParseAllocs(t *testing.T) {
	for _, tc := range frames {
		var n int
		if allocs := testing.AllocsPerRun(100, func() { _, n, _ = Parse(tc.enc) }); allocs != 0 || n != len(tc.enc) {
			t.Errorf("%s: Parse allocates %.1f times (n %d)", tc.name, allocs, n)
		}
		part := tc.enc[:len(tc.enc)-1]
		if allocs := testing.AllocsPerRun(100, func() { _, n, _ = Parse(part) }); allocs != 0 || n != 0 {
			t.Errorf("%s: incomplete Parse allocates %.1f times (n %d)", tc.name, allocs, n)
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	data := []byte("*1\r\n$4\r\nPING\r\n")
	dst := make([]byte, 0, 256)
	for name, f := range map[string]func(){
		"AppendHeader":    func() { dst = AppendHeader(dst[:0], TypeRaft, 10) },
		"AppendHello":     func() { dst = AppendHello(dst[:0], 1, 2, "10.0.0.1:7000") },
		"AppendRaft":      func() { dst = AppendRaft(dst[:0], data) },
		"AppendForward":   func() { dst = AppendForward(dst[:0], 1, 1<<32|5, KindText, LevelQuorum, 0, 0, 0, data) },
		"AppendReply":     func() { dst = AppendReply(dst[:0], 1, data) },
		"AppendClose":     func() { dst = AppendClose(dst[:0], 1, 0) },
		"AppendJoin":      func() { dst = AppendJoin(dst[:0], 1, "10.0.0.1:7000") },
		"AppendJoinReply": func() { dst = AppendJoinReply(dst[:0], false, 1, "10.0.0.1:7000", "not leader") },
	} {
		if allocs := testing.AllocsPerRun(100, f); allocs != 0 {
			t.Errorf("%s allocates %.1f times with a pre-sized dst", name, allocs)
		}
	}
}

func BenchmarkParseForward(b *testing.B) {
	buf := AppendForward(nil, 1, 1<<32|5, KindText, LevelQuorum, 0, 0, 0, []byte("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"))
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, n, err := Parse(buf); n != len(buf) || err != nil {
			b.Fatalf("Parse = %d, %v", n, err)
		}
	}
}
