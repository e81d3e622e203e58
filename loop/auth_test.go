package loop

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// The texts of Redis 7.0.15 (recorded from redis-server).
const (
	wantNoAuth    = "-NOAUTH Authentication required."
	wantWrongPass = "-WRONGPASS invalid username-password pair or user is disabled."
	wantNoPermKey = "-NOPERM this user has no permissions to access one of the keys used as arguments"
)

func noPerm(cmd string) string {
	return "-NOPERM this user has no permissions to run the '" + cmd + "' command"
}

// TestAuthRequirePass: with --requirepass a connection may only AUTH, HELLO AUTH or QUIT
// until it has logged in, with Redis's errors; unknown commands and wrong arities are
// answered first, as Redis does.
func TestAuthRequirePass(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.RequirePass = "s3cret-pw" })
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(wantNoAuth, "PING"),
		kv(wantNoAuth, "SET", "k", "v"),
		kv(wantNoAuth, "FLUSHALL"),
		kv(wantNoAuth, "MULTI"),
		kv(wantNoAuth, "ACL", "WHOAMI"),
		kv(wantNoAuth, "CONFIG", "GET", "dir"),
		kv(`-ERR wrong number of arguments for 'get' command`, "GET"),
		kv(`-ERR unknown command 'NOSUCH', with args beginning with: `, "NOSUCH"),
		kv("-"+helloNoAuthText, "HELLO"),
		kv("-"+helloNoAuthText, "HELLO", "2"),
		kv(wantWrongPass, "HELLO", "2", "AUTH", "default", "nope"),
		kv(wantWrongPass, "AUTH", "nope"),
		kv(wantWrongPass, "AUTH", "default", "nope"),
		kv(wantWrongPass, "AUTH", "nosuchuser", "s3cret-pw"),
		kv(`-ERR syntax error`, "AUTH", "a", "b", "c"),
		kv(`-ERR wrong number of arguments for 'auth' command`, "AUTH"),
		kv(wantNoAuth, "GET", "k"),
		kv(`+OK`, "AUTH", "s3cret-pw"),
		kv(`+PONG`, "PING"),
		kv(`+OK`, "SET", "k", "v"),
		kv(`"default"`, "ACL", "WHOAMI"),
		kv(wantWrongPass, "AUTH", "wrong"), // a failed AUTH keeps the login it had
		kv(`"v"`, "GET", "k"),
	})
	// HELLO 2 AUTH logs in and answers HELLO.
	hc := dialResp(t, ts.slockAddr)
	r := hc.cmd("HELLO", "2", "AUTH", "default", "s3cret-pw")
	if r.Kind != '*' || len(r.Elems) != 14 || string(r.Elems[1].Str) != "redis" {
		t.Fatalf("HELLO 2 AUTH: %s", showResp(r))
	}
	runKV(t, hc, []kvStep{kv(`"v"`, "GET", "k")})
	// QUIT works unauthenticated.
	qc := dialResp(t, ts.slockAddr)
	runKV(t, qc, []kvStep{kv(`+OK`, "QUIT")})
	qc.expectClosed()
	// Binary frames from loopback are served (no allow-list: loopback counts).
	dialSlock(t, ts.slockAddr).ping()
	// A binary connection that turns to Redis text (ADMIN) must log in too.
	ac := dialResp(t, ts.slockAddr)
	ac.write(slock.AppendRequest(nil, slock.TypeAdmin, [16]byte{7}))
	var frame [64]byte
	_ = ac.c.SetReadDeadline(time.Now().Add(replyWait))
	if _, err := io.ReadFull(ac.c, frame[:]); err != nil || slock.Type(frame[2]) != slock.TypeAdmin {
		t.Fatalf("ADMIN: %v %x", err, frame)
	}
	runKV(t, ac, []kvStep{kv(wantNoAuth, "GET", "k"), kv(`+OK`, "AUTH", "s3cret-pw"), kv(`"v"`, "GET", "k")})
	ts.healthy(t)
}

// TestAuthWithoutPassword: with no password AUTH says so, as Redis; everyone is default.
func TestAuthWithoutPassword(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv("-"+authNoPassText, "AUTH", "x"),
		kv(`+OK`, "AUTH", "default", "any"), // nopass: any password, as Redis
		kv(wantWrongPass, "AUTH", "nosuch", "any"),
		kv(`"default"`, "ACL", "WHOAMI"),
		kv(`["user default on nopass ~* &* +@all"]`, "ACL", "LIST"),
		kv("-"+noACLFileText, "ACL", "LOAD"),
		kv(`+PONG`, "PING"),
	})
}

// aclServer runs a slock listener with the users of text (an ACL file in a temp dir) and
// returns it with the file's path.
func aclServer(t *testing.T, text string, mod func(*Config)) (*testServer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return startSlock(t, func(c *Config) {
		c.ACLFile = path
		if mod != nil {
			mod(c)
		}
	}), path
}

const testUsers = `user default off
user admin on >adminpw ~* +@all
user ro on >ropw ~* +@read
user app on >apppw ~app:* ~lock:* +@all -@dangerous
user cfg on >cfgpw ~* -@all +config|get +auth
user gone off >offpw ~* +@all
`

func login(t *testing.T, ts *testServer, user, pass string) *respClient {
	t.Helper()
	rc := dialResp(t, ts.slockAddr)
	if got := showResp(rc.cmd("AUTH", user, pass)); got != "+OK" {
		t.Fatalf("AUTH %s: %s", user, got)
	}
	return rc
}

// TestACLPermissions: users of an ACL file get Redis's NOPERM for commands outside their
// categories and keys outside their patterns; nothing a refused command would have done
// happens.
func TestACLPermissions(t *testing.T) {
	ts, _ := aclServer(t, testUsers, nil)
	admin := login(t, ts, "admin", "adminpw")
	runKV(t, admin, []kvStep{
		kv(`+OK`, "SET", "other", "v"), kv(`+OK`, "SET", "app:1", "v"), kv(`:1`, "HSET", "h", "f", "v"),
		kv(`:3`, "DBSIZE"),
	})
	t.Run("read-only", func(t *testing.T) {
		ro := login(t, ts, "ro", "ropw")
		runKV(t, ro, []kvStep{
			kv(`"v"`, "GET", "other"), kv(`"v"`, "HGET", "h", "f"), kv(`:3`, "DBSIZE"),
			kv(`:2`, "EXISTS", "other", "h"),
			kv(noPerm("set"), "SET", "other", "x"),
			kv(noPerm("incr"), "INCR", "n"),
			kv(noPerm("hset"), "HSET", "h", "f", "x"),
			kv(noPerm("del"), "DEL", "other"),
			kv(noPerm("flushall"), "FLUSHALL"),
			kv(noPerm("lock"), "LOCK", "l", "TIMEOUT", "0"),
			kv(noPerm("config|get"), "CONFIG", "GET", "dir"),
			kv(`"v"`, "GET", "other"),
		})
	})
	t.Run("no @dangerous", func(t *testing.T) {
		app := login(t, ts, "app", "apppw")
		runKV(t, app, []kvStep{
			kv(noPerm("flushall"), "FLUSHALL"),
			kv(noPerm("flushdb"), "FLUSHDB"),
			kv(noPerm("keys"), "KEYS", "*"),
			kv(noPerm("config|get"), "CONFIG", "GET", "dir"),
			kv(noPerm("acl|list"), "ACL", "LIST"),
			kv(noPerm("acl|load"), "ACL", "LOAD"),
			kv(noPerm("info"), "INFO"),
			kv(`"app"`, "ACL", "WHOAMI"),
			kv(`-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.`, "CONFIG", "NOSUCH"), // errors first, as Redis
		})
		runKV(t, admin, []kvStep{kv(`:3`, "DBSIZE"), kv(`"v"`, "GET", "other")}) // nothing was flushed
	})
	t.Run("key patterns", func(t *testing.T) {
		app := login(t, ts, "app", "apppw")
		runKV(t, app, []kvStep{
			kv(`"v"`, "GET", "app:1"),
			kv(`+OK`, "SET", "app:2", "w"),
			kv(wantNoPermKey, "GET", "other"),
			kv(wantNoPermKey, "SET", "other", "x"),
			kv(wantNoPermKey, "HGET", "h", "f"),
			kv(wantNoPermKey, "MSET", "app:3", "1", "other", "2"),
			kv(wantNoPermKey, "DEL", "app:1", "other"),
			kv(wantNoPermKey, "EXISTS", "other"),
			kv(wantNoPermKey, "LOCK", "other", "TIMEOUT", "0"),
			kv(wantNoPermKey, "LOCK", "lock:1", "TIMEOUT", "0", "EXECUTE", "0", "LOCK", "other"),
			kv(wantNoPermKey, "WATCH", "other"),
			kv(`:1`, "EXISTS", "app:1"),
		})
		if tl := parseTextLock(t, app.cmd("LOCK", "lock:1", "TIMEOUT", "0")); tl.Code != "0" {
			t.Fatalf("LOCK lock:1: %+v", tl)
		}
		runKV(t, admin, []kvStep{kv(`$-1`, "GET", "app:3"), kv(`"v"`, "GET", "other"), kv(`:1`, "EXISTS", "app:1")})
	})
	t.Run("transaction", func(t *testing.T) {
		app := login(t, ts, "app", "apppw")
		expectReplies(t, "MULTI with a refused command", pipeline(app,
			c("MULTI"), c("SET", "app:4", "v"), c("SET", "other", "x"), c("FLUSHALL"), c("EXEC"), c("GET", "app:4")),
			`+OK`, `+QUEUED`, wantNoPermKey, noPerm("flushall"), `-EXECABORT Transaction discarded because of previous errors.`, `$-1`)
	})
	t.Run("subcommands", func(t *testing.T) {
		cfg := login(t, ts, "cfg", "cfgpw")
		runKV(t, cfg, []kvStep{
			kv(`["dir" ""]`, "CONFIG", "GET", "dir"), // not an administrator: no data path
			kv(`[]`, "CONFIG", "GET", "requirepass"),
			kv(noPerm("config|set"), "CONFIG", "SET", "x", "y"),
			kv(noPerm("get"), "GET", "other"),
			kv(noPerm("acl|whoami"), "ACL", "WHOAMI"),
		})
		runKV(t, admin, []kvStep{kv(`["dir" ""]`, "CONFIG", "GET", "dir")}) // no --data-dir in this test
	})
	t.Run("logins", func(t *testing.T) {
		rc := dialResp(t, ts.slockAddr)
		runKV(t, rc, []kvStep{
			kv(wantNoAuth, "PING"), // default is off: everyone logs in
			kv(wantWrongPass, "AUTH", "gone", "offpw"),
			kv(wantWrongPass, "AUTH", "ro", "apppw"),
			kv(`+OK`, "AUTH", "ro", "ropw"),
			kv(noPerm("acl|whoami"), "ACL", "WHOAMI"), // @slow, not @read
			kv(noPerm("ping"), "PING"),                // @connection
			kv(`+OK`, "AUTH", "app", "apppw"),
			kv(`"app"`, "ACL", "WHOAMI"),
		})
	})
	t.Run("ACL commands", func(t *testing.T) {
		runKV(t, admin, []kvStep{
			kv(`["admin" "app" "cfg" "default" "gone" "ro"]`, "ACL", "USERS"),
			kv(`"admin"`, "ACL", "WHOAMI"),
			kv(`-ERR Unknown category 'nosuch'`, "ACL", "CAT", "nosuch"),
			kv(`-ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.`, "ACL", "CAT", "a", "b"),
			kv(`-ERR wrong number of arguments for 'acl|list' command`, "ACL", "LIST", "x"),
			kv(`-ERR unknown subcommand 'SETUSER'. Try ACL HELP.`, "ACL", "SETUSER", "x"),
			kv(`["lock" "unlock" "push" "token" "getfence"]`, "ACL", "CAT", "lock"),
			kv(`["consistency" "cluster"]`, "ACL", "CAT", "CLUSTER"),
		})
		list := admin.cmd("ACL", "LIST")
		if len(list.Elems) != 6 || showResp(list.Elems[1]) != `"user app on #`+sha("apppw")+` ~app:* ~lock:* resetchannels +@all -@dangerous"` {
			t.Fatalf("ACL LIST: %s", showResp(list))
		}
		cats := showResp(admin.cmd("ACL", "CAT"))
		for _, want := range []string{`"read"`, `"write"`, `"admin"`, `"dangerous"`, `"keyspace"`, `"string"`, `"hash"`, `"fast"`,
			`"slow"`, `"connection"`, `"transaction"`, `"pubsub"`, `"lock"`, `"cluster"`} {
			if !strings.Contains(cats, want) {
				t.Errorf("ACL CAT lacks %s: %s", want, cats)
			}
		}
		if d := showResp(admin.cmd("ACL", "CAT", "dangerous")); !strings.Contains(d, `"flushall"`) || !strings.Contains(d, `"acl|load"`) ||
			strings.Contains(d, `"get"`) {
			t.Errorf("ACL CAT dangerous: %s", d)
		}
	})
	ts.healthy(t)
}

// TestACLLoad: ACL LOAD (and a reload, as SIGHUP does) reads the file again; a connection
// logged in as a user that changed is closed, one of an unchanged user goes on; a file that
// does not load changes nothing.
func TestACLLoad(t *testing.T) {
	ts, path := aclServer(t, testUsers, nil)
	admin := login(t, ts, "admin", "adminpw")
	app := login(t, ts, "app", "apppw")
	ro := login(t, ts, "ro", "ropw")
	runKV(t, admin, []kvStep{kv(`+OK`, "SET", "x", "v")})
	write := func(text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(testUsers, ">apppw", ">newpw", 1))
	runKV(t, admin, []kvStep{kv(`+OK`, "ACL", "LOAD"), kv(`+PONG`, "PING")})
	app.expectClosed()
	runKV(t, ro, []kvStep{kv(`"v"`, "GET", "x")})
	runKV(t, dialResp(t, ts.slockAddr), []kvStep{kv(wantWrongPass, "AUTH", "app", "apppw"), kv(`+OK`, "AUTH", "app", "newpw")})

	write("user admin on +nosuchcommand")
	if got := showResp(admin.cmd("ACL", "LOAD")); !strings.Contains(got, "-ERR --aclfile: "+path+":1: Error in applying operation '+nosuchcommand'") {
		t.Fatalf("ACL LOAD of a bad file: %s", got)
	}
	runKV(t, dialResp(t, ts.slockAddr), []kvStep{kv(`+OK`, "AUTH", "app", "newpw")}) // unchanged

	// A reload (SIGHUP) reads the file too; ro's permissions change, so its connection closes.
	write(strings.Replace(testUsers, "user ro on >ropw ~* +@read", "user ro on >ropw ~* +@read +@write", 1))
	cfg := ts.cfg
	ts.Reload(cfg)
	ro.expectClosed()
	runKV(t, login(t, ts, "ro", "ropw"), []kvStep{kv(`+OK`, "SET", "x", "y"), kv(`"y"`, "GET", "x")})
	runKV(t, admin, []kvStep{kv(`+PONG`, "PING")})
}

// TestAuthSecretsStayHidden: no password reaches the log (at debug level), INFO, CONFIG GET
// or the metrics.
func TestAuthSecretsStayHidden(t *testing.T) {
	const pw = "Pa55-w0rd-never-shown"
	lb := &logBuf{}
	dir := t.TempDir()
	ts := startSlock(t, func(c *Config) {
		c.RequirePass = pw
		c.DataDir = dir
		c.Log = zerolog.New(lb).Level(zerolog.DebugLevel)
	})
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(wantWrongPass, "AUTH", pw+"x"),
		kv(wantWrongPass, "AUTH", pw, pw), // a password where the user goes
		kv(wantWrongPass, "HELLO", "2", "AUTH", "default", pw+"y"),
		kv(`+OK`, "AUTH", pw),
	})
	var seen []string
	seen = append(seen, showResp(rc.cmd("INFO", "everything")), showResp(rc.cmd("CONFIG", "GET", "*")),
		showResp(rc.cmd("CLIENT", "LIST")), showResp(rc.cmd("ACL", "LIST")))
	if !strings.Contains(seen[1], dir) {
		t.Errorf("CONFIG GET * does not show the data dir to the default user: %s", seen[1])
	}
	snap, err := ts.Metrics().Fresh(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, fmt.Sprintf("%+v", *snap), lb.String())
	for _, s := range seen {
		if strings.Contains(s, "Pa55") {
			t.Fatalf("a password is shown:\n%s", s)
		}
	}
	if !strings.Contains(lb.String(), "AUTH failed") {
		t.Fatalf("failed logins are not logged:\n%s", lb.String())
	}
}

func sha(pw string) string {
	us, err := LoadUsers(pw, "")
	if err != nil {
		panic(err)
	}
	d := us.Default().Describe() // user default on #hash ~* &* +@all
	return strings.Fields(d)[3][1:]
}

// TestLoadUsersErrors: both settings, or a file that does not load, stop the start.
func TestLoadUsersErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte("user a on >secretpw bogus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pass, file, want string }{
		{"pw", path, "--requirepass and --aclfile together"},
		{"", path, path + ":1: Syntax error."},
		{"", path + ".missing", "no such file"},
	} {
		cfg := Defaults()
		cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}}
		cfg.RequirePass, cfg.ACLFile = tc.pass, tc.file
		_, err := New(cfg) // not newSlockServer: it must fail
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secretpw") {
			t.Errorf("%+v: %v", tc, err)
		}
	}
}

// authPathUsers are the ACL files of the authenticated path's test and benchmark: a user
// limited to the batch's key patterns, and the default user with a password.
var authPathUsers = []string{
	"user default off\nuser app on >pw ~key:* ~counter:* +@all -@dangerous\n",
	"user default on >pw ~* +@all\n",
}

// authPathServer is newKVPathServer (no log) with the users of text, its connection logged
// in as their first user that is on.
func authPathServer(tb testing.TB, text string) (*Server, *fakeConn) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	s := newSlockServer(tb, func(c *Config) { c.ACLFile = path })
	fc := &fakeConn{}
	cs := s.fakeSlockConn(fc)
	fc.ctx = cs
	name := "app"
	if strings.HasPrefix(text, "user default on") {
		name = "default"
	}
	fc.in = resp.AppendCommand(nil, "AUTH", name, "pw")
	s.OnTraffic(fc)
	if cs.slock.user == nil || cs.slock.user.Name != name {
		tb.Fatalf("AUTH %s did not log in", name)
	}
	return s, fc
}

// BenchmarkKVPathAuth is BenchmarkKVPath/memory for a logged-in connection: the cost of the
// checks (compare the two).
func BenchmarkKVPathAuth(b *testing.B) {
	for i, name := range []string{"key-patterns", "password"} {
		b.Run(name, func(b *testing.B) {
			s, fc := authPathServer(b, authPathUsers[i])
			batch := kvBatch()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 48 {
				fc.in = batch
				s.OnTraffic(fc)
			}
		})
	}
}

// The Redis-text path of a logged-in user limited to some keys allocates nothing: the check
// is a bit test and a glob per key.
func TestAuthPathDoesNotAllocate(t *testing.T) {
	for _, users := range authPathUsers {
		s, fc := authPathServer(t, users)
		name := s.userOf(fc.ctx.(*conn)).Name
		batch := kvBatch()
		for range 3 {
			fc.in = batch
			s.OnTraffic(fc)
		}
		before := fc.written
		allocs := testing.AllocsPerRun(200, func() {
			fc.in = batch
			s.OnTraffic(fc)
		})
		if allocs != 0 {
			t.Fatalf("%s: %v allocations per batch of 48 commands", name, allocs)
		}
		if fc.written == before || len(fc.in) != 0 {
			t.Fatal("nothing served")
		}
	}
}
