package loop

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// A client that pipelines more big replies than --max-output and reads them as fast as it
// can is never cut: replies are produced as the socket takes them (ten pipelined GETs of
// a 1 MB value used to be cut after 5.6 MB).
func TestReaderOfBigRepliesIsNeverCut(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.MaxOutput = 2 << 20 })
	rc := dialResp(t, ts.slockAddr)
	value := strings.Repeat("v", 1_000_000)
	expectSimple(t, rc.cmd("SET", "big", value), '+', "OK")
	var batch []byte
	for range 10 {
		batch = resp.AppendCommand(batch, "GET", "big")
	}
	rc.write(batch)
	for i := range 10 {
		r := rc.reply()
		if r.Kind != '$' || len(r.Str) != len(value) {
			t.Fatalf("GET %d: %c reply of %d bytes, want the %d-byte value", i, r.Kind, len(r.Str), len(value))
		}
	}
	expectSimple(t, rc.cmd("PING"), '+', "PONG")
	if strings.Contains(ts.log.String(), "max-output") {
		t.Fatalf("a reading client hit max-output:\n%s", ts.log.String())
	}
}

// countingConn is a fakeConn that counts its writes and wake-ups.
type countingConn struct {
	fakeConn
	writes, wakes int
	got           []byte
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes++
	c.got = append(c.got, b...)
	return len(b), nil
}
func (c *countingConn) Wake(gnet.AsyncCallback) error { c.wakes++; return nil }

// Every wake-up a connection is owed in one turn goes out with one write: 50 slock waits
// that time out together cost one Write, not 50.
func TestWakeupsOfOneTurnShareOneWrite(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cfg := Defaults()
	cfg.Listeners = []Listener{{Proto: ProtoSlock, Addr: "127.0.0.1:0"}}
	cfg.Now = func() time.Time { return now }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	holder, waiter := &countingConn{}, &countingConn{}
	for i, fc := range []*countingConn{holder, waiter} {
		cs := &conn{c: fc, owner: store.Owner(i + 1), proto: ProtoSlock, ln: &listenerState{}}
		cs.h = s.handlerFor(cs)
		fc.ctx = cs
		s.ct.conns[cs.owner] = cs
	}
	var hold, wait []byte
	for i := range 50 {
		key := [16]byte{byte(i)}
		hold = slock.AppendLockRequest(hold, &slock.Frame{Type: slock.TypeLock, RequestID: [16]byte{1, byte(i)},
			LockID: [16]byte{1, byte(i)}, Key: key, Expried: 60})
		wait = slock.AppendLockRequest(wait, &slock.Frame{Type: slock.TypeLock, RequestID: [16]byte{2, byte(i)},
			LockID: [16]byte{2, byte(i)}, Key: key, Timeout: 1, Expried: 60})
	}
	holder.in, waiter.in = hold, wait
	s.OnTraffic(holder)
	s.OnTraffic(waiter)
	if waiter.writes != 0 || holder.writes != 1 {
		t.Fatalf("before the timeouts: holder %d writes, waiter %d, want 1 and 0", holder.writes, waiter.writes)
	}
	now = now.Add(3 * time.Second)
	_ = s.tick(nil)
	if waiter.writes != 1 {
		t.Fatalf("50 timeouts in one tick took %d writes, want 1", waiter.writes)
	}
	for i := 0; i+64 <= len(waiter.got); i += 64 {
		if waiter.got[i] != slock.Magic || slock.Result(waiter.got[i+19]) != slock.ResultTimeout {
			t.Fatalf("reply %d is not a TIMEOUT: % x", i/64, waiter.got[i:i+20])
		}
	}
	if len(waiter.got) != 50*64 {
		t.Fatalf("waiter got %d bytes, want 50 replies of 64", len(waiter.got))
	}
}

// Issue 21, item 6: MGET of 20 × 1 MB values was cut after 11.3 MB, MULTI with 20 GETs and
// EXEC after 9 MB ("too many unsent replies"), though the client read. --max-output bounds
// the backlog of a client that does not read, not a big reply streamed to one that reads.
func TestReaderOfHugeRepliesGetsThemAll(t *testing.T) {
	ts := startSlock(t, nil) // --max-output 4 MiB
	rc := dialResp(t, ts.slockAddr)
	value := strings.Repeat("v", 1_000_000)
	mget := []string{"MGET"}
	for i := range 20 {
		k := "big" + strconv.Itoa(i)
		expectSimple(t, rc.cmd("SET", k, value), '+', "OK")
		mget = append(mget, k)
	}
	check := func(what string, r resp.Reply) {
		t.Helper()
		if r.Kind != '*' || len(r.Elems) != 20 {
			t.Fatalf("%s: %c reply of %d elements", what, r.Kind, len(r.Elems))
		}
		for i, e := range r.Elems {
			if len(e.Str) != len(value) {
				t.Fatalf("%s: element %d has %d bytes", what, i, len(e.Str))
			}
		}
	}
	check("MGET of 20 × 1 MB", rc.cmd(mget...))
	b := resp.AppendCommand(nil, "MULTI")
	for i := range 20 {
		b = resp.AppendCommand(b, "GET", "big"+strconv.Itoa(i))
	}
	rc.write(resp.AppendCommand(b, "EXEC"))
	for range 21 {
		rc.reply() // +OK, then QUEUED
	}
	check("EXEC of 20 GETs of 1 MB", rc.reply())
	// MGET over many keys, many megabytes: answered as the client reads.
	mget = mget[:1]
	for range 5 {
		for i := range 20 {
			mget = append(mget, "big"+strconv.Itoa(i))
		}
	}
	rc.send(mget...)
	r, err := rc.tryReply(time.Minute) // 100 MB through the test's parser: slow under -race on a busy machine
	if err != nil {
		t.Fatalf("MGET of 100 × 1 MB: %v", err)
	}
	if r.Kind != '*' || len(r.Elems) != 100 || len(r.Elems[99].Str) != len(value) {
		t.Fatalf("MGET of 100 × 1 MB: %c reply of %d elements", r.Kind, len(r.Elems))
	}
	expectSimple(t, rc.cmd("PING"), '+', "PONG")
	if strings.Contains(ts.log.String(), "max-output") {
		t.Fatalf("a reading client hit max-output:\n%s", ts.log.String())
	}

	// One that does not read is cut, as before: the MGET of 20 MB and the EXEC alike.
	for j, req := range [][]byte{resp.AppendCommand(nil, mget[:21]...), resp.AppendCommand(b, "EXEC")} {
		quiet := dialResp(t, ts.slockAddr)
		quiet.write(req)
		// It reads nothing until the server has closed it (or for 20 s): a fixed sleep of
		// outputStall and a little failed at load 14, when the server filled the socket late.
		for wait := time.Now().Add(20 * time.Second); strings.Count(ts.log.String(), "does not read them (max-output)") <= j && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		deadline := time.Now().Add(20 * time.Second)
		_ = quiet.c.SetReadDeadline(deadline)
		var sink [64 << 10]byte
		got := 0
		for {
			n, err := quiet.c.Read(sink[:])
			got += n
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatalf("the connection that does not read was not closed (got %d bytes)\n%s", got, ts.log.String())
				}
				break
			}
		}
		if got >= 20_000_000 {
			t.Fatalf("the client that did not read got all %d bytes", got)
		}
	}
	ts.log.waitFor(t, "does not read them (max-output)")
	expectSimple(t, rc.cmd("PING"), '+', "PONG")
}
