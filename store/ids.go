package store

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
)

// IDs makes server-generated 16-byte ids (LockIds, RequestIds): a counter
// enciphered with AES-128 under a key the caller draws at random once per
// process. AES is a permutation, so ids from one generator never repeat
// (2^64 of them); without the key, one id tells nothing about the next.
// Each id costs one block encryption and no system call.
type IDs struct {
	b       cipher.Block
	n       uint64
	in, out [16]byte // kept here, not on the stack: a slice passed to Encrypt escapes
}

// NewIDs returns a generator keyed by key.
func NewIDs(key [16]byte) *IDs {
	b, err := aes.NewCipher(key[:])
	if err != nil { // cannot be: the key is 16 bytes
		panic(err)
	}
	return &IDs{b: b}
}

// Next returns a fresh id.
func (g *IDs) Next() (id [16]byte) {
	g.n++
	binary.LittleEndian.PutUint64(g.in[:8], g.n)
	g.b.Encrypt(g.out[:], g.in[:])
	return g.out
}

// seedKey spreads a 64-bit seed over an AES key (for a Locks configured with
// IDSeed only: tests that want repeatable ids).
func seedKey(seed uint64) (k [16]byte) {
	binary.LittleEndian.PutUint64(k[:8], seed)
	binary.LittleEndian.PutUint64(k[8:], seed^0x9e3779b97f4a7c15)
	return k
}
