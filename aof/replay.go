package aof

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/tallyd/tallyd/store"
)

// CorruptError is a damaged record with valid records after it: the log cannot
// be replayed past it without losing them, so start-up stops.
type CorruptError struct {
	Path   string
	Offset int64
	Why    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("append-only log %s: corrupt record at offset %d (%s) with valid records after it; "+
		"the log is intact before that offset — truncate the file there (losing what follows) or restore it from a backup",
		e.Path, e.Offset, e.Why)
}

// Replayed says what Replay found.
type Replayed struct {
	Records   int   // records applied
	Size      int64 // bytes of the log kept
	Truncated int64 // bytes of a torn or corrupt tail cut off (0: none)
	TailWhy   string
}

// scanLimit is how far past a bad record Replay looks for a valid one to tell a
// damaged middle from a torn tail.
const scanLimit = 64 << 20

// Replay applies every record of the log at path, in order, to apply, and
// leaves the file ready to append to: a missing or empty file gets a header; a
// torn or corrupt tail (a bad record with no valid record after it) is cut off,
// and Replayed says how much. A bad record followed by valid ones is a
// *CorruptError; a file that is not a log is an error too.
func Replay(path string, apply func(*store.KeyState)) (Replayed, error) {
	var r Replayed
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return r, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	size := st.Size()
	if size < int64(len(Header)) {
		head := make([]byte, size)
		if _, err := io.ReadFull(f, head); err != nil {
			return r, err
		}
		if string(head) != Header[:size] {
			return r, fmt.Errorf("%s is not a tallyd append-only log (bad header)", path)
		}
		if err := f.Truncate(0); err != nil {
			return r, err
		}
		if _, err := f.WriteAt([]byte(Header), 0); err != nil {
			return r, err
		}
		if size > 0 {
			r.Truncated, r.TailWhy = size, "header cut off"
		}
		r.Size = int64(len(Header))
		return r, f.Sync()
	}
	br := bufio.NewReaderSize(f, 1<<20)
	head := make([]byte, len(Header))
	if _, err := io.ReadFull(br, head); err != nil {
		return r, err
	}
	if string(head) != Header {
		return r, fmt.Errorf("%s is not a tallyd append-only log (bad header %q)", path, head)
	}
	off := int64(len(Header))
	var ks store.KeyState
	buf := make([]byte, 0, 64<<10)
	for off < size {
		var hdr [recHead]byte
		n, _ := io.ReadFull(br, hdr[:])
		buf = append(buf[:0], hdr[:n]...)
		_, _, err := next(buf)
		if err == errShort && n == recHead {
			// The header is whole: read the payload it claims (bounded by the file).
			need := int64(recHead) + int64(uint32(hdr[0])|uint32(hdr[1])<<8|uint32(hdr[2])<<16|uint32(hdr[3])<<24)
			if need <= size-off {
				buf = append(buf, make([]byte, need-recHead)...)
				if _, rerr := io.ReadFull(br, buf[recHead:need]); rerr != nil {
					return r, rerr
				}
			}
		}
		p, used, err := next(buf)
		if err == nil {
			err = decode(p, &ks)
		}
		if err != nil {
			why := err.Error()
			if errors.Is(err, errShort) {
				why = "record cut off by the end of the file"
			}
			if at, ok := damagedMiddle(f, off, size, errors.Is(err, errShort)); ok {
				return r, &CorruptError{Path: path, Offset: off, Why: why + fmt.Sprintf("; next valid record at %d", at)}
			}
			if err := f.Truncate(off); err != nil {
				return r, err
			}
			r.Truncated, r.TailWhy = size-off, why
			r.Size = off
			return r, f.Sync()
		}
		apply(&ks)
		r.Records++
		off += int64(used)
	}
	r.Size = off
	return r, nil
}

// damagedMiddle tells a damaged record at off from a torn tail, and returns where the valid
// records after it start. Values can hold bytes that look like records, so a valid record
// somewhere after off proves nothing by itself; what counts is a run of valid records,
// each starting where the one before ends, that ends exactly at the end of the file (a
// torn tail has no such run after its start, unless a tear falls exactly behind a record
// inside a value).
//
// short says the record at off claims more bytes than the file has left: the file ends
// inside it, as a write cut off by a crash or a full disk leaves it. That is a torn tail,
// unless its length field was damaged instead: then the bytes from its payload up to the
// start of such a run are its true payload and match the checksum its header carries.
//
// Only scanLimit bytes after off are looked at; a run that reaches that far counts as
// reaching the end.
func damagedMiddle(f *os.File, off, size int64, short bool) (int64, bool) {
	end := min(size, off+scanLimit)
	b := make([]byte, end-off)
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		return 0, false
	}
	window := end < size
	memo := make(map[int]bool)
	var ks store.KeyState
	// chains reports whether valid records follow each other from i to the end of b.
	var chains func(i int) bool
	chains = func(i int) bool {
		var path []int
		ok := false
		for {
			if i == len(b) {
				ok = true
				break
			}
			if v, seen := memo[i]; seen {
				ok = v
				break
			}
			path = append(path, i)
			p, n, err := next(b[i:])
			if err == errShort && window {
				ok = true // runs past what was read
				break
			}
			if err != nil || decode(p, &ks) != nil {
				break
			}
			i += n
		}
		for _, j := range path {
			memo[j] = ok
		}
		return ok
	}
	for i := 1; i+recHead+minPayload <= len(b); i++ {
		if !shaped(b[i:]) || !chains(i) {
			continue
		}
		if !short {
			return off + int64(i), true
		}
		if i > recHead && crc32.Checksum(b[recHead:i], castagnoli) == binary.LittleEndian.Uint32(b[4:]) {
			return off + int64(i), true // the length was damaged, not the tail torn
		}
	}
	return 0, false
}
