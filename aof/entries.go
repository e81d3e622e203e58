package aof

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/tallyd/tallyd/raftlog"
	"github.com/tallyd/tallyd/store"
)

// kindMessage is a pub/sub message in a raft entry's records (AppendMessage).
const kindMessage = 0x25

// DecodeRecords calls state for each key state record in b and peers for each peer table
// record, in order: b is a raft entry's records or a snapshot's data. The KeyState passed
// to state is reused for the next record and its Value is a view into b. A record that is
// cut off or damaged is an error naming its offset; the records before it have been passed.
// Pub/sub messages (AppendMessage) are skipped: DecodeRecordsWith reports them.
func DecodeRecords(b []byte, state func(*store.KeyState), peers func(map[uint64]string)) error {
	return DecodeRecordsWith(b, state, peers, nil)
}

// AppendMessage appends a pub/sub message, channel ch and message msg, as one record: a raft
// entry carries the messages its leader published, so that every member publishes them too.
// Only raft entries hold them (never the single node's log nor a snapshot):
//
//	u8 kind 5 | u32 channel length | channel | message
func AppendMessage(dst, ch, msg []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, kindMessage)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ch)))
	dst = append(append(dst, ch...), msg...)
	return seal(dst, start)
}

// DecodeRecordsWith is DecodeRecords that also calls message (if not nil) for each pub/sub
// message record, its channel and message views into b. Keyspace records are an error:
// DecodeAll takes them.
func DecodeRecordsWith(b []byte, state func(*store.KeyState), peers func(map[uint64]string), message func(ch, msg []byte)) error {
	return DecodeAll(b, &Handlers{State: state, Peers: peers, Message: message})
}

// DecodeAll calls h's handler for each record in b, in order: b is a raft entry's records
// or a snapshot's data (or a log's records). The KeyState and the Record passed are reused
// for the next record; their Value (and a Record's Key) are views into b. A record that is
// cut off or damaged, or of a kind h has no handler for, is an error naming its offset; the
// records before it have been passed (a keyspace run is passed whole or not at all).
func DecodeAll(b []byte, h *Handlers) error {
	var ks store.KeyState
	for off := 0; off < len(b); {
		if len(b)-off < recHead+1 {
			return fmt.Errorf("record at offset %d cut off", off)
		}
		size := binary.LittleEndian.Uint32(b[off:])
		if size < 1 || uint64(size) > uint64(len(b)-off-recHead) {
			return fmt.Errorf("record at offset %d: length %d out of range [1, %d]", off, size, len(b)-off-recHead)
		}
		p := b[off+recHead : off+recHead+int(size)]
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[off+4:]) {
			return fmt.Errorf("record at offset %d: checksum mismatch", off)
		}
		var err error
		switch p[0] {
		case kindState, kindState1, kindCeil, kindFlush:
			if h.State == nil {
				err = errors.New("key state records where this reader takes none")
			} else if err = decode(p, &ks); err == nil {
				h.State(&ks)
			}
		case kindKeyspace:
			if h.Keyspace == nil {
				err = errNoKeyspace
			} else {
				err = decodeKeyspace(p, h.Keyspace)
			}
		case raftlog.KindPeers:
			var m map[uint64]string
			if m, err = raftlog.DecodePeers(p); err == nil && h.Peers != nil {
				h.Peers(m)
			}
		case kindMessage:
			if len(p) < 5 || uint64(binary.LittleEndian.Uint32(p[1:])) > uint64(len(p)-5) {
				err = errors.New("pub/sub message: channel length out of range")
			} else if h.Message != nil {
				n := 5 + int(binary.LittleEndian.Uint32(p[1:]))
				h.Message(p[5:n], p[n:])
			}
		default:
			err = errors.New("unknown record kind")
		}
		if err != nil {
			return fmt.Errorf("record at offset %d (kind %#x): %w", off, p[0], err)
		}
		off += recHead + int(size)
	}
	return nil
}

// RecordKeys appends to dst the keys of the key state records at the start of b, up to max
// of them, and returns it with the length of the records it read: whole records, up to the
// one that made max or to the first cut off or out of range, without checking checksums.
// A follower warms its caches with them (store.Locks.Warm) before it decodes those bytes.
func RecordKeys(b []byte, dst []store.KeyName, max int) ([]store.KeyName, int) {
	return RecordKeysUpTo(b, dst, max, len(b))
}

// RecordKeysUpTo is RecordKeys that also stops before a record that would take the length
// read past maxBytes (it reads the first record whatever its length): a run of records
// restored a slice at a time is bounded in bytes (a value or a holder list makes a record
// large) as in records.
func RecordKeysUpTo(b []byte, dst []store.KeyName, max, maxBytes int) ([]store.KeyName, int) {
	off := 0
	for off < len(b) && len(dst) < max {
		if len(b)-off < recHead+1 {
			break
		}
		size := binary.LittleEndian.Uint32(b[off:])
		if size < 1 || uint64(size) > uint64(len(b)-off-recHead) || off > 0 && off+recHead+int(size) > maxBytes {
			break
		}
		p := b[off+recHead : off+recHead+int(size)]
		if (p[0] == kindState || p[0] == kindState1) && len(p) >= 18 {
			dst = append(dst, store.KeyName{DB: p[1], Key: [16]byte(p[2:18])})
		}
		off += recHead + int(size)
	}
	return dst, off
}
