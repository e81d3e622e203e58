package rediscmd

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tallyd/tallyd/proto/slock"
)

// The Redis 7 behaviours of the text side that the differential test (e2e) found missing.

func TestAppendUnknown(t *testing.T) {
	a100, b100 := strings.Repeat("a", 100), strings.Repeat("b", 100)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"NOSUCH"}, "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
		{[]string{"nosuch", "a", "b"}, "-ERR unknown command 'nosuch', with args beginning with: 'a' 'b' \r\n"},
		{[]string{"x", ""}, "-ERR unknown command 'x', with args beginning with: '' \r\n"},
		{[]string{"x", "a\r\nb"}, "-ERR unknown command 'x', with args beginning with: 'a  b' \r\n"},
		{[]string{"x", "a\x00b", "c"}, "-ERR unknown command 'x', with args beginning with: 'a' 'c' \r\n"},
		{[]string{"x\x00y", "a"}, "-ERR unknown command 'x', with args beginning with: 'a' \r\n"},
		{[]string{"x", a100, b100, "c"}, "-ERR unknown command 'x', with args beginning with: '" + a100 + "' '" + b100[:25] + "' \r\n"},
		{[]string{"x", a100 + a100}, "-ERR unknown command 'x', with args beginning with: '" + (a100 + a100)[:128] + "' \r\n"},
		{[]string{a100 + b100}, "-ERR unknown command '" + (a100 + b100)[:128] + "', with args beginning with: \r\n"},
	} {
		args := make([][]byte, len(c.args))
		for i, a := range c.args {
			args[i] = []byte(a)
		}
		if got := string(AppendUnknown([]byte("x"), args)); got != "x"+c.want {
			t.Errorf("%q:\n got %q\nwant %q", c.args, got, "x"+c.want)
		}
	}
}

func TestParseSetOptions(t *testing.T) {
	const now = 1_000_000_000_000
	parse := func(line string) (*KV, error) {
		args := argsOf(line)
		op, name := LookupKV(args[0])
		var kv KV
		_, err := ParseKV(args, op, name, &Text{Timeout: 15}, now, func() (id [16]byte) { return id }, &kv, nil)
		return &kv, err
	}
	for _, c := range []struct {
		line     string
		err      string
		op       Op
		keep     bool
		expireAt int64
		expried  uint16
	}{
		{line: "SET k v KEEPTTL", op: OpSet, keep: true, expried: keepExpiry},
		{line: "SET k v", op: OpSet, expried: resetExpiry},
		{line: "SET k v GET", op: OpGetSet, expried: resetExpiry},
		{line: "SET k v XX GET KEEPTTL", op: OpGetSet, keep: true, expried: keepExpiry},
		{line: "SET k v EX 1 EX 2", op: OpSet, expireAt: now + 2000, expried: 2000},
		{line: "SET k v EXAT 1000000010", op: OpSet, expireAt: now + 10_000, expried: 10_000},
		{line: "SET k v PXAT 1000000000500", op: OpSet, expireAt: now + 500, expried: 500},
		{line: "SET k v EXAT 1", op: OpSet, expried: 0},              // past: expires at once
		{line: "SET k v NX GET", op: OpGetSet, expried: resetExpiry}, // Redis 7: the old value, set only if none
		{line: "SET k v EX 1 PX 1", err: "syntax error"},
		{line: "SET k v EXAT 1 PXAT 1", err: "syntax error"},
		{line: "SET k v KEEPTTL EX 1", err: "syntax error"},
		{line: "SET k v EX 1 KEEPTTL", err: "syntax error"},
		{line: "SET k v EX x FOO", err: "syntax error"}, // options first, then the value
		{line: "SET k v EX x", err: "value is not an integer or out of range"},
		{line: "SET k v EXAT 0", err: "invalid expire time in 'set' command"},
		{line: "SET k v EXAT 9223372036854776", err: "invalid expire time in 'set' command"},
		{line: "SET k v PXAT -1", err: "invalid expire time in 'set' command"},
		{line: "SET k v PX", err: "syntax error"},
	} {
		kv, err := parse(c.line)
		got := ""
		if err != nil {
			got = err.(*TextError).Msg
		}
		if got != c.err {
			t.Errorf("%s: error %q, want %q", c.line, got, c.err)
			continue
		}
		if err == nil && (kv.Op != c.op || kv.KeepTTL != c.keep || kv.ExpireAt != c.expireAt || kv.Frame.Expried != c.expried) {
			t.Errorf("%s: op %d keep %v expireAt %d expried %d, want %d %v %d %d", c.line, kv.Op, kv.KeepTTL,
				kv.ExpireAt, kv.Frame.Expried, c.op, c.keep, c.expireAt, c.expried)
		}
	}
}

func TestExpireOptions(t *testing.T) {
	const now = 1_000_000_000_000
	parse := func(line string) (*KV, error) {
		args := argsOf(line)
		op, name := LookupKV(args[0])
		var kv KV
		_, err := ParseKV(args, op, name, &Text{Timeout: 15}, now, func() (id [16]byte) { return id }, &kv, nil)
		return &kv, err
	}
	for _, c := range []struct{ line, err string }{
		{"EXPIRE k 10 FOO", "Unsupported option FOO"},
		{"EXPIRE k x FOO", "Unsupported option FOO"},
		{"EXPIRE k 10 NX XX", "NX and XX, GT or LT options at the same time are not compatible"},
		{"EXPIRE k 10 nx gt", "NX and XX, GT or LT options at the same time are not compatible"},
		{"EXPIRE k 10 GT LT", "GT and LT options at the same time are not compatible"},
		{"EXPIRE k 10 XX GT", ""}, {"PEXPIREAT k 10 lt", ""}, {"EXPIRE k 10 NX NX", ""},
	} {
		_, err := parse(c.line)
		got := ""
		if err != nil {
			got = err.(*TextError).Msg
		}
		if got != c.err {
			t.Errorf("%s: error %q, want %q", c.line, got, c.err)
		}
	}
	// Whether the option lets the expiry at now+10 s replace one at cur (-1: none).
	const never = -1
	for _, c := range []struct {
		opts string
		cur  int64
		want bool
	}{
		{"", never, true}, {"", now + 1, true},
		{"NX", never, true}, {"NX", now + 1, false},
		{"XX", never, false}, {"XX", now + 1, true},
		{"GT", never, false}, {"GT", now + 1, true}, {"GT", now + 10_000, false}, {"GT", now + 20_000, false},
		{"LT", never, true}, {"LT", now + 1, false}, {"LT", now + 10_000, false}, {"LT", now + 20_000, true},
		{"XX LT", never, false}, {"XX GT", now + 1, true},
	} {
		kv, err := parse(strings.TrimSpace("EXPIRE k 10 " + c.opts))
		if err != nil {
			t.Fatal(err)
		}
		if got := kv.ExpireApplies(c.cur); got != c.want {
			t.Errorf("EXPIRE k 10 %s on an expiry at %d: %v, want %v", c.opts, c.cur, got, c.want)
		}
	}
}

// TestCounterValue: a counter (NUMBER) is a bulk string of its digits to GET by default,
// an integer only for connections that asked for slock's semantics; APPEND appends to the
// digits.
func TestCounterValue(t *testing.T) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(1<<63)) // -2^63: the longest number
	rec := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, slock.DataNumber, nil, n[:])
	if got := string(AppendValue(nil, rec, false)); got != "$20\r\n-9223372036854775808\r\n" {
		t.Errorf("GET: %q", got)
	}
	if got := string(AppendValue(nil, rec, true)); got != ":-9223372036854775808\r\n" {
		t.Errorf("GET with CLIENT SLOCK ON: %q", got)
	}
	dst := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(100, func() { dst = AppendValue(dst[:0], rec, false) }); a != 0 {
		t.Errorf("AppendValue allocates %v times", a)
	}
	args := argsOf("APPEND k 12")
	var kv KV
	buf, err := ParseKV(args, OpAppend, "APPEND", &Text{}, 0, func() (id [16]byte) { return id }, &kv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if buf, err = kv.NumberAppend(rec, buf); err != nil {
		t.Fatal(err)
	}
	d, err := slock.ParseDataRecord(kv.Frame.Data)
	if err != nil || d.Cmd != slock.DataSet || d.Flag&slock.DataNumber != 0 || string(d.Value) != "-922337203685477580812" {
		t.Errorf("APPEND to a counter: %+v %v", d, err)
	}
	str := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("ab"))
	before := kv.Frame.Data
	if _, err := kv.NumberAppend(str, buf); err != nil || &kv.Frame.Data[0] != &before[0] {
		t.Errorf("APPEND to a string changed the record: %v", err)
	}
}

// TestNXLockID checks that SET NX and SETNX hold a key under the key's own LockId, as plain
// SET does (a Redis key: anyone may expire or delete it), and under a fresh one only with
// CLIENT SLOCK ON (slock's mutex); and that the store's refusal of the reentry (the key
// exists) renders as Redis's "not set".
func TestNXLockID(t *testing.T) {
	fresh := [16]byte{0xfe, 0xed}
	for _, c := range []struct {
		line  string
		slock bool
		own   bool // LockId = the key
	}{
		{"SET k v NX", false, true},
		{"SET k v NX PX 5000", false, true},
		{"SETNX k v", false, true},
		{"SET k v NX GET", false, true},
		{"SET k v", true, true},
		{"SETNX k v", true, false},
		{"SET k v NX", true, false},
	} {
		args := argsOf(c.line)
		op, name := LookupKV(args[0])
		var kv KV
		tx := &Text{Timeout: 15, Slock: c.slock}
		if _, err := ParseKV(args, op, name, tx, 1, func() [16]byte { return fresh }, &kv, nil); err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if own := kv.Frame.LockID == kv.Frame.Key; own != c.own || !own && kv.Frame.LockID != fresh {
			t.Errorf("%s (slock %v): LockId %x, key %x; want the key's: %v", c.line, c.slock, kv.Frame.LockID, kv.Frame.Key, c.own)
		}
	}
	old := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("old"))
	for _, c := range []struct {
		kv     KV
		result slock.Result
		want   string
	}{
		{KV{Op: OpSet, NX: true}, slock.ResultLockedError, "$-1\r\n"},
		{KV{Op: OpSet, NX: true}, slock.ResultOK, "+OK\r\n"},
		{KV{Op: OpSet, NX: true}, slock.ResultTimeout, "$-1\r\n"},
		{KV{Op: OpSet}, slock.ResultLockedError, "+OK\r\n"}, // a plain SET is an Update: LockedError is its success
		{KV{Op: OpSetNX, NX: true}, slock.ResultLockedError, ":0\r\n"},
		{KV{Op: OpSetNX, NX: true}, slock.ResultOK, ":1\r\n"},
		{KV{Op: OpGetSet, NX: true}, slock.ResultLockedError, "$3\r\nold\r\n"}, // SET NX GET of a key that exists
	} {
		if got := string(AppendKVReply(nil, &c.kv, c.result, old)); got != c.want {
			t.Errorf("%+v %v: %q, want %q", c.kv, c.result, got, c.want)
		}
	}
}
