package loop

import (
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
		s.conns[cs.owner] = cs
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
