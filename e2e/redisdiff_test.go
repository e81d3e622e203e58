package e2e

// tallyd's Redis-text commands against the real redis-server (Debian's, 7.0): the same
// commands, sent the same way, must get replies of the same type and value, except where
// docs/redis.md's command table says tallyd differs on purpose.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tallyd/tallyd/proto/resp"
)

// rdStartRedis runs redis-server on a free port, without persistence, with extra
// arguments, or skips the test.
func rdStartRedis(t *testing.T, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed: run scripts/ensure-python-redis.sh (as root it installs Debian's redis-server)")
	}
	port := freePort(t)
	dir := t.TempDir()
	p := startCmd(t, exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no"}, extra...)...))
	p.waitLog(t, "Ready to accept connections")
	return "127.0.0.1:" + strconv.Itoa(port)
}

// rdStartTallyd runs tallyd with its Redis-text port, and extra arguments, and returns that
// port's address.
func rdStartTallyd(t *testing.T, extra ...string) string {
	t.Helper()
	port := freePort(t)
	p := start(t, 0, append([]string{"-l", "127.0.0.1", "--counter-port=0", "--slock-port=" + strconv.Itoa(port)}, extra...)...)
	p.waitLog(t, "tallyd listening")
	return "127.0.0.1:" + strconv.Itoa(port)
}

// rdConn is a raw RESP connection: requests out, replies in as resp.Reply.
type rdConn struct {
	c   net.Conn
	buf []byte
}

func rdDial(t *testing.T, addr string) *rdConn {
	t.Helper()
	return &rdConn{c: dialRetry(t, addr)}
}

func (c *rdConn) send(t *testing.T, cmds ...[]string) {
	t.Helper()
	var b []byte
	for _, args := range cmds {
		b = resp.AppendCommand(b, args...)
	}
	_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(b); err != nil {
		t.Fatalf("write to %s: %v", c.c.RemoteAddr(), err)
	}
}

// reply reads one reply, rendered by rdShow.
func (c *rdConn) reply(t *testing.T) string {
	t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		r, n, err := resp.ParseReply(c.buf)
		if err != nil {
			t.Fatalf("reply from %s: %v", c.c.RemoteAddr(), err)
		}
		if n > 0 {
			s := rdShow(r)
			c.buf = c.buf[n:]
			return s
		}
		var b [64 << 10]byte
		m, err := c.c.Read(b[:])
		if err != nil {
			t.Fatalf("read from %s: %v (have %q)", c.c.RemoteAddr(), err, c.buf)
		}
		c.buf = append(c.buf, b[:m]...)
	}
}

// rdShow renders a reply with its type: +simple, -error, :int, $"bulk", $nil, *[a b], *nil.
func rdShow(r resp.Reply) string {
	switch r.Kind {
	case '+', '-':
		return string(r.Kind) + string(r.Str)
	case ':':
		return ":" + strconv.FormatInt(r.Int, 10)
	case '$':
		if r.Null {
			return "$nil"
		}
		return "$" + strconv.Quote(string(r.Str))
	case '*':
		if r.Null {
			return "*nil"
		}
		e := make([]string, len(r.Elems))
		for i := range r.Elems {
			e[i] = rdShow(r.Elems[i])
		}
		return "*[" + strings.Join(e, " ") + "]"
	}
	return "?" + string(r.Kind)
}

// A rdCase is a command line and how its two replies are compared.
type rdCase struct {
	args []string
	mode rdMode
	// want is tallyd's reply where it differs from Redis on purpose (mode rdDiffers): the
	// docs/redis.md's command table says why.
	want string
}

type rdMode uint8

const (
	rdExact   rdMode = iota
	rdSorted         // an array in no particular order: compared sorted
	rdNear           // an integer that may differ by the time between the two requests: ±1500
	rdKind           // only the type (and for arrays the length) must match: server facts
	rdDiffers        // intended: tallyd answers want
)

func c(args ...string) rdCase { return rdCase{args: args} }

func (r rdCase) sorted() rdCase { r.mode = rdSorted; return r }
func (r rdCase) near() rdCase   { r.mode = rdNear; return r }
func (r rdCase) kind() rdCase   { r.mode = rdKind; return r }
func (r rdCase) differs(want string) rdCase {
	r.mode, r.want = rdDiffers, want
	return r
}

// rdDual is a pair of connections, one to redis-server and one to tallyd.
type rdDual struct {
	t        *testing.T
	ref, tal *rdConn
	n        int // cases compared
	syncs    int
	last     string // the case compared before
	tx       bool
}

// run sends cases one at a time (pipelined: all at once) and compares each pair of replies.
func (d *rdDual) run(pipelined bool, cases ...rdCase) {
	d.t.Helper()
	if pipelined {
		all := make([][]string, len(cases))
		for i := range cases {
			all[i] = cases[i].args
		}
		d.ref.send(d.t, all...)
		d.tal.send(d.t, all...)
		for _, k := range cases {
			d.compare(k, d.ref.reply(d.t), d.tal.reply(d.t))
		}
		d.sync()
		return
	}
	for _, k := range cases {
		d.ref.send(d.t, k.args)
		d.tal.send(d.t, k.args)
		d.compare(k, d.ref.reply(d.t), d.tal.reply(d.t))
		if !d.inTx(k) && !strings.EqualFold(k.args[0], "QUIT") {
			d.sync()
		}
	}
}

// inTx tracks whether the connections are between MULTI and EXEC (or DISCARD) after k.
func (d *rdDual) inTx(k rdCase) bool {
	switch strings.ToUpper(k.args[0]) {
	case "MULTI":
		d.tx = true
	case "EXEC", "DISCARD":
		d.tx = false
	}
	return d.tx
}

// sync makes sure that neither side answered more than it was asked: an ECHO's reply
// must be the next one.
func (d *rdDual) sync() {
	d.t.Helper()
	d.syncs++
	mark := "sync " + strconv.Itoa(d.syncs)
	for _, c := range []*rdConn{d.ref, d.tal} {
		c.send(d.t, []string{"ECHO", mark})
		for i := 0; ; i++ {
			r := c.reply(d.t)
			if r == "$"+strconv.Quote(mark) {
				break
			}
			d.t.Errorf("%s answered once more than asked: %s", c.c.RemoteAddr(), r)
		}
	}
}

func (d *rdDual) compare(k rdCase, ref, tal string) {
	d.t.Helper()
	d.n++
	what := rdQuote(k.args)
	defer func() { d.last = what }()
	switch k.mode {
	case rdDiffers:
		if tal != k.want {
			d.t.Errorf("%s: tallyd %s, want %s (intended difference; redis-server %s)", what, tal, k.want, ref)
		}
		if ref == tal {
			d.t.Errorf("%s: listed as a difference, but both answer %s", what, tal)
		}
		return
	case rdSorted:
		ref, tal = rdSortArray(ref), rdSortArray(tal)
	case rdNear:
		a, ea := strconv.ParseInt(strings.TrimPrefix(ref, ":"), 10, 64)
		b, eb := strconv.ParseInt(strings.TrimPrefix(tal, ":"), 10, 64)
		if ea == nil && eb == nil && ref[0] == ':' && tal[0] == ':' && (a < 0) == (b < 0) && a-b <= 1500 && b-a <= 1500 {
			return
		}
	case rdKind:
		ref, tal = rdKindOf(ref), rdKindOf(tal)
	}
	if ref != tal {
		d.t.Errorf("%s: DIFFERENCE\n  redis-server %s\n  tallyd       %s\n  (after %s)", what, ref, tal, d.last)
	}
}

func rdQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
		if len(q[i]) > 40 {
			q[i] = q[i][:40] + "…"
		}
	}
	return strings.Join(q, " ")
}

// rdSortArray sorts the elements of a flat array rendered by rdShow.
func rdSortArray(s string) string {
	if !strings.HasPrefix(s, "*[") || s == "*[]" {
		return s
	}
	e := strings.Split(s[2:len(s)-1], " ")
	sort.Strings(e)
	return "*[" + strings.Join(e, " ") + "]"
}

func rdKindOf(s string) string {
	if strings.HasPrefix(s, "*[") {
		return "*" + strconv.Itoa(strings.Count(s, " ")+1)
	}
	return s[:1]
}

// TestRedisDifferential runs every Redis command tallyd's text side implements (slock's
// own LOCK, UNLOCK, PUSH and TIMEOUT aside) against redis-server and tallyd, with the edge
// cases clients meet, and compares the replies' types and values.
func TestRedisDifferential(t *testing.T) {
	t.Parallel()
	refAddr := rdStartRedis(t)
	talAddr := rdStartTallyd(t)
	d := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
	d.run(false, c("FLUSHALL"))

	const (
		max = "9223372036854775807"
		min = "-9223372036854775808"
	)
	bin := "k\x00\xff\r\n"
	binv := "\x00\r\n\xff$-1\r\n"
	long := strings.Repeat("x", 70)
	big := strings.Repeat("v", 10000)

	t.Run("strings", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("GET", "nokey"), c("SET", "s", "v"), c("GET", "s"), c("get", "s"), c("GeT", "s"),
			c("SET", "s", ""), c("GET", "s"), c("STRLEN", "s"), c("EXISTS", "s"),
			c("SET", "", "empty key"), c("GET", ""), c("EXISTS", ""), c("DEL", ""), c("GET", ""),
			c("SET", bin, binv), c("GET", bin), c("STRLEN", bin), c("TYPE", bin),
			c("SET", long, big), c("GET", long), c("STRLEN", long), c("APPEND", long, "y"), c("STRLEN", long),
			c("SET", "s", "v", "NX"), c("SET", "new", "v", "NX"), c("GET", "new"),
			c("SET", "s", "w", "XX"), c("GET", "s"), c("SET", "nokey2", "w", "XX"), c("GET", "nokey2"),
			c("SET", "s", "v", "NX", "XX"), c("SET", "s", "v", "FOO"), c("SET", "s", "v", "EX"),
			c("SET", "s", "v", "EX", "10", "PX", "100"),
			c("SET", "s", "v", "GET"), c("SET", "s", "v", "KEEPTTL"), c("SET", "s", "w", "XX", "GET"), c("GET", "s"),
			c("SET", "nokey4", "w", "GET"), c("GET", "nokey4"), c("SET", "nokey5", "w", "XX", "GET"), c("EXISTS", "nokey5"),
			c("SET", "s", "v", "EX", "1", "EX", "2"), c("SET", "s", "v", "NX", "NX"), c("SET", "s", "v", "XX", "XX"),
			c("SET", "s", "v", "KEEPTTL", "EX", "5"), c("SET", "s", "v", "EX", "5", "KEEPTTL"), c("SET", "s", "v", "KEEPTTL", "KEEPTTL"),
			c("SET", "s", "v", "EX", "x", "FOO"), c("SET", "s", "v", "EXAT", "1", "PXAT", "1"), c("SET", "s", "v", "PX"),
			c("SET", "s", "v", "nx", "get"), c("SET", "nxg", "v1", "NX", "GET"), c("SET", "nxg", "v2", "NX", "GET"), c("GET", "nxg"),
			c("SETNX", "s", "x"),
			c("GETSET", "s", "w"), c("GETSET", "nokey3", "w"), c("GET", "nokey3"),
			c("SETNX", "s", "x"), c("SETNX", "nx", "x"), c("GET", "nx"),
			c("TYPE", "s"), c("TYPE", "nokey"), c("STRLEN", "nokey"),
			c("APPEND", "ap", "ab"), c("APPEND", "ap", "cd"), c("GET", "ap"), c("APPEND", "ap", ""),
			c("EXISTS", "s", "s", "nokey", "ap"), c("EXISTS", "nokey"),
			c("DEL", "s", "s", "nokey"), c("DEL", "nokey"), c("UNLINK", "ap", "nx"), c("GET", "ap"),
			c("MSET", "a", "1", "b", "2"), c("MGET", "a", "b", "nokey"), c("MGET", "nokey"),
			c("MSET", "a", "1", "b"), c("MSETNX", "a", "9", "z", "1"), c("MGET", "a", "z"),
			c("MSETNX", "y", "1", "z", "2"), c("MGET", "y", "z"), c("MSETNX", "y"),
			c("MSET", "a", "1", "a", "2"), c("GET", "a"),
		)
	})

	t.Run("counters", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("INCR", "n"), c("GET", "n"), c("INCRBY", "n", "41"), c("GET", "n"), c("TYPE", "n"),
			c("STRLEN", "n"), c("DECR", "n"), c("DECRBY", "n", "50"), c("GET", "n"), c("MGET", "n", "nokey"),
			c("GETSET", "n", "5"), c("INCR", "n"), c("APPEND", "n", "0"), c("GET", "n"), c("INCR", "n"),
			c("SET", "n", "10"), c("INCR", "n"), c("GET", "n"),
			c("INCRBY", "n", "x"), c("INCRBY", "n", "1.5"), c("INCRBY", "n", ""), c("INCRBY", "n", "+1"),
			c("INCRBY", "n", " 1"), c("INCRBY", "n", "01"), c("INCRBY", "n", "-0"), c("INCRBY", "n", max+"0"),
			c("DECRBY", "n", min), c("DECRBY", "n", max), c("GET", "n"),
			c("SET", "o", max), c("INCR", "o"), c("INCRBY", "o", "0"), c("GET", "o"),
			c("SET", "o", min), c("DECR", "o"), c("INCRBY", "o", min), c("GET", "o"),
			c("SET", "o", "-1"), c("INCRBY", "o", min), c("DECRBY", "o", max), c("DECR", "o"),
			c("SET", "t", "abc"), c("INCR", "t"), c("DECR", "t"), c("GET", "t"),
			c("SET", "t", ""), c("INCR", "t"), c("SET", "t", " 1"), c("INCR", "t"), c("SET", "t", "1 "), c("INCR", "t"),
			c("SET", "t", "+1"), c("INCR", "t"), c("SET", "t", "007"), c("INCR", "t"), c("SET", "t", "1e3"), c("INCR", "t"),
			c("SET", "t", max+"1"), c("INCR", "t"), c("SET", "t", "\x00"), c("INCR", "t"),
			c("SET", "t", "-0"), c("INCR", "t"), c("SET", "t", "0"), c("INCR", "t"), c("GET", "t"),
			c("INCR", bin), c("GET", bin), c("INCR", ""), c("GET", ""),
		)
	})

	t.Run("expiry", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("SET", "e", "v"), c("TTL", "e"), c("PTTL", "e"), c("TTL", "nokey"), c("PTTL", "nokey"),
			c("EXPIRE", "e", "100"), c("TTL", "e"), c("PTTL", "e").near(),
			c("PERSIST", "e"), c("TTL", "e"), c("PERSIST", "e"), c("PERSIST", "nokey"),
			c("PEXPIRE", "e", "100300"), c("TTL", "e"), c("PTTL", "e").near(),
			c("EXPIRE", "nokey", "100"), c("EXISTS", "nokey"), c("TTL", "nokey"),
			c("EXPIRE", "e", "x"), c("EXPIRE", "e", "1.5"), c("EXPIRE", "e", ""), c("TTL", "e"),
			c("EXPIRE", "e", max), c("EXPIRE", "e", min), c("PEXPIRE", "e", max), c("PEXPIRE", "e", min),
			c("EXPIREAT", "e", max), c("PEXPIREAT", "e", max), c("TTL", "e"),
			c("EXPIRE", "e", "9223372036854775"), c("EXPIRE", "e", "9223372036854"), c("TTL", "e"),
			c("PEXPIRE", "e", "9223370000000000000"), c("PTTL", "e").near(),
			c("EXPIREAT", "e", "99999999999"), c("TTL", "e").near(),
			c("EXPIRE", "e", "100", "NX"), c("EXPIRE", "e", "100", "XX"), c("EXPIRE", "e", "100", "GT"), c("EXPIRE", "e", "100", "LT"),
			c("EXPIRE", "e", "100", "FOO"), c("EXPIRE", "e", "x", "FOO"), c("EXPIRE", "e", "100", "NX", "XX"),
			c("EXPIRE", "e", "100", "GT", "LT"), c("EXPIRE", "e", "100", "nx", "gt"), c("EXPIRE", "e", "100", "XX", "GT"),
			c("SET", "e", "v"), c("EXPIRE", "e", "100", "XX"), c("EXPIRE", "e", "100", "GT"), c("TTL", "e"),
			c("EXPIRE", "e", "100", "LT"), c("TTL", "e"), c("EXPIRE", "e", "100", "NX"), c("TTL", "e"),
			c("EXPIRE", "e", "200", "NX"), c("EXPIRE", "e", "50", "GT"), c("TTL", "e"), c("EXPIRE", "e", "200", "LT"),
			c("TTL", "e"), c("EXPIRE", "e", "150", "GT"), c("TTL", "e"), c("EXPIRE", "e", "50", "LT"), c("TTL", "e"),
			c("EXPIRE", "e", "50", "XX"), c("PEXPIRE", "e", "60000", "XX", "GT"), c("TTL", "e"),
			c("PEXPIREAT", "e", "1", "GT"), c("EXISTS", "e"), c("EXPIREAT", "e", "1", "LT"), c("EXISTS", "e"),
			c("EXPIRE", "nokey", "5", "NX"), c("EXPIRE", "e", "-1", "NX"),
			c("SET", "e", "v", "EX", "100"), c("SET", "e", "w", "KEEPTTL"), c("TTL", "e"), c("GET", "e"),
			c("SET", "e", "x", "KEEPTTL", "GET"), c("TTL", "e"), c("SET", "e", "y"), c("TTL", "e"),
			c("SET", "e", "v", "EXAT", "99999999999"), c("TTL", "e").near(), c("SET", "e", "v", "PXAT", "99999999999000"), c("TTL", "e").near(),
			c("SET", "e", "v", "EXAT", "1"), c("GET", "e"), c("SET", "e", "v", "PXAT", "1"), c("EXISTS", "e"),
			c("SET", "e", "v", "EXAT", "0"), c("SET", "e", "v", "PXAT", "-1"), c("SET", "e", "v", "EXAT", max),
			c("SET", "e", "v", "PXAT", max), c("TTL", "e").near(), c("SET", "e", "v", "EXAT", "x"),
			c("SET", "e", "v", "EXAT", "9223372036854775"),
			c("SET", "e", "v", "EX", "100"), c("PERSIST", "e", "x").differs(":1"), c("SET", "e", "v"), c("TTL", "e"),
			c("EXPIRE", "e", "0"), c("GET", "e"), c("EXISTS", "e"), c("TTL", "e"),
			c("SET", "e", "v"), c("EXPIRE", "e", "-1"), c("GET", "e"),
			c("SET", "e", "v"), c("PEXPIRE", "e", "-100"), c("EXISTS", "e"),
			c("SET", "e", "v"), c("EXPIREAT", "e", "1"), c("EXISTS", "e"),
			c("SET", "e", "v"), c("PEXPIREAT", "e", "0"), c("EXISTS", "e"),
			c("SET", "e", "v"), c("PEXPIREAT", "e", "-5"), c("EXISTS", "e"),
			c("SET", "e", "v", "EX", "100"), c("TTL", "e"), c("SET", "e", "v", "PX", "100300"), c("PTTL", "e").near(),
			c("SET", "e", "v", "EX", "0"), c("SET", "e", "v", "EX", "-1"), c("SET", "e", "v", "PX", "0"),
			c("SET", "e", "v", "EX", "x"), c("SET", "e", "v", "EX", max), c("SET", "e", "v", "PX", max),
			c("SET", "e", "v", "EX", "9223372036854775"), c("SET", "e", "v", "EX", "9223372036854"), c("TTL", "e"),
			c("SET", "e", "w"), c("TTL", "e"),
			c("SETEX", "e", "100", "v"), c("TTL", "e"), c("GET", "e"), c("SETEX", "e", "0", "v"),
			c("SETEX", "e", "-1", "v"), c("SETEX", "e", "x", "v"), c("SETEX", "e", max, "v"),
			c("PSETEX", "e", "100300", "v"), c("PTTL", "e").near(), c("PSETEX", "e", "0", "v"), c("PSETEX", "e", "-5", "v"),
			c("PSETEX", "e", max, "v"), c("PSETEX", "e", "x", "v"),
			c("SET", "e", "1", "EX", "100"), c("INCR", "e"), c("TTL", "e"), c("APPEND", "e", "2"), c("TTL", "e"),
			c("GETSET", "e", "3"), c("TTL", "e"),
			c("SET", "e", "v", "PX", "1"),
		)
		time.Sleep(20 * time.Millisecond)
		d.run(false, c("GET", "e"), c("EXISTS", "e"), c("TTL", "e"), c("PTTL", "e"))
	})

	t.Run("hashes", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("HSET", "h", "f", "1"), c("HSET", "h", "f", "2", "g", "3"), c("HSET", "h", "f"),
			c("HMSET", "h", "i", "4"), c("HMSET", "h", "i"), c("HGET", "h", "f"), c("HGET", "h", "nofield"),
			c("HGET", "nokey", "f"), c("HMGET", "h", "f", "nofield", "g"), c("HMGET", "nokey", "f"),
			c("HGETALL", "h").sorted(), c("HGETALL", "nokey"), c("HLEN", "h"), c("HLEN", "nokey"),
			c("HEXISTS", "h", "f"), c("HEXISTS", "h", "x"), c("HEXISTS", "nokey", "x"),
			c("HKEYS", "h").sorted(), c("HVALS", "h").sorted(), c("HKEYS", "nokey"), c("HVALS", "nokey"),
			c("HINCRBY", "h", "f", "5"), c("HINCRBY", "h", "new", "-5"), c("HINCRBY", "nokey2", "f", "1"),
			c("HINCRBY", "h", "f", "x"), c("HINCRBY", "h", "f", max), c("HINCRBY", "h", "new", min),
			c("HSET", "h", "s", "abc"), c("HINCRBY", "h", "s", "1"), c("HSET", "h", "", ""), c("HGET", "h", ""),
			c("HSET", "h", bin, binv), c("HGET", "h", bin),
			c("HDEL", "h", "f", "nofield"), c("HDEL", "h", "f"), c("HDEL", "nokey", "f"),
			c("TYPE", "h"), c("EXISTS", "h"), c("STRLEN", "h"),
			c("GET", "h"), c("INCR", "h"), c("APPEND", "h", "x"), c("GETSET", "h", "x"), c("SETNX", "h", "x"),
			c("MGET", "h", "a"), c("SET", "str", "v"), c("HGET", "str", "f"), c("HSET", "str", "f", "v"),
			c("HINCRBY", "str", "f", "1"), c("HGETALL", "str"), c("HLEN", "str"), c("HDEL", "str", "f"),
			c("HMGET", "str", "f"), c("HKEYS", "str"), c("HVALS", "str"), c("HEXISTS", "str", "f"),
			c("EXPIRE", "h", "100"), c("TTL", "h"), c("HINCRBY", "h", "g", "1"), c("TTL", "h"),
			c("SET", "h", "now a string"), c("TYPE", "h"), c("GET", "h"),
			c("HSET", "h2", "a", "1"), c("HDEL", "h2", "a"), c("EXISTS", "h2"), c("TYPE", "h2"),
		)
	})

	t.Run("overwrites", func(t *testing.T) {
		d.t = t
		d.run(false,
			// What replaces a value and its expiry, across types.
			c("SET", "m", "1", "EX", "100"), c("MSET", "m", "2"), c("TTL", "m"), c("GET", "m"),
			c("SET", "m", "1", "EX", "100"), c("SET", "m", "2"), c("TTL", "m"),
			c("SET", "m", "1", "EX", "100"), c("SETEX", "m", "50", "2"), c("TTL", "m"), c("PSETEX", "m", "100300", "3"), c("TTL", "m"),
			c("SET", "m", "1", "EX", "100"), c("GETSET", "m", "2"), c("TTL", "m"),
			c("SET", "m", "1", "EX", "100"), c("SETNX", "m", "2"), c("TTL", "m"), c("DECRBY", "m", "5"), c("TTL", "m"), c("GET", "m"),
			c("HSET", "mh", "f", "1"), c("SETEX", "mh", "100", "s"), c("TYPE", "mh"), c("GET", "mh"),
			c("HSET", "mh2", "f", "1"), c("MSET", "mh2", "s"), c("TYPE", "mh2"), c("GET", "mh2"),
			c("HSET", "mh3", "f", "1"), c("MSETNX", "mh3", "s"), c("TYPE", "mh3"),
			c("HSET", "mh4", "f", "1"), c("SET", "mh4", "s", "GET"), c("TYPE", "mh4"), c("SET", "mh4", "s", "XX"), c("TYPE", "mh4"),
			c("HSET", "mh6", "f", "1"), c("SET", "mh6", "s", "NX", "GET"), c("SET", "mh6", "s", "NX"), c("SETNX", "mh6", "s"), c("TYPE", "mh6"),
			c("INCR", "mc"), c("SET", "mc", "v", "NX"), c("SET", "mc", "v", "XX", "GET"), c("GET", "mc"),
			c("HSET", "mh5", "f", "1"), c("DEL", "mh5"), c("HGET", "mh5", "f"), c("INCR", "mh5"),
			// Hash fields: integers as Redis reads them, empty and binary fields.
			c("HSET", "hh", "n", "5"), c("HINCRBY", "hh", "n", "+1"), c("HINCRBY", "hh", "n", " 1"), c("HINCRBY", "hh", "n", "01"),
			c("HINCRBY", "hh", "n", "-0"), c("HINCRBY", "hh", "n", ""), c("HSET", "hh", "t", " 1"), c("HINCRBY", "hh", "t", "1"),
			c("HSET", "hh", "t", max), c("HINCRBY", "hh", "t", "1"), c("HINCRBY", "hh", "t", "0"), c("HGET", "hh", "t"),
			c("HSET", "hh", "u", min), c("HINCRBY", "hh", "u", "-1"), c("HINCRBY", "hh", "u", max), c("HGET", "hh", "u"),
			c("HMGET", "hh", "n", "", "n"), c("HEXISTS", "hh", ""), c("HDEL", "hh", "n", "n"), c("HLEN", "hh"),
			c("HSET", "hh", "a", "1", "a", "2"), c("HGET", "hh", "a"), c("HMSET", "hh", "b", "1", "b", "2"), c("HGET", "hh", "b"),
			c("HSET", "hh", "f\x00", "nul"), c("HGET", "hh", "f"), c("HGET", "hh", "f\x00"),
			c("HSET", "hh", "big", big), c("HGET", "hh", "big"), c("HSET", "hh", "big", ""), c("HGET", "hh", "big"),
			c("HGETALL", "hh").sorted(), c("HKEYS", "hh").sorted(), c("HVALS", "hh").sorted(),
			// Key names that slock maps specially: 16 bytes, 32 hex digits, a leading NUL.
			c("SET", "0123456789abcdef", "16"), c("SET", "550e8400e29b41d4a716446655440000", "hex"),
			c("SET", "550E8400E29B41D4A716446655440000", "HEX"), c("SET", "\x00abc", "nul"), c("SET", "abc", "plain"),
			c("MGET", "0123456789abcdef", "550e8400e29b41d4a716446655440000", "550E8400E29B41D4A716446655440000", "\x00abc", "abc"),
			c("DEL", "abc"), c("GET", "\x00abc"), c("INCR", "\x00\x00"), c("GET", "\x00"), c("GET", "\x00\x00"),
			c("KEYS", "*").sorted(), c("DBSIZE"),
		)
		d.run(false, c("FLUSHALL"))
	})

	t.Run("keyspace", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("FLUSHDB"), c("DBSIZE"), c("KEYS", "*"),
			c("MSET", "k1", "1", "k2", "2", "k10", "3", "other", "4"), c("HSET", "kh", "f", "v"),
			c("DBSIZE"), c("KEYS", "*").sorted(), c("KEYS", "k?").sorted(), c("KEYS", "k*").sorted(),
			c("KEYS", "k[12]").sorted(), c("KEYS", "nomatch*"), c("KEYS", "k[^1]*").sorted(),
			c("SELECT", "1"), c("DBSIZE"), c("GET", "k1"), c("SET", "k1", "db1"), c("GET", "k1"),
			c("SELECT", "0"), c("GET", "k1"),
			c("SELECT", "x"), c("SELECT", "-1"), c("SELECT", "16").differs("+OK"), c("SELECT", "254").differs("+OK"),
			c("SELECT", "255"), c("SELECT", ""), c("SELECT", "0"),
			c("FLUSHDB", "ASYNC"), c("DBSIZE"), c("SELECT", "1"), c("DBSIZE"), c("FLUSHDB", "SYNC"),
			c("FLUSHDB", "FOO"), c("FLUSHALL", "FOO"), c("SELECT", "0"), c("SET", "x", "1"), c("FLUSHALL"),
			c("DBSIZE"), c("FLUSHALL", "SYNC"), c("FLUSHALL", "ASYNC"),
			c("SCAN", "x"), c("SCAN", "-1"), c("SCAN", "0", "COUNT", "0"), c("SCAN", "0", "COUNT", "x"),
			c("SCAN", "0", "FOO", "x"), c("SCAN", "0", "MATCH"),
		)
		// A whole SCAN walk finds each key once, whatever the cursors.
		d.run(false, c("MSET", "s1", "1", "s2", "2", "s3", "3"), c("HSET", "sh", "f", "v"))
		for _, args := range [][]string{{"MATCH", "s*"}, {"COUNT", "1"}, {"TYPE", "string"}, {"TYPE", "hash"}, {"MATCH", "s[12]", "COUNT", "2"}} {
			ref, tal := rdScanAll(t, d.ref, args), rdScanAll(t, d.tal, args)
			d.n++
			if ref != tal {
				d.t.Errorf("SCAN walk %q: DIFFERENCE\n  redis-server %s\n  tallyd       %s", args, ref, tal)
			}
		}
	})

	t.Run("server", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("PING"), c("PING", "hi"), c("PING", ""), c("ping", "a", "b"), c("ECHO", "x"), c("ECHO", ""),
			c("ECHO", binv), c("ECHO"), c("ECHO", "a", "b"),
			c("INFO").kind(), c("INFO", "server").kind(), c("INFO", "keyspace").kind(),
			c("CONFIG", "GET", "appendonly").kind(), c("CONFIG", "GET", "save"), c("CONFIG", "GET", "nosuchparam"),
			c("CONFIG"), c("CONFIG", "FOO"), c("CONFIG", "RESETSTAT"),
			c("CLIENT", "SETNAME", "me"), c("CLIENT", "GETNAME"), c("CLIENT", "ID").kind(),
			c("CLIENT", "SETINFO", "LIB-NAME", "x").differs("+OK"), c("CLIENT", "FOO"), c("CLIENT"),
			c("CLIENT", "SETNAME"), c("CLIENT", "SETNAME", "a b"), c("CLIENT", "GETNAME"), c("CLIENT", "SETNAME", ""),
			c("CLIENT", "GETNAME"), c("CLIENT", "GETNAME", "x"), c("CLIENT", "ID", "x"), c("CLIENT", "LIST", "x"),
			c("CLIENT", "NO-EVICT"), c("CLIENT", "NO-EVICT", "maybe"), c("CLIENT", "REPLY"), c("CONFIG", "GET"),
			c("CONFIG", "RESETSTAT", "x"), c("CONFIG", "SET", "x"), c("COMMAND", "COUNT", "x"), c("COMMAND", "FOO", "x"),
			c("CLIENT", "INFO").kind(), c("CLIENT", "NO-EVICT", "on"), c("CLIENT", "REPLY", "ON"),
			c("COMMAND", "COUNT").kind(), c("COMMAND", "FOO"),
			c("HELLO", "2").kind(), c("HELLO", "x"), c("HELLO", "4"), c("HELLO", "2", "FOO"),
			c("UNWATCH"), c("UNWATCH", "x"),
		)
	})

	t.Run("getdel getex wait", func(t *testing.T) {
		// Redis 7.0 has these: compared with redis-server.
		d.t = t
		d.run(false,
			c("SET", "gd", "v"), c("GETDEL", "gd"), c("GETDEL", "gd"), c("EXISTS", "gd"), c("INCR", "gdc"), c("GETDEL", "gdc"),
			c("HSET", "gdh", "f", "1"), c("GETDEL", "gdh"), c("GETEX", "gdh"), c("GETEX", "gdh", "EX", "10"), c("GETEX", "gdh", "PERSIST"),
			c("SET", "ge", "v"), c("GETEX", "ge"), c("TTL", "ge"), c("GETEX", "ge", "EX", "100"), c("TTL", "ge"),
			c("GETEX", "ge", "PX", "200000"), c("PTTL", "ge").near(), c("GETEX", "ge", "EXAT", "99999999999"), c("TTL", "ge").near(),
			c("GETEX", "ge", "PERSIST"), c("TTL", "ge"), c("GETEX", "ge", "PERSIST", "PERSIST"), c("GETEX", "ge", "EX", "10", "EX", "20"), c("TTL", "ge"),
			c("GETEX", "ge", "EX", "0"), c("GETEX", "ge", "EX", "-1"), c("GETEX", "ge", "EX", "x"), c("GETEX", "ge", "EX", "x", "FOO"),
			c("GETEX", "ge", "EX", "10", "PX", "100"), c("GETEX", "ge", "EX"), c("GETEX", "ge", "PERSIST", "EX", "10"),
			c("GETEX", "ge", "KEEPTTL"), c("GETEX", "ge", "EXAT", "0"), c("GETEX", "ge", "EX", max), c("GETEX", "ge", "PX", max),
			c("GETEX", "nokey", "EX", "0"), c("GETEX", "nokey", "FOO"), c("GETEX", "ge", "PXAT", "1"), c("EXISTS", "ge"),
			c("INCR", "gec"), c("GETEX", "gec", "EX", "100"), c("TTL", "gec"),
			c("WAIT", "0", "0"), c("WAIT", "1", "100"), c("WAIT", "x", "0"), c("WAIT", "0", "-1"), c("WAIT", "0", "x"), c("WAIT", "x", "y"),
		)
	})

	t.Run("compare-and-set", func(t *testing.T) {
		// Redis 8.4's DELEX, DIGEST and SET IF*, Valkey 9's DELIFEQ: redis-server 7.0 lacks
		// them, so tallyd's replies are checked against their documented ones.
		d.t = t
		unknown := func(args ...string) rdCase {
			return c(args...).differs(map[string]string{"DELEX": ":1", "DELIFEQ": ":1", "DIGEST": `$"b6acb9d84a38ff74"`}[args[0]])
		}
		d.run(false, c("SET", "cas", "Hello world"), unknown("DIGEST", "cas"))
		for _, k := range []struct {
			args []string
			want string
		}{
			{[]string{"DIGEST", "nokey"}, "$nil"},
			{[]string{"SET", "cas", "test"}, "+OK"}, {[]string{"DIGEST", "cas"}, `$"9ec9f7918d7dfc40"`},
			{[]string{"SET", "cas", "hello"}, "+OK"}, {[]string{"DIGEST", "cas"}, `$"9555e8555c62dcfd"`},
			{[]string{"SET", "cas", "foo"}, "+OK"}, {[]string{"DIGEST", "cas"}, `$"ab6e5f64077e7d8a"`},
			{[]string{"DELEX", "cas", "IFEQ", "bar"}, ":0"}, {[]string{"DELEX", "cas", "IFNE", "foo"}, ":0"},
			{[]string{"DELEX", "cas", "IFDNE", "ab6e5f64077e7d8a"}, ":0"}, {[]string{"DELEX", "cas", "IFDEQ", "AB6E5F64077E7D8A"}, ":1"},
			{[]string{"DELEX", "cas", "IFEQ", "foo"}, ":0"}, {[]string{"DELEX", "nokey"}, ":0"},
			{[]string{"SET", "cas", "foo", "IFEQ", "foo"}, "$nil"}, {[]string{"SET", "cas", "foo", "IFNE", "bar"}, "+OK"},
			{[]string{"SET", "cas", "bar", "IFEQ", "foo", "GET"}, `$"foo"`}, {[]string{"SET", "cas", "baz", "IFNE", "bar", "GET"}, `$"bar"`},
			{[]string{"SET", "cas", "x", "IFDEQ", "ab6e5f64077e7d8a"}, "$nil"}, {[]string{"SET", "cas", "x", "IFDNE", "ab6e5f64077e7d8a"}, "+OK"},
			{[]string{"SET", "cas", "y", "IFEQ", "x", "PX", "100000"}, "+OK"}, {[]string{"DELIFEQ", "cas", "x"}, ":0"},
			{[]string{"DELIFEQ", "cas", "y"}, ":1"}, {[]string{"DELIFEQ", "cas", "y"}, ":0"},
			{[]string{"SET", "cas", "x", "NX", "IFEQ", "y"}, "-ERR syntax error"}, {[]string{"DELEX", "cas", "IFEQ"}, "-ERR syntax error"},
			{[]string{"HSET", "cash", "f", "1"}, ":1"}, {[]string{"DIGEST", "cash"}, "-WRONGTYPE Operation against a key holding the wrong kind of value"},
			{[]string{"DELEX", "cash", "IFEQ", "1"}, "-WRONGTYPE Operation against a key holding the wrong kind of value"},
			{[]string{"DELIFEQ", "cash", "1"}, "-WRONGTYPE Operation against a key holding the wrong kind of value"},
			{[]string{"DELEX", "cash"}, ":1"},
		} {
			d.tal.send(t, k.args)
			d.n++
			if got := d.tal.reply(t); got != k.want {
				t.Errorf("%s: tallyd %s, want %s (Redis 8.4's documented reply)", rdQuote(k.args), got, k.want)
			}
		}
		d.ref.send(t, []string{"DEL", "cas"}) // redis-server kept the key the commands above deleted
		d.ref.reply(t)
		d.sync()
	})

	t.Run("unknown", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("NOSUCH"), c("NOSUCH", "a", "b"), c("nosuch", ""), c("NOSUCH", "a\r\nb"),
			c("NOSUCH", strings.Repeat("a", 200), "b"), c("NOSUCH", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"),
			c(strings.Repeat("X", 200)), c(""), c("NOSUCH", "a\x00b", "c"), c("NO\x00SUCH", "a"),
			c("LLEN", "l").differs("-ERR unknown command 'LLEN', with args beginning with: 'l' "),
			c("SCARD", "s").differs("-ERR unknown command 'SCARD', with args beginning with: 's' "),
		)
	})

	t.Run("arity", func(t *testing.T) {
		d.t = t
		var cases []rdCase
		for _, name := range []string{"GET", "SET", "SETEX", "PSETEX", "GETSET", "SETNX", "EXISTS", "TYPE", "STRLEN",
			"INCR", "DECR", "INCRBY", "DECRBY", "APPEND", "DEL", "UNLINK", "EXPIRE", "PEXPIRE", "EXPIREAT",
			"PEXPIREAT", "PERSIST", "TTL", "PTTL", "KEYS", "SCAN", "MGET", "MSET", "MSETNX", "HSET", "HMSET",
			"HDEL", "HINCRBY", "HGET", "HMGET", "HGETALL", "HLEN", "HEXISTS", "HKEYS", "HVALS", "SELECT",
			"ECHO", "WATCH", "GETDEL", "GETEX", "WAIT"} {
			cases = append(cases, c(name))
		}
		for _, args := range [][]string{{"GET", "a", "b"}, {"SET", "a"}, {"SETEX", "a", "1"}, {"GETSET", "a"},
			{"TYPE", "a", "b"}, {"STRLEN", "a", "b"}, {"INCRBY", "a"}, {"INCRBY", "a", "1", "2"},
			{"DECRBY", "a", "1", "2"}, {"APPEND", "a"}, {"APPEND", "a", "b", "c"}, {"EXPIRE", "a"},
			{"TTL", "a", "b"}, {"PTTL", "a", "b"}, {"KEYS", "a", "b"}, {"DBSIZE", "x"}, {"MULTI", "x"},
			{"EXEC", "x"}, {"DISCARD", "x"}, {"HGET", "h"}, {"HGET", "h", "f", "g"}, {"HINCRBY", "h", "f"},
			{"HLEN", "h", "x"}, {"SELECT", "0", "1"}, {"HSET", "h", "f", "v", "g"}, {"HMSET", "h", "f", "v", "g"},
			{"SETNX", "a", "b", "c"}, {"GETSET", "a", "b", "c"}, {"FLUSHDB", "ASYNC", "x"}, {"FLUSHALL", "SYNC", "x"},
			{"INCR", "a", "b", "c"}, {"DECR", "a", "b", "c"}, {"PERSIST", "a", "b", "c"}} {
			cases = append(cases, c(args...))
		}
		d.run(false, cases...)
		// slock's text INCR and DECR take a delta as a third argument (docs/redis.md).
		d.run(false, c("INCR", "a", "5").differs(":5"), c("DECR", "a", "2").differs(":3"), c("DEL", "a").differs(":1"))
	})

	t.Run("pipeline", func(t *testing.T) {
		d.t = t
		d.run(true,
			c("SET", "p", "1"), c("INCR", "p"), c("GET", "p"), c("NOSUCH", "p"), c("GET"), c("EXPIRE", "p", "0"),
			c("GET", "p"), c("EXISTS", "p"), c("HSET", "ph", "a", "1"), c("GET", "ph"), c("HGETALL", "ph"),
			c("MSET", "p1", "x", "p2", "y"), c("MGET", "p1", "p2", "p3"), c("DEL", "p1", "p2", "ph"), c("DBSIZE"),
		)
		var many []rdCase
		for i := 0; i < 500; i++ {
			many = append(many, c("INCR", "pc"))
		}
		d.run(true, append(many, c("GET", "pc"))...)
	})

	t.Run("lock keys from another connection", func(t *testing.T) {
		// Issue 22: a key made by SET NX PX (a Redis lock library's acquire) is a Redis key:
		// its owner extends it, and another connection (a pool hands out any) reads,
		// expires, overwrites and deletes it, as on redis-server.
		d.t = t
		o := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
		d.run(false, c("SET", "lk", "tok", "NX", "PX", "5000"), c("SET", "lk", "tok", "NX", "PX", "5000"), c("SETNX", "lk", "x"),
			c("PEXPIRE", "lk", "20000"), c("PTTL", "lk").near(), c("TTL", "lk"))
		o.run(false, c("PTTL", "lk").near(), c("GET", "lk"), c("SET", "lk", "x", "NX"), c("SETNX", "lk", "x"),
			c("MSETNX", "lk", "x", "lk2", "y"), c("EXISTS", "lk2"), c("SET", "lk", "x", "NX", "GET"),
			c("SET", "lk", "tok2", "XX"), c("GETSET", "lk", "tok3"), c("EXPIRE", "lk", "100"), c("TTL", "lk"),
			c("PERSIST", "lk"), c("TTL", "lk"), c("PEXPIRE", "lk", "5000"), c("SET", "lk", "tok4", "XX", "KEEPTTL"), c("PTTL", "lk").near(),
			c("APPEND", "lk", "x"), c("STRLEN", "lk"), c("DEL", "lk"), c("DEL", "lk"), c("EXISTS", "lk"))
		// The owner's view after another's DEL; SETNX, then INCR and UNLINK by another.
		d.run(false, c("GET", "lk"), c("PEXPIRE", "lk", "100"), c("SET", "lk", "t5", "NX", "PX", "5000"), c("SETNX", "lc", "1"))
		o.run(false, c("INCR", "lc"), c("INCRBY", "lc", "5"), c("GET", "lc"), c("UNLINK", "lc", "lk"), c("SETNX", "lc", "o"),
			c("SET", "lk", "o", "NX", "GET"), c("SET", "lk", "o2", "NX", "GET"))
		d.run(false, c("GET", "lc"), c("DEL", "lc", "lk"))
		// The acquiring connection closes; another releases.
		a := &rdDual{t: t, ref: rdDial(t, refAddr), tal: rdDial(t, talAddr)}
		a.run(false, c("SET", "job", "tok", "NX", "PX", "30000"))
		_ = a.ref.c.Close()
		_ = a.tal.c.Close()
		time.Sleep(50 * time.Millisecond)
		o.run(false, c("GET", "job"), c("DEL", "job"), c("SET", "job", "t2", "NX", "PX", "30000"), c("DEL", "job"))
		d.n += o.n + a.n
	})

	t.Run("transactions", func(t *testing.T) {
		d.t = t
		d.run(false,
			c("EXEC"), c("DISCARD"), c("MULTI"), c("MULTI"), c("SET", "x", "1"), c("INCR", "x"), c("GET", "x"),
			c("INCR", "nokey"), c("HSET", "x", "f", "v"), c("EXEC"), c("GET", "x"),
			c("MULTI"), c("SET", "x", "2"), c("DISCARD"), c("GET", "x"),
			c("MULTI"), c("SET", "x", "3"), c("GET"), c("EXEC"), c("GET", "x"),
			c("MULTI"), c("SET", "x", "4"), c("NOSUCH", "a"), c("EXEC"), c("GET", "x"),
			c("MULTI"), c("WATCH", "x"), c("EXEC"),
			c("MULTI"), c("EXEC"),
			c("MULTI"), c("PING"), c("ECHO", "e"), c("SELECT", "1"), c("SET", "x", "db1"), c("SELECT", "0"), c("EXEC"),
			c("GET", "x"), c("SELECT", "1"), c("GET", "x"), c("SELECT", "0"),
		)
		// WATCH: a write by another connection aborts EXEC with a null array; no write, or
		// a write before WATCH, does not; UNWATCH forgets.
		ref2, tal2 := rdDial(t, refAddr), rdDial(t, talAddr)
		other := func(args ...string) {
			ref2.send(t, args)
			tal2.send(t, args)
			if a, b := ref2.reply(t), tal2.reply(t); a != b {
				t.Errorf("%q on the other connection: redis-server %s, tallyd %s", args, a, b)
			}
		}
		d.run(false, c("SET", "w", "0"), c("WATCH", "w", "nokey"), c("GET", "w"))
		other("SET", "w", "theirs")
		d.run(false, c("MULTI"), c("SET", "w", "mine"), c("EXEC"), c("GET", "w"))
		d.run(false, c("WATCH", "w"), c("MULTI"), c("INCR", "wc"), c("EXEC"))
		other("SET", "w", "again")
		d.run(false, c("WATCH", "w"), c("UNWATCH"))
		other("SET", "w", "more")
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"))
		d.run(false, c("WATCH", "nokey"))
		other("SET", "nokey", "1")
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"), c("GET", "wc"))
		d.run(false, c("WATCH", "w"))
		other("DEL", "w")
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"))
		d.run(false, c("WATCH", "w"))
		other("EXPIRE", "w", "100") // w was deleted: nothing to expire, no change
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"), c("GET", "wc"))
		d.run(true, c("MULTI"), c("INCR", "wc"), c("GET", "wc"), c("EXEC"))
		// The connection's own write to a watched key aborts its EXEC too.
		d.run(false, c("WATCH", "w"), c("SET", "w", "self"), c("MULTI"), c("INCR", "wc"), c("EXEC"), c("GET", "wc"))
		// A watch is per database; FLUSHALL by another connection touches every key.
		d.run(false, c("SELECT", "1"), c("SET", "w", "1"), c("WATCH", "w"), c("SELECT", "0"))
		other("SET", "w", "db0")
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"), c("SELECT", "1"), c("WATCH", "w"), c("SELECT", "0"))
		other("FLUSHALL")
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC"), c("GET", "wc"))
		// WATCH of a hash key, changed by HINCRBY; a transaction of hash and string commands.
		d.run(false, c("HSET", "wh", "f", "1"), c("WATCH", "wh"))
		other("HINCRBY", "wh", "f", "1")
		d.run(false, c("MULTI"), c("HINCRBY", "wh", "f", "10"), c("EXEC"), c("HGET", "wh", "f"),
			c("MULTI"), c("HINCRBY", "wh", "f", "10"), c("INCR", "wh"), c("HGETALL", "wh"), c("SET", "ws", "1", "EX", "100"),
			c("TTL", "ws"), c("FLUSHDB"), c("DBSIZE"), c("EXEC"), c("DBSIZE"))
		// EXEC with arguments aborts the transaction, as Redis does.
		d.run(false, c("MULTI"), c("INCR", "wc"), c("EXEC", "x"), c("EXEC"), c("GET", "wc"))
	})

	t.Run("quit", func(t *testing.T) {
		d.t = t
		d.run(false, c("QUIT"))
		for _, c := range []*rdConn{d.ref, d.tal} {
			_ = c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.c.Read(make([]byte, 1)); err == nil {
				t.Errorf("%s: connection still open after QUIT (read %d bytes)", c.c.RemoteAddr(), n)
			}
		}
		// A client that sends at once and reads late gets every reply, then the end of
		// the stream (not a reset that would destroy the replies).
		for _, cmds := range [][][]string{{{"QUIT"}}, {{"PING"}, {"QUIT"}}, {{"MULTI"}, {"SET", "q", "1"}, {"QUIT"}}} {
			ref, tal := rdLateRead(t, refAddr, cmds), rdLateRead(t, talAddr, cmds)
			d.n++
			if ref != tal {
				t.Errorf("%q read late: DIFFERENCE\n  redis-server %q\n  tallyd       %q", cmds, ref, tal)
			}
		}
	})
	t.Logf("%d replies compared", d.n)
}

// rdLateRead connects, sends cmds at once, waits, then reads to the end of the stream: what
// it read, and how the stream ended.
func rdLateRead(t *testing.T, addr string, cmds [][]string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b []byte
	for _, args := range cmds {
		b = resp.AppendCommand(b, args...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return string(got) + " <" + err.Error() + ">"
		}
	}
}

// rdScanAll walks SCAN 0 ... with the given options to its end and returns the sorted names.
func rdScanAll(t *testing.T, c *rdConn, opts []string) string {
	t.Helper()
	var names []string
	cursor := "0"
	for i := 0; i < 1000; i++ {
		c.send(t, append([]string{"SCAN", cursor}, opts...))
		r := c.reply(t)
		var next string
		var rest string
		if _, err := fmt.Sscanf(r, "*[$%q", &next); err != nil {
			return "bad reply " + r
		}
		rest = r[strings.Index(r, " ")+1:]
		rest = strings.TrimSuffix(strings.TrimPrefix(rest, "*["), "]]")
		if rest != "" {
			names = append(names, strings.Split(rest, " ")...)
		}
		if cursor = next; cursor == "0" {
			sort.Strings(names)
			return strings.Join(names, " ")
		}
	}
	return "no end"
}

// TestRedisDifferentialGoRedis drives both servers with go-redis (RESP2), the way Go
// programs use them: typed commands, pipelines, transactions and WATCH with its retries.
func TestRedisDifferentialGoRedis(t *testing.T) {
	t.Parallel()
	refAddr := rdStartRedis(t)
	talAddr := rdStartTallyd(t)
	run := func(addr string) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
		defer rdb.Close()
		var out []string
		show := func(cmds ...redis.Cmder) {
			for _, c := range cmds {
				out = append(out, fmt.Sprintf("%T %s", c, c.String()))
			}
		}
		show(rdb.FlushAll(ctx))
		show(rdb.Incr(ctx, "n"), rdb.IncrBy(ctx, "n", 5), rdb.Get(ctx, "n"), rdb.Get(ctx, "nokey"))
		n, err := rdb.Get(ctx, "n").Int64()
		out = append(out, fmt.Sprint("Get(n).Int64 ", n, err))
		s, err := rdb.Do(ctx, "GET", "n").Text()
		out = append(out, fmt.Sprintf("Do(GET n).Text %q %v", s, err))
		v, err := rdb.Do(ctx, "GET", "n").Result()
		out = append(out, fmt.Sprintf("Do(GET n) %T %v %v", v, v, err))
		v, err = rdb.Do(ctx, "INCR", "n").Result()
		out = append(out, fmt.Sprintf("Do(INCR n) %T %v %v", v, v, err))
		show(rdb.Set(ctx, "s", "v", time.Minute), rdb.TTL(ctx, "s"), rdb.SetNX(ctx, "s", "x", 0), rdb.GetSet(ctx, "s", "w"),
			rdb.Append(ctx, "s", "x"), rdb.StrLen(ctx, "s"), rdb.Type(ctx, "s"), rdb.Exists(ctx, "s", "nokey"),
			rdb.Expire(ctx, "s", time.Hour), rdb.TTL(ctx, "s"), rdb.Persist(ctx, "s"), rdb.TTL(ctx, "s"),
			rdb.MSet(ctx, "a", "1", "b", "2"), rdb.MGet(ctx, "a", "b", "nokey"), rdb.MSetNX(ctx, "a", "1", "c", "3"),
			rdb.HSet(ctx, "h", "f", "1", "g", "2"), rdb.HIncrBy(ctx, "h", "f", 10), rdb.HGet(ctx, "h", "f"),
			rdb.HMGet(ctx, "h", "f", "nofield"), rdb.HLen(ctx, "h"), rdb.HExists(ctx, "h", "g"),
			rdb.Get(ctx, "h"), rdb.Incr(ctx, "h"), rdb.HGet(ctx, "s", "f"), rdb.IncrBy(ctx, "a", math64),
			rdb.Incr(ctx, "s"), rdb.Do(ctx, "NOSUCH", "x", "y"), rdb.Do(ctx, "GET"), rdb.Del(ctx, "a", "b", "h"),
			rdb.DBSize(ctx), rdb.Ping(ctx), rdb.Echo(ctx, "e"))
		cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "p", "1", 0)
			p.Incr(ctx, "p")
			p.Get(ctx, "p")
			p.Incr(ctx, "s")
			p.Expire(ctx, "p", -time.Second)
			p.Exists(ctx, "p")
			return nil
		})
		out = append(out, fmt.Sprint("pipeline err ", err))
		show(cmds...)
		cmds, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, "tx")
			p.IncrBy(ctx, "tx", 10)
			p.Get(ctx, "tx")
			p.Incr(ctx, "s")
			p.HIncrBy(ctx, "txh", "f", 2)
			return nil
		})
		out = append(out, fmt.Sprint("tx err ", err))
		show(cmds...)
		// WATCH: a conflicting write from another client aborts the first try; the
		// retry runs.
		tries := 0
		for i := 0; i < 3; i++ {
			err = rdb.Watch(ctx, func(tx *redis.Tx) error {
				tries++
				n, err := tx.Get(ctx, "w").Int()
				if err != nil && err != redis.Nil {
					return err
				}
				if tries == 1 {
					if err := rdb.Set(ctx, "w", "100", 0).Err(); err != nil {
						return err
					}
				}
				_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, "w", n+1, 0)
					return nil
				})
				return err
			}, "w")
			out = append(out, fmt.Sprint("watch ", i, " ", err))
			if err == nil {
				break
			}
		}
		show(rdb.Get(ctx, "w"))
		out = append(out, fmt.Sprint("tries ", tries))
		return out
	}
	rdCompareResults(t, run(refAddr), run(talAddr))
}

// rdCompareResults compares what a client library got from redis-server (ref) and from
// tallyd, line by line.
func rdCompareResults(t *testing.T, ref, tal []string) {
	t.Helper()
	if len(ref) != len(tal) {
		t.Fatalf("%d results from redis-server, %d from tallyd:\n%s\n---\n%s", len(ref), len(tal),
			strings.Join(ref, "\n"), strings.Join(tal, "\n"))
	}
	for i := range ref {
		if ref[i] != tal[i] {
			t.Errorf("DIFFERENCE\n  redis-server %s\n  tallyd       %s", ref[i], tal[i])
		}
	}
	t.Logf("%d results compared", len(ref))
}

const math64 = 1<<63 - 1

var _ = bytes.Equal
var _ = os.Getenv
