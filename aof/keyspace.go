package aof

import (
	"encoding/binary"
	"fmt"

	"github.com/tallyd/tallyd/store"
)

// Keyspace records (issue 32). The Redis data of store.Keyspace is logged as the
// keyspace's own effect records (store.Record: RecSet, RecDel, RecExpire, ...), a batch of
// them to a log record:
//
//	u8 kind 6 | u64 n | n bytes: store.Record encodings, one after another
//
// n is the payload's length less 9: it makes the shortest batch (a flush, 2 bytes) as long
// as the shortest record before it and lets a scan for records among damaged bytes check
// a length against the kind. Replaying one applies its records in order
// (store.Keyspace.Restore); logs written before it hold Redis data as key states (kind 2),
// which replay through store.Locks as before.

const (
	kindKeyspace = 6
	ksHead       = 1 + 8
)

// AppendKeyspace appends the keyspace records recs (store.Keyspace.Log, whole records) as
// log records: one, or several if they are longer than a record holds.
func AppendKeyspace(dst, recs []byte) []byte {
	for len(recs) > 0 {
		n := len(recs)
		if n > MaxRecord-ksHead {
			n = 0 // whole records up to the limit
			for n < len(recs) {
				_, m, err := store.ReadRecord(recs[n:])
				if err != nil || n+m > MaxRecord-ksHead {
					break
				}
				n += m
			}
			if n == 0 {
				panic("aof: a keyspace record longer than a log record holds")
			}
		}
		start := len(dst)
		dst = append(dst, make([]byte, recHead)...)
		dst = binary.LittleEndian.AppendUint64(append(dst, kindKeyspace), uint64(n))
		dst = append(dst, recs[:n]...)
		dst = seal(dst, start)
		recs = recs[n:]
	}
	return dst
}

// decodeKeyspace checks the keyspace payload p (its kind checked) and sets s.Keyspace to
// its records.
func decodeKeyspace(p []byte, s *store.KeyState) error {
	if len(p) < ksHead+2 || binary.LittleEndian.Uint64(p[1:]) != uint64(len(p)-ksHead) {
		return fmt.Errorf("keyspace record of %d bytes with a length that disagrees", len(p))
	}
	for b := p[ksHead:]; len(b) > 0; {
		_, n, err := store.ReadRecord(b)
		if err != nil {
			return err
		}
		b = b[n:]
	}
	s.DB, s.Key, s.Value, s.Holders = 0, [16]byte{}, nil, s.Holders[:0]
	s.Keyspace = p[ksHead:]
	return nil
}
