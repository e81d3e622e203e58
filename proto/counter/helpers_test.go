package counter

// Hand-rolled encoders for the tests, independent of the package's own
// appenders, so a bug in one cannot hide a bug in the other.

func be16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// frame builds a header with an explicit magic, opcode, flags and reserved
// byte, a BodyLength equal to len(body), and the body.
func frame(magic, op, flags, reserved byte, opaque uint32, body ...[]byte) []byte {
	b := cat(body...)
	return cat([]byte{magic, op, flags, reserved}, be32(uint32(len(b))), be32(opaque), b)
}

// req builds a well-formed request frame with flags and reserved zero.
func req(op byte, opaque uint32, body ...[]byte) []byte {
	return frame(0x90, op, 0, 0, opaque, body...)
}

// rawHeader builds a bare header claiming blen body bytes.
func rawHeader(magic, op byte, blen, opaque uint32) []byte {
	return cat([]byte{magic, op, 0, 0}, be32(blen), be32(opaque))
}

func str(s string) []byte { return []byte(s) }

func rep(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
