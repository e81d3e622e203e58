package rediscmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/slock"
)

// words splits a command line into its arguments.
func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		if w == `""` {
			w = ""
		}
		out = append(out, []byte(w))
	}
	return out
}

// keyProps hand-builds the property area naming key: u16 P, code 1, u16 length, bytes.
func keyProps(key string) []byte {
	return cat(le16(uint16(3+len(key))), []byte{1}, le16(uint16(len(key))), str(key))
}

// hashRecord hand-builds a hash value record of key with the pairs fv, as the store
// leaves it.
func hashRecord(key string, fv ...string) []byte {
	var v []byte
	for _, s := range fv {
		v = cat(v, le32(uint32(len(s))), str(s))
	}
	return record([]byte{0x00, 0x14}, keyProps(key), v)
}

// parseHash looks up and parses line.
func parseHash(t *testing.T, line string, db uint8) (*Hash, error) {
	t.Helper()
	args := words(line)
	op, name := LookupHash(args[0])
	if op == HashNone {
		t.Fatalf("LookupHash(%q) found nothing", args[0])
	}
	var h Hash
	_, err := ParseHash(args, op, name, &Text{DB: db}, func() [16]byte { return rid1 }, &h, nil)
	return &h, err
}

func TestLookupHash(t *testing.T) {
	for _, c := range []struct {
		name string
		op   HashOp
	}{
		{"hset", HashSet}, {"HmSet", HashSet}, {"HDEL", HashDel}, {"hincrby", HashIncr}, {"hget", HashGet},
		{"HMGET", HashMGet}, {"hgetall", HashGetAll}, {"hlen", HashLen}, {"HEXISTS", HashExists},
		{"hkeys", HashKeys}, {"hvals", HashVals},
		{"hsetnx", HashNone}, {"get", HashNone}, {"h", HashNone}, {"hincrbyfloat", HashNone}, {"", HashNone},
	} {
		if op, _ := LookupHash([]byte(c.name)); op != c.op {
			t.Errorf("LookupHash(%q) = %d, want %d", c.name, op, c.op)
		}
	}
}

func TestParseHashErrors(t *testing.T) {
	for line, want := range map[string]string{
		"HSET k":                          "wrong number of arguments for 'hset' command",
		"HSET k f":                        "wrong number of arguments for 'hset' command",
		"HSET k f v g":                    "wrong number of arguments for 'hset' command",
		"HMSET k f v g":                   "wrong number of arguments for 'hmset' command",
		"HDEL k":                          "wrong number of arguments for 'hdel' command",
		"HINCRBY k f":                     "wrong number of arguments for 'hincrby' command",
		"HINCRBY k f 1 2":                 "wrong number of arguments for 'hincrby' command",
		"HINCRBY k f x":                   "value is not an integer or out of range",
		"HINCRBY k f 1.5":                 "value is not an integer or out of range",
		"HINCRBY k f 9223372036854775808": "value is not an integer or out of range",
		"HGET k":                          "wrong number of arguments for 'hget' command",
		"HGET k f g":                      "wrong number of arguments for 'hget' command",
		"HMGET k":                         "wrong number of arguments for 'hmget' command",
		"HGETALL":                         "wrong number of arguments for 'hgetall' command",
		"HGETALL k x":                     "wrong number of arguments for 'hgetall' command",
		"HLEN k x":                        "wrong number of arguments for 'hlen' command",
		"HEXISTS k":                       "wrong number of arguments for 'hexists' command",
		"HKEYS":                           "wrong number of arguments for 'hkeys' command",
		"HVALS k x":                       "wrong number of arguments for 'hvals' command",
	} {
		_, err := parseHash(t, line, 0)
		if got := string(AppendTextError(nil, errOr(err))); got != "-ERR "+want+"\r\n" {
			t.Errorf("%s: %q, want -ERR %s", line, got, want)
		}
	}
}

func errOr(err error) error {
	if err == nil {
		return fmt.Errorf("no error")
	}
	return err
}

// TestHashWriteFrame: a write runs as the Lock APPEND uses, on the key's id, with a
// template record that gives a new hash the KV flag and the key's name.
func TestHashWriteFrame(t *testing.T) {
	h, err := parseHash(t, "HINCRBY user:1 visits -5", 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.Op != HashIncr || string(h.Key) != "user:1" || len(h.Args) != 1 || string(h.Args[0]) != "visits" || h.Delta != -5 || !h.Writes() {
		t.Fatalf("parsed %+v", h)
	}
	f := h.Frame
	id := slock.TextID([]byte("user:1"))
	if f.Type != slock.TypeLock || f.RequestID != rid1 || f.Flag != 0x22 || f.DB != 3 || f.LockID != id || f.Key != id ||
		f.Timeout != 0 || f.TimeoutFlag != 0 || f.Expried != 0xFFFF || f.ExpriedFlag != 0x4000|0x0100|0x2000 || f.Count != 0 || f.Rcount != 0 {
		t.Fatalf("frame %+v", f)
	}
	if want := record([]byte{0x00, 0x14}, keyProps("user:1")); string(f.Data) != string(want) {
		t.Fatalf("template %x, want %x", f.Data, want)
	}
	h, err = parseHash(t, "HSET k a 1 b 2", 0)
	if err != nil || h.Op != HashSet || len(h.Args) != 4 || string(h.Args[3]) != "2" || h.Frame.Data == nil {
		t.Fatalf("HSET: %+v, %v", h, err)
	}
	h, err = parseHash(t, "HGET k a", 0)
	if err != nil || h.Writes() || h.Frame.Data != nil || string(h.Args[0]) != "a" {
		t.Fatalf("HGET: %+v, %v", h, err)
	}
}

func TestAppendHashRead(t *testing.T) {
	rec := hashRecord("k", "a", "1", "b", "", "", "empty-field", "c", "3")
	strRec := record([]byte{0x00, 0x10}, keyProps("s"), str("hello"))
	num := record([]byte{0x00, 0x11}, keyProps("n"), le64(7))
	const wrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
	for _, c := range []struct {
		line string
		rec  []byte
		want string
	}{
		{"HGET k a", rec, "$1\r\n1\r\n"},
		{"HGET k b", rec, "$0\r\n\r\n"},
		{`HGET k ""`, rec, "$11\r\nempty-field\r\n"},
		{"HGET k x", rec, "$-1\r\n"},
		{"HGET k a", nil, "$-1\r\n"},
		{"HGET k a", strRec, wrong},
		{"HGET k a", num, wrong},
		{"HMGET k c x a", rec, "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n1\r\n"},
		{"HMGET k a b", nil, "*2\r\n$-1\r\n$-1\r\n"},
		{"HMGET k a", strRec, wrong},
		{"HGETALL k", rec, "*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$0\r\n\r\n$0\r\n\r\n$11\r\nempty-field\r\n$1\r\nc\r\n$1\r\n3\r\n"},
		{"HGETALL k", nil, "*0\r\n"},
		{"HGETALL k", strRec, wrong},
		{"HKEYS k", rec, "*4\r\n$1\r\na\r\n$1\r\nb\r\n$0\r\n\r\n$1\r\nc\r\n"},
		{"HVALS k", rec, "*4\r\n$1\r\n1\r\n$0\r\n\r\n$11\r\nempty-field\r\n$1\r\n3\r\n"},
		{"HKEYS k", nil, "*0\r\n"},
		{"HLEN k", rec, ":4\r\n"},
		{"HLEN k", nil, ":0\r\n"},
		{"HLEN k", num, wrong},
		{"HEXISTS k b", rec, ":1\r\n"},
		{"HEXISTS k x", rec, ":0\r\n"},
		{"HEXISTS k x", nil, ":0\r\n"},
		{"HEXISTS k x", strRec, wrong},
		// A truncated last pair is not part of the hash.
		{"HLEN k", append(hashRecord("k", "a", "1", "b", "2")[:0:0], record([]byte{0x00, 0x04}, cat(le32(1), str("a"), le32(1), str("1"), le32(9), str("b")))...), ":1\r\n"},
	} {
		h, err := parseHash(t, c.line, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if got := string(AppendHashRead(nil, h, c.rec)); got != c.want {
			t.Errorf("%s on %x: %q, want %q", c.line, c.rec, got, c.want)
		}
	}
}

// TestHMGetIndexed: HMGET of many fields on a big hash goes through an index and answers
// as the plain lookup does.
func TestHMGetIndexed(t *testing.T) {
	var fv []string
	for i := range 300 {
		fv = append(fv, fmt.Sprintf("f%d", i), fmt.Sprintf("v%d", i))
	}
	fv = append(fv, "f7", "duplicate") // a binary client's value may repeat a field: the first wins
	rec := hashRecord("k", fv...)
	line := "HMGET k"
	want := ""
	n := 0
	for i := 0; i < 400; i += 7 {
		line += fmt.Sprintf(" f%d", i)
		if i < 300 {
			want += fmt.Sprintf("$%d\r\nv%d\r\n", len(fmt.Sprint(i))+1, i)
		} else {
			want += "$-1\r\n"
		}
		n++
	}
	h, err := parseHash(t, line, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n*301 <= hmgetIndexAt {
		t.Fatalf("the case is too small to be indexed")
	}
	if got := string(AppendHashRead(nil, h, rec)); got != fmt.Sprintf("*%d\r\n", n)+want {
		t.Fatalf("indexed HMGET: %q", got)
	}
}

func TestAppendHashWrite(t *testing.T) {
	for _, c := range []struct {
		line   string
		result slock.Result
		n      int64
		want   string
	}{
		{"HSET k a 1", slock.ResultOK, 1, ":1\r\n"},
		{"HSET k a 1", slock.ResultLockedError, 0, ":0\r\n"},
		{"HMSET k a 1", slock.ResultLockedError, 0, "+OK\r\n"},
		{"HDEL k a b", slock.ResultOK, 2, ":2\r\n"},
		{"HINCRBY k a -3", slock.ResultLockedError, -3, ":-3\r\n"},
		{"HINCRBY k a 1", slock.ResultTimeout, 0, "-ERR 8\r\n"},
		{"HDEL k a", slock.ResultUnownError, 0, "-ERR 7\r\n"},
	} {
		h, err := parseHash(t, c.line, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(AppendHashWrite(nil, h, c.result, c.n)); got != c.want {
			t.Errorf("%s, result %d: %q, want %q", c.line, c.result, got, c.want)
		}
	}
	for err, want := range map[error]string{
		ErrWrongType:           "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		ErrHashNotInt:          "-ERR hash value is not an integer\r\n",
		ErrHashOverflow:        "-ERR increment or decrement would overflow\r\n",
		ValueTooLong(70, 64):   "-ERR value too long: 70 bytes with its key name, limit 64 (--slock-max-data)\r\n",
		KeysRefused(300000, 7): "-ERR KEYS would examine 300000 keys, more than the 7 it examines at once: use SCAN\r\n",
	} {
		if got := string(AppendTextError(nil, err)); got != want {
			t.Errorf("AppendTextError(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestTypeName(t *testing.T) {
	for rec, want := range map[string]string{
		"":                                "none",
		string(hashRecord("k", "a", "1")): "hash",
		string(record([]byte{0, 0x04})):   "hash",
		string(record([]byte{0, 0x10}, keyProps("s"), str("x"))): "string",
		string(record([]byte{0, 0x05}, le64(1))):                 "string", // NUMBER wins over KV
		string(record([]byte{0, 0x06}, le32(1), str("x"))):       "string", // ARRAY too
		string(record([]byte{slock.DataUnset, 0x04})):            "none",
	} {
		var r []byte
		if rec != "" {
			r = []byte(rec)
		}
		if got := TypeName(r); got != want {
			t.Errorf("TypeName(%x) = %s, want %s", r, got, want)
		}
	}
}

func TestHashAllocs(t *testing.T) {
	args := words("HINCRBY counters:user:1 visits 1")
	rec := hashRecord("counters:user:1", "visits", "10", "clicks", "3")
	var h Hash
	buf := make([]byte, 0, 256)
	dst := make([]byte, 0, 256)
	newID := func() [16]byte { return rid1 }
	tx := &Text{}
	if a := testing.AllocsPerRun(100, func() {
		op, name := LookupHash(args[0])
		buf, _ = ParseHash(args, op, name, tx, newID, &h, buf[:0])
		dst = AppendHashWrite(dst[:0], &h, slock.ResultOK, 11)
	}); a != 0 {
		t.Errorf("HINCRBY: %v allocations", a)
	}
	get := words("HMGET counters:user:1 visits clicks x")
	if a := testing.AllocsPerRun(100, func() {
		op, name := LookupHash(get[0])
		buf, _ = ParseHash(get, op, name, tx, newID, &h, buf[:0])
		dst = AppendHashRead(dst[:0], &h, rec)
	}); a != 0 {
		t.Errorf("HMGET: %v allocations", a)
	}
	scan := words("SCAN 1234 MATCH user:* COUNT 100 TYPE hash")
	var s Scan
	if a := testing.AllocsPerRun(100, func() {
		_ = ParseScan(scan, &s)
		_, _ = s.Wants(rec)
	}); a != 0 {
		t.Errorf("SCAN: %v allocations", a)
	}
}
