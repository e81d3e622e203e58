package loop

import (
	"encoding/hex"
	"math/bits"
	"testing"
)

// TestSlockKVDelRespectsLocks is issue 12's item 9, first half: while A holds the slock
// lock job, B's DEL job must not break it (it answers 0, as B's SET answers nil), and B
// cannot lock it then; A's own DEL of its SETNX key still works, and a plain SET key is
// anyone's to delete.
func TestSlockKVDelRespectsLocks(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	la := parseTextLock(t, a.cmd("LOCK", "job", "EXPRIED", "60"))
	expectText(t, la, "0", "1", "1", "1", "1")
	runKV(t, b, []kvStep{
		kv(`$-1`, "SET", "job", "x"),
		kv(`:0`, "DEL", "job"),
		kv(`:0`, "DEL", "job", "other"),
		kv(`+OK`, "TIMEOUT", "SET", "0"),
	})
	expectText(t, parseTextLock(t, b.cmd("LOCK", "job", "EXPRIED", "60")), "8", "1", "1", "0", "1") // TIMEOUT: A still holds it
	// A's lock is intact: A unlocks it.
	expectText(t, parseTextLock(t, a.cmd("UNLOCK", "job", "LOCK_ID", la.LockID)), "0", "0", "1", "0", "1")
	// SETNX by A: A's DEL releases it, B's does not.
	runKV(t, a, []kvStep{kv(`:1`, "SETNX", "mutex", "a")})
	runKV(t, b, []kvStep{kv(`:0`, "DEL", "mutex"), kv(`"a"`, "GET", "mutex")})
	runKV(t, a, []kvStep{kv(`:1`, "DEL", "mutex"), kv(`$-1`, "GET", "mutex")})
	// A plain key is anyone's.
	runKV(t, a, []kvStep{kv(`+OK`, "SET", "plain", "v")})
	runKV(t, b, []kvStep{kv(`:1`, "DEL", "plain", "nokey")})
	ts.healthy(t)
}

// TestSlockTextIDsUnguessable is item 9, second half: server-generated LockIds must not
// be computable from another one. Consecutive LockIds (one connection's, and two
// connections' interleaved) must share no 8-byte half and differ in about half their bits.
func TestSlockTextIDsUnguessable(t *testing.T) {
	ts := startSlock(t, nil)
	a, b := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	var ids [][]byte
	for i := range 32 {
		c := a
		if i%3 == 2 {
			c = b
		}
		tl := parseTextLock(t, c.cmd("LOCK", "k"+string(rune('a'+i)), "EXPRIED", "60"))
		id, err := hex.DecodeString(tl.LockID)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	halves := map[string]int{}
	for i, id := range ids {
		for _, h := range []string{string(id[:8]), string(id[8:])} {
			if j, ok := halves[h]; ok {
				t.Fatalf("LockIds %d and %d share an 8-byte half: %x, %x", j, i, ids[j], id)
			}
			halves[h] = i
		}
		if i == 0 {
			continue
		}
		d := 0
		for k := range id {
			d += bits.OnesCount8(id[k] ^ ids[i-1][k])
		}
		if d < 32 || d > 96 {
			t.Fatalf("LockIds %d and %d differ in %d of 128 bits: %x, %x", i-1, i, d, ids[i-1], id)
		}
	}
}

// TestSlockKVExpiryExact is item 7: EXPIRE past what milliseconds or now + ms can hold is
// refused with Redis's error and changes nothing; long expiries are kept exactly (not
// capped at the 16-bit Expried's 65,534 minutes), also across a restart from the log.
func TestSlockKVExpiryExact(t *testing.T) {
	dir := t.TempDir()
	ts, stop := startPersist(t, dir, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`+OK`, "SET", "k", "v"),
		kv(`-ERR invalid expire time in 'expire' command`, "EXPIRE", "k", "9223372036854775807"),
		kv(`-ERR invalid expire time in 'pexpire' command`, "PEXPIRE", "k", "9223372036854775807"),
		kv(`-ERR invalid expire time in 'expireat' command`, "EXPIREAT", "k", "9223372036854775807"),
		kv(`"v"`, "GET", "k"),
		kv(`:-1`, "TTL", "k"),
		kv(`:1`, "EXPIRE", "k", "10000000"),
		kv(`:10000000`, "TTL", "k"),
		kv(`+OK`, "SETEX", "s", "99999999999999", "v"),
		kv(`:99999999999999`, "TTL", "s"),
		kv(`-ERR invalid expire time in 'setex' command`, "SETEX", "s", "9999999999999999", "v"),
		kv(`:0`, "PEXPIRE", "far", "1"), // no such key
		kv(`+OK`, "SET", "far", "v", "PX", "9223370000000000000"),
	})
	stop()
	ts, stop = startPersist(t, dir, nil)
	defer stop()
	rc = dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{kv(`"v"`, "GET", "far"), kv(`"v"`, "GET", "k")})
	for _, c := range []struct {
		key  string
		pttl int64
	}{{"k", 10000000000}, {"s", 99999999999999000}, {"far", 9223370000000000000}} {
		if r := rc.cmd("PTTL", c.key); r.Kind != ':' || r.Int < c.pttl-60000 || r.Int > c.pttl {
			t.Fatalf("PTTL %s after restart: %s, want %d less the time since", c.key, showResp(r), c.pttl)
		}
	}
	ts.healthy(t)
}
