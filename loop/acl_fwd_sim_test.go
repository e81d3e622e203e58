package loop

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSimACLForwardedRechecked: the leader checks again, with its own ACL, what a follower
// forwards (issue 30, item 2: every check applies wherever a command runs). A follower
// whose ACL file is behind the leader's (it still lets app DEL and PUBLISH anywhere) cannot
// make the leader run a DEL or a PUBLISH the leader's ACL refuses, plain or from a script;
// what both allow still runs.
func TestSimACLForwardedRechecked(t *testing.T) {
	dir := t.TempDir()
	current := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(current, []byte("user default on nopass ~* &* +@all\nuser app on >apppw ~* &app:* +@all -del\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "stale.acl")
	if err := os.WriteFile(stale, []byte("user default on nopass ~* &* +@all\nuser app on >apppw ~* &* +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var behind uint64
	c := newSim(t, 3, 17, func(o *simOptions) {
		o.mod = func(id uint64, cfg *Config) {
			cfg.ACLFile = current
			if id == behind {
				cfg.ACLFile = stale
			}
		}
	})
	l := c.elect()
	behind = c.others(l)[0]
	c.kill(behind)
	if err := c.restart(behind); err != nil {
		t.Fatal(err)
	}
	if c.elect() != l {
		t.Fatalf("the leader changed")
	}
	def := c.client(l)
	if r := def.do("SET", "k", "v"); !r.isOK() {
		t.Fatalf("SET k v: %s", r)
	}
	app := c.client(behind)
	if r := app.do("AUTH", "app", "apppw"); !r.isOK() {
		t.Fatalf("AUTH app on m%d: %s", behind, r)
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"DEL", "k"}, "NOPERM this user has no permissions to run the 'del' command"},
		{[]string{"PUBLISH", "secretchan", "x"}, "NOPERM this user has no permissions to access one of the channels used as arguments"},
		{[]string{"EVAL", "return redis.call('del','k')", "0"}, "ERR The user executing the script can't run this command or subcommand script: "},
		{[]string{"EVAL", "return redis.call('publish','secretchan','x')", "0"}, "ERR The user executing the script can't publish to the channel mentioned in the command script: "},
	} {
		if r := app.do(step.args...); !r.isErr(step.want) {
			t.Fatalf("%q through m%d, whose ACL is behind the leader's: %s; want -%s", step.args, behind, r, step.want)
		}
	}
	if r := app.do("GET", "k"); !r.isBulk("v") {
		t.Fatalf("GET k after the refused DELs: %s", r)
	}
	if r := app.do("PUBLISH", "app:x", "m"); !r.isInt(0) {
		t.Fatalf("PUBLISH app:x through m%d: %s", behind, r)
	}
	if r := app.do("SET", "k2", "v"); !r.isOK() {
		t.Fatalf("SET k2 through m%d: %s", behind, r)
	}
	c.noPanics()
}
