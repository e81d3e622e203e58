package loop

// Pub/sub and keyspace notifications over real TCP (pubsub.go): the replies byte for byte,
// each event tallyd publishes, the subscribed mode, lock events from text and binary
// clients, go-redis's PubSub, the per-connection bound, and the cut of a slow subscriber.

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/stats"
)

// rawConn is a connection that sends RESP commands and reads raw bytes.
type rawConn struct {
	t testing.TB
	c net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, replyWait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c}
}

func (rc *rawConn) send(args ...string) {
	rc.t.Helper()
	_ = rc.c.SetWriteDeadline(time.Now().Add(replyWait))
	if _, err := rc.c.Write(resp.AppendCommand(nil, args...)); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// expect reads exactly len(want) bytes and compares them with want.
func (rc *rawConn) expect(want string) {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(replyWait))
	got := make([]byte, len(want))
	n, err := io.ReadFull(rc.c, got)
	if err != nil || string(got) != want {
		rc.t.Fatalf("read %q (%v), want %q", got[:n], err, want)
	}
}

// quiet asserts nothing arrives within d.
func (rc *rawConn) quiet(d time.Duration) {
	rc.t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	if n, _ := rc.c.Read(b[:]); n > 0 {
		rc.t.Fatalf("unexpected bytes %q", b[:n])
	}
}

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

func subReply(kind, name string, n int) string {
	b := "*3\r\n" + bulk(kind)
	if name == "\x00" {
		b += "$-1\r\n"
	} else {
		b += bulk(name)
	}
	return b + ":" + strconv.Itoa(n) + "\r\n"
}

func message(ch, msg string) string { return "*3\r\n$7\r\nmessage\r\n" + bulk(ch) + bulk(msg) }
func pmessage(pat, ch, msg string) string {
	return "*4\r\n$8\r\npmessage\r\n" + bulk(pat) + bulk(ch) + bulk(msg)
}

func subErr(name string) string {
	return "-ERR Can't execute '" + name + "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
}

// TestPubsubReplies: the confirmations, pushes and errors of pub/sub, byte for byte as Redis
// 7.0 writes them (e2e/redisdiff_pubsub_test.go compares them with redis-server itself).
func TestPubsubReplies(t *testing.T) {
	ts := startSlock(t, nil)
	sub := dialRaw(t, ts.slockAddr)
	pub := dialRaw(t, ts.slockAddr)

	sub.send("SUBSCRIBE", "a", "b")
	sub.expect(subReply("subscribe", "a", 1) + subReply("subscribe", "b", 2))
	sub.send("PSUBSCRIBE", "a*", "h?llo", "[xy]z")
	sub.expect(subReply("psubscribe", "a*", 3) + subReply("psubscribe", "h?llo", 4) + subReply("psubscribe", "[xy]z", 5))
	sub.send("SUBSCRIBE", "a") // again: counted once
	sub.expect(subReply("subscribe", "a", 5))

	pub.send("PUBLISH", "a", "one") // the channel's subscriber and the pattern a*'s
	pub.expect(":2\r\n")
	sub.expect(message("a", "one") + pmessage("a*", "a", "one"))
	pub.send("PUBLISH", "hello", "two")
	pub.expect(":1\r\n")
	sub.expect(pmessage("h?llo", "hello", "two"))
	pub.send("PUBLISH", "yz", "")
	pub.expect(":1\r\n")
	sub.expect(pmessage("[xy]z", "yz", ""))
	pub.send("PUBLISH", "nobody", "x")
	pub.expect(":0\r\n")

	// Subscribed mode: only the subscribe family, PING, QUIT and RESET.
	sub.send("GET", "k")
	sub.expect(subErr("get"))
	sub.send("PUBSUB", "NUMPAT")
	sub.expect(subErr("pubsub|numpat"))
	sub.send("PING")
	sub.expect("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
	sub.send("PING", "hi")
	sub.expect("*2\r\n$4\r\npong\r\n$2\r\nhi\r\n")

	pub.send("PUBSUB", "NUMSUB", "a", "b", "c")
	pub.expect("*6\r\n" + bulk("a") + ":1\r\n" + bulk("b") + ":1\r\n" + bulk("c") + ":0\r\n")
	pub.send("PUBSUB", "NUMPAT")
	pub.expect(":3\r\n")
	pub.send("PUBSUB", "CHANNELS", "b*")
	pub.expect("*1\r\n" + bulk("b"))
	pub.send("PUBSUB", "NUMPAT", "x")
	pub.expect("-ERR wrong number of arguments for 'pubsub|numpat' command\r\n")
	pub.send("PUBSUB", "CHANNELS", "a", "b")
	pub.expect("-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n")
	pub.send("PUBSUB", "FOO")
	pub.expect("-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n")
	pub.send("SUBSCRIBE")
	pub.expect("-ERR wrong number of arguments for 'subscribe' command\r\n")
	pub.send("PUBLISH", "a")
	pub.expect("-ERR wrong number of arguments for 'publish' command\r\n")

	sub.send("UNSUBSCRIBE", "b", "nosuch")
	sub.expect(subReply("unsubscribe", "b", 4) + subReply("unsubscribe", "nosuch", 4))
	sub.send("PUNSUBSCRIBE")
	sub.expect(subReply("punsubscribe", "a*", 3) + subReply("punsubscribe", "h?llo", 2) + subReply("punsubscribe", "[xy]z", 1))
	sub.send("UNSUBSCRIBE")
	sub.expect(subReply("unsubscribe", "a", 0))
	sub.send("UNSUBSCRIBE")
	sub.expect(subReply("unsubscribe", "\x00", 0))
	sub.send("PUNSUBSCRIBE")
	sub.expect(subReply("punsubscribe", "\x00", 0))
	sub.send("PING") // out of subscribed mode
	sub.expect("+PONG\r\n")

	// RESET leaves subscribed mode; MULTI can hold a SUBSCRIBE, as in Redis.
	sub.send("SUBSCRIBE", "c")
	sub.expect(subReply("subscribe", "c", 1))
	sub.send("RESET")
	sub.expect("+RESET\r\n")
	sub.send("GET", "k")
	sub.expect("$-1\r\n")
	pub.send("PUBLISH", "c", "x")
	pub.expect(":0\r\n")
	sub.send("MULTI")
	sub.send("SUBSCRIBE", "d")
	sub.send("EXEC")
	sub.expect("+OK\r\n+QUEUED\r\n*1\r\n" + subReply("subscribe", "d", 1))
	sub.send("QUIT")
	sub.expect("+OK\r\n")
	ts.healthy(t)
	var ch, pat int
	ts.onLoop(t, func() { ch, pat = ts.ps.pubsubCounts() })
	if ch != 0 || pat != 0 {
		t.Fatalf("after every subscriber left: %d channels, %d patterns", ch, pat)
	}
}

// event is one keyspace notification a subscriber received.
type event struct{ ch, msg string }

// eventSub is a PSUBSCRIBE __key*__:* subscriber that collects the notifications.
type eventSub struct {
	t  *testing.T
	rc *respClient
}

func subscribeEvents(t *testing.T, addr string) *eventSub {
	t.Helper()
	rc := dialResp(t, addr)
	if got := showResp(rc.cmd("PSUBSCRIBE", "__key*__:*")); got != `["psubscribe" "__key*__:*" :1]` {
		t.Fatalf("PSUBSCRIBE: %s", got)
	}
	if got := showResp(rc.cmd("SUBSCRIBE", "fence")); got != `["subscribe" "fence" :2]` {
		t.Fatalf("SUBSCRIBE: %s", got)
	}
	return &eventSub{t: t, rc: rc}
}

// next returns the next n notifications.
func (es *eventSub) next(n int) []event {
	es.t.Helper()
	var out []event
	for range n {
		r, err := es.rc.tryReply(replyWait)
		if err != nil {
			es.t.Fatalf("after %q: %v", out, err)
		}
		switch {
		case len(r.Elems) == 4 && string(r.Elems[0].Str) == "pmessage":
			out = append(out, event{string(r.Elems[2].Str), string(r.Elems[3].Str)})
		case len(r.Elems) == 3 && string(r.Elems[0].Str) == "message":
			out = append(out, event{string(r.Elems[1].Str), string(r.Elems[2].Str)})
		default:
			es.t.Fatalf("not a message: %s", showResp(r))
		}
	}
	return out
}

// ev is the pair of notifications of event on key in db 0 (keyspace, then keyevent).
func ev(key, name string) []event {
	return []event{{"__keyspace@0__:" + key, name}, {"__keyevent@0__:" + name, key}}
}

func evs(pairs ...string) []event {
	var out []event
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, ev(pairs[i], pairs[i+1])...)
	}
	return out
}

func expectEvents(t *testing.T, what string, got, want []event) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// TestNotifyEvents: every command that changes a key publishes Redis's events for it, in
// Redis's order, and nothing else (a command that changes nothing publishes nothing).
func TestNotifyEvents(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.NotifyKeyspaceEvents = "KEA" })
	es := subscribeEvents(t, ts.slockAddr)
	rc := dialResp(t, ts.slockAddr)
	for _, tc := range []struct {
		cmd  []string
		want []event
	}{
		{c("SET", "k", "v"), evs("k", "set")},
		{c("SET", "k", "v", "EX", "100"), evs("k", "set", "k", "expire")},
		{c("SET", "k", "v", "NX"), nil},
		{c("SET", "nokey", "v", "XX"), nil},
		{c("SET", "k", "w", "KEEPTTL"), evs("k", "set")},
		{c("GETSET", "k", "x"), evs("k", "set")},
		{c("SETNX", "n", "1"), evs("n", "set")},
		{c("SETNX", "n", "1"), nil},
		{c("SETEX", "s", "100", "v"), evs("s", "set", "s", "expire")},
		{c("PSETEX", "s", "100000", "v"), evs("s", "set", "s", "expire")},
		{c("MSET", "a", "1", "b", "2"), evs("a", "set", "b", "set")},
		{c("MSETNX", "a", "1", "c", "2"), nil},
		{c("INCR", "a"), evs("a", "incrby")},
		{c("DECR", "a"), evs("a", "incrby")},
		{c("INCRBY", "a", "5"), evs("a", "incrby")},
		{c("DECRBY", "a", "5"), evs("a", "incrby")},
		{c("INCR", "k"), nil}, // not an integer
		{c("APPEND", "a", "0"), evs("a", "append")},
		{c("EXPIRE", "a", "100"), evs("a", "expire")},
		{c("EXPIRE", "a", "100", "NX"), nil},
		{c("PERSIST", "a"), evs("a", "persist")},
		{c("PERSIST", "a"), nil},
		{c("EXPIRE", "nokey", "100"), nil},
		{c("EXPIRE", "b", "0"), evs("b", "del")},
		{c("PEXPIREAT", "s", "1"), evs("s", "del")},
		{c("SET", "p", "v", "PXAT", "1"), evs("p", "set", "p", "expire", "p", "expired")},
		{c("DEL", "a", "nokey", "n"), evs("a", "del", "n", "del")},
		{c("UNLINK", "k"), evs("k", "del")},
		{c("HSET", "h", "f", "1", "g", "2"), evs("h", "hset")},
		{c("HINCRBY", "h", "f", "2"), evs("h", "hincrby")},
		{c("HDEL", "h", "nof"), nil},
		{c("HDEL", "h", "f"), evs("h", "hdel")},
		{c("HDEL", "h", "g"), evs("h", "hdel", "h", "del")},
		{c("SET", "a long key name over sixteen bytes", "v"), evs("a long key name over sixteen bytes", "set")},
		// Redis 8.4's compare-and-set, Valkey's DELIFEQ, Redis 7's GETDEL and GETEX.
		{c("SET", "q", "v", "IFEQ", "other"), nil},
		{c("SET", "q", "w", "IFNE", "other"), evs("q", "set")},
		{c("DELEX", "q", "IFEQ", "other"), nil},
		{c("DELEX", "q", "IFEQ", "w"), evs("q", "del")},
		{c("SET", "q", "v"), evs("q", "set")},
		{c("DELIFEQ", "q", "v"), evs("q", "del")},
		{c("DELEX", "q"), nil},
		{c("SET", "q", "v"), evs("q", "set")},
		{c("GETEX", "q"), nil},
		{c("GETEX", "q", "EX", "100"), evs("q", "expire")},
		{c("GETEX", "q", "PERSIST"), evs("q", "persist")},
		{c("GETEX", "q", "PERSIST"), nil},
		{c("GETEX", "q", "PXAT", "1"), evs("q", "del")},
		{c("SET", "q", "v"), evs("q", "set")},
		{c("GETDEL", "q"), evs("q", "del")},
		{c("GETDEL", "q"), nil},
	} {
		rc.cmd(tc.cmd...)
		rc.send("PUBLISH", "fence", "x") // a marker: everything before it was published
		rc.reply()
		got := []event{}
		for {
			e := es.next(1)[0]
			if e.ch == "fence" {
				break
			}
			got = append(got, e)
		}
		expectEvents(t, strings.Join(tc.cmd, " "), got, append([]event{}, tc.want...))
	}
	// Expiry: expired when the loop expires the key, named by its value (a long name too).
	rc.cmd("SET", "e", "v", "PX", "30")
	rc.cmd("SET", "a long key name over sixteen bytes", "v", "PX", "40")
	expectEvents(t, "SET PX", es.next(8), evs("e", "set", "e", "expire",
		"a long key name over sixteen bytes", "set", "a long key name over sixteen bytes", "expire"))
	expectEvents(t, "expiry", es.next(4), evs("e", "expired", "a long key name over sixteen bytes", "expired"))
	ts.healthy(t)
}

// TestNotifyClasses: only the classes asked for are published, on the channels asked for,
// and CONFIG SET changes them at once; CONFIG GET answers the value normalised as Redis does.
func TestNotifyClasses(t *testing.T) {
	ts := startSlock(t, nil)
	rc := dialResp(t, ts.slockAddr)
	sub := dialRaw(t, ts.slockAddr)
	sub.send("PSUBSCRIBE", "*")
	sub.expect(subReply("psubscribe", "*", 1))
	rc.cmd("SET", "k", "v") // notifications off by default
	sub.quiet(50 * time.Millisecond)
	for _, tc := range []struct{ set, get string }{
		{"KEA", "AKE"}, {"Kg$", "g$K"}, {"Eg$lshzxetdmn", "AEm"}, {"AKEn", "AKE"}, {"g", "g"}, {"", ""},
		{"KL", "LK"}, {"AL", "AL"}, {"x$E", "$xE"},
	} {
		if got := showResp(rc.cmd("CONFIG", "SET", "notify-keyspace-events", tc.set)); got != "+OK" {
			t.Fatalf("CONFIG SET %q: %s", tc.set, got)
		}
		want := `["notify-keyspace-events" "` + tc.get + `"]`
		if got := showResp(rc.cmd("CONFIG", "GET", "notify-keyspace-events")); got != want {
			t.Fatalf("CONFIG GET after %q: %s, want %s", tc.set, got, want)
		}
	}
	if got := showResp(rc.cmd("CONFIG", "SET", "notify-keyspace-events", "Q")); got != "-"+notifyErr {
		t.Fatalf("a bad class: %s", got)
	}
	rc.cmd("CONFIG", "SET", "notify-keyspace-events", "K$")
	rc.cmd("SET", "k", "v")
	rc.cmd("DEL", "k") // g is off
	rc.cmd("SET", "k", "v")
	sub.expect(pmessage("*", "__keyspace@0__:k", "set") + pmessage("*", "__keyspace@0__:k", "set"))
	rc.cmd("CONFIG", "SET", "notify-keyspace-events", "Eg")
	rc.cmd("SELECT", "3")
	rc.cmd("SET", "k", "v")
	rc.cmd("DEL", "k")
	sub.expect(pmessage("*", "__keyevent@3__:del", "k"))
	rc.cmd("CONFIG", "SET", "notify-keyspace-events", "")
	rc.cmd("SET", "k", "v")
	sub.quiet(50 * time.Millisecond)
}

// TestNotifyLocks: slock's lock events (class L): lock and unlock from text LOCK/UNLOCK and
// from binary frames, lock-expired when a hold lapses; a text key by its name, a binary key
// by its hex (or by the name whose LockKey it is).
func TestNotifyLocks(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.NotifyKeyspaceEvents = "KEL" })
	es := subscribeEvents(t, ts.slockAddr)
	rc := dialResp(t, ts.slockAddr)
	tl := parseTextLock(t, rc.cmd("LOCK", "job", "TIMEOUT", "0", "EXPRIED", "30"))
	if tl.Name != "OK" {
		t.Fatalf("LOCK: %s", tl.Name)
	}
	expectEvents(t, "text LOCK", es.next(2), evs("job", "lock"))
	rc.cmd("UNLOCK", "job")
	expectEvents(t, "text UNLOCK", es.next(2), evs("job", "unlock"))
	rc.cmd("PUSH", "pushed", "TIMEOUT", "0", "EXPRIED", "30")
	expectEvents(t, "PUSH", es.next(2), evs("pushed", "lock"))

	// A waiter granted the lock when its holder unlocks: unlock, then lock.
	holder, waiter := dialResp(t, ts.slockAddr), dialResp(t, ts.slockAddr)
	holder.cmd("LOCK", "w", "TIMEOUT", "0", "EXPRIED", "30")
	expectEvents(t, "holder", es.next(2), evs("w", "lock"))
	waiter.send("LOCK", "w", "TIMEOUT", "5", "EXPRIED", "30")
	time.Sleep(20 * time.Millisecond)
	holder.cmd("UNLOCK", "w")
	if tl := parseTextLock(t, waiter.reply()); tl.Name != "OK" {
		t.Fatalf("waiter: %s", tl.Name)
	}
	expectEvents(t, "handover", es.next(4), evs("w", "unlock", "w", "lock"))

	bc := dialSlock(t, ts.slockAddr)
	var bin [16]byte
	copy(bin[:], "\x81binary-key-0001")
	id := bc.id()
	bc.start(lockFrame(slock.TypeLock, 0, 0, bin, id, 0, 30, 0, 0, nil), "binary lock").want(slock.ResultOK)
	name := hex.EncodeToString(bin[:])
	expectEvents(t, "binary lock", es.next(2), evs(name, "lock"))
	bc.start(lockFrame(slock.TypeUnlock, 0, 0, bin, id, 0, 0, 0, 0, nil), "binary unlock").want(slock.ResultOK)
	expectEvents(t, "binary unlock", es.next(2), evs(name, "unlock"))
	bc.start(lockFrame(slock.TypeLock, 0, 0, key16("job"), bc.id(), 0, ms(30), 0, 0, nil), "binary lock of a text name").want(slock.ResultOK)
	expectEvents(t, "binary lock of job", es.next(2), evs("job", "lock"))
	expectEvents(t, "its expiry", es.next(2), evs("job", "lock-expired"))

	// A key/value command is no lock event; without L, locks publish nothing.
	rc.cmd("SET", "k", "v")
	rc.cmd("CONFIG", "SET", "notify-keyspace-events", "KE$")
	rc.cmd("LOCK", "job2", "TIMEOUT", "0", "EXPRIED", "30")
	rc.cmd("SET", "k", "v")
	expectEvents(t, "SET", es.next(2), evs("k", "set"))
}

// TestPubsubGoRedis: go-redis's PubSub against tallyd: Subscribe, PSubscribe, its message
// channel, Ping in subscribed mode, Unsubscribe, and keyspace notifications.
func TestPubsubGoRedis(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.NotifyKeyspaceEvents = "KEA" })
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: ts.slockAddr, Protocol: 2})
	defer rdb.Close()
	ps := rdb.Subscribe(ctx, "news")
	defer ps.Close()
	if m, err := ps.Receive(ctx); err != nil {
		t.Fatalf("Receive: %v", err)
	} else if s, ok := m.(*redis.Subscription); !ok || s.Kind != "subscribe" || s.Channel != "news" || s.Count != 1 {
		t.Fatalf("first message %#v", m)
	}
	if err := ps.PSubscribe(ctx, "__keyspace@0__:counter*"); err != nil {
		t.Fatal(err)
	}
	if err := ps.Ping(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	ch := ps.Channel()
	if n, err := rdb.Publish(ctx, "news", "hello").Result(); err != nil || n != 1 {
		t.Fatalf("Publish: %d %v", n, err)
	}
	rdb.Incr(ctx, "counter:1")
	want := []string{"news|hello|", "__keyspace@0__:counter:1|incrby|__keyspace@0__:counter*"}
	for i, w := range want {
		select {
		case m := <-ch:
			if got := m.Channel + "|" + m.Payload + "|" + m.Pattern; got != w {
				t.Fatalf("message %d: %s, want %s", i, got, w)
			}
		case <-time.After(replyWait):
			t.Fatalf("message %d: none", i)
		}
	}
	if err := ps.Unsubscribe(ctx, "news"); err != nil {
		t.Fatal(err)
	}
	n, err := rdb.PubSubNumSub(ctx, "news").Result()
	for end := time.Now().Add(replyWait); err == nil && n["news"] != 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
		n, err = rdb.PubSubNumSub(ctx, "news").Result()
	}
	if err != nil || n["news"] != 0 {
		t.Fatalf("NUMSUB after UNSUBSCRIBE: %v %v", n, err)
	}
	if pats, err := rdb.PubSubNumPat(ctx).Result(); err != nil || pats != 1 {
		t.Fatalf("NUMPAT: %d %v", pats, err)
	}
}

// TestPubsubLimit: subscriptions per connection are bounded (--max-subscriptions), with a
// clear error; the ones before the limit stand.
func TestPubsubLimit(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxSubscriptions = 3 })
	sub := dialRaw(t, ts.slockAddr)
	sub.send("SUBSCRIBE", "a", "b")
	sub.expect(subReply("subscribe", "a", 1) + subReply("subscribe", "b", 2))
	sub.send("PSUBSCRIBE", "c*", "d*")
	sub.expect(subReply("psubscribe", "c*", 3) +
		"-ERR max subscriptions per connection reached (3, --max-subscriptions): not subscribed to 'd*'\r\n")
	sub.send("SUBSCRIBE", "a") // already subscribed: fine at the limit
	sub.expect(subReply("subscribe", "a", 3))
}

// TestPubsubACLChannels: a user's &patterns bound the channels it may publish to and
// subscribe to, as Redis 7.0's (a PSUBSCRIBE pattern must be one of them as written).
func TestPubsubACLChannels(t *testing.T) {
	ts, _ := aclServer(t, "user default on nopass ~* &* +@all\nuser al on nopass ~* &news.* +@all\n", nil)
	rc := dialRaw(t, ts.slockAddr)
	rc.send("AUTH", "al", "x")
	rc.expect("+OK\r\n")
	const noperm = "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n"
	rc.send("PUBLISH", "other", "m")
	rc.expect(noperm)
	rc.send("PUBLISH", "news.1", "m")
	rc.expect(":0\r\n")
	rc.send("SUBSCRIBE", "news.a", "other")
	rc.expect(noperm)
	rc.send("PSUBSCRIBE", "news.a*")
	rc.expect(noperm)
	rc.send("PSUBSCRIBE", "news.*")
	rc.expect(subReply("psubscribe", "news.*", 1))
}

// TestPubsubSlowSubscriber: a subscriber that never reads is closed once its unsent
// messages pass the hard limit, with a log line; the others keep receiving.
func TestPubsubSlowSubscriber(t *testing.T) {
	ts := startSlock(t, func(c *Config) {
		c.PubsubLimit = PubsubLimit{Hard: 1 << 20, Soft: 256 << 10, SoftFor: time.Hour}
	})
	slow := dialRaw(t, ts.slockAddr)
	slow.send("SUBSCRIBE", "ch")
	slow.expect(subReply("subscribe", "ch", 1))
	fast := dialResp(t, ts.slockAddr)
	fast.cmd("SUBSCRIBE", "ch")
	pub := dialResp(t, ts.slockAddr)
	msg := strings.Repeat("x", 64<<10)
	var wg sync.WaitGroup
	wg.Add(1)
	got := 0
	go func() { // the fast subscriber reads everything
		defer wg.Done()
		for got < 200 {
			r, err := fast.tryReply(10 * time.Second)
			if err != nil {
				return
			}
			if len(r.Elems) == 3 && len(r.Elems[2].Str) == len(msg) {
				got++
			}
		}
	}()
	cut := false
	for i := 0; i < 200; i++ {
		n := pub.cmd("PUBLISH", "ch", msg).Int
		if n == 1 {
			cut = true
		}
	}
	wg.Wait()
	if !cut {
		t.Fatal("the subscriber that does not read was never cut (PUBLISH always reached 2)")
	}
	if got != 200 {
		t.Fatalf("the reading subscriber got %d of 200 messages", got)
	}
	ts.log.waitFor(t, "closing subscriber: over client-output-buffer-limit pubsub")
	ts.healthy(t)
	var l stats.Loop
	ts.onLoop(t, func() { l = ts.snapshot(time.Now()).Loop })
	if l.PubsubCut != 1 || l.PubsubMessages < 200 || l.PubsubChannels != 1 {
		t.Fatalf("metrics: %d cut, %d messages, %d channels; want 1, at least 200, 1", l.PubsubCut, l.PubsubMessages, l.PubsubChannels)
	}
}

// TestPubsubSoftLimit: past the soft limit for its seconds, a subscriber is cut; below it
// (it read), the clock starts again.
func TestPubsubSoftLimit(t *testing.T) {
	ts := startSlock(t, func(c *Config) {
		c.PubsubLimit = PubsubLimit{Hard: 0, Soft: 512 << 10, SoftFor: 200 * time.Millisecond}
	})
	slow := dialRaw(t, ts.slockAddr)
	slow.send("SUBSCRIBE", "ch")
	slow.expect(subReply("subscribe", "ch", 1))
	pub := dialResp(t, ts.slockAddr)
	msg := strings.Repeat("y", 64<<10)
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		if pub.cmd("PUBLISH", "ch", msg).Int == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if e := time.Since(start); e < 200*time.Millisecond || e >= 5*time.Second {
		t.Fatalf("cut after %v: want past the soft seconds (200ms), before 5s", e)
	}
	ts.log.waitFor(t, `"limit":"soft"`)
}

// TestPublishAllocs: publishing to channel subscribers over real sockets allocates nothing in
// steady state (TestPublishAllocsMany: more subscribers than the loop keeps free buffers).
func TestPublishAllocs(t *testing.T) {
	ts := startSlock(t, nil)
	var subs []*rawConn
	for i := range 20 {
		sc := dialRaw(t, ts.slockAddr)
		sc.send("SUBSCRIBE", "ch")
		sc.expect(subReply("subscribe", "ch", 1))
		subs = append(subs, sc)
		_ = i
	}
	ch, msg := []byte("ch"), []byte("a message of some length")
	var allocs float64
	ts.onLoop(t, func() {
		allocs = testing.AllocsPerRun(200, func() {
			if ts.ps.publish(ch, msg) != 20 {
				panic("not every subscriber")
			}
			ts.flush()
		})
	})
	if allocs != 0 {
		t.Fatalf("PUBLISH to 20 subscribers: %.1f allocations, want 0", allocs)
	}
	var notes float64
	ts.onLoop(t, func() {
		ts.ps.notify = nKeyspace | nKeyevent | nAll
		key := []byte("counter")
		notes = testing.AllocsPerRun(200, func() {
			ts.ps.notifyKey(0, key, nString, "incrby")
			ts.flush()
		})
		ts.ps.notify = 0
	})
	if notes != 0 {
		t.Fatalf("a keyspace notification: %.1f allocations, want 0", notes)
	}
}

// TestPubsubFanout: 1,000 subscribers each receive every keyspace event of a counter, while
// one subscriber that never reads is cut at its limit, and a normal client's commands keep
// answering within a generous bound meanwhile.
func TestPubsubFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	ts := startSlock(t, func(c *Config) {
		c.NotifyKeyspaceEvents = "K$"
		c.PubsubLimit = PubsubLimit{Hard: 1 << 20, Soft: 0, SoftFor: 0}
	})
	const subs, events = 1000, 100
	var wg sync.WaitGroup
	counts := make([]int, subs)
	for i := range subs {
		rc := dialResp(t, ts.slockAddr)
		if got := showResp(rc.cmd("SUBSCRIBE", "__keyspace@0__:counter")); got != `["subscribe" "__keyspace@0__:counter" :1]` {
			t.Fatalf("subscriber %d: %s", i, got)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for counts[i] < events {
				r, err := rc.tryReply(20 * time.Second)
				if err != nil {
					return
				}
				if len(r.Elems) == 3 && string(r.Elems[2].Str) == "incrby" {
					counts[i]++
				}
			}
		}()
	}
	slow := dialRaw(t, ts.slockAddr)
	slow.send("SUBSCRIBE", "__keyspace@0__:counter", "bulk")
	slow.expect(subReply("subscribe", "__keyspace@0__:counter", 1) + subReply("subscribe", "bulk", 2))

	// A normal client's latency, measured all along.
	stop := make(chan struct{})
	var worst time.Duration
	var lat sync.WaitGroup
	lat.Add(1)
	go func() {
		defer lat.Done()
		rc := dialResp(t, ts.slockAddr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			rc.cmd("GET", "counter")
			worst = max(worst, time.Since(start))
			time.Sleep(2 * time.Millisecond)
		}
	}()

	pub := dialResp(t, ts.slockAddr)
	big := strings.Repeat("z", 64<<10)
	cut := false
	for i := range events {
		pub.cmd("INCR", "counter")
		if !cut && pub.cmd("PUBLISH", "bulk", big).Int == 0 {
			cut = true
		}
		_ = i
	}
	for i := 0; !cut && i < 400; i++ {
		cut = pub.cmd("PUBLISH", "bulk", big).Int == 0
	}
	wg.Wait()
	close(stop)
	lat.Wait()
	if !cut {
		t.Fatal("the subscriber that never reads was not cut")
	}
	for i, n := range counts {
		if n != events {
			t.Fatalf("subscriber %d received %d of %d events", i, n, events)
		}
	}
	if worst > 2*time.Second {
		t.Fatalf("a normal client's GET took up to %v while 1,000 subscribers were served", worst)
	}
	t.Logf("1,000 subscribers × %d events; worst GET latency meanwhile %v", events, worst)
	ts.log.waitFor(t, "closing subscriber")
}

// TestSimPubsubCluster: in a cluster, a watcher on a follower sees the keyspace events of a
// write made through the leader, and of one forwarded by another follower, exactly as the
// leader's own watcher does; a PUBLISH on any member reaches subscribers on every member.
func TestSimPubsubCluster(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run("seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			c := newSim(t, 3, seed, func(o *simOptions) {
				o.mod = func(_ uint64, cfg *Config) { cfg.NotifyKeyspaceEvents = "KEA" }
			})
			l := c.elect()
			f := c.others(l)
			var watchers []*simClient
			for _, id := range []uint64{l, f[0], f[1]} {
				w := c.client(id)
				if r := w.do("SUBSCRIBE", "__keyspace@0__:k", "news"); len(r.r.Elems) != 3 || r.r.Elems[2].Int != 1 {
					t.Fatalf("SUBSCRIBE on m%d: %s", id, r)
				}
				if r := w.reply(simReplyWait); len(r.r.Elems) != 3 || r.r.Elems[2].Int != 2 {
					t.Fatalf("SUBSCRIBE on m%d: %s", id, r)
				}
				watchers = append(watchers, w)
			}
			if r := c.client(l).do("SET", "k", "v"); !r.isOK() {
				t.Fatalf("SET on the leader: %s", r)
			}
			if r := c.client(f[1]).do("INCR", "k2"); !r.isInt(1) {
				t.Fatalf("INCR on a follower: %s", r)
			}
			if r := c.client(f[0]).do("DEL", "k"); !r.isInt(1) {
				t.Fatalf("DEL on a follower: %s", r)
			}
			if r := c.client(f[1]).do("PUBLISH", "news", "hello"); r.raw == nil || r.r.Kind != ':' {
				t.Fatalf("PUBLISH on a follower: %s", r)
			}
			want := []string{"__keyspace@0__:k set", "__keyspace@0__:k del", "news hello"}
			for i, w := range watchers {
				for _, ws := range want {
					r := w.reply(5 * time.Second)
					if len(r.r.Elems) != 3 || string(r.r.Elems[0].Str) != "message" ||
						string(r.r.Elems[1].Str)+" "+string(r.r.Elems[2].Str) != ws {
						t.Fatalf("watcher %d (on m%d, the leader is m%d): %s, want message %s", i, w.m.id, l, r, ws)
					}
				}
				if r := w.reply(200 * time.Millisecond); !r.none {
					t.Fatalf("watcher %d: one message too many: %s", i, r)
				}
			}
			c.noPanics()
		})
	}
}

// TestPubsubNotIdle: a subscriber is never closed by --idle-timeout, as Redis exempts pub/sub
// clients from timeout; once it unsubscribes, it is idle again.
func TestPubsubNotIdle(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
	sub := dialRaw(t, ts.slockAddr)
	sub.send("SUBSCRIBE", "ch")
	sub.expect(subReply("subscribe", "ch", 1))
	time.Sleep(1500 * time.Millisecond)
	pub := dialResp(t, ts.slockAddr)
	if n := pub.cmd("PUBLISH", "ch", "still here").Int; n != 1 {
		t.Fatalf("PUBLISH after the idle timeout reached %d subscribers", n)
	}
	sub.expect(message("ch", "still here"))
	sub.send("UNSUBSCRIBE")
	sub.expect(subReply("unsubscribe", "ch", 0))
	rc := &respClient{t: t, c: sub.c}
	rc.expectClosed()
}
