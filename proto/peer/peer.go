// Package peer encodes and decodes the frames of the link between two tallyd nodes of a cluster.
package peer

// The layout. Every frame is
//
//	u32 length (big-endian) of what follows: the type byte and the body
//	u8  type
//	    body
//
// and the bodies, all integers big-endian, a "str" being u16 length and
// bytes, a "rest" being every byte up to the end of the frame:
//
//	Hello      u64 From, u64 ClusterID (0: none), str Addr
//	Raft       rest Msg (a marshalled raftpb.Message, not looked into)
//	Forward    u64 Session, u64 Client, u8 Kind, u8 Level, u8 DB, u16 Timeout, u16 TimeoutFlag,
//	           [str User, when Kind has KindUser], rest Data
//	Reply      u64 Session, rest Data
//	Close      u64 Session, u8 Why
//	Join       u64 ID, str Addr
//	JoinReply  u8 OK (0 or 1), u64 LeaderID, str LeaderAddr, str Err
//	Challenge  32 Nonce
//	Proof      32 MAC
//
// A body is exactly its fields: a frame with bytes left over is malformed,
// so each frame has one encoding and the appenders produce it.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Type is a frame's type.
type Type uint8

// The frame types.
const (
	TypeHello     Type = iota + 1 // first frame on a link, from the node that dialled
	TypeRaft                      // a raft message
	TypeForward                   // client bytes a follower forwards to the leader
	TypeReply                     // reply bytes for a forwarded session, leader to follower
	TypeClose                     // a forwarded session ends, either way
	TypeJoin                      // a new node asks to be added
	TypeJoinReply                 // the answer to a Join
	TypeChallenge                 // a fresh nonce the other end must prove the cluster key on
	TypeProof                     // that proof: a MAC over both nonces and the prover's id
)

var typeNames = [...]string{
	TypeHello: "Hello", TypeRaft: "Raft", TypeForward: "Forward", TypeReply: "Reply",
	TypeClose: "Close", TypeJoin: "Join", TypeJoinReply: "JoinReply", TypeChallenge: "Challenge", TypeProof: "Proof",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Kinds of forwarded client bytes (Frame.Kind).
const (
	KindText   uint8 = 1 // Redis text commands
	KindBinary uint8 = 2 // slock binary commands
	KindSlock  uint8 = 3 // Redis text commands of a connection with CLIENT SLOCK ON (slock's text semantics)

	// KindUser is a flag of a Forward's kind byte on the wire: the ACL user's name the
	// client runs as follows the fixed fields (Frame.User). Frames of members that do not
	// send it (tallyd before it) have no flag and no name. Frame.Kind never has it.
	KindUser uint8 = 0x80
)

// Consistency levels of a forwarded command (Frame.Level).
const (
	LevelOne    uint8 = 1
	LevelQuorum uint8 = 2
	LevelAll    uint8 = 3
)

const (
	// HeaderLen is the length of a frame's header: the u32 length and the type.
	HeaderLen = 5

	// MaxFrame is the largest length field Parse accepts: the type byte and
	// the body of a frame (raft snapshots travel whole in one Raft frame).
	MaxFrame = 64 << 20

	// MaxString is the longest address or error string a frame carries;
	// the appenders cut longer ones.
	MaxString = 1<<16 - 1
)

// The fixed part of each type's body: its length without the strings'
// bytes and the rest.
const (
	helloFixed     = 8 + 8 + 2
	forwardFixed   = 8 + 8 + 1 + 1 + 1 + 2 + 2
	replyFixed     = 8
	closeFixed     = 8 + 1
	joinFixed      = 8 + 2
	joinReplyFixed = 1 + 8 + 2 + 2
	authFixed      = AuthLen
)

// AuthLen is the length of a Challenge's nonce and of a Proof's MAC.
const AuthLen = 32

// minBody is, by type, the shortest body a frame of that type can have; -1
// for the types that do not exist.
var minBody = [...]int{
	0: -1, TypeHello: helloFixed, TypeRaft: 0, TypeForward: forwardFixed, TypeReply: replyFixed,
	TypeClose: closeFixed, TypeJoin: joinFixed, TypeJoinReply: joinReplyFixed, TypeChallenge: authFixed,
	TypeProof: authFixed,
}

// Frame is one decoded frame. Type says which fields are meaningful: those
// the layout above lists for it; the others are zero. The byte slices are
// views into the buffer passed to Parse, valid only while it is, each
// capped at its end so that appending to it never overwrites the buffer.
type Frame struct {
	Type Type

	From      uint64 // Hello: the node that dialled
	ClusterID uint64 // Hello: the cluster it belongs to; 0 when not given
	Addr      []byte // Hello: the dialler's peer address; Join: the joining node's

	Msg []byte // Raft: the marshalled raftpb.Message

	Session     uint64 // Forward, Reply, Close: the client session, numbered by the follower
	Client      uint64 // Forward: the client's cluster-wide id (who holds what it locks)
	Kind        uint8  // Forward: KindText, KindBinary or KindSlock
	Level       uint8  // Forward: LevelOne, LevelQuorum or LevelAll
	DB          uint8  // Forward: the session's database
	Timeout     uint16 // Forward: slock timeout of the command
	TimeoutFlag uint16 // Forward: its flag
	User        []byte // Forward: the ACL user the client runs as; empty when the sender did not say
	Data        []byte // Forward: client bytes, whole commands; Reply: reply bytes
	Why         uint8  // Close: why the session ended (not interpreted here)

	ID uint64 // Join: the joining node

	OK         bool   // JoinReply: the node was added
	LeaderID   uint64 // JoinReply: the leader, when known (0: unknown)
	LeaderAddr []byte // JoinReply: its peer address
	Err        []byte // JoinReply: why not, when not OK

	Auth []byte // Challenge: the nonce; Proof: the MAC (AuthLen bytes)
}

// Errors of Parse; the error returned wraps one of them and says more.
// After any of them the link's framing is lost: the caller drops the link.
var (
	ErrType      = errors.New("peer: unknown frame type")
	ErrTooLarge  = errors.New("peer: frame longer than the limit")
	ErrMalformed = errors.New("peer: malformed frame")
)

// FrameLen is the length of the frame that starts buf, once its length field is in (0
// before): what a caller that copies its input to call Parse waits for.
func FrameLen(buf []byte) int {
	if len(buf) < 4 {
		return 0
	}
	return 4 + int(binary.BigEndian.Uint32(buf))
}

// Parse decodes the frame at the start of buf, with MaxFrame as the limit
// (see ParseLimit).
func Parse(buf []byte) (f Frame, n int, err error) { return ParseLimit(buf, MaxFrame) }

// ParseLimit decodes the frame at the start of buf and returns it with the
// number of bytes it took; limit is the largest length field accepted
// (MaxFrame when <= 0). It returns n == 0 and a nil error while buf
// holds only part of a frame that could still be valid: the caller waits
// for more. It returns an error as soon as the bytes in buf show the frame
// is bad, whole or not: a length field of 0 or above limit, an unknown type,
// a length too short for the type's fixed fields, and, once the frame is
// whole, a string running past the end, bytes left over, or a Kind, Level
// or OK out of range. It never allocates on success.
func ParseLimit(buf []byte, limit int) (f Frame, n int, err error) {
	if limit <= 0 {
		limit = MaxFrame
	}
	if len(buf) < 4 {
		return Frame{}, 0, nil
	}
	size := binary.BigEndian.Uint32(buf)
	switch {
	case uint64(size) > uint64(limit):
		return Frame{}, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, size, limit)
	case size == 0:
		return Frame{}, 0, fmt.Errorf("%w: length 0, no type", ErrMalformed)
	case len(buf) < HeaderLen:
		return Frame{}, 0, nil
	}
	t := Type(buf[4])
	if int(t) >= len(minBody) || minBody[t] < 0 {
		return Frame{}, 0, fmt.Errorf("%w: %d", ErrType, t)
	}
	if int(size)-1 < minBody[t] {
		return Frame{}, 0, fmt.Errorf("%w: %v of %d bytes, at least %d", ErrMalformed, t, size-1, minBody[t])
	}
	end := 4 + int(size)
	if len(buf) < end {
		return Frame{}, 0, nil
	}
	b := buf[HeaderLen:end:end]
	f.Type = t
	var ok bool
	switch t {
	case TypeHello:
		f.From, f.ClusterID = u64(b), u64(b[8:])
		f.Addr, b, ok = str(b[16:])
	case TypeRaft:
		f.Msg, b, ok = b, nil, true
	case TypeForward:
		f.Session, f.Client, f.Kind, f.Level, f.DB = u64(b), u64(b[8:]), b[16], b[17], b[18]
		f.Timeout, f.TimeoutFlag = binary.BigEndian.Uint16(b[19:]), binary.BigEndian.Uint16(b[21:])
		f.Data, b, ok = b[forwardFixed:], nil, true
		if f.Kind&KindUser != 0 {
			f.Kind &^= KindUser
			if f.User, f.Data, ok = str(f.Data); ok && len(f.User) == 0 {
				return Frame{}, 0, fmt.Errorf("%w: Forward with an empty user name", ErrMalformed)
			}
		}
		switch {
		case !ok:
		case f.Kind != KindText && f.Kind != KindBinary && f.Kind != KindSlock:
			return Frame{}, 0, fmt.Errorf("%w: Forward of kind %d", ErrMalformed, f.Kind)
		case f.Level < LevelOne || f.Level > LevelAll:
			return Frame{}, 0, fmt.Errorf("%w: Forward at level %d", ErrMalformed, f.Level)
		}
	case TypeReply:
		f.Session = u64(b)
		f.Data, b, ok = b[replyFixed:], nil, true
	case TypeClose:
		f.Session, f.Why = u64(b), b[8]
		b, ok = b[closeFixed:], true
	case TypeJoin:
		f.ID = u64(b)
		f.Addr, b, ok = str(b[8:])
	case TypeChallenge, TypeProof:
		f.Auth, b, ok = b[:AuthLen:AuthLen], b[AuthLen:], true
	case TypeJoinReply:
		if b[0] > 1 {
			return Frame{}, 0, fmt.Errorf("%w: JoinReply with OK %d", ErrMalformed, b[0])
		}
		f.OK, f.LeaderID = b[0] == 1, u64(b[1:])
		if f.LeaderAddr, b, ok = str(b[9:]); ok {
			f.Err, b, ok = str(b)
		}
	}
	switch {
	case !ok:
		return Frame{}, 0, fmt.Errorf("%w: %v: a string runs past the end of the frame", ErrMalformed, t)
	case len(b) != 0:
		return Frame{}, 0, fmt.Errorf("%w: %v: %d bytes after the last field", ErrMalformed, t, len(b))
	}
	return f, end, nil
}

func u64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// str splits a u16-length string off b; ok is false when b is too short.
func str(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := 2 + int(binary.BigEndian.Uint16(b))
	if len(b) < n {
		return nil, nil, false
	}
	return b[2:n:n], b[n:], true
}

// AppendHeader appends the header of a frame of type t whose body is size
// bytes; the caller appends the body. It lets a body be written in place
// (a raft message marshalled straight into dst, say).
func AppendHeader(dst []byte, t Type, size int) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+size))
	return append(dst, byte(t))
}

// AppendHello appends a Hello frame; clusterID 0 means none.
func AppendHello(dst []byte, from, clusterID uint64, addr string) []byte {
	addr = cut(addr)
	dst = AppendHeader(dst, TypeHello, helloFixed+len(addr))
	dst = binary.BigEndian.AppendUint64(dst, from)
	dst = binary.BigEndian.AppendUint64(dst, clusterID)
	return appendStr(dst, addr)
}

// AppendRaft appends a Raft frame carrying msg, a marshalled raftpb.Message.
func AppendRaft(dst, msg []byte) []byte {
	return append(AppendHeader(dst, TypeRaft, len(msg)), msg...)
}

// AppendForward appends a Forward frame without a user. kind and level should
// be one of the Kind and Level constants: Parse rejects others.
func AppendForward(dst []byte, session, client uint64, kind, level, db uint8, timeout, timeoutFlag uint16, data []byte) []byte {
	return AppendForwardAs(dst, session, client, kind, level, db, timeout, timeoutFlag, "", data)
}

// AppendForwardAs appends a Forward frame whose client runs as ACL user user
// (cut to MaxString bytes; "" sends none).
func AppendForwardAs(dst []byte, session, client uint64, kind, level, db uint8, timeout, timeoutFlag uint16, user string, data []byte) []byte {
	user = cut(user)
	size := forwardFixed + len(data)
	if user != "" {
		kind |= KindUser
		size += 2 + len(user)
	}
	dst = AppendHeader(dst, TypeForward, size)
	dst = binary.BigEndian.AppendUint64(dst, session)
	dst = binary.BigEndian.AppendUint64(dst, client)
	dst = append(dst, kind, level, db)
	dst = binary.BigEndian.AppendUint16(dst, timeout)
	dst = binary.BigEndian.AppendUint16(dst, timeoutFlag)
	if user != "" {
		dst = appendStr(dst, user)
	}
	return append(dst, data...)
}

// AppendReply appends a Reply frame.
func AppendReply(dst []byte, session uint64, data []byte) []byte {
	dst = AppendHeader(dst, TypeReply, replyFixed+len(data))
	dst = binary.BigEndian.AppendUint64(dst, session)
	return append(dst, data...)
}

// AppendClose appends a Close frame.
func AppendClose(dst []byte, session uint64, why uint8) []byte {
	dst = AppendHeader(dst, TypeClose, closeFixed)
	dst = binary.BigEndian.AppendUint64(dst, session)
	return append(dst, why)
}

// AppendJoin appends a Join frame.
func AppendJoin(dst []byte, id uint64, addr string) []byte {
	addr = cut(addr)
	dst = AppendHeader(dst, TypeJoin, joinFixed+len(addr))
	dst = binary.BigEndian.AppendUint64(dst, id)
	return appendStr(dst, addr)
}

// AppendAuth appends a Challenge or Proof frame carrying b (AuthLen bytes).
func AppendAuth(dst []byte, t Type, b *[AuthLen]byte) []byte {
	return append(AppendHeader(dst, t, AuthLen), b[:]...)
}

// AppendJoinReply appends a JoinReply frame.
func AppendJoinReply(dst []byte, ok bool, leaderID uint64, leaderAddr, err string) []byte {
	leaderAddr, err = cut(leaderAddr), cut(err)
	dst = AppendHeader(dst, TypeJoinReply, joinReplyFixed+len(leaderAddr)+len(err))
	b := byte(0)
	if ok {
		b = 1
	}
	dst = append(dst, b)
	dst = binary.BigEndian.AppendUint64(dst, leaderID)
	return appendStr(appendStr(dst, leaderAddr), err)
}

// cut shortens s to MaxString bytes.
func cut(s string) string { return s[:min(len(s), MaxString)] }

func appendStr(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}
