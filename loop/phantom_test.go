package loop

import (
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// TestModifyMissingKeyCreatesNothing: a command that only modifies a key (EXPIRE and its
// variants, PERSIST, DEL, HDEL, SET XX) answers as Redis does for a key that does not
// exist and leaves nothing behind: TTL answers -2, no lock shows in LIST_LOCKED (what
// `tallyctl slock locked` sends) or INFO locks, and a LOCK with TIMEOUT 0 on the key
// succeeds at once (issue 15 item 1: EXPIRE ghost 5 answered 1 and left a lock).
func TestModifyMissingKeyCreatesNothing(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	bc := dialSlock(t, ts.slockAddr)
	// A real lock in db 0, so that the database exists and LIST_LOCKED answers for it.
	runKV(t, rc, []kvStep{kv(`+OK`, "SET", "real", "v")})
	if ll := listLocked(t, bc, 0, key16("real")); len(ll.Locks) != 1 {
		t.Fatalf("LIST_LOCKED real: %d holders, want 1", len(ll.Locks))
	}
	future := "9999999999"
	modifiers := []struct {
		want string
		args []string
	}{
		{`:0`, []string{"EXPIRE", "ghost", "5"}},
		{`:0`, []string{"PEXPIRE", "ghost1", "5000"}},
		{`:0`, []string{"EXPIREAT", "ghost2", future}},
		{`:0`, []string{"PEXPIREAT", "ghost4", future + "000"}},
		{`:0`, []string{"PERSIST", "ghost3"}},
		{`:0`, []string{"DEL", "ghost5"}},
		{`:0`, []string{"UNLINK", "ghost6", "ghost7"}},
		{`:0`, []string{"HDEL", "ghost8", "f"}},
		{`$-1`, []string{"SET", "ghost9", "v", "XX"}},
	}
	for _, m := range modifiers {
		runKV(t, rc, []kvStep{kv(m.want, m.args...)})
		for _, key := range m.args[1:] {
			if m.args[0] != "UNLINK" && key != m.args[1] {
				break // the rest are arguments, not keys
			}
			runKV(t, rc, []kvStep{
				kv(`:-2`, "TTL", key),
				kv(`:-2`, "PTTL", key),
				kv(`:0`, "EXISTS", key),
				kv(`$-1`, "GET", key),
				kv(`+none`, "TYPE", key),
			})
			id := key16(key)
			r := bc.call(slock.MethodListLocked, slock.AppendListRequest(nil, 0, id[:]))
			if r.Result == slock.ResultOK {
				if ll, err := slock.ParseListLockedResponse(r.Body); err != nil || len(ll.Locks) != 0 || ll.LockedCount != 0 {
					t.Fatalf("after %s: LIST_LOCKED %s = %+v (%v), want nobody", strings.Join(m.args, " "), key, ll, err)
				}
			}
			// Another connection takes the key at once: nothing holds it.
			other := dialResp(t, ts.slockAddr)
			r2 := other.cmd("LOCK", key, "TIMEOUT", "0", "EXPRIED", "5")
			if r2.Kind != '*' || len(r2.Elems) < 2 || string(r2.Elems[0].Str) != "0" {
				t.Fatalf("after %s: LOCK %s TIMEOUT 0 = %s, want result 0 (OK)", strings.Join(m.args, " "), key, showResp(r2))
			}
			if r2 = other.cmd("UNLOCK", key); r2.Kind != '*' || string(r2.Elems[0].Str) != "0" {
				t.Fatalf("UNLOCK %s: %s", key, showResp(r2))
			}
		}
	}
	runKV(t, rc, []kvStep{kv(`:1`, "DBSIZE")})
	info := string(rc.cmd("INFO", "locks").Str)
	if !strings.Contains(info, "db0:keys=1,locked=1,") {
		t.Fatalf("INFO locks after the modifiers: %q, want the one real key, locked once", info)
	}
	// A key that exists still gets its expiry; one created after a ghost EXPIRE has none.
	runKV(t, rc, []kvStep{
		kv(`:1`, "EXPIRE", "real", "100"),
		kv(`:1`, "PERSIST", "real"),
		kv(`:-1`, "TTL", "real"),
		kv(`+OK`, "SET", "ghost", "now"),
		kv(`:-1`, "TTL", "ghost"),
	})
	// A lock without a value (LOCK, not SET) is no key for EXISTS, TTL or EXPIRE: 0, -2,
	// 0, and the lock keeps its own expiry.
	locker := dialResp(t, ts.slockAddr)
	if r := locker.cmd("LOCK", "held", "TIMEOUT", "0", "EXPRIED", "100"); r.Kind != '*' || string(r.Elems[0].Str) != "0" {
		t.Fatalf("LOCK held: %s", showResp(r))
	}
	runKV(t, rc, []kvStep{
		kv(`:0`, "EXISTS", "held"),
		kv(`:-2`, "TTL", "held"), // no key, as EXISTS says: not the lock's 100 s
		kv(`:-2`, "PTTL", "held"),
		kv(`:0`, "EXPIRE", "held", "1"),
		kv(`:0`, "PERSIST", "held"),
	})
	time.Sleep(1200 * time.Millisecond)
	if ll := listLocked(t, bc, 0, key16("held")); len(ll.Locks) != 1 {
		t.Fatalf("LIST_LOCKED held after EXPIRE held 1 and 1.2 s: %d holders, want the lock, untouched", len(ll.Locks))
	}
	ts.healthy(t)
}
