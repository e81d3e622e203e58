package resp

import (
	"math"
	"testing"
)

func TestAppendReplies(t *testing.T) {
	for _, tc := range []struct {
		got  []byte
		want string
	}{
		{AppendSimple(nil, "OK"), "+OK\r\n"},
		{AppendSimple(nil, "PONG"), "+PONG\r\n"},
		{AppendSimple(nil, ""), "+\r\n"},
		{AppendSimple(nil, "a\r\nb\nc\rd"), "+a  b c d\r\n"},
		{AppendError(nil, "ERR Unknown Command"), "-ERR Unknown Command\r\n"},
		{AppendError(nil, "ERR bad\r\nline"), "-ERR bad  line\r\n"},
		{AppendInt(nil, 0), ":0\r\n"},
		{AppendInt(nil, 42), ":42\r\n"},
		{AppendInt(nil, -1), ":-1\r\n"},
		{AppendInt(nil, math.MaxInt64), ":9223372036854775807\r\n"},
		{AppendInt(nil, math.MinInt64), ":-9223372036854775808\r\n"},
		{AppendBulk(nil, []byte("value")), "$5\r\nvalue\r\n"},
		{AppendBulk(nil, []byte("a\r\nb\x00c")), "$6\r\na\r\nb\x00c\r\n"},
		{AppendBulk(nil, nil), "$0\r\n\r\n"},
		{AppendBulk(nil, make([]byte, 10)), "$10\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\r\n"},
		{AppendBulkString(nil, "LOCK_ID"), "$7\r\nLOCK_ID\r\n"},
		{AppendBulkString(nil, ""), "$0\r\n\r\n"},
		{AppendBulkInt(nil, 0), "$1\r\n0\r\n"},
		{AppendBulkInt(nil, 65536), "$5\r\n65536\r\n"},
		{AppendBulkInt(nil, math.MinInt64), "$20\r\n-9223372036854775808\r\n"},
		{AppendNull(nil), "$-1\r\n"},
		{AppendNullArray(nil), "*-1\r\n"},
		{AppendArray(nil, 0), "*0\r\n"},
		{AppendArray(nil, 12), "*12\r\n"},
		{AppendArray(nil, -1), "*-1\r\n"},
		{AppendArray(nil, -5), "*-1\r\n"},
		{AppendSimple([]byte("+A\r\n"), "B"), "+A\r\n+B\r\n"}, // appends, keeps dst
		{AppendCommand(nil, "SET", "key", "value"), "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"},
		{AppendCommand(nil, "PING"), "*1\r\n$4\r\nPING\r\n"},
		{AppendCommand(nil), "*0\r\n"},
		{AppendCommand(nil, "ECHO", ""), "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"},
		{AppendCommandBytes(nil, []byte("set"), []byte("bin"), []byte("a\r\nb\x00c")), "*3\r\n$3\r\nset\r\n$3\r\nbin\r\n$6\r\na\r\nb\x00c\r\n"},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestAppendSlockReply builds the 12-element LOCK reply of the slock text
// protocol (NOTES §4) and reads it back.
func TestAppendSlockReply(t *testing.T) {
	b := AppendArray(nil, 12)
	b = AppendBulkInt(b, 0)
	b = AppendBulkString(b, "OK")
	b = AppendBulkString(b, "LOCK_ID")
	b = AppendBulkString(b, "000000000000000000000000006d796b")
	b = AppendBulkString(b, "LCOUNT")
	b = AppendBulkInt(b, 1)
	b = AppendBulkString(b, "COUNT")
	b = AppendBulkInt(b, 1)
	b = AppendBulkString(b, "LRCOUNT")
	b = AppendBulkInt(b, 1)
	b = AppendBulkString(b, "RCOUNT")
	b = AppendBulkInt(b, 1)
	want := "*12\r\n$1\r\n0\r\n$2\r\nOK\r\n$7\r\nLOCK_ID\r\n$32\r\n000000000000000000000000006d796b\r\n" +
		"$6\r\nLCOUNT\r\n$1\r\n1\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n$7\r\nLRCOUNT\r\n$1\r\n1\r\n$6\r\nRCOUNT\r\n$1\r\n1\r\n"
	if string(b) != want {
		t.Fatalf("got %q\nwant %q", b, want)
	}
	r, n, err := ParseReply(b)
	if err != nil || n != len(b) || r.Kind != '*' || len(r.Elems) != 12 || string(r.Elems[3].Str) != "000000000000000000000000006d796b" {
		t.Fatalf("ParseReply = %+v, %d, %v", r, n, err)
	}
}
