package load

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
)

func init() {
	kinds := []Kind{Acquire, Release, Noop}
	Register(&Dialect{Name: "redis-lock", Port: 6379, Kinds: kinds, Durable: true, CountLocks: true,
		New: func() Proto { return newRedisLock(false) },
		Doc: "Redis lock-library traffic: SET key token NX PX --expiry, released by DELEX key IFEQ token (Redis 8.4, tallyd)"})
	Register(&Dialect{Name: "redis-lock-lua", Port: 6379, Kinds: kinds, Durable: true, CountLocks: true,
		New: func() Proto { return newRedisLock(true) },
		Doc: "Redis lock-library traffic: SET key token NX PX --expiry, released by EVALSHA of redis-py's compare-and-delete script (loaded with SCRIPT LOAD on each connection)"})
}

// releaseScript is the compare-and-delete that lock libraries run to release a lock (the key
// is deleted only while it still holds the caller's token): redis-py's Lock's, byte for byte
// (LUA_RELEASE_SCRIPT of redis/lock.py, 4.x and 5.x), which tallyd recognises and runs as a
// native operation (docs/redis.md "Scripting").
const releaseScript = "\n        local token = redis.call('get', KEYS[1])\n        if not token or token ~= ARGV[1] then\n" +
	"            return 0\n        end\n        redis.call('del', KEYS[1])\n        return 1\n    "

// releaseSHA is releaseScript's SHA1 in hex, the name EVALSHA calls it by.
var releaseSHA = func() []byte {
	sum := sha1.Sum([]byte(releaseScript))
	return []byte(hex.EncodeToString(sum[:]))
}()

// The words of the Redis lock commands.
var (
	wordSet        = []byte("SET")
	wordNX         = []byte("NX")
	wordPX         = []byte("PX")
	wordDelex      = []byte("DELEX")
	wordIfeq       = []byte("IFEQ")
	wordEvalsha    = []byte("EVALSHA")
	wordOne        = []byte("1")
	wordScript     = []byte("SCRIPT")
	wordLoad       = []byte("LOAD")
	wordScriptBody = []byte(releaseScript)
)

// redisLock speaks what Redis lock libraries send: an acquire is
// "SET key token NX PX expiry" (+OK: acquired; a null: another client holds the key), a
// release is the compare-and-delete of the same token, "DELEX key IFEQ token" or, with lua,
// "EVALSHA sha 1 key token" (:1 released; :0 the lock was gone, which the workload never
// allows, so an error). A token is the connection's 16 random hex digits and the op's
// serial number, so no two ops anywhere share one. With lua the script is loaded by a
// SCRIPT LOAD sent in front of the connection's first EVALSHA, and again after a NOSCRIPT
// answer, which asks the runner to send that EVALSHA again (Resent). A no-op is PING.
// Replies come in request order.
type redisLock struct {
	lua     bool
	conn    [16]byte // the connection's part of each token, hex
	tok     [40]byte
	px      [20]byte
	loaded  bool     // a SCRIPT LOAD went out on this connection (its reply may be in flight)
	loadFor []uint32 // Opaques of the EVALSHAs with a SCRIPT LOAD in front, oldest first
}

func newRedisLock(lua bool) *redisLock {
	p := &redisLock{lua: lua, loadFor: make([]uint32, 0, 4)}
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	hex.Encode(p.conn[:], b[:])
	return p
}

// token is the token of op: the connection's part, ':', the op's serial number.
func (p *redisLock) token(op uint32) []byte {
	t := append(p.tok[:0], p.conn[:]...)
	t = append(t, ':')
	return strconv.AppendUint(t, uint64(op), 10)
}

func (p *redisLock) Append(dst []byte, r *Req) []byte {
	switch r.Kind {
	case Noop:
		return resp.AppendCommand(dst, "PING")
	case Release:
		if !p.lua {
			return resp.AppendCommandBytes(dst, wordDelex, r.Key, wordIfeq, p.token(r.Op))
		}
		if !p.loaded {
			dst = resp.AppendCommandBytes(dst, wordScript, wordLoad, wordScriptBody)
			p.loaded = true
			p.loadFor = append(p.loadFor, r.Opaque)
		}
		return resp.AppendCommandBytes(dst, wordEvalsha, releaseSHA, wordOne, r.Key, p.token(r.Op))
	}
	ms := r.Expiry
	if ms == 0 || ms == HoldWhileConnected {
		ms = 30_000
	}
	return resp.AppendCommandBytes(dst, wordSet, r.Key, p.token(r.Op), wordNX, wordPX, strconv.AppendUint(p.px[:0], uint64(ms), 10))
}

// Replies the lock commands expect.
var (
	replyOK      = []byte("+OK\r\n")
	replyPong    = []byte("+PONG\r\n")
	replyNull    = []byte("$-1\r\n")
	replyOne     = []byte(":1\r\n")
	replyZero    = []byte(":0\r\n")
	errNoScript  = []byte("-NOSCRIPT ")
	errUnknownCm = []byte("-ERR unknown command")
)

func (p *redisLock) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	at := 0
	if len(p.loadFor) > 0 && p.loadFor[0] == sent.Opaque {
		// The reply to the SCRIPT LOAD in front of this EVALSHA: the script's SHA1.
		n, _, _, err := parseRESP(buf, 0)
		if err != nil || n == 0 {
			return 0, 0, err
		}
		if want := len(releaseSHA); n != 5+want+2 || string(buf[:5]) != "$40\r\n" || !bytes.Equal(buf[5:5+want], releaseSHA) {
			return 0, 0, fmt.Errorf("SCRIPT LOAD answered %q, want the script's SHA1 %s", trim(buf[:n]), releaseSHA)
		}
		at = n
	}
	n, typ, _, err := parseRESP(buf[at:], 0)
	if err != nil || n == 0 {
		return 0, 0, err
	}
	if at > 0 {
		copy(p.loadFor, p.loadFor[1:])
		p.loadFor = p.loadFor[:len(p.loadFor)-1]
	}
	rep := buf[at : at+n]
	n += at
	if typ == '-' {
		switch {
		case sent.Kind == Release && p.lua && bytes.HasPrefix(rep, errNoScript):
			// The server's script cache lost the script (SCRIPT FLUSH, a restart): load it
			// in front of the next EVALSHA, unless a load is already on its way.
			if len(p.loadFor) == 0 {
				p.loaded = false
			}
			return n, Resent, nil
		case bytes.HasPrefix(rep, errUnknownCm):
			return n, Unknown, nil
		}
		return n, Failed, nil
	}
	switch sent.Kind {
	case Acquire:
		switch {
		case bytes.Equal(rep, replyOK):
			return n, OK, nil
		case bytes.Equal(rep, replyNull):
			return n, Busy, nil
		}
		return 0, 0, fmt.Errorf("SET NX PX answered %q, want +OK or a null", trim(rep))
	case Release:
		switch {
		case bytes.Equal(rep, replyOne):
			return n, OK, nil
		case bytes.Equal(rep, replyZero):
			return n, Lost, nil
		}
		return 0, 0, fmt.Errorf("%s answered %q, want :1 or :0", p.releaseName(), trim(rep))
	case Noop:
		if bytes.Equal(rep, replyPong) {
			return n, OK, nil
		}
		return 0, 0, fmt.Errorf("PING answered %q, want +PONG", trim(rep))
	}
	return 0, 0, fmt.Errorf("redis-lock: no request of kind %v", sent.Kind)
}

// releaseName names the release command in messages.
func (p *redisLock) releaseName() string {
	if p.lua {
		return "EVALSHA of the release script"
	}
	return "DELEX IFEQ"
}

// Answer is the sink's side: SET is granted, the releases release, SCRIPT LOAD answers
// the SHA1, PING PONG; anything else is an unknown command.
func (p *redisLock) Answer(dst, buf []byte) ([]byte, int, error) {
	var at [2]int
	n, count, err := respArray(buf, at[:])
	if err != nil || n == 0 {
		return dst, 0, err
	}
	if count == 0 {
		return dst, 0, fmt.Errorf("RESP request is an empty array")
	}
	name := respBulkAt(buf, at[0])
	switch {
	case resp.Is(name, "SET"):
		dst = append(dst, replyOK...)
	case resp.Is(name, "DELEX"), resp.Is(name, "EVALSHA"):
		dst = append(dst, replyOne...)
	case resp.Is(name, "SCRIPT"):
		dst = resp.AppendBulk(dst, releaseSHA)
	case resp.Is(name, "PING"):
		dst = append(dst, replyPong...)
	default:
		dst = resp.AppendError(dst, "ERR unknown command")
	}
	return dst, n, nil
}

// respBulkAt returns the bulk string that starts at buf[i:] (a complete one: respArray
// framed it), or nil if it is not a bulk string.
func respBulkAt(buf []byte, i int) []byte {
	if i >= len(buf) || buf[i] != '$' {
		return nil
	}
	j := bytes.IndexByte(buf[i:], '\n')
	size, ok := atoi(buf[i+1 : i+j-1])
	if !ok || size < 0 {
		return nil
	}
	start := i + j + 1
	return buf[start : start+int(size)]
}
