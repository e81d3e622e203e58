package counter

import "encoding/binary"

// The client side: requests out, replies in. The request appenders encode
// whatever they are given, invalid values included (Resources 0, Maximum
// below Resources, an empty name), so tests can send bad requests; a real
// client checks those first. They panic only when a value cannot be
// encoded at all: a name longer than MaxNameLen or a body of 4 GiB or more.

// AppendRequest appends a request (magic 0x90, Flags and Reserved 0) with
// any opcode and the raw body to dst.
func AppendRequest(dst []byte, op Opcode, opaque uint32, body []byte) []byte {
	if uint64(len(body)) > 1<<32-1 {
		panic("counter: body length " + itoa(uint64(len(body))) + " exceeds 4294967295")
	}
	dst = appendRequestHeader(dst, op, uint32(len(body)), opaque)
	return append(dst, body...)
}

// AppendGet appends a Get request for name.
func AppendGet(dst []byte, opaque uint32, name []byte) []byte {
	checkName(name)
	dst = appendRequestHeader(dst, OpGet, uint32(2+len(name)), opaque)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// AppendAcquire appends an Acquire request. In the Semaphore dialect
// maximum is the semaphore's Initial value.
func AppendAcquire(dst []byte, opaque, resources, maximum uint32, name []byte) []byte {
	checkName(name)
	dst = appendRequestHeader(dst, OpAcquire, uint32(10+len(name)), opaque)
	dst = binary.BigEndian.AppendUint32(dst, resources)
	dst = binary.BigEndian.AppendUint32(dst, maximum)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// AppendRelease appends a Release request.
func AppendRelease(dst []byte, opaque, resources uint32, name []byte) []byte {
	checkName(name)
	dst = appendRequestHeader(dst, OpRelease, uint32(6+len(name)), opaque)
	dst = binary.BigEndian.AppendUint32(dst, resources)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

func appendRequestHeader(dst []byte, op Opcode, bodyLen, opaque uint32) []byte {
	dst = append(dst, MagicRequest, byte(op), 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, bodyLen)
	return binary.BigEndian.AppendUint32(dst, opaque)
}

// Response is one decoded reply.
type Response struct {
	Opcode Opcode
	Status Status
	Opaque uint32
	Body   []byte // a view into the buffer passed to ParseResponse, capacity ending with the body
}

// MagicError reports a reply whose first byte is not MagicResponse.
// Framing is lost after it: the connection must be closed.
type MagicError struct {
	Magic byte
}

func (e *MagicError) Error() string {
	return "counter: reply magic " + hex8(e.Magic) + ", want 0x91"
}

// ParseResponse decodes the reply at the start of buf into *resp, like
// Decoder.Parse: n == 0 and a nil error when the frame is not all there
// yet (*resp untouched), else n == 12 + BodyLength. As soon as the header is there it
// returns a *MagicError if the magic is not 0x91 and a *BodyTooLargeError
// if BodyLength > maxBody. Reserved is ignored.
func ParseResponse(buf []byte, maxBody uint32, resp *Response) (n int, err error) {
	if len(buf) < HeaderLen {
		return 0, nil
	}
	if buf[0] != MagicResponse {
		return 0, &MagicError{Magic: buf[0]}
	}
	blen := binary.BigEndian.Uint32(buf[4:8])
	if blen > maxBody {
		return 0, &BodyTooLargeError{Length: blen, Limit: maxBody}
	}
	if uint64(len(buf)) < HeaderLen+uint64(blen) {
		return 0, nil
	}
	n = HeaderLen + int(blen)
	*resp = Response{
		Opcode: Opcode(buf[1]),
		Status: Status(buf[2]),
		Opaque: binary.BigEndian.Uint32(buf[8:12]),
		Body:   buf[HeaderLen:n:n],
	}
	return n, nil
}

// StatText is one item of a Stats reply as sent: both parts are text.
type StatText struct {
	Name, Value string
}

// BodyError reports a reply body that does not have the layout its opcode
// requires.
type BodyError struct {
	Op     Opcode
	Offset int    // where in the body the problem is
	Reason string // what is wrong there
}

func (e *BodyError) Error() string {
	return "counter: " + e.Op.String() + " reply body at offset " + itoa(uint64(e.Offset)) + ": " + e.Reason
}

// ParseStatsBody splits the body of a Stats reply into its items, in order.
// An empty body has no items.
func ParseStatsBody(body []byte) ([]StatText, error) {
	var stats []StatText
	for off := 0; off < len(body); {
		if len(body)-off < 4 {
			return nil, &BodyError{OpStats, off, "item header needs 4 bytes, " + itoa(uint64(len(body)-off)) + " left"}
		}
		nl := int(binary.BigEndian.Uint16(body[off:]))
		vl := int(binary.BigEndian.Uint16(body[off+2:]))
		if left := len(body) - off - 4; nl+vl > left {
			return nil, &BodyError{OpStats, off, "name length " + itoa(uint64(nl)) + " and value length " +
				itoa(uint64(vl)) + " need " + itoa(uint64(nl+vl)) + " bytes, " + itoa(uint64(left)) + " left"}
		}
		off += 4
		stats = append(stats, StatText{
			Name:  string(body[off : off+nl]),
			Value: string(body[off+nl : off+nl+vl]),
		})
		off += nl + vl
	}
	return stats, nil
}

// ParseDumpEntry decodes the body of one Dump entry, plain (as ParseDumpBody) or
// extended (AppendDumpEntryAcquired): hasAcquired says which it was. name is a view into
// body.
func ParseDumpEntry(body []byte) (current, max uint32, name []byte, acquired uint64, hasAcquired bool, err error) {
	if len(body) >= 10 {
		if nl := int(binary.BigEndian.Uint16(body[8:])); len(body) == 18+nl {
			return binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:]), body[10 : 10+nl : 10+nl],
				binary.BigEndian.Uint64(body[10+nl:]), true, nil
		}
	}
	current, max, name, err = ParseDumpBody(body)
	return current, max, name, 0, false, err
}

// ParseDumpBody decodes the body of one Dump entry: u32 current, u32 max,
// u16 NameLen, Name, with nothing after the name. name is a view into body.
// The reply that ends a Dump has an empty body, which is not an entry:
// check len(body) == 0 first.
func ParseDumpBody(body []byte) (current, max uint32, name []byte, err error) {
	if len(body) < 10 {
		return 0, 0, nil, &BodyError{OpDump, 0, "entry needs at least 10 bytes, have " + itoa(uint64(len(body)))}
	}
	nl := int(binary.BigEndian.Uint16(body[8:]))
	if len(body) != 10+nl {
		return 0, 0, nil, &BodyError{OpDump, 8, "name length " + itoa(uint64(nl)) + " needs a body of " +
			itoa(uint64(10+nl)) + " bytes, have " + itoa(uint64(len(body)))}
	}
	return binary.BigEndian.Uint32(body), binary.BigEndian.Uint32(body[4:]), body[10:len(body):len(body)], nil
}
