package rediscmd

import (
	"bytes"
	"strconv"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// This file holds the Redis hash commands of the text side. A hash is a key's value
// record with the KV flag (§2.3): u32-length-prefixed field, value pairs. Writes (HSET,
// HMSET, HDEL, HINCRBY) run in the store as the Lock that APPEND uses, carrying a
// template record (the KV flag and the KEY property) that a new hash takes; the store
// computes the new value and the result. Reads (HGET, HMGET, HGETALL, HLEN, HEXISTS,
// HKEYS, HVALS) render from the key's value record.

// HashOp is a hash command.
type HashOp uint8

// Hash commands. HashNone is "not a hash command".
const (
	HashNone   HashOp = iota
	HashSet           // HSET, HMSET: Args are field, value pairs
	HashDel           // Args are fields
	HashIncr          // HINCRBY: Args[0] is the field, Delta the increment
	HashGet           // Args[0] is the field
	HashMGet          // Args are fields
	HashGetAll        // no Args
	HashLen           // no Args
	HashExists        // Args[0] is the field
	HashKeys          // no Args
	HashVals          // no Args
)

// Hash is a parsed hash command.
type Hash struct {
	Op    HashOp
	Name  string      // canonical name: HMSET answers OK where HSET answers a count
	Key   []byte      // a view into the request
	Args  [][]byte    // views into the request
	Delta int64       // HINCRBY
	Frame slock.Frame // writes: the Lock to run, its Data the template record (a view into the buffer)
}

// LookupHash returns the hash command named name (any case) and its canonical name;
// HashNone and "" for another name. The commands are in the command table (commands.go).
func LookupHash(name []byte) (HashOp, string) {
	if spec := Lookup(name); spec != nil && spec.Cmd == CmdHash {
		return spec.Hash, spec.Name
	}
	return HashNone, ""
}

// Writes reports whether h is a write, which runs in the store (Frame).
func (h *Hash) Writes() bool { return h.Op == HashSet || h.Op == HashDel || h.Op == HashIncr }

// ParseHash parses the hash command args (args[0] is its name; op and name from
// LookupHash) for a connection in state t into h. For a write, h.Frame is the Lock to run
// on the key, with its template record built into buf; newID supplies its RequestId.
// Errors are *TextError with the Redis error text.
func ParseHash(args [][]byte, op HashOp, name string, t *Text, newID func() [16]byte, h *Hash, buf []byte) ([]byte, error) {
	spec := cmdIndex[name]
	if spec == nil || spec.Cmd != CmdHash || spec.Hash != op {
		*h = Hash{Op: op, Name: name}
		return buf, &kvErr{Msg: "Unknown Command"}
	}
	return parseHashOf(args, spec, t, newID, h, buf)
}

// parseHashOf parses the command line args of the hash command spec (ParseHash's contract).
func parseHashOf(args [][]byte, spec *Spec, t *Text, newID func() [16]byte, h *Hash, buf []byte) ([]byte, error) {
	op, name := spec.Hash, spec.Name
	*h = Hash{Op: op, Name: name}
	if n := len(args); !spec.ArityOK(n) || op == HashSet && n%2 != 0 {
		return buf, arity(name)
	}
	h.Key, h.Args = args[1], args[2:]
	if op == HashIncr {
		d, ok := resp.ParseInt(args[3])
		if !ok {
			return buf, errNotInt
		}
		h.Delta, h.Args = d, args[2:3]
	}
	if !h.Writes() {
		return buf, nil
	}
	if len(h.Key) > 0xffff {
		return buf, &kvErr{Msg: "key longer than 65535 bytes"}
	}
	if t.Keyspace {
		return buf, nil // no lock command (Text.Keyspace)
	}
	id := t.KeyID(h.Key)
	h.Frame = slock.Frame{Type: slock.TypeLock, RequestID: newID(), Flag: flagUpdate | slock.FlagData, DB: t.DB, LockID: id, Key: id,
		Expried: keepExpiry, ExpriedFlag: unlimitedFlag}
	start := len(buf)
	props := [1]slock.Property{{Code: slock.PropKey, Value: h.Key}}
	buf = slock.AppendDataRecord(buf, slock.DataSet, slock.StageCurrent, slock.DataKV, props[:], nil)
	h.Frame.Data = buf[start:]
	return buf, nil
}

// The errors of hash commands besides arity and syntax.
var (
	// ErrWrongType is answered `-WRONGTYPE ...` (no ERR): a hash command on a key that
	// holds a string, or a string command on a hash.
	ErrWrongType    error = &TextError{Code: "WRONGTYPE", Msg: "Operation against a key holding the wrong kind of value"}
	ErrHashNotInt   error = &kvErr{Msg: "hash value is not an integer"}
	ErrHashOverflow error = errOverflow
)

// ValueTooLong is the error of a write whose value record (N, the key's name included)
// would be longer than --slock-max-data.
func ValueTooLong(size, limit int) error {
	return &kvErr{Msg: "value too long: " + strconv.Itoa(size) + " bytes with its key name, limit " +
		strconv.Itoa(limit) + " (--slock-max-data)"}
}

// IsHash reports whether a value record holds a hash (KV, and neither NUMBER nor ARRAY,
// which take precedence), and ok whether it holds a value at all.
func IsHash(rec []byte) (hash, ok bool) {
	if rec == nil {
		return false, false
	}
	d, err := slock.ParseDataRecord(rec)
	if err != nil || d.Cmd == slock.DataUnset {
		return false, false
	}
	return slock.DataKind(d.Flag) == slock.KindKV, true
}

// TypeName is TYPE of a value record: "hash", "string", or "none" for no value.
func TypeName(rec []byte) string {
	switch hash, ok := IsHash(rec); {
	case !ok:
		return "none"
	case hash:
		return "hash"
	}
	return "string"
}

// hashValue returns the pairs of a hash value record, ok false (WRONGTYPE) if it holds
// another type; no value is an empty hash.
func hashValue(rec []byte) (v []byte, ok bool) {
	hash, has := IsHash(rec)
	if !has {
		return nil, true
	}
	if !hash {
		return nil, false
	}
	d, _ := slock.ParseDataRecord(rec)
	return d.Value, true
}

// HashField returns the value of field in hash value v (the first pair with it).
func HashField(v, field []byte) ([]byte, bool) {
	for f, val, rest, ok := slock.NextPair(v); ok; f, val, rest, ok = slock.NextPair(rest) {
		if bytes.Equal(f, field) {
			return val, true
		}
	}
	return nil, false
}

// hmgetIndexAt is the number of fields times pairs past which HMGET indexes the hash
// rather than look each field up in turn.
const hmgetIndexAt = 4096

// AppendHashRead renders the reply of a hash read h on a key whose value record is rec
// (nil for none): an empty hash for no value, WRONGTYPE for a value of another type.
func AppendHashRead(dst []byte, h *Hash, rec []byte) []byte {
	v, ok := hashValue(rec)
	if !ok {
		return AppendTextError(dst, ErrWrongType)
	}
	switch h.Op {
	case HashGet:
		if val, ok := HashField(v, h.Args[0]); ok {
			return resp.AppendBulk(dst, val)
		}
		return resp.AppendNull(dst)
	case HashExists:
		if _, ok := HashField(v, h.Args[0]); ok {
			return resp.AppendInt(dst, 1)
		}
		return resp.AppendInt(dst, 0)
	case HashLen:
		return resp.AppendInt(dst, int64(slock.KVLen(v)))
	case HashMGet:
		dst = resp.AppendArray(dst, len(h.Args))
		var index map[string][]byte
		if n := slock.KVLen(v); n*len(h.Args) > hmgetIndexAt {
			index = make(map[string][]byte, n)
			for f, val, rest, ok := slock.NextPair(v); ok; f, val, rest, ok = slock.NextPair(rest) {
				if _, dup := index[string(f)]; !dup {
					index[string(f)] = val
				}
			}
		}
		for _, f := range h.Args {
			var val []byte
			var ok bool
			if index != nil {
				val, ok = index[string(f)]
			} else {
				val, ok = HashField(v, f)
			}
			if ok {
				dst = resp.AppendBulk(dst, val)
			} else {
				dst = resp.AppendNull(dst)
			}
		}
		return dst
	case HashGetAll, HashKeys, HashVals:
		n := slock.KVLen(v)
		if h.Op == HashGetAll {
			n *= 2
		}
		dst = resp.AppendArray(dst, n)
		for f, val, rest, ok := slock.NextPair(v); ok; f, val, rest, ok = slock.NextPair(rest) {
			if h.Op != HashVals {
				dst = resp.AppendBulk(dst, f)
			}
			if h.Op != HashKeys {
				dst = resp.AppendBulk(dst, val)
			}
		}
		return dst
	}
	return resp.AppendError(dst, "ERR "+h.Name+" is not a hash read")
}

// AppendHashWrite renders the reply of hash write h whose Lock got result, n being the
// store's result: the fields added (HSET), deleted (HDEL), or the new value (HINCRBY);
// HMSET answers OK. A result other than OK (or LOCKED_ERROR, an Update's success) means
// the key is held by another lock and nothing changed, answered as INCR does.
func AppendHashWrite(dst []byte, h *Hash, result slock.Result, n int64) []byte {
	if result != slock.ResultOK && result != slock.ResultLockedError {
		return resp.AppendError(dst, "ERR "+strconv.Itoa(int(result)))
	}
	if h.Name == "HMSET" {
		return resp.AppendSimple(dst, "OK")
	}
	return resp.AppendInt(dst, n)
}
