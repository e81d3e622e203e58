package slock

import "encoding/binary"

// LockReply is a Lock/Unlock reply frame (§1.2), asked for or pushed.
type LockReply struct {
	Type        Type // of the command answered: TypeLock or TypeUnlock
	RequestID   [16]byte
	Result      Result
	DB          uint8
	LockID, Key [16]byte
	Lcount      uint16 // levels held on the key
	Count       uint16
	Lrcount     uint8 // levels held by the LockId concerned
	Rcount      uint8

	// Value is the key's value record to attach, whole (u32 N and the N
	// bytes), or nil for none.
	Value []byte

	// Token is a granted holder's fencing token (0: none). The binary frame has
	// no room for it; the text reply carries it (AppendTextLockReply).
	Token uint64
}

// AppendLockReply appends r: the 64-byte frame, with byte 20 = FlagData
// if r.Value is not empty and 0 otherwise, then r.Value verbatim.
func AppendLockReply(dst []byte, r *LockReply) []byte {
	dst = appendHead(dst, r.Type, &r.RequestID)
	flag := byte(0)
	if len(r.Value) > 0 {
		flag = FlagData
	}
	dst = append(dst, byte(r.Result), flag, r.DB)
	dst = append(dst, r.LockID[:]...)
	dst = append(dst, r.Key[:]...)
	dst = binary.LittleEndian.AppendUint16(dst, r.Lcount)
	dst = binary.LittleEndian.AppendUint16(dst, r.Count)
	dst = append(dst, r.Lrcount, r.Rcount, 0, 0, 0, 0)
	return append(dst, r.Value...)
}

// AppendSimple appends a reply whose bytes 20-63 are zero: PING and QUIT
// (ResultOK), ADMIN (ResultOK; the connection then speaks RESP), and any
// unknown type (ResultUnknownCommand).
func AppendSimple(dst []byte, t Type, requestID [16]byte, res Result) []byte {
	dst = appendHead(dst, t, &requestID)
	dst = append(dst, byte(res))
	return append(dst, zeros[:FrameLen-20]...)
}

// AppendErrorReply appends the reply owed for an error from Parse: for a
// *HeaderError, a frame with its type and RequestId echoed and result
// ResultUnknownMagic or ResultUnknownVersion (magic and version are the
// right ones). For any other error nothing is owed and dst is returned
// unchanged. Either way the connection is then closed.
func AppendErrorReply(dst []byte, err error) []byte {
	e, ok := err.(*HeaderError)
	if !ok || e == nil {
		return dst
	}
	return AppendSimple(dst, e.Type, e.RequestID, e.Result)
}

// AppendInit appends an INIT reply: result 0, byte 20 = initType (the
// Init bits; InitStandalone for a standalone server). The server also sends
// it unasked, with a fresh RequestId, when its role changes.
func AppendInit(dst []byte, requestID [16]byte, initType uint8) []byte {
	dst = appendHead(dst, TypeInit, &requestID)
	dst = append(dst, byte(ResultOK), initType)
	return append(dst, zeros[:FrameLen-21]...)
}

// State is the body of a STATE reply (§7.3): one database's gauges and
// cumulative counters.
type State struct {
	DBState          uint8 // 1 if the database exists; 0 and all counters 0 otherwise
	DB               uint8
	LockCount        uint64 // grants, probes and reentries included
	UnlockCount      uint64 // released levels and cancelled waits
	LockedCount      uint32 // levels held now
	WaitCount        uint32 // requests queued now
	TimeoutedCount   uint32
	ExpriedCount     uint32
	UnlockErrorCount uint32
	KeyCount         uint32 // keys tracked now
}

// AppendState appends a STATE reply (result 0) carrying s.
func AppendState(dst []byte, requestID [16]byte, s *State) []byte {
	dst = appendHead(dst, TypeState, &requestID)
	dst = append(dst, byte(ResultOK), 0, s.DBState, s.DB)
	dst = binary.LittleEndian.AppendUint64(dst, s.LockCount)
	dst = binary.LittleEndian.AppendUint64(dst, s.UnlockCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.LockedCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.WaitCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.TimeoutedCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.ExpriedCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.UnlockErrorCount)
	dst = binary.LittleEndian.AppendUint32(dst, s.KeyCount)
	return append(dst, 0)
}

// Error types of CALL replies (§8.1).
const (
	ErrTypeDecode      = "DECODE_ERROR"       // with ResultUnknownError: the body did not decode
	ErrTypeUnknownDB   = "UNKNOWN_DB_ERROR"   // with ResultUnknownDB: no such database
	ErrTypeLockManager = "LOCK_MANAGER_ERROR" // with ResultUnknownDB: the key has no holders
)

// MaxErrType is the room for a CALL reply's ErrType (bytes 27-63).
const MaxErrType = FrameLen - 27

// AppendCall appends a CALL reply: result, Encoding 3 (protobuf), Charset 1
// (utf8), ContentLen = len(body), errType NUL-padded ("" on success), then
// body. It panics if errType is longer than MaxErrType.
//
// To encode the body straight into dst instead, call it with a nil body,
// append the body, and then SetCallLen on the reply.
func AppendCall(dst []byte, requestID [16]byte, res Result, errType string, body []byte) []byte {
	if len(errType) > MaxErrType {
		panic("slock: CALL error type " + errType + " is longer than " + itoa(MaxErrType) + " bytes")
	}
	dst = appendHead(dst, TypeCall, &requestID)
	dst = append(dst, byte(res), 0, 3, 1)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(body)))
	dst = append(dst, errType...)
	dst = append(dst, zeros[:MaxErrType-len(errType)]...)
	return append(dst, body...)
}

// SetCallLen sets the ContentLen of the CALL reply that starts reply to
// the number of bytes after its 64: len(reply) - 64. It panics if reply is
// shorter than a frame or the body is 4 GiB or more.
func SetCallLen(reply []byte) {
	n := uint64(len(reply) - FrameLen)
	if len(reply) < FrameLen || n > 1<<32-1 {
		panic("slock: SetCallLen on " + itoa(uint64(len(reply))) + " bytes")
	}
	binary.LittleEndian.PutUint32(reply[23:], uint32(n))
}

// MaxHost is the room for the host name in a LEADER reply (bytes 21-63).
const MaxHost = FrameLen - 21

// AppendLeader appends a LEADER reply: result 0, byte 20 zero and the
// leader's host:port NUL-padded in bytes 21-63 (slock 2.1's
// LeaderResultCommand; the spec does not describe it). A standalone server
// names itself. It panics if host is longer than MaxHost.
func AppendLeader(dst []byte, requestID [16]byte, host string) []byte {
	if len(host) > MaxHost {
		panic("slock: LEADER host " + host + " is longer than " + itoa(MaxHost) + " bytes")
	}
	dst = appendHead(dst, TypeLeader, &requestID)
	dst = append(dst, byte(ResultOK), 0)
	dst = append(dst, host...)
	return append(dst, zeros[:MaxHost-len(host)]...)
}

// zeros pads frames.
var zeros [FrameLen]byte

// appendHead appends magic, version, t and the RequestId: bytes 0-18.
func appendHead(dst []byte, t Type, requestID *[16]byte) []byte {
	dst = append(dst, Magic, Version, byte(t))
	return append(dst, requestID[:]...)
}
