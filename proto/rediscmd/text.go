package rediscmd

import (
	"encoding/binary"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// Text is the state of a Redis-text connection that LOCK, UNLOCK and PUSH default to.
type Text struct {
	DB          uint8
	Timeout     uint16 // default wait, seconds (15; TIMEOUT SET changes it)
	TimeoutFlag uint16

	// Slock is slock's own text semantics, which a connection asks for with CLIENT SLOCK
	// ON (docs/redis.md): GET, MGET and GETSET answer a counter (a NUMBER value) as an integer
	// reply, and SETNX on a taken key waits up to Timeout for it. Off (the default), they
	// answer as Redis does: a bulk string, and 0 at once.
	Slock      bool
	LastLockID [16]byte // the last successful LOCK's id: UNLOCK's default
	Keys       *Keys    // maps key names to LockKeys (keyid.go); nil: the zero secret

	// Keyspace: the key/value and hash commands run on store.Keyspace (issue 32), so the
	// parse builds no lock frame (no LockKey, no RequestId, no data record): KV.ExpireAt
	// is the key's absolute expiry (Unix ms; 1 for a time already past).
	Keyspace bool
}

// TextError is a text command the server answers with `-Code Msg` (AppendTextError);
// Code is ERR when empty.
type TextError struct {
	Code string
	Msg  string
}

func (e *TextError) Error() string { return "slock: text command: " + e.Msg }

var (
	errArgCount = &TextError{Msg: "Command Parse Args Count Error"}
	errArg      = &TextError{Msg: "Command Parse Args Error"}
)

// ParseTextLock builds the frame of a text `LOCK key [opt val]...`, `UNLOCK key [opt
// val]...` or `PUSH key [opt val]...` (args[0] is the command name) into f, and the data
// record, if an option asks for one, into buf (f.Data is a view of it). newID supplies a
// fresh LockId and RequestId. will reports `WILL 1`.
//
// Unlike the reference, the options after EXECUTE belong to the inner command only, and
// FLAG keeps the data bit of data options given before it.
func ParseTextLock(args [][]byte, t *Text, newID func() [16]byte, f *slock.Frame, buf []byte) (will bool, out []byte, err error) {
	if len(args) < 2 || len(args)%2 != 0 {
		return false, buf, errArgCount
	}
	*f = slock.Frame{Type: slock.TypeLock, RequestID: newID(), DB: t.DB, Key: t.KeyID(args[1]),
		Timeout: t.Timeout, TimeoutFlag: t.TimeoutFlag, Expried: 120}
	if resp.Is(args[0], "UNLOCK") {
		f.Type = slock.TypeUnlock
		f.LockID = t.LastLockID
	} else {
		f.LockID = newID()
	}
	return parseTextOptions(args[2:], t, newID, f, buf)
}

// parseTextOptions applies `opt val` pairs to f; EXECUTE consumes the rest as the inner
// command.
func parseTextOptions(opts [][]byte, t *Text, newID func() [16]byte, f *slock.Frame, buf []byte) (will bool, out []byte, err error) {
	start := len(buf)
	hasData := false
	for i := 0; i+1 < len(opts); i += 2 {
		name, val := opts[i], opts[i+1]
		switch {
		case resp.Is(name, "LOCK_ID"):
			f.LockID = slock.TextID(val)
		case resp.Is(name, "FLAG"):
			n, ok := textUint(val, 0xff)
			if !ok {
				return false, buf, errArg
			}
			f.Flag = uint8(n)
		case resp.Is(name, "TIMEOUT"):
			n, ok := textUint(val, 0xffffffff)
			if !ok {
				return false, buf, errArg
			}
			f.Timeout, f.TimeoutFlag = uint16(n), uint16(n>>16)
		case resp.Is(name, "EXPRIED"):
			n, ok := textUint(val, 0xffffffff)
			if !ok {
				return false, buf, errArg
			}
			f.Expried, f.ExpriedFlag = uint16(n), uint16(n>>16)
		case resp.Is(name, "COUNT"):
			n, ok := resp.ParseInt(val)
			if !ok {
				return false, buf, errArg
			}
			if n > 0 {
				n--
			}
			f.Count = uint16(n)
		case resp.Is(name, "RCOUNT"):
			n, ok := resp.ParseInt(val)
			if !ok {
				return false, buf, errArg
			}
			if n > 0 {
				n--
			}
			f.Rcount = uint8(n)
		case resp.Is(name, "WILL"):
			will = len(val) > 0 && val[0] != '0'
		case resp.Is(name, "SET"), resp.Is(name, "APPEND"), resp.Is(name, "PUSH"):
			cmd := uint8(slock.DataSet)
			if resp.Is(name, "APPEND") {
				cmd = slock.DataAppend
			} else if resp.Is(name, "PUSH") {
				cmd = slock.DataPush
			}
			buf, hasData = slock.AppendDataRecord(buf[:start], cmd, slock.StageCurrent, 0, nil, val), true
		case resp.Is(name, "UNSET"):
			buf, hasData = slock.AppendDataRecord(buf[:start], slock.DataUnset, slock.StageCurrent, 0, nil, nil), true
		case resp.Is(name, "INCR"):
			n, ok := resp.ParseInt(val)
			if !ok {
				return false, buf, errArg
			}
			var v [8]byte
			binary.LittleEndian.PutUint64(v[:], uint64(n))
			buf, hasData = slock.AppendDataRecord(buf[:start], slock.DataIncr, slock.StageCurrent, 0, nil, v[:]), true
		case resp.Is(name, "SHIFT"), resp.Is(name, "POP"):
			n, ok := textUint(val, 0xffffffff)
			if !ok {
				return false, buf, errArg
			}
			cmd := uint8(slock.DataShift)
			if resp.Is(name, "POP") {
				cmd = slock.DataPop
			}
			var v [4]byte
			binary.LittleEndian.PutUint32(v[:], uint32(n))
			buf, hasData = slock.AppendDataRecord(buf[:start], cmd, slock.StageCurrent, 0, nil, v[:]), true
		case resp.Is(name, "EXECUTE"):
			// EXECUTE stage LOCK|UNLOCK key [opts]...: the rest is the inner command.
			rest := opts[i+1:]
			if len(rest) < 3 || len(rest)%2 != 1 {
				return false, buf, errArgCount
			}
			stage := uint8(slock.StageCurrent)
			switch {
			case resp.Is(rest[0], "UNLOCK"):
				stage = slock.StageUnlock
			case resp.Is(rest[0], "TIMEOUT"):
				stage = slock.StageTimeout
			case resp.Is(rest[0], "EXPRIED"):
				stage = slock.StageExpried
			}
			var inner slock.Frame
			if _, _, err = ParseTextLock(rest[1:], t, newID, &inner, nil); err != nil {
				return false, buf, err
			}
			frame := slock.AppendLockRequest(nil, &inner) // an EXECUTE is rare: its own buffer
			buf, hasData = slock.AppendDataRecord(buf[:start], slock.DataExecute, stage, 0, nil, frame), true
			i = len(opts) // consumed
		default:
			return false, buf, &TextError{Msg: "Unknown Command Option " + strconv.Quote(string(name))}
		}
	}
	if hasData {
		f.Flag |= slock.FlagData
		f.Data = buf[start:]
	}
	return will, buf, nil
}

// textUint parses a decimal argument no larger than limit.
func textUint(b []byte, limit int64) (int64, bool) {
	n, ok := resp.ParseInt(b)
	if !ok || n < 0 || n > limit {
		return 0, false
	}
	return n, true
}

// AppendTextLockReply writes a text LOCK/UNLOCK reply: an array of 12 bulk strings, 2 more
// with DATA when the reply carries a value (rendered by its type: NUMBER as an integer,
// ARRAY as an array of its non-empty elements, KV as an array k1, v1, ..., else a bulk
// string), and 2 more, last, with TOKEN and the holder's fencing token when a LOCK granted
// (or reentered) it.
func AppendTextLockReply(dst []byte, r *slock.LockReply) []byte {
	var data slock.Data
	hasData := false
	if r.Value != nil {
		if d, err := slock.ParseDataRecord(r.Value); err == nil && d.Cmd != slock.DataUnset {
			data, hasData = d, true
		}
	}
	n := 12
	if hasData {
		n += 2
	}
	token := r.Token != 0 && r.Type == slock.TypeLock && r.Result == slock.ResultOK
	if token {
		n += 2
	}
	dst = resp.AppendArray(dst, n)
	dst = resp.AppendBulkInt(dst, int64(r.Result))
	dst = resp.AppendBulkString(dst, r.Result.String())
	dst = resp.AppendBulkString(dst, "LOCK_ID")
	var hex [32]byte
	dst = resp.AppendBulk(dst, slock.AppendHexID(hex[:0], r.LockID))
	dst = resp.AppendBulkString(dst, "LCOUNT")
	dst = resp.AppendBulkInt(dst, int64(r.Lcount))
	dst = resp.AppendBulkString(dst, "COUNT")
	dst = resp.AppendBulkInt(dst, int64(uint16(r.Count+1)))
	dst = resp.AppendBulkString(dst, "LRCOUNT")
	dst = resp.AppendBulkInt(dst, int64(r.Lrcount))
	dst = resp.AppendBulkString(dst, "RCOUNT")
	dst = resp.AppendBulkInt(dst, int64(uint8(r.Rcount+1)))
	if hasData {
		dst = resp.AppendBulkString(dst, "DATA")
		dst = AppendTextData(dst, &data)
	}
	if token {
		dst = resp.AppendBulkString(dst, "TOKEN")
		dst = resp.AppendBulk(dst, strconv.AppendUint(hex[:0], r.Token, 10))
	}
	return dst
}

// AppendTextData renders a value record's value by its type.
func AppendTextData(dst []byte, d *slock.Data) []byte {
	switch {
	case d.Flag&slock.DataNumber != 0:
		return resp.AppendInt(dst, slock.Number(d.Value))
	case d.Flag&slock.DataArray != 0: // NextElem skips zero-length elements
		dst = resp.AppendArray(dst, slock.ArrayLen(d.Value))
		for v := d.Value; ; {
			e, rest, ok := slock.NextElem(v)
			if !ok {
				return dst
			}
			dst, v = resp.AppendBulk(dst, e), rest
		}
	case d.Flag&slock.DataKV != 0:
		dst = resp.AppendArray(dst, 2*slock.KVLen(d.Value))
		for v := d.Value; ; {
			k, val, rest, ok := slock.NextPair(v)
			if !ok {
				break
			}
			dst = resp.AppendBulk(resp.AppendBulk(dst, k), val)
			v = rest
		}
		return dst
	}
	return resp.AppendBulk(dst, d.Value)
}
