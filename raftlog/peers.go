package raftlog

import "slices"

// AppendPeers appends the peer address table (ID -> host:port) as one record, the one the
// raft log keeps it in: a snapshot's data carries it beside the state records.
func AppendPeers(dst []byte, p map[uint64]string) []byte {
	ids := make([]uint64, 0, len(p))
	for id := range p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return appendPeers(dst, ids, p)
}

// DecodePeers decodes p, the payload of a peer table record (kind KindPeers), checking its
// shape.
func DecodePeers(p []byte) (map[uint64]string, error) {
	if err := raftShaped(p); err != nil {
		return nil, err
	}
	return decodePeers(p), nil
}
