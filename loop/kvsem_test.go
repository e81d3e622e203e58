package loop

import (
	"crypto/md5"
	"encoding/hex"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// TestSlockKVDelRespectsLocks is issue 12's item 9, first half: while A holds the slock
// lock job, B's DEL job must not break it (it answers 0, as B's SET answers nil), and B
// cannot lock it then; A's own DEL of its SETNX key (with CLIENT SLOCK ON, slock's mutex)
// still works, and a plain SET key is anyone's to delete.
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
	// SETNX by A with CLIENT SLOCK ON (slock's mutex): A's DEL releases it, B's does not.
	runKV(t, a, []kvStep{kv(`+OK`, "CLIENT", "SLOCK", "ON"), kv(`:1`, "SETNX", "mutex", "a")})
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

// TestSlockKVDistinctKeys is item 8: each pair of names below once read and wrote one
// value; every distinct name is now its own key, before and after a restart (the
// key-name secret stays with the log). A binary client still meets a short text name at
// its padded LockKey, and a value that carries another name is never taken for the key's.
func TestSlockKVDistinctKeys(t *testing.T) {
	lowerHex := "550e8400e29b41d4a716446655440000"
	raw, _ := hex.DecodeString(lowerHex)
	pairs := [][2]string{
		{lowerHex, "550E8400E29B41D4A716446655440000"},
		{lowerHex, string(raw)},
		{"abc", "\x00abc"},
		{"0123456789abcdef", "\x000123456789abcdef"}, // 16 bytes, and one more
		{"", "\x00"},
	}
	dir := t.TempDir()
	ts, stop := startPersist(t, dir, nil)
	rc := dialResp(t, ts.slockAddr)
	final := map[string]string{}
	for i, p := range pairs {
		a, b := "a"+strconv.Itoa(i), "b"+strconv.Itoa(i)
		runKV(t, rc, []kvStep{kv(`+OK`, "SET", p[0], a), kv(`+OK`, "SET", p[1], b), kv(`"`+a+`"`, "GET", p[0]), kv(`"`+b+`"`, "GET", p[1])})
		final[p[0]], final[p[1]] = a, b
	}
	runKV(t, rc, []kvStep{kv(`:9`, "DBSIZE"), kv(`:1`, "DEL", "abc"), kv(`"b2"`, "GET", "\x00abc"), kv(`+OK`, "SET", "abc", "a2")})
	// A binary client reaches a short name at its padded LockKey (as TextID pads it) ...
	bc := dialSlock(t, ts.slockAddr)
	newLock(bc, key16("abc"), 0, 0).LockShow().want(slock.ResultUnownError)
	// ... and a LOCK by text and SET on the same name still meet.
	runKV(t, rc, []kvStep{kv(`:1`, "HSET", "h:"+lowerHex, "f", "1")})
	expectText(t, parseTextLock(t, rc.cmd("LOCK", "job", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	runKV(t, rc, []kvStep{kv(`$-1`, "SET", "job", "x")})
	stop()

	ts, stop = startPersist(t, dir, nil)
	defer stop()
	rc = dialResp(t, ts.slockAddr)
	for k, v := range final {
		runKV(t, rc, []kvStep{kv(`"`+v+`"`, "GET", k)})
	}
	runKV(t, rc, []kvStep{kv(`:10`, "DBSIZE"), kv(`"1"`, "HGET", "h:"+lowerHex, "f"), kv(`$-1`, "HGET", "h:"+strings.ToUpper(lowerHex), "f")})
	ts.healthy(t)
}

// TestSlockKVNameClash: a value at a hashed name's LockKey that carries another name (a
// 128-bit hash collision, made here on the loop: no client can aim one) is not that name's:
// text commands on the name refuse rather than read or overwrite it. At a short name's
// LockKey, which is no other name's, a binary client's value is the name's.
func TestSlockKVNameClash(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{kv(`+PONG`, "PING")})
	long := "a name long enough to be hashed"
	rec := slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, []slock.Property{{Code: slock.PropKey, Value: []byte("other")}}, []byte("theirs"))
	ts.onLoop(t, func() {
		id := ts.st.keys.KeyID([]byte(long))
		c := store.LockCommand{Kind: store.KindLock, LockID: id, Key: id, Data: rec}
		lockwire.Set(&c, lockwire.Words{Flag: 0x02 | slock.FlagData, Expried: 0x7FFF, ExpriedFlag: 0x4000})
		ts.st.locks.Do(0, &c, time.Now().UnixNano(), nil, nil)
	})
	want := `-ERR key "` + long + `" maps to the LockKey of key "other", which holds a value: refused`
	for _, c := range [][]string{{"GET", long}, {"SET", long, "mine"}, {"DEL", long}, {"MGET", "x", long}, {"MSET", long, "1"}, {"HGET", long, "f"}, {"HSET", long, "f", "1"}, {"TTL", long}, {"EXPIRE", long, "10"}} {
		runKV(t, rc, []kvStep{kv(want, c...)})
	}
	runKV(t, rc, []kvStep{kv(`:1`, "DBSIZE")})
	// A binary client's value at a short name's LockKey is the name's.
	bc := dialSlock(t, ts.slockAddr)
	newLock(bc, key16("job"), 0, 60).send(slock.TypeLock, slock.FlagData, rec).want(slock.ResultOK)
	l2 := newLock(bc, key16("job2"), 0, 60)
	l2.send(slock.TypeLock, slock.FlagData, slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0, nil, []byte("v"))).want(slock.ResultOK)
	runKV(t, rc, []kvStep{kv(`"theirs"`, "GET", "job"), kv(`"v"`, "GET", "job2")})
	ts.healthy(t)
}

// TestSlockKVOldLogRekeyed: a log written when long names were MD5-hashed to their LockKey
// comes back under the names' keys now: values readable and writable by name, a key
// deleted in the log stays deleted.
func TestSlockKVOldLogRekeyed(t *testing.T) {
	dir := t.TempDir()
	start := time.Now().UnixNano()
	state := func(name string, value string, held bool) *store.KeyState {
		id := md5.Sum([]byte(name))
		ks := &store.KeyState{Key: id}
		if held {
			ks.Value = slock.AppendDataRecord(nil, slock.DataSet, slock.StageCurrent, 0,
				[]slock.Property{{Code: slock.PropKey, Value: []byte(name)}}, []byte(value))
			ks.Holders = []store.HolderState{{LockID: id, Levels: 1, Start: start}}
			lockwire.SetHolder(&ks.Holders[0], lockwire.Words{Expried: 0x7FFF, ExpriedFlag: 0x4000 | 0x0100 | 0x2000})
		}
		return ks
	}
	kept, gone := "a key name longer than sixteen bytes", "another long key name, deleted"
	b := []byte(aof.Header)
	b = aof.AppendState(b, state(kept, "old", true))
	b = aof.AppendState(b, state(gone, "x", true))
	b = aof.AppendState(b, state(kept, "kept", true))
	b = aof.AppendState(b, state(gone, "", false))
	// A binary client's value at its own LockKey, naming a key that does not map there,
	// stays where it is.
	foreign := state("a long name that is not this key's", "bin", true)
	foreign.Key = key16("bin")
	foreign.Holders[0].LockID = foreign.Key
	b = aof.AppendState(b, foreign)
	if err := os.WriteFile(filepath.Join(dir, logName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	ts, stop := startPersist(t, dir, nil)
	defer stop()
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`"kept"`, "GET", kept), kv(`$-1`, "GET", gone), kv(`:2`, "DBSIZE"),
		kv(`+OK`, "SET", kept, "new"), kv(`"new"`, "GET", kept), kv(`:2`, "DBSIZE"),
		kv(`$-1`, "GET", "a long name that is not this key's"),
		kv(`"bin"`, "GET", "bin"), // still at its LockKey: a short name's, whatever name it carries
	})
	if _, err := os.Stat(filepath.Join(dir, keySecretName)); err != nil {
		t.Fatalf("key-name secret: %v", err)
	}
	ts.healthy(t)
}
