package loop

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
)

func TestCounterEveryOpcodeAndStatus(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)

	f := a.simple(counter.OpNoop)
	expectStatus(t, f, counter.StatusOK)
	if f.Op != counter.OpNoop || len(f.Body) != 0 || f.Raw[3] != 0 {
		t.Fatalf("noop reply % x", f.Raw)
	}
	expectStatus(t, a.get("k"), counter.StatusNotFound)

	f = a.acquire("k", 3, 5)
	expectStatus(t, f, counter.StatusOK)
	if f.Op != counter.OpAcquire || len(f.Body) != 4 || u32(f.Body) != 3 {
		t.Fatalf("acquire reply % x", f.Raw)
	}
	expectStatus(t, b.acquire("k", 3, 5), counter.StatusNotAvailable) // 3+3 > 5
	expectStatus(t, b.acquire("k", 2, 5), counter.StatusOK)           // 3+2 <= 5
	if f = b.get("k"); f.Status != counter.StatusOK || u32(f.Body) != 5 {
		t.Fatalf("get after acquires: % x", f.Raw)
	}
	expectStatus(t, a.release("nope", 1), counter.StatusNotFound)
	expectStatus(t, a.release("k", 4), counter.StatusNotAcquired) // a holds 3
	f = a.release("k", 3)
	expectStatus(t, f, counter.StatusOK)
	if len(f.Body) != 0 || f.Op != counter.OpRelease {
		t.Fatalf("release reply % x", f.Raw)
	}
	expectStatus(t, a.release("k", 1), counter.StatusNotAcquired) // a holds nothing now
	expectStatus(t, a.release("k", 0), counter.StatusNotAcquired) // no entry at all
	expectStatus(t, b.release("k", 0), counter.StatusOK)          // b holds 2: zero is legal
	if f = a.get("k"); u32(f.Body) != 2 {
		t.Fatalf("consumption %d, want 2", u32(f.Body))
	}

	// Invalid arguments: resources 0, max < resources, empty name, short body.
	expectStatus(t, a.acquire("k", 0, 5), counter.StatusInvalid)
	expectStatus(t, a.acquire("k", 6, 5), counter.StatusInvalid)
	expectStatus(t, a.acquire("", 1, 5), counter.StatusInvalid)
	o := a.next()
	f = a.roundTrip(counter.AppendRequest(nil, counter.OpGet, o, []byte{0}), o)
	expectStatus(t, f, counter.StatusInvalid)
	if f.Op != counter.OpGet {
		t.Fatalf("opcode %#x echoed, want get", f.Op)
	}
	// Unknown opcode: 0x81, opcode echoed.
	o = a.next()
	f = a.roundTrip(counter.AppendRequest(nil, 0x42, o, []byte("body")), o)
	expectStatus(t, f, counter.StatusUnknownCommand)
	if f.Op != 0x42 {
		t.Fatalf("unknown opcode reply carries opcode %#x, want 0x42", f.Op)
	}
	// Wrong magic: 0x04 with the opcode echoed; the connection stays usable.
	o = a.next()
	req := counter.AppendGet(nil, o, []byte("k"))
	req[0] = 0x80
	f = a.roundTrip(req, o)
	expectStatus(t, f, counter.StatusInvalid)
	if f.Op != counter.OpGet || f.Magic != counter.MagicResponse {
		t.Fatalf("wrong-magic reply % x", f.Raw)
	}
	if f = a.get("k"); f.Status != counter.StatusOK {
		t.Fatalf("connection unusable after bad requests: % x", f.Raw)
	}
	// Flags and reserved bytes are ignored, the opaque is echoed verbatim.
	req = counter.AppendGet(nil, 0xdeadbeef, []byte("k"))
	req[2], req[3] = 0xff, 0xff
	f = a.roundTrip(req, 0xdeadbeef)
	if f.Status != counter.StatusOK || f.Raw[3] != 0 {
		t.Fatalf("reply to flagged request % x", f.Raw)
	}
	ts.checkInvariants(t)
}

func TestCounterOutOfMemory(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxObjects = 2 })
	a := dial(t, ts.counterAddr)
	expectStatus(t, a.acquire("one", 1, 1), counter.StatusOK)
	expectStatus(t, a.acquire("two", 1, 1), counter.StatusOK)
	expectStatus(t, a.acquire("three", 1, 1), counter.StatusOutOfMemory)
	expectStatus(t, a.acquire("one", 1, 2), counter.StatusOK) // existing counters still work
	ts.log.waitFor(t, "max-objects")
}

func TestCounterStats(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)
	a.simple(counter.OpNoop)
	a.acquire("x", 1, 10)
	a.acquire("y", 1, 10)
	a.acquire("y", 100, 10) // invalid: not counted
	b.acquire("x", 20, 20)  // refused: counted
	a.get("x")
	a.get("zzz")
	a.release("x", 1)
	b.release("x", 1) // not acquired: counted
	for f := a.simple(counter.OpDump); len(f.Body) > 0; f = a.readFrame() {
	}
	list, m := b.stats()
	want := []string{"objects", "total_objects", "used_memory", "conflicts", "gc_count",
		"last_gc_elapsed", "total_gc_elapsed", "curr_connections", "total_connections",
		"command:noop", "command:get", "command:acquire", "command:release", "command:stats", "command:dump"}
	if len(list) != len(want) {
		t.Fatalf("stats has %d items, want %d: %v", len(list), len(want), list)
	}
	for i, w := range want {
		if list[i].Name != w {
			t.Fatalf("stat %d is %q, want %q", i, list[i].Name, w)
		}
		if _, err := strconv.ParseUint(list[i].Value, 10, 64); err != nil {
			t.Fatalf("stat %s=%q is not decimal", w, list[i].Value)
		}
	}
	for k, v := range map[string]string{
		"objects": "2", "total_objects": "2", "curr_connections": "2", "total_connections": "2",
		"command:noop": "1", "command:get": "2", "command:acquire": "3", "command:release": "2",
		"command:stats": "1", "command:dump": "1", "conflicts": "0", "gc_count": "1",
	} {
		if m[k] != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
	if n, _ := strconv.Atoi(m["used_memory"]); n <= 0 {
		t.Errorf("used_memory = %s", m["used_memory"])
	}
}

func TestCounterDump(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	want := map[string][2]uint32{}
	for i := 0; i < 5; i++ {
		name := fmt.Sprintf("c%d\x00", i) // names are arbitrary bytes
		expectStatus(t, a.acquire(name, uint32(i+1), 100), counter.StatusOK)
		want[name] = [2]uint32{uint32(i + 1), uint32(i + 1)}
	}
	expectStatus(t, a.acquire("c0\x00", 7, 100), counter.StatusOK)
	expectStatus(t, a.release("c0\x00", 8), counter.StatusOK) // back to 0, max stays 8
	want["c0\x00"] = [2]uint32{0, 8}

	o := a.next()
	a.send(counter.AppendRequest(nil, counter.OpDump, o, []byte("ignored body")))
	got := map[string][2]uint32{}
	for {
		f := a.readFrame()
		if f.Opaque != o || f.Op != counter.OpDump || f.Status != counter.StatusOK {
			t.Fatalf("dump reply % x", f.Raw)
		}
		if len(f.Body) == 0 {
			break
		}
		cur, max, name, err := counter.ParseDumpBody(f.Body)
		if err != nil {
			t.Fatalf("dump body: %v", err)
		}
		if binary.BigEndian.Uint32(f.Body[4:8]) != max {
			t.Fatal("max is the second word")
		}
		got[string(name)] = [2]uint32{cur, max}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dump = %v, want %v", got, want)
	}
	// The connection goes on after the terminator.
	expectStatus(t, a.simple(counter.OpNoop), counter.StatusOK)
}

// A Dump with the body DumpAcquired (tallyd's extension) ends each entry with the
// Acquires the counter has granted; a plain Dump on the same connection stays plain.
func TestCounterDumpAcquired(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)
	for range 7 {
		expectStatus(t, a.acquire("pairs", 1, 1), counter.StatusOK)
		expectStatus(t, a.release("pairs", 1), counter.StatusOK)
	}
	expectStatus(t, a.acquire("held", 2, 5), counter.StatusOK)
	expectStatus(t, b.acquire("held", 4, 5), counter.StatusNotAvailable) // refused: not counted
	dump := func(body []byte) map[string]string {
		o := a.next()
		a.send(counter.AppendRequest(nil, counter.OpDump, o, body))
		got := map[string]string{}
		for {
			f := a.readFrame()
			if f.Opaque != o || f.Op != counter.OpDump || f.Status != counter.StatusOK {
				t.Fatalf("dump reply % x", f.Raw)
			}
			if len(f.Body) == 0 {
				return got
			}
			cur, max, name, ac, has, err := counter.ParseDumpEntry(f.Body)
			if err != nil {
				t.Fatalf("dump entry % x: %v", f.Body, err)
			}
			got[string(name)] = fmt.Sprint(cur, max, ac, has)
		}
	}
	want := map[string]string{"pairs": "0 1 7 true", "held": "2 2 1 true"}
	if got := dump([]byte{counter.DumpAcquired}); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("extended dump = %v, want %v", got, want)
	}
	want = map[string]string{"pairs": "0 1 0 false", "held": "2 2 0 false"}
	if got := dump(nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("plain dump after an extended one = %v, want %v", got, want)
	}
	expectStatus(t, a.simple(counter.OpNoop), counter.StatusOK)
}

// A dump much larger than --max-output streams in chunks as the client reads, with the
// requests pipelined behind it answered after the terminator.
func TestCounterDumpLargerThanOutputLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxOutput = 64 << 10 })
	a := dial(t, ts.counterAddr)
	const n = 20000
	var batch []byte
	for i := 0; i < n; i++ {
		batch = counter.AppendAcquire(batch, 0, 1, 1, []byte(fmt.Sprintf("counter-with-a-longish-name-%06d", i)))
	}
	a.send(batch)
	for i := 0; i < n; i++ {
		if f := a.readFrame(); f.Status != counter.StatusOK {
			t.Fatalf("acquire %d: % x", i, f.Raw)
		}
	}
	a.send(counter.AppendRequest(nil, counter.OpDump, 77, nil))
	a.send(counter.AppendRequest(nil, counter.OpNoop, 78, nil))
	seen := 0
	time.Sleep(50 * time.Millisecond) // let the server fill its buffers first
	for {
		f := a.readFrame()
		if f.Opaque != 77 {
			t.Fatalf("reply out of order: % x", f.Raw[:12])
		}
		if len(f.Body) == 0 {
			break
		}
		seen++
	}
	if seen != n {
		t.Fatalf("dump listed %d counters, want %d", seen, n)
	}
	if f := a.readFrame(); f.Opaque != 78 || f.Op != counter.OpNoop {
		t.Fatalf("pipelined noop after dump: % x", f.Raw)
	}
}

func TestPipelinedThousandInOrder(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	var batch []byte
	for i := uint32(1); i <= 1000; i++ {
		switch i % 3 {
		case 0:
			batch = counter.AppendAcquire(batch, i, 1, 1000, []byte("p"))
		case 1:
			batch = counter.AppendGet(batch, i, []byte("p"))
		case 2:
			batch = counter.AppendRequest(batch, counter.OpNoop, i, nil)
		}
	}
	a.send(batch)
	for i := uint32(1); i <= 1000; i++ {
		f := a.readFrame()
		if f.Opaque != i {
			t.Fatalf("reply %d has opaque %d", i, f.Opaque)
		}
		if i%3 == 0 && (f.Status != counter.StatusOK || f.Op != counter.OpAcquire) {
			t.Fatalf("acquire %d: % x", i, f.Raw)
		}
	}
	if f := a.get("p"); u32(f.Body) != 333 {
		t.Fatalf("consumption %d, want 333", u32(f.Body))
	}
}

func TestRequestOneByteAtATime(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	req := counter.AppendAcquire(nil, 9, 2, 3, []byte("slow"))
	req = counter.AppendGet(req, 10, []byte("slow"))
	for i := range req {
		a.send(req[i : i+1])
		time.Sleep(time.Millisecond)
	}
	if f := a.readFrame(); f.Opaque != 9 || f.Status != counter.StatusOK || u32(f.Body) != 2 {
		t.Fatalf("acquire: % x", f.Raw)
	}
	if f := a.readFrame(); f.Opaque != 10 || u32(f.Body) != 2 {
		t.Fatalf("get: % x", f.Raw)
	}
}

// A holder's close, by FIN or by RST, releases what it held at once.
func TestCloseReleasesWithin100ms(t *testing.T) {
	for _, rst := range []bool{false, true} {
		t.Run(map[bool]string{false: "FIN", true: "RST"}[rst], func(t *testing.T) {
			ts := startServer(t, nil)
			a := dial(t, ts.counterAddr)
			b := dial(t, ts.counterAddr)
			expectStatus(t, a.acquire("lock", 1, 1), counter.StatusOK)
			expectStatus(t, a.acquire("other", 5, 9), counter.StatusOK)
			expectStatus(t, b.acquire("lock", 1, 1), counter.StatusNotAvailable)
			if rst {
				if err := a.c.(*net.TCPConn).SetLinger(0); err != nil {
					t.Fatal(err)
				}
			}
			closed := time.Now()
			_ = a.c.Close()
			for {
				if b.acquire("lock", 1, 1).Status == counter.StatusOK {
					break
				}
				if time.Since(closed) > 100*time.Millisecond {
					t.Fatal("the closed holder's resources were not released within 100 ms")
				}
				time.Sleep(2 * time.Millisecond)
			}
			if f := b.get("other"); u32(f.Body) != 0 {
				t.Fatalf("other still at %d", u32(f.Body))
			}
			_, m := b.stats()
			if m["curr_connections"] != "1" {
				t.Fatalf("curr_connections = %s after a close", m["curr_connections"])
			}
			ts.checkInvariants(t)
		})
	}
}

func TestMaxConnections(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConnections = 2 })
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)
	expectStatus(t, a.simple(counter.OpNoop), counter.StatusOK)
	expectStatus(t, b.simple(counter.OpNoop), counter.StatusOK)
	c := dial(t, ts.counterAddr)
	c.send(counter.AppendRequest(nil, counter.OpNoop, 1, nil))
	c.expectClosed()
	ts.log.waitFor(t, "max-connections")
	_ = a.c.Close()
	// A slot is free again once a closes.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := dial(t, ts.counterAddr)
		d.send(counter.AppendRequest(nil, counter.OpNoop, 1, nil))
		if _, err := d.tryRead(time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection admitted after one closed")
		}
	}
}

func TestListenerMaxConnections(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Listeners[1].MaxConnections = 1 })
	s1 := dial(t, ts.semaphoreAddr)
	expectStatus(t, s1.simple(counter.OpNoop), counter.StatusOK)
	s2 := dial(t, ts.semaphoreAddr)
	s2.expectClosed()
	// The counter listener is not limited.
	c1 := dial(t, ts.counterAddr)
	c2 := dial(t, ts.counterAddr)
	expectStatus(t, c1.simple(counter.OpNoop), counter.StatusOK)
	expectStatus(t, c2.simple(counter.OpNoop), counter.StatusOK)
}

func TestOversizeBodyClosesAndReleases(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxBody = 1024 })
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)
	expectStatus(t, a.acquire("held", 1, 1), counter.StatusOK)
	// A header claiming 1025 bytes: closed at once, before any body arrives.
	hdr := counter.AppendHeader(nil, counter.OpGet, 0, 1025, 1)
	hdr[0] = counter.MagicRequest
	a.send(hdr)
	a.expectClosed()
	deadline := time.Now().Add(5 * time.Second)
	for b.acquire("held", 1, 1).Status != counter.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("resources of the closed connection were not released")
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.log.waitFor(t, "framing lost")
	// Exactly the limit is fine.
	body := make([]byte, 1024)
	binary.BigEndian.PutUint16(body, 3)
	copy(body[2:], "abc")
	o := b.next()
	if f := b.roundTrip(counter.AppendRequest(nil, counter.OpGet, o, body), o); f.Status != counter.StatusNotFound {
		t.Fatalf("get with a 1024-byte body: % x", f.Raw)
	}
}

func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxOutput, c.MaxInput = 256<<10, 512<<10 })
	a := dial(t, ts.counterAddr)
	b := dial(t, ts.counterAddr)
	expectStatus(t, a.acquire("held", 1, 1), counter.StatusOK)
	if err := a.c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	// Stats replies are ~300 bytes each: send requests and never read the replies.
	var batch []byte
	for i := 0; i < 1000; i++ {
		batch = counter.AppendRequest(batch, counter.OpStats, uint32(i), nil)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_ = a.c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := a.c.Write(batch); err != nil {
			break // the server has closed us
		}
		if b.get("held").Status == counter.StatusNotFound || u32(b.get("held").Body) == 0 {
			break
		}
	}
	// Its replies stop being produced once half of --max-output is unsent (a client that
	// reads is never cut for that); the requests it goes on sending pile up unread until
	// --max-input closes it.
	ts.log.waitFor(t, "max-input")
	if f := b.get("held"); f.Status == counter.StatusOK && u32(f.Body) != 0 {
		t.Fatalf("the cut-off connection still holds %d", u32(f.Body))
	}
}

func TestSemaphoreProtocol(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.semaphoreAddr)
	b := dial(t, ts.semaphoreAddr)
	expectStatus(t, a.get("s"), counter.StatusNotFound)
	f := a.acquire("s", 2, 5) // new: value = 5 - 2
	expectStatus(t, f, counter.StatusOK)
	if u32(f.Body) != 2 {
		t.Fatalf("acquire reply %d", u32(f.Body))
	}
	if f = b.get("s"); u32(f.Body) != 3 {
		t.Fatalf("value %d, want 3", u32(f.Body))
	}
	expectStatus(t, b.acquire("s", 4, 100), counter.StatusNotAvailable) // initial ignored once it exists
	expectStatus(t, b.acquire("s", 3, 100), counter.StatusOK)
	expectStatus(t, b.acquire("s", 3, 2), counter.StatusInvalid) // initial < resources
	expectStatus(t, a.release("s", 3), counter.StatusNotAcquired)
	expectStatus(t, a.release("s", 2), counter.StatusOK)
	if f = b.get("s"); u32(f.Body) != 2 {
		t.Fatalf("value %d, want 2", u32(f.Body))
	}
	// Dump is not part of the semaphore protocol.
	expectStatus(t, a.simple(counter.OpDump), counter.StatusUnknownCommand)
	list, m := a.stats()
	if len(list) != 14 || list[13].Name != "command:stats" || m["command:dump"] != "" {
		t.Fatalf("semaphore stats: %v", list)
	}
	// The namespaces are separate: the counter protocol has no "s".
	c := dial(t, ts.counterAddr)
	expectStatus(t, c.get("s"), counter.StatusNotFound)
	_ = b.c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for u32(a.get("s").Body) != 5 {
		if time.Now().After(deadline) {
			t.Fatal("closing b did not give its 3 back")
		}
		time.Sleep(2 * time.Millisecond)
	}
	ts.checkInvariants(t)
}

func TestStopClosesEveryConnection(t *testing.T) {
	ts := startServer(t, nil)
	a := dial(t, ts.counterAddr)
	expectStatus(t, a.acquire("x", 1, 1), counter.StatusOK)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.expectClosed()
	}()
	ctx, cancel := contextWithTimeout(10 * time.Second)
	defer cancel()
	if err := ts.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
