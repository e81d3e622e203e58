package sim

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// Model is a member's state machine: keys with values (counters are values), locks with
// their holder and fencing token, and the token counter with its ceiling, reserved in the
// log a block at a time as tallyd's store does (store/locks_fence.go): a new leader that
// applied every committed entry grants tokens above every token an acknowledged grant
// carried.
type Model struct {
	Vals  map[string]string
	Locks map[string]Lock
	Fence uint64 // the last token issued
	Ceil  uint64 // the reserved ceiling
}

// Lock is a lock's holder and its token.
type Lock struct {
	Owner string
	Token uint64
}

func newModel() *Model { return &Model{Vals: map[string]string{}, Locks: map[string]Lock{}} }

// Records: a kind byte, then fields (strings as a uvarint length and bytes, numbers as
// uvarints).
const (
	recSet   = 'S' // key value
	recLock  = 'L' // key owner token (owner "": released)
	recCeil  = 'C' // ceiling
	recPeers = 'P' // count, then id addr pairs (a snapshot's)
)

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readStr(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return "", nil, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

func readNum(b []byte) (uint64, []byte, bool) {
	v, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, false
	}
	return v, b[k:], true
}

func appendPeers(b []byte, p map[uint64]string) []byte {
	b = binary.AppendUvarint(append(b, recPeers), uint64(len(p)))
	for _, id := range slices.Sorted(maps.Keys(p)) {
		b = appendStr(binary.AppendUvarint(b, id), p[id])
	}
	return b
}

// apply applies records (peer tables go to n's member).
func (m *Model) apply(b []byte, n *Node) {
	ok := true
	for len(b) > 0 && ok {
		kind := b[0]
		b = b[1:]
		switch kind {
		case recSet:
			var k, v string
			if k, b, ok = readStr(b); ok {
				if v, b, ok = readStr(b); ok {
					m.Vals[k] = v
				}
			}
		case recLock:
			var k, o string
			var tok uint64
			if k, b, ok = readStr(b); ok {
				if o, b, ok = readStr(b); ok {
					if tok, b, ok = readNum(b); ok {
						if o == "" {
							delete(m.Locks, k)
						} else {
							m.Locks[k] = Lock{o, tok}
						}
					}
				}
			}
		case recCeil:
			var c uint64
			if c, b, ok = readNum(b); ok {
				m.Ceil, m.Fence = max(m.Ceil, c), max(m.Fence, c)
			}
		case recPeers:
			var cnt uint64
			cnt, b, ok = readNum(b)
			for i := uint64(0); ok && i < cnt; i++ {
				var id uint64
				var a string
				if id, b, ok = readNum(b); ok {
					if a, b, ok = readStr(b); ok && n != nil {
						n.M.Members.Addrs[id] = a
					}
				}
			}
		default:
			ok = false
		}
	}
	if !ok && n != nil {
		n.s.fail("m" + strconv.FormatUint(n.ID, 10) + ": bad records")
	}
}

// appendState appends the whole state as records (a snapshot's), in key order.
func (m *Model) appendState(b []byte) []byte {
	for _, k := range slices.Sorted(maps.Keys(m.Vals)) {
		b = appendStr(appendStr(append(b, recSet), k), m.Vals[k])
	}
	for _, k := range slices.Sorted(maps.Keys(m.Locks)) {
		l := m.Locks[k]
		b = binary.AppendUvarint(appendStr(appendStr(append(b, recLock), k), l.Owner), l.Token)
	}
	return binary.AppendUvarint(append(b, recCeil), m.Ceil)
}

// Digest is a hash of the state (members converged have the same).
func (m *Model) Digest() uint64 {
	h := fnv.New64a()
	h.Write(m.appendState(nil))
	return h.Sum64()
}

// The commands a leader runs on its model; what they change is journaled (j).

func (m *Model) set(j []byte, k, v string) []byte {
	m.Vals[k] = v
	return appendStr(appendStr(append(j, recSet), k), v)
}

// nextToken issues a token, reserving the next block past the ceiling.
func (m *Model) nextToken(j []byte, block uint64) (uint64, []byte) {
	m.Fence++
	if m.Fence > m.Ceil {
		m.Ceil = m.Fence + block - 1
		j = binary.AppendUvarint(append(j, recCeil), m.Ceil)
	}
	return m.Fence, j
}

func (m *Model) lock(j []byte, k, owner string, block uint64) (granted, again bool, token uint64, _ []byte) {
	if l, ok := m.Locks[k]; ok {
		return l.Owner == owner, l.Owner == owner, l.Token, j
	}
	token, j = m.nextToken(j, block)
	m.Locks[k] = Lock{owner, token}
	return true, false, token, binary.AppendUvarint(appendStr(appendStr(append(j, recLock), k), owner), token)
}

func (m *Model) unlock(j []byte, k, owner string) (bool, []byte) {
	if l, ok := m.Locks[k]; !ok || l.Owner != owner {
		return false, j
	}
	delete(m.Locks, k)
	return true, binary.AppendUvarint(appendStr(appendStr(append(j, recLock), k), ""), 0)
}
