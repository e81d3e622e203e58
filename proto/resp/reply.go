package resp

import (
	"strconv"
	"strings"
)

// The reply writers. Each appends one whole reply, or for AppendArray the
// header of one, to dst and returns the extended buffer; none allocates
// when dst has room.

// AppendSimple appends the simple string reply "+s\r\n". A simple string
// cannot hold "\r" or "\n": each one in s is written as a space.
func AppendSimple(dst []byte, s string) []byte {
	dst = append(dst, '+')
	return appendLine(dst, s)
}

// AppendError appends the error reply "-msg\r\n". msg carries its own
// prefix: AppendError(dst, "ERR Unknown Command"). As in AppendSimple, each
// "\r" or "\n" in msg is written as a space.
func AppendError(dst []byte, msg string) []byte {
	dst = append(dst, '-')
	return appendLine(dst, msg)
}

func appendLine(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, "\r\n") {
		dst = append(dst, s...)
	} else {
		for i := range len(s) {
			c := s[i]
			if c == '\r' || c == '\n' {
				c = ' '
			}
			dst = append(dst, c)
		}
	}
	return append(dst, '\r', '\n')
}

// AppendInt appends the integer reply ":n\r\n".
func AppendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendBulk appends b as a bulk string reply: "$len\r\n", b, "\r\n". A nil
// b is an empty bulk string, not the null reply (that is AppendNull).
func AppendBulk(dst []byte, b []byte) []byte {
	dst = appendHeader(dst, '$', len(b))
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// AppendBulkString is AppendBulk for a string.
func AppendBulkString(dst []byte, s string) []byte {
	dst = appendHeader(dst, '$', len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// AppendBulkInt appends the decimal form of n as a bulk string reply, as
// in "$2\r\n12\r\n".
func AppendBulkInt(dst []byte, n int64) []byte {
	var digits [20]byte
	return AppendBulk(dst, strconv.AppendInt(digits[:0], n, 10))
}

// AppendNull appends the null bulk string reply "$-1\r\n".
func AppendNull(dst []byte) []byte {
	return append(dst, "$-1\r\n"...)
}

// AppendNullArray appends the null array reply "*-1\r\n".
func AppendNullArray(dst []byte) []byte {
	return append(dst, "*-1\r\n"...)
}

// AppendArray appends the header "*n\r\n" of an array reply of n
// elements; the caller appends the n elements after it. A negative n
// appends the null array "*-1\r\n".
func AppendArray(dst []byte, n int) []byte {
	if n < 0 {
		return AppendNullArray(dst)
	}
	return appendHeader(dst, '*', n)
}

func appendHeader(dst []byte, kind byte, n int) []byte {
	dst = append(dst, kind)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}
