package slock

import (
	"crypto/md5"
	"strings"
	"testing"
)

func TestSniff(t *testing.T) {
	for _, tt := range []struct {
		in   string
		kind Kind
		ok   bool
	}{
		{"", Unknown, false},
		{"\x56", Unknown, false},
		{"\x56\x01", Binary, true},
		{"\x56\x01\x05" + strings.Repeat("\x00", 61), Binary, true},
		{"\x56\x02", Unknown, true},
		{"\x56*", Unknown, true},
		{"*", RESP, true},
		{"*1\r\n$4\r\nPING\r\n", RESP, true},
		{"PING\r\n", Unknown, true},
		{"\x01", Unknown, true},
		{"\x00\x56\x01", Unknown, true},
		{"\r\n", Unknown, true},
	} {
		kind, ok := Sniff([]byte(tt.in))
		if kind != tt.kind || ok != tt.ok {
			t.Errorf("Sniff(%q) = %v, %v; want %v, %v", tt.in, kind, ok, tt.kind, tt.ok)
		}
	}
}

// TestSniffByteAtATime feeds first bytes one at a time, as a slow client
// sends them: Sniff must wait exactly as long as it cannot decide and then
// agree with the answer for the whole input.
func TestSniffByteAtATime(t *testing.T) {
	for _, in := range []string{"\x56\x01\x01" + strings.Repeat("\x00", 61), "*2\r\n", "\x56\x00", "GET x\r\n"} {
		whole, _ := Sniff([]byte(in))
		decidedAt := -1
		for i := 1; i <= len(in); i++ {
			kind, ok := Sniff([]byte(in[:i]))
			if ok {
				if kind != whole {
					t.Errorf("%q: %d bytes give %v, the whole input %v", in, i, kind, whole)
				}
				if decidedAt < 0 {
					decidedAt = i
				}
			} else if decidedAt >= 0 {
				t.Errorf("%q: undecided at %d bytes after deciding at %d", in, i, decidedAt)
			}
		}
		want := 1
		if in[0] == 0x56 {
			want = 2
		}
		if decidedAt != want {
			t.Errorf("%q: decided at %d bytes, want %d", in, decidedAt, want)
		}
	}
}

func TestTextID(t *testing.T) {
	h := md5.Sum([]byte("a-key-longer-than-16"))
	hexLike := md5.Sum([]byte("0123456789abcdef0123456789abcdeg"))
	long33 := md5.Sum([]byte("0123456789abcdef0123456789abcdef0"))
	for _, tt := range []struct {
		in   string
		want [16]byte
	}{
		{"", [16]byte{}},
		{"a", [16]byte{15: 'a'}},
		{"rev12345", [16]byte{8: 'r', 'e', 'v', '1', '2', '3', '4', '5'}},
		{"0123456789abcde", [16]byte{0, '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e'}},
		{"0123456789abcdef", [16]byte([]byte("0123456789abcdef"))},
		{"\x00\xff\x00\xff\x00\xff\x00\xff\x00\xff\x00\xff\x00\xff\x00\xff", [16]byte{0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff}},
		{"000102030405060708090a0b0c0d0e0f", seq16(0)},
		{"A0A1A2A3A4A5A6A7A8A9aaABacADaEAf", seq16(0xa0)},
		{"0123456789abcdef0123456789abcdeg", hexLike},
		{"0123456789abcdef0123456789abcdef0", long33},
		{"a-key-longer-than-16", h},
	} {
		if got := TextID([]byte(tt.in)); got != tt.want {
			t.Errorf("TextID(%q) = % x, want % x", tt.in, got, tt.want)
		}
	}
}

func TestAppendHexID(t *testing.T) {
	if got := string(AppendHexID([]byte("id="), seq16(0xa0))); got != "id=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf" {
		t.Fatalf("AppendHexID = %q", got)
	}
	// Text ids round-trip through their hex form.
	for _, s := range []string{"k", "rev12345", "0123456789abcdef", "something much longer than sixteen"} {
		id := TextID([]byte(s))
		if back := TextID(AppendHexID(nil, id)); back != id {
			t.Errorf("%q: hex round trip % x -> % x", s, id, back)
		}
	}
}

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{TypeInit.String(), "INIT"}, {TypeLock.String(), "LOCK"}, {TypeUnlock.String(), "UNLOCK"},
		{TypeState.String(), "STATE"}, {TypeAdmin.String(), "ADMIN"}, {TypePing.String(), "PING"},
		{TypeQuit.String(), "QUIT"}, {TypeCall.String(), "CALL"}, {TypeWillLock.String(), "WILL_LOCK"},
		{TypeWillUnlock.String(), "WILL_UNLOCK"}, {TypeLeader.String(), "LEADER"},
		{TypeSubscribe.String(), "SUBSCRIBE"}, {Type(12).String(), "Type(12)"},
		{ResultOK.String(), "OK"}, {ResultUnknownMagic.String(), "UNKNOWN_MAGIC"},
		{ResultUnknownVersion.String(), "UNKNOWN_VERSION"}, {ResultUnknownDB.String(), "UNKNOWN_DB"},
		{ResultUnknownCommand.String(), "UNKNOWN_COMMAND"}, {ResultLockedError.String(), "LOCKED_ERROR"},
		{ResultUnlockError.String(), "UNLOCK_ERROR"}, {ResultUnownError.String(), "UNOWN_ERROR"},
		{ResultTimeout.String(), "TIMEOUT"}, {ResultExpried.String(), "EXPRIED"},
		{ResultStateError.String(), "RESULT_STATE_ERROR"}, {ResultUnknownError.String(), "UNKNOWN_ERROR"},
		{ResultAckWaiting.String(), "LOCK_ACK_WAITING"}, {Result(13).String(), "Result(13)"},
		{Binary.String(), "binary"}, {RESP.String(), "resp"}, {Unknown.String(), "unknown"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
