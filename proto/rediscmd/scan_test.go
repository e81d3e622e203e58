package rediscmd

import (
	"testing"

	"github.com/tallyd/tallyd/proto/resp"
)

func TestParseScan(t *testing.T) {
	for _, c := range []struct {
		line string
		want Scan
		err  string
	}{
		{line: "SCAN 0", want: Scan{Count: 10}},
		{line: "scan 18446744073709551615 count 5", want: Scan{Cursor: 1<<64 - 1, Count: 5}},
		{line: "SCAN 7 MATCH user:* COUNT 1000000 TYPE Hash", want: Scan{Cursor: 7, Match: str("user:*"), Count: MaxScanCount, Type: str("Hash")}},
		{line: "SCAN 0 MATCH *", want: Scan{Count: 10}},
		{line: "SCAN 0 MATCH a MATCH b", want: Scan{Match: str("b"), Count: 10}},
		{line: "SCAN", err: "wrong number of arguments for 'scan' command"},
		// As Redis (strtoul): a sign is read, a negative cursor wraps around.
		{line: "SCAN -1", want: Scan{Cursor: 1<<64 - 1, Count: 10}},
		{line: "SCAN -2", want: Scan{Cursor: 1<<64 - 2, Count: 10}},
		{line: "SCAN +3", want: Scan{Cursor: 3, Count: 10}},
		{line: "SCAN -", err: "invalid cursor"},
		{line: "SCAN +-1", err: "invalid cursor"},
		{line: "SCAN 1x", err: "invalid cursor"},
		{line: "SCAN x", err: "invalid cursor"},
		{line: "SCAN 18446744073709551616", err: "invalid cursor"},
		{line: "SCAN 0 COUNT", err: "syntax error"},
		{line: "SCAN 0 COUNT 0", err: "syntax error"},
		{line: "SCAN 0 COUNT -3", err: "syntax error"},
		{line: "SCAN 0 COUNT x", err: "value is not an integer or out of range"},
		{line: "SCAN 0 NOVALUES", err: "syntax error"},
		{line: "SCAN 0 FOO bar", err: "syntax error"},
	} {
		var s Scan
		err := ParseScan(words(c.line), &s)
		switch {
		case c.err != "":
			if te, ok := err.(*TextError); !ok || te.Msg != c.err {
				t.Errorf("%s: %v, want %q", c.line, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.line, err)
		case s.Cursor != c.want.Cursor || s.Count != c.want.Count || string(s.Match) != string(c.want.Match) ||
			(s.Match == nil) != (c.want.Match == nil) || string(s.Type) != string(c.want.Type):
			t.Errorf("%s: %+v, want %+v", c.line, s, c.want)
		}
	}
}

func TestScanWants(t *testing.T) {
	hash := hashRecord("user:1", "a", "1")
	strRec := record([]byte{0x00, 0x10}, keyProps("user:2"), str("x"))
	anon := record([]byte{0x00, 0x00}, str("no name")) // set by a binary client: no KEY property
	for _, c := range []struct {
		line string
		rec  []byte
		want string // "" for not wanted
	}{
		{"SCAN 0", hash, "user:1"},
		{"SCAN 0", strRec, "user:2"},
		{"SCAN 0", anon, ""},
		{"SCAN 0 MATCH user:?", hash, "user:1"},
		{"SCAN 0 MATCH item:*", hash, ""},
		{"SCAN 0 TYPE hash", hash, "user:1"},
		{"SCAN 0 TYPE HASH", strRec, ""},
		{"SCAN 0 TYPE string", strRec, "user:2"},
		{"SCAN 0 TYPE string", hash, ""},
		{"SCAN 0 TYPE zset", hash, ""},
		{"SCAN 0 TYPE hash MATCH *:1", hash, "user:1"},
	} {
		var s Scan
		if err := ParseScan(words(c.line), &s); err != nil {
			t.Fatal(err)
		}
		name, ok := s.Wants(c.rec)
		if ok != (c.want != "") || string(name) != c.want {
			t.Errorf("%s on %x: %q, %v; want %q", c.line, c.rec, name, ok, c.want)
		}
	}
}

func TestAppendScanReply(t *testing.T) {
	got := string(AppendScanReply(nil, 85, [][]byte{str("a"), str("")}))
	if want := "*2\r\n$2\r\n85\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if got := string(AppendScanReply(nil, 0, nil)); got != "*2\r\n$1\r\n0\r\n*0\r\n" {
		t.Fatalf("last call: %q", got)
	}
}

// BenchmarkKeysPerKey is what KEYS spends per key besides the walk: the name out of the
// value record, the pattern, the bulk string.
func BenchmarkKeysPerKey(b *testing.B) {
	rec := record([]byte{0x00, 0x10}, keyProps("session:1234567"), str("some value of a key"))
	var s Scan
	if err := ParseScan(words("SCAN 0 MATCH session:*"), &s); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		if len(dst) > 1<<19 {
			dst = dst[:0]
		}
		name, ok := s.Wants(rec)
		if ok {
			dst = resp.AppendBulk(dst, name)
		}
	}
}
