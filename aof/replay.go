package aof

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/tallyd/tallyd/logfile"
	"github.com/tallyd/tallyd/store"
)

// CorruptError is a damaged record with valid records after it: start-up stops on it.
type CorruptError = logfile.CorruptError

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
	return ReplayAll(path, apply, nil)
}

// ReplayAll is Replay that also passes each keyspace record (a run of kind 6, whole and
// in order) to keyspace (store.Keyspace.Apply). With keyspace nil a log that holds keyspace
// records is an error, never taken for a damaged tail.
func ReplayAll(path string, apply func(*store.KeyState), keyspace func(*store.Record)) (Replayed, error) {
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
		if size > 0 {
			r.Truncated, r.TailWhy = size, "header cut off"
		}
		r.Size = int64(len(Header))
		return r, logfile.Rehead(f, Header)
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
		isKS := err == nil && p[0] == kindKeyspace
		switch {
		case isKS && keyspace == nil:
			return r, fmt.Errorf("%s holds keyspace records (at offset %d) that this reader does not take", path, off)
		case isKS:
			err = decodeKeyspace(p, nil) // checked whole before any is applied
		case err == nil:
			err = decode(p, &ks)
		}
		if err != nil {
			rest := make([]byte, size-off)
			if _, err := f.ReadAt(rest, off); err != nil && err != io.EOF {
				return r, err
			}
			why, cerr := logfile.CorruptAt(&aofFormat{}, "append-only log", path, rest, off)
			if cerr != nil {
				return r, cerr
			}
			r.Truncated, r.TailWhy = size-off, why
			r.Size = off
			return r, logfile.Cut(f, off)
		}
		if isKS {
			_ = decodeKeyspace(p, keyspace)
		} else {
			apply(&ks)
		}
		r.Records++
		off += int64(used)
	}
	r.Size = off
	return r, nil
}
