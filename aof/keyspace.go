package aof

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tallyd/tallyd/store"
)

// The keyspace's records (store.Keyspace, issue 32: Redis data in a family of its own) go
// in the append-only log, in raft entries and in snapshots as runs, each one record of
// kind 6:
//
//	u8 kind 6 | u32 count of keyspace records | u32 their length n | n bytes: the records
//
// each as store.Record.Append encodes it (store/keyspace_rec.go: the change's effect, so
// replaying them in order with store.Keyspace.Apply gives the same keys everywhere). The
// count and the length make the payload's shape checkable before its checksum (shaped,
// aofClaims), and a run is applied only once all of it decodes (decodeKeyspace).

// kindKeyspace is a run of keyspace records.
const kindKeyspace = 6

// ksHead is a run's payload before its records; a run holds at least one record, of at
// least 2 bytes (RecFlush).
const (
	ksHead   = 1 + 4 + 4
	minKSRun = ksHead + 2
)

// KeyspaceRun is about the most bytes of records one run holds: AppendKeyspace splits
// longer ones at record boundaries (a single record longer than it goes alone, up to
// MaxRecord). A run is applied whole: a follower installing a snapshot a slice at a time
// (~1 ms) applies at most one run of ~64 KiB (some 1,000 small keys) past its slice.
const KeyspaceRun = 64 << 10

// AppendKeyspace appends recs, whole keyspace records one after another (Keyspace.Log,
// Record.Append), to dst as one run (kind 6), or as several of at most about KeyspaceRun
// bytes each. No records append nothing. recs that do not decode, or a record longer than
// a log record may be, are the caller's bug: it panics rather than log what no replay
// reads.
func AppendKeyspace(dst, recs []byte) []byte {
	for len(recs) > 0 {
		n, count := 0, 0
		for n < len(recs) && (n == 0 || n < KeyspaceRun) {
			_, m, err := store.ReadRecord(recs[n:])
			if err != nil {
				panic(fmt.Sprintf("aof.AppendKeyspace: record at offset %d: %v", n, err))
			}
			if n > 0 && n+m > KeyspaceRun {
				break
			}
			n += m
			count++
		}
		if ksHead+n > MaxRecord {
			panic(fmt.Sprintf("aof.AppendKeyspace: a keyspace record of %d bytes (a log record holds at most %d)", n, MaxRecord-ksHead))
		}
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kindKeyspace)
		dst = binary.LittleEndian.AppendUint32(dst, uint32(count))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
		dst = append(dst, recs[:n]...)
		dst = seal(dst, start)
		recs = recs[n:]
	}
	return dst
}

// decodeKeyspace checks the payload p of a run, every record of it, then (if fn is not
// nil) calls fn with each in order. The Record is reused; its Key and Value are views
// into p.
func decodeKeyspace(p []byte, fn func(*store.Record)) error {
	if len(p) < minKSRun || p[0] != kindKeyspace {
		return fmt.Errorf("keyspace run of %d bytes", len(p))
	}
	count := binary.LittleEndian.Uint32(p[1:])
	if n := binary.LittleEndian.Uint32(p[5:]); uint64(n) != uint64(len(p)-ksHead) {
		return fmt.Errorf("keyspace run says %d bytes of records, has %d", n, len(p)-ksHead)
	}
	recs := p[ksHead:]
	var seen uint32
	for b := recs; len(b) > 0; seen++ {
		r, m, err := store.ReadRecord(b)
		if err != nil {
			return fmt.Errorf("keyspace record %d: %w", seen, err)
		}
		if r.DB > store.MaxLockDB && !(r.Op == store.RecFlush && r.DB == store.AllDBs) {
			return fmt.Errorf("keyspace record %d: database %d", seen, r.DB)
		}
		b = b[m:]
	}
	if seen != count || count == 0 {
		return fmt.Errorf("keyspace run says %d records, has %d", count, seen)
	}
	if fn == nil {
		return nil
	}
	var r store.Record // one for the run: fn takes a pointer
	for b := recs; len(b) > 0; {
		var m int
		r, m, _ = store.ReadRecord(b)
		fn(&r)
		b = b[m:]
	}
	return nil
}

// errNoKeyspace is a keyspace run where the reader takes none.
var errNoKeyspace = errors.New("keyspace records where this reader takes none")

// Handlers says what DecodeAll does with each kind of record; a nil one refuses its kind
// (an error), but Message, whose records are skipped.
type Handlers struct {
	State    func(*store.KeyState)   // a key state, the fencing-token ceiling, a flush (Locks.Restore)
	Keyspace func(*store.Record)     // each keyspace record, in order (Keyspace.Apply)
	Peers    func(map[uint64]string) // a peer table
	Message  func(ch, msg []byte)    // a pub/sub message (raft entries only)
}
