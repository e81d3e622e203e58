package rediscmd

import (
	"bytes"
	"strconv"

	"github.com/zeebo/xxh3"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file parses the compare-and-set commands (Redis 8.4's DELEX, DIGEST and SET's IF*
// options, Valkey 9's DELIFEQ) and Redis 7's GETDEL and GETEX, and decides their conditions.
// The server compares and runs the lock command in one loop step, so each is atomic.

// Cond is the condition of DELEX, DELIFEQ or SET ... IF*.
type Cond uint8

// Conditions.
const (
	CondNone     Cond = iota
	CondEq            // IFEQ v: the value is v
	CondNe            // IFNE v: the value is not v (or there is none)
	CondDigestEq      // IFDEQ d: the value's DIGEST is d
	CondDigestNe      // IFDNE d: it is not (or there is no value)
)

// condOf returns the condition option o names (any case), CondNone for another word.
func condOf(o []byte) Cond {
	switch {
	case resp.Is(o, "IFEQ"):
		return CondEq
	case resp.Is(o, "IFNE"):
		return CondNe
	case resp.Is(o, "IFDEQ"):
		return CondDigestEq
	case resp.Is(o, "IFDNE"):
		return CondDigestNe
	}
	return CondNone
}

// parseDelEx parses DELEX key [IFEQ v|IFNE v|IFDEQ d|IFDNE d].
func parseDelEx(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	switch n := len(args); {
	case n < 2:
		return buf, arity(kv.Name)
	case n == 4 && condOf(args[2]) != CondNone:
		kv.Cond, kv.CondArg = condOf(args[2]), args[3]
	case n != 2:
		return buf, errSyntax
	}
	kv.Keys = args[1:2]
	kv.KeyFrame(t, newID, 0)
	return buf, nil
}

// parseDelIfEq parses DELIFEQ key value: DELEX key IFEQ value.
func parseDelIfEq(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 3 {
		return buf, arity(kv.Name)
	}
	kv.Cond, kv.CondArg = CondEq, args[2]
	kv.Keys = args[1:2]
	kv.KeyFrame(t, newID, 0)
	return buf, nil
}

// parseGetEx parses GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST].
func parseGetEx(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	n := len(args)
	if n < 2 {
		return buf, arity(kv.Name)
	}
	kv.Keys = args[1:2]
	var unit string
	var exp []byte
	for i := 2; i < n; i++ {
		o := args[i]
		switch {
		case resp.Is(o, "PERSIST") && unit == "":
			kv.Persist = true
		case expiryUnit(o) != "" && !kv.Persist && (unit == "" || unit == expiryUnit(o)) && i+1 < n:
			unit, exp = expiryUnit(o), args[i+1]
			i++
		default:
			return buf, errSyntax
		}
	}
	switch {
	case kv.Persist:
		kv.lockFrame(t, newID, flagUpdate, 0, resetExpiry, unlimitedFlag)
	case exp != nil:
		// As Redis 7: the value is checked once the key is known to be a string.
		ms, err := setExpiry(exp, unit, kv.Name, nowMs)
		if err != nil {
			kv.Late = err
			return buf, nil
		}
		if t.Keyspace {
			kv.ExpireAt = nowMs + ms
			if ms < 0 {
				kv.ExpireAt = 1 // past: the key goes at once
			}
			return buf, nil
		}
		e, ef := ExpiryMs(ms) // ms -1: a time past, the key expires at once
		kv.lockFrame(t, newID, flagUpdate, 0, e, ef|kvPersistFlag)
		if ms > 0 {
			kv.ExpireAt = nowMs + ms
		}
	}
	return buf, nil
}

// CondHolds reports whether kv's condition holds for the value record rec (nil: no key).
// IFNE and IFDNE hold for a missing key, IFEQ and IFDEQ do not. Digests compare without
// regard to case. It allocates nothing.
func (kv *KV) CondHolds(rec []byte) bool {
	var scratch [24]byte
	v, ok := StringOf(rec, scratch[:0])
	return kv.CondHoldsValue(v, ok)
}

// CondHoldsValue is CondHolds for a string value v itself (ok: the key has one), as the
// keyspace gives it.
func (kv *KV) CondHoldsValue(v []byte, ok bool) bool {
	switch kv.Cond {
	case CondEq:
		return ok && bytes.Equal(v, kv.CondArg)
	case CondNe:
		return !ok || !bytes.Equal(v, kv.CondArg)
	case CondDigestEq, CondDigestNe:
		var d [16]byte
		eq := ok && bytes.EqualFold(appendDigest(d[:0], v), kv.CondArg)
		return eq == (kv.Cond == CondDigestEq)
	}
	return true
}

// AppendDigestOf appends DIGEST's reply for the string value v.
func AppendDigestOf(dst, v []byte) []byte {
	var d [16]byte
	return resp.AppendBulk(dst, appendDigest(d[:0], v))
}

// StringOf returns the string a value record holds, as GET answers it (a NUMBER's decimal
// digits, appended to scratch; an ARRAY's first element), and false for no value.
func StringOf(rec, scratch []byte) ([]byte, bool) {
	if rec == nil {
		return nil, false
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return nil, false
	}
	switch {
	case d.Flag&slock.DataNumber != 0:
		return strconv.AppendInt(scratch, slock.Number(d.Value), 10), true
	case d.Flag&slock.DataArray != 0:
		e, _, ok := slock.NextElem(d.Value)
		return e, ok
	}
	return d.Value, true
}

// appendDigest appends DIGEST of v: its XXH3 64-bit hash (seed 0) as 16 lower-case hex
// digits.
func appendDigest(dst, v []byte) []byte {
	const hexDigits = "0123456789abcdef"
	h := xxh3.Hash(v)
	for i := 60; i >= 0; i -= 4 {
		dst = append(dst, hexDigits[h>>uint(i)&0xf])
	}
	return dst
}

// AppendDigest appends DIGEST's reply for the value record rec: a bulk string of its
// digest, nil for no value.
func AppendDigest(dst, rec []byte) []byte {
	var scratch [24]byte
	v, ok := StringOf(rec, scratch[:0])
	if !ok {
		return resp.AppendNull(dst)
	}
	var d [16]byte
	return resp.AppendBulk(dst, appendDigest(d[:0], v))
}
