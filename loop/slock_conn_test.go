package loop

// slock over real TCP: connection behaviour — sniffing, bad headers, data record limits,
// keep-alive, locks outliving their connection, will commands, INIT ClientId routing, and
// 10,000 pipelined waiters on one key.

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

func TestSlockSniffByteByByte(t *testing.T) {
	ts := startSlock(t, nil)

	// Binary: a PING, then a Lock with a data record, each written one byte at a time
	// (the first write is the magic alone).
	c := dialSlock(t, ts.slockAddr)
	rid := c.id()
	ping := op{c: c, rid: rid, ch: c.expect(rid, 1), what: "PING sent a byte at a time"}
	l := newLock(c, key16("sniff"), 5, 60)
	f := lockFrame(slock.TypeLock, 0, 0, l.key, l.id, 5, 60, 0, 0, rec(slock.DataSet, 0, []byte("split")))
	f.RequestID = c.id()
	lock := op{c: c, rid: f.RequestID, ch: c.expect(f.RequestID, 1), what: "Lock sent a byte at a time"}
	b := slock.AppendRequest(nil, slock.TypePing, rid)
	b = slock.AppendLockRequest(b, f)
	for i := range b {
		c.write(b[i : i+1])
		if i < 66 {
			time.Sleep(time.Millisecond)
		}
	}
	eq(t, "PING type", ping.want(slock.ResultOK).Type, slock.TypePing)
	expectLock(t, lock.want(slock.ResultOK), slock.TypeLock, l.id, l.key, 1, 1)
	expectValue(t, newLock(c, l.key, 0, 0).LockShow().want(slock.ResultUnownError), 0, "split")

	// RESP: a PING array a byte at a time.
	rc := dialResp(t, ts.slockAddr)
	for _, ch := range []byte("*1\r\n$4\r\nPING\r\n") {
		rc.write([]byte{ch})
		time.Sleep(time.Millisecond)
	}
	if r := rc.reply(); r.Kind != '+' || string(r.Str) != "PONG" {
		t.Fatalf("PING a byte at a time: %s", showResp(r))
	}
	ts.healthy(t)
}

func TestSlockBadHeader(t *testing.T) {
	ts := startSlock(t, nil)
	for _, tc := range []struct {
		name   string
		at     int
		b      byte
		result slock.Result
	}{
		{"magic", 0, 0x57, slock.ResultUnknownMagic},
		{"version", 1, 0x02, slock.ResultUnknownVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialSlock(t, ts.slockAddr)
			c.ping()
			rid := c.id()
			b := slock.AppendRequest(nil, slock.TypePing, rid)
			b[tc.at] = tc.b
			// A frame queued behind the bad one is never answered.
			b = slock.AppendRequest(b, slock.TypePing, c.id())
			r := c.raw(rid, b, "bad "+tc.name).want(tc.result)
			eq(t, "type echoed", r.Type, slock.TypePing)
			eq(t, "magic of the reply", r.Raw[0], byte(slock.Magic))
			eq(t, "version of the reply", r.Raw[1], byte(slock.Version))
			c.expectClosed()
			if len(c.unasked) != 0 {
				t.Fatalf("%d frames after the error reply", len(c.unasked))
			}
		})
	}
	// A first frame that is neither binary (56 01) nor RESP ('*') is closed at once.
	for _, first := range [][]byte{{0x56, 0x02}, []byte("PING\r\n")} {
		conn, err := net.DialTimeout("tcp", ts.slockAddr, replyWait)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(replyWait))
		if _, err := conn.Write(first); err != nil {
			t.Fatal(err)
		}
		if n, err := io.ReadAll(conn); len(n) != 0 || err != nil && !isReset(err) {
			t.Fatalf("first bytes % x: got %q, %v; want a close", first, n, err)
		}
		conn.Close()
	}
	ts.healthy(t)
}

func TestSlockDataRecordLimits(t *testing.T) {
	ts := startSlock(t, nil)
	header := func(c *slockClient) []byte {
		f := lockFrame(slock.TypeLock, slock.FlagData, 0, key16("limits"), c.id(), 5, 60, 0, 0, nil)
		f.RequestID = c.id()
		return slock.AppendLockRequest(nil, f)
	}
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"N=0", le32(0)},
		{"N=1", append(le32(1), 0)},
		{"N=1MiB+1", append(le32(1<<20+1), 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialSlock(t, ts.slockAddr)
			c.ping()
			c.write(append(header(c), tc.tail...))
			c.expectClosed()
			if len(c.unasked) != 0 {
				t.Fatalf("a reply to a record with %s", tc.name)
			}
		})
	}
	// A CALL whose ContentLen is above 1 MiB is closed too.
	t.Run("CALL ContentLen 1MiB+1", func(t *testing.T) {
		c := dialSlock(t, ts.slockAddr)
		c.ping()
		call := slock.AppendCallRequest(nil, c.id(), slock.MethodListLock, nil)
		binary.LittleEndian.PutUint32(call[22:], 1<<20+1)
		c.write(append(call, 0, 0, 0))
		c.expectClosed()
	})
	// N = 1 MiB is accepted and stored; a reply carries it whole.
	a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
	value := bytes.Repeat([]byte("0123456789abcdef"), (1<<20-2)/16+1)[:1<<20-2]
	l := newLock(a, key16("limits"), 5, 60)
	l.send(slock.TypeLock, 0, rec(slock.DataSet, 0, value)).want(slock.ResultOK)
	r := newLock(b, l.key, 0, 0).LockShow().want(slock.ResultUnownError)
	eq(t, "value record length", len(r.Value), 4+1<<20)
	if d, _ := r.data(t); !bytes.Equal(d.Value, value) {
		t.Fatal("the 1 MiB value came back changed")
	}
	ts.healthy(t)
}

func TestSlockKeepAlive(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dial3(t, ts)

	// A holder with KEEPLIVED lives past its Expried while its connection is open...
	key := key16("keepalive")
	newLock(a, key, 5, ms(100)|tfKeep).Lock().want(slock.ResultOK)
	time.Sleep(400 * time.Millisecond)
	newLock(b, key, 0, 60).Lock().want(slock.ResultTimeout)
	a.noPush(10 * time.Millisecond)
	// ...and ends at most Expried after the close.
	w := newLock(b, key, ms(5000), 60).Lock()
	w.none(20 * time.Millisecond)
	closed := time.Now()
	a.close()
	r := w.want(slock.ResultOK)
	if d := r.At.Sub(closed); d < 90*time.Millisecond || d > 2*time.Second {
		t.Fatalf("the kept-alive 100 ms lock ended %v after its connection closed", d)
	}

	// A wait with KEEPLIVED outlasts its Timeout while connected; after the close it times
	// out.
	k2 := key16("keepalive-wait")
	newLock(b, k2, 5, 60).Lock().want(slock.ResultOK)
	cw := newLock(c, k2, ms(100)|tfKeep, 60).Lock()
	cw.none(400 * time.Millisecond)
	eq(t, "waiting", b.state(0).WaitCount, 1)
	c.close()
	deadline := time.Now().Add(3 * time.Second)
	for st := b.state(0); st.WaitCount != 0 || st.TimeoutedCount != 1; st = b.state(0) {
		if time.Now().After(deadline) {
			t.Fatalf("the kept-alive wait did not time out after the close: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.healthy(t)
}

func TestSlockLocksSurviveClose(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dial3(t, ts)
	key, k2 := key16("survive"), key16("survive-wait")

	la := newLock(a, key, 5, 60)
	la.Lock().want(slock.ResultOK)
	newLock(b, k2, 5, 60).Lock().want(slock.ResultOK)
	wc := newLock(c, k2, 5, 60)
	wc.Lock().none(30 * time.Millisecond)
	a.close()
	c.close()
	time.Sleep(50 * time.Millisecond)

	newLock(b, key, 0, 60).Lock().want(slock.ResultTimeout)
	eq(t, "holder after the close", newLock(b, key, 0, 0).LockShow().want(slock.ResultUnownError).LockID, la.id)
	// Locks belong to LockIds, not connections: anyone may unlock it.
	(&sLock{c: b, key: key, id: la.id, timeout: 5, expried: 60}).Unlock().want(slock.ResultOK)
	// The closed connection's queued request is still queued and takes the key.
	eq(t, "waiting", b.state(0).WaitCount, 1)
	(&sLock{c: b, key: k2, timeout: 5, expried: 60}).UnlockHead().want(slock.ResultOK)
	eq(t, "holder", newLock(b, k2, 0, 0).LockShow().want(slock.ResultUnownError).LockID, wc.id)
	ts.healthy(t)
}

func TestSlockWillCommands(t *testing.T) {
	for _, tc := range []struct {
		name       string
		init, quit bool
	}{{"no INIT", false, false}, {"after INIT", true, false}, {"after INIT, QUIT", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startSlock(t, nil)
			a, b := dialSlock(t, ts.slockAddr), dialSlock(t, ts.slockAddr)
			cid := a.id()
			if tc.init {
				eq(t, "INIT type", a.init(cid).Flag, slock.InitStandalone)
			}
			k1, k2 := key16("will-1"), key16("will-2")
			h := newLock(a, k1, 5, 60)
			h.Lock().want(slock.ResultOK)
			wu := lockFrame(slock.TypeWillUnlock, 0, 0, k1, h.id, 5, 60, 0, 0, nil)
			wl := lockFrame(slock.TypeWillLock, 0, 0, k2, a.id(), 5, 60, 0, 0, rec(slock.DataSet, 0, []byte("will")))
			wu.RequestID, wl.RequestID = a.id(), a.id()
			ops := []op{{c: a, rid: wu.RequestID, ch: a.expect(wu.RequestID, 1), what: "WILL_UNLOCK"},
				{c: a, rid: wl.RequestID, ch: a.expect(wl.RequestID, 1), what: "WILL_LOCK"}}
			a.write(slock.AppendLockRequest(slock.AppendLockRequest(nil, wu), wl))
			a.ping() // the will commands are queued silently
			for _, o := range ops {
				o.none(20 * time.Millisecond)
			}

			var a2 *slockClient
			if tc.init {
				// A newer connection with the same ClientId: frames for a's locks go there
				// once a has closed, but the will commands' own replies do not.
				a2 = dialSlock(t, ts.slockAddr)
				eq(t, "INIT type of a ClientId in use", a2.init(cid).Flag, slock.InitStandalone|slock.InitKnownClient)
				ops = append(ops, op{c: a2, rid: wu.RequestID, ch: a2.expect(wu.RequestID, 1), what: "WILL_UNLOCK on the new connection"},
					op{c: a2, rid: wl.RequestID, ch: a2.expect(wl.RequestID, 1), what: "WILL_LOCK on the new connection"})
			}
			w := newLock(b, k1, 5, 60).Lock()
			w.none(50 * time.Millisecond)
			if tc.quit {
				a.simple(slock.TypeQuit).want(slock.ResultOK)
				a.expectClosed()
			} else {
				a.close()
			}
			w.want(slock.ResultOK) // WILL_UNLOCK ran
			r := newLock(b, k2, 0, 0).LockShow().want(slock.ResultUnownError)
			eq(t, "WILL_LOCK holder", r.LockID, wl.LockID)
			expectValue(t, r, 0, "will")
			for _, o := range ops[2:] {
				o.none(100 * time.Millisecond)
			}
			if a2 != nil {
				a2.ping()
				a2.noPush(10 * time.Millisecond)
			}
			ts.healthy(t)
		})
	}
}

func TestSlockInitRouting(t *testing.T) {
	ts := startSlock(t, nil)
	a, b, c := dial3(t, ts)
	cid := a.id()
	eq(t, "INIT type", a.init(cid).Flag, slock.InitStandalone)
	kq, ke := key16("route-queued"), key16("route-expiry")

	bh := newLock(b, kq, 5, 60)
	bh.Lock().want(slock.ResultOK)
	q := newLock(a, kq, 10, 60)
	qo := q.Lock()
	qo.none(30 * time.Millisecond)
	er := newLock(a, ke, 5, ms(1500)).Lock().want(slock.ResultOK)
	a.close()

	// A connection with the same ClientId gets what was owed to the closed one: the grant
	// of its queued request and the expiry push of its lock.
	a2 := dialSlock(t, ts.slockAddr)
	if f := a2.init(cid).Flag; f&slock.InitStandalone != slock.InitStandalone {
		t.Fatalf("INIT type %#x", f)
	}
	grant := op{c: a2, rid: qo.rid, ch: a2.expect(qo.rid, 1), what: "grant of the closed connection's request"}
	bh.Unlock().want(slock.ResultOK)
	expectLock(t, grant.want(slock.ResultOK), slock.TypeLock, q.id, kq, 1, 1)
	p := a2.push("expiry of the closed connection's lock")
	eq(t, "push result", p.Result, slock.ResultExpried)
	eq(t, "push RequestId", p.RequestID, er.RequestID)

	// Without INIT, frames for a closed connection are dropped.
	newLock(c, key16("route-dropped"), 5, ms(50)).Lock().want(slock.ResultOK)
	c.close()
	time.Sleep(150 * time.Millisecond)
	a2.noPush(10 * time.Millisecond)
	b.noPush(10 * time.Millisecond)
	ts.healthy(t)
}

func TestSlockTenThousandWaitersFIFO(t *testing.T) {
	ts := startSlock(t, nil)
	const conns, total, batch = 4, 10_000, 250
	holder := dialSlock(t, ts.slockAddr)
	key := key16("fifo")
	const forever = 1 | tfVersion
	h := newLock(holder, key, 5, forever)
	h.Lock().want(slock.ResultOK)

	cs := make([]*slockClient, conns)
	for i := range cs {
		cs[i] = dialSlock(t, ts.slockAddr)
	}
	type waiter struct {
		c       *slockClient
		rid, id [16]byte
	}
	order := make([]waiter, 0, total)
	// Batches of pipelined frames, round robin over the connections. STATE on the same
	// connection answers after its frames, so each batch is queued before the next is sent
	// and the queue order is known.
	for len(order) < total {
		for _, c := range cs {
			var buf []byte
			for j := 0; j < batch && len(order) < total; j++ {
				f := lockFrame(slock.TypeLock, 0, 0, key, c.id(), 60, forever, 0, 0, nil)
				f.RequestID = c.id()
				buf = slock.AppendLockRequest(buf, f)
				order = append(order, waiter{c, f.RequestID, f.LockID})
			}
			c.write(buf)
			eq(t, "waiting", c.state(0).WaitCount, uint32(len(order)))
		}
	}
	lw := listWait(t, holder, 0, key)
	if len(lw.Waits) != total {
		t.Fatalf("LIST_WAIT lists %d waiters, want %d", len(lw.Waits), total)
	}
	for i, w := range lw.Waits {
		if w.Command.RequestID != order[i].rid {
			t.Fatalf("LIST_WAIT position %d is request %x, want %x", i, w.Command.RequestID, order[i].rid)
		}
	}

	// Grants come unasked; only one can be outstanding at a time (the lock is exclusive),
	// so merged they arrive in grant order.
	merged := make(chan *slockReply, 16)
	stop := make(chan struct{})
	defer close(stop)
	for _, c := range cs {
		go func(c *slockClient) {
			for {
				select {
				case r := <-c.unasked:
					merged <- r
				case <-stop:
					return
				}
			}
		}(c)
	}
	h.Unlock().want(slock.ResultOK)
	unlocks := make([]op, 0, total)
	for i, w := range order {
		var r *slockReply
		select {
		case r = <-merged:
		case <-time.After(replyWait):
			t.Fatalf("grant %d of %d never came", i, total)
		}
		if r.RequestID != w.rid || r.Result != slock.ResultOK || r.Lcount != 1 {
			t.Fatalf("grant %d: got %v, want request %x granted (FIFO)", i, r, w.rid)
		}
		f := lockFrame(slock.TypeUnlock, 0, 0, key, w.id, 60, forever, 0, 0, nil)
		unlocks = append(unlocks, w.c.start(f, "unlock"))
	}
	for _, u := range unlocks {
		u.want(slock.ResultOK)
	}
	st := holder.state(0)
	eq(t, "keys left", st.KeyCount, 0)
	eq(t, "grants", st.LockCount, total+1)
	ts.healthy(t)
}

func TestSlockWaiterLimits(t *testing.T) {
	ts := startSlock(t, func(c *Config) { c.SlockMaxWaitersPerKey, c.SlockMaxWaitersPerConn = 2, 3 })
	a, b, c := dial3(t, ts)
	k1, k2 := key16("limit-1"), key16("limit-2")
	newLock(a, k1, 5, 60).Lock().want(slock.ResultOK)
	newLock(a, k2, 5, 60).Lock().want(slock.ResultOK)

	// Per key: the third waiter on k1 times out at once.
	w1, w2 := newLock(b, k1, 5, 60).Lock(), newLock(c, k1, 5, 60).Lock()
	w2.none(20 * time.Millisecond)
	eq(t, "third wait on a key", newLock(c, k1, 5, 60).Lock().within(time.Second).Result, slock.ResultTimeout)
	// Per connection: b's fourth queued request times out at once.
	w3, w4 := newLock(b, k2, 5, 60).Lock(), newLock(b, k2, 5, 60).Lock()
	w4.none(20 * time.Millisecond)
	r := newLock(b, key16("limit-3"), 5, 60)
	newLock(a, r.key, 5, 60).Lock().want(slock.ResultOK)
	eq(t, "fourth wait of a connection", r.Lock().within(time.Second).Result, slock.ResultTimeout)
	eq(t, "waiting", a.state(0).WaitCount, 4)
	for _, w := range []op{w1, w2, w3, w4} {
		w.none(10 * time.Millisecond)
	}
	ts.healthy(t)
}
