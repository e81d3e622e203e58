package rediscmd

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

// record hand-builds a data record: u32 N, then body.
func record(body ...[]byte) []byte {
	b := cat(body...)
	return cat(le32(uint32(len(b))), b)
}

// rid1 is a RequestId: 16 bytes counting up from 0x10.
var rid1 = [16]byte{0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f}
