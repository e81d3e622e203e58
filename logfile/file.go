// Package logfile is what tallyd's two logs share (the append-only log of aof/ and the raft
// log of raftlog/): the record frame, the rule that tells a damaged record from a torn tail,
// and the check-log tool that reports and repairs damage.
package logfile

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"syscall"
	"time"
)

// Both logs frame a record as u32 n, u32 CRC-32C of the payload, then n bytes of payload,
// little-endian.
const RecHead = 8

// Castagnoli is the CRC-32C table of the record checksums.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Seal fills in the header of the record appended to dst from start.
func Seal(dst []byte, start int) []byte {
	p := dst[start+RecHead:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(p, Castagnoli))
	return dst
}

// FileMode is the mode of the logs' files: only tallyd's user reads the values.
const FileMode = 0o600

// RetryEvery is how soon after a failed write a log's writer tries again when more records
// come (it tries at least once a second anyway).
const RetryEvery = 100 * time.Millisecond

// Reason is err as C's strerror words it (Go's errno texts are strerror's, lower-cased).
func Reason(err error) string {
	var en syscall.Errno
	msg := err.Error()
	if errors.As(err, &en) {
		msg = en.Error()
	}
	if msg != "" && 'a' <= msg[0] && msg[0] <= 'z' {
		msg = string(msg[0]-'a'+'A') + msg[1:]
	}
	return msg
}

// SyncDir fsyncs a directory, so that a file created or renamed in it stays.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
