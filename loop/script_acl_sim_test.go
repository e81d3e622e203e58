package loop

import (
	"os"
	"path/filepath"
	"testing"
)

// delScript deletes KEYS[1] from inside a script.
const delScript = "return redis.call('del', KEYS[1])"

// A script forwarded by a follower runs its commands under the caller's ACL on the leader,
// exactly as a script sent to the leader does: a user allowed EVAL but not DEL cannot
// delete a key through a script on any member (the Forward frame names the user).
func TestSimScriptACLForwarded(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "users.acl")
	users := "user default on nopass ~* +@all\nuser app on >apppw ~* +@all -del\n"
	if err := os.WriteFile(shared, []byte(users), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first follower also has a user the others do not (its file is ahead of theirs).
	own := filepath.Join(dir, "ahead.acl")
	if err := os.WriteFile(own, []byte(users+"user ghost on >ghostpw ~* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ahead uint64
	c := newSim(t, 3, 11, func(o *simOptions) {
		o.mod = func(id uint64, cfg *Config) {
			cfg.ACLFile = shared
			if id == ahead {
				cfg.ACLFile = own
			}
		}
	})
	l := c.elect()
	f := c.others(l)
	ahead = f[1]
	c.kill(ahead)
	if err := c.restart(ahead); err != nil {
		t.Fatal(err)
	}
	if c.elect() != l {
		t.Fatalf("the leader changed")
	}

	login := func(id uint64, user, pw string) *simClient {
		a := c.client(id)
		if r := a.do("AUTH", user, pw); !r.isOK() {
			t.Fatalf("AUTH %s on m%d: %s", user, id, r)
		}
		return a
	}
	on := login(l, "app", "apppw")
	if r := on.do("SET", "k", "v"); !r.isOK() {
		t.Fatalf("SET k v: %s", r)
	}
	want := on.do("EVAL", delScript, "1", "k")
	if !want.isErr("ERR The user executing the script can't run this command or subcommand script: ") {
		t.Fatalf("EVAL of a DEL on the leader, as a user without DEL: %s", want)
	}
	via := login(f[0], "app", "apppw")
	if r := via.do("EVAL", delScript, "1", "k"); string(r.raw) != string(want.raw) {
		t.Fatalf("EVAL of a DEL through follower m%d: %s; want %s, as on the leader", f[0], r, want)
	}
	if r := via.do("GET", "k"); !r.isBulk("v") {
		t.Fatalf("GET k after the refused scripts: %s", r)
	}
	// The script's other commands are still the user's to run, and the default user's DEL too.
	if r := via.do("EVAL", "return redis.call('get', KEYS[1])", "1", "k"); !r.isBulk("v") {
		t.Fatalf("EVAL of a GET through the follower: %s", r)
	}
	if r := c.client(f[0]).do("EVAL", delScript, "1", "k"); !r.isInt(1) {
		t.Fatalf("EVAL of a DEL through the follower as the default user: %s", r)
	}

	// A user the leader does not have: nothing it forwards runs there.
	if r := on.do("SET", "g", "v"); !r.isOK() {
		t.Fatalf("SET g v: %s", r)
	}
	g := login(ahead, "ghost", "ghostpw")
	if r := g.do("EVAL", delScript, "1", "g"); !r.isErr("NOPERM this user has no permissions to run the 'eval' command") {
		t.Fatalf("EVAL through m%d as a user the leader does not have: %s", ahead, r)
	}
	if r := g.do("DEL", "g"); !r.isErr("NOPERM this user has no permissions to run the 'del' command") {
		t.Fatalf("DEL through m%d as a user the leader does not have: %s", ahead, r)
	}
	if r := on.do("GET", "g"); !r.isBulk("v") {
		t.Fatalf("GET g after the refused commands: %s", r)
	}
	c.noPanics()
}
