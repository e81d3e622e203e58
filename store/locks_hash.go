package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
)

// This file holds the Redis hash commands over slock values. A hash is a
// key's value record with data flag 0x04 (KV): its value is a sequence of
// u32 length, field, u32 length, value pairs, fields in the order they were
// first set. HINCRBY writes decimal text, as Redis does. ApplyHash is the pure
// effect of HSET, HDEL and HINCRBY on a record; Locks.Hash runs one on a key
// as part of a lock command, the way a SET record is applied. A hash is an
// ordinary value record, so the journal logs and restores it as any value.

// HashKind is a hash write.
type HashKind uint8

// Hash writes.
const (
	HashSet  HashKind = iota + 1 // set the fields of Args (field, value pairs); result: the fields added
	HashDel                      // delete the fields of Args; result: the fields deleted
	HashIncr                     // add Delta to the integer in field Args[0]; result: the new value
)

// HashOp is one hash write.
type HashOp struct {
	Kind  HashKind
	Args  [][]byte // HashSet: field, value, field, value, ...; HashDel: fields; HashIncr: the field
	Delta int64    // HashIncr
}

// Why a hash write changed nothing.
var (
	ErrWrongType      = errors.New("store: the key's value is not a hash")
	ErrHashNotInteger = errors.New("store: the hash field's value is not an integer")
	ErrHashOverflow   = errors.New("store: the hash increment would overflow")
	ErrHashOp         = errors.New("store: malformed hash write") // no Args, odd HashSet Args, or HashIncr without exactly one
)

// ValueTooLongError is a write whose value record would be longer than
// LocksConfig.MaxValue.
type ValueTooLongError struct {
	Size  int // the record's N
	Limit int // MaxValue
}

func (e *ValueTooLongError) Error() string {
	return "store: value record of " + strconv.Itoa(e.Size) + " bytes, limit " + strconv.Itoa(e.Limit)
}

// unsetRecord drops a key's value.
var unsetRecord = []byte{2, 0, 0, 0, dataUnset, 0}

// Hash runs op, a write to the hash that is the value of cmd.Key, as part of
// cmd, which owner sent at now: a Lock whose LockId is the key, the Update
// that APPEND uses (OptUpdate and the data flag, Hold.N 0xFFFF with
// HoldNever to keep the holder's expiry), with Data a record whose data flag
// and property area a new hash gets (nil: none). Hash runs cmd with Data
// replaced by the new value as a SET, and Wait.N 0: it never waits. An
// HDEL that leaves no field runs instead an Unlock of cmd.LockID that drops
// the value, so the key goes as with DEL. A write that changes nothing runs
// no command; the sender is answered OK all the same.
//
// It returns op's result (see HashKind) and appends the replies and
// EXECUTEs as Do does. On an error nothing ran and nothing is appended:
// ErrWrongType, ErrHashNotInteger, ErrHashOverflow, ErrHashOp or a
// *ValueTooLongError. Otherwise the reply to cmd (its RequestID) is among
// the replies, and op applied if and only if its result is LockOK or
// LockLockedError (another LockId holding the key gets LockTimeout).
func (l *Locks) Hash(owner Owner, cmd *LockCommand, op *HashOp, now int64, replies []LockReply, execs []Exec) ([]LockReply, []Exec, int64, error) {
	l.begin(replies, execs)
	k := l.key(cmd.DB, cmd.Key)
	var cur []byte
	if k != nil && k.has {
		cur = k.value
	}
	if cap(l.htmp) > lockKeepBuf {
		l.htmp = nil
	}
	var (
		n       int64
		changed bool
		err     error
	)
	l.htmp, n, changed, err = ApplyHash(l.htmp[:0], cur, cmd.Data, op)
	if err == nil && len(l.htmp)-4 > l.cfg.MaxValue {
		err = &ValueTooLongError{len(l.htmp) - 4, l.cfg.MaxValue}
	}
	if err != nil {
		r, e := l.end()
		return r, e, 0, err
	}
	c := *cmd
	c.Kind, c.Wait.N = KindLock, 0
	switch {
	case !changed && c.DB > MaxLockDB:
		l.reply(owner, &c, LockUnknownDB, c.LockID, 0, 0, nil)
	case !changed:
		l.reply(owner, &c, LockOK, c.LockID, k.levelsOf(), 0, l.current(k))
	case len(l.htmp) == 0:
		c.Kind, c.Rcount, c.Data = KindUnlock, 0, unsetRecord
		c.clearFlags()
		for l.unlock(owner, &c, now) {
		}
	default:
		c.Data = l.htmp
		l.lock(owner, &c, c.Data, now)
	}
	r, e := l.end()
	return r, e, n, nil
}

// isHash reports whether a record with data flag flag holds a hash: KV, and
// neither NUMBER nor ARRAY, which take precedence.
func isHash(flag uint8) bool { return flag&(dataNumber|dataArray) == 0 && flag&dataKV != 0 }

// ApplyHash appends to dst the value record that op leaves on a key whose
// value record is rec (nil for none), and returns op's result (see
// HashKind). A new hash gets the data flag and property area of tmpl, a
// record (nil: none). changed is false when op leaves the value as it was:
// nothing is appended then. A hash left with no field is no value: changed
// is true and nothing is appended. A value whose end is not a whole pair
// loses that end in any change. Errors: ErrWrongType if rec is not a hash,
// ErrHashNotInteger, ErrHashOverflow, ErrHashOp.
func ApplyHash(dst, rec, tmpl []byte, op *HashOp) (out []byte, n int64, changed bool, err error) {
	switch {
	case len(op.Args) == 0,
		op.Kind == HashSet && len(op.Args)%2 != 0,
		op.Kind == HashIncr && len(op.Args) != 1,
		op.Kind < HashSet || op.Kind > HashIncr:
		return dst, 0, false, ErrHashOp
	}
	var v []byte
	flag, props := uint8(dataKV), []byte(nil)
	if rec != nil {
		r, ok := parseRecord(rec)
		if !ok || !isHash(r.flag) {
			return dst, 0, false, ErrWrongType
		}
		v, flag, props = r.value, r.flag, r.props
	} else if tmpl != nil {
		if t, ok := parseRecord(tmpl); ok {
			flag, props = t.flag&^(dataNumber|dataArray)|dataKV, t.props
		}
	}
	flag &^= dataFirstOrLast
	start := len(dst)
	dst = appendRecord(dst, flag, props)
	switch op.Kind {
	case HashSet:
		dst, n = hashSet(dst, v, op.Args)
	case HashDel:
		dst, n = hashDel(dst, v, op.Args)
		if n == 0 {
			return dst[:start], 0, false, nil
		}
	case HashIncr:
		dst, n, err = hashIncr(dst, v, op.Args[0], op.Delta)
		if err != nil {
			return dst[:start], 0, false, err
		}
	}
	if len(dst)-start == 6+len(props) && op.Kind == HashDel {
		return dst[:start], n, true, nil // no field left
	}
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, n, true, nil
}

// hashSet appends the pairs of hash value v with the fields of args (field,
// value pairs) set: existing ones in place, new ones after them in the order
// of their first mention, each with its last value in args. It returns the
// number of new fields.
func hashSet(dst, v []byte, args [][]byte) ([]byte, int64) {
	ix := newArgIndex(args, 2)
	var small [16]bool
	var seen []bool // by pair index: the field is in v
	if ix.n <= len(small) {
		seen = small[:ix.n]
	} else {
		seen = make([]bool, ix.n)
	}
	for {
		f, val, rest, ok := nextPair(v)
		if !ok {
			break
		}
		v = rest
		if first, last := ix.find(f); first >= 0 {
			seen[first] = true
			val = args[2*last+1]
		}
		dst = appendPair(dst, f, val)
	}
	var added int64
	for i := range ix.n {
		f := args[2*i]
		if seen[i] {
			continue
		}
		first, last := ix.find(f)
		if first != i {
			continue // a repeat of a field mentioned before
		}
		dst = appendPair(dst, f, args[2*last+1])
		added++
	}
	return dst, added
}

// hashDel appends the pairs of hash value v but those whose field is in
// fields, returning how many it left out.
func hashDel(dst, v []byte, fields [][]byte) ([]byte, int64) {
	ix := newArgIndex(fields, 1)
	var removed int64
	for {
		f, val, rest, ok := nextPair(v)
		if !ok {
			break
		}
		v = rest
		if first, _ := ix.find(f); first >= 0 {
			removed++
			continue
		}
		dst = appendPair(dst, f, val)
	}
	return dst, removed
}

// hashIncr appends the pairs of hash value v with delta added to the integer
// in field (a new field counts from 0), returning the new integer.
func hashIncr(dst, v, field []byte, delta int64) ([]byte, int64, error) {
	var num [20]byte
	found := false
	var n int64
	for {
		f, val, rest, ok := nextPair(v)
		if !ok {
			break
		}
		v = rest
		if !found && bytes.Equal(f, field) {
			found = true
			old, ok := parseInt(val)
			if !ok {
				return dst, 0, ErrHashNotInteger
			}
			if delta > 0 && old > 0 && delta > 1<<63-1-old || delta < 0 && old < 0 && delta < -1<<63-old {
				return dst, 0, ErrHashOverflow
			}
			n = old + delta
			val = strconv.AppendInt(num[:0], n, 10)
		}
		dst = appendPair(dst, f, val)
	}
	if !found {
		n = delta
		dst = appendPair(dst, field, strconv.AppendInt(num[:0], n, 10))
	}
	return dst, n, nil
}

// nextPair splits the first whole pair off a hash value: field and value
// (views) and the value after it.
func nextPair(v []byte) (f, val, rest []byte, ok bool) {
	if f, rest, ok = nextField(v); !ok {
		return nil, nil, v, false
	}
	if val, rest, ok = nextField(rest); !ok {
		return nil, nil, v, false
	}
	return f, val, rest, true
}

// nextField splits a u32-length-prefixed field off b.
func nextField(b []byte) (f, rest []byte, ok bool) {
	el, rest, ok := nextElement(b)
	if !ok {
		return nil, b, false
	}
	return el[4:], rest, true
}

// appendPair appends a field, value pair of a hash value.
func appendPair(dst, f, v []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(f)))
	dst = append(dst, f...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// parseInt parses a hash value as HINCRBY does (Redis's string2ll): an
// optional '-' then decimal digits, no leading zero, no "-0", in int64.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 || b[0] < '0' || b[0] > '9' || b[0] == '0' && (len(b) > 1 || neg) {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0') // 19 digits never wrap a uint64
	}
	switch {
	case neg && u <= 1<<63:
		return int64(-u), true
	case !neg && u <= 1<<63-1:
		return int64(u), true
	}
	return 0, false
}

// argIndex finds fields among the arguments of a hash write: every step-th
// argument is a field. Past a few fields it builds a map, so a write of many
// fields to a hash of many fields costs their sum, not their product.
type argIndex struct {
	args [][]byte
	step int
	n    int                 // the number of fields
	m    map[string][2]int32 // field: first and last index, once n > argScan
}

const argScan = 8

func newArgIndex(args [][]byte, step int) argIndex {
	x := argIndex{args: args, step: step, n: len(args) / step}
	if x.n > argScan {
		x.m = make(map[string][2]int32, x.n)
		for i := range x.n {
			f := args[i*step]
			p, ok := x.m[string(f)]
			if !ok {
				p[0] = int32(i)
			}
			p[1] = int32(i)
			x.m[string(f)] = p
		}
	}
	return x
}

// find returns the indexes (in fields) of the first and last mention of f,
// or -1, -1.
func (x *argIndex) find(f []byte) (first, last int) {
	if x.m != nil {
		p, ok := x.m[string(f)]
		if !ok {
			return -1, -1
		}
		return int(p[0]), int(p[1])
	}
	first, last = -1, -1
	for i := range x.n {
		if bytes.Equal(x.args[i*x.step], f) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first, last
}
