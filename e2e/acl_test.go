package e2e

// AUTH and ACLs against the real redis-server (Debian's, 7.0) run with the same ACL file:
// the same commands, from the same users, get the same replies and errors, raw and through
// go-redis, redis-py and redis-cli.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// aclFile is read by both servers: only rules Redis knows too.
const aclFile = `user default on >defpw ~* &* +@all
user admin on >adminpw ~* &* +@all
user ro on >ropw ~* +@read
user app on >apppw ~app:* +@all -@dangerous
user cfg on >cfgpw ~* -@all +config|get +client|setname +acl|whoami
user gone off >offpw ~* +@all
`

// aclServers runs redis-server and tallyd with aclFile and returns their addresses.
func aclServers(t *testing.T) (ref, tal string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(aclFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return rdStartRedis(t, "--aclfile", path), rdStartTallyd(t, "--aclfile", path)
}

// aclRun sends each case to both servers and compares the replies. (No ECHO in between, as
// rdDual.run does: a user without @connection may not ECHO.) ACL LIST's lines are compared
// word by word in any order: Redis 7.0 writes a user's command rules again from its
// permissions, commands in the order of its command table's hash, where tallyd (as Redis 7.2)
// keeps the order they were given in.
func aclRun(d *rdDual, cases ...rdCase) {
	d.t.Helper()
	for _, k := range cases {
		d.ref.send(d.t, k.args)
		d.tal.send(d.t, k.args)
		ref, tal := d.ref.reply(d.t), d.tal.reply(d.t)
		if len(k.args) == 2 && strings.EqualFold(k.args[0], "ACL") && strings.EqualFold(k.args[1], "LIST") {
			ref, tal = aclListWords(ref), aclListWords(tal)
		}
		d.compare(k, ref, tal)
	}
}

// aclListWords sorts the words of each line of an ACL LIST reply, as rdShow renders it.
func aclListWords(s string) string {
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, "*["), "]"), `" $"`)
	for i, l := range lines {
		w := strings.Fields(strings.Trim(l, `$"`))
		sort.Strings(w)
		lines[i] = strings.Join(w, " ")
	}
	return strings.Join(lines, "\n")
}

// TestACLDifferential: logins, NOAUTH, WRONGPASS, NOPERM for commands, subcommands and keys,
// transactions with a refused command, and the ACL commands, as redis-server answers them.
func TestACLDifferential(t *testing.T) {
	t.Parallel()
	refAddr, talAddr := aclServers(t)
	var pairs []*rdDual
	pair := func(t *testing.T, user, pass string) *rdDual {
		d := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
		pairs = append(pairs, d)
		if user != "" {
			aclRun(d, c("AUTH", user, pass))
		}
		return d
	}
	admin := pair(t, "admin", "adminpw")
	aclRun(admin, c("FLUSHALL"), c("SET", "other", "v"), c("SET", "app:1", "v"), c("HSET", "h", "f", "v"))

	t.Run("unauthenticated", func(t *testing.T) {
		aclRun(pair(t, "", ""),
			c("PING"), c("GET", "other"), c("SET", "k", "v"), c("FLUSHALL"), c("MULTI"), c("ACL", "WHOAMI"),
			c("CLIENT", "SETNAME", "x"), c("CONFIG", "GET", "dir"), c("GET"), c("NOSUCH", "x"),
			c("HELLO"), c("HELLO", "2"), c("HELLO", "2", "SETNAME", "x"),
			c("HELLO", "3").differs("-NOPROTO unsupported protocol version"), // tallyd speaks RESP2 only
			c("HELLO", "2", "AUTH", "ro"), c("HELLO", "2", "AUTH", "ro", "bad"), c("HELLO", "4", "AUTH", "ro", "ropw"),
			c("AUTH"), c("AUTH", "a", "b", "c"), c("AUTH", "wrong"), c("AUTH", "default", "wrong"),
			c("AUTH", "nosuch", "x"), c("AUTH", "gone", "offpw"), c("AUTH", "ro", "apppw"), c("GET", "other"),
			c("AUTH", "defpw"), c("ACL", "WHOAMI"), c("GET", "other"),
			c("AUTH", "ro", "ropw"), c("ACL", "WHOAMI"), c("AUTH", "wrong"), c("GET", "other"),
		)
		aclRun(pair(t, "", ""), c("HELLO", "2", "AUTH", "app", "apppw").kind(), c("GET", "app:1"), c("GET", "other"))
	})
	t.Run("read-only", func(t *testing.T) {
		aclRun(pair(t, "ro", "ropw"),
			c("GET", "other"), c("MGET", "other", "app:1", "nokey"), c("EXISTS", "other", "h"), c("HGET", "h", "f"),
			c("HGETALL", "h"), c("TTL", "other"), c("DBSIZE"), c("KEYS", "*").sorted(), c("TYPE", "h"),
			c("SET", "other", "x"), c("INCR", "n"), c("DEL", "other"), c("HSET", "h", "f", "x"), c("EXPIRE", "other", "10"),
			c("FLUSHALL"), c("FLUSHDB"), c("MSET", "a", "1"), c("CONFIG", "GET", "dir"), c("ACL", "WHOAMI"),
			c("ACL", "LIST"), c("PING"), c("ECHO", "x"), c("MULTI"), c("INFO"), c("CLIENT", "SETNAME", "x"),
			c("GET", "other"),
		)
	})
	t.Run("no dangerous", func(t *testing.T) {
		aclRun(pair(t, "app", "apppw"),
			c("FLUSHALL"), c("FLUSHDB"), c("KEYS", "*"), c("CONFIG", "GET", "dir"), c("CONFIG", "SET", "x", "y"),
			c("ACL", "LIST"), c("ACL", "USERS"), c("ACL", "LOAD"), c("INFO"), c("CLIENT", "LIST"),
			c("ACL", "WHOAMI"), c("ACL", "CAT", "nosuchcategory"), c("CONFIG", "NOSUCH"), c("DBSIZE"), c("PING"),
		)
		aclRun(admin, c("DBSIZE"), c("GET", "other")) // nothing was flushed
	})
	t.Run("key patterns", func(t *testing.T) {
		aclRun(pair(t, "app", "apppw"),
			c("GET", "app:1"), c("SET", "app:2", "w"), c("GET", "app:2"), c("INCR", "app:n"), c("APPEND", "app:2", "x"),
			c("GET", "other"), c("SET", "other", "x"), c("HGET", "h", "f"), c("HSET", "h", "g", "x"),
			c("MSET", "app:3", "1", "other", "2"), c("MGET", "app:1", "other"), c("MGET", "app:1", "app:2"),
			c("DEL", "app:1", "other"), c("EXISTS", "other"), c("EXISTS", "app:1"), c("EXPIRE", "other", "5"),
			c("TTL", "other"), c("GET", "app:3"), c("WATCH", "other"), c("WATCH", "app:1"), c("UNWATCH"),
			c("MULTI"), c("SET", "app:4", "v"), c("SET", "other", "x"), c("FLUSHALL"), c("EXEC"), c("GET", "app:4"),
			c("MULTI"), c("SET", "app:4", "v"), c("GET", "app:4"), c("EXEC"),
			c("SCAN", "0", "COUNT", "1000").kind(), c("DBSIZE"),
		)
		aclRun(admin, c("GET", "other"), c("EXISTS", "app:1"), c("EXISTS", "app:3"))
	})
	t.Run("subcommands", func(t *testing.T) {
		aclRun(pair(t, "cfg", "cfgpw"),
			c("CONFIG", "SET", "x", "y"), c("CONFIG", "RESETSTAT"), c("CLIENT", "SETNAME", "x"), c("CLIENT", "GETNAME"),
			c("CLIENT", "ID"), c("ACL", "WHOAMI"), c("ACL", "USERS"), c("GET", "other"), c("CONFIG", "GET"),
		)
	})
	t.Run("ACL commands", func(t *testing.T) {
		aclRun(admin,
			c("ACL", "WHOAMI"), c("ACL", "USERS"), c("ACL", "LIST"), c("ACL", "CAT", "nosuch"),
			c("ACL", "CAT", "a", "b"), c("ACL", "LIST", "x"), c("ACL", "WHOAMI", "x"), c("ACL", "USERS", "x"),
			c("ACL", "LOAD", "x"), c("ACL"), c("ACL", "NOSUCH"), c("acl", "whoami"),
			// Last: after it Redis closes every connection of a user but default, this one too;
			// tallyd only those of users the file changed (docs/security.md).
			c("ACL", "LOAD"),
		)
	})
	n := 0
	for _, d := range pairs {
		n += d.n
	}
	if n < 140 {
		t.Fatalf("only %d cases compared", n)
	}
	t.Logf("%d cases compared", n)
}

// TestACLGoRedis: go-redis logs in as each user (HELLO AUTH, with RESP3 asked for or not;
// AUTH where HELLO is refused) and sees the same results and errors from both servers.
func TestACLGoRedis(t *testing.T) {
	t.Parallel()
	refAddr, talAddr := aclServers(t)
	run := func(addr string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out []string
		say := func(what string, cmds ...redis.Cmder) {
			for _, c := range cmds {
				out = append(out, fmt.Sprintf("%s: %T %s", what, c, c.String()))
			}
		}
		admin := redis.NewClient(&redis.Options{Addr: addr, Username: "admin", Password: "adminpw", Protocol: 2, MaxRetries: -1})
		defer admin.Close()
		say("admin", admin.FlushAll(ctx), admin.Set(ctx, "app:1", "v", 0), admin.Set(ctx, "other", "v", 0))
		for _, u := range []struct {
			user, pass string
			proto      int
		}{
			{"ro", "ropw", 2}, {"ro", "ropw", 3}, {"app", "apppw", 3}, {"app", "apppw", 2}, {"", "defpw", 2},
			{"ro", "bad", 2}, {"ro", "bad", 3}, {"gone", "offpw", 2}, {"", "", 2}, {"", "wrong", 3},
		} {
			rdb := redis.NewClient(&redis.Options{Addr: addr, Username: u.user, Password: u.pass, Protocol: u.proto,
				MaxRetries: -1, PoolSize: 1})
			who := fmt.Sprintf("%s/%d", u.user, u.proto)
			say(who, rdb.Ping(ctx), rdb.Get(ctx, "other"), rdb.Get(ctx, "app:1"), rdb.Set(ctx, "app:2", "x", 0),
				rdb.FlushAll(ctx), rdb.Do(ctx, "ACL", "WHOAMI"), rdb.MSet(ctx, "app:3", "1", "other", "2"))
			cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Incr(ctx, "app:n")
				p.Set(ctx, "other", "tx", 0)
				return nil
			})
			out = append(out, fmt.Sprint(who, " tx err ", err))
			say(who, cmds...)
			_ = rdb.Close()
		}
		say("admin", admin.Get(ctx, "other"), admin.Exists(ctx, "app:1", "app:2", "app:3", "app:n"))
		return out
	}
	ref, tal := run(refAddr), run(talAddr)
	rdCompareResults(t, ref, tal)
	for _, want := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if !strings.Contains(strings.Join(tal, "\n"), want) {
			t.Errorf("no %s among the results:\n%s", want, strings.Join(tal, "\n"))
		}
	}
}

// TestACLRedisPy: redis-py logging in as the users sees the same results and exceptions
// from both servers (testdata/acl_clients.py).
func TestACLRedisPy(t *testing.T) {
	t.Parallel()
	py := needRedisPy(t)
	refAddr, talAddr := aclServers(t)
	run := func(addr string) string {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command(py, "testdata/acl_clients.py", host, port).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-py against %s: %v\n%s", addr, err, out)
		}
		return string(out)
	}
	ref, tal := run(refAddr), run(talAddr)
	if ref != tal {
		t.Fatalf("redis-py differs\nredis-server:\n%s\ntallyd:\n%s", ref, tal)
	}
	for _, want := range []string{"NoPermissionError", "AuthenticationError"} {
		if !strings.Contains(tal, want) {
			t.Errorf("no %s in:\n%s", want, tal)
		}
	}
	t.Logf("redis-py:\n%s", tal)
}

// TestACLRedisCli: redis-cli --user/--pass (or -a) against both servers.
func TestACLRedisCli(t *testing.T) {
	t.Parallel()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed: run scripts/ensure-redis-tools.sh")
	}
	refAddr, talAddr := aclServers(t)
	for _, args := range [][]string{
		{"--user", "ro", "--pass", "ropw", "GET", "other"},
		{"--user", "ro", "--pass", "ropw", "SET", "other", "x"},
		{"--user", "app", "--pass", "apppw", "FLUSHALL"},
		{"--user", "app", "--pass", "apppw", "SET", "app:x", "1"},
		{"--user", "app", "--pass", "apppw", "ACL", "WHOAMI"},
		{"--user", "ro", "--pass", "wrong", "PING"},
		{"-a", "defpw", "ACL", "WHOAMI"},
		{"PING"},
	} {
		var got [2]string
		for i, addr := range []string{refAddr, talAddr} {
			host, port, _ := strings.Cut(addr, ":")
			out, _ := exec.Command(cli, append([]string{"-h", host, "-p", port, "--no-auth-warning"}, args...)...).CombinedOutput()
			got[i] = string(out)
		}
		if got[0] != got[1] {
			t.Errorf("redis-cli %q:\n  redis-server %q\n  tallyd       %q", args, got[0], got[1])
		}
	}
}

// TestACLSIGHUP: SIGHUP reads the ACL file again, with no config file too: a connection of a
// user whose password changed is closed, the new password works. With a config file, a
// changed requirepass applies at once and the log says it changed without saying it.
func TestACLSIGHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "users.acl")
	write := func(name, text string) {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(path, aclFile)
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port), "--aclfile", path)
	p.waitLog(t, "tallyd listening")
	app, ro := dialR(t, addr), dialR(t, addr)
	app.must(t, "+OK", "AUTH", "app", "apppw")
	ro.must(t, "+OK", "AUTH", "ro", "ropw")
	write(path, strings.Replace(aclFile, ">apppw", ">newapppw", 1))
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, "SIGHUP: ACL file reloaded")
	// Closed at once, or soon on a loaded machine (the reload waits 5 s at most for the loop
	// before it logs): never answering for good.
	var got string
	if !waitUntil(time.Now().Add(15*time.Second), 50*time.Millisecond, func() bool {
		var err error
		got, err = app.do("PING")
		return err != nil
	}) {
		t.Fatalf("the changed user's connection still runs: %q", got)
	}
	ro.must(t, "$-1", "GET", "other") // an unchanged user goes on
	nc := dialR(t, addr)
	nc.must(t, "-WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "app", "apppw")
	nc.must(t, "+OK", "AUTH", "app", "newapppw")

	// requirepass in a config file, changed and reloaded: live, and never logged.
	conf := filepath.Join(dir, "tallyd.conf")
	write(conf, "requirepass = first-Secret-1\n")
	port2 := freePort(t)
	addr2 := "127.0.0.1:" + strconv.Itoa(port2)
	p2 := start(t, 0, "--counter-port=0", "--slock-port="+strconv.Itoa(port2), "--config", conf)
	p2.waitLog(t, "tallyd listening")
	dialR(t, addr2).must(t, "+OK", "AUTH", "first-Secret-1")
	write(conf, "requirepass = second-Secret-2\n")
	if err := p2.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p2.waitLog(t, "requirepass (--requirepass): changed")
	c2 := dialR(t, addr2)
	c2.must(t, "-WRONGPASS invalid username-password pair or user is disabled.", "AUTH", "first-Secret-1")
	c2.must(t, "+OK", "AUTH", "second-Secret-2")
	if l := p2.log.String(); strings.Contains(l, "Secret") {
		t.Fatalf("the log shows a password:\n%s", l)
	}
}
