package loop

// slock over real TCP: the Redis text protocol on the same port, and the real redis-cli.

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// u32s formats a 32-bit TIMEOUT/EXPRIED argument: flag in the high 16 bits, time in the low.
func u32s(flag uint16, v uint16) string { return strconv.FormatUint(uint64(flag)<<16|uint64(v), 10) }

// hexID is id as the text reply shows it.
func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

// expectText checks the counters of a LOCK/UNLOCK reply.
func expectText(t *testing.T, tl textLock, code, lcount, count, lrcount, rcount string) {
	t.Helper()
	got := [5]string{tl.Code, tl.Lcount, tl.Count, tl.Lrcount, tl.Rcount}
	if got != [5]string{code, lcount, count, lrcount, rcount} {
		t.Fatalf("LOCK reply %s: code/lcount/count/lrcount/rcount %q, want %q", showResp(tl.raw), got,
			[5]string{code, lcount, count, lrcount, rcount})
	}
	n, _ := strconv.Atoi(code)
	if tl.Name != slock.Result(n).String() {
		t.Fatalf("LOCK reply: name %q for code %s", tl.Name, code)
	}
}

func expectSimple(t *testing.T, r resp.Reply, kind byte, s string) {
	t.Helper()
	if r.Kind != kind || string(r.Str) != s {
		t.Fatalf("reply %s, want %c%s", showResp(r), kind, s)
	}
}

func TestSlockTextLockUnlock(t *testing.T) {
	ts := startSlock(t, nil)
	t1, t2 := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	b := dialSlock(t, ts.slockAddr)

	// Defaults: Timeout 15, Expried 120, a fresh LockId; UNLOCK takes the last LOCK's id.
	tl := parseTextLock(t, t1.cmd("LOCK", "tk"))
	expectText(t, tl, "0", "1", "1", "1", "1")
	if tl.Data != nil {
		t.Fatal("a lock on a new key shows data")
	}
	ll := listLocked(t, b, 0, key16("tk"))
	c := ll.Locks[0].Command
	if c.Timeout != 15 || c.TimeoutFlag != 0 || c.Expried != 120 || c.ExpriedFlag != 0 || c.Count != 0 || c.Rcount != 0 {
		t.Fatalf("text LOCK sent %+v", c)
	}
	eq(t, "LOCK_ID", hexID(ll.Locks[0].LockID), tl.LockID)
	u := parseTextLock(t, t1.cmd("UNLOCK", "tk"))
	expectText(t, u, "0", "0", "1", "0", "1")
	eq(t, "UNLOCK's LOCK_ID", u.LockID, tl.LockID)
	// A successful UNLOCK clears the default.
	u = parseTextLock(t, t1.cmd("UNLOCK", "tk"))
	expectText(t, u, "6", "0", "1", "0", "1")
	eq(t, "LOCK_ID after UNLOCK", u.LockID, strings.Repeat("0", 32))

	// LOCK_ID, TIMEOUT and EXPRIED with their flags, COUNT and RCOUNT (sent as n-1).
	tl = parseTextLock(t, t1.cmd("LOCK", "tk2", "LOCK_ID", "myid", "TIMEOUT", u32s(0x0400, 3000),
		"EXPRIED", u32s(0x0400, 5000), "COUNT", "3", "RCOUNT", "3"))
	expectText(t, tl, "0", "1", "3", "1", "3")
	eq(t, "short LOCK_ID", tl.LockID, hexID(key16("myid")))
	if !strings.HasSuffix(tl.LockID, hex.EncodeToString([]byte("myid"))) || !strings.HasPrefix(tl.LockID, strings.Repeat("0", 24)) {
		t.Fatalf("LOCK_ID %s: a short id is right-aligned and zero-padded", tl.LockID)
	}
	c = listLocked(t, b, 0, key16("tk2")).Locks[0].Command
	if c.Timeout != 3000 || c.TimeoutFlag != 0x0400 || c.Expried != 5000 || c.ExpriedFlag != 0x0400 || c.Count != 2 || c.Rcount != 2 {
		t.Fatalf("text LOCK with options sent %+v", c)
	}
	expectText(t, parseTextLock(t, t1.cmd("LOCK", "tk2", "LOCK_ID", "myid", "EXPRIED", "60", "COUNT", "3", "RCOUNT", "3")), "0", "2", "3", "2", "3")
	expectText(t, parseTextLock(t, t2.cmd("LOCK", "tk2", "COUNT", "3")), "0", "3", "3", "1", "1")
	// UNLOCK with RCOUNT > 1 releases one level of a reentrant holder.
	expectText(t, parseTextLock(t, t1.cmd("UNLOCK", "tk2", "LOCK_ID", "myid", "RCOUNT", "3")), "0", "2", "1", "1", "3")
	expectText(t, parseTextLock(t, t1.cmd("LOCK", "tk2", "LOCK_ID", "myid", "EXPRIED", "60", "COUNT", "3", "RCOUNT", "3")), "0", "3", "3", "2", "3")
	// FLAG 1 (show): the oldest holder.
	sh := parseTextLock(t, t2.cmd("LOCK", "tk2", "FLAG", "1", "TIMEOUT", "0"))
	expectText(t, sh, "7", "3", "3", "2", "3")
	eq(t, "shown LOCK_ID", sh.LockID, hexID(key16("myid")))

	// 32 hex digits are decoded; longer strings are MD5-hashed.
	h32 := "00112233445566778899AABBCCDDEEFF"
	eq(t, "hex LOCK_ID", parseTextLock(t, t2.cmd("LOCK", "tk3", "LOCK_ID", h32, "EXPRIED", "60")).LockID, strings.ToLower(h32))
	long := "a lock id longer than sixteen bytes"
	sum := md5.Sum([]byte(long))
	eq(t, "long LOCK_ID", parseTextLock(t, t2.cmd("LOCK", "tk4", "LOCK_ID", long, "EXPRIED", "60")).LockID, hexID(sum))
	// Key names do not (issue 12 item 8, rediscmd.Keys): a long name is not at its MD5, nor a
	// 32-hex-digit name at the bytes it decodes to (those LockKeys are free), so distinct
	// names never share a key; a short name is where binary clients pad it (tk2 above).
	longKey := "a key name longer than sixteen bytes"
	expectText(t, parseTextLock(t, t2.cmd("LOCK", longKey, "EXPRIED", "60")), "0", "1", "1", "1", "1")
	newLock(b, md5.Sum([]byte(longKey)), 0, 0).LockShow().want(slock.ResultOK)
	expectText(t, parseTextLock(t, t2.cmd("LOCK", strings.ToUpper(h32), "EXPRIED", "60")), "0", "1", "1", "1", "1")
	hk, _ := hex.DecodeString(h32)
	newLock(b, [16]byte(hk), 0, 0).LockShow().want(slock.ResultOK)
	expectText(t, parseTextLock(t, t2.cmd("LOCK", strings.ToLower(h32), "EXPRIED", "60", "TIMEOUT", "0")), "0", "1", "1", "1", "1") // not the upper-case name's

	// A millisecond TIMEOUT: the connection waits, then TIMEOUT.
	start := time.Now()
	expectText(t, parseTextLock(t, t2.cmd("LOCK", "tk2", "TIMEOUT", u32s(0x0400, 50))), "8", "3", "1", "0", "1")
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Fatalf("a 50 ms text wait took %v", d)
	}

	// COUNT and RCOUNT are shown plus one, wrapping: 65536 and 256 show as 0.
	expectText(t, parseTextLock(t, t2.cmd("LOCK", "tk5", "EXPRIED", "60", "COUNT", "65536", "RCOUNT", "256")), "0", "1", "0", "1", "0")

	// Errors in the command.
	for _, args := range [][]string{{"LOCK"}, {"LOCK", "k", "TIMEOUT"}, {"LOCK", "k", "BOGUS", "1"},
		{"LOCK", "k", "TIMEOUT", "abc"}, {"UNLOCK", "k", "FLAG", "256"}} {
		if r := t2.cmd(args...); r.Kind != '-' || !strings.HasPrefix(string(r.Str), "ERR ") {
			t.Fatalf("%q: %s, want an error", args, showResp(r))
		}
	}
	t2.cmd("PING") // still serving
	ts.healthy(t)
}

func TestSlockTextData(t *testing.T) {
	ts := startSlock(t, nil)
	t1, t2 := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	b := dialSlock(t, ts.slockAddr)
	upd := func(opts ...string) textLock {
		t.Helper()
		return parseTextLock(t, t1.cmd(append([]string{"LOCK", "td", "LOCK_ID", "dataid", "FLAG", "2"}, opts...)...))
	}
	data := func(tl textLock) string {
		t.Helper()
		if tl.Data == nil {
			return "none"
		}
		return showResp(*tl.Data)
	}

	tl := parseTextLock(t, t1.cmd("LOCK", "td", "LOCK_ID", "dataid", "EXPRIED", "60", "SET", "hello world"))
	expectText(t, tl, "0", "1", "1", "1", "1")
	eq(t, "DATA before SET", data(tl), "none")
	tl = upd("APPEND", "!")
	expectText(t, tl, "5", "1", "1", "1", "1")
	eq(t, "DATA before APPEND", data(tl), `"hello world"`)
	eq(t, "DATA before INCR", data(upd("INCR", "5")), `"hello world!"`)
	want := int64(binary.LittleEndian.Uint64([]byte("hello wo"))) + 5
	eq(t, "DATA before UNSET", data(upd("UNSET", "x")), ":"+strconv.FormatInt(want, 10))
	eq(t, "DATA before PUSH", data(upd("PUSH", "a")), "none")
	eq(t, "DATA before the second PUSH", data(upd("PUSH", "b")), `["a"]`)
	eq(t, "DATA before POP", data(upd("POP", "1")), `["a" "b"]`)
	eq(t, "DATA before SET", data(upd("SET", "abcdef")), `["b"]`)
	eq(t, "DATA before SHIFT", data(upd("SHIFT", "2")), `"abcdef"`)
	sh := parseTextLock(t, t2.cmd("LOCK", "td", "FLAG", "1", "TIMEOUT", "0"))
	expectText(t, sh, "7", "1", "1", "1", "1")
	eq(t, "DATA after SHIFT", data(sh), `"cdef"`)

	// KV values render as an array of keys and values.
	kv := append(append(append(le32(1), 'k'), le32(2)...), "vv"...)
	newLock(b, key16("tkv"), 5, 60).send(slock.TypeLock, 0, rec(slock.DataSet, slock.DataKV, kv)).want(slock.ResultOK)
	eq(t, "KV DATA", data(parseTextLock(t, t2.cmd("LOCK", "tkv", "FLAG", "1", "TIMEOUT", "0"))), `["k" "vv"]`)
	ts.healthy(t)
}

func TestSlockTextBlocking(t *testing.T) {
	ts := startSlock(t, nil)
	t1, t2 := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)

	expectText(t, parseTextLock(t, t1.cmd("LOCK", "bk", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	// A LOCK that waits holds up the commands pipelined behind it.
	t2.write(append(resp.AppendCommand(nil, "LOCK", "bk", "TIMEOUT", "5", "EXPRIED", "60"), resp.AppendCommand(nil, "PING")...))
	t2.silent(150 * time.Millisecond)
	expectText(t, parseTextLock(t, t1.cmd("UNLOCK", "bk")), "0", "0", "1", "0", "1")
	expectText(t, parseTextLock(t, t2.reply()), "0", "1", "1", "1", "1")
	expectSimple(t, t2.reply(), '+', "PONG")

	// PUSH does not wait: +OK at once, the lock queued.
	expectSimple(t, t1.cmd("SELECT", "4"), '+', "OK")
	expectSimple(t, t2.cmd("SELECT", "4"), '+', "OK")
	expectText(t, parseTextLock(t, t1.cmd("LOCK", "pk", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	expectSimple(t, t2.cmd("PUSH", "pk", "TIMEOUT", "5", "EXPRIED", "60", "LOCK_ID", "pushed"), '+', "OK")
	expectSimple(t, t2.cmd("PING"), '+', "PONG")
	b := dialSlock(t, ts.slockAddr)
	eq(t, "queued by PUSH", b.state(4).WaitCount, 1)
	expectText(t, parseTextLock(t, t1.cmd("UNLOCK", "pk")), "0", "0", "1", "0", "1")
	show := newLock(b, key16("pk"), 0, 0)
	show.db = 4
	eq(t, "holder after the PUSHed lock's grant", show.LockShow().want(slock.ResultUnownError).LockID, key16("pushed"))
	ts.healthy(t)
}

func TestSlockTextWillAndExecute(t *testing.T) {
	ts := startSlock(t, nil)
	t1, t3 := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	b := dialSlock(t, ts.slockAddr)
	held := func(key string) bool {
		t.Helper()
		r := newLock(b, key16(key), 0, 0).LockShow().reply()
		return r.Result == slock.ResultUnownError
	}

	// WILL 1: +OK now, run at close.
	expectText(t, parseTextLock(t, t3.cmd("LOCK", "tw", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	expectSimple(t, t3.cmd("UNLOCK", "tw", "WILL", "1"), '+', "OK")
	expectSimple(t, t3.cmd("LOCK", "tw2", "EXPRIED", "60", "WILL", "1"), '+', "OK")
	if !held("tw") || held("tw2") {
		t.Fatal("WILL commands ran before the close")
	}
	w := newLock(b, key16("tw"), 5, 60).Lock()
	_ = t3.c.Close()
	w.want(slock.ResultOK)
	if !held("tw2") {
		t.Fatal("WILL LOCK did not run at close")
	}

	// EXECUTE with stage UNLOCK: the inner LOCK runs when the outer lock is released.
	expectText(t, parseTextLock(t, t1.cmd("LOCK", "te", "EXPRIED", "60", "EXECUTE", "UNLOCK", "LOCK", "te2", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	if held("te2") {
		t.Fatal("a stage-UNLOCK EXECUTE ran at once")
	}
	expectText(t, parseTextLock(t, t1.cmd("UNLOCK", "te")), "0", "0", "1", "0", "1")
	if !held("te2") {
		t.Fatal("a stage-UNLOCK EXECUTE did not run at the release")
	}
	// Any other stage word is stage 0: at once.
	expectText(t, parseTextLock(t, t1.cmd("LOCK", "te3", "EXPRIED", "60", "EXECUTE", "NOW", "LOCK", "te4", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	if !held("te4") {
		t.Fatal("a stage-0 EXECUTE did not run")
	}
	expectSimple(t, t1.cmd("PING"), '+', "PONG") // the inner replies are not sent to a text connection
	ts.healthy(t)
}

func TestSlockTextCommands(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	b := dialSlock(t, ts.slockAddr)

	expectSimple(t, rc.cmd("PING"), '+', "PONG")
	expectSimple(t, rc.cmd("ping", "hello"), '$', "hello")
	expectSimple(t, rc.cmd("ECHO", "hi there"), '$', "hi there")
	if r := rc.cmd("ECHO"); r.Kind != '-' {
		t.Fatalf("ECHO without an argument: %s", showResp(r))
	}
	expectSimple(t, rc.cmd("SELECT", "3"), '+', "OK")
	expectText(t, parseTextLock(t, rc.cmd("LOCK", "sk", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	eq(t, "locked in db 3", b.state(3).LockedCount, 1)
	for _, db := range []string{"255", "-1", "x"} {
		if r := rc.cmd("SELECT", db); r.Kind != '-' {
			t.Fatalf("SELECT %s: %s", db, showResp(r))
		}
	}

	// TIMEOUT SET changes the default wait of later LOCKs.
	v := u32s(0x0400, 60)
	expectSimple(t, rc.cmd("TIMEOUT", "SET", v), '+', "OK")
	if r := rc.cmd("TIMEOUT", "GET", "x"); r.Kind != ':' || strconv.FormatInt(r.Int, 10) != v {
		t.Fatalf("TIMEOUT GET: %s, want :%s", showResp(r), v)
	}
	start := time.Now()
	expectText(t, parseTextLock(t, rc.cmd("LOCK", "sk")), "8", "1", "1", "0", "1")
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("the 60 ms default wait gave up after %v", d)
	}

	r := rc.cmd("INFO")
	if r.Kind != '$' || !strings.Contains(string(r.Str), "redis_version:") || !strings.Contains(string(r.Str), "db3:keys=1") {
		t.Fatalf("INFO: %s", showResp(r))
	}
	expectSimple(t, rc.cmd("FOO", "bar"), '-', "ERR unknown command 'FOO', with args beginning with: 'bar' ")
	expectSimple(t, rc.cmd("QUIT"), '+', "OK")
	rc.expectClosed()

	// An inline (non-array) command closes the connection.
	rc2 := dialResp(t, ts.slockAddr)
	expectSimple(t, rc2.cmd("PING"), '+', "PONG")
	rc2.write([]byte("PING\r\n"))
	rc2.expectClosed()
	ts.healthy(t)
}

// TestSlockRedisCLI drives the server with Debian's redis-cli (scripts/ensure-redis-tools.sh
// installs it).
func TestSlockRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed: run scripts/ensure-redis-tools.sh (Debian package redis-tools)")
	}
	ts := startSlock(t, nil)
	host, port, _ := strings.Cut(ts.slockAddr, ":")
	run := func(args ...string) []string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, cli, append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	}
	lines := run("LOCK", "clikey", "EXPRIED", "60")
	if len(lines) != 14 || lines[0] != "0" || lines[1] != "OK" || lines[2] != "LOCK_ID" || len(lines[3]) != 32 ||
		lines[4] != "LCOUNT" || lines[5] != "1" || lines[7] != "1" || lines[9] != "1" || lines[11] != "1" ||
		lines[12] != "TOKEN" || lines[13] == "0" {
		t.Fatalf("redis-cli LOCK printed %q", lines)
	}
	b := dialSlock(t, ts.slockAddr)
	r := newLock(b, key16("clikey"), 0, 0).LockShow().want(slock.ResultUnownError)
	eq(t, "holder", hexID(r.LockID), lines[3])
	lines = run("UNLOCK", "clikey", "LOCK_ID", lines[3])
	if len(lines) != 12 || lines[0] != "0" || lines[5] != "0" {
		t.Fatalf("redis-cli UNLOCK printed %q", lines)
	}
	newLock(b, key16("clikey"), 0, 60).Lock().want(slock.ResultOK)
	info := strings.Join(run("INFO"), "\n")
	for _, want := range []string{"redis_version:", "connected_clients:", "# Keyspace", "db0:keys=1"} {
		if !strings.Contains(info, want) {
			t.Fatalf("redis-cli INFO lacks %q:\n%s", want, info)
		}
	}
	ts.healthy(t)
}
