package rediscmd

import (
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"", "", true}, {"", "a", false},
		{"a*", "abc", true}, {"*c", "abc", true}, {"*b*", "abc", true}, {"*d*", "abc", false},
		{"a?c", "abc", true}, {"a?c", "ac", false}, {"user:?", "user:1", true}, {"user:?", "user:10", false},
		{"[abc]x", "bx", true}, {"[^abc]x", "bx", false}, {"[^abc]x", "dx", true}, {"[a-c]*", "cat", true},
		{"[z-a]", "m", true}, {`\*`, "*", true}, {`\*`, "a", false}, {`a\?`, "a?", true},
		{"[iu]*:1", "item:1", true}, {"[iu]*:1", "user:10", false}, {"**a", "ba", true},
		{"*a*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 200), false},
		{"a*b*c", "aXbYbZc", true}, {"a*b*c", "aXbYbZ", false},
	} {
		if got := Match([]byte(c.pattern), []byte(c.name)); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

// matchSlow is the plain recursive definition Match must agree with.
func matchSlow(p, n []byte) bool {
	if len(p) == 0 {
		return len(n) == 0
	}
	if p[0] == '*' {
		for i := 0; i <= len(n); i++ {
			if matchSlow(p[1:], n[i:]) {
				return true
			}
		}
		return false
	}
	if len(n) == 0 {
		return false
	}
	w, ok := matchOne(p, n[0])
	return ok && matchSlow(p[w:], n[1:])
}

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{{"*a?[b-d]", "xaqc"}, {`[^\]]*`, "x]"}, {"a*b*c", "aXbYbZc"}, {"[", "["}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 12 || len(name) > 12 {
			return
		}
		if got, want := Match([]byte(pattern), []byte(name)), matchSlow([]byte(pattern), []byte(name)); got != want {
			t.Fatalf("Match(%q, %q) = %v, the definition says %v", pattern, name, got, want)
		}
	})
}

// FuzzParseKV: any arguments parse to a command or a Redis error, never a panic, and a
// parsed command's reply renders for any result and value.
func FuzzParseKV(f *testing.F) {
	for _, s := range []string{"SET k v EX 10 NX", "INCRBY k -5", "DECRBY k -9223372036854775808", "GETSET k v",
		"SETEX k 0 v", "PEXPIREAT k 1", "SCAN 0 MATCH * COUNT 10", "DEL a b c", "APPEND k v", "SET k v PX"} {
		f.Add(s, uint8(0), []byte(nil))
	}
	f.Fuzz(func(t *testing.T, line string, result uint8, value []byte) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return
		}
		args := make([][]byte, len(fields))
		for i, a := range fields {
			args[i] = []byte(a)
		}
		op, name := LookupKV(args[0])
		if op == OpNone {
			return
		}
		var kv KV
		var n uint64
		_, err := ParseKV(args, op, name, &Text{Timeout: 15}, 1e12, func() (id [16]byte) { n++; id[0] = byte(n); return id }, &kv, nil)
		if err != nil {
			if _, ok := err.(*TextError); !ok {
				t.Fatalf("%q: error of type %T", line, err)
			}
			return
		}
		out := AppendKVReply(nil, &kv, slock.Result(result%13), value)
		if _, used, perr := resp.ParseReply(out); perr != nil || used != len(out) {
			t.Fatalf("%q: reply %q does not parse as one RESP reply: %v", line, out, perr)
		}
	})
}
