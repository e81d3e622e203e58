package slock

import "encoding/binary"

// Data commands: bits 5-0 of a data record's byte 4 (§2.1).
const (
	DataSet      = 0 // store the value
	DataUnset    = 1 // drop the value
	DataIncr     = 2 // add an i64 delta
	DataAppend   = 3 // append bytes
	DataShift    = 4 // drop u32 n bytes from the front
	DataExecute  = 5 // run an embedded Lock/Unlock frame
	DataPipeline = 6 // a sequence of records
	DataPush     = 7 // append one array element
	DataPop      = 8 // drop u32 n elements from the front
)

// Stages: bits 7-6 of a data record's byte 4 (§2.2); all but StageCurrent
// are for EXECUTE only.
const (
	StageCurrent = 0 // apply as part of this command
	StageUnlock  = 1 // run when the carrying holder is fully released
	StageTimeout = 2 // run if the carrying holder times out awaiting an ack
	StageExpried = 3 // run when the carrying holder expires
)

// Data flag bits: a data record's byte 5 (§2.3).
const (
	DataNumber      = 0x01 // the value is an i64
	DataArray       = 0x02 // the value is u32-length-prefixed elements
	DataKV          = 0x04 // the value is u32-length-prefixed key, value pairs
	DataProps       = 0x10 // a property area follows the flag byte
	DataFirstOrLast = 0x20 // apply only on first lock / last unlock
)

// PropKey is the property code of the human-readable key name the text
// commands attach.
const PropKey = 1

// Property is one entry of a data record's property area.
type Property struct {
	Code  uint8
	Value []byte // at most 65535 bytes
}

// Data is a parsed data record. Props and Value are views into the record.
type Data struct {
	Stage uint8 // bits 7-6 of byte 4
	Cmd   uint8 // bits 5-0 of byte 4
	Flag  uint8 // byte 5

	// Props is the property area (present iff Flag has DataProps): a
	// sequence of code u8, length u16, bytes. Walk it with NextProp.
	Props []byte

	Value []byte
}

// DataError reports a data record that does not have the §2 layout.
type DataError struct {
	Offset int    // where in the record the problem is
	Reason string // what is wrong there
}

func (e *DataError) Error() string {
	return "slock: data record at offset " + itoa(uint64(e.Offset)) + ": " + e.Reason
}

// ParseDataRecord splits rec, a whole data record (u32 N, then exactly N
// bytes), into its parts. N must be at least 2; with DataProps the
// property length P must fit in the record.
func ParseDataRecord(rec []byte) (Data, error) {
	if len(rec) < 4 {
		return Data{}, &DataError{0, "length needs 4 bytes, have " + itoa(uint64(len(rec)))}
	}
	n := binary.LittleEndian.Uint32(rec)
	if uint64(n) != uint64(len(rec)-4) {
		return Data{}, &DataError{0, "length " + itoa(uint64(n)) + " but " + itoa(uint64(len(rec)-4)) + " bytes follow"}
	}
	if n < MinData {
		return Data{}, &DataError{0, "length " + itoa(uint64(n)) + " is below 2"}
	}
	d := Data{Stage: rec[4] >> 6, Cmd: rec[4] & 0x3f, Flag: rec[5]}
	v := 6
	if d.Flag&DataProps != 0 {
		if len(rec) < 8 {
			return Data{}, &DataError{6, "property length needs 2 bytes, have " + itoa(uint64(len(rec)-6))}
		}
		p := int(binary.LittleEndian.Uint16(rec[6:]))
		if 8+p > len(rec) {
			return Data{}, &DataError{6, "property length " + itoa(uint64(p)) + " but " + itoa(uint64(len(rec)-8)) + " bytes follow"}
		}
		d.Props = rec[8 : 8+p : 8+p]
		v = 8 + p
	}
	d.Value = rec[v:len(rec):len(rec)]
	return d, nil
}

// AppendDataRecord appends a data record: N, the stage and command, flag,
// the property area if props is not empty or flag has DataProps (flag then
// gets DataProps), and value. It panics if a property value is longer than
// 65535 bytes, the property area longer than 65535, or the record 4 GiB or
// more.
func AppendDataRecord(dst []byte, cmd, stage, flag uint8, props []Property, value []byte) []byte {
	n := uint64(2 + len(value))
	p := 0
	if len(props) > 0 || flag&DataProps != 0 {
		flag |= DataProps
		for _, pr := range props {
			if len(pr.Value) > 0xffff {
				panic("slock: data record property " + itoa(uint64(pr.Code)) + " has " + itoa(uint64(len(pr.Value))) + " bytes, limit 65535")
			}
			p += 3 + len(pr.Value)
		}
		if p > 0xffff {
			panic("slock: data record property area of " + itoa(uint64(p)) + " bytes, limit 65535")
		}
		n += 2 + uint64(p)
	}
	if n > 1<<32-1 {
		panic("slock: data record of " + itoa(n) + " bytes")
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = append(dst, stage<<6|cmd&0x3f, flag)
	if flag&DataProps != 0 {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(p))
		for _, pr := range props {
			dst = append(dst, pr.Code)
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(pr.Value)))
			dst = append(dst, pr.Value...)
		}
	}
	return append(dst, value...)
}

// NextProp splits the first entry off a property area: its code and bytes
// (a view), and the entries after it. ok is false when props is empty or
// its first entry is truncated.
func NextProp(props []byte) (code uint8, val, rest []byte, ok bool) {
	if len(props) < 3 {
		return 0, nil, nil, false
	}
	l := 3 + int(binary.LittleEndian.Uint16(props[1:]))
	if l > len(props) {
		return 0, nil, nil, false
	}
	return props[0], props[3:l:l], props[l:], true
}

// Prop returns the bytes of the first property with the given code in a
// property area, or nil and false.
func Prop(props []byte, code uint8) ([]byte, bool) {
	for {
		c, v, rest, ok := NextProp(props)
		if !ok {
			return nil, false
		}
		if c == code {
			return v, true
		}
		props = rest
	}
}

// ValueKind is how the text protocol renders a value (§8.1).
type ValueKind uint8

// Value kinds.
const (
	KindString ValueKind = iota // a bulk string of the value bytes
	KindNumber                  // an integer: Number of the value
	KindArray                   // an array of the non-empty elements (NextElem)
	KindKV                      // an array k1, v1, k2, v2, ... (NextPair)
)

// DataKind says how to render a value whose data flag is flag: NUMBER
// wins over ARRAY, which wins over KV; no type bit is a string.
func DataKind(flag uint8) ValueKind {
	switch {
	case flag&DataNumber != 0:
		return KindNumber
	case flag&DataArray != 0:
		return KindArray
	case flag&DataKV != 0:
		return KindKV
	}
	return KindString
}

// Number reads the first up to 8 bytes of v as a little-endian i64,
// missing high bytes zero.
func Number(v []byte) int64 {
	var b [8]byte
	copy(b[:], v)
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// NextElem splits the first non-empty element off an ARRAY value (a
// sequence of u32 length, bytes): the element (a view) and the value after
// it. Zero-length elements are skipped: slock never counts them. ok is
// false when no element is left or the next one is truncated.
func NextElem(v []byte) (elem, rest []byte, ok bool) {
	for {
		if elem, v, ok = field(v); !ok || len(elem) > 0 {
			return elem, v, ok
		}
	}
}

// ArrayLen counts the elements NextElem yields from v.
func ArrayLen(v []byte) int {
	n := 0
	for _, rest, ok := NextElem(v); ok; _, rest, ok = NextElem(rest) {
		n++
	}
	return n
}

// NextPair splits the first pair off a KV value (a sequence of u32 klen,
// key, u32 vlen, value): key and value (views) and the value after the
// pair. ok is false when no whole pair is left.
func NextPair(v []byte) (key, val, rest []byte, ok bool) {
	key, r, ok := field(v)
	if !ok {
		return nil, nil, nil, false
	}
	val, r, ok = field(r)
	if !ok {
		return nil, nil, nil, false
	}
	return key, val, r, true
}

// KVLen counts the pairs NextPair yields from v.
func KVLen(v []byte) int {
	n := 0
	for _, _, rest, ok := NextPair(v); ok; _, _, rest, ok = NextPair(rest) {
		n++
	}
	return n
}

// field splits a u32-length-prefixed field off v.
func field(v []byte) (f, rest []byte, ok bool) {
	if len(v) < 4 {
		return nil, nil, false
	}
	l := uint64(binary.LittleEndian.Uint32(v))
	if 4+l > uint64(len(v)) {
		return nil, nil, false
	}
	end := 4 + int(l)
	return v[4:end:end], v[end:], true
}
