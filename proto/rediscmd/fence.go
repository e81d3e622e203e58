package rediscmd

import (
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file is the text side of fencing tokens: TOKEN and GETFENCE, SET's FENCE option,
// and the error a fenced write gets when its token is older than one the key has seen.

// errFenceToken is SET FENCE's error for a token outside the tokens' range: tokens are
// positive and, as every reply gives them, 64-bit signed integers.
var errFenceToken = &kvErr{Msg: "FENCE token must be an integer from 1 to 9223372036854775807"}

// TokenQuery is a parsed TOKEN key [LOCK_ID id].
type TokenQuery struct {
	Key    [16]byte
	LockID [16]byte
	Any    bool // no LOCK_ID: the oldest holder's
}

// ParseToken parses TOKEN's arguments (args[0] is the name).
func ParseToken(args [][]byte, t *Text) (TokenQuery, error) {
	q := TokenQuery{Key: t.KeyID(args[1]), Any: true}
	switch {
	case len(args) == 2:
	case len(args) == 4 && resp.Is(args[2], "LOCK_ID"):
		q.LockID, q.Any = slock.TextID(args[3]), false
	default:
		return q, errSyntax
	}
	return q, nil
}

// AppendFenced appends the error of a fenced write whose token is older than seen, the
// highest its key has seen.
func AppendFenced(dst []byte, token, seen uint64) []byte {
	return resp.AppendError(dst, "FENCED token "+strconv.FormatUint(token, 10)+" is older than "+
		strconv.FormatUint(seen, 10)+", already seen by this key")
}
