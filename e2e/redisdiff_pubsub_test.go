package e2e

// Pub/sub and keyspace notifications against the real redis-server (7.0): the same steps,
// on the same connections, must produce the same bytes on every connection, confirmations,
// messages, errors and notifications alike.

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// psStep is one step of a pub/sub script: args sent on connection conn (nil: a pause of wait).
type psStep struct {
	conn int
	args []string
	wait time.Duration
}

func on(conn int, args ...string) psStep { return psStep{conn: conn, args: args} }
func pause(d time.Duration) psStep       { return psStep{wait: d} }
func a(args ...string) []string          { return args }

func onAll(conn int, cmds ...[]string) []psStep {
	var out []psStep
	for _, a := range cmds {
		out = append(out, on(conn, a...))
	}
	return out
}

// psRun runs steps against addr on conns connections and returns, per step, what each
// connection received after it (read until the connection is quiet).
func psRun(t *testing.T, addr string, conns int, steps []psStep) []string {
	t.Helper()
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dialRetry(t, addr)
		defer cs[i].Close()
	}
	var out []string
	buf := make([]byte, 1<<20)
	for _, s := range steps {
		if s.args == nil {
			time.Sleep(s.wait)
		} else {
			_ = cs[s.conn].SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := cs[s.conn].Write(resp.AppendCommand(nil, s.args...)); err != nil {
				t.Fatalf("%s: write: %v", addr, err)
			}
		}
		got := make([][]byte, len(cs))
		order := []int{s.conn} // the connection that sent first: the others' pushes went with its reply
		for i := range cs {
			if i != s.conn {
				order = append(order, i)
			}
		}
		for _, i := range order {
			c := cs[i]
			for {
				wait := 40 * time.Millisecond
				if i == s.conn && len(got[i]) == 0 && s.args != nil {
					wait = 2 * time.Second // its reply is due
				}
				_ = c.SetReadDeadline(time.Now().Add(wait))
				n, err := c.Read(buf)
				got[i] = append(got[i], buf[:n]...)
				if err != nil {
					break
				}
			}
		}
		line := ""
		for i, g := range got {
			if len(g) > 0 {
				line += fmt.Sprintf(" [%d] %q", i, g)
			}
		}
		out = append(out, line)
	}
	return out
}

// psCompare runs steps on redis-server and on tallyd and compares what every connection got.
func psCompare(t *testing.T, conns int, steps []psStep) {
	t.Helper()
	ref := psRun(t, rdStartRedis(t), conns, steps)
	tal := psRun(t, rdStartTallyd(t), conns, steps)
	bad := 0
	for i, s := range steps {
		if ref[i] != tal[i] {
			t.Errorf("step %d, on %d %q:\n redis  %s\n tallyd %s", i, s.conn, s.args, ref[i], tal[i])
			if bad++; bad > 10 {
				t.FailNow()
			}
		}
	}
}

// TestRedisDiffPubsub: the subscribe family, PUBLISH, PUBSUB, subscribed mode, RESET, QUIT
// and glob patterns, byte for byte.
func TestRedisDiffPubsub(t *testing.T) {
	t.Parallel()
	const sub, cmd, sub2 = 0, 1, 2
	steps := []psStep{
		on(sub, "SUBSCRIBE", "a", "b"),
		on(sub, "SUBSCRIBE", "a"),
		on(sub, "PSUBSCRIBE", "a*", "h?llo", "[xy]z", `x\*`, "[a-c]1", "[^a]2", `[\]]3`, "[c-a]4", "*5*"),
		on(cmd, "PUBLISH", "a", "one"),
		on(cmd, "PUBLISH", "hello", "two"),
		on(cmd, "PUBLISH", "yz", ""),
		on(cmd, "PUBLISH", "x*", "star"),
		on(cmd, "PUBLISH", "xa", "no"),
		on(cmd, "PUBLISH", "b1", "range"),
		on(cmd, "PUBLISH", "d1", "outside"),
		on(cmd, "PUBLISH", "b2", "negated"),
		on(cmd, "PUBLISH", "a2", "negated"),
		on(cmd, "PUBLISH", "]3", "escaped"),
		on(cmd, "PUBLISH", "b4", "reversed range"),
		on(cmd, "PUBLISH", "x5y", "stars"),
		on(cmd, "PUBLISH", "nobody", "x"),
		on(cmd, "PUBLISH", "a", "bin\x00ary\r\nmessage"),
		on(sub, "GET", "k"),
		on(sub, "SET", "k", "v"),
		on(sub, "PUBSUB", "NUMPAT"),
		on(sub, "PING"),
		on(sub, "PING", "hi"),
		on(sub, "PING", "a", "b"),
		on(cmd, "PUBSUB", "NUMSUB", "a", "b", "c"),
		on(cmd, "PUBSUB", "NUMSUB"),
		on(cmd, "PUBSUB", "NUMPAT"),
		on(cmd, "PUBSUB", "CHANNELS", "b*"),
		on(cmd, "PUBSUB", "CHANNELS", "zz*"),
		on(cmd, "PUBSUB", "NUMPAT", "x"),
		on(cmd, "PUBSUB", "CHANNELS", "a", "b"),
		on(cmd, "PUBSUB", "FOO"),
		on(cmd, "PUBSUB"),
		on(cmd, "SUBSCRIBE"),
		on(cmd, "PSUBSCRIBE"),
		on(cmd, "PUBLISH", "a"),
		on(cmd, "PUBLISH", "a", "b", "c"),
		on(sub, "UNSUBSCRIBE", "b", "nosuch"),
		on(sub, "PUNSUBSCRIBE", "nosuch"),
		on(sub, "PUNSUBSCRIBE"),
		on(sub, "UNSUBSCRIBE"),
		on(sub, "UNSUBSCRIBE"),
		on(sub, "PUNSUBSCRIBE"),
		on(sub, "PING"),
		on(sub, "GET", "k"),
		on(sub2, "SUBSCRIBE", "c"),
		on(sub2, "RESET"),
		on(sub2, "PING"),
		on(cmd, "PUBLISH", "c", "after reset"),
		on(sub2, "MULTI"),
		on(sub2, "SUBSCRIBE", "d"),
		on(sub2, "SET", "after", "subscribe"), // EXEC runs it: the subscribed mode is checked as commands come
		on(sub2, "EXEC"),
		on(cmd, "PUBLISH", "d", "subscribed by EXEC"),
		on(sub2, "QUIT"),
		on(cmd, "PUBLISH", "d", "after quit"),
	}
	psCompare(t, 3, steps)
}

// TestRedisDiffNotify: keyspace notifications for every command tallyd shares with Redis,
// under several notify-keyspace-events values, and CONFIG SET/GET of the value.
func TestRedisDiffNotify(t *testing.T) {
	t.Parallel()
	const sub, cmd = 0, 1
	steps := []psStep{
		on(cmd, "CONFIG", "GET", "notify-keyspace-events"),
		on(sub, "PSUBSCRIBE", "__key*__:*"),
	}
	for _, v := range []string{"KEA", "Kg$", "Eg$lshzxetdmn", "AKEn", "g", "KA", "E$", "x", "KEA"} {
		steps = append(steps, on(cmd, "CONFIG", "SET", "notify-keyspace-events", v),
			on(cmd, "CONFIG", "GET", "notify-keyspace-events"), on(cmd, "SET", "k", v))
	}
	steps = append(steps, onAll(cmd,
		a("CONFIG", "SET", "notify-keyspace-events", "Q"),
		a("CONFIG", "SET", "notify-keyspace-events", "KEA", "notify-keyspace-events", "K"),
		a("CONFIG", "SET", "notify-keyspace-events"),
		a("CONFIG", "GET", "notify-keyspace-events"),
		a("SET", "k", "v"), a("SET", "k", "v", "EX", "100"), a("SET", "k", "v", "NX"), a("SET", "nokey", "v", "XX"),
		a("SET", "k", "w", "KEEPTTL"), a("SET", "k", "v", "GET"), a("GETSET", "k", "x"), a("SETNX", "n", "1"),
		a("SETNX", "n", "1"), a("SETEX", "s", "100", "v"), a("PSETEX", "s", "100000", "v"),
		a("MSET", "a", "1", "b", "2"), a("MSETNX", "a", "1", "c", "2"), a("MSETNX", "c", "1", "d", "2"),
		a("INCR", "a"), a("DECR", "a"), a("INCRBY", "a", "5"), a("DECRBY", "a", "5"), a("INCR", "k"),
		a("INCRBY", "a", "9223372036854775807"),
		a("APPEND", "a", "0"), a("APPEND", "new", "x"), a("EXPIRE", "a", "100"), a("EXPIRE", "a", "100", "NX"),
		a("EXPIRE", "a", "200", "GT"), a("PEXPIRE", "a", "100000"), a("EXPIREAT", "a", "99999999999"),
		a("PERSIST", "a"), a("PERSIST", "a"), a("EXPIRE", "nokey", "100"), a("EXPIRE", "b", "0"),
		a("PEXPIREAT", "s", "1"), a("DEL", "a", "nokey", "n"), a("UNLINK", "k"), a("DEL", "nokey"),
		a("HSET", "h", "f", "1", "g", "2"), a("HMSET", "h", "f", "3"), a("HINCRBY", "h", "f", "2"),
		a("HINCRBY", "h", "f", "x"), a("HDEL", "h", "nof"), a("HDEL", "h", "f"), a("HDEL", "h", "g"),
		a("SET", "a long key name over sixteen bytes", "v"), a("DEL", "a long key name over sixteen bytes"),
		a("SELECT", "5"), a("SET", "k5", "v"), a("SELECT", "0"),
		// Not SET with a time already past (PXAT 1, EXAT 1): tallyd publishes its expired at once,
		// Redis whenever its expiry cycle or a later access finds the key, a step later or not
		// (docs/redis.md; loop's TestNotifyEvents checks tallyd's events for it).
		a("SET", "p", "v"), a("GET", "p"),
		a("SET", "e", "v", "PX", "300"),
	)...)
	steps = append(steps, pause(500*time.Millisecond)) // expired, when either server expires it
	steps = append(steps, on(cmd, "GET", "e"))
	psCompare(t, 2, steps)
}

// TestRedisDiffOutputLimit: CONFIG SET and GET of client-output-buffer-limit, with Redis's
// errors and its normalised reply.
func TestRedisDiffOutputLimit(t *testing.T) {
	t.Parallel()
	const cmd = 0
	var steps []psStep
	for _, v := range []string{"pubsub 1mb 512kb 10", "pubsub 1mb", "foo 1 2 3", "pubsub x 2 3", "pubsub 1 2 x",
		"pubsub 1 2 -1", "PUBSUB 10 5 1", "normal 0 0 0 pubsub 10 5 1", "pubsub 1k 1gb 0", "pubsub 33554432 8388608 60"} {
		steps = append(steps, on(cmd, "CONFIG", "SET", "client-output-buffer-limit", v),
			on(cmd, "CONFIG", "GET", "client-output-buffer-limit"))
	}
	psCompare(t, 1, steps)
}

// TestRedisDiffSlowSubscriber: a subscriber that does not read is cut by both servers once
// its messages pass the pubsub hard limit: the publisher's counts fall to 0 on both.
func TestRedisDiffSlowSubscriber(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{rdStartRedis(t), rdStartTallyd(t)} {
		c := rdDial(t, addr)
		c.send(t, []string{"CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0"})
		if r := c.reply(t); r != "+OK" {
			t.Fatalf("%s: CONFIG SET: %s", addr, r)
		}
		slow := rdDial(t, addr)
		slow.send(t, []string{"SUBSCRIBE", "ch"})
		slow.reply(t)
		msg := strings.Repeat("m", 64<<10)
		cut := -1
		for i := 0; i < 1000 && cut < 0; i++ {
			c.send(t, []string{"PUBLISH", "ch", msg})
			if c.reply(t) == ":0" {
				cut = i
			}
		}
		if cut < 0 {
			t.Fatalf("%s: the subscriber that does not read was never cut", addr)
		}
		t.Logf("%s: cut after %d messages of 64 KiB", addr, cut)
	}
}
