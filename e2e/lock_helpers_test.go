package e2e

// What the lock tests of issue 19 share: whole Redis-text replies (a text LOCK answers an
// array), the text LOCK reply's fields (its fencing TOKEN), and a binary slock client.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// skipFake skips a test of what testdata/fakecluster does not stand in for (locks,
// fencing, the data dir): it runs INCR and GET only.
func skipFake(t *testing.T) {
	t.Helper()
	if clusterFake {
		t.Skip("TALLYD_CLUSTER_FAKE=1: the fake cluster has no locks, tokens or data dir")
	}
}

// readReply reads one whole RESP reply.
func readReply(br *bufio.Reader) (resp.Reply, error) {
	var buf []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return resp.Reply{}, err
		}
		buf = append(buf, line...)
		rep, n, err := resp.ParseReply(buf)
		if err != nil {
			return resp.Reply{}, err
		}
		if n > 0 {
			return rep, nil // its views into buf stay valid: buf is not reused
		}
	}
}

// replyString renders a whole reply for messages: +OK, -ERR x, :5, $v, $-1, [a b ...].
func replyString(r resp.Reply) string {
	switch r.Kind {
	case ':':
		return ":" + strconv.FormatInt(r.Int, 10)
	case '$':
		if r.Null {
			return "$-1"
		}
		return "$" + string(r.Str)
	case '*':
		if r.Null {
			return "*-1"
		}
		parts := make([]string, len(r.Elems))
		for i, e := range r.Elems {
			parts[i] = replyString(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return string(r.Kind) + string(r.Str)
}

// doReply is do with the whole reply.
func (k *cclient) doReply(timeout time.Duration, args ...string) (resp.Reply, error) {
	if k.c == nil {
		if err := k.dial(timeout); err != nil {
			return resp.Reply{}, err
		}
	}
	_ = k.c.SetDeadline(time.Now().Add(timeout))
	if _, err := k.c.Write(resp.AppendCommand(nil, args...)); err != nil {
		k.close()
		return resp.Reply{}, err
	}
	r, err := readReply(k.br)
	if err != nil {
		k.close()
	}
	return r, err
}

// lockReply is a text LOCK or UNLOCK reply: [result, name, "LOCK_ID", id, "LCOUNT", n,
// "COUNT", n, "LRCOUNT", n, "RCOUNT", n] and, on a grant since issue 19, "TOKEN", n.
type lockReply struct {
	result   int
	lockID   string
	token    uint64
	hasToken bool
	text     string // the reply as replyString renders it
}

// granted: result 0 (SUCCED).
func (l lockReply) granted() bool { return l.result == 0 }

// parseLockReply reads a LOCK/UNLOCK reply; an error for anything else (-CLUSTERDOWN...).
func parseLockReply(r resp.Reply) (lockReply, error) {
	out := lockReply{text: replyString(r)}
	if r.Kind != '*' || len(r.Elems) < 2 || len(r.Elems)%2 != 0 {
		return out, fmt.Errorf("not a lock reply: %s", out.text)
	}
	res, err := strconv.Atoi(string(r.Elems[0].Str))
	if err != nil {
		return out, fmt.Errorf("lock reply with result %q: %s", r.Elems[0].Str, out.text)
	}
	out.result = res
	for i := 2; i+1 < len(r.Elems); i += 2 {
		v := r.Elems[i+1]
		switch string(r.Elems[i].Str) {
		case "LOCK_ID":
			out.lockID = string(v.Str)
		case "TOKEN":
			n := uint64(v.Int)
			if v.Kind == '$' {
				if n, err = strconv.ParseUint(string(v.Str), 10, 64); err != nil {
					return out, fmt.Errorf("TOKEN %q: %s", v.Str, out.text)
				}
			}
			out.token, out.hasToken = n, true
		}
	}
	return out, nil
}

// lock runs a text LOCK (or UNLOCK) command and returns its reply as a lockReply; err is
// a transport error or the text of a reply that is no lock reply (-CLUSTERDOWN ...).
func (k *cclient) lock(timeout time.Duration, args ...string) (lockReply, error) {
	r, err := k.doReply(timeout, args...)
	if err != nil {
		return lockReply{}, err
	}
	return parseLockReply(r)
}

// isClusterDown tells whether err is a -CLUSTERDOWN reply turned into an error.
func isClusterDown(err error) bool {
	return err != nil && strings.Contains(err.Error(), "-CLUSTERDOWN")
}

// ---------------------------------------------------------------------------------------
// A binary slock client (the frames of proto/slock), on the same port as the text one.

type bclient struct {
	addr string
	c    net.Conn
	buf  []byte
	reqs uint64
}

func (b *bclient) close() {
	if b.c != nil {
		b.c.Close()
		b.c = nil
	}
}

// binKey is the LockKey a text key name of 1 to 15 bytes has (docs/redis.md "Key names": right-aligned).
func binKey(name string) (k [16]byte) {
	copy(k[16-len(name):], name)
	return k
}

// binLockID is a 16-byte LockId from a name (left-aligned), and hexID its text form, as
// a text LOCK_ID option takes it (32 hex digits).
func binLockID(name string) (id [16]byte) {
	copy(id[:], name)
	return id
}

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

// errBinClosed: the server closed the connection instead of answering.
var errBinClosed = errors.New("connection closed by the server")

// round sends a Lock or Unlock frame and waits up to timeout for its reply.
func (b *bclient) round(f *slock.Frame, timeout time.Duration) (slock.Reply, error) {
	if b.c == nil {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err != nil {
			return slock.Reply{}, fmt.Errorf("%w: %v", errNotSent, err)
		}
		b.c, b.buf = c, nil
	}
	b.reqs++
	binaryPutReqID(&f.RequestID, b.reqs)
	_ = b.c.SetDeadline(time.Now().Add(timeout))
	if _, err := b.c.Write(slock.AppendLockRequest(nil, f)); err != nil {
		b.close()
		return slock.Reply{}, err
	}
	tmp := make([]byte, 4096)
	for {
		var r slock.Reply
		n, err := slock.ParseReply(b.buf, 1<<20, &r)
		if err != nil {
			b.close()
			return slock.Reply{}, err
		}
		if n > 0 {
			b.buf = b.buf[n:]
			if r.RequestID != f.RequestID {
				continue // a push (an expiry) or the answer to an earlier frame
			}
			return r, nil
		}
		m, err := b.c.Read(tmp)
		if err != nil {
			b.close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return slock.Reply{}, err
			}
			return slock.Reply{}, fmt.Errorf("%w: %v", errBinClosed, err)
		}
		b.buf = append(b.buf, tmp[:m]...)
	}
}

func binaryPutReqID(id *[16]byte, n uint64) {
	*id = [16]byte{}
	copy(id[:], "e2e")
	for i := range 8 {
		id[8+i] = byte(n >> (8 * i))
	}
}

// lock asks for key under lockID without waiting (Timeout 0), held for expried seconds.
func (b *bclient) lock(key string, lockID [16]byte, expried uint16, timeout time.Duration) (slock.Reply, error) {
	f := slock.Frame{Type: slock.TypeLock, Key: binKey(key), LockID: lockID, Expried: expried}
	return b.round(&f, timeout)
}

// unlock releases key held under lockID.
func (b *bclient) unlock(key string, lockID [16]byte, timeout time.Duration) (slock.Reply, error) {
	f := slock.Frame{Type: slock.TypeUnlock, Key: binKey(key), LockID: lockID}
	return b.round(&f, timeout)
}
