package aof

import (
	"encoding/binary"
	"errors"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/store"
)

// aofFormat is the append-only log's records.
type aofFormat struct{ ks store.KeyState }

func (f *aofFormat) Record(b []byte) (int, error) {
	p, n, err := next(b)
	if err == nil {
		err = f.check(p)
	}
	return n, err
}

// check decodes payload p, of any kind the log holds.
func (f *aofFormat) check(p []byte) error {
	if len(p) > 0 && p[0] == kindKeyspace {
		return decodeKeyspace(p, nil)
	}
	return decode(p, &f.ks)
}

func (f *aofFormat) Valid(b []byte) int {
	if !shaped(b) {
		return 0
	}
	n, err := f.Record(b)
	if err != nil {
		return 0
	}
	return n
}

func (f *aofFormat) PayloadOK(p []byte) bool {
	return len(p) >= minPayload && f.check(p) == nil
}

func (*aofFormat) MaxPayload() uint32                       { return MaxRecord }
func (*aofFormat) Short(err error) bool                     { return errors.Is(err, errShort) }
func (*aofFormat) Claims(p []byte, size uint32) logfile.Fit { return aofClaims(p, size) }
func (*aofFormat) FieldsLen(p []byte) (uint64, bool)        { return aofFieldsLen(p) }

// aofClaims tells what the first bytes p of an append-only log payload say of the length
// size: its kind must be known and a reservation 9 bytes long; a key state's value length
// and holder count, when p reaches them, give its length.
func aofClaims(p []byte, size uint32) logfile.Fit {
	if size < minPayload || size > MaxRecord {
		return logfile.Contradicts
	}
	if len(p) == 0 {
		return logfile.Allows
	}
	var fixed, hl uint64 // bytes before the value, one holder's
	switch {
	case p[0] == kindCeil && size == ceilLen, p[0] == kindFlush && size == flushLen:
		return logfile.Confirms
	case p[0] == kindKeyspace && size >= minKSRun:
		switch {
		case len(p) < ksHead:
			return logfile.Allows
		case uint64(binary.LittleEndian.Uint32(p[5:])) == uint64(size)-ksHead:
			return logfile.Confirms
		}
		return logfile.Contradicts
	case p[0] == kindState && size >= minState:
		fixed, hl = minState-2, holderLen
	case p[0] == kindState1 && size >= minState1:
		fixed, hl = minState1-2, holderLen1
	default:
		return logfile.Contradicts
	}
	if uint64(len(p)) < fixed {
		return logfile.Allows
	}
	rest := uint64(size) - fixed // the value, the holder count, the holders
	at := fixed
	if vl := binary.LittleEndian.Uint32(p[fixed-4:]); vl != noValue {
		if rest < uint64(vl)+2 {
			return logfile.Contradicts
		}
		rest -= uint64(vl)
		at += uint64(vl)
	}
	switch {
	case uint64(len(p)) < at+2:
		return logfile.Allows
	case rest == 2+uint64(binary.LittleEndian.Uint16(p[at:]))*hl:
		return logfile.Confirms
	}
	return logfile.Contradicts
}

// aofFieldsLen returns the payload length that the kind, the value length and the holder
// count at the start of p give, if p reaches them.
func aofFieldsLen(p []byte) (uint64, bool) {
	if len(p) == 0 {
		return 0, false
	}
	var fixed, hl uint64
	switch p[0] {
	case kindCeil:
		return ceilLen, true
	case kindFlush:
		return flushLen, true
	case kindKeyspace:
		if len(p) < ksHead {
			return 0, false
		}
		n := ksHead + uint64(binary.LittleEndian.Uint32(p[5:]))
		return n, n <= MaxRecord
	case kindState:
		fixed, hl = minState-2, holderLen
	case kindState1:
		fixed, hl = minState1-2, holderLen1
	default:
		return 0, false
	}
	if uint64(len(p)) < fixed {
		return 0, false
	}
	at := fixed
	if vl := binary.LittleEndian.Uint32(p[fixed-4:]); vl != noValue {
		at += uint64(vl)
	}
	if uint64(len(p)) < at+2 {
		return 0, false
	}
	n := at + 2 + uint64(binary.LittleEndian.Uint16(p[at:]))*hl
	return n, n <= MaxRecord
}
