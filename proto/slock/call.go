package slock

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// CALL methods (§8.3).
const (
	MethodListLock   = "LIST_LOCK"   // LockDBListLockRequest → LockDBListLockResponse
	MethodListLocked = "LIST_LOCKED" // LockDBListLockedRequest → LockDBListLockedResponse
	MethodListWait   = "LIST_WAIT"   // LockDBListWaitRequest → LockDBListWaitResponse
)

// CallError reports a CALL body that is not valid protobuf. The server
// answers ResultUnknownError with ErrTypeDecode.
type CallError struct {
	Offset int   // where in the body decoding failed
	Err    error // what protowire found wrong there
}

func (e *CallError) Error() string {
	return "slock: CALL body at offset " + itoa(uint64(e.Offset)) + ": " + e.Err.Error()
}

func (e *CallError) Unwrap() error { return e.Err }

// ListRequest is a decoded LockDBListLockRequest (DB only),
// LockDBListLockedRequest or LockDBListWaitRequest.
type ListRequest struct {
	DB uint32 // db_id; the server answers ErrTypeUnknownDB for one it does not have

	// Key is lock_key copied into 16 bytes from the left (clients send
	// exactly 16; a shorter one is zero-padded on the right, a longer one
	// cut).
	Key [16]byte
}

// ParseListLockRequest decodes a LIST_LOCK body (LockDBListLockRequest:
// 1 uint32 db_id). As in any proto3 message, unknown fields and known
// fields of another wire type are skipped, and of a scalar sent twice the
// last one wins.
func ParseListLockRequest(body []byte) (ListRequest, error) {
	return parseListRequest(body, false)
}

// ParseListKeyRequest decodes a LIST_LOCKED or LIST_WAIT body
// (LockDBListLockedRequest / LockDBListWaitRequest: 1 uint32 db_id,
// 2 bytes lock_key), with the rules of ParseListLockRequest.
func ParseListKeyRequest(body []byte) (ListRequest, error) {
	return parseListRequest(body, true)
}

func parseListRequest(body []byte, withKey bool) (r ListRequest, err error) {
	err = walk(body, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			r.DB = uint32(v)
		case num == 2 && typ == protowire.BytesType && withKey:
			r.Key = [16]byte{}
			copy(r.Key[:], b)
		}
		return nil
	})
	if err != nil {
		return ListRequest{}, err
	}
	return r, nil
}

// errFieldNumber reports a field number above protowire.MaxValidNumber,
// which protowire.ConsumeTag lets through but proto messages reject.
var errFieldNumber = errors.New("invalid field number")

// walk calls fn for each field of the message body in order: v is the
// value of a varint field, b the bytes of a length-delimited one (a view).
// Fields of other wire types are checked and skipped. An error from fn
// stops the walk; a *CallError's Offset, relative to b, is made relative
// to body.
func walk(body []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error) error {
	for off := 0; off < len(body); {
		num, typ, n := protowire.ConsumeTag(body[off:])
		if n < 0 {
			return &CallError{off, protowire.ParseError(n)}
		}
		if !num.IsValid() {
			return &CallError{off, errFieldNumber}
		}
		at := off
		off += n
		var v uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(body[off:])
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(body[off:])
		default:
			n = protowire.ConsumeFieldValue(num, typ, body[off:])
		}
		if n < 0 {
			return &CallError{at, protowire.ParseError(n)}
		}
		if typ == protowire.VarintType || typ == protowire.BytesType {
			if err := fn(num, typ, v, b); err != nil {
				if e, ok := err.(*CallError); ok {
					e.Offset += off + n - len(b)
				}
				return err
			}
		}
		off += n
	}
	return nil
}

// AppendListRequest appends a LIST_LOCK body (key nil) or a LIST_LOCKED /
// LIST_WAIT body for key; the client side of ParseListLockRequest and
// ParseListKeyRequest.
func AppendListRequest(dst []byte, db uint32, key []byte) []byte {
	dst = appendUint(dst, 1, uint64(db))
	return appendBytes(dst, 2, key)
}

// LockData is a LockDBLockData: a key's value without its record header.
type LockData struct {
	Value []byte // field 1, data
	Cmd   uint32 // field 2, commandType: the data command that produced it
	Flag  uint32 // field 3, data_flag
}

// LockData returns the LockDBLockData of the value d is.
func (d *Data) LockData() LockData {
	return LockData{Value: d.Value, Cmd: uint32(d.Cmd), Flag: uint32(d.Flag)}
}

// ListLock is one LockDBLock of a LIST_LOCK reply.
type ListLock struct {
	Key         [16]byte  // field 1, lock_key
	LockedCount uint32    // field 2, locked_count: levels held on the key
	Data        *LockData // field 3, lock_data; nil for none
}

// Command is a LockDBLockCommand: the fields of the frame that took a lock
// or is waiting.
type Command struct {
	RequestID   [16]byte // field 1
	Flag        uint8    // field 2
	LockID      [16]byte // field 3
	Key         [16]byte // field 4
	TimeoutFlag uint16   // field 5
	Timeout     uint16   // field 6
	ExpriedFlag uint16   // field 7
	Expried     uint16   // field 8
	Count       uint16   // field 9
	Rcount      uint8    // field 10
}

// Locked is a LockDBLockLocked: one holder of a key. Times are Unix
// seconds; ExpriedTime of a never-expiring lock is 0x7fffffffffffffff.
type Locked struct {
	LockID      [16]byte // field 1
	StartTime   uint64   // field 2
	TimeoutTime uint64   // field 3
	ExpriedTime uint64   // field 4
	LockedCount uint32   // field 5: this holder's levels
	AofTime     uint32   // field 6
	IsTimeouted bool     // field 7
	IsExpried   bool     // field 8
	IsAof       bool     // field 9
	IsLongTime  bool     // field 10
	Command     Command  // field 11
}

// Wait is a LockDBLockWait: one queued request on a key.
type Wait struct {
	LockID      [16]byte // field 1
	StartTime   uint64   // field 2
	TimeoutTime uint64   // field 3
	IsLongTime  bool     // field 4
	Command     Command  // field 5
}

// ListLocked is a LockDBListLockedResponse.
type ListLocked struct {
	Key         [16]byte  // field 1, lock_key
	LockedCount uint32    // field 2: levels on the key
	Locks       []Locked  // field 3, holders, first holder first
	Data        *LockData // field 4, lock_data; nil for none
}

// ListWait is a LockDBListWaitResponse.
type ListWait struct {
	Key         [16]byte  // field 1, lock_key
	LockedCount uint32    // field 2: levels on the key
	Waits       []Wait    // field 3, in queue order
	Data        *LockData // field 4, lock_data; nil for none
}

// The encoders follow proto3: fields are written in field-number order and
// scalar fields at their zero value, empty bytes and nil messages are left
// out; repeated and always-present messages are written even when empty.

// AppendListLockResponse appends a LockDBListLockResponse (field 1,
// repeated LockDBLock) listing locks in order.
func AppendListLockResponse(dst []byte, locks []ListLock) []byte {
	for i := range locks {
		l := &locks[i]
		dst = protowire.AppendTag(dst, 1, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(l.size()))
		dst = appendBytes(dst, 1, l.Key[:])
		dst = appendUint(dst, 2, uint64(l.LockedCount))
		dst = appendData(dst, 3, l.Data)
	}
	return dst
}

// AppendListLockedResponse appends r as a LockDBListLockedResponse.
func AppendListLockedResponse(dst []byte, r *ListLocked) []byte {
	dst = appendBytes(dst, 1, r.Key[:])
	dst = appendUint(dst, 2, uint64(r.LockedCount))
	for i := range r.Locks {
		l := &r.Locks[i]
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(l.size()))
		dst = appendBytes(dst, 1, l.LockID[:])
		dst = appendUint(dst, 2, l.StartTime)
		dst = appendUint(dst, 3, l.TimeoutTime)
		dst = appendUint(dst, 4, l.ExpriedTime)
		dst = appendUint(dst, 5, uint64(l.LockedCount))
		dst = appendUint(dst, 6, uint64(l.AofTime))
		dst = appendBool(dst, 7, l.IsTimeouted)
		dst = appendBool(dst, 8, l.IsExpried)
		dst = appendBool(dst, 9, l.IsAof)
		dst = appendBool(dst, 10, l.IsLongTime)
		dst = appendCommand(dst, 11, &l.Command)
	}
	return appendData(dst, 4, r.Data)
}

// AppendListWaitResponse appends r as a LockDBListWaitResponse.
func AppendListWaitResponse(dst []byte, r *ListWait) []byte {
	dst = appendBytes(dst, 1, r.Key[:])
	dst = appendUint(dst, 2, uint64(r.LockedCount))
	for i := range r.Waits {
		w := &r.Waits[i]
		dst = protowire.AppendTag(dst, 3, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(w.size()))
		dst = appendBytes(dst, 1, w.LockID[:])
		dst = appendUint(dst, 2, w.StartTime)
		dst = appendUint(dst, 3, w.TimeoutTime)
		dst = appendBool(dst, 4, w.IsLongTime)
		dst = appendCommand(dst, 5, &w.Command)
	}
	return appendData(dst, 4, r.Data)
}

func appendData(dst []byte, num protowire.Number, d *LockData) []byte {
	if d == nil {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(d.size()))
	dst = appendBytes(dst, 1, d.Value)
	dst = appendUint(dst, 2, uint64(d.Cmd))
	return appendUint(dst, 3, uint64(d.Flag))
}

func appendCommand(dst []byte, num protowire.Number, c *Command) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	dst = protowire.AppendVarint(dst, uint64(c.size()))
	dst = appendBytes(dst, 1, c.RequestID[:])
	dst = appendUint(dst, 2, uint64(c.Flag))
	dst = appendBytes(dst, 3, c.LockID[:])
	dst = appendBytes(dst, 4, c.Key[:])
	dst = appendUint(dst, 5, uint64(c.TimeoutFlag))
	dst = appendUint(dst, 6, uint64(c.Timeout))
	dst = appendUint(dst, 7, uint64(c.ExpriedFlag))
	dst = appendUint(dst, 8, uint64(c.Expried))
	dst = appendUint(dst, 9, uint64(c.Count))
	return appendUint(dst, 10, uint64(c.Rcount))
}

// appendUint appends a varint field unless v is 0.
func appendUint(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

func appendBool(dst []byte, num protowire.Number, v bool) []byte {
	return appendUint(dst, num, protowire.EncodeBool(v))
}

// appendBytes appends a bytes field unless v is empty.
func appendBytes(dst []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, v)
}

// Sizes of the fields appendUint, appendBool, appendBytes and the message
// appenders write, tag included.

func sizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeBool(num protowire.Number, v bool) int {
	return sizeUint(num, protowire.EncodeBool(v))
}

func sizeBytes(num protowire.Number, n int) int {
	if n == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

func (d *LockData) size() int {
	return sizeBytes(1, len(d.Value)) + sizeUint(2, uint64(d.Cmd)) + sizeUint(3, uint64(d.Flag))
}

func sizeData(num protowire.Number, d *LockData) int {
	if d == nil {
		return 0
	}
	return sizeMessage(num, d.size())
}

func (l *ListLock) size() int {
	return sizeBytes(1, 16) + sizeUint(2, uint64(l.LockedCount)) + sizeData(3, l.Data)
}

func (c *Command) size() int {
	return sizeBytes(1, 16) + sizeUint(2, uint64(c.Flag)) + sizeBytes(3, 16) + sizeBytes(4, 16) +
		sizeUint(5, uint64(c.TimeoutFlag)) + sizeUint(6, uint64(c.Timeout)) +
		sizeUint(7, uint64(c.ExpriedFlag)) + sizeUint(8, uint64(c.Expried)) +
		sizeUint(9, uint64(c.Count)) + sizeUint(10, uint64(c.Rcount))
}

func (l *Locked) size() int {
	return sizeBytes(1, 16) + sizeUint(2, l.StartTime) + sizeUint(3, l.TimeoutTime) +
		sizeUint(4, l.ExpriedTime) + sizeUint(5, uint64(l.LockedCount)) + sizeUint(6, uint64(l.AofTime)) +
		sizeBool(7, l.IsTimeouted) + sizeBool(8, l.IsExpried) + sizeBool(9, l.IsAof) +
		sizeBool(10, l.IsLongTime) + sizeMessage(11, l.Command.size())
}

func (w *Wait) size() int {
	return sizeBytes(1, 16) + sizeUint(2, w.StartTime) + sizeUint(3, w.TimeoutTime) +
		sizeBool(4, w.IsLongTime) + sizeMessage(5, w.Command.size())
}

// The client side of the CALL bodies: decoders for the three replies, with
// the proto3 rules of ParseListLockRequest. They allocate the slices and
// messages they return; byte fields are views into body, but for ids and
// keys, which are copied into 16 bytes from the left.

// ParseListLockResponse decodes a LockDBListLockResponse.
func ParseListLockResponse(body []byte) ([]ListLock, error) {
	var locks []ListLock
	err := walk(body, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		var l ListLock
		err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				l.Key = id16(b)
			case num == 2 && typ == protowire.VarintType:
				l.LockedCount = uint32(v)
			case num == 3 && typ == protowire.BytesType:
				return parseData(b, &l.Data)
			}
			return nil
		})
		locks = append(locks, l)
		return err
	})
	return locks, err
}

// ParseListLockedResponse decodes a LockDBListLockedResponse.
func ParseListLockedResponse(body []byte) (*ListLocked, error) {
	r := new(ListLocked)
	err := parseKeyListing(body, &r.Key, &r.LockedCount, &r.Data, func(b []byte) error {
		var l Locked
		err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
			if typ == protowire.BytesType {
				switch num {
				case 1:
					l.LockID = id16(b)
				case 11:
					return parseCommand(b, &l.Command)
				}
				return nil
			}
			switch num {
			case 2:
				l.StartTime = v
			case 3:
				l.TimeoutTime = v
			case 4:
				l.ExpriedTime = v
			case 5:
				l.LockedCount = uint32(v)
			case 6:
				l.AofTime = uint32(v)
			case 7:
				l.IsTimeouted = v != 0
			case 8:
				l.IsExpried = v != 0
			case 9:
				l.IsAof = v != 0
			case 10:
				l.IsLongTime = v != 0
			}
			return nil
		})
		r.Locks = append(r.Locks, l)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ParseListWaitResponse decodes a LockDBListWaitResponse.
func ParseListWaitResponse(body []byte) (*ListWait, error) {
	r := new(ListWait)
	err := parseKeyListing(body, &r.Key, &r.LockedCount, &r.Data, func(b []byte) error {
		var w Wait
		err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
			if typ == protowire.BytesType {
				switch num {
				case 1:
					w.LockID = id16(b)
				case 5:
					return parseCommand(b, &w.Command)
				}
				return nil
			}
			switch num {
			case 2:
				w.StartTime = v
			case 3:
				w.TimeoutTime = v
			case 4:
				w.IsLongTime = v != 0
			}
			return nil
		})
		r.Waits = append(r.Waits, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// parseKeyListing decodes the shape LockDBListLockedResponse and LockDBListWaitResponse
// share: 1 lock_key, 2 locked_count, 3 repeated element (each passed to elem), 4 lock_data.
func parseKeyListing(body []byte, key *[16]byte, count *uint32, data **LockData, elem func([]byte) error) error {
	return walk(body, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			*key = id16(b)
		case num == 2 && typ == protowire.VarintType:
			*count = uint32(v)
		case num == 3 && typ == protowire.BytesType:
			return elem(b)
		case num == 4 && typ == protowire.BytesType:
			return parseData(b, data)
		}
		return nil
	})
}

// parseData decodes a LockDBLockData into a new *d.
func parseData(b []byte, d **LockData) error {
	ld := new(LockData)
	*d = ld
	return walk(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			ld.Value = b[:len(b):len(b)]
		case num == 2 && typ == protowire.VarintType:
			ld.Cmd = uint32(v)
		case num == 3 && typ == protowire.VarintType:
			ld.Flag = uint32(v)
		}
		return nil
	})
}

// parseCommand decodes a LockDBLockCommand into *c. Numbers are cut to the
// frame's field widths.
func parseCommand(b []byte, c *Command) error {
	*c = Command{}
	return walk(b, func(num protowire.Number, typ protowire.Type, v uint64, b []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case 1:
				c.RequestID = id16(b)
			case 3:
				c.LockID = id16(b)
			case 4:
				c.Key = id16(b)
			}
			return nil
		}
		switch num {
		case 2:
			c.Flag = uint8(v)
		case 5:
			c.TimeoutFlag = uint16(v)
		case 6:
			c.Timeout = uint16(v)
		case 7:
			c.ExpriedFlag = uint16(v)
		case 8:
			c.Expried = uint16(v)
		case 9:
			c.Count = uint16(v)
		case 10:
			c.Rcount = uint8(v)
		}
		return nil
	})
}

// id16 copies b into 16 bytes from the left.
func id16(b []byte) (id [16]byte) {
	copy(id[:], b)
	return id
}
