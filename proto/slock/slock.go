// Package slock encodes and decodes slock's binary protocol: its 64-byte frames, the lock-data records that follow them and the bodies of its CALL frames.
//
// Every command and every reply starts with a fixed 64-byte frame, all
// integers little-endian:
//
//	magic 0x56 | version 0x01 | type u8 | RequestId [16] | 45 bytes by type
//
// A Lock or Unlock frame whose Flag has 0x20 is followed by a data record
// (u32 N, then N bytes); a CALL frame by ContentLen bytes of protobuf body.
// The package is a pure codec: [Decoder.Parse] turns bytes into a [Frame]
// without copying, and the Append functions write replies (and, for
// clients, requests) onto a caller's buffer without allocating when it has
// room. [Sniff] tells a binary connection from a RESP one, [TextID] maps
// the text protocol's key and LockId strings to 16-byte ids, and
// [ParseDataRecord] with its element iterators serves the text renderer.
// The Redis-text commands served on the same port are proto/rediscmd's.
package slock

import (
	"crypto/md5"
	"encoding/hex"
	"strconv"
)

// Framing constants.
const (
	FrameLen = 64   // bytes in every command and reply frame
	Magic    = 0x56 // byte 0 of every frame
	Version  = 0x01 // byte 1 of every frame

	// FlagData in a Lock/Unlock Flag (byte 19) says a data record follows
	// the frame; in a Lock/Unlock reply's byte 20 it says the key's value
	// record follows.
	FlagData = 0x20

	// DefaultMaxData is the default for Decoder.MaxData: the largest data
	// record length N accepted (the reference server's limit).
	DefaultMaxData = 1 << 20
	// DefaultMaxCall is the default for Decoder.MaxCall: the largest CALL
	// ContentLen accepted.
	DefaultMaxCall = 1 << 20
)

// Type is byte 2 of a frame: the command type, echoed in its reply.
type Type uint8

// Command types.
const (
	TypeInit       Type = 0
	TypeLock       Type = 1
	TypeUnlock     Type = 2
	TypeState      Type = 3
	TypeAdmin      Type = 4
	TypePing       Type = 5
	TypeQuit       Type = 6
	TypeCall       Type = 7
	TypeWillLock   Type = 8
	TypeWillUnlock Type = 9
	TypeLeader     Type = 10
	TypeSubscribe  Type = 11
)

var typeNames = [...]string{"INIT", "LOCK", "UNLOCK", "STATE", "ADMIN", "PING", "QUIT", "CALL",
	"WILL_LOCK", "WILL_UNLOCK", "LEADER", "SUBSCRIBE"}

// String returns the type's name ("LOCK", "WILL_UNLOCK", ...), or
// "Type(n)" for a type the protocol does not define.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// lockLayout reports whether frames of type t have the Lock/Unlock layout
// (and so may carry a data record).
func (t Type) lockLayout() bool {
	return t == TypeLock || t == TypeUnlock || t == TypeWillLock || t == TypeWillUnlock
}

// Result is byte 19 of every reply.
type Result uint8

// Result codes.
const (
	ResultOK             Result = 0  // SUCCED
	ResultUnknownMagic   Result = 1  // bad magic: the connection is closed after the reply
	ResultUnknownVersion Result = 2  // bad version: the connection is closed after the reply
	ResultUnknownDB      Result = 3  // DbId 0xFF, or an Unlock in a database never created
	ResultUnknownCommand Result = 4  // unknown command type or CALL method
	ResultLockedError    Result = 5  // reentry refused, Update, cancelling a wait
	ResultUnlockError    Result = 6  // nothing to unlock; a cancelled wait
	ResultUnownError     Result = 7  // held by someone else (Show, Unlock by a non-holder)
	ResultTimeout        Result = 8  // a wait ran out, or a try-lock failed
	ResultExpried        Result = 9  // a hold ran out (pushed unasked)
	ResultStateError     Result = 10 // not the leader
	ResultUnknownError   Result = 11 // anything else (CALL DECODE_ERROR)
	ResultAckWaiting     Result = 12 // the lock still awaits its replication acknowledgement
)

// resultNames are the names the Redis-text LOCK/UNLOCK reply uses (§8.1).
var resultNames = [...]string{"OK", "UNKNOWN_MAGIC", "UNKNOWN_VERSION", "UNKNOWN_DB",
	"UNKNOWN_COMMAND", "LOCKED_ERROR", "UNLOCK_ERROR", "UNOWN_ERROR", "TIMEOUT", "EXPRIED",
	"RESULT_STATE_ERROR", "UNKNOWN_ERROR", "LOCK_ACK_WAITING"}

// String returns the name the Redis-text protocol gives the result ("OK",
// "LOCKED_ERROR", "RESULT_STATE_ERROR", ...; "LOCK_ACK_WAITING" for 12,
// which the reference cannot name), or "Result(n)" for an undefined code.
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Bits of the InitType byte of an INIT reply.
const (
	InitKnownClient = 0x01 // a connection registered under this ClientId existed (it is replaced)
	InitProxy       = 0x02 // served through a follower proxy
	InitLeader      = 0x04 // this node is the leader
	InitHasLeader   = 0x08 // a leader is known
	InitShutdown    = 0x10 // the server is shutting down

	// InitStandalone is what a standalone server answers (0x0C); it adds
	// InitKnownClient for a ClientId already in use.
	InitStandalone = InitLeader | InitHasLeader
)

// Kind is the protocol a connection speaks, as Sniff decides it.
type Kind uint8

// Kinds.
const (
	Unknown Kind = iota // neither: an inline text command, which closes the connection
	Binary              // 64-byte frames
	RESP                // Redis text protocol (RESP arrays)
)

// String returns "unknown", "binary" or "resp".
func (k Kind) String() string {
	switch k {
	case Binary:
		return "binary"
	case RESP:
		return "resp"
	}
	return "unknown"
}

// Sniff decides from the first bytes a connection sent which protocol it
// speaks: Binary when they start 0x56 0x01, RESP when the first is '*',
// Unknown otherwise. It looks at as few bytes as it can: with ok == false
// (nothing buffered, or only 0x56) the caller waits for another byte.
func Sniff(first []byte) (kind Kind, ok bool) {
	switch {
	case len(first) == 0:
		return Unknown, false
	case first[0] == '*':
		return RESP, true
	case first[0] != Magic:
		return Unknown, true
	case len(first) == 1:
		return Unknown, false
	case first[1] == Version:
		return Binary, true
	}
	return Unknown, true
}

// TextID maps a key or LockId string of the text protocol to its 16 bytes:
// a string of exactly 16 bytes is used as is; 32 valid hex digits (either
// case) are decoded; any other string longer than 16 bytes is MD5-hashed;
// a shorter one is right-aligned and padded with zero bytes on the left.
func TextID(s []byte) (id [16]byte) {
	switch {
	case len(s) == 16:
		copy(id[:], s)
	case len(s) == 32 && isHex(s):
		hex.Decode(id[:], s)
	case len(s) > 16:
		id = md5.Sum(s)
	default:
		copy(id[16-len(s):], s)
	}
	return id
}

func isHex(s []byte) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// AppendHexID appends id as 32 lower-case hex digits, as the text
// protocol's LOCK_ID reply field shows it.
func AppendHexID(dst []byte, id [16]byte) []byte {
	return hex.AppendEncode(dst, id[:])
}

// hex8 formats b as "0x" and two lower-case hex digits, for errors.
func hex8(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{'0', 'x', digits[b>>4], digits[b&0xf]})
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
