package counter

import (
	"encoding/binary"
	"strconv"
)

// AppendHeader appends a reply header (magic 0x91, Reserved 0) to dst. The
// caller appends exactly bodyLen body bytes after it.
func AppendHeader(dst []byte, op Opcode, st Status, bodyLen, opaque uint32) []byte {
	dst = append(dst, MagicResponse, byte(op), byte(st), 0)
	dst = binary.BigEndian.AppendUint32(dst, bodyLen)
	return binary.BigEndian.AppendUint32(dst, opaque)
}

// AppendOK appends a success reply with an empty body (Noop, Release, the
// end of a Dump).
func AppendOK(dst []byte, op Opcode, opaque uint32) []byte {
	return AppendHeader(dst, op, StatusOK, 0, opaque)
}

// AppendError appends a reply with status st whose body is st.Message().
func AppendError(dst []byte, op Opcode, st Status, opaque uint32) []byte {
	msg := st.Message()
	dst = AppendHeader(dst, op, st, uint32(len(msg)), opaque)
	return append(dst, msg...)
}

// AppendUint32 appends a success reply whose body is v (Get, Acquire).
func AppendUint32(dst []byte, op Opcode, opaque, v uint32) []byte {
	dst = AppendHeader(dst, op, StatusOK, 4, opaque)
	return binary.BigEndian.AppendUint32(dst, v)
}

// AppendDumpEntry appends one Dump reply (opcode 0x11, status 0) whose body
// is u32 current, u32 max, u16 NameLen, Name. It panics if name is longer
// than MaxNameLen.
func AppendDumpEntry(dst []byte, opaque, current, max uint32, name []byte) []byte {
	checkName(name)
	dst = AppendHeader(dst, OpDump, StatusOK, uint32(10+len(name)), opaque)
	dst = binary.BigEndian.AppendUint32(dst, current)
	dst = binary.BigEndian.AppendUint32(dst, max)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	return append(dst, name...)
}

// DumpAcquired, as the whole body of a Dump request, asks tallyd for entries that end
// with each counter's granted Acquires. yrmcds skips a Dump's body, as this package does
// any other, and answers plain entries: ParseDumpEntry reads both.
const DumpAcquired = 0x01

// AppendDumpEntryAcquired appends one entry of an extended Dump (a request with the
// body DumpAcquired): AppendDumpEntry's body followed by u64 acquired, the Acquires the
// counter has granted since it was created. It panics if name is longer than MaxNameLen.
func AppendDumpEntryAcquired(dst []byte, opaque, current, max uint32, name []byte, acquired uint64) []byte {
	checkName(name)
	dst = AppendHeader(dst, OpDump, StatusOK, uint32(18+len(name)), opaque)
	dst = binary.BigEndian.AppendUint32(dst, current)
	dst = binary.BigEndian.AppendUint32(dst, max)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
	dst = append(dst, name...)
	return binary.BigEndian.AppendUint64(dst, acquired)
}

// Stat is one item of a Stats reply.
type Stat struct {
	Name  string
	Value uint64
}

// AppendStats appends one Stats reply (opcode 0x10, status 0) whose body
// lists stats in the order given, each as u16 NameLen, u16 ValueLen, Name,
// Value, with Value in decimal ASCII. It panics if a name is longer than
// MaxNameLen.
func AppendStats(dst []byte, opaque uint32, stats []Stat) []byte {
	h := len(dst)
	dst = AppendHeader(dst, OpStats, StatusOK, 0, opaque)
	for _, s := range stats {
		dst = appendStat(dst, s.Name, s.Value)
	}
	binary.BigEndian.PutUint32(dst[h+4:], uint32(len(dst)-h-HeaderLen))
	return dst
}

// appendStat appends one Stats item. It panics if name is longer than
// MaxNameLen.
func appendStat(dst []byte, name string, value uint64) []byte {
	if len(name) > MaxNameLen {
		panic("counter: stat name length " + itoa(uint64(len(name))) + " exceeds 65535")
	}
	p := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = append(dst, name...)
	v := len(dst)
	dst = strconv.AppendUint(dst, value, 10)
	binary.BigEndian.PutUint16(dst[p:], uint16(len(name)))
	binary.BigEndian.PutUint16(dst[p+2:], uint16(len(dst)-v))
	return dst
}

func checkName(name []byte) {
	if len(name) > MaxNameLen {
		panic("counter: name length " + itoa(uint64(len(name))) + " exceeds 65535")
	}
}
