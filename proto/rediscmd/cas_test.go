package rediscmd

import (
	"testing"

	"github.com/tallyd/tallyd/proto/slock"
)

// TestParseCAS checks the parse of DELEX, DELIFEQ, DIGEST, GETDEL, GETEX and SET's IF*
// options: their conditions, frames and Redis's errors.
func TestParseCAS(t *testing.T) {
	const now = 1_000_000_000_000
	for _, c := range []struct {
		line    string
		err     string
		cond    Cond
		arg     string
		unlock  bool // the frame is a DEL's Unlock
		late    bool
		persist bool
	}{
		{line: "DELEX k", unlock: true},
		{line: "DELEX k IFEQ v", cond: CondEq, arg: "v", unlock: true},
		{line: "delex k ifne v", cond: CondNe, arg: "v", unlock: true},
		{line: "DELEX k IFDEQ 00ff", cond: CondDigestEq, arg: "00ff", unlock: true},
		{line: "DELEX k IFDNE 00ff", cond: CondDigestNe, arg: "00ff", unlock: true},
		{line: "DELEX k IFEQ", err: "syntax error"},
		{line: "DELEX k IFEQ v w", err: "syntax error"},
		{line: "DELEX k FOO v", err: "syntax error"},
		{line: "DELIFEQ k v", cond: CondEq, arg: "v", unlock: true},
		{line: "DELIFEQ k", err: "wrong number of arguments for 'delifeq' command"},
		{line: "DIGEST k"},
		{line: "DIGEST k x", err: "wrong number of arguments for 'digest' command"},
		{line: "GETDEL k", unlock: true},
		{line: "GETEX k"},
		{line: "GETEX k PERSIST", persist: true},
		{line: "GETEX k EX 10"},
		{line: "GETEX k EX 0", late: true},
		{line: "GETEX k EX x", late: true},
		{line: "GETEX k EX x FOO", err: "syntax error"},
		{line: "GETEX k EX 1 PERSIST", err: "syntax error"},
		{line: "GETEX k KEEPTTL", err: "syntax error"},
		{line: "SET k v IFEQ w", cond: CondEq, arg: "w"},
		{line: "SET k v IFDNE d GET PX 10", cond: CondDigestNe, arg: "d"},
		{line: "SET k v NX IFEQ w", err: "syntax error"},
		{line: "SET k v IFEQ w XX", err: "syntax error"},
		{line: "SET k v IFEQ w IFNE x", err: "syntax error"},
		{line: "SET k v IFEQ", err: "syntax error"},
	} {
		args := argsOf(c.line)
		op, name := LookupKV(args[0])
		var kv KV
		_, err := ParseKV(args, op, name, &Text{Timeout: 15}, now, func() (id [16]byte) { return id }, &kv, nil)
		got := ""
		if err != nil {
			got = err.(*TextError).Msg
		}
		if got != c.err {
			t.Errorf("%s: error %q, want %q", c.line, got, c.err)
			continue
		}
		if err != nil {
			continue
		}
		if kv.Cond != c.cond || string(kv.CondArg) != c.arg || (kv.Frame.Type == slock.TypeUnlock) != c.unlock ||
			(kv.Late != nil) != c.late || kv.Persist != c.persist {
			t.Errorf("%s: cond %d %q unlock %v late %v persist %v", c.line, kv.Cond, kv.CondArg, kv.Frame.Type == slock.TypeUnlock, kv.Late, kv.Persist)
		}
	}
}

// TestDigest checks DIGEST against Redis's published vectors, a counter as GET shows it,
// and the conditions on digests without regard to case.
func TestDigest(t *testing.T) {
	for s, want := range map[string]string{"Hello world": "b6acb9d84a38ff74", "test": "9ec9f7918d7dfc40",
		"hello": "9555e8555c62dcfd", "foo": "ab6e5f64077e7d8a"} {
		rec := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte(s))
		if got := string(AppendDigest(nil, rec)); got != "$16\r\n"+want+"\r\n" {
			t.Errorf("DIGEST of %q: %q, want %s", s, got, want)
		}
	}
	var n [8]byte
	n[0] = 5
	num := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, slock.DataNumber, nil, n[:])
	str := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("5"))
	if a, b := string(AppendDigest(nil, num)), string(AppendDigest(nil, str)); a != b {
		t.Errorf("DIGEST of the counter 5: %q, of the string 5: %q", a, b)
	}
	if got := string(AppendDigest(nil, nil)); got != "$-1\r\n" {
		t.Errorf("DIGEST of no key: %q", got)
	}
	foo := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("foo"))
	for _, c := range []struct {
		kv  KV
		rec []byte
		ok  bool
	}{
		{KV{Cond: CondDigestEq, CondArg: []byte("AB6E5F64077E7D8A")}, foo, true},
		{KV{Cond: CondDigestNe, CondArg: []byte("ab6e5f64077e7d8a")}, foo, false},
		{KV{Cond: CondDigestNe, CondArg: []byte("ab6e5f64077e7d8a")}, nil, true},
		{KV{Cond: CondDigestEq, CondArg: []byte("ab6e5f64077e7d8a")}, nil, false},
		{KV{Cond: CondEq, CondArg: []byte("5")}, num, true},
		{KV{Cond: CondNe, CondArg: []byte("x")}, nil, true},
		{KV{Cond: CondEq, CondArg: []byte("")}, nil, false},
	} {
		if got := c.kv.CondHolds(c.rec); got != c.ok {
			t.Errorf("%d %q on %q: %v, want %v", c.kv.Cond, c.kv.CondArg, c.rec, got, c.ok)
		}
	}
	if a := testing.AllocsPerRun(100, func() { (&KV{Cond: CondDigestEq, CondArg: []byte("x")}).CondHolds(num) }); a != 0 {
		t.Errorf("CondHolds allocates %v times", a)
	}
}
