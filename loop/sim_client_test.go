package loop

import (
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// Clients of the simulated cluster: a connection to one member's slock port, speaking
// Redis text (simClient.do) or binary slock (simClient.lock). Bytes reach the member at
// once (a client on the same host); replies are read from what the member wrote.

// simReplyWait is how long (fake time) a client waits for a reply by default.
const simReplyWait = 5 * time.Second

type simClient struct {
	c      *sim
	m      *simMember
	name   string
	conn   *simConn
	rx     []byte // written by the server, not yet read
	closed bool   // the server closed the connection (or its member died)
	eofSaw bool   // the close was traced
	nreq   uint64
}

// client connects a text client to member id's slock port.
func (c *sim) client(id uint64) *simClient {
	c.t.Helper()
	m := c.ms[id]
	c.nconn++
	cl := &simClient{c: c, m: m, name: fmt.Sprintf("c%d@m%d", c.nconn, id)}
	if !m.up {
		cl.closed = true
		c.tracef(false, "%s cannot connect: m%d is down", cl.name, id)
		return cl
	}
	c.ports++
	cl.conn = c.newConn(m, cl.name, simAddr(m.slockAddr), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: c.ports})
	cl.conn.client = cl
	c.tracef(false, "%s connects", cl.name)
	c.onMember(m, c.now, func() { c.open(cl.conn) })
	c.runUntil(func() bool { return cl.conn.opened || cl.conn.closed }, time.Second)
	return cl
}

// write hands the member raw bytes from the client (served at once, after what is due now).
func (cl *simClient) write(b []byte) {
	if cl.closed {
		return
	}
	sc := cl.conn
	b = append([]byte(nil), b...)
	cl.c.onMember(cl.m, cl.c.now, func() {
		if sc.closed {
			return
		}
		sc.in = append(sc.in, b...)
		cl.c.traffic(sc)
	})
}

// send sends a text command without waiting for its reply.
func (cl *simClient) send(args ...string) {
	cl.c.tracef(false, "%s > %s", cl.name, strings.Join(args, " "))
	cl.write(resp.AppendCommand(nil, args...))
}

// do sends a text command and waits (simReplyWait at most) for the next reply.
func (cl *simClient) do(args ...string) simReply {
	cl.send(args...)
	return cl.reply(simReplyWait)
}

// incrs sends n pipelined INCRs of key and checks that they are answered 1, 2, ... n (the
// key must not exist before).
func (cl *simClient) incrs(t testing.TB, key string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		cl.send("INCR", key)
	}
	for i := 1; i <= n; i++ {
		if r := cl.reply(simReplyWait); !r.isInt(int64(i)) {
			t.Fatalf("%s: INCR %s #%d: %s", cl.name, key, i, r)
		}
	}
}

// reply waits up to d for the next text reply: a reply, or closed, or none.
func (cl *simClient) reply(d time.Duration) simReply {
	var r simReply
	cl.c.runUntil(func() bool {
		var ok bool
		r, ok = cl.take()
		return ok || cl.closed
	}, d)
	switch {
	case r.raw != nil:
	case cl.closed:
		r.closed = true
	default:
		r.none = true
	}
	if !r.closed || !cl.eofSaw {
		cl.c.tracef(false, "%s < %s", cl.name, r)
	}
	if r.closed {
		cl.eofSaw = true
	}
	return r
}

// take parses the next whole reply the client has received.
func (cl *simClient) take() (simReply, bool) {
	r, n, err := resp.ParseReply(cl.rx)
	if err != nil {
		cl.c.t.Fatalf("%s: bad reply bytes %q: %v", cl.name, cl.rx, err)
	}
	if n == 0 {
		return simReply{}, false
	}
	raw := append([]byte(nil), cl.rx[:n]...)
	cl.rx = cl.rx[n:]
	r, _, _ = resp.ParseReply(raw) // views into its own copy
	return simReply{r: r, raw: raw}, true
}

// simReply is a text reply, or the connection closed, or no reply in time.
type simReply struct {
	r      resp.Reply
	raw    []byte
	closed bool // the connection closed before a reply
	none   bool // no reply within the wait
}

func (r simReply) String() string {
	switch {
	case r.closed:
		return "<connection closed>"
	case r.none:
		return "<no reply>"
	}
	return showReply(r.r)
}

// isErr says whether it is an error reply starting with prefix ("" for any).
func (r simReply) isErr(prefix string) bool {
	return r.raw != nil && r.r.Kind == '-' && strings.HasPrefix(string(r.r.Str), prefix)
}

// isInt says whether it is the integer n.
func (r simReply) isInt(n int64) bool { return r.raw != nil && r.r.Kind == ':' && r.r.Int == n }

// isBulk says whether it is the bulk string s.
func (r simReply) isBulk(s string) bool {
	return r.raw != nil && r.r.Kind == '$' && !r.r.Null && string(r.r.Str) == s
}

// isOK says whether it is +OK.
func (r simReply) isOK() bool { return r.raw != nil && r.r.Kind == '+' && string(r.r.Str) == "OK" }

// lockResult is a text LOCK/UNLOCK reply's result (0: granted / done, 8: TIMEOUT, ...);
// false when the reply is not a lock reply (an error, closed, none).
func (r simReply) lockResult() (int64, bool) {
	if r.raw == nil || r.r.Kind != '*' || len(r.r.Elems) == 0 {
		return 0, false
	}
	switch e := r.r.Elems[0]; e.Kind {
	case ':':
		return e.Int, true
	case '$':
		n, err := strconv.ParseInt(string(e.Str), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// granted says whether it is a text LOCK's grant.
func (r simReply) granted() bool {
	res, ok := r.lockResult()
	return ok && res == 0
}

// ---------------------------------------------------------------------------------------
// Binary slock.

// simBinReply is a binary reply, or closed, or none.
type simBinReply struct {
	r      slock.Reply
	ok     bool
	closed bool
}

func (r simBinReply) String() string {
	switch {
	case r.closed:
		return "<connection closed>"
	case !r.ok:
		return "<no reply>"
	}
	return fmt.Sprintf("%s %s", r.r.Type, r.r.Result)
}

// granted says whether it is a Lock's grant.
func (r simBinReply) granted() bool {
	return r.ok && r.r.Type == slock.TypeLock && r.r.Result == slock.ResultOK
}

// lock sends a binary slock Lock of key (its text name) with a fresh LockId, timeout and
// expried in seconds, and waits (simReplyWait) for its reply.
func (cl *simClient) lock(key string, timeout, expried uint16) simBinReply {
	cl.nreq++
	var rid, lid [16]byte
	binary.BigEndian.PutUint64(rid[8:], cl.nreq)
	copy(rid[:8], cl.name)
	binary.BigEndian.PutUint64(lid[8:], cl.nreq)
	copy(lid[:8], "lk"+cl.name)
	f := &slock.Frame{Type: slock.TypeLock, RequestID: rid, LockID: lid, Key: slock.TextID([]byte(key)),
		Timeout: timeout, Expried: expried}
	cl.c.tracef(false, "%s > binary Lock %s timeout=%d expried=%d", cl.name, key, timeout, expried)
	cl.write(slock.AppendLockRequest(nil, f))
	var r simBinReply
	cl.c.runUntil(func() bool {
		var n int
		n, _ = slock.ParseReply(cl.rx, slock.DefaultMaxData, &r.r)
		if n > 0 {
			cl.rx = cl.rx[n:]
			r.ok = true
		}
		return r.ok || cl.closed
	}, simReplyWait)
	r.closed = !r.ok && cl.closed
	cl.c.tracef(false, "%s < binary %s", cl.name, r)
	return r
}
