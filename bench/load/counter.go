package load

import (
	"encoding/binary"
	"fmt"

	"github.com/tallyd/tallyd/proto/counter"
)

// maxReplyBody bounds the replies the counter protocols accept: the workload's replies
// are at most 4 bytes of body, Stats a few hundred.
const maxReplyBody = 1 << 20

func init() {
	kinds := []Kind{Acquire, Release, Get, Noop}
	Register(&Dialect{Name: "counter", Port: 11215, Kinds: kinds,
		New: func() Proto { return yrmcds{} },
		Doc: "yrmcds counter (binary, port 11215): Acquire/Release/Get; Max is the maximum"})
	Register(&Dialect{Name: "semaphore", Port: 0, Kinds: kinds,
		New: func() Proto { return yrmcds{} },
		Doc: "yrmcds semaphore (counter framing, its own port): Max is the initial value"})
}

// yrmcds speaks the yrmcds counter protocol and its semaphore dialect, which share
// framing and commands; Req.Max is the counter's maximum or the semaphore's initial.
type yrmcds struct{}

var opcodes = [...]counter.Opcode{Acquire: counter.OpAcquire, Release: counter.OpRelease,
	Get: counter.OpGet, Wait: counter.OpAcquire, Noop: counter.OpNoop}

func (yrmcds) Append(dst []byte, r *Req) []byte {
	switch r.Kind {
	case Acquire, Wait:
		return counter.AppendAcquire(dst, r.Opaque, r.N, r.Max, r.Key)
	case Release:
		return counter.AppendRelease(dst, r.Opaque, r.N, r.Key)
	case Get:
		return counter.AppendGet(dst, r.Opaque, r.Key)
	}
	return counter.AppendRequest(dst, counter.OpNoop, r.Opaque, nil)
}

func (yrmcds) Parse(buf []byte, sent *Req) (int, Outcome, error) {
	var resp counter.Response
	n, err := counter.ParseResponse(buf, maxReplyBody, &resp)
	if err != nil || n == 0 {
		return 0, 0, err
	}
	if resp.Opaque != sent.Opaque {
		return n, Failed, fmt.Errorf("counter reply has opaque %d, want %d (replies out of order)", resp.Opaque, sent.Opaque)
	}
	if int(sent.Kind) < len(opcodes) && resp.Opcode != opcodes[sent.Kind] {
		return n, Failed, fmt.Errorf("counter reply to %v (opaque %d) has opcode %#x", sent.Kind, sent.Opaque, uint8(resp.Opcode))
	}
	return n, counterOutcome(resp.Status), nil
}

// counterOutcome maps a yrmcds counter status to an Outcome.
func counterOutcome(s counter.Status) Outcome {
	switch s {
	case counter.StatusOK:
		return OK
	case counter.StatusNotFound:
		return NotFound
	case counter.StatusInvalid:
		return Invalid
	case counter.StatusNotAvailable:
		return Busy
	case counter.StatusNotAcquired:
		return NotHeld
	case counter.StatusUnknownCommand:
		return Unknown
	case counter.StatusOutOfMemory:
		return NoMemory
	}
	return Failed
}

// Answer is the sink's side: every complete request gets a status-OK reply with its
// opcode and opaque, and the body a success would carry (Acquire echoes Resources,
// Get reports 0).
func (yrmcds) Answer(dst, buf []byte) ([]byte, int, error) {
	if len(buf) < 12 {
		return dst, 0, nil
	}
	if buf[0] != 0x90 {
		return dst, 0, fmt.Errorf("counter request has magic %#x, want 0x90", buf[0])
	}
	body := binary.BigEndian.Uint32(buf[4:8])
	if body > maxReplyBody {
		return dst, 0, fmt.Errorf("counter request body length %d is over the sink's limit %d", body, maxReplyBody)
	}
	n := 12 + int(body)
	if len(buf) < n {
		return dst, 0, nil
	}
	op := buf[1]
	var out uint32
	var val [4]byte
	switch counter.Opcode(op) {
	case counter.OpAcquire:
		out = 4
		if body >= 4 {
			copy(val[:], buf[12:16])
		}
	case counter.OpGet:
		out = 4
	}
	dst = append(dst, 0x91, op, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, out)
	dst = append(dst, buf[8:12]...)
	return append(dst, val[:out]...), n, nil
}
