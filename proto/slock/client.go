package slock

import "encoding/binary"

// The client side: requests out, replies in, for tests, benchmarks and
// tools. The request appenders encode whatever they are given (DbId 0xFF,
// unknown types, a data record of a bad length), so tests can send bad
// requests.

// AppendLockRequest appends a frame with the Lock/Unlock layout of type
// f.Type (TypeLock, TypeUnlock, TypeWillLock or TypeWillUnlock) from f's
// lock fields, then f.Data verbatim. If f.Data is not empty, Flag is sent
// with FlagData set; a Flag with FlagData and no Data announces a record
// the caller must send itself.
func AppendLockRequest(dst []byte, f *Frame) []byte {
	dst = appendHead(dst, f.Type, &f.RequestID)
	flag := f.Flag
	if len(f.Data) > 0 {
		flag |= FlagData
	}
	dst = append(dst, flag, f.DB)
	dst = append(dst, f.LockID[:]...)
	dst = append(dst, f.Key[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, f.Timeout)
	dst = binary.LittleEndian.AppendUint16(dst, f.TimeoutFlag)
	dst = binary.LittleEndian.AppendUint16(dst, f.Expried)
	dst = binary.LittleEndian.AppendUint16(dst, f.ExpriedFlag)
	dst = binary.LittleEndian.AppendUint16(dst, f.Count)
	dst = append(dst, f.Rcount)
	return append(dst, f.Data...)
}

// AppendInitRequest appends an INIT frame registering clientID.
func AppendInitRequest(dst []byte, requestID, clientID [16]byte) []byte {
	dst = appendHead(dst, TypeInit, &requestID)
	dst = append(dst, clientID[:]...)
	return append(dst, zeros[:FrameLen-35]...)
}

// AppendRequest appends a frame of type t whose bytes 19-63 are zero:
// PING, QUIT, ADMIN, LEADER, or any type for tests.
func AppendRequest(dst []byte, t Type, requestID [16]byte) []byte {
	dst = appendHead(dst, t, &requestID)
	return append(dst, zeros[:FrameLen-19]...)
}

// AppendPing appends a PING frame.
func AppendPing(dst []byte, requestID [16]byte) []byte {
	return AppendRequest(dst, TypePing, requestID)
}

// AppendStateRequest appends a STATE frame asking about database db.
func AppendStateRequest(dst []byte, requestID [16]byte, db uint8) []byte {
	dst = appendHead(dst, TypeState, &requestID)
	dst = append(dst, 0, db)
	return append(dst, zeros[:FrameLen-21]...)
}

// MaxMethod is the room for a CALL request's method name (bytes 26-63).
const MaxMethod = FrameLen - 26

// AppendCallRequest appends a CALL frame (Encoding 3 protobuf, Charset 1
// utf8) for method, NUL-padded, with ContentLen = len(body), then body. It
// panics if method is longer than MaxMethod or body is 4 GiB or more.
func AppendCallRequest(dst []byte, requestID [16]byte, method string, body []byte) []byte {
	if len(method) > MaxMethod {
		panic("slock: CALL method " + method + " is longer than " + itoa(MaxMethod) + " bytes")
	}
	if uint64(len(body)) > 1<<32-1 {
		panic("slock: CALL body of " + itoa(uint64(len(body))) + " bytes")
	}
	dst = appendHead(dst, TypeCall, &requestID)
	dst = append(dst, 0, 3, 1)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, method...)
	dst = append(dst, zeros[:MaxMethod-len(method)]...)
	return append(dst, body...)
}

// Reply is any decoded reply frame. Type, RequestID and Result are set for
// every type; the other fields for the types their comments name. The byte
// slices are views into the buffer passed to ParseReply, capacity clipped.
type Reply struct {
	// LockReply holds, for every reply, Type, RequestID and Result; for
	// Lock/Unlock replies (types 1, 2, 8, 9) every field, Value being the
	// record that followed (nil if none).
	LockReply

	// Flag is byte 20 as sent: FlagData on a Lock/Unlock reply carrying a
	// value; the InitType bits on an INIT reply.
	Flag uint8

	State State // STATE replies

	// CALL replies: Encoding, Charset, the error type up to its first
	// NUL, and the ContentLen bytes of body.
	Encoding, Charset uint8
	ErrType           []byte
	Body              []byte

	Host []byte // LEADER replies: the host up to its first NUL
}

// ParseReply decodes the reply at the start of buf into *r, like
// Decoder.Parse: n == 0 and a nil error when the reply is not all there
// yet, else n == its length (64, plus the value record of a Lock/Unlock
// reply whose byte 20 has FlagData, plus a CALL reply's ContentLen). It
// returns n == 0 and a *HeaderError for a wrong magic or version, and a
// *LengthError when a value record's N is below 2 or above maxLen or a
// CALL ContentLen is above maxLen. Whenever n == 0, *r is left untouched.
func ParseReply(buf []byte, maxLen uint32, r *Reply) (n int, err error) {
	if len(buf) < FrameLen {
		return 0, nil
	}
	if buf[0] != Magic || buf[1] != Version {
		return 0, headerError(buf)
	}
	typ := Type(buf[2])
	n = FrameLen
	switch {
	case typ.lockLayout() && buf[20]&FlagData != 0:
		if len(buf) < FrameLen+4 {
			return 0, nil
		}
		vl := binary.LittleEndian.Uint32(buf[FrameLen:])
		if vl < MinData || vl > maxLen {
			return 0, &LengthError{Type: typ, Field: "value record length", Len: vl, Min: MinData, Max: maxLen}
		}
		if uint64(len(buf)) < FrameLen+4+uint64(vl) {
			return 0, nil
		}
		n += 4 + int(vl)
	case typ == TypeCall:
		cl := binary.LittleEndian.Uint32(buf[23:])
		if cl > maxLen {
			return 0, &LengthError{Type: typ, Field: "content length", Len: cl, Max: maxLen}
		}
		if uint64(len(buf)) < FrameLen+uint64(cl) {
			return 0, nil
		}
		n += int(cl)
	}
	*r = Reply{}
	r.Type, r.Result, r.Flag = typ, Result(buf[19]), buf[20]
	copy(r.RequestID[:], buf[3:19])
	switch {
	case typ.lockLayout():
		r.DB = buf[21]
		copy(r.LockID[:], buf[22:38])
		copy(r.Key[:], buf[38:54])
		r.Lcount = binary.LittleEndian.Uint16(buf[54:])
		r.Count = binary.LittleEndian.Uint16(buf[56:])
		r.Lrcount, r.Rcount = buf[58], buf[59]
		if n > FrameLen {
			r.Value = buf[FrameLen:n:n]
		}
	case typ == TypeState:
		r.State = State{
			DBState:          buf[21],
			DB:               buf[22],
			LockCount:        binary.LittleEndian.Uint64(buf[23:]),
			UnlockCount:      binary.LittleEndian.Uint64(buf[31:]),
			LockedCount:      binary.LittleEndian.Uint32(buf[39:]),
			WaitCount:        binary.LittleEndian.Uint32(buf[43:]),
			TimeoutedCount:   binary.LittleEndian.Uint32(buf[47:]),
			ExpriedCount:     binary.LittleEndian.Uint32(buf[51:]),
			UnlockErrorCount: binary.LittleEndian.Uint32(buf[55:]),
			KeyCount:         binary.LittleEndian.Uint32(buf[59:]),
		}
	case typ == TypeCall:
		r.Encoding, r.Charset = buf[21], buf[22]
		r.ErrType = cstring(buf[27:FrameLen])
		r.Body = buf[FrameLen:n:n]
	case typ == TypeLeader:
		r.Host = cstring(buf[21:FrameLen])
	}
	return n, nil
}
