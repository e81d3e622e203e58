package aof

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/tallyd/tallyd/store"
)

// CorruptError is a damaged record with valid records after it (or itself whole but for
// its length field): the log cannot be replayed past it without losing them, so start-up
// stops and changes nothing. tallyd check-log --fix repairs the file.
type CorruptError struct {
	Kind     string // "append-only log" or "raft log"
	Path     string
	Offset   int64  // where the damage starts
	Why      string // what is wrong with the record there
	Next     int64  // where valid records resume
	After    int    // valid records from Next on
	Repaired bool   // the record at Offset is whole but for its length field
}

func (e *CorruptError) Error() string {
	what := fmt.Sprintf("%d valid records follow it (the first at offset %d)", e.After, e.Next)
	if e.Repaired {
		what = fmt.Sprintf("the record there is whole but for its length field (its payload, to offset %d, matches its checksum), "+
			"and %d valid records follow it", e.Next, e.After)
	}
	return fmt.Sprintf("%s %s is damaged at offset %d (%s), and %s: tallyd does not start on it, so as not to "+
		"destroy them, and has changed nothing. `tallyd check-log %s` reports the damage; `tallyd check-log --fix %s` "+
		"keeps the original as %s.broken-TIME and writes a log of every valid record without the damaged bytes",
		e.Kind, e.Path, e.Offset, e.Why, what, e.Path, e.Path, e.Path)
}

// corruptAt returns the *CorruptError for the bad record at off in b (b is the file from
// off to its end), or nil and why when it is a tail with no valid record after it.
func corruptAt(f logFormat, kind, path string, b []byte, off int64) (why string, err *CorruptError) {
	_, dmg, _ := scanLog(f, b, 0)
	d := dmg[0]
	if d.Tail() {
		return d.Why, nil
	}
	return d.Why, &CorruptError{Kind: kind, Path: path, Offset: off, Why: d.Why, Next: off + d.End, After: d.After, Repaired: d.Repaired}
}

// Replayed says what Replay found.
type Replayed struct {
	Records   int   // records applied
	Size      int64 // bytes of the log kept
	Truncated int64 // bytes of a torn or corrupt tail cut off (0: none)
	TailWhy   string
}

// Replay applies every record of the log at path, in order, to apply, and
// leaves the file ready to append to: a missing or empty file gets a header; a
// torn or corrupt tail (a bad record with no valid record after it, as scan.go
// tells) is cut off, and Replayed says how much. A bad record followed by valid
// ones is a *CorruptError, and the file is left as it is; a file that is not a log
// is an error too.
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
			rest := make([]byte, size-off)
			if _, err := f.ReadAt(rest, off); err != nil && err != io.EOF {
				return r, err
			}
			why, cerr := corruptAt(&aofFormat{}, "append-only log", path, rest, off)
			if cerr != nil {
				return r, cerr
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
