package rediscmd

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file maps slock's Redis key/value commands onto Lock and Unlock frames
// (slock-protocol.md §8.2) and renders their results as ordinary Redis replies.
// A key is a lock whose LockId is the key itself, so any connection may read, expire or
// delete it, as in Redis (with CLIENT SLOCK ON, SETNX and SET NX hold it under a fresh
// LockId instead, a mutex as slock's); its value is the lock's value record, carrying the key text as its KEY
// property. The commands that do not run a lock (TTL, KEYS, DBSIZE, ...) are the
// server's; Op tells them apart.

// Op is a key/value command.
type Op uint8

// Key/value commands. OpNone is "not a key/value command".
const (
	OpNone Op = iota
	OpSet
	OpGetSet
	OpSetNX
	OpGet
	OpExists
	OpType
	OpStrlen
	OpIncr // INCR, INCRBY, DECR, DECRBY: the store adds KV.Delta to the value
	OpAppend
	OpDel
	OpExpire  // EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT
	OpPersist // PERSIST
	// Served by the server without a lock command.
	OpTTL
	OpPTTL
	OpKeys
	OpScan
	OpDBSize
	OpFlushDB
	OpFlushAll
	// Compare-and-set and friends (cas.go).
	OpDelEx  // DELEX key [IFEQ v|IFNE v|IFDEQ d|IFDNE d], DELIFEQ key v: a DEL, if KV.Cond holds
	OpDigest // DIGEST key: served by the server, no lock command
	OpGetDel // GETDEL key: a DEL answering the value
	OpGetEx  // GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]: GET, and an expiry change
)

// KV is a parsed key/value command.
type KV struct {
	Op    Op
	Name  string      // the command's canonical name, for error texts
	Keys  [][]byte    // the key arguments (DEL and EXISTS take several; views into the args)
	Value []byte      // SET, GETSET, SETNX, SETEX, APPEND: the value; KEYS, SCAN: the pattern
	Delta int64       // INCR family: the signed delta
	Frame slock.Frame // the Lock or Unlock to run for Keys[0] (KeyFrame rebuilds it for the others)

	// ExpireAt is when (Unix ms) the key expires, exactly, for SET EX/PX, SETEX, PSETEX
	// and the EXPIRE family; 0: as Frame says (no expiry, or none asked). Frame.Expried
	// cannot say it: 16 bits with a unit cap it near 45 days and round it. The server
	// passes it to the store with the frame (store.LockCommand.ExpireAt).
	ExpireAt int64

	// For SET: the options given.
	NX, XX, KeepTTL bool

	// Fence is SET's FENCE token (0: an unfenced write): the write is refused if the key
	// has seen a higher token (fence.go).
	Fence uint64

	// For the EXPIRE family: when (Unix ms) the key is to expire, and the conditions of
	// its options NX, XX, GT, LT (ExpireApplies).
	When  int64
	ExpIf ExpireIf

	// Numbers renders a NUMBER value (a counter) as an integer reply in GET, MGET and
	// GETSET, as slock does (Text.Slock); else as a bulk string of its decimal digits.
	Numbers bool

	// Cond is the condition of DELEX, DELIFEQ or SET's IFEQ, IFNE, IFDEQ, IFDNE, and
	// CondArg its value or digest (cas.go).
	Cond    Cond
	CondArg []byte

	// Late is an error of GETEX's expiry value, which Redis answers only once the key is
	// known to exist and be a string.
	Late error
	// Persist: GETEX's PERSIST.
	Persist bool
}

// LookupKV returns the key/value command named name (any case) and its canonical name;
// OpNone and "" for another name.
func LookupKV(name []byte) (Op, string) {
	s := Lookup(name)
	if s == nil || s.Cmd != CmdKV {
		return OpNone, ""
	}
	return s.Op, s.Name
}

// Expiry flags and values of key/value locks.
const (
	unlimitedFlag  = 0x4000 | 0x0100 | 0x2000 // never expires, persist at once, keep counters on update
	keepExpiry     = 0xFFFF                   // with 0x4000 in an Update: the holder's expiry stays as it is
	resetExpiry    = 0x7FFF                   // with 0x4000 in an Update: the holder never expires from now on
	kvPersistFlag  = 0x0100 | 0x2000          // flags of a key/value lock that expires
	kvNoPersist    = 0x0200                   // NAOF: never written to the append-only log
	kvWaitUnlocked = 0x0200                   // TimeoutFlag for XX: wait while the key is unlocked
	kvRequireAck   = 0x1000
	flagShow       = 0x01
	flagUpdate     = 0x02
	unlockHead     = 0x01
	unitMillis     = 0x0400
	unitMinutes    = 0x0040
)

// kvErr is a text command's error reply (without the leading '-').
type kvErr = TextError

func arity(name string) error {
	return &kvErr{Msg: "wrong number of arguments for '" + lower(name) + "' command"}
}

var (
	errSyntax   = &kvErr{Msg: "syntax error"}
	errNotInt   = &kvErr{Msg: "value is not an integer or out of range"}
	errExpire   = &kvErr{Msg: "invalid expire time in 'set' command"}
	errOverflow = &kvErr{Msg: "increment or decrement would overflow"}

	errDecrOverflow = &kvErr{Msg: "decrement would overflow"} // DECRBY of -2^63
)

// ErrNotInteger and ErrOverflow are the Redis errors of the INCR family, for the server's
// answers to the store's results.
var (
	ErrNotInteger error = errNotInt
	ErrOverflow   error = errOverflow
)

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ParseKV parses the key/value command args (args[0] is its name, op and name from
// LookupKV) as Parse does, for a connection in state t at nowMs (Unix milliseconds, for
// PEXPIREAT and EXPIREAT), into kv. The lock command for the first key, with its data
// record built into buf, is in kv.Frame; newID supplies RequestIds and fresh LockIds.
// Errors are *TextError with the Redis error text.
func ParseKV(args [][]byte, op Op, name string, t *Text, nowMs int64, newID func() [16]byte, kv *KV, buf []byte) ([]byte, error) {
	r := Request{Spec: cmdIndex[name]}
	if r.Spec == nil || r.Spec.Cmd != CmdKV || r.Spec.Op != op {
		*kv = KV{Op: op, Name: name, Numbers: t.Slock}
		return buf, &kvErr{Msg: "Unknown Command"}
	}
	buf, err := r.Spec.parse(&r, args, t, nowMs, newID, buf)
	*kv = r.KV
	return buf, err
}

// startKV begins the parse of a key/value command: r.KV, reset, for r.Spec.
func (r *Request) startKV(t *Text) *KV {
	r.KV = KV{Op: r.Spec.Op, Name: r.Spec.Name, Numbers: t.Slock}
	return &r.KV
}

// parseSet parses SET key value [NX|XX|IF* v] [GET] [EX|PX|EXAT|PXAT t|KEEPTTL] and
// tallyd's options (ACK, FENCE, NAOF, TX, PTX).
func parseSet(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	n := len(args)
	if n < 3 {
		return buf, arity(kv.Name)
	}
	kv.Keys, kv.Value = args[1:2], args[2]
	var ms int64
	var tf, ef uint16
	var timeout uint16
	var unit string // EX, PX, EXAT or PXAT
	var exp []byte  // its argument
	get := false
	for i := 3; i < n; i++ {
		o := args[i]
		switch {
		case resp.Is(o, "NX") && !kv.XX && kv.Cond == CondNone:
			kv.NX = true
		case resp.Is(o, "XX") && !kv.NX && kv.Cond == CondNone:
			kv.XX = true
			tf |= kvWaitUnlocked
		case resp.Is(o, "GET"):
			get = true
		case condOf(o) != CondNone && !kv.NX && !kv.XX && kv.Cond == CondNone && i+1 < n:
			// Redis 8.4: set only if the key's value (or its digest) is, or is not, this.
			kv.Cond, kv.CondArg = condOf(o), args[i+1]
			i++
		case resp.Is(o, "KEEPTTL") && unit == "":
			kv.KeepTTL = true
		case resp.Is(o, "ACK"):
			tf |= kvRequireAck
		case resp.Is(o, "FENCE") && i+1 < n:
			v, ok := resp.ParseInt(args[i+1])
			if !ok || v <= 0 {
				return buf, errFenceToken
			}
			kv.Fence = uint64(v)
			i++
		case resp.Is(o, "NAOF"):
			ef |= kvNoPersist
		case expiryUnit(o) != "" && !kv.KeepTTL && (unit == "" || unit == expiryUnit(o)) && i+1 < n:
			// As Redis 7: one of them, given again if at all; its value is checked
			// once every option is known to be one.
			unit, exp = expiryUnit(o), args[i+1]
			i++
		case (resp.Is(o, "TX") || resp.Is(o, "PTX")) && i+1 < n:
			v, ok := resp.ParseInt(args[i+1])
			if !ok {
				return buf, errNotInt
			}
			if v <= 0 {
				return buf, errExpire
			}
			switch {
			case resp.Is(o, "TX"):
				timeout = uint16(min(v, 0xffff))
			default:
				timeout = uint16(min(max(v/1000, 1), 0xffff))
			}
			i++
		default:
			return buf, errSyntax
		}
	}
	if get {
		// Answers the value before, as GETSET does; with NX (Redis 7) the key is set
		// only if it had none, and either way the old value is the answer.
		kv.Op = OpGetSet
	}
	if exp != nil {
		var err error
		if ms, err = setExpiry(exp, unit, kv.Name, nowMs); err != nil {
			return buf, err
		}
	}
	if kv.Cond != CondNone {
		timeout = 0 // compared and set in one step: it never waits
	}
	return kv.setFrame(t, newID, buf, ms, nowMs, tf, ef, timeout)
}

// parseSetEx parses SETEX key seconds value.
func parseSetEx(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).setEx(args, true, t, nowMs, newID, buf)
}

// parsePSetEx parses PSETEX key milliseconds value.
func parsePSetEx(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).setEx(args, false, t, nowMs, newID, buf)
}

// setEx parses SETEX (secs) or PSETEX into kv.
func (kv *KV) setEx(args [][]byte, secs bool, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	if len(args) != 4 {
		return buf, arity(kv.Name)
	}
	ms, err := expireMs(args[2], secs, kv.Name, nowMs)
	if err != nil {
		return buf, err
	}
	kv.Keys, kv.Value = args[1:2], args[3]
	return kv.setFrame(t, newID, buf, ms, nowMs, 0, 0, 0)
}

// parseGetSet parses GETSET key value.
func parseGetSet(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 3 {
		return buf, arity(kv.Name)
	}
	kv.Keys, kv.Value = args[1:2], args[2]
	return kv.setFrame(t, newID, buf, 0, 0, 0, 0, 0)
}

// parseSetNX parses SETNX key value.
func parseSetNX(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 3 {
		return buf, arity(kv.Name)
	}
	kv.Keys, kv.Value = args[1:2], args[2]
	kv.NX = true
	var timeout uint16 // as Redis: a taken key answers 0 at once
	if t.Slock {
		timeout = t.Timeout // slock waits for the key
	}
	return kv.setFrame(t, newID, buf, 0, 0, 0, 0, timeout)
}

// parseAppend parses APPEND key value.
func parseAppend(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 3 {
		return buf, arity(kv.Name)
	}
	kv.Keys, kv.Value = args[1:2], args[2]
	kv.lockFrame(t, newID, flagUpdate|slock.FlagData, 0, keepExpiry, unlimitedFlag)
	return kv.dataRecord(buf, slock.DataAppend, 0, kv.Value)
}

// parseKey parses GET, TYPE, STRLEN and GETDEL: one key.
func parseKey(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 2 {
		return buf, arity(kv.Name)
	}
	kv.Keys = args[1:2]
	kv.KeyFrame(t, newID, 0)
	return buf, nil
}

// parseKeyList parses EXISTS, DEL and UNLINK: one key or more.
func parseKeyList(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) < 2 {
		return buf, arity(kv.Name)
	}
	kv.Keys = args[1:]
	kv.KeyFrame(t, newID, 0)
	return buf, nil
}

// parseIncr parses INCR key [delta] (slock takes an optional delta).
func parseIncr(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).incr(args, false, false, t, newID, buf)
}

// parseDecr parses DECR key [delta].
func parseDecr(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).incr(args, false, true, t, newID, buf)
}

// parseIncrBy parses INCRBY key delta.
func parseIncrBy(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).incr(args, true, false, t, newID, buf)
}

// parseDecrBy parses DECRBY key delta.
func parseDecrBy(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).incr(args, true, true, t, newID, buf)
}

// incr parses the INCR family into kv: by, the delta is required (INCRBY, DECRBY); down,
// it is subtracted (DECR, DECRBY).
func (kv *KV) incr(args [][]byte, by, down bool, t *Text, newID func() [16]byte, buf []byte) ([]byte, error) {
	n := len(args)
	if by {
		if n != 3 {
			return buf, arity(kv.Name)
		}
		d, ok := resp.ParseInt(args[2])
		if !ok {
			return buf, errNotInt
		}
		kv.Delta = d
	} else {
		if n != 2 && n != 3 {
			return buf, arity(kv.Name)
		}
		kv.Delta = 1
		if n == 3 {
			d, ok := resp.ParseInt(args[2])
			if !ok {
				return buf, errNotInt
			}
			kv.Delta = d
		}
	}
	if down {
		if kv.Delta == -1<<63 {
			return buf, errDecrOverflow
		}
		kv.Delta = -kv.Delta
	}
	kv.Keys = args[1:2]
	// The store adds Delta to the key's value and stores the sum in place of the 0 of
	// this NUMBER record (store.LockCommand.Add), keeping its KEY property.
	kv.lockFrame(t, newID, flagUpdate|slock.FlagData, 0, keepExpiry, unlimitedFlag)
	return kv.SetNumber(buf, 0)
}

// parseExpire parses EXPIRE key seconds [NX|XX|GT|LT].
func parseExpire(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).expire(args, true, false, t, nowMs, newID, buf)
}

// parsePExpire parses PEXPIRE key milliseconds [NX|XX|GT|LT].
func parsePExpire(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).expire(args, false, false, t, nowMs, newID, buf)
}

// parseExpireAt parses EXPIREAT key unix-seconds [NX|XX|GT|LT].
func parseExpireAt(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).expire(args, true, true, t, nowMs, newID, buf)
}

// parsePExpireAt parses PEXPIREAT key unix-milliseconds [NX|XX|GT|LT].
func parsePExpireAt(r *Request, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	return r.startKV(t).expire(args, false, true, t, nowMs, newID, buf)
}

// expire parses the EXPIRE family into kv: secs, the time is in seconds; at, it is a Unix
// time rather than one from nowMs.
func (kv *KV) expire(args [][]byte, secs, at bool, t *Text, nowMs int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	if len(args) < 3 {
		return buf, arity(kv.Name)
	}
	if err := kv.expireOptions(args[3:]); err != nil {
		return buf, err
	}
	// As Redis 7 (expireGenericCommand): seconds must not overflow as milliseconds,
	// nor the time asked plus its base (now, 0 for the AT forms); a time past
	// expires the key at once.
	v, ok := resp.ParseInt(args[2])
	if !ok {
		return buf, errNotInt
	}
	if secs {
		if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
			return buf, expireErr(kv.Name)
		}
		v *= 1000
	}
	var base int64
	if !at {
		base = nowMs
	}
	if v > math.MaxInt64-base {
		return buf, expireErr(kv.Name)
	}
	when := v + base
	kv.When = when
	kv.Keys = args[1:2]
	if when <= nowMs {
		e, ef := ExpiryMs(0)
		kv.lockFrame(t, newID, flagUpdate, 0, e, ef|kvPersistFlag)
		return buf, nil
	}
	e, ef := ExpiryMs(when - nowMs)
	kv.lockFrame(t, newID, flagUpdate, 0, e, ef|kvPersistFlag)
	kv.ExpireAt = when
	return buf, nil
}

// parsePersist parses PERSIST key.
func parsePersist(r *Request, args [][]byte, t *Text, _ int64, newID func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if n := len(args); n != 2 && n != 3 { // the reference wants a dummy third argument; either works here
		return buf, arity(kv.Name)
	}
	kv.Keys = args[1:2]
	kv.lockFrame(t, newID, flagUpdate, 0, resetExpiry, unlimitedFlag)
	return buf, nil
}

// parseKeyOnly parses TTL, PTTL and DIGEST: one key, and no lock command.
func parseKeyOnly(r *Request, args [][]byte, t *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 2 {
		return buf, arity(kv.Name)
	}
	kv.Keys = args[1:2]
	return buf, nil
}

// parseKeys parses KEYS pattern.
func parseKeys(r *Request, args [][]byte, t *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 2 {
		return buf, arity(kv.Name)
	}
	kv.Value = args[1]
	return buf, nil
}

// parseDBSize parses DBSIZE.
func parseDBSize(r *Request, args [][]byte, t *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	kv := r.startKV(t)
	if len(args) != 1 {
		return buf, arity(kv.Name)
	}
	return buf, nil
}

// parseFlush parses FLUSHDB and FLUSHALL [ASYNC|SYNC].
func parseFlush(r *Request, args [][]byte, t *Text, _ int64, _ func() [16]byte, buf []byte) ([]byte, error) {
	r.startKV(t)
	if n := len(args); n > 2 || n == 2 && !resp.Is(args[1], "ASYNC") && !resp.Is(args[1], "SYNC") {
		return buf, errSyntax
	}
	return buf, nil
}

// expiryUnit returns SET's expiry option o in upper case: EX, PX, EXAT or PXAT; "" if it
// is none of them.
func expiryUnit(o []byte) string {
	for _, u := range [...]string{"EX", "PX", "EXAT", "PXAT"} {
		if resp.Is(o, u) {
			return u
		}
	}
	return ""
}

// setExpiry parses the argument of SET's expiry option unit (expiryUnit) into the
// milliseconds from nowMs until the key expires, as Redis 7 does
// (getExpireMillisecondsOrReply); -1: a time past, the key expires at once.
func setExpiry(arg []byte, unit, name string, nowMs int64) (int64, error) {
	if unit == "EX" || unit == "PX" {
		return expireMs(arg, unit == "EX", name, nowMs)
	}
	v, ok := resp.ParseInt(arg)
	if !ok {
		return 0, errNotInt
	}
	if v <= 0 || unit == "EXAT" && v > math.MaxInt64/1000 {
		return 0, expireErr(name)
	}
	if unit == "EXAT" {
		v *= 1000
	}
	if v <= nowMs {
		return -1, nil
	}
	return v - nowMs, nil
}

// setFrame builds the Lock of SET and its variants: Update with a SET record, expiring
// ms after nowMs exactly (0: never, or with KeepTTL as the key did; -1: at once;
// setExpiry checked it), or with NX no Update: the key's LockId, so that a key that exists
// answers LockedError (AppendKVReply renders it as not set), or with CLIENT SLOCK ON a
// fresh LockId, slock's mutex that only its holder deletes.
func (kv *KV) setFrame(t *Text, newID func() [16]byte, buf []byte, ms, nowMs int64, tf, ef, timeout uint16) ([]byte, error) {
	if t.Keyspace {
		switch {
		case ms > 0:
			kv.ExpireAt = nowMs + ms
		case ms < 0:
			kv.ExpireAt = 1 // past: the key goes at once
		}
		return buf, kv.keyFits()
	}
	e, f := uint16(resetExpiry), uint16(unlimitedFlag)
	switch {
	case ms > 0:
		e, f = ExpiryMs(ms)
		f |= kvPersistFlag
	case ms < 0:
		e, f = ExpiryMs(0)
		f |= kvPersistFlag
	case kv.KeepTTL:
		e = keepExpiry
	}
	flag := uint8(flagUpdate | slock.FlagData)
	if kv.NX {
		flag = slock.FlagData
	}
	kv.lockFrame(t, newID, flag, timeout, e, f|ef)
	kv.Frame.TimeoutFlag |= tf
	if kv.NX && t.Slock {
		kv.Frame.LockID = newID()
	}
	if ms > 0 {
		kv.ExpireAt = nowMs + ms
	}
	return kv.dataRecord(buf, slock.DataSet, 0, kv.Value)
}

// expireMs parses the expiry arg of SET EX/PX, SETEX or PSETEX (in seconds if secs) of
// command name, as Redis 7 does (getExpireMillisecondsOrReply): an integer, above 0, whose
// milliseconds and their sum with nowMs do not overflow.
func expireMs(arg []byte, secs bool, name string, nowMs int64) (int64, error) {
	v, ok := resp.ParseInt(arg)
	if !ok {
		return 0, errNotInt
	}
	if v <= 0 || secs && v > math.MaxInt64/1000 {
		return 0, expireErr(name)
	}
	if secs {
		v *= 1000
	}
	if v > math.MaxInt64-nowMs {
		return 0, expireErr(name)
	}
	return v, nil
}

// expireErr is Redis's error for an expiry out of range in command name.
func expireErr(name string) error {
	return &kvErr{Msg: "invalid expire time in '" + lower(name) + "' command"}
}

// lockFrame sets kv.Frame to a Lock on Keys[0] with LockId = the key.
func (kv *KV) lockFrame(t *Text, newID func() [16]byte, flag uint8, timeout, expried, expriedFlag uint16) {
	if t.Keyspace {
		return // no lock command (Text.Keyspace)
	}
	id := t.KeyID(kv.Keys[0])
	kv.Frame = slock.Frame{Type: slock.TypeLock, RequestID: newID(), Flag: flag, DB: t.DB, LockID: id, Key: id,
		Timeout: timeout, Expried: expried, ExpriedFlag: expriedFlag, Count: 0, Rcount: 0}
}

// dataRecord appends the data record cmd (data flag flag) of value, with the key as its KEY
// property, to buf and attaches it to kv.Frame.
func (kv *KV) dataRecord(buf []byte, cmd, flag uint8, value []byte) ([]byte, error) {
	key := kv.Keys[0]
	if err := kv.keyFits(); err != nil {
		return buf, err
	}
	if kv.Frame.Type == 0 {
		return buf, nil // no lock command (Text.Keyspace)
	}
	start := len(buf)
	props := [1]slock.Property{{Code: slock.PropKey, Value: key}}
	buf = slock.AppendDataRecord(buf, cmd, slock.StageCurrent, flag, props[:], value)
	kv.Frame.Flag |= slock.FlagData
	kv.Frame.Data = buf[start:]
	return buf, nil
}

// keyFits answers the error of a key name longer than the store keeps.
func (kv *KV) keyFits() error {
	if len(kv.Keys[0]) > 0xffff {
		return errKeyLong
	}
	return nil
}

var errKeyLong = &kvErr{Msg: "key longer than 65535 bytes"}

// SetPair sets kv to the SET of args[i] to args[i+1] (a pair of MSET or MSETNX), its data
// record built into buf.
func (kv *KV) SetPair(args [][]byte, i int, t *Text, newID func() [16]byte, buf []byte) ([]byte, error) {
	*kv = KV{Op: OpSet, Name: "MSET", Keys: args[i : i+1], Value: args[i+1]}
	return kv.setFrame(t, newID, buf, 0, 0, 0, 0, 0)
}

// GetKey sets kv to the GET of args[i] (a key of MGET).
func (kv *KV) GetKey(args [][]byte, i int, t *Text, newID func() [16]byte) {
	*kv = KV{Op: OpGet, Name: "MGET", Keys: args[i : i+1], Numbers: t.Slock}
	kv.KeyFrame(t, newID, 0)
}

// SetNumber makes kv.Frame (an INCR family Lock) store n as a NUMBER record, built into buf.
func (kv *KV) SetNumber(buf []byte, n int64) ([]byte, error) {
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], uint64(n))
	return kv.dataRecord(buf, slock.DataSet, slock.DataNumber, v[:])
}

// KeyFrame sets kv.Frame to the command for Keys[i] of GET, TYPE, STRLEN, EXISTS (a Show
// probe: Timeout 0, Expried 0) or DEL (an Unlock of the holder with the key as LockId, else
// the oldest).
func (kv *KV) KeyFrame(t *Text, newID func() [16]byte, i int) {
	if t.Keyspace {
		return // no lock command (Text.Keyspace)
	}
	id := t.KeyID(kv.Keys[i])
	kv.Frame = slock.Frame{Type: slock.TypeLock, RequestID: newID(), Flag: flagShow, DB: t.DB, LockID: id, Key: id}
	if kv.Op == OpDel || kv.Op == OpDelEx || kv.Op == OpGetDel {
		kv.Frame.Type, kv.Frame.Flag = slock.TypeUnlock, unlockHead
	}
}

// ExpiryMs returns the Expried and unit flag of an expiry ms milliseconds from now: in
// milliseconds up to 65,535 ms, then seconds (rounded up) up to 65,535 s, then minutes
// (rounded up, at most 65,534 minutes, about 45 days). 0 or less expires at once.
func ExpiryMs(ms int64) (uint16, uint16) {
	switch {
	case ms <= 0:
		return 0, unitMillis
	case ms <= 0xffff:
		return uint16(ms), unitMillis
	case ms <= 0xffff*1000:
		return uint16((ms + 999) / 1000), 0
	}
	return uint16(min((ms+59_999)/60_000, 0xfffe)), unitMinutes
}

// Int reads a value record as an integer, as INCR does: none is 0, a NUMBER its i64, a
// string its decimal text; anything else is ErrNotInteger.
func Int(rec []byte) (int64, error) {
	if rec == nil {
		return 0, nil
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return 0, nil
	}
	switch {
	case d.Flag&slock.DataNumber != 0:
		return slock.Number(d.Value), nil
	case d.Flag&(slock.DataArray|slock.DataKV) != 0:
		return 0, ErrNotInteger
	}
	n, ok := resp.ParseInt(d.Value)
	if !ok {
		return 0, ErrNotInteger
	}
	return n, nil
}

// AppendKVReply renders the result of kv's lock command (result, and the value record the
// reply carried: the key's value before the command, or nil; for the INCR family the value
// it made) as its Redis reply. DEL and EXISTS of several keys are counted by the caller
// (KVCount) instead.
func AppendKVReply(dst []byte, kv *KV, result slock.Result, value []byte) []byte {
	ok := kv.Applied(result)
	if kv.NX && result == slock.ResultLockedError {
		// NX under the key's LockId: the store refused the reentry, so the key exists
		// and nothing was set.
		switch kv.Op {
		case OpSet:
			return resp.AppendNull(dst)
		case OpSetNX:
			return resp.AppendInt(dst, 0)
		case OpGetSet: // SET ... NX GET: the value, nothing set
			return AppendValue(dst, value, kv.Numbers)
		}
	}
	switch kv.Op {
	case OpSet:
		switch {
		case ok:
			return resp.AppendSimple(dst, "OK")
		case result == slock.ResultTimeout:
			return resp.AppendNull(dst)
		}
	case OpGetSet:
		switch {
		case ok:
			return AppendValue(dst, value, kv.Numbers)
		case result == slock.ResultTimeout:
			return resp.AppendNull(dst)
		}
	case OpSetNX:
		switch {
		case ok:
			return resp.AppendInt(dst, 1)
		case result == slock.ResultTimeout:
			return resp.AppendInt(dst, 0)
		}
	case OpGet:
		if hash, _ := IsHash(value); hash && kv.Name != "MGET" { // MGET answers nil for a hash
			return AppendTextError(dst, ErrWrongType)
		}
		return AppendValue(dst, value, kv.Numbers)
	case OpType:
		return resp.AppendSimple(dst, TypeName(value))
	case OpStrlen:
		if hash, _ := IsHash(value); hash {
			return AppendTextError(dst, ErrWrongType)
		}
		return resp.AppendInt(dst, int64(Strlen(value)))
	case OpIncr:
		if ok {
			n, _ := Int(value)
			return resp.AppendInt(dst, n)
		}
	case OpAppend:
		switch {
		case ok:
			return resp.AppendInt(dst, int64(Strlen(value)+len(kv.Value)))
		case result == slock.ResultTimeout:
			return resp.AppendNull(dst)
		}
	case OpDel, OpExists, OpDelEx:
		if KVCount(kv.Op, result, value) {
			return resp.AppendInt(dst, 1)
		}
		return resp.AppendInt(dst, 0)
	case OpExpire, OpPersist:
		switch {
		case ok:
			return resp.AppendInt(dst, 1)
		case result == slock.ResultTimeout:
			return resp.AppendInt(dst, 0)
		}
	case OpGetDel:
		if result == slock.ResultOK {
			return AppendValue(dst, value, kv.Numbers)
		}
		return resp.AppendNull(dst) // not deleted: a LOCK under another LockId holds it
	case OpGetEx: // the value (of a key a LOCK holds under another LockId: its expiry unchanged)
		return AppendValue(dst, value, kv.Numbers)
	}
	return resp.AppendError(dst, "ERR "+strconv.Itoa(int(result)))
}

// Applied reports whether kv's lock command, with result, did what it asked: OK, or a
// reentry of the key's own LockId (an update) — except for NX, whose reentry means the key
// exists and nothing was set.
func (kv *KV) Applied(result slock.Result) bool {
	return result == slock.ResultOK || result == slock.ResultLockedError && !kv.NX
}

// KVCount reports whether one key of a command on several counts: DEL unlocked it, EXISTS
// found a value, SET (of MSET) set it.
func KVCount(op Op, result slock.Result, value []byte) bool {
	switch op {
	case OpDel, OpDelEx:
		return result == slock.ResultOK
	case OpSet:
		return result == slock.ResultOK || result == slock.ResultLockedError
	}
	return HasValue(value)
}

// HasValue reports whether a reply's value record is a value (not absent or UNSET).
func HasValue(rec []byte) bool {
	if rec == nil {
		return false
	}
	d, err := slock.ParseDataRecord(rec)
	return err == nil && d.Cmd != slock.DataUnset
}

// AppendValue renders a value record as GET does: a NUMBER as a bulk string of its decimal
// digits (with numbers, as slock does: an integer), an ARRAY as its first element, anything
// else as a bulk string; no value (or a hash, as MGET answers it) is a null bulk string.
func AppendValue(dst []byte, rec []byte, numbers bool) []byte {
	if rec == nil {
		return resp.AppendNull(dst)
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return resp.AppendNull(dst)
	}
	switch {
	case d.Flag&slock.DataNumber != 0 && numbers:
		return resp.AppendInt(dst, slock.Number(d.Value))
	case d.Flag&slock.DataNumber != 0:
		return AppendBulkInt(dst, slock.Number(d.Value))
	case d.Flag&slock.DataArray != 0:
		e, _, ok := slock.NextElem(d.Value)
		if !ok {
			return resp.AppendNull(dst)
		}
		return resp.AppendBulk(dst, e)
	case slock.DataKind(d.Flag) == slock.KindKV:
		return resp.AppendNull(dst)
	}
	return resp.AppendBulk(dst, d.Value)
}

// Strlen is STRLEN of a value record: a NUMBER's decimal digits, an ARRAY's first element's
// length, else the value's length; 0 for no value.
func Strlen(rec []byte) int {
	if rec == nil {
		return 0
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return 0
	}
	switch {
	case d.Flag&slock.DataNumber != 0:
		var b [24]byte
		return len(strconv.AppendInt(b[:0], slock.Number(d.Value), 10))
	case d.Flag&slock.DataArray != 0:
		e, _, _ := slock.NextElem(d.Value)
		return len(e)
	}
	return len(d.Value)
}

// KeyName returns a value record's KEY property: the key's text.
func KeyName(rec []byte) ([]byte, bool) {
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return nil, false
	}
	return slock.Prop(d.Props, slock.PropKey)
}

// Match reports whether name matches the Redis glob pattern (* ? [abc] [^a-z] \x). It
// takes O(len(pattern) x len(name)) steps at most, whatever the pattern: a star only ever
// resumes from the latest star.
func Match(pattern, name []byte) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			if pattern[p] == '*' {
				star, mark = p, n
				p++
				continue
			}
			if w, ok := matchOne(pattern[p:], name[n]); ok {
				p += w
				n++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		p, n = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchOne matches the pattern element at the start of pat, which is not '*', against c:
// the element's width and whether it matches.
func matchOne(pat []byte, c byte) (int, bool) {
	switch pat[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pat) > 1 {
			return 2, pat[1] == c
		}
		return 1, c == '\\'
	case '[':
		i := 1
		not := i < len(pat) && pat[i] == '^'
		if not {
			i++
		}
		hit := false
		for i < len(pat) && pat[i] != ']' {
			switch {
			case pat[i] == '\\' && i+1 < len(pat):
				hit = hit || pat[i+1] == c
				i += 2
			case i+2 < len(pat) && pat[i+1] == '-' && pat[i+2] != ']':
				lo, hi := pat[i], pat[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				hit = hit || lo <= c && c <= hi
				i += 3
			default:
				hit = hit || pat[i] == c
				i++
			}
		}
		if i < len(pat) {
			i++ // the ']'
		}
		return i, hit != not
	}
	return 1, pat[0] == c
}

// AppendBulkInt appends n as Redis answers GET of a counter: a bulk string of its decimal
// digits.
func AppendBulkInt(dst []byte, n int64) []byte {
	var b [20]byte
	d := strconv.AppendInt(b[:0], n, 10)
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(d)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, d...)
	return append(dst, '\r', '\n')
}

// NumberAppend makes kv, an APPEND, append to a counter as Redis does: to its decimal
// digits. When rec, the key's value, is a NUMBER, kv.Frame's data record becomes the SET
// of its digits followed by kv.Value (the expiry kept), appended to buf; else nothing
// changes.
func (kv *KV) NumberAppend(rec, buf []byte) ([]byte, error) {
	if rec == nil {
		return buf, nil
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset || d.Flag&slock.DataNumber == 0 {
		return buf, nil
	}
	start := len(buf)
	buf = strconv.AppendInt(buf, slock.Number(d.Value), 10)
	buf = append(buf, kv.Value...)
	return kv.dataRecord(buf, slock.DataSet, 0, buf[start:])
}

// ExpireIf are the conditions of EXPIRE's options.
type ExpireIf uint8

// EXPIRE's options, as in Redis 7.
const (
	ExpireNX ExpireIf = 1 << iota // only a key without an expiry
	ExpireXX                      // only a key with one
	ExpireGT                      // only a later one (no expiry counts as infinite)
	ExpireLT                      // only an earlier one
)

// expireOptions parses EXPIRE's options into kv.ExpIf, with Redis 7's errors.
func (kv *KV) expireOptions(opts [][]byte) error {
	for _, o := range opts {
		switch {
		case resp.Is(o, "NX"):
			kv.ExpIf |= ExpireNX
		case resp.Is(o, "XX"):
			kv.ExpIf |= ExpireXX
		case resp.Is(o, "GT"):
			kv.ExpIf |= ExpireGT
		case resp.Is(o, "LT"):
			kv.ExpIf |= ExpireLT
		default:
			return &kvErr{Msg: "Unsupported option " + string(o)}
		}
	}
	if kv.ExpIf&ExpireNX != 0 && kv.ExpIf&(ExpireXX|ExpireGT|ExpireLT) != 0 {
		return &kvErr{Msg: "NX and XX, GT or LT options at the same time are not compatible"}
	}
	if kv.ExpIf&ExpireGT != 0 && kv.ExpIf&ExpireLT != 0 {
		return &kvErr{Msg: "GT and LT options at the same time are not compatible"}
	}
	return nil
}

// ExpireApplies reports whether an EXPIRE with kv's options changes a key that expires at
// cur (Unix ms; -1: never), as Redis 7 decides it.
func (kv *KV) ExpireApplies(cur int64) bool {
	switch {
	case kv.ExpIf&ExpireNX != 0 && cur != -1,
		kv.ExpIf&ExpireXX != 0 && cur == -1,
		kv.ExpIf&ExpireGT != 0 && (cur == -1 || kv.When <= cur),
		kv.ExpIf&ExpireLT != 0 && cur != -1 && kv.When >= cur:
		return false
	}
	return true
}
