package load

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// Tests of the Redis lock dialects: redis-lock (DELEX IFEQ) and redis-lock-lua (EVALSHA).

// decodeAll decodes the RESP commands in b as a server would.
func decodeAll(t *testing.T, b []byte) [][]string {
	t.Helper()
	var out [][]string
	dec := resp.Decoder{MaxArgs: 64, MaxCommand: 1 << 20}
	for len(b) > 0 {
		args, n, err := dec.Parse(b, nil)
		if err != nil || n == 0 {
			t.Fatalf("decoding %q: n %d, %v", b, n, err)
		}
		var cmd []string
		for _, a := range args {
			cmd = append(cmd, string(a))
		}
		out = append(out, cmd)
		b = b[n:]
	}
	return out
}

func TestReleaseScriptSHA(t *testing.T) {
	// The SHA1 redis-server 7.0 and tallyd answer to SCRIPT LOAD of the script.
	if string(releaseSHA) != "c3f8721cbb97f72bc19e972846bd7aaf91901658" { // redis-py's (script/testdata/lock-scripts.json)
		t.Errorf("release script SHA1 %s", releaseSHA)
	}
}

func TestRedisLockAppend(t *testing.T) {
	p := newRedisLock(false)
	set := decodeAll(t, p.Append(nil, &Req{Kind: Acquire, Key: []byte("tb:k7"), Expiry: 30_000, Op: 5, Opaque: 9}))
	del := decodeAll(t, p.Append(nil, &Req{Kind: Release, Key: []byte("tb:k7"), Op: 5, Opaque: 10}))
	if len(set) != 1 || len(set[0]) != 6 || set[0][0] != "SET" || set[0][1] != "tb:k7" || set[0][3] != "NX" ||
		set[0][4] != "PX" || set[0][5] != "30000" {
		t.Fatalf("acquire %q", set)
	}
	tok := set[0][2]
	if want := []string{"DELEX", "tb:k7", "IFEQ", tok}; len(del) != 1 || strings.Join(del[0], " ") != strings.Join(want, " ") {
		t.Errorf("release %q, want %q", del, want)
	}
	if other := decodeAll(t, p.Append(nil, &Req{Kind: Acquire, Key: []byte("k"), Expiry: 1, Op: 6}))[0][2]; other == tok {
		t.Errorf("ops 5 and 6 share the token %s", tok)
	}
	if other := decodeAll(t, newRedisLock(false).Append(nil, &Req{Kind: Acquire, Key: []byte("k"), Expiry: 1, Op: 5}))[0][2]; other == tok {
		t.Errorf("two connections' op 5 share the token %s", tok)
	}

	// EVALSHA: the script loaded in front of the connection's first release only.
	l := newRedisLock(true)
	tok = decodeAll(t, l.Append(nil, &Req{Kind: Acquire, Key: []byte("a"), Expiry: 30_000, Op: 1}))[0][2]
	first := decodeAll(t, l.Append(nil, &Req{Kind: Release, Key: []byte("a"), Op: 1, Opaque: 2}))
	second := decodeAll(t, l.Append(nil, &Req{Kind: Release, Key: []byte("b"), Op: 3, Opaque: 4}))
	if len(first) != 2 || strings.Join(first[0], " ") != "SCRIPT LOAD "+releaseScript ||
		strings.Join(first[1], " ") != "EVALSHA "+string(releaseSHA)+" 1 a "+tok {
		t.Errorf("first release %q", first)
	}
	if len(second) != 1 || second[0][0] != "EVALSHA" || second[0][3] != "b" {
		t.Errorf("second release %q", second)
	}
	if len(l.loadFor) != 1 || l.loadFor[0] != 2 {
		t.Errorf("SCRIPT LOAD expected in front of %v, want request 2", l.loadFor)
	}
}

func TestRedisLockRepliesAtEverySplit(t *testing.T) {
	sha := "$40\r\n" + string(releaseSHA) + "\r\n"
	for _, c := range []struct {
		lua    bool
		stream string
		want   []Outcome
	}{
		{false, "+OK\r\n:1\r\n$-1\r\n+OK\r\n:0\r\n-ERR unknown command 'DELEX', with args beginning with: \r\n-WRONGTYPE x\r\n+PONG\r\n",
			[]Outcome{OK, OK, Busy, OK, Lost, Unknown, Failed, OK}},
		{true, "+OK\r\n" + sha + ":1\r\n$-1\r\n+OK\r\n:0\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n-ERR x\r\n+PONG\r\n",
			[]Outcome{OK, OK, Busy, OK, Lost, Resent, Failed, OK}},
	} {
		sent := []Req{{Kind: Acquire, Op: 1, Opaque: 1}, {Kind: Release, Op: 1, Opaque: 2}, {Kind: Acquire, Op: 2, Opaque: 3},
			{Kind: Acquire, Op: 3, Opaque: 4}, {Kind: Release, Op: 3, Opaque: 5}, {Kind: Release, Op: 4, Opaque: 6},
			{Kind: Acquire, Op: 5, Opaque: 7}, {Kind: Noop, Opaque: 8}}
		for step := 1; step <= len(c.stream); step++ {
			p := newRedisLock(c.lua)
			for i := range sent {
				p.Append(nil, &sent[i])
			}
			got := parseAll(t, p, []byte(c.stream), sent, step)
			if len(got) != len(c.want) {
				t.Fatalf("lua %v step %d: %d replies, want %d", c.lua, step, len(got), len(c.want))
			}
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Fatalf("lua %v step %d: reply %d (%v) is %v, want %v", c.lua, step, i, sent[i].Kind, got[i], c.want[i])
				}
			}
			if c.lua && (len(p.loadFor) != 0 || p.loaded) {
				t.Fatalf("step %d: after NOSCRIPT, loads in flight %v, loaded %v; want a new load next", step, p.loadFor, p.loaded)
			}
		}
	}
}

func TestRedisLockRejectsUnexpectedReplies(t *testing.T) {
	for _, c := range []struct {
		lua   bool
		reply string
		kind  Kind
		want  string
	}{
		{false, ":1\r\n", Acquire, `SET NX PX answered ":1\r\n"`},
		{false, "$2\r\nOK\r\n", Acquire, "want +OK or a null"},
		{false, "+OK\r\n", Release, `DELEX IFEQ answered "+OK\r\n"`},
		{false, ":2\r\n", Release, "want :1 or :0"},
		{true, "$-1\r\n", Release, `SCRIPT LOAD answered "$-1\r\n"`},
		{true, "-ERR Error compiling script\r\n:1\r\n", Release, "SCRIPT LOAD answered"},
		{true, "$40\r\n" + strings.Repeat("0", 40) + "\r\n:1\r\n", Release, "want the script's SHA1"},
		{false, "+OK\r\n", Noop, "PING answered"},
	} {
		p := newRedisLock(c.lua)
		r := Req{Kind: c.kind, Opaque: 1}
		p.Append(nil, &r)
		n, _, err := p.Parse([]byte(c.reply), &r)
		if err == nil || n != 0 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q to %v (lua %v): n %d, %v; want an error saying %s", c.reply, c.kind, c.lua, n, err, c.want)
		}
	}
}

// A NOSCRIPT answer to an EVALSHA makes the runner send it again, with the script loaded in
// front; the op ends only with the release done.
func TestRedisLockNoscriptResendsTheRelease(t *testing.T) {
	w := testWorker(t, Config{Proto: "redis-lock-lua", Conns: 1, Pipeline: 1, Keys: 4, AwaitGrant: true, Expiry: 30 * time.Second})
	feed := func(reply string) {
		t.Helper()
		w.wbuf = w.wbuf[:0]
		w.w = copy(w.rbuf, reply)
		w.r = 0
		if err := w.consume(ms); err != nil {
			t.Fatal(err)
		}
	}
	w.fillClosed(0)
	key := decodeAll(t, w.wbuf)[0][1]
	feed("+OK\r\n")
	if cmds := decodeAll(t, w.wbuf); len(cmds) != 2 || cmds[0][0] != "SCRIPT" || cmds[1][0] != "EVALSHA" || cmds[1][3] != key {
		t.Fatalf("after the grant: %q, want SCRIPT LOAD and EVALSHA of %s", cmds, key)
	}
	feed("$40\r\n" + string(releaseSHA) + "\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n")
	if cmds := decodeAll(t, w.wbuf); len(cmds) != 2 || cmds[0][0] != "SCRIPT" || cmds[1][0] != "EVALSHA" || cmds[1][3] != key {
		t.Fatalf("after NOSCRIPT: %q, want the script loaded again and the EVALSHA resent", cmds)
	}
	if w.inflight != 1 || w.t.ops != 0 {
		t.Fatalf("after NOSCRIPT: %d ops in flight, %d done; want the op still in flight", w.inflight, w.t.ops)
	}
	feed("$40\r\n" + string(releaseSHA) + "\r\n:1\r\n")
	if w.inflight != 0 || w.size != 0 || w.t.ops != 1 || w.t.acquired != 1 || w.t.released != 1 ||
		w.t.outcomes[Resent] != 1 || w.t.reqs != 3 {
		t.Errorf("at the end: %d in flight, %d slots, tally %+v", w.inflight, w.size, w.t)
	}
}

// fakeRedis is a Redis with what lock libraries use: SET key value NX PX ms, DELEX key
// IFEQ value (unless noDelex), SCRIPT LOAD and EVALSHA of the release script (the cache
// forgotten every flushEvery EVALSHAs, if set), PING. It counts double holds: a SET NX
// granted while the key is held.
type fakeRedis struct {
	noDelex    bool
	flushEvery int

	mu       sync.Mutex
	held     map[string]string
	scripts  map[string]bool
	evals    int
	grants   int
	releases int
}

func (f *fakeRedis) serve(t *testing.T) string {
	t.Helper()
	f.held, f.scripts = map[string]string{}, map[string]bool{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	var conns sync.Map
	t.Cleanup(func() { conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true }) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var in, out []byte
				dec := resp.Decoder{MaxArgs: 64, MaxCommand: 1 << 20}
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					in = append(in, buf[:n]...)
					out = out[:0]
					for {
						args, m, err := dec.Parse(in, nil)
						if err != nil || m == 0 {
							break
						}
						out = f.answer(out, args)
						in = in[m:]
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func (f *fakeRedis) answer(out []byte, args [][]byte) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	cmd := strings.ToUpper(string(args[0]))
	switch {
	case cmd == "PING":
		return resp.AppendSimple(out, "PONG")
	case cmd == "SET" && len(args) == 6:
		if _, ok := f.held[string(args[1])]; ok {
			return resp.AppendNull(out)
		}
		f.held[string(args[1])] = string(args[2])
		f.grants++
		return resp.AppendSimple(out, "OK")
	case cmd == "DELEX" && !f.noDelex && len(args) == 4:
		return f.release(out, args[1], args[3])
	case cmd == "SCRIPT" && len(args) == 3 && string(args[2]) == releaseScript:
		f.scripts[string(releaseSHA)] = true
		return resp.AppendBulk(out, releaseSHA)
	case cmd == "EVALSHA" && len(args) == 5:
		f.evals++
		if f.flushEvery > 0 && f.evals%f.flushEvery == 0 {
			f.scripts = map[string]bool{}
		}
		if !f.scripts[string(args[1])] {
			return resp.AppendError(out, "NOSCRIPT No matching script. Please use EVAL.")
		}
		return f.release(out, args[3], args[4])
	}
	return resp.AppendError(out, "ERR unknown command '"+string(args[0])+"', with args beginning with: ")
}

// release deletes key if it holds tok: the compare-and-delete.
func (f *fakeRedis) release(out, key, tok []byte) []byte {
	if v, ok := f.held[string(key)]; !ok || v != string(tok) {
		return resp.AppendInt(out, 0)
	}
	delete(f.held, string(key))
	f.releases++
	return resp.AppendInt(out, 1)
}

// A short run of each dialect against the fake: locks contend on shared keys (some SETs
// refused), every grant is released, every reply is what it should be.
func TestRedisLockRuns(t *testing.T) {
	for _, c := range []struct {
		proto string
		fake  *fakeRedis
	}{
		{"redis-lock", &fakeRedis{}},
		{"redis-lock-lua", &fakeRedis{}},
		{"redis-lock-lua", &fakeRedis{noDelex: true, flushEvery: 50}},
	} {
		addr := c.fake.serve(t)
		res, err := Run(context.Background(), Config{Addr: addr, Proto: c.proto, Conns: 8, Pipeline: 8, Keys: 16,
			AwaitGrant: true, Expiry: 30 * time.Second, Duration: 300 * time.Millisecond, Warmup: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) != 0 || res.FirstError != "" {
			t.Errorf("%s: errors %v %s", c.proto, res.Errors, res.FirstError)
		}
		if res.Acquired == 0 || res.Outcomes["busy"] == 0 || res.Ops == 0 {
			t.Errorf("%s: %d acquired, outcomes %v; want grants and refusals", c.proto, res.Acquired, res.Outcomes)
		}
		// The window cuts pairs at both ends: at most one pipeline a connection apart.
		if d := int64(res.Acquired) - int64(res.Released); d > 64 || d < -64 {
			t.Errorf("%s: %d acquired, %d released", c.proto, res.Acquired, res.Released)
		}
		var text bytes.Buffer
		res.WriteText(&text)
		if !strings.Contains(text.String(), "  locks          "+Grouped(float64(res.Acquired))+" acquired, ") {
			t.Errorf("%s: summary lacks the locks line:\n%s", c.proto, text.String())
		}
		if c.fake.flushEvery > 0 && res.Outcomes["resent"] == 0 {
			t.Errorf("%s with the script cache flushed: no EVALSHA resent (%v)", c.proto, res.Outcomes)
		}
		c.fake.mu.Lock()
		if c.fake.grants-c.fake.releases > 64 {
			t.Errorf("%s: the server granted %d, released %d: releases lost", c.proto, c.fake.grants, c.fake.releases)
		}
		c.fake.mu.Unlock()
	}
}

// A server that does not know DELEX is reported, not counted as releases.
func TestRedisLockReportsUnknownDelex(t *testing.T) {
	f := &fakeRedis{noDelex: true}
	res, err := Run(context.Background(), Config{Addr: f.serve(t), Proto: "redis-lock", Conns: 2, Pipeline: 2, Keys: 4,
		AwaitGrant: true, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors["unknown_command"] == 0 || res.Released != 0 || res.Acquired == 0 {
		t.Errorf("errors %v, acquired %d, released %d; want unknown_command errors and no releases", res.Errors, res.Acquired, res.Released)
	}
}

func TestRedisLockSinkAnswers(t *testing.T) {
	p := newRedisLock(true)
	var b []byte
	b = p.Append(b, &Req{Kind: Acquire, Key: []byte("k"), Op: 1, Opaque: 1})
	b = p.Append(b, &Req{Kind: Release, Key: []byte("k"), Op: 1, Opaque: 2})
	b = p.Append(b, &Req{Kind: Noop, Opaque: 3})
	var out []byte
	for len(b) > 0 {
		var n int
		var err error
		out, n, err = p.Answer(out, b)
		if err != nil || n == 0 {
			t.Fatalf("sink: n %d, %v", n, err)
		}
		b = b[n:]
	}
	want := "+OK\r\n$40\r\n" + string(releaseSHA) + "\r\n:1\r\n+PONG\r\n"
	if !bytes.Equal(out, []byte(want)) {
		t.Errorf("sink answered %q, want %q", out, want)
	}
}
