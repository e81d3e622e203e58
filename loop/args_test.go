package loop

import (
	"strconv"
	"testing"

	"github.com/tallyd/tallyd/proto/resp"
)

// Issue 21, item 7: a command of more than 1,024 arguments used to close the connection
// without a reply. Redis takes them; so does tallyd, up to what --max-input holds.
func TestManyArguments(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	mset := []string{"MSET"}
	for i := range 600 {
		mset = append(mset, "k"+strconv.Itoa(i), "v"+strconv.Itoa(i))
	}
	expectSimple(t, rc.cmd(mset...), '+', "OK")
	mget := []string{"MGET"}
	for i := range 1100 {
		mget = append(mget, "k"+strconv.Itoa(i))
	}
	r := rc.cmd(mget...)
	if r.Kind != '*' || len(r.Elems) != 1100 {
		t.Fatalf("MGET of 1,100 keys: %c reply of %d elements", r.Kind, len(r.Elems))
	}
	for i, e := range r.Elems {
		want := "v" + strconv.Itoa(i)
		if i >= 600 {
			if !e.Null {
				t.Fatalf("MGET element %d: %s, want nil", i, showResp(e))
			}
			continue
		}
		if string(e.Str) != want {
			t.Fatalf("MGET element %d: %s, want %s", i, showResp(e), want)
		}
	}
	del := []string{"DEL"}
	for i := range 2000 {
		del = append(del, "k"+strconv.Itoa(i))
	}
	if r := rc.cmd(del...); r.Kind != ':' || r.Int != 600 {
		t.Fatalf("DEL of 2,000 keys: %s, want :600", showResp(r))
	}
	if r := rc.cmd("DBSIZE"); r.Int != 0 {
		t.Fatalf("DBSIZE after the DEL: %s", showResp(r))
	}
	// Inside a transaction too.
	b := resp.AppendCommand(nil, "MULTI")
	b = resp.AppendCommand(b, mset...)
	b = resp.AppendCommand(b, mget...)
	b = resp.AppendCommand(b, "EXEC")
	rc.write(b)
	for range 3 {
		rc.reply()
	}
	if r := rc.reply(); r.Kind != '*' || len(r.Elems) != 2 || len(r.Elems[1].Elems) != 1100 {
		t.Fatalf("EXEC of MSET and MGET: %s", showResp(r))
	}
}

// Past a limit the client reads Redis's error, then the connection closes, as Redis does for
// a protocol error (networking.c: setProtocolError).
func TestArgumentLimitsAnswerRedisErrors(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxInput = 1 << 20 })
	for _, c := range []struct{ in, want string }{
		{"*2000000\r\n", "ERR Protocol error: invalid multibulk length"},    // past maxTextArgs
		{"*200000\r\n", "ERR Protocol error: invalid multibulk length"},     // cannot fit --max-input
		{"*3000000000\r\n", "ERR Protocol error: invalid multibulk length"}, // past what Redis takes too
		{"*1\r\n$2000000\r\n", "ERR Protocol error: invalid bulk length"},   // longer than --max-input
		{"*1\r\n$-1\r\n", "ERR Protocol error: invalid bulk length"},        // as Redis
		{"*1\r\n$1x\r\n", "ERR Protocol error: invalid bulk length"},        //
		{"*2\r\nx\r\n", "ERR Protocol error: expected '$', got 'x'"},        //
		{"*1\r\n$4\r\nPINGxx", `ERR Protocol error: bulk of 4 bytes is followed by 'x', not "\r\n"`},
	} {
		rc := dialResp(t, ts.slockAddr)
		rc.write([]byte("*1\r\n$4\r\nPING\r\n" + c.in))
		expectSimple(t, rc.reply(), '+', "PONG")
		if r := rc.reply(); r.Kind != '-' || string(r.Str) != c.want {
			t.Fatalf("%q: %s, want -%s", c.in, showResp(r), c.want)
		}
		rc.expectClosed()
	}
	rc := dialResp(t, ts.slockAddr)
	expectSimple(t, rc.cmd("PING"), '+', "PONG")
}

// Before AUTH, a connection that must log in gets Redis's smaller limits (networking.c:
// authRequired): 10 arguments, 16 KiB an argument, with Redis's errors.
func TestArgumentLimitsBeforeAuth(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.RequirePass = "s3cret" })
	for _, c := range []struct{ in, want string }{
		{"*11\r\n", "ERR Protocol error: unauthenticated multibulk length"},
		{"*2\r\n$3\r\nGET\r\n$16385\r\n", "ERR Protocol error: unauthenticated bulk length"},
	} {
		rc := dialResp(t, ts.slockAddr)
		rc.write([]byte(c.in))
		if r := rc.reply(); r.Kind != '-' || string(r.Str) != c.want {
			t.Fatalf("%q: %s, want -%s", c.in, showResp(r), c.want)
		}
		rc.expectClosed()
	}
	rc := dialResp(t, ts.slockAddr)
	expectSimple(t, rc.cmd("AUTH", "s3cret"), '+', "OK")
	mget := []string{"MGET"}
	for i := range 1100 {
		mget = append(mget, "k"+strconv.Itoa(i))
	}
	if r := rc.cmd(mget...); len(r.Elems) != 1100 {
		t.Fatalf("MGET of 1,100 keys after AUTH: %s", showResp(r))
	}
}
