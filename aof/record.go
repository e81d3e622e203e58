// Package aof is tallyd's append-only log: the record format of persistent key
// state, replaying a log file, and the writer goroutine that owns the file.
package aof

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tallyd/tallyd/lockwire"
	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/store"
)

// A log file is Header, then records. A record is u32 n, u32 CRC-32C of the
// payload, then n bytes of payload, one of
//
//	u8 kind 2 (key state) | u8 db | 16 key | u64 fence | u32 value length
//	(0xFFFFFFFF: none) | value | u16 holders | holders
//	u8 kind 3 (fencing-token reservation) | u64 ceiling
//	u8 kind 4 (flush) | u8 db (255: every database) | 7 zero bytes
//	u8 kind 6 (keyspace records) | u32 count | u32 length | records (keyspace.go)
//	u8 kind 1 (key state of logs before fencing tokens) | u8 db | 16 key
//	| u32 value length | value | u16 holders | holders (without token and client)
//
// and each holder is 16 LockId | u8 flag | u8 levels | u8 rcount | u16 count
// | u16 timeout | u16 timeout flag | u16 expried | u16 expried flag | i64 start
// | i64 deadline (Unix ns; 0 never; negative: minus the Unix ms of an exact
// expiry, store.HolderState.ExpireAt, which logs before it never hold)
// | u64 fencing token | u64 client id (kind 2 only), all little-endian. A
// state with no holders says the key is gone. Records are whole key states,
// so the last one of a key is its state and replaying the same record twice
// changes nothing; a reservation only ever raises the ceiling. A flush drops
// every key of its database (store.KeyState.Flush) that the records before it
// left.

// Header starts every log file: a magic and the format version.
const Header = "TALLYAOF\x00\x00\x00\x01"

const (
	recHead    = logfile.RecHead
	kindState1 = 1
	kindState  = 2
	kindCeil   = 3
	kindFlush  = 4
	holderLen1 = 16 + 3 + 2*5 + 16
	holderLen  = holderLen1 + 16
	minState1  = 1 + 1 + 16 + 4 + 2
	minState   = minState1 + 8
	ceilLen    = 1 + 8
	flushLen   = 1 + 1 + 7 // the same length as a reservation, the shortest record
	minPayload = ceilLen   // the shortest record
	noValue    = 0xFFFFFFFF

	// MaxRecord is the largest payload a reader accepts: more is corruption.
	MaxRecord = 64 << 20
)

var castagnoli = logfile.Castagnoli

// AppendState appends s as one record.
func AppendState(dst []byte, s *store.KeyState) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, recHead)...)
	if s.Ceil != 0 {
		dst = binary.LittleEndian.AppendUint64(append(dst, kindCeil), s.Ceil)
		return seal(dst, start)
	}
	if s.Flush {
		dst = append(dst, kindFlush, s.DB, 0, 0, 0, 0, 0, 0, 0)
		return seal(dst, start)
	}
	dst = append(dst, kindState, s.DB)
	dst = append(dst, s.Key[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, s.Fence)
	if s.Value == nil {
		dst = binary.LittleEndian.AppendUint32(dst, noValue)
	} else {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Value)))
		dst = append(dst, s.Value...)
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.Holders)))
	for i := range s.Holders {
		h := &s.Holders[i]
		dst = append(dst, h.LockID[:]...)
		w := lockwire.OfHolder(h)
		dst = append(dst, w.Flag, h.Levels, h.Rcount)
		dst = binary.LittleEndian.AppendUint16(dst, h.Count)
		dst = binary.LittleEndian.AppendUint16(dst, w.Timeout)
		dst = binary.LittleEndian.AppendUint16(dst, w.TimeoutFlag)
		dst = binary.LittleEndian.AppendUint16(dst, w.Expried)
		dst = binary.LittleEndian.AppendUint16(dst, w.ExpriedFlag)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(h.Start))
		d := h.Deadline
		if h.ExpireAt > 0 {
			d = -h.ExpireAt
		}
		dst = binary.LittleEndian.AppendUint64(dst, uint64(d))
		dst = binary.LittleEndian.AppendUint64(dst, h.Token)
		dst = binary.LittleEndian.AppendUint64(dst, h.Client)
	}
	return seal(dst, start)
}

// seal fills in the header of the record appended to dst from start.
func seal(dst []byte, start int) []byte { return logfile.Seal(dst, start) }

// errShort is a record cut off by the end of the bytes.
var errShort = errors.New("record cut off")

// next checks the record at the start of b and returns its payload and total
// length. errShort means b ends inside it; other errors mean it is corrupt.
func next(b []byte) (payload []byte, n int, err error) {
	if len(b) < recHead {
		return nil, 0, errShort
	}
	size := binary.LittleEndian.Uint32(b)
	if size < minPayload || size > MaxRecord {
		return nil, 0, fmt.Errorf("record length %d out of range [%d, %d]", size, minPayload, MaxRecord)
	}
	if uint64(len(b)) < recHead+uint64(size) {
		return nil, 0, errShort
	}
	payload = b[recHead : recHead+size]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errors.New("checksum mismatch")
	}
	return payload, recHead + int(size), nil
}

// shaped reports whether b starts with what could be a whole record: a length in range,
// its payload all there, and the payload's kind and lengths consistent. It is the cheap
// test before the checksum when looking for records among arbitrary bytes.
func shaped(b []byte) bool {
	if len(b) < recHead+minPayload {
		return false
	}
	size := binary.LittleEndian.Uint32(b)
	if size < minPayload || size > MaxRecord || uint64(len(b)) < recHead+uint64(size) {
		return false
	}
	p := b[recHead : recHead+size]
	var rest uint64
	hl := uint64(holderLen)
	switch {
	case p[0] == kindCeil:
		return size == ceilLen
	case p[0] == kindFlush:
		return size == flushLen
	case p[0] == kindKeyspace:
		return size >= minKSRun && uint64(binary.LittleEndian.Uint32(p[5:])) == uint64(size)-ksHead
	case p[0] == kindState && size >= minState:
		rest = uint64(size) - 30
	case p[0] == kindState1 && size >= minState1:
		rest, hl = uint64(size)-22, holderLen1
	default:
		return false
	}
	if vl := binary.LittleEndian.Uint32(p[size-uint32(rest)-4:]); vl != noValue {
		if rest < uint64(vl)+2 {
			return false
		}
		rest -= uint64(vl)
	}
	nh := uint64(binary.LittleEndian.Uint16(p[size-uint32(rest):]))
	return rest == 2+nh*hl
}

// decode parses a checked payload into s (Value and Holders reuse s's memory;
// Value is a view into p).
func decode(p []byte, s *store.KeyState) error {
	s.Ceil, s.Fence, s.Flush = 0, 0, false
	hl, vl := holderLen, 0 // holder length, offset of the value length
	switch {
	case p[0] == kindCeil && len(p) == ceilLen:
		s.Ceil = binary.LittleEndian.Uint64(p[1:])
		if s.Ceil == 0 {
			return errors.New("a reservation of no tokens")
		}
		s.Value, s.Holders = nil, s.Holders[:0]
		return nil
	case p[0] == kindFlush && len(p) == flushLen:
		if p[1] > store.MaxLockDB && p[1] != store.AllDBs {
			return fmt.Errorf("a flush of database %d", p[1])
		}
		s.DB, s.Flush, s.Key = p[1], true, [16]byte{}
		s.Value, s.Holders = nil, s.Holders[:0]
		return nil
	case p[0] == kindState && len(p) >= minState:
		s.Fence = binary.LittleEndian.Uint64(p[18:])
		vl = 26
	case p[0] == kindState1 && len(p) >= minState1:
		hl, vl = holderLen1, 18
	case p[0] == kindCeil || p[0] == kindState || p[0] == kindState1 || p[0] == kindFlush:
		return fmt.Errorf("record of kind %d is %d bytes long", p[0], len(p))
	default:
		return fmt.Errorf("unknown record kind %d", p[0])
	}
	s.DB = p[1]
	copy(s.Key[:], p[2:18])
	n := binary.LittleEndian.Uint32(p[vl:])
	p = p[vl+4:]
	s.Value = nil
	if n != noValue {
		if uint64(len(p)) < uint64(n)+2 {
			return fmt.Errorf("value length %d overruns the record", n)
		}
		s.Value, p = p[:n], p[n:]
	}
	if len(p) < 2 {
		return errors.New("holder count missing")
	}
	nh := int(binary.LittleEndian.Uint16(p))
	p = p[2:]
	if len(p) != nh*hl {
		return fmt.Errorf("%d holders need %d bytes, the record has %d", nh, nh*hl, len(p))
	}
	s.Holders = s.Holders[:0]
	for range nh {
		var h store.HolderState
		copy(h.LockID[:], p)
		h.Levels, h.Rcount = p[17], p[18]
		h.Count = binary.LittleEndian.Uint16(p[19:])
		lockwire.SetHolder(&h, lockwire.Words{Flag: p[16], Timeout: binary.LittleEndian.Uint16(p[21:]),
			TimeoutFlag: binary.LittleEndian.Uint16(p[23:]), Expried: binary.LittleEndian.Uint16(p[25:]),
			ExpriedFlag: binary.LittleEndian.Uint16(p[27:])})
		h.Start = int64(binary.LittleEndian.Uint64(p[29:]))
		h.Deadline = int64(binary.LittleEndian.Uint64(p[37:]))
		if h.Deadline < 0 {
			h.ExpireAt, h.Deadline = -h.Deadline, 0
		}
		if hl == holderLen {
			h.Token = binary.LittleEndian.Uint64(p[45:])
			h.Client = binary.LittleEndian.Uint64(p[53:])
		}
		s.Holders = append(s.Holders, h)
		p = p[hl:]
	}
	return nil
}
