package raftlog

import (
	"encoding/binary"
	"errors"

	"github.com/tallyd/tallyd/logfile"
)

// raftFormat is the raft log's records.
type raftFormat struct{}

func (raftFormat) Record(b []byte) (int, error) {
	p, n, err := raftNext(b)
	if err == nil && p[0] == kindSnapshot {
		_, err = decodeSnap(p)
	}
	return n, err
}

func (f raftFormat) Valid(b []byte) int {
	n, err := f.Record(b)
	if err != nil {
		return 0
	}
	return n
}

func (raftFormat) PayloadOK(p []byte) bool {
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

func (raftFormat) MaxPayload() uint32                       { return MaxRaftRecord }
func (raftFormat) Short(err error) bool                     { return errors.Is(err, errRaftShort) }
func (raftFormat) Claims(p []byte, size uint32) logfile.Fit { return raftClaims(p, size) }

// FieldsLen: a hard state's length is fixed, a peer table's is in its fields; an entry's or
// a snapshot's data is not.
func (raftFormat) FieldsLen(p []byte) (uint64, bool) {
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
func raftClaims(p []byte, size uint32) logfile.Fit {
	if size < 1 || size > MaxRaftRecord {
		return logfile.Contradicts
	}
	if len(p) == 0 {
		return logfile.Allows
	}
	ok := func(b bool) logfile.Fit {
		if b {
			return logfile.Allows
		}
		return logfile.Contradicts
	}
	switch p[0] {
	case kindHardState:
		if size == hsPayload {
			return logfile.Confirms
		}
	case kindEntry:
		return ok(size >= entryHead && (len(p) < 2 || p[1]&^entAllFields == 0 && (p[1]&entData != 0 || size == entryHead)))
	case kindSnapshot:
		return ok(size >= snapHead && (len(p) < snapHead || uint64(binary.LittleEndian.Uint32(p[17:])) <= uint64(size-snapHead)))
	case kindPeers:
		if size < peersHead {
			return logfile.Contradicts
		}
		if len(p) < peersHead {
			return logfile.Allows
		}
		n, rest := uint64(binary.LittleEndian.Uint32(p[1:])), uint64(size-peersHead)
		if n*peerHead > rest {
			return logfile.Contradicts
		}
		q := p[peersHead:]
		for range n {
			if len(q) < peerHead {
				return logfile.Allows
			}
			l := uint64(peerHead) + uint64(binary.LittleEndian.Uint16(q[8:]))
			if l > rest {
				return logfile.Contradicts
			}
			rest -= l
			q = q[min(uint64(len(q)), l):]
		}
		if rest == 0 {
			return logfile.Confirms
		}
	}
	return logfile.Contradicts
}
