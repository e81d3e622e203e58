package loop

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/script"
	"github.com/tallyd/tallyd/store"
)

// lockLibScript is a lock library's script as script/testdata/lock-scripts.json keeps it.
type lockLibScript struct{ Name, Library, Body, SHA1 string }

func lockLibScripts(t testing.TB) map[string]lockLibScript {
	t.Helper()
	b, err := os.ReadFile("../script/testdata/lock-scripts.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []lockLibScript
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]lockLibScript{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// nativeSide is one of the two servers TestScriptNativeSameAsLua compares: a connection
// as the default user, one as a user who may not DEL, PEXPIRE or SET, and a subscriber to
// every keyspace notification.
type nativeSide struct {
	ts         *testServer
	dir        string
	rc, nowr   *respClient
	sub        *respClient
	native     bool
	nativeRuns uint64
}

func startNativeSide(t *testing.T, native bool) *nativeSide {
	dir := t.TempDir()
	acl := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(acl, []byte("user default on nopass ~* &* +@all\nuser nowr on >pw ~* &* +@all -del -pexpire -set\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startSlock(t, func(c *Config) {
		c.DataDir, c.ACLFile = dir, acl
		c.NotifyKeyspaceEvents = "KEA"
		c.LuaOnly = !native
	})
	sd := &nativeSide{ts: ts, dir: dir, native: native, rc: dialResp(t, ts.slockAddr), nowr: dialResp(t, ts.slockAddr),
		sub: dialResp(t, ts.slockAddr)}
	if r := showResp(sd.nowr.cmd("AUTH", "nowr", "pw")); r != "+OK" {
		t.Fatalf("AUTH nowr: %s", r)
	}
	if r := showResp(sd.sub.cmd("PSUBSCRIBE", "__key*@*__:*")); !strings.HasPrefix(r, "[\"psubscribe\"") {
		t.Fatalf("PSUBSCRIBE: %s", r)
	}
	return sd
}

// notifications reads what the subscriber got, up to the reply of a PING sent now.
func (sd *nativeSide) notifications(t *testing.T) []string {
	sd.sub.send("PING")
	var got []string
	for {
		r := showResp(sd.sub.reply())
		if r == `["pong" ""]` {
			return got
		}
		got = append(got, r)
	}
}

// records are the log's records so far, each its key, value, holders (and whether each
// expires) and flush: what a replay or a follower reads from them.
func (sd *nativeSide) records(t *testing.T) []string {
	// The log's writer writes what the loop hands it at once (fsyncs come later): the file
	// is whole once it stops growing.
	var b []byte
	for same := 0; same < 3; {
		time.Sleep(50 * time.Millisecond)
		nb, err := os.ReadFile(filepath.Join(sd.dir, logName))
		if err != nil {
			t.Fatal(err)
		}
		if len(nb) == len(b) {
			same++
		} else {
			same = 0
		}
		b = nb
	}
	cp := filepath.Join(t.TempDir(), "copy.aof")
	if err := os.WriteFile(cp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out []string
	if _, err := aof.Replay(cp, func(ks *store.KeyState) {
		s := fmt.Sprintf("db%d %s %q flush=%v", ks.DB, hex.EncodeToString(ks.Key[:]), ks.Value, ks.Flush)
		for _, h := range ks.Holders {
			s += fmt.Sprintf(" holder(%x expires=%v)", h.LockID, h.Deadline != 0 || h.ExpireAt != 0)
		}
		out = append(out, s)
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// The lock libraries' scripts run as native ops give what they give on Lua, byte for byte,
// on a real server over TCP: each script, loaded by SCRIPT LOAD and run by EVALSHA,
// EVALSHA_RO and EVAL, on a key missing, holding the token (with and without a TTL),
// another's token, a hash, with TTLs that are not integers, with other counts of keys and
// arguments (Lua's), as a user who may not write; the replies, the keys after (their
// values and TTLs), the keyspace notifications and the log records are the same as a
// server's that runs them on Lua (--lua-native-locks=false); and the native server did run
// them natively.
func TestScriptNativeSameAsLua(t *testing.T) {
	scripts := lockLibScripts(t)
	sides := []*nativeSide{startNativeSide(t, true), startNativeSide(t, false)}
	// batch sends lines to both sides at once (on the connection pick chooses), then
	// compares the replies; a PTTL's may differ by the time between the two.
	n := 0
	batch := func(pick func(*nativeSide) *respClient, lines ...[]string) {
		t.Helper()
		var b []byte
		for _, l := range lines {
			b = resp.AppendCommand(b, l...)
		}
		for _, sd := range sides {
			pick(sd).write(b)
		}
		got := make([][]string, len(sides))
		for i, sd := range sides {
			for range lines {
				got[i] = append(got[i], showResp(pick(sd).reply()))
			}
		}
		for k, args := range lines {
			n++
			a, b := got[0][k], got[1][k]
			if strings.EqualFold(args[0], "PTTL") {
				x, ex := strconv.ParseInt(strings.TrimPrefix(a, ":"), 10, 64)
				y, ey := strconv.ParseInt(strings.TrimPrefix(b, ":"), 10, 64)
				if ex == nil && ey == nil && (x < 0) == (y < 0) && x-y < 2000 && y-x < 2000 {
					continue
				}
			}
			if a != b {
				t.Errorf("%q: native %s, Lua %s", args, a, b)
			}
		}
	}
	do := func(pick func(*nativeSide) *respClient, args ...string) {
		t.Helper()
		batch(pick, args)
	}
	admin := func(sd *nativeSide) *respClient { return sd.rc }
	nowr := func(sd *nativeSide) *respClient { return sd.nowr }

	setups := [][][]string{
		{},                                   // no key
		{{"SET", "k", "tok"}},                // the token, no TTL
		{{"SET", "k", "tok", "PX", "30000"}}, // the token, a TTL
		{{"SET", "k", "other", "PX", "30000"}},
		{{"HSET", "k", "f", "v"}}, // WRONGTYPE for GET
		{{"SET", "k", "tok", "PX", "30000"}, {"SET", "k2", "tok"}},
		{{"SET", "k", "tok"}, {"SET", "k2", "other"}},
	}
	argsOf := map[string][][]string{
		"py-release":   {{"tok"}, {"other"}},
		"py-extend":    {{"tok", "5000", "0"}, {"tok", "5000", "1"}, {"tok", "x", "1"}, {"tok", "1.5", "0"}, {"tok", "-100000", "0"}, {"other", "5000", "0"}},
		"py-reacquire": {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rs-delete":    {{"tok"}, {"other"}},
		"rs-touch":     {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rs-touch-nx":  {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
		"rl-lock":      {{"tok", "5000"}, {"tok", "x"}},
		"rl-unlock":    {{"tok"}, {"other"}},
		"rl-extend":    {{"tok", "5000"}, {"tok", "x"}, {"other", "5000"}},
	}
	keySets := [][]string{{"k"}, {"k", "k2"}, {}}
	for _, name := range []string{"py-release", "py-extend", "py-reacquire", "rs-delete", "rs-touch", "rs-touch-nx",
		"rl-lock", "rl-unlock", "rl-extend"} {
		s := scripts[name]
		do(admin, "SCRIPT", "LOAD", s.Body)
		for _, setup := range setups {
			for ki, keys := range keySets {
				if ki > 0 && !strings.HasPrefix(name, "rl-") && len(setup) > 0 {
					continue // the others take one key: on Lua (once is enough)
				}
				for ai, args := range argsOf[name] {
					runs := []struct {
						cmd  string
						conn func(*nativeSide) *respClient
					}{{"EVALSHA", admin}, {"EVALSHA_RO", admin}, {"EVALSHA", nowr}, {"EVAL", admin}}
					if ai > 0 || ki > 0 {
						runs = runs[:1] // EVALSHA_RO, a user who may not write and EVAL with the first arguments
					}
					for _, run := range runs {
						batch(admin, append([][]string{{"DEL", "k", "k2"}}, setup...)...)
						line := []string{run.cmd, s.SHA1, strconv.Itoa(len(keys))}
						if run.cmd == "EVAL" {
							line[1] = s.Body
						}
						line = append(append(line, keys...), args...)
						do(run.conn, line...)
						batch(admin, []string{"TYPE", "k"}, []string{"GET", "k"}, []string{"PTTL", "k"},
							[]string{"GET", "k2"}, []string{"PTTL", "k2"})
					}
				}
			}
		}
		// Counts of arguments other than the library's run on Lua, with Lua's answer.
		do(admin, "SET", "k", "tok")
		do(admin, "EVALSHA", s.SHA1, "1", "k")
		do(admin, "EVALSHA", s.SHA1, "1", "k", "tok", "5000", "0", "extra")
		do(admin, "EVALSHA", s.SHA1, "0", "tok", "5000")
	}
	// Inside MULTI/EXEC, and pipelined.
	batch(admin, []string{"SET", "k", "tok"}, []string{"SET", "k2", "tok", "PX", "9000"}, []string{"MULTI"},
		[]string{"EVALSHA", scripts["rs-touch"].SHA1, "1", "k", "tok", "60000"},
		[]string{"EVALSHA", scripts["py-release"].SHA1, "1", "k2", "tok"},
		[]string{"EVALSHA", scripts["rs-delete"].SHA1, "1", "k", "tok"}, []string{"EXEC"},
		[]string{"EXISTS", "k", "k2"})
	do(admin, "SCRIPT", "EXISTS", scripts["py-release"].SHA1, scripts["rl-lock"].SHA1)
	do(admin, "SCRIPT", "FLUSH")
	do(admin, "EVALSHA", scripts["py-release"].SHA1, "1", "k", "tok")
	do(admin, "SCRIPT", "EXISTS", scripts["py-release"].SHA1)
	if n < 1000 {
		t.Fatalf("only %d commands compared", n)
	}

	na, la := sides[0].notifications(t), sides[1].notifications(t)
	if len(na) < 100 || strings.Join(na, "\n") != strings.Join(la, "\n") {
		t.Errorf("keyspace notifications differ (%d native, %d Lua)", len(na), len(la))
		for i := range max(len(na), len(la)) {
			var a, b string
			if i < len(na) {
				a = na[i]
			}
			if i < len(la) {
				b = la[i]
			}
			if a != b {
				t.Fatalf("notification %d: native %s, Lua %s", i, a, b)
			}
		}
	}
	// A turn's records go out in no set order (a batch of SETs): compared sorted.
	ra, rb := sides[0].records(t), sides[1].records(t)
	slices.Sort(ra)
	slices.Sort(rb)
	if len(ra) < 100 || strings.Join(ra, "\n") != strings.Join(rb, "\n") {
		t.Errorf("log records differ (%d native, %d Lua)", len(ra), len(rb))
		for i := range max(len(ra), len(rb)) {
			var a, b string
			if i < len(ra) {
				a = ra[i]
			}
			if i < len(rb) {
				b = rb[i]
			}
			if a != b {
				t.Fatalf("record %d: native %s, Lua %s", i, a, b)
			}
		}
	}
	for _, sd := range sides {
		sd.ts.onLoop(t, func() { sd.nativeRuns = sd.ts.scr.eng.NativeRuns() })
	}
	if sides[0].nativeRuns < 200 || sides[1].nativeRuns != 0 {
		t.Fatalf("native runs: %d on the native server, %d on the Lua one", sides[0].nativeRuns, sides[1].nativeRuns)
	}
	t.Logf("%d commands, %d notifications, %d log records the same; %d native runs", n, len(na), len(ra), sides[0].nativeRuns)
	for _, sd := range sides {
		sd.ts.healthy(t)
	}
}

// releaseServer is a text connection with redis-py's release script loaded, and the batch
// that sets a lock's token and releases it by EVALSHA (the native op), and one that
// releases a lock that is not there (the benchmark's case: random keys).
func newPyReleaseServer(tb testing.TB) (*Server, *fakeConn, []byte, []byte) {
	body := lockLibScripts(tb)["py-release"].Body
	s, fc := newKVPathServer(tb, "")
	fc.in = resp.AppendCommand(nil, "SCRIPT", "LOAD", body)
	s.OnTraffic(fc)
	sha := script.SHA1([]byte(body))
	batch := resp.AppendCommand(nil, "SET", "lock:job", "token-1234")
	batch = resp.AppendCommand(batch, "EVALSHA", sha, "1", "lock:job", "token-1234")
	return s, fc, batch, resp.AppendCommand(nil, "EVALSHA", sha, "1", "lock:none", "token-1234")
}

// BenchmarkEvalSHANative is redis-py's release by EVALSHA, run as a native op: of a lock
// that is not there (the random keys of the benchmark).
func BenchmarkEvalSHANative(b *testing.B) {
	s, fc, _, miss := newPyReleaseServer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		fc.in = miss
		s.OnTraffic(fc)
	}
}

// redis-py's release by EVALSHA, as a native op, allocates nothing in steady state: the
// SET and release of a lock, and the release of a lock not there (it allocated 19 per
// release through gopher-lua).
func TestEvalSHANativeAllocations(t *testing.T) {
	s, fc, batch, miss := newPyReleaseServer(t)
	for _, c := range []struct {
		what string
		in   []byte
		max  float64
	}{{"SET + EVALSHA release", batch, 2}, {"EVALSHA release of no lock", miss, 0}} {
		serve := func() {
			fc.in = c.in
			s.OnTraffic(fc)
		}
		for range 3 {
			serve()
		}
		fc.written = 0
		allocs := testing.AllocsPerRun(200, serve)
		if fc.written == 0 {
			t.Fatal("nothing answered")
		}
		if allocs > c.max {
			t.Errorf("%v allocations per %s, want at most %v", allocs, c.what, c.max)
		}
		t.Logf("%v allocations per %s", allocs, c.what)
	}
	if n := s.scr.eng.NativeRuns(); n < 400 {
		t.Fatalf("%d native runs", n)
	}
}

// Past --max-memory, a lock script's write is refused inside it as on Lua: node-redlock's
// lock and extend and redsync's touch with SET NX raise the SET's -OOM with the script's
// line, while redis-py's release still deletes (DEL frees memory); the same replies
// natively and on Lua.
func TestScriptNativeOOM(t *testing.T) {
	scripts := lockLibScripts(t)
	var got [2][]string
	for i, native := range []bool{true, false} {
		ts := startSlock(t, func(c *Config) { c.LuaOnly = !native })
		rc := dialResp(t, ts.slockAddr)
		val := strings.Repeat("v", 256<<10)
		for k := range 8 {
			rc.cmd("SET", "fill"+strconv.Itoa(k), val)
		}
		ts.onLoop(t, func() { ts.cfg.MaxMemory = ts.memUsed() / 2 }) // 2 MB of values over it
		if r := showResp(rc.cmd("SET", "x", "y")); !strings.HasPrefix(r, "-OOM") {
			t.Fatalf("SET over the budget: %s", r)
		}
		for _, line := range [][]string{
			{"EVAL", scripts["rl-lock"].Body, "1", "new", "tok", "5000"},
			{"EVAL", scripts["rs-touch-nx"].Body, "1", "new", "tok", "5000"},
			{"EVAL", scripts["rl-extend"].Body, "1", "fill0", val, "5000"},
			{"EVAL", scripts["py-release"].Body, "1", "fill1", val},
			{"GET", "new"}, {"EXISTS", "fill1"},
		} {
			got[i] = append(got[i], showResp(rc.cmd(line...)))
		}
		var runs uint64
		ts.onLoop(t, func() { runs = ts.scr.eng.NativeRuns() })
		if native != (runs == 4) {
			t.Fatalf("native %v: %d native runs", native, runs)
		}
	}
	if a, b := strings.Join(got[0], "\n"), strings.Join(got[1], "\n"); a != b {
		t.Fatalf("native:\n%s\nLua:\n%s", a, b)
	}
	if !strings.HasPrefix(got[0][0], "-OOM command not allowed when used memory > 'maxmemory'. script: ") ||
		!strings.HasSuffix(got[0][2], "on @user_script:11.") || got[0][3] != ":1" {
		t.Fatalf("replies: %q", got[0])
	}
	t.Logf("%q", got[0])
}
