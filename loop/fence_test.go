package loop

import (
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/store"
)

// Fencing tokens over the wire (issue 19): a grant's reply carries its token, TOKEN reads
// it, later grants carry larger ones, and a fenced write presenting an older token than its
// key has seen is refused — Kleppmann's scenario, with the lease running out.
func TestFencingTokens(t *testing.T) {
	began := time.Now()
	dir := t.TempDir()
	ts, stop := startPersist(t, dir, nil)
	c1, c2 := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	t1 := parseTextLock(t, c1.cmd("LOCK", "job", "TIMEOUT", "0", "EXPRIED", u32s(0x0400, 300), "LOCK_ID", "client1")).Token
	if t1 == 0 {
		t.Fatal("the grant carries no token")
	}
	// Issue 30: the counter starts at the time floor of the server's start (the test
	// started before it), so that no backup restored later can take it back.
	if floor := store.TimeFloor(began.UnixMilli()); t1 <= floor || t1 > store.TimeFloor(time.Now().UnixMilli())+store.TokensPerMs {
		t.Fatalf("the first token %d is not between the time floors of the test's start (%d) and of now", t1, floor)
	}
	runKV(t, c2, []kvStep{
		kv(":"+strconv.FormatUint(t1, 10), "TOKEN", "job"),
		kv(":"+strconv.FormatUint(t1, 10), "TOKEN", "job", "LOCK_ID", "client1"),
		kv(`$-1`, "TOKEN", "job", "LOCK_ID", "client2"),
		kv(`$-1`, "TOKEN", "nothing"),
		kv(`-ERR syntax error`, "TOKEN", "job", "LOCK_ID"),
	})
	// Client 1 pauses past its lease (300 ms); client 2 gets the lock and writes with it.
	time.Sleep(400 * time.Millisecond)
	t2 := parseTextLock(t, c2.cmd("LOCK", "job", "TIMEOUT", "0", "EXPRIED", "30", "LOCK_ID", "client2")).Token
	if t2 <= t1 {
		t.Fatalf("second grant's token %d is not above the first's %d", t2, t1)
	}
	s1, s2 := strconv.FormatUint(t1, 10), strconv.FormatUint(t2, 10)
	runKV(t, c2, []kvStep{
		kv(`+OK`, "SET", "res", "from-2", "FENCE", s2),
		// A script passes a token through a Lua number (a double): exact, as tokens stay
		// below 2^53 (issue 30: the time floor keeps them there until 2058).
		kv(`+OK`, "EVAL", "return redis.call('SET', KEYS[1], 'x', 'FENCE', redis.call('TOKEN', KEYS[2]))", "2", "res2", "job"),
		kv(":"+s2, "GETFENCE", "res2"),
	})
	// Client 1 wakes and writes with its old token: refused.
	runKV(t, c1, []kvStep{
		kv(`-FENCED token `+s1+` is older than `+s2+`, already seen by this key`, "SET", "res", "from-1", "FENCE", s1),
		kv(`"from-2"`, "GET", "res"),
		kv(":"+s2, "GETFENCE", "res"),
		kv(`:0`, "GETFENCE", "other"),
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "0"),
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "-3"),
		// Issue 30: tokens are 64-bit signed integers (every reply gives them so); one past
		// the range was stored as 9223372036854775807, or wrapped.
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "18446744073709551615"),
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "9223372036854775808"),
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "99999999999999999999999"),
		kv(`-ERR FENCE token must be an integer from 1 to 9223372036854775807`, "SET", "res", "x", "FENCE", "1x"),
		kv(":"+s2, "GETFENCE", "res"), // none of them raised it
		kv(`+OK`, "SET", "top", "x", "FENCE", "9223372036854775807"),
		kv(`:9223372036854775807`, "GETFENCE", "top"),
		kv(`-FENCED token 9223372036854775806 is older than 9223372036854775807, already seen by this key`, "SET", "top", "y", "FENCE", "9223372036854775806"),
		kv(`+OK`, "SET", "res", "again", "FENCE", s2), // the same token again is the same holder
		kv(`+OK`, "SET", "res", "unfenced"),           // unfenced writes are not checked
	})
	stop()
	// A restart keeps the key's fence, and new grants get tokens above every one issued.
	ts, stop = startPersist(t, dir, nil)
	defer stop()
	c := dialResp(t, ts.slockAddr)
	runKV(t, c, []kvStep{kv(":"+s2, "GETFENCE", "res")})
	if t3 := parseTextLock(t, c.cmd("LOCK", "other", "TIMEOUT", "0", "EXPRIED", "30")).Token; t3 <= t2 {
		t.Fatalf("after a restart the token %d is not above %d", t3, t2)
	}
}
