package counter

import "encoding/binary"

// Request is one decoded request.
//
// Status is StatusOK for a well-formed request of a known opcode. Otherwise
// it is the status the server must answer with: StatusInvalid for a wrong
// magic or a body that fails validation, StatusUnknownCommand for an
// unknown opcode. The connection stays usable in both cases. When Status
// is not StatusOK, only Opcode and Opaque are set.
type Request struct {
	Opcode    Opcode // as sent, even if unknown or the magic was wrong
	Opaque    uint32 // to be echoed verbatim
	Status    Status
	Resources uint32 // Acquire, Release
	Maximum   uint32 // Acquire: Maximum (Counter dialect) or Initial (Semaphore dialect)

	// DumpAcquired is set for a Dump whose body is the one byte DumpAcquired: tallyd's
	// extension, entries that end with the counter's granted Acquires (AppendDumpEntryAcquired).
	DumpAcquired bool

	// Name is set for Get, Acquire and Release. It is a view into the
	// buffer passed to Parse, valid only while that buffer is, and its
	// capacity ends with the name so appending to it never overwrites
	// the buffer.
	Name []byte
}

// Decoder parses requests. The zero value accepts only empty bodies: set
// MaxBody, typically to DefaultMaxBody.
type Decoder struct {
	Dialect Dialect
	MaxBody uint32 // largest BodyLength accepted; larger ones are a *BodyTooLargeError
}

// BodyTooLargeError reports a header whose BodyLength exceeds the limit.
// Framing is lost after it: the connection must be closed.
type BodyTooLargeError struct {
	Length uint32 // BodyLength in the header
	Limit  uint32 // the largest BodyLength accepted
}

func (e *BodyTooLargeError) Error() string {
	return "counter: body length " + itoa(uint64(e.Length)) + " exceeds limit " + itoa(uint64(e.Limit))
}

// FrameLen is the length of the request that starts buf, header and body, once its header
// is in (0 before): what a caller that copies its input to call Parse waits for.
func FrameLen(buf []byte) int {
	if len(buf) < HeaderLen {
		return 0
	}
	return HeaderLen + int(binary.BigEndian.Uint32(buf[4:8]))
}

// Parse decodes the request at the start of buf into *req.
//
// It returns n == 0 and a nil error when buf does not yet hold a whole
// frame: the caller waits for more bytes. Otherwise n == 12 + BodyLength
// and the caller consumes exactly n bytes, whatever the frame held, so the
// stream never desyncs; req.Status says how to answer. Whenever n == 0,
// *req is left untouched.
//
// As soon as the 12 header bytes are there and BodyLength > d.MaxBody,
// Parse returns n == 0 and a *BodyTooLargeError without waiting for the
// body; the caller closes the connection.
func (d *Decoder) Parse(buf []byte, req *Request) (n int, err error) {
	if len(buf) < HeaderLen {
		return 0, nil
	}
	blen := binary.BigEndian.Uint32(buf[4:8])
	if blen > d.MaxBody {
		return 0, &BodyTooLargeError{Length: blen, Limit: d.MaxBody}
	}
	if uint64(len(buf)) < HeaderLen+uint64(blen) {
		return 0, nil
	}
	n = HeaderLen + int(blen)
	*req = Request{
		Opcode: Opcode(buf[1]),
		Opaque: binary.BigEndian.Uint32(buf[8:12]),
	}
	if buf[0] != MagicRequest {
		req.Status = StatusInvalid
		return n, nil
	}
	body := buf[HeaderLen:n]
	switch req.Opcode {
	case OpNoop, OpStats:
	case OpDump:
		if d.Dialect == Semaphore {
			req.Status = StatusUnknownCommand
		}
		req.DumpAcquired = len(body) == 1 && body[0] == DumpAcquired
	case OpGet:
		req.Name, req.Status = name(body, 0)
	case OpAcquire:
		if len(body) < 10 {
			req.Status = StatusInvalid
			break
		}
		res := binary.BigEndian.Uint32(body[0:4])
		maximum := binary.BigEndian.Uint32(body[4:8])
		if res == 0 || maximum < res {
			req.Status = StatusInvalid
			break
		}
		if req.Name, req.Status = name(body, 8); req.Status == StatusOK {
			req.Resources, req.Maximum = res, maximum
		}
	case OpRelease:
		if len(body) < 6 {
			req.Status = StatusInvalid
			break
		}
		if req.Name, req.Status = name(body, 4); req.Status == StatusOK {
			req.Resources = binary.BigEndian.Uint32(body[0:4])
		}
	default:
		req.Status = StatusUnknownCommand
	}
	return n, nil
}

// name reads the u16 length at body[off:] and the non-empty name after it,
// which must fit in body; bytes after the name are ignored.
func name(body []byte, off int) ([]byte, Status) {
	if len(body) < off+2 {
		return nil, StatusInvalid
	}
	nl := int(binary.BigEndian.Uint16(body[off:]))
	start := off + 2
	if nl == 0 || start+nl > len(body) {
		return nil, StatusInvalid
	}
	return body[start : start+nl : start+nl], StatusOK
}
