package store

import "encoding/binary"

// This file holds slock's per-key value: the data record layout and the byte
// effects of each data command on a stored record (slock-protocol.md §2–§3).
// The functions here are pure; locks.go decides when a record is applied.
//
// A record is u32 N, then N bytes: byte 4 is stage<<6 | command, byte 5 the
// data flag, then, with flag 0x10, u16 P and P bytes of properties, then the
// value. Every record the store produces has byte 4 = 0x00.
//
// The layout constants below are the store's private copies of the wire
// values that proto/slock exports (the store imports only the standard
// library); a test in loop checks that the two agree.

// Data commands (bits 5–0 of byte 4 of a record).
const (
	dataSet      = 0
	dataUnset    = 1
	dataIncr     = 2
	dataAppend   = 3
	dataShift    = 4
	dataExecute  = 5
	dataPipeline = 6
	dataPush     = 7
	dataPop      = 8
)

// Stages (bits 7–6 of byte 4 of a record).
const (
	stageCurrent = 0 // apply as part of the command
	stageUnlock  = 1 // EXECUTE when the carrying holder is fully released by an Unlock
	stageTimeout = 2 // EXECUTE when a holder awaiting replication times out: never on a standalone server
	stageExpired = 3 // EXECUTE when the carrying holder expires
)

// Data flag bits (byte 5 of a record).
const (
	dataNumber      = 0x01
	dataArray       = 0x02
	dataProperty    = 0x10 // the property area is present
	dataFirstOrLast = 0x20 // PROCESS_FIRST_OR_LAST
)

// maxPipelineDepth bounds PIPELINE records nested in PIPELINE records; deeper
// ones are ignored (a PIPELINE of PIPELINEs only ever has its last element's
// effect, so real clients never nest).
const maxPipelineDepth = 32

// record is a parsed data record: views into its bytes.
type record struct {
	raw   []byte // the whole record, u32 N included
	stage uint8
	cmd   uint8
	flag  uint8
	props []byte // u16 P and the P bytes, or nil without flag 0x10
	value []byte
}

// parseRecord parses the record at the start of b, which may hold more bytes
// after it. It fails if b is shorter than the record claims, N < 2, or the
// property area overruns the record.
func parseRecord(b []byte) (r record, ok bool) {
	if len(b) < 6 {
		return r, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n < 2 || uint64(n) > uint64(len(b)-4) {
		return r, false
	}
	body := b[4 : 4+n]
	r.raw = b[:4+n]
	r.stage, r.cmd, r.flag = body[0]>>6, body[0]&0x3f, body[1]
	rest := body[2:]
	if r.flag&dataProperty != 0 {
		if len(rest) < 2 {
			return r, false
		}
		p := int(binary.LittleEndian.Uint16(rest))
		if p > len(rest)-2 {
			return r, false
		}
		r.props, rest = rest[:2+p], rest[2+p:]
	}
	r.value = rest
	return r, true
}

// effect is what applying a data command does to the stored value.
type effect uint8

const (
	unchanged effect = iota // the value stays as it was
	replaced                // the value is the new record
	unset                   // the key has no value any more
)

// appendRecord appends a record with byte 4 = 0x00, the given flag and
// property area, and a value made of the parts, to dst.
func appendRecord(dst []byte, flag uint8, props []byte, parts ...[]byte) []byte {
	n := 2 + len(props)
	for _, p := range parts {
		n += len(p)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, 0x00, flag)
	dst = append(dst, props...)
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// leUint reads up to size little-endian bytes of b as an unsigned number;
// missing high bytes count as zero.
func leUint(b []byte, size int) uint64 {
	if len(b) > size {
		b = b[:size]
	}
	var x uint64
	for i := len(b) - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x
}

// applyEffect computes the effect of the stage-0 SET, UNSET, INCR, APPEND,
// SHIFT, PUSH or POP record r on the stored value v (has: whether there is
// one), appending a replacement record to dst. Other commands are unchanged.
//
// Two reference defects are answered instead of copied: an INCR whose value
// is not exactly 8 bytes is ignored (the value is unchanged, the command
// itself still succeeds), and SHIFT past the end of the value empties it.
func applyEffect(dst []byte, has bool, v, r *record) ([]byte, effect) {
	switch r.cmd {
	case dataSet:
		dst = append(dst, r.raw...)
		dst[len(dst)-len(r.raw)+4] = 0x00
		return dst, replaced
	case dataUnset:
		if !has {
			return dst, unchanged
		}
		return dst, unset
	case dataIncr:
		if len(r.value) != 8 {
			return dst, unchanged
		}
		var base int64
		if has {
			base = int64(leUint(v.value, 8))
		}
		var num [8]byte
		binary.LittleEndian.PutUint64(num[:], uint64(base+int64(binary.LittleEndian.Uint64(r.value))))
		return appendRecord(dst, r.flag|dataNumber, r.props, num[:]), replaced
	case dataAppend:
		if !has {
			dst = append(dst, r.raw...)
			dst[len(dst)-len(r.raw)+4] = 0x00
			return dst, replaced
		}
		return appendRecord(dst, v.flag, v.props, v.value, r.value), replaced
	case dataShift:
		n := leUint(r.value, 4)
		if !has || n == 0 {
			return dst, unchanged
		}
		n = min(n, uint64(len(v.value)))
		return appendRecord(dst, v.flag, v.props, v.value[n:]), replaced
	case dataPush:
		var size [4]byte
		binary.LittleEndian.PutUint32(size[:], uint32(len(r.value)))
		if !has || v.flag&dataArray == 0 {
			return appendRecord(dst, r.flag&0xF8|dataArray, r.props, size[:], r.value), replaced
		}
		return appendRecord(dst, v.flag&0xF8|dataArray, v.props, v.value, size[:], r.value), replaced
	case dataPop:
		n := leUint(r.value, 4)
		if !has || v.flag&dataArray == 0 || n == 0 {
			return dst, unchanged
		}
		start := len(dst)
		dst = appendRecord(dst, v.flag, v.props)
		a := v.value
		for len(a) >= 4 {
			size := uint64(binary.LittleEndian.Uint32(a))
			if size > uint64(len(a)-4) {
				break
			}
			el := a[:4+size]
			a = a[4+size:]
			switch {
			case size == 0:
			case n > 0:
				n--
			default:
				dst = append(dst, el...)
			}
		}
		binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
		return dst, replaced
	}
	return dst, unchanged
}

// nextElement splits the first element record (u32 length and its bytes)
// off b, failing if its declared length overruns b.
func nextElement(b []byte) (el, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, b, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, b, false
	}
	return b[:4+n], b[4+n:], true
}

// LockData is a key's value as CALL listings show it.
type LockData struct {
	Record  []byte // the whole record (u32 N + N bytes), nil for no value
	Value   []byte // the value bytes, after the header and properties
	Command uint8  // the data command that produced it (bits 5–0 of byte 4: 0 SET, 2 INCR, ...)
	Flag    uint8  // the record's data flag
}
