package loop

import (
	"errors"

	"github.com/tallyd/tallyd/proto/resp"
)

// The limits of a Redis-text request (issue 21, item 7). Redis 7 takes up to 2^31-1
// arguments and 512 MB an argument (proto-max-bulk-len), and answers a count or a length
// past them with "-ERR Protocol error: invalid multibulk length" (or "... invalid bulk
// length"), then closes the connection. tallyd takes what fits in --max-input, which
// bounds what one connection makes it buffer, and at most maxTextArgs arguments (their
// views cost 24 bytes each, more than the 6 bytes the shortest argument takes on the
// wire); past either it answers Redis's error and closes as Redis does. A connection that
// must log in first (--requirepass, an ACL file) gets Redis's limits until it has: 10
// arguments of 16 KiB ("-ERR Protocol error: unauthenticated multibulk length", "...
// unauthenticated bulk length").

// maxTextArgs is the most arguments one Redis-text request may have: Redis's limit before
// 7.0 (1024*1024). With the default --max-input of 4 MiB the request's size binds first
// (an argument takes at least 6 bytes: about 700,000 of them).
const maxTextArgs = 1 << 20

// keepArgsCap is the largest argument list a handler keeps between requests.
const keepArgsCap = 4096

// textDecoder returns the decoder of Redis-text requests for a --max-input of maxInput.
func textDecoder(maxInput int) resp.Decoder {
	return resp.Decoder{MaxArgs: maxTextArgs, MaxBulk: maxInput, MaxCommand: maxInput}
}

// keepArgs returns args emptied for the next request, or nil when it grew past keepArgsCap
// (a request of a million arguments must not keep 24 MB of views).
func keepArgs(args [][]byte) [][]byte {
	if cap(args) > keepArgsCap {
		return nil
	}
	return args[:0]
}

// protocolError answers a Redis-text request that cannot be parsed with Redis's error, as
// Redis does before it closes the connection (the caller closes it once the reply is out).
func (s *Server) protocolError(cs *conn, err error) {
	var pe *resp.ProtocolError
	if !errors.As(err, &pe) || pe.Reply == "" {
		return
	}
	s.put(cs, resp.AppendError(s.out(cs), "ERR "+pe.Reply))
}
