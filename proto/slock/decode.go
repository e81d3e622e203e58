package slock

import "encoding/binary"

// Frame is one decoded command frame. Type and RequestID are set for every
// type; the other fields only for the types their comments name, and are
// zero otherwise. The byte slices are views into the buffer passed to
// Parse, valid only while that buffer is, each with its capacity ending
// where it does so appending to it never overwrites the buffer.
type Frame struct {
	Type      Type
	RequestID [16]byte

	// LOCK, UNLOCK, WILL_LOCK, WILL_UNLOCK: every field of the frame.
	// STATE sets Flag (ignored by servers) and DB; CALL sets Flag.
	Flag        uint8
	DB          uint8
	LockID, Key [16]byte
	Timeout     uint16
	TimeoutFlag uint16
	Expried     uint16
	ExpriedFlag uint16
	Count       uint16
	Rcount      uint8

	// Data is, when Flag has FlagData on a lock-layout frame, the whole
	// data record that follows the frame: u32 N and the N bytes, N >= 2.
	// Otherwise nil.
	Data []byte

	// ClientID is INIT's bytes 19-34.
	ClientID [16]byte

	// CALL: Encoding (3 = protobuf) and Charset (1 = utf8) as sent, the
	// method name up to its first NUL, and the ContentLen bytes of body.
	Encoding, Charset uint8
	Method            []byte
	Body              []byte

	// Raw is the whole frame as sent: the 64 bytes, and the data record or
	// CALL body after them. len(Raw) is what Parse returned.
	Raw []byte
}

// Decoder parses command frames. The zero value is ready to use, with the
// default limits.
type Decoder struct {
	// MaxData is the largest data record length N accepted; 0 means
	// DefaultMaxData. A larger N is a *LengthError.
	MaxData uint32
	// MaxCall is the largest CALL ContentLen accepted; 0 means
	// DefaultMaxCall. A larger one is a *LengthError.
	MaxCall uint32
}

// HeaderError reports a frame whose magic or version is wrong. The server
// answers it with AppendErrorReply (result 1 or 2) and closes the
// connection: framing is not trusted after it.
type HeaderError struct {
	Result    Result // ResultUnknownMagic or ResultUnknownVersion
	Magic     byte   // byte 0 as sent
	Version   byte   // byte 1 as sent
	Type      Type   // byte 2 as sent, echoed in the reply
	RequestID [16]byte
	Len       int // bytes the bad frame had: FrameLen
}

func (e *HeaderError) Error() string {
	if e.Result == ResultUnknownMagic {
		return "slock: " + e.Type.String() + " frame magic " + hex8(e.Magic) + ", want 0x56"
	}
	return "slock: " + e.Type.String() + " frame version " + hex8(e.Version) + ", want 0x01"
}

// LengthError reports a length field the protocol cannot accept: a data
// record length N below 2 or above the limit, or a CALL ContentLen above
// the limit. It is found before waiting for the bytes; the connection must
// be closed.
type LengthError struct {
	Type     Type
	Field    string // "data record length" or "content length"
	Len      uint32 // as sent
	Min, Max uint32 // the accepted range
}

func (e *LengthError) Error() string {
	if e.Len < e.Min {
		return "slock: " + e.Type.String() + " frame " + e.Field + " " + itoa(uint64(e.Len)) +
			" is below " + itoa(uint64(e.Min))
	}
	return "slock: " + e.Type.String() + " frame " + e.Field + " " + itoa(uint64(e.Len)) +
		" exceeds " + itoa(uint64(e.Max))
}

// MinData is the smallest data record length N (the stage/command and the
// flag byte); the reference server crashes on 0 and 1.
const MinData = 2

// Parse decodes the frame at the start of buf into *f.
//
// It returns n == 0 and a nil error when buf does not hold the whole frame
// yet (its 64 bytes, and the data record or CALL body it announces): the
// caller waits for more. Otherwise n is the frame's length, and the caller
// consumes exactly n bytes. Every type is a frame, unknown ones included
// (the server answers those with ResultUnknownCommand).
//
// Errors mean the connection must be closed, and come with n == 0:
// a *HeaderError once 64 bytes are there with a wrong magic or version
// (answer it with AppendErrorReply first), and a *LengthError as soon as a
// data record's or CALL body's length field is there and out of range,
// without waiting for the bytes it claims. Whenever n == 0, *f is left
// untouched.
func (d *Decoder) Parse(buf []byte, f *Frame) (n int, err error) {
	if len(buf) < FrameLen {
		return 0, nil
	}
	if buf[0] != Magic || buf[1] != Version {
		return 0, headerError(buf)
	}
	typ := Type(buf[2])
	n = FrameLen
	switch {
	case typ.lockLayout() && buf[19]&FlagData != 0:
		if len(buf) < FrameLen+4 {
			return 0, nil
		}
		dl := binary.LittleEndian.Uint32(buf[FrameLen:])
		if max := limit(d.MaxData, DefaultMaxData); dl < MinData || dl > max {
			return 0, &LengthError{Type: typ, Field: "data record length", Len: dl, Min: MinData, Max: max}
		}
		if uint64(len(buf)) < FrameLen+4+uint64(dl) {
			return 0, nil
		}
		n += 4 + int(dl)
	case typ == TypeCall:
		cl := binary.LittleEndian.Uint32(buf[22:])
		if max := limit(d.MaxCall, DefaultMaxCall); cl > max {
			return 0, &LengthError{Type: typ, Field: "content length", Len: cl, Max: max}
		}
		if uint64(len(buf)) < FrameLen+uint64(cl) {
			return 0, nil
		}
		n += int(cl)
	}
	*f = Frame{Type: typ, Raw: buf[:n:n]}
	copy(f.RequestID[:], buf[3:19])
	switch typ {
	case TypeLock, TypeUnlock, TypeWillLock, TypeWillUnlock:
		decodeLock(buf[:n:n], f)
	case TypeInit:
		copy(f.ClientID[:], buf[19:35])
	case TypeState:
		f.Flag, f.DB = buf[19], buf[20]
	case TypeCall:
		f.Flag, f.Encoding, f.Charset = buf[19], buf[20], buf[21]
		f.Method = cstring(buf[26:FrameLen])
		f.Body = buf[FrameLen:n:n]
	}
	return n, nil
}

// decodeLock fills the lock fields of f from frame, which is exactly the
// 64 bytes and the data record if there is one.
func decodeLock(frame []byte, f *Frame) {
	f.Flag = frame[19]
	f.DB = frame[20]
	copy(f.LockID[:], frame[21:37])
	copy(f.Key[:], frame[37:53])
	f.Timeout = binary.LittleEndian.Uint16(frame[53:])
	f.TimeoutFlag = binary.LittleEndian.Uint16(frame[55:])
	f.Expried = binary.LittleEndian.Uint16(frame[57:])
	f.ExpriedFlag = binary.LittleEndian.Uint16(frame[59:])
	f.Count = binary.LittleEndian.Uint16(frame[61:])
	f.Rcount = frame[63]
	if len(frame) > FrameLen {
		f.Data = frame[FrameLen:]
	}
}

func headerError(buf []byte) *HeaderError {
	e := &HeaderError{Result: ResultUnknownMagic, Magic: buf[0], Version: buf[1], Type: Type(buf[2]), Len: FrameLen}
	if buf[0] == Magic {
		e.Result = ResultUnknownVersion
	}
	copy(e.RequestID[:], buf[3:19])
	return e
}

// limit returns v, or def when v is 0.
func limit(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

// cstring returns b up to its first NUL, capacity clipped.
func cstring(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i:i]
		}
	}
	return b[:len(b):len(b)]
}
