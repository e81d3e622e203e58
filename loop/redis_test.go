package loop

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// TestRedisCommandTable: arity errors come from the command table, in Redis's words, for
// every family; slock's own commands keep their own count errors.
func TestRedisCommandTable(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`-ERR wrong number of arguments for 'get' command`, "GET"),
		kv(`-ERR wrong number of arguments for 'get' command`, "get", "a", "b"),
		kv(`-ERR wrong number of arguments for 'echo' command`, "ECHO", "a", "b"),
		kv(`-ERR wrong number of arguments for 'select' command`, "SELECT"),
		kv(`-ERR wrong number of arguments for 'incrby' command`, "INCRBY", "k"),
		kv(`-ERR wrong number of arguments for 'config' command`, "CONFIG"),
		kv(`-ERR wrong number of arguments for 'dbsize' command`, "DBSIZE", "x"),
		kv(`-ERR Command Parse Args Count Error`, "LOCK"),
		kv(`-ERR Command Parse Args Count Error`, "LOCK", "k", "x"),
		kv(`-ERR unknown command 'NOSUCH', with args beginning with: `, "NOSUCH"),
		kv(`+PONG`, "ping"),
		kv(`+OK`, "SET", "k", "v"),
		kv(`"v"`, "GET", "k"),
	})
	ts.healthy(t)
}

// pipeline sends every command at once and returns the replies, as showResp renders them.
func pipeline(rc *respClient, cmds ...[]string) []string {
	rc.t.Helper()
	var b []byte
	for _, c := range cmds {
		b = resp.AppendCommand(b, c...)
	}
	rc.write(b)
	out := make([]string, len(cmds))
	for i := range cmds {
		out[i] = showResp(rc.reply())
	}
	return out
}

func c(args ...string) []string { return args }

func expectReplies(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("%s:\n got  %s\n want %s", what, strings.Join(got, " | "), strings.Join(want, " | "))
	}
}

// TestRedisMultiExec: commands after MULTI are queued and run by EXEC as one, with their
// replies in one array; DISCARD drops them; errors while queueing abort the EXEC; misuse
// answers Redis's errors.
func TestRedisMultiExec(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	other := dialResp(t, ts.slockAddr)
	expectReplies(t, "MULTI INCR INCR SET", pipeline(rc,
		c("MULTI"), c("INCR", "n"), c("INCRBY", "n", "10"), c("SET", "s", "v"), c("GET", "s")),
		`+OK`, `+QUEUED`, `+QUEUED`, `+QUEUED`, `+QUEUED`)
	// Nothing ran yet: another connection sees no value.
	runKV(t, other, []kvStep{kv(`$-1`, "GET", "n"), kv(`$-1`, "GET", "s")})
	runKV(t, rc, []kvStep{kv(`[:1 :11 +OK "v"]`, "EXEC")})
	runKV(t, other, []kvStep{kv(`"11"`, "GET", "n")})

	// DISCARD drops the queue.
	expectReplies(t, "MULTI INCR DISCARD", pipeline(rc, c("MULTI"), c("INCR", "n"), c("DISCARD"), c("GET", "n")),
		`+OK`, `+QUEUED`, `+OK`, `"11"`)

	// Errors inside EXEC are replies in the array; the other commands still run.
	runKV(t, rc, []kvStep{
		kv(`+OK`, "MULTI"),
		kv(`+QUEUED`, "INCR", "s"),
		kv(`+QUEUED`, "INCR", "n"),
		kv(`[-ERR value is not an integer or out of range :12]`, "EXEC"),
	})

	// An unknown command or a wrong arity while queueing aborts the whole transaction.
	runKV(t, rc, []kvStep{
		kv(`+OK`, "MULTI"),
		kv(`+QUEUED`, "INCR", "n"),
		kv(`-ERR wrong number of arguments for 'get' command`, "GET"),
		kv(`+QUEUED`, "INCR", "n"),
		kv(`-EXECABORT Transaction discarded because of previous errors.`, "EXEC"),
		kv(`"12"`, "GET", "n"),
		kv(`+OK`, "MULTI"),
		kv(`-ERR unknown command 'NOSUCH', with args beginning with: `, "NOSUCH"),
		kv(`-EXECABORT Transaction discarded because of previous errors.`, "EXEC"),
	})

	// Misuse.
	runKV(t, rc, []kvStep{
		kv(`-ERR EXEC without MULTI`, "EXEC"),
		kv(`-ERR DISCARD without MULTI`, "DISCARD"),
		kv(`+OK`, "MULTI"),
		kv(`-ERR MULTI calls can not be nested`, "MULTI"),
		kv(`-ERR WATCH inside MULTI is not allowed`, "WATCH", "n"),
		kv(`+QUEUED`, "PING"),
		kv(`[+PONG]`, "EXEC"),
		kv(`+OK`, "MULTI"),
		kv(`[]`, "EXEC"),
	})

	// Nothing waits inside EXEC: a LOCK on a held key, SETNX on a taken key and SET XX on a
	// missing key answer at once (a LOCK times out, code 8).
	expectText(t, parseTextLock(t, other.cmd("LOCK", "held", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	runKV(t, rc, []kvStep{kv(`:1`, "SETNX", "taken", "x")})
	start := time.Now()
	rc.send("MULTI")
	rc.send("LOCK", "held", "TIMEOUT", "10")
	rc.send("SETNX", "taken", "y")
	rc.send("SET", "missing", "v", "XX", "TX", "10")
	rc.send("INCR", "n")
	rc.send("EXEC")
	for _, want := range []string{`+OK`, `+QUEUED`, `+QUEUED`, `+QUEUED`, `+QUEUED`} {
		if got := showResp(rc.reply()); got != want {
			t.Fatalf("queueing: %s, want %s", got, want)
		}
	}
	r := rc.reply()
	if r.Kind != '*' || len(r.Elems) != 4 {
		t.Fatalf("EXEC: %s", showResp(r))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("EXEC waited %v", d)
	}
	expectText(t, parseTextLock(t, r.Elems[0]), "8", "1", "1", "0", "1")
	if got := showResp(resp.Reply{Kind: '*', Elems: r.Elems[1:]}); got != `[:0 $-1 :13]` {
		t.Fatalf("EXEC after the LOCK: %s", got)
	}
	// The connection is served normally afterwards.
	runKV(t, rc, []kvStep{kv(`"13"`, "GET", "n"), kv(`"x"`, "GET", "taken")})
	ts.healthy(t)
}

// TestRedisMultiAtomic: EXEC runs its commands with nothing of another connection in
// between: concurrent transactions of INCRs always see their own increments in sequence.
func TestRedisMultiAtomic(t *testing.T) {
	ts := startSlock(t, nil)
	const clients, rounds, incrs = 4, 50, 5
	var wg sync.WaitGroup
	errs := make(chan string, clients)
	for range clients {
		rc := dialResp(t, ts.slockAddr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				cmds := [][]string{c("MULTI")}
				for range incrs {
					cmds = append(cmds, c("INCR", "shared"))
				}
				var b []byte
				for _, c := range append(cmds, c("EXEC")) {
					b = resp.AppendCommand(b, c...)
				}
				if _, err := rc.c.Write(b); err != nil {
					errs <- err.Error()
					return
				}
				for range cmds {
					if _, err := rc.tryReply(replyWait); err != nil {
						errs <- err.Error()
						return
					}
				}
				r, err := rc.tryReply(replyWait)
				if err != nil || r.Kind != '*' || len(r.Elems) != incrs {
					errs <- "EXEC: " + showResp(r)
					return
				}
				for i := 1; i < incrs; i++ {
					if r.Elems[i].Int != r.Elems[0].Int+int64(i) {
						errs <- "interleaved: " + showResp(r)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{kv(`"`+strconv.Itoa(clients*rounds*incrs)+`"`, "GET", "shared")})
}

// TestRedisMultiQueueLimit: the queue of a transaction is bounded by --max-input; past it
// the command answers an error and EXEC aborts.
func TestRedisMultiQueueLimit(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxInput = 4096 })
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{kv(`+OK`, "MULTI")})
	big := strings.Repeat("x", 900) // about 930 bytes a command: four fit, five do not
	for i := range 4 {
		runKV(t, rc, []kvStep{kv(`+QUEUED`, "SET", "k"+strconv.Itoa(i), big)})
	}
	r := rc.cmd("SET", "k4", big)
	if r.Kind != '-' || !strings.Contains(string(r.Str), "MULTI queue over 4096 bytes") {
		t.Fatalf("past the limit: %s", showResp(r))
	}
	runKV(t, rc, []kvStep{
		kv(`-EXECABORT Transaction discarded because of previous errors.`, "EXEC"),
		kv(`$-1`, "GET", "k0"),
	})
	ts.healthy(t)
}

// TestRedisWatch: EXEC answers a null array when a watched key was set, incremented,
// deleted, expired or flushed since WATCH, and runs when only other keys changed. EXEC,
// DISCARD and UNWATCH end the watches; a closed connection's watches go with it.
func TestRedisWatch(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	other := dialResp(t, ts.slockAddr)
	tx := func(want string, conflict ...string) {
		t.Helper()
		runKV(t, rc, []kvStep{kv(`+OK`, "WATCH", "w", "w2")})
		if conflict != nil {
			r := other.cmd(conflict...)
			if r.Kind == '-' {
				t.Fatalf("%v: %s", conflict, showResp(r))
			}
		}
		runKV(t, rc, []kvStep{kv(`+OK`, "MULTI"), kv(`+QUEUED`, "INCR", "count"), kv(want, "EXEC")})
	}
	runKV(t, rc, []kvStep{kv(`+OK`, "SET", "w", "1")})
	tx(`[:1]`)
	tx(`[:2]`, "SET", "unrelated", "x")
	tx(`*-1`, "SET", "w", "2")
	tx(`*-1`, "SET", "w", "2") // the same value is a change too
	tx(`*-1`, "INCR", "w")
	tx(`*-1`, "DEL", "w")
	tx(`*-1`, "SET", "w2", "new") // a key that did not exist
	tx(`*-1`, "EXPIRE", "w2", "100")
	tx(`*-1`, "FLUSHDB")
	tx(`[:1]`)
	// Expiry: the key runs out between WATCH and EXEC.
	runKV(t, rc, []kvStep{kv(`+OK`, "SET", "w", "v", "PX", "50"), kv(`+OK`, "WATCH", "w")})
	time.Sleep(150 * time.Millisecond)
	runKV(t, rc, []kvStep{kv(`+OK`, "MULTI"), kv(`+QUEUED`, "GET", "w"), kv(`*-1`, "EXEC")})
	// EXEC ended the watch: a change now does not abort the next transaction.
	other.cmd("SET", "w", "3")
	runKV(t, rc, []kvStep{kv(`+OK`, "MULTI"), kv(`+QUEUED`, "GET", "w"), kv(`["3"]`, "EXEC")})
	// UNWATCH and DISCARD end it too.
	runKV(t, rc, []kvStep{kv(`+OK`, "WATCH", "w"), kv(`+OK`, "UNWATCH")})
	other.cmd("SET", "w", "4")
	runKV(t, rc, []kvStep{kv(`+OK`, "MULTI"), kv(`+QUEUED`, "GET", "w"), kv(`["4"]`, "EXEC")})
	runKV(t, rc, []kvStep{kv(`+OK`, "WATCH", "w"), kv(`+OK`, "MULTI"), kv(`+OK`, "DISCARD")})
	other.cmd("SET", "w", "5")
	runKV(t, rc, []kvStep{kv(`+OK`, "MULTI"), kv(`+QUEUED`, "GET", "w"), kv(`["5"]`, "EXEC")})
	// Watches are per database: SELECT then a change of the same name elsewhere is not one.
	runKV(t, rc, []kvStep{kv(`+OK`, "WATCH", "w"), kv(`+OK`, "SELECT", "1"), kv(`+OK`, "SET", "w", "db1"),
		kv(`+OK`, "MULTI"), kv(`+QUEUED`, "GET", "w"), kv(`["db1"]`, "EXEC"), kv(`+OK`, "SELECT", "0")})

	// A closed connection's watches are dropped.
	gone := dialResp(t, ts.slockAddr)
	runKV(t, gone, []kvStep{kv(`+OK`, "WATCH", "a", "b", "c")})
	var n int
	ts.onLoop(t, func() { n = ts.st.locks.Watched() })
	if n != 3 {
		t.Fatalf("%d keys watched, want 3", n)
	}
	_ = gone.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ts.onLoop(t, func() { n = ts.st.locks.Watched() })
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still watched after the close", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.healthy(t)
}

// TestRedisMGetMSet: MGET answers each key as GET does; MSET sets every pair; MSETNX sets
// all only if none of the keys exists, else nothing.
func TestRedisMGetMSet(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	runKV(t, rc, []kvStep{
		kv(`+OK`, "MSET", "a", "1", "b", "2", "c", "3"),
		kv(`["1" "2" $-1 "3"]`, "MGET", "a", "b", "nokey", "c"),
		kv(`:2`, "INCR", "a"),
		kv(`["2" "2"]`, "MGET", "a", "b"),
		kv(`+OK`, "MSET", "a", "x", "a", "y"),
		kv(`"y"`, "GET", "a"),
		kv(`-ERR wrong number of arguments for 'mset' command`, "MSET", "a"),
		kv(`-ERR wrong number of arguments for 'mset' command`, "MSET", "a", "1", "b"),
		kv(`-ERR wrong number of arguments for 'mget' command`, "MGET"),
		kv(`:0`, "MSETNX", "new1", "1", "a", "2"),
		kv(`[$-1 "y"]`, "MGET", "new1", "a"),
		kv(`:1`, "MSETNX", "new1", "1", "new2", "2"),
		kv(`["1" "2"]`, "MGET", "new1", "new2"),
		kv(`:0`, "MSETNX", "new3", "3", "new2", "x"),
		kv(`:0`, "EXISTS", "new3"),
	})
	// A key held by a LOCK under another LockId: MSET sets nothing, MSETNX answers 0.
	expectText(t, parseTextLock(t, rc.cmd("LOCK", "locked", "EXPRIED", "60")), "0", "1", "1", "1", "1")
	r := rc.cmd("MSET", "free", "1", "locked", "2")
	if r.Kind != '-' || !strings.Contains(string(r.Str), "held under another LockId") {
		t.Fatalf("MSET over a LOCK: %s", showResp(r))
	}
	runKV(t, rc, []kvStep{kv(`:0`, "EXISTS", "free"), kv(`:0`, "MSETNX", "free", "1", "locked", "2"), kv(`:0`, "EXISTS", "free")})
	ts.healthy(t)
}

// TestRedisReadYourWrites: a key expired by a command is gone for the next command of the
// same pipeline, before any tick.
func TestRedisReadYourWrites(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.Tick = time.Hour }) // no tick in the test's time
	rc := dialResp(t, ts.slockAddr)
	expectReplies(t, "SET EXPIRE 0 GET EXISTS", pipeline(rc,
		c("SET", "k", "v"), c("EXPIRE", "k", "0"), c("GET", "k"), c("EXISTS", "k"), c("TTL", "k"), c("DBSIZE")),
		`+OK`, `:1`, `$-1`, `:0`, `:-2`, `:0`)
	expectReplies(t, "SET PEXPIRE -1 INCR", pipeline(rc,
		c("SET", "n", "5"), c("PEXPIRE", "n", "-1"), c("INCR", "n"), c("KEYS", "*")),
		`+OK`, `:1`, `:1`, `["n"]`)
	expectReplies(t, "SET EX then EXPIREAT past", pipeline(rc,
		c("SET", "p", "v", "EX", "100"), c("EXPIREAT", "p", "1"), c("MGET", "p", "n")),
		`+OK`, `:1`, `[$-1 "1"]`)
	ts.healthy(t)
}

// TestRedisHello: HELLO and HELLO 2 answer as Redis 6+ does for protocol 2; HELLO 3 is
// refused with NOPROTO.
func TestRedisHello(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	for _, args := range [][]string{{"HELLO"}, {"HELLO", "2"}, {"hello", "2", "SETNAME", "me"}} {
		r := rc.cmd(args...)
		if r.Kind != '*' || len(r.Elems) != 14 {
			t.Fatalf("%v: %s", args, showResp(r))
		}
		got := map[string]string{}
		for i := 0; i < 14; i += 2 {
			got[string(r.Elems[i].Str)] = showResp(r.Elems[i+1])
		}
		for k, want := range map[string]string{"server": `"redis"`, "version": `"7.0.0"`, "proto": `:2`,
			"mode": `"standalone"`, "role": `"master"`, "modules": `[]`} {
			if got[k] != want {
				t.Fatalf("%v: %s is %s, want %s (%s)", args, k, got[k], want, showResp(r))
			}
		}
		if !strings.HasPrefix(got["id"], ":") {
			t.Fatalf("%v: id %s", args, got["id"])
		}
	}
	runKV(t, rc, []kvStep{
		kv(`-NOPROTO unsupported protocol version`, "HELLO", "3"),
		kv(`-ERR Protocol version is not an integer or out of range`, "HELLO", "two"),
		kv(`+PONG`, "PING"),
	})
	ts.healthy(t)
}

// TestRedisExecBigReplies: an EXEC whose replies are many (past the loop's flush size) is
// answered whole and in order; to a client that does not read, past --max-output, the
// connection is closed, yet the transaction has run whole.
func TestRedisExecBigReplies(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxOutput = 256 << 10 })
	rc := dialResp(t, ts.slockAddr)
	big := strings.Repeat("v", 20_000)
	runKV(t, rc, []kvStep{kv(`+OK`, "SET", "big", big)})
	const gets = 40 // 800 kB of replies
	cmds := [][]string{c("MULTI")}
	for range gets {
		cmds = append(cmds, c("GET", "big"))
	}
	cmds = append(cmds, c("INCR", "after"))
	var b []byte
	for _, c := range append(cmds, c("EXEC")) {
		b = resp.AppendCommand(b, c...)
	}
	rc.write(b)
	for range cmds {
		rc.reply()
	}
	r := rc.reply()
	if r.Kind != '*' || len(r.Elems) != gets+1 || r.Elems[gets].Int != 1 {
		t.Fatalf("EXEC: %d elements", len(r.Elems))
	}
	for i, e := range r.Elems[:gets] {
		if string(e.Str) != big {
			t.Fatalf("element %d: %d bytes", i, len(e.Str))
		}
	}

	// A client that does not read: 250 GETs of 100 kB are 25 MB, more than the socket
	// buffers hold and far past --max-output.
	runKV(t, rc, []kvStep{kv(`+OK`, "SET", "huge", strings.Repeat("h", 100_000))})
	quiet := dialResp(t, ts.slockAddr)
	b = resp.AppendCommand(nil, "MULTI")
	for range 250 {
		b = resp.AppendCommand(b, "GET", "huge")
	}
	b = resp.AppendCommand(b, "INCR", "after")
	b = resp.AppendCommand(b, "EXEC")
	quiet.write(b)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := rc.cmd("GET", "after")
		if r.Kind == '$' && string(r.Str) == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transaction's last INCR did not run: GET after %s", showResp(r))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// It asked for those replies, so it is cut only once its socket has taken nothing for
	// outputStall (issue 21, item 6: a client that reads gets them all).
	ts.log.waitFor(t, "does not read them (max-output)")
	_ = quiet.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var sink [64 << 10]byte
	for {
		if _, err := quiet.c.Read(sink[:]); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the connection that does not read was not closed")
			}
			break
		}
	}
	ts.healthy(t)
}
