package pool

import (
	"bytes"
	"strconv"
)

// The client side: request lines out, reply lines in. The request
// appenders encode whatever numbers they are given (workers 0 included, so
// tests can send bad requests); they panic only when the line could not
// carry the value: a key that is empty or holds a space or "\n" (clients
// percent-encode those themselves), or a STATS argument with a "\n".

// AppendAcq4Me appends "ACQ4ME key workers maxqueue timeout\n" to dst.
func AppendAcq4Me(dst, key []byte, workers, maxqueue, timeout uint32) []byte {
	return appendAcquire(dst, "ACQ4ME ", key, workers, maxqueue, timeout)
}

// AppendAcq4Any appends "ACQ4ANY key workers maxqueue timeout\n" to dst.
func AppendAcq4Any(dst, key []byte, workers, maxqueue, timeout uint32) []byte {
	return appendAcquire(dst, "ACQ4ANY ", key, workers, maxqueue, timeout)
}

func appendAcquire(dst []byte, cmd string, key []byte, workers, maxqueue, timeout uint32) []byte {
	switch {
	case len(key) == 0:
		panic("pool: " + cmd + "with an empty key")
	case bytes.IndexByte(key, ' ') >= 0:
		panic("pool: " + cmd + "key " + strconv.Quote(string(key)) + " contains a space")
	case bytes.IndexByte(key, '\n') >= 0:
		panic("pool: " + cmd + "key " + strconv.Quote(string(key)) + " contains a newline")
	}
	dst = append(dst, cmd...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(workers), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(maxqueue), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(timeout), 10)
	return append(dst, '\n')
}

// AppendRelease appends "RELEASE\n" to dst.
func AppendRelease(dst []byte) []byte {
	return append(dst, "RELEASE\n"...)
}

// AppendStats appends "STATS arg\n" to dst, e.g. arg "FULL", "UPTIME" or
// a counter name.
func AppendStats(dst []byte, arg string) []byte {
	for i := 0; i < len(arg); i++ {
		if arg[i] == '\n' {
			panic("pool: STATS argument " + strconv.Quote(arg) + " contains a newline")
		}
	}
	dst = append(dst, "STATS "...)
	dst = append(dst, arg...)
	return append(dst, '\n')
}

// ParseReplyLine returns the first line of buf without its "\n", and n, the
// bytes it took with the "\n". n == 0 means buf holds no whole line yet.
// line is a view into buf. The reply to STATS FULL is several lines, the
// last of them empty.
func ParseReplyLine(buf []byte) (line []byte, n int) {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil, 0
	}
	return buf[:i:i], i + 1
}
