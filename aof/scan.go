package aof

import (
	"encoding/binary"
	"errors"
	"hash/crc32"

	"github.com/tallyd/tallyd/store"
)

// Damage. Both logs frame records as u32 length | u32 CRC-32C | payload, and both judge a
// bad record the same way (examine), so that a damaged log never loses a valid record
// without the operator's word (tallyd check-log --fix):
//
//   - A record whose own fields give its length (a key state's value length and holder
//     count, a fixed-size record's size), whole in the file but bad (its checksum, its
//     decoding): the damage is inside it, and the next record starts after it.
//   - Otherwise the length may be what was damaged. If the payload, up to a place where a
//     valid record starts (or to the end of the file, or to a length one flipped bit away),
//     matches the checksum the header carries, the record is whole but for its length:
//     check-log --fix keeps it with the right length.
//   - Else, the file ends inside a record whose fields do not contradict its length (as far
//     as the file goes): a torn tail, as a crash or a full disk leaves it. Valid-looking
//     records after its header are its own value's bytes.
//   - Else, a whole record whose length leads exactly to the end of the file or to what
//     frames a record (a valid one, or one whose fields allow its length): the damage
//     is inside it (its fields were damaged, not its length, or its checksum would have
//     matched), and the next record starts after it. The same for the length that its
//     fields give, when they give one.
//   - Else valid records resume at the first one found at any offset after its start.
//
// A bad record with a valid record after it, or whole but for its length, stops start-up
// (*CorruptError) and changes nothing; one with no valid record after it is a tail, cut
// off with a warning. One damaged field per record is always told apart this way: a
// damaged length disagrees with the fields or is given away by the checksum, and damaged
// fields leave the length right. Records inside values only ever count where the damage
// leaves no way to tell where the bad record ends.

// logFormat is what the scanner needs to know of one kind of log.
type logFormat interface {
	// record checks the record at the start of b and returns its total length; short
	// says b ends inside it, another error that it is bad.
	record(b []byte) (n int, err error)
	// valid returns the length of the valid record at the start of b, 0 if there is none;
	// it tests cheaply before it checksums (it runs at every offset of a damaged stretch).
	valid(b []byte) int
	// payloadOK reports whether p, a payload whose checksum matched, is a valid payload.
	payloadOK(p []byte) bool
	// claims tells whether the fields of p, the first bytes of a payload (all of it or as
	// many as the file has), contradict the length size its header gives, allow it, or
	// confirm it (they give that length themselves).
	claims(p []byte, size uint32) fit
	// fieldsLen returns the payload length that the fields of p, the first bytes of a
	// payload, give; false when p is too short to tell or the kind does not say.
	fieldsLen(p []byte) (uint64, bool)
	maxPayload() uint32
	// short reports whether err says the record runs past the end of the bytes.
	short(err error) bool
}

// fit is what a record's fields say of its length.
type fit uint8

const (
	contradicts fit = iota
	allows          // the fields do not say, or the bytes do not reach those that say
	confirms
)

// damage is what examine found at a bad record.
type damage struct {
	end      int  // where valid records resume: a valid record's start, or the end of the file
	repaired bool // [0, end) is the record, whole but for its length field
	torn     bool // the file ends inside the record
}

// examine tells what the bad record at the start of b is; b runs to the end of the file.
func examine(f logFormat, b []byte) damage {
	if len(b) < recHead {
		return damage{end: len(b), torn: true}
	}
	size := binary.LittleEndian.Uint32(b)
	inRange := size <= f.maxPayload()
	var torn, whole bool // torn: the file ends inside it, and its fields allow that
	if inRange {
		whole = uint64(len(b)) >= recHead+uint64(size)
		fits := f.claims(b[recHead:min(uint64(len(b)), recHead+uint64(size))], size)
		if fits == confirms && whole {
			return damage{end: recHead + int(size)}
		}
		torn = fits != contradicts && !whole
	}
	// The length may be what was damaged: look for the record's true end, where its payload
	// matches its checksum, at the places where a valid record starts (all of them within a
	// record the file ends inside; up to the first one otherwise), at the end of the file,
	// and at the lengths one flipped bit away from the one it gives.
	want := binary.LittleEndian.Uint32(b[4:])
	ends := func(j int) bool {
		return j > recHead && j-recHead <= int(f.maxPayload()) && f.payloadOK(b[recHead:j])
	}
	crc, summed, first := uint32(0), recHead, -1
	for i := 1; i < len(b); i++ {
		if f.valid(b[i:]) == 0 {
			continue
		}
		if i > recHead {
			crc = crc32.Update(crc, castagnoli, b[summed:i])
			summed = i
			if crc == want && ends(i) {
				return damage{end: i, repaired: true}
			}
		}
		if !torn {
			first = i
			break
		}
	}
	tries := []uint64{uint64(len(b))}
	for k := range 32 {
		tries = append(tries, recHead+uint64(size^1<<k))
	}
	for _, j := range tries {
		if j <= uint64(len(b)) && ends(int(j)) && crc32.Checksum(b[recHead:j], castagnoli) == want {
			return damage{end: int(j), repaired: true}
		}
	}
	// The payload is damaged (or more than the length). With one field damaged, the length
	// is then right, and a length that leads exactly to a valid record, to the end of the
	// file or to a torn record is taken as right: what lies before is the record's own bytes.
	switch {
	case torn:
		return damage{end: len(b), torn: true}
	case whole && leads(f, b[recHead+int(size):]):
		return damage{end: recHead + int(size)}
	}
	// The length is damaged too, or instead: the fields may still say where the record ends.
	if n, ok := f.fieldsLen(b[recHead:]); ok && n > 0 && uint64(recHead)+n <= uint64(len(b)) && leads(f, b[recHead+n:]) {
		return damage{end: recHead + int(n)}
	}
	if first >= 0 {
		return damage{end: first}
	}
	return damage{end: len(b), torn: inRange && !whole}
}

// leads reports whether b, the bytes after a record, start with a valid record, with what
// frames one (a length its fields agree with, whole or cut off by the end of the file,
// whatever its checksum), or with nothing (or a header cut off).
func leads(f logFormat, b []byte) bool {
	if len(b) < recHead || f.valid(b) > 0 {
		return true
	}
	size := binary.LittleEndian.Uint32(b)
	return size <= f.maxPayload() && f.claims(b[recHead:min(uint64(len(b)), recHead+uint64(size))], size) != contradicts
}

// LogDamage is one damaged stretch of a log, [Offset, End).
type LogDamage struct {
	Offset, End int64
	Why         string // what is wrong with the record at Offset
	// Repaired: [Offset, End) is one record, whole but for its length field (its payload
	// matches its checksum); --fix keeps it with the right length.
	Repaired bool
	// Torn: the stretch ends with a record the end of the file cuts off, as a crash or a
	// full disk leaves it.
	Torn  bool
	After int // valid records after End
}

// Tail reports whether d is a tail with no valid record after it: what start-up cuts off
// by itself.
func (d LogDamage) Tail() bool { return !d.Repaired && d.After == 0 }

// piece is a stretch of a log that a repair keeps: whole records, or (fixLen) one record
// whose length field must be set to its true length.
type piece struct {
	start, end int
	fixLen     bool
}

// scanLog walks the records of b from off (b is a whole file, header included) and returns
// how many are valid (records whose length alone was damaged included), each damaged
// stretch, and the pieces a repair keeps.
func scanLog(f logFormat, b []byte, off int) (records int, dmg []LogDamage, keep []piece) {
	var at []int // records counted when each damage ends
	for off < len(b) {
		n, err := f.record(b[off:])
		if err == nil {
			records++
			if len(keep) > 0 && keep[len(keep)-1].end == off && !keep[len(keep)-1].fixLen {
				keep[len(keep)-1].end += n
			} else {
				keep = append(keep, piece{start: off, end: off + n})
			}
			off += n
			continue
		}
		d := examine(f, b[off:])
		why := err.Error()
		switch {
		case d.repaired:
			records++
			keep = append(keep, piece{start: off, end: off + d.end, fixLen: true})
		case d.torn:
			why = "record cut off by the end of the file"
		case f.short(err):
			why = "its length runs past the end of the file"
		}
		if k := len(dmg) - 1; k >= 0 && dmg[k].End == int64(off) && !dmg[k].Repaired && !d.repaired {
			dmg[k].End, dmg[k].Torn = int64(off+d.end), d.torn // one stretch with the one before
		} else {
			dmg = append(dmg, LogDamage{Offset: int64(off), End: int64(off + d.end), Why: why, Repaired: d.repaired, Torn: d.torn})
			at = append(at, records)
		}
		off += d.end
	}
	for i := range dmg {
		dmg[i].After = records - at[i]
	}
	return records, dmg, keep
}

// repair returns the records of b that keep holds after head: b without its damage.
func repair(b []byte, head string, keep []piece) []byte {
	out := []byte(head)
	for _, p := range keep {
		start := len(out)
		out = append(out, b[p.start:p.end]...)
		if p.fixLen {
			binary.LittleEndian.PutUint32(out[start:], uint32(p.end-p.start-recHead))
		}
	}
	return out
}

// aofFormat is the append-only log's records.
type aofFormat struct{ ks store.KeyState }

func (f *aofFormat) record(b []byte) (int, error) {
	p, n, err := next(b)
	if err == nil {
		err = decode(p, &f.ks)
	}
	return n, err
}

func (f *aofFormat) valid(b []byte) int {
	if !shaped(b) {
		return 0
	}
	n, err := f.record(b)
	if err != nil {
		return 0
	}
	return n
}

func (f *aofFormat) payloadOK(p []byte) bool {
	return len(p) >= minPayload && decode(p, &f.ks) == nil
}

func (*aofFormat) maxPayload() uint32                { return MaxRecord }
func (*aofFormat) short(err error) bool              { return errors.Is(err, errShort) }
func (*aofFormat) claims(p []byte, size uint32) fit  { return aofClaims(p, size) }
func (*aofFormat) fieldsLen(p []byte) (uint64, bool) { return aofFieldsLen(p) }

// aofClaims tells what the first bytes p of an append-only log payload say of the length
// size: its kind must be known and a reservation 9 bytes long; a key state's value length
// and holder count, when p reaches them, give its length.
func aofClaims(p []byte, size uint32) fit {
	if size < minPayload || size > MaxRecord {
		return contradicts
	}
	if len(p) == 0 {
		return allows
	}
	var fixed, hl uint64 // bytes before the value, one holder's
	switch {
	case p[0] == kindCeil && size == ceilLen, p[0] == kindFlush && size == flushLen:
		return confirms
	case p[0] == kindState && size >= minState:
		fixed, hl = minState-2, holderLen
	case p[0] == kindState1 && size >= minState1:
		fixed, hl = minState1-2, holderLen1
	default:
		return contradicts
	}
	if uint64(len(p)) < fixed {
		return allows
	}
	rest := uint64(size) - fixed // the value, the holder count, the holders
	at := fixed
	if vl := binary.LittleEndian.Uint32(p[fixed-4:]); vl != noValue {
		if rest < uint64(vl)+2 {
			return contradicts
		}
		rest -= uint64(vl)
		at += uint64(vl)
	}
	switch {
	case uint64(len(p)) < at+2:
		return allows
	case rest == 2+uint64(binary.LittleEndian.Uint16(p[at:]))*hl:
		return confirms
	}
	return contradicts
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

// raftFormat is the raft log's records.
type raftFormat struct{}

func (raftFormat) record(b []byte) (int, error) {
	p, n, err := raftNext(b)
	if err == nil && p[0] == kindSnapshot {
		_, err = decodeSnap(p)
	}
	return n, err
}

func (f raftFormat) valid(b []byte) int {
	n, err := f.record(b)
	if err != nil {
		return 0
	}
	return n
}

func (raftFormat) payloadOK(p []byte) bool {
	if raftShaped(p) != nil {
		return false
	}
	if p[0] == kindSnapshot {
		if _, err := decodeSnap(p); err != nil {
			return false
		}
	}
	return true
}

func (raftFormat) maxPayload() uint32               { return MaxRaftRecord }
func (raftFormat) short(err error) bool             { return errors.Is(err, errRaftShort) }
func (raftFormat) claims(p []byte, size uint32) fit { return raftClaims(p, size) }

// fieldsLen: a hard state's length is fixed, a peer table's is in its fields; an entry's or
// a snapshot's data is not.
func (raftFormat) fieldsLen(p []byte) (uint64, bool) {
	if len(p) == 0 {
		return 0, false
	}
	switch p[0] {
	case kindHardState:
		return hsPayload, true
	case kindPeers:
		if len(p) < peersHead {
			return 0, false
		}
		n, at := binary.LittleEndian.Uint32(p[1:]), uint64(peersHead)
		for range n {
			if uint64(len(p)) < at+peerHead {
				return 0, false
			}
			at += peerHead + uint64(binary.LittleEndian.Uint16(p[at+8:]))
		}
		return at, at <= MaxRaftRecord
	}
	return 0, false
}

// raftClaims tells what the first bytes p of a raft log payload say of the length size: a
// hard state's length is fixed and a peer table's in its fields; an entry's or a
// snapshot's data is opaque, so any length past its head is allowed.
func raftClaims(p []byte, size uint32) fit {
	if size < 1 || size > MaxRaftRecord {
		return contradicts
	}
	if len(p) == 0 {
		return allows
	}
	ok := func(b bool) fit {
		if b {
			return allows
		}
		return contradicts
	}
	switch p[0] {
	case kindHardState:
		if size == hsPayload {
			return confirms
		}
	case kindEntry:
		return ok(size >= entryHead && (len(p) < 2 || p[1]&^entAllFields == 0 && (p[1]&entData != 0 || size == entryHead)))
	case kindSnapshot:
		return ok(size >= snapHead && (len(p) < snapHead || uint64(binary.LittleEndian.Uint32(p[17:])) <= uint64(size-snapHead)))
	case kindPeers:
		if size < peersHead {
			return contradicts
		}
		if len(p) < peersHead {
			return allows
		}
		n, rest := uint64(binary.LittleEndian.Uint32(p[1:])), uint64(size-peersHead)
		if n*peerHead > rest {
			return contradicts
		}
		q := p[peersHead:]
		for range n {
			if len(q) < peerHead {
				return allows
			}
			l := uint64(peerHead) + uint64(binary.LittleEndian.Uint16(q[8:]))
			if l > rest {
				return contradicts
			}
			rest -= l
			q = q[min(uint64(len(q)), l):]
		}
		if rest == 0 {
			return confirms
		}
	}
	return contradicts
}
