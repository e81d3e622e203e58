// Package snapfile is the format of a backup file (tallyctl snapshot save, tallyd restore):
// a header, the body, and a SHA-256 trailer over both, so that a damaged or cut file is
// refused before anything is restored from it.
//
// The body is a raft snapshot's data as the cluster takes it (cluster.SnapshotHead: the
// key-name secret, then the records' kind, then the append-only log's records, aof.AppendState
// and, from a cluster, the peer table): no third encoding of the store.
package snapfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The layout, all little-endian:
//
//	8 magic "TALLYSNP" | u16 version | u8 kind | u8 zero | u64 index | u64 term
//	| u64 keys | u64 body length | body | 32 SHA-256 of everything before it

// Magic starts every backup file.
const Magic = "TALLYSNP"

// Version is the format version this package writes and reads.
const Version = 1

// HeaderLen is the length of the header, TrailerLen of the checksum after the body.
const (
	HeaderLen  = 8 + 2 + 1 + 1 + 4*8
	TrailerLen = sha256.Size
)

// MaxBody is the largest body a reader accepts (a larger length is damage).
const MaxBody = 1 << 40

// Kind says what the snapshot was taken from.
type Kind uint8

// Kinds.
const (
	Single  Kind = 1 // a single node: Index is the log's size in bytes when it was taken
	Cluster Kind = 2 // a cluster member: Index is its raft log's applied entry, Term its term then
)

func (k Kind) String() string {
	switch k {
	case Single:
		return "single"
	case Cluster:
		return "cluster"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header is what a backup file says of itself.
type Header struct {
	Kind  Kind
	Index uint64 // the raft index it is at (cluster), or the log's size (single)
	Term  uint64 // the member's raft term when it was taken (cluster); 0 for a single node
	Keys  uint64 // key states in the body
	Body  uint64 // body length in bytes
}

// Size returns the length of the whole file h heads.
func (h *Header) Size() uint64 { return HeaderLen + h.Body + TrailerLen }

// AppendHeader appends h's encoding to dst.
func AppendHeader(dst []byte, h *Header) []byte {
	dst = append(dst, Magic...)
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = append(dst, byte(h.Kind), 0)
	dst = binary.LittleEndian.AppendUint64(dst, h.Index)
	dst = binary.LittleEndian.AppendUint64(dst, h.Term)
	dst = binary.LittleEndian.AppendUint64(dst, h.Keys)
	return binary.LittleEndian.AppendUint64(dst, h.Body)
}

// Encode returns the whole file of h (its Body set from body) and body.
func Encode(h Header, body []byte) []byte {
	h.Body = uint64(len(body))
	b := make([]byte, 0, h.Size())
	b = append(AppendHeader(b, &h), body...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// ParseHeader reads the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderLen {
		if !bytes.HasPrefix([]byte(Magic), b[:min(len(b), len(Magic))]) {
			return h, errors.New("not a tallyd snapshot (bad magic)")
		}
		return h, fmt.Errorf("snapshot cut off: %d bytes, the header alone is %d", len(b), HeaderLen)
	}
	if string(b[:8]) != Magic {
		return h, fmt.Errorf("not a tallyd snapshot (bad magic %q)", b[:8])
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != Version {
		return h, fmt.Errorf("snapshot format version %d: this tallyd reads version %d", v, Version)
	}
	h.Kind = Kind(b[10])
	if h.Kind != Single && h.Kind != Cluster || b[11] != 0 {
		return h, fmt.Errorf("snapshot of unknown kind %d", b[10])
	}
	h.Index = binary.LittleEndian.Uint64(b[12:])
	h.Term = binary.LittleEndian.Uint64(b[20:])
	h.Keys = binary.LittleEndian.Uint64(b[28:])
	h.Body = binary.LittleEndian.Uint64(b[36:])
	if h.Body > MaxBody {
		return h, fmt.Errorf("snapshot body length %d out of range (at most %d)", h.Body, uint64(MaxBody))
	}
	return h, nil
}

// Decode checks a whole file b, its header, length and checksum, and returns its header and
// body (a view into b). A damaged or cut file is an error saying so; nothing in b panics it.
func Decode(b []byte) (Header, []byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, nil, err
	}
	switch n := uint64(len(b)); {
	case n < h.Size():
		return h, nil, fmt.Errorf("snapshot cut off: %d bytes of %d", n, h.Size())
	case n > h.Size():
		return h, nil, fmt.Errorf("snapshot has %d bytes after its end (%d bytes)", n-h.Size(), h.Size())
	}
	end := HeaderLen + h.Body
	sum := sha256.Sum256(b[:end])
	if !bytes.Equal(sum[:], b[end:]) {
		return h, nil, errors.New("snapshot damaged: SHA-256 checksum mismatch")
	}
	return h, b[HeaderLen:end], nil
}

// Read reads and checks a whole file from r (at most MaxBody and the header and trailer).
func Read(r io.Reader) (Header, []byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBody+HeaderLen+TrailerLen+1))
	if err != nil {
		return Header{}, nil, err
	}
	return Decode(b)
}
