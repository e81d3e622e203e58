package slock

// Hand-rolled encoders for the tests, independent of the package's own
// appenders, so a bug in one cannot hide a bug in the other.

func le16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func le64(v uint64) []byte { return append(le32(uint32(v)), le32(uint32(v>>32))...) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func str(s string) []byte { return []byte(s) }

func rep(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// id16 returns 16 bytes counting up from start: start, start+1, ...
func seq16(start byte) (id [16]byte) {
	for i := range id {
		id[i] = start + byte(i)
	}
	return id
}

// pad returns b followed by zero bytes up to n bytes.
func pad(b []byte, n int) []byte {
	if len(b) > n {
		panic("pad: too long")
	}
	return append(b[:len(b):len(b)], make([]byte, n-len(b))...)
}

var (
	rid1 = seq16(0x10) // a RequestId
	lid1 = seq16(0x30) // a LockId
	key1 = seq16(0x50) // a LockKey
	cid1 = seq16(0x70) // a ClientId
)

// lockFrame hand-builds a Lock-layout frame of type typ with the fixed
// ids above and the given flag, db and numbers, then rest (a data record).
func lockFrame(typ, flag, db byte, timeout, tflag, expried, eflag, count uint16, rcount byte, rest ...[]byte) []byte {
	return cat([]byte{0x56, 0x01, typ}, rid1[:], []byte{flag, db}, lid1[:], key1[:],
		le16(timeout), le16(tflag), le16(expried), le16(eflag), le16(count), []byte{rcount}, cat(rest...))
}

// record hand-builds a data record: u32 N, then body.
func record(body ...[]byte) []byte {
	b := cat(body...)
	return cat(le32(uint32(len(b))), b)
}

// head hand-builds bytes 0-18 of a frame.
func head(typ byte, rid [16]byte) []byte {
	return cat([]byte{0x56, 0x01, typ}, rid[:])
}
