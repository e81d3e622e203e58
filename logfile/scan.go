package logfile

import (
	"encoding/binary"
	"hash/crc32"
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

// Format is what the scanner needs to know of one kind of log.
type Format interface {
	// Record checks the record at the start of b and returns its total length; short
	// says b ends inside it, another error that it is bad.
	Record(b []byte) (n int, err error)
	// Valid returns the length of the valid record at the start of b, 0 if there is none;
	// it tests cheaply before it checksums (it runs at every offset of a damaged stretch).
	Valid(b []byte) int
	// PayloadOK reports whether p, a payload whose checksum matched, is a valid payload.
	PayloadOK(p []byte) bool
	// Claims tells whether the fields of p, the first bytes of a payload (all of it or as
	// many as the file has), contradict the length size its header gives, allow it, or
	// confirm it (they give that length themselves).
	Claims(p []byte, size uint32) Fit
	// FieldsLen returns the payload length that the fields of p, the first bytes of a
	// payload, give; false when p is too short to tell or the kind does not say.
	FieldsLen(p []byte) (uint64, bool)
	// MaxPayload is the largest payload a record may have.
	MaxPayload() uint32
	// Short reports whether err says the record runs past the end of the bytes.
	Short(err error) bool
}

// Fit is what a record's fields say of its length.
type Fit uint8

// What a record's fields say of its length.
const (
	Contradicts Fit = iota
	Allows          // the fields do not say, or the bytes do not reach those that say
	Confirms
)

// damage is what examine found at a bad record.
type damage struct {
	end      int  // where valid records resume: a valid record's start, or the end of the file
	repaired bool // [0, end) is the record, whole but for its length field
	torn     bool // the file ends inside the record
}

// examine tells what the bad record at the start of b is; b runs to the end of the file.
func examine(f Format, b []byte) damage {
	if len(b) < RecHead {
		return damage{end: len(b), torn: true}
	}
	size := binary.LittleEndian.Uint32(b)
	inRange := size <= f.MaxPayload()
	var torn, whole bool // torn: the file ends inside it, and its fields allow that
	if inRange {
		whole = uint64(len(b)) >= RecHead+uint64(size)
		fits := f.Claims(b[RecHead:min(uint64(len(b)), RecHead+uint64(size))], size)
		if fits == Confirms && whole {
			return damage{end: RecHead + int(size)}
		}
		torn = fits != Contradicts && !whole
	}
	// The length may be what was damaged: look for the record's true end, where its payload
	// matches its checksum, at the places where a valid record starts (all of them within a
	// record the file ends inside; up to the first one otherwise), at the end of the file,
	// and at the lengths one flipped bit away from the one it gives.
	want := binary.LittleEndian.Uint32(b[4:])
	ends := func(j int) bool {
		return j > RecHead && j-RecHead <= int(f.MaxPayload()) && f.PayloadOK(b[RecHead:j])
	}
	crc, summed, first := uint32(0), RecHead, -1
	for i := 1; i < len(b); i++ {
		if f.Valid(b[i:]) == 0 {
			continue
		}
		if i > RecHead {
			crc = crc32.Update(crc, Castagnoli, b[summed:i])
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
		tries = append(tries, RecHead+uint64(size^1<<k))
	}
	for _, j := range tries {
		if j <= uint64(len(b)) && ends(int(j)) && crc32.Checksum(b[RecHead:j], Castagnoli) == want {
			return damage{end: int(j), repaired: true}
		}
	}
	// The payload is damaged (or more than the length). With one field damaged, the length
	// is then right, and a length that leads exactly to a valid record, to the end of the
	// file or to a torn record is taken as right: what lies before is the record's own bytes.
	switch {
	case torn:
		return damage{end: len(b), torn: true}
	case whole && leads(f, b[RecHead+int(size):]):
		return damage{end: RecHead + int(size)}
	}
	// The length is damaged too, or instead: the fields may still say where the record ends.
	if n, ok := f.FieldsLen(b[RecHead:]); ok && n > 0 && uint64(RecHead)+n <= uint64(len(b)) && leads(f, b[RecHead+n:]) {
		return damage{end: RecHead + int(n)}
	}
	if first >= 0 {
		return damage{end: first}
	}
	return damage{end: len(b), torn: inRange && !whole}
}

// leads reports whether b, the bytes after a record, start with a valid record, with what
// frames one (a length its fields agree with, whole or cut off by the end of the file,
// whatever its checksum), or with nothing (or a header cut off).
func leads(f Format, b []byte) bool {
	if len(b) < RecHead || f.Valid(b) > 0 {
		return true
	}
	size := binary.LittleEndian.Uint32(b)
	return size <= f.MaxPayload() && f.Claims(b[RecHead:min(uint64(len(b)), RecHead+uint64(size))], size) != Contradicts
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

// Piece is a stretch of a log that a repair keeps: whole records, or (fixLen) one record
// whose length field must be set to its true length.
type Piece struct {
	Start, End int
	FixLen     bool
}

// Scan walks the records of b from off (b is a whole file, header included) and returns
// how many are valid (records whose length alone was damaged included), each damaged
// stretch, and the pieces a repair keeps.
func Scan(f Format, b []byte, off int) (records int, dmg []LogDamage, keep []Piece) {
	var at []int // records counted when each damage ends
	for off < len(b) {
		n, err := f.Record(b[off:])
		if err == nil {
			records++
			if len(keep) > 0 && keep[len(keep)-1].End == off && !keep[len(keep)-1].FixLen {
				keep[len(keep)-1].End += n
			} else {
				keep = append(keep, Piece{Start: off, End: off + n})
			}
			off += n
			continue
		}
		d := examine(f, b[off:])
		why := err.Error()
		switch {
		case d.repaired:
			records++
			keep = append(keep, Piece{Start: off, End: off + d.end, FixLen: true})
		case d.torn:
			why = "record cut off by the end of the file"
		case f.Short(err):
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

// Repair returns the records of b that keep holds after head: b without its damage.
func Repair(b []byte, head string, keep []Piece) []byte {
	out := []byte(head)
	for _, p := range keep {
		start := len(out)
		out = append(out, b[p.Start:p.End]...)
		if p.FixLen {
			binary.LittleEndian.PutUint32(out[start:], uint32(p.End-p.Start-RecHead))
		}
	}
	return out
}
