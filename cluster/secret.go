package cluster

// Entry kinds: the first byte of a raft entry's data, and of each section of a snapshot.
const (
	EntRecords byte = 1 // a proposal: its sequence number (8 bytes), then its records
	EntSecret  byte = 2 // the cluster's 32-byte key-name secret
)

// Secret is the cluster's key-name secret, once known: the first leader chooses it and
// replicates it in an entry, and every snapshot begins with it.
type Secret struct {
	Known bool
	Key   [32]byte
}

// SecretEntry returns the data of the entry that replicates secret k.
func SecretEntry(k [32]byte) []byte { return append([]byte{EntSecret}, k[:]...) }

// ParseSecret reads the secret of an entry's data d of kind EntSecret.
func ParseSecret(d []byte) ([32]byte, bool) {
	if len(d) != 33 || d[0] != EntSecret {
		return [32]byte{}, false
	}
	return [32]byte(d[1:33]), true
}

// SnapshotHead begins a snapshot's data: the secret when known, then the records' kind.
func (s *Secret) SnapshotHead() []byte {
	var d []byte
	if s.Known {
		d = SecretEntry(s.Key)
	}
	return append(d, EntRecords)
}

// SplitSnapshot reads a snapshot's data d: its secret (nil if it has none) and its records
// (ok false if it has none).
func SplitSnapshot(d []byte) (k *[32]byte, recs []byte, ok bool) {
	if len(d) >= 33 && d[0] == EntSecret {
		k = (*[32]byte)(d[1:33])
		d = d[33:]
	}
	if len(d) == 0 || d[0] != EntRecords {
		return k, nil, false
	}
	return k, d[1:], true
}
