package rediscmd

import (
	"crypto/sha256"
	"encoding"
	"hash"
)

// Redis-text key names and LockKeys.
//
// A Redis key is any byte string; a LockKey is 16 bytes. TextID (slock's own rule, kept for
// LockIds, whose text form is their 32 hex digits) maps many names to one LockKey: hex
// names differing in case, a 32-hex-digit name and the 16 bytes it decodes to, "abc" and
// "\x00abc". Text commands (LOCK, UNLOCK, PUSH and every key/value and hash command) map
// key names with KeyID instead, which gives distinct names distinct LockKeys:
//
//   - a name of 1 to 15 bytes whose first byte is not 0 is right-aligned and padded with
//     zero bytes on the left, as TextID does (the empty name is 16 zero bytes). These
//     LockKeys have byte 0 == 0 and their first non-zero byte at 16 - len(name), so no
//     two names share one. A binary client reaches the text key "job" at this LockKey.
//   - any other name (16 bytes or more, or starting with a 0 byte) is hashed: the first
//     16 bytes of SHA-256(secret || 32 zero bytes || name) (the secret fills the first
//     block, whose state is computed once), byte 0 forced to 0x80 or more so that it is
//     never a short name's. The secret is random per data directory (kept in it, so a
//     restart maps names as before) and unknown to clients: they cannot compute, nor
//     aim collisions at, these LockKeys, and binary clients cannot reach these keys (use
//     a text command, or a short name).
//
// Two hashed names share a LockKey with probability about 2^-127 per pair; even then the
// server compares a value's KEY property with the hashed name asked for (a value belongs
// to the name it carries), so two names never read or write one value.

// Keys maps key names to LockKeys under one secret. Not safe for concurrent use.
type Keys struct {
	d     hash.Hash
	start []byte // d's state after the secret's block
	sum   [sha256.Size]byte
	key   [32]byte // the secret, for a backup (Secret)
}

// NewKeys returns the mapping keyed by secret.
func NewKeys(secret [32]byte) *Keys {
	var block [sha256.BlockSize]byte
	copy(block[:], secret[:])
	d := sha256.New()
	d.Write(block[:])
	start, err := d.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil { // cannot be: crypto/sha256 marshals its state
		panic(err)
	}
	return &Keys{d: d, start: start, key: secret}
}

// Secret returns the secret k maps names under: a backup carries it with the keys.
func (k *Keys) Secret() [32]byte { return k.key }

// zeroSecret is the secret of a nil Keys (a Text without one: tests), which builds its
// own state on each call and so shares none.
var zeroSecret [32]byte

// Hashed reports whether KeyID hashes name (else its LockKey is name, padded: no other
// name has it).
func Hashed(name []byte) bool { return len(name) >= 16 || len(name) > 0 && name[0] == 0 }

// KeyID returns the LockKey of key name under k (nil: the zero secret).
func (k *Keys) KeyID(name []byte) (id [16]byte) {
	if !Hashed(name) {
		copy(id[16-len(name):], name)
		return id
	}
	if k == nil {
		k = NewKeys(zeroSecret)
	}
	if err := k.d.(encoding.BinaryUnmarshaler).UnmarshalBinary(k.start); err != nil {
		panic(err) // cannot be: the state is the digest's own
	}
	k.d.Write(name)
	sum := [sha256.Size]byte(k.d.Sum(k.sum[:0]))
	copy(id[:], sum[:16])
	id[0] |= 0x80
	return id
}

// KeyID maps name with t's Keys.
func (t *Text) KeyID(name []byte) [16]byte { return t.Keys.KeyID(name) }
