package load

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

func init() {
	kinds := []Kind{Acquire, Release, Wait, Noop}
	Register(&Dialect{Name: "slock", Port: 5658, Kinds: kinds,
		New:   func() Proto { return newSlockBinary() },
		Waits: true, TimeoutUnit: time.Millisecond, Durable: true,
		Doc: "slock binary frames (port 5658): Lock/Unlock of one LockId an op, COUNT --max, replies matched by RequestId"})
	Register(&Dialect{Name: "slock-text", Port: 5658, Kinds: kinds,
		New:   func() Proto { return newSlockText() },
		Waits: true, WaitDepth: 1, TimeoutUnit: time.Millisecond, Durable: true,
		Doc: "slock Redis text (port 5658): LOCK key LOCK_ID id TIMEOUT t EXPRIED e, UNLOCK key LOCK_ID id"})
}

// Time flags of slock's Timeout and Expried fields (NOTES.md §4).
const (
	slockMillis   = 0x0400 // the time is in milliseconds, not seconds
	slockKeepLive = 0x8000 // renewed while the connection lives (KEEPLIVED)
	keepLiveSecs  = 5      // how long a KEEPLIVED lock outlives its connection
	defaultExpiry = 10_000 // ms a lock is held at most when Req.Expiry is 0
)

// slockTime encodes ms as a slock time field and its unit flag: whole seconds when it
// is, else milliseconds while they fit 16 bits, else seconds rounded up (at most 65535).
func slockTime(ms uint32) (v, flag uint16) {
	switch {
	case ms%1000 == 0 && ms/1000 <= 0xffff:
		return uint16(ms / 1000), 0
	case ms <= 0xffff:
		return uint16(ms), slockMillis
	}
	return uint16(min((uint64(ms)+999)/1000, 0xffff)), 0
}

// slockExpiry encodes Req.Expiry as Expried and ExpriedFlag.
func slockExpiry(ms uint32) (v, flag uint16) {
	switch ms {
	case 0:
		return slockTime(defaultExpiry)
	case HoldWhileConnected:
		return keepLiveSecs, slockKeepLive
	}
	return slockTime(ms)
}

// slockCount is slock's COUNT field for n holders at once: n - 1, at most 0xffff.
func slockCount(n uint32) uint16 {
	return uint16(min(max(n, 1)-1, 0xffff))
}

// slockOutcome maps a slock result code to an Outcome.
func slockOutcome(r slock.Result) Outcome {
	switch r {
	case slock.ResultOK:
		return OK
	case slock.ResultTimeout:
		return TimedOut
	case slock.ResultLockedError:
		return Busy
	case slock.ResultUnlockError, slock.ResultUnownError:
		return NotHeld
	case slock.ResultExpried:
		return Expired
	case slock.ResultUnknownDB:
		return Invalid
	case slock.ResultUnknownCommand:
		return Unknown
	}
	return Failed
}

// slockIDs makes a connection's 16-byte ids: a serial number (little endian), a tag
// byte ('R' RequestId, 'L' LockId) and 8 random bytes of the connection, so that LockIds
// of different connections never meet on a shared key.
type slockIDs [8]byte

func newSlockIDs() (s slockIDs) {
	binary.LittleEndian.PutUint64(s[:], rand.Uint64())
	return s
}

func (s *slockIDs) id(n uint32, tag byte) (id [16]byte) {
	binary.LittleEndian.PutUint32(id[:4], n)
	id[4] = tag
	copy(id[8:], s[:])
	return id
}

// slockBinary speaks slock's binary protocol: an acquire is a Lock frame whose LockId is
// the op's (so its Unlock names the same), COUNT Req.Max-1, Timeout Req.Timeout and
// Expried Req.Expiry (10 s by default); a release is the Unlock; a no-op is a Ping, the
// probe behind an acquire on shared keys. Replies are matched to requests by RequestId:
// slock answers a Lock that waits when it is granted or times out, after whatever
// the connection sent behind it.
type slockBinary struct {
	ids   slockIDs
	frame slock.Frame
	reply slock.Reply
}

func newSlockBinary() *slockBinary { return &slockBinary{ids: newSlockIDs()} }

func (p *slockBinary) Append(dst []byte, r *Req) []byte {
	rid := p.ids.id(r.Opaque, 'R')
	if r.Kind == Noop {
		return slock.AppendPing(dst, rid)
	}
	f := &p.frame
	*f = slock.Frame{Type: slock.TypeLock, RequestID: rid, LockID: p.ids.id(r.Op, 'L'), Key: slock.TextID(r.Key)}
	if r.Kind == Release {
		f.Type = slock.TypeUnlock
	} else {
		f.Timeout, f.TimeoutFlag = slockTime(r.Timeout)
		f.Expried, f.ExpriedFlag = slockExpiry(r.Expiry)
		f.Count = slockCount(r.Max)
	}
	return slock.AppendLockRequest(dst, f)
}

func (p *slockBinary) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	n, err := slock.ParseReply(buf, maxReplyBody, &p.reply)
	if err != nil || n == 0 {
		return 0, 0, err
	}
	if p.reply.RequestID != p.ids.id(sent.Opaque, 'R') {
		return n, Failed, fmt.Errorf("slock reply has RequestId %x, want %x (replies out of order)", p.reply.RequestID, p.ids.id(sent.Opaque, 'R'))
	}
	o, err := p.outcome(sent)
	return n, o, err
}

// Match finds the request in flight whose RequestId the reply carries. An EXPRIED pushed
// for a lock no longer in flight is index -1.
func (p *slockBinary) Match(buf []byte, in InFlight) (int, int, Outcome, error) {
	n, err := slock.ParseReply(buf, maxReplyBody, &p.reply)
	if err != nil || n == 0 {
		return 0, 0, 0, err
	}
	rid := p.reply.RequestID
	serial := binary.LittleEndian.Uint32(rid[:4])
	if rid != p.ids.id(serial, 'R') {
		return 0, 0, 0, fmt.Errorf("slock reply has RequestId %x, which this connection never sent", rid)
	}
	if in.Len() > 0 {
		first, _ := in.At(0)
		if i := uint64(serial - first.Opaque); i < uint64(in.Len()) {
			if r, answered := in.At(int(i)); !answered && r.Opaque == serial {
				o, err := p.outcome(r)
				return int(i), n, o, err
			}
		}
	}
	if p.reply.Result == slock.ResultExpried {
		return -1, n, Expired, nil
	}
	return 0, 0, 0, fmt.Errorf("slock %v reply (result %v) to request %d, which is not waiting for one", p.reply.Type, p.reply.Result, serial)
}

// outcome checks that p.reply answers sent and maps its result.
func (p *slockBinary) outcome(sent *Req) (Outcome, error) {
	r := &p.reply
	want := slock.TypeLock
	switch sent.Kind {
	case Release:
		want = slock.TypeUnlock
	case Noop:
		want = slock.TypePing
	}
	if r.Type != want {
		return Failed, fmt.Errorf("slock reply of type %v to a %v (request %d)", r.Type, want, sent.Opaque)
	}
	if want != slock.TypePing && r.LockID != p.ids.id(sent.Op, 'L') {
		return Failed, fmt.Errorf("slock %v reply (request %d) has LockId %x, want %x", r.Type, sent.Opaque, r.LockID, p.ids.id(sent.Op, 'L'))
	}
	return slockOutcome(r.Result), nil
}

// Answer is the sink's side: every Lock and Unlock succeeds, a Ping is answered OK and
// any other frame gets UNKNOWN_COMMAND.
func (p *slockBinary) Answer(dst, buf []byte) ([]byte, int, error) {
	var dec slock.Decoder
	f := &p.frame
	n, err := dec.Parse(buf, f)
	if err != nil || n == 0 {
		return dst, 0, err
	}
	switch f.Type {
	case slock.TypeLock, slock.TypeUnlock:
		rep := slock.LockReply{Type: f.Type, RequestID: f.RequestID, DB: f.DB, LockID: f.LockID, Key: f.Key,
			Count: f.Count, Rcount: f.Rcount}
		if f.Type == slock.TypeLock {
			rep.Lcount, rep.Lrcount = 1, 1
		}
		dst = slock.AppendLockReply(dst, &rep)
	case slock.TypePing:
		dst = slock.AppendSimple(dst, f.Type, f.RequestID, slock.ResultOK)
	default:
		dst = slock.AppendSimple(dst, f.Type, f.RequestID, slock.ResultUnknownCommand)
	}
	return dst, n, nil
}

// The words of slock's text commands.
var (
	wordLock    = []byte("LOCK")
	wordUnlock  = []byte("UNLOCK")
	wordLockID  = []byte("LOCK_ID")
	wordTimeout = []byte("TIMEOUT")
	wordExpried = []byte("EXPRIED")
	wordCount   = []byte("COUNT")
)

// slockText speaks slock's Redis text protocol: an acquire is
// "LOCK key LOCK_ID id TIMEOUT t EXPRIED e [COUNT n]" with the op's LockId in hex (so
// the binary and text dialects take the same locks), t and e 32-bit (unit flags in the
// high half), COUNT only when Req.Max is not 1; a release is "UNLOCK key LOCK_ID id"; a
// no-op is PING. The reply to LOCK and UNLOCK is an array of 12 elements (2 more with
// DATA, 2 more with a grant's TOKEN): result code, its name, "LOCK_ID", the id, then
// LCOUNT, COUNT, LRCOUNT, RCOUNT.
// A LOCK that waits blocks its connection, so replies come in request order.
type slockText struct {
	ids        slockIDs
	hex        [32]byte
	tn, en, cn [20]byte
	dec        resp.Decoder // the sink's
	args       [][]byte
}

func newSlockText() *slockText { return &slockText{ids: newSlockIDs()} }

func (p *slockText) Append(dst []byte, r *Req) []byte {
	if r.Kind == Noop {
		return resp.AppendCommand(dst, "PING")
	}
	id := slock.AppendHexID(p.hex[:0], p.ids.id(r.Op, 'L'))
	if r.Kind == Release {
		return resp.AppendCommandBytes(dst, wordUnlock, r.Key, wordLockID, id)
	}
	tv, tf := slockTime(r.Timeout)
	ev, ef := slockExpiry(r.Expiry)
	t := strconv.AppendUint(p.tn[:0], uint64(tf)<<16|uint64(tv), 10)
	e := strconv.AppendUint(p.en[:0], uint64(ef)<<16|uint64(ev), 10)
	if r.Max == 1 {
		return resp.AppendCommandBytes(dst, wordLock, r.Key, wordLockID, id, wordTimeout, t, wordExpried, e)
	}
	c := strconv.AppendUint(p.cn[:0], uint64(slockCount(r.Max))+1, 10)
	return resp.AppendCommandBytes(dst, wordLock, r.Key, wordLockID, id, wordTimeout, t, wordExpried, e, wordCount, c)
}

func (p *slockText) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	if len(buf) > 0 && buf[0] != '*' || sent.Kind == Noop {
		n, typ, _, err := parseRESP(buf, 0)
		switch {
		case err != nil || n == 0:
			return 0, 0, err
		case typ == '-':
			return n, Failed, nil
		case sent.Kind == Noop && typ == '+':
			return n, OK, nil
		}
		return n, Failed, fmt.Errorf("slock-text reply %q to %v", trim(buf[:n]), sent.Kind)
	}
	// An array: element 0 is the result code, element 3 the LockId.
	var at [4]int
	n, count, err := respArray(buf, at[:])
	if err != nil || n == 0 {
		return 0, 0, err
	}
	if count != 12 && count != 14 && count != 16 {
		return n, Failed, fmt.Errorf("slock-text reply to %v is an array of %d, want 12, 14 or 16", sent.Kind, count)
	}
	var el [2]resp.Reply
	for i, e := range [2]int{0, 3} {
		r, _, err := resp.ParseReply(buf[at[e]:n])
		if err != nil || r.Kind != '$' {
			return n, Failed, fmt.Errorf("slock-text reply to %v: element %d is not a bulk string (%v)", sent.Kind, e, err)
		}
		el[i] = r
	}
	code, ok := resp.ParseInt(el[0].Str)
	if !ok || code < 0 || code > 255 {
		return n, Failed, fmt.Errorf("slock-text reply to %v has result code %q", sent.Kind, trim(el[0].Str))
	}
	o := slockOutcome(slock.Result(code))
	if o == OK && !bytes.Equal(el[1].Str, slock.AppendHexID(p.hex[:0], p.ids.id(sent.Op, 'L'))) {
		return n, Failed, fmt.Errorf("slock-text reply to %v has LOCK_ID %q, want %x", sent.Kind, trim(el[1].Str), p.ids.id(sent.Op, 'L'))
	}
	return n, o, nil
}

// Answer is the sink's side: LOCK and UNLOCK succeed with the LockId sent, PING gets
// +PONG, anything else -ERR.
func (p *slockText) Answer(dst, buf []byte) ([]byte, int, error) {
	args, n, err := p.dec.Parse(buf, p.args[:0])
	p.args = args[:0]
	if err != nil || n == 0 {
		return dst, 0, err
	}
	switch {
	case len(args) == 0:
		return dst, 0, fmt.Errorf("slock-text request with no arguments")
	case resp.Is(args[0], "LOCK"), resp.Is(args[0], "UNLOCK"):
		if len(args) < 2 {
			return resp.AppendError(dst, "ERR Command Parse Args Count Error"), n, nil
		}
		rep := slock.LockReply{Key: slock.TextID(args[1])}
		for i := 2; i+1 < len(args); i += 2 {
			if resp.Is(args[i], "LOCK_ID") {
				rep.LockID = slock.TextID(args[i+1])
			}
		}
		if resp.Is(args[0], "LOCK") {
			rep.Lcount, rep.Lrcount = 1, 1
		}
		dst = rediscmd.AppendTextLockReply(dst, &rep)
	case resp.Is(args[0], "PING"):
		dst = resp.AppendSimple(dst, "PONG")
	default:
		dst = resp.AppendError(dst, "ERR Unknown Command")
	}
	return dst, n, nil
}
