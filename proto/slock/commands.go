package slock

import (
	"github.com/tallyd/tallyd/proto/resp"
)

// This file is the Redis-text command table, after Redis's server.c: every
// command slock's text side serves, with its arity and flags, and the parse
// of a command line into a typed Request. The server looks a command up once,
// checks its arity here, and dispatches on Spec.Cmd.

// Cmd is a Redis-text command, or a family of them (CmdKV: Spec.Op tells which).
type Cmd uint8

// Commands. CmdNone is no command.
const (
	CmdNone Cmd = iota
	CmdLock
	CmdUnlock
	CmdPush
	CmdPing
	CmdEcho
	CmdQuit
	CmdSelect
	CmdTimeout
	CmdInfo
	CmdConfig
	CmdClient
	CmdCommand
	CmdKV // a key/value command run as a lock command (kv.go)
	CmdMGet
	CmdMSet
	CmdMSetNX
	CmdMulti
	CmdExec
	CmdDiscard
	CmdWatch
	CmdUnwatch
	CmdHello
	CmdHash // a hash command (hash.go: Spec.Hash tells which)
	CmdScan
	CmdConsistency // CONSISTENCY [ONE|QUORUM|ALL]: the connection's consistency level (cluster)
	CmdCluster     // CLUSTER ADD|REMOVE: membership of a tallyd cluster
	CmdToken       // TOKEN key [LOCK_ID id]: a holder's fencing token (fence.go)
	CmdGetFence    // GETFENCE key: the highest token a fenced write presented to key
	CmdSlowlog     // SLOWLOG GET [n]|LEN|RESET|HELP: the commands that ran longer than a threshold
)

// CmdFlags are a command's properties.
type CmdFlags uint16

// Command flags.
const (
	CmdWrite    CmdFlags = 1 << iota // may change a key
	CmdReadonly                      // reads keys only
	CmdMayWait                       // may wait for a lock (inside EXEC it never waits: timeout 0)
	CmdAdmin                         // server administration
	CmdTx                            // transaction control: runs at once inside MULTI, not queued
	CmdDenyOOM                       // may add data: refused beyond the memory budget (Redis's denyoom)
)

// Spec is one command of the table.
type Spec struct {
	Name  string // canonical name, upper case (error texts use it in lower case)
	Cmd   Cmd
	Op    Op  // for CmdKV
	Arity int // argument count with the name: n exactly, or with -n at least n
	Flags CmdFlags
	Hash  HashOp // for CmdHash
}

// ArityOK reports whether a command line of n arguments (the name included) has the
// arity of s.
func (s *Spec) ArityOK(n int) bool {
	if s.Arity < 0 {
		return n >= -s.Arity
	}
	return n == s.Arity
}

// ArityError is the error for a command line of s with the wrong number of arguments.
func (s *Spec) ArityError() error { return arity(s.Name) }

// commands is the table. slock's own commands (LOCK, UNLOCK, PUSH, TIMEOUT) take -1: their
// parse answers slock's own count error, as the reference server does.
var commands = []Spec{
	{"LOCK", CmdLock, OpNone, -1, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone},
	{"UNLOCK", CmdUnlock, OpNone, -1, CmdWrite, HashNone},
	{"PUSH", CmdPush, OpNone, -1, CmdWrite | CmdDenyOOM, HashNone},
	{"PING", CmdPing, OpNone, -1, 0, HashNone},
	{"ECHO", CmdEcho, OpNone, 2, 0, HashNone},
	{"QUIT", CmdQuit, OpNone, -1, CmdTx, HashNone},
	{"SELECT", CmdSelect, OpNone, 2, 0, HashNone},
	{"TIMEOUT", CmdTimeout, OpNone, -1, 0, HashNone},
	{"INFO", CmdInfo, OpNone, -1, 0, HashNone},
	{"CONFIG", CmdConfig, OpNone, -2, CmdAdmin, HashNone},
	{"CLIENT", CmdClient, OpNone, -2, CmdAdmin, HashNone},
	{"COMMAND", CmdCommand, OpNone, -1, 0, HashNone},
	{"HELLO", CmdHello, OpNone, -1, 0, HashNone},
	{"MULTI", CmdMulti, OpNone, 1, CmdTx, HashNone},
	{"EXEC", CmdExec, OpNone, 1, CmdTx, HashNone},
	{"DISCARD", CmdDiscard, OpNone, 1, CmdTx, HashNone},
	{"WATCH", CmdWatch, OpNone, -2, CmdTx, HashNone},
	{"UNWATCH", CmdUnwatch, OpNone, 1, 0, HashNone},
	{"CONSISTENCY", CmdConsistency, OpNone, -1, 0, HashNone},
	{"CLUSTER", CmdCluster, OpNone, -2, CmdAdmin, HashNone},
	{"TOKEN", CmdToken, OpNone, -2, CmdReadonly, HashNone},
	{"GETFENCE", CmdGetFence, OpNone, 2, CmdReadonly, HashNone},
	{"SLOWLOG", CmdSlowlog, OpNone, -2, CmdAdmin, HashNone},

	{"SET", CmdKV, OpSet, -3, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone},
	{"SETEX", CmdKV, OpSet, 4, CmdWrite | CmdDenyOOM, HashNone},
	{"PSETEX", CmdKV, OpSet, 4, CmdWrite | CmdDenyOOM, HashNone},
	{"GETSET", CmdKV, OpGetSet, 3, CmdWrite | CmdDenyOOM, HashNone},
	{"SETNX", CmdKV, OpSetNX, 3, CmdWrite | CmdDenyOOM | CmdMayWait, HashNone},
	{"GET", CmdKV, OpGet, 2, CmdReadonly, HashNone},
	{"EXISTS", CmdKV, OpExists, -2, CmdReadonly, HashNone},
	{"TYPE", CmdKV, OpType, 2, CmdReadonly, HashNone},
	{"STRLEN", CmdKV, OpStrlen, 2, CmdReadonly, HashNone},
	{"INCR", CmdKV, OpIncr, -2, CmdWrite | CmdDenyOOM, HashNone}, // slock takes an optional delta
	{"DECR", CmdKV, OpIncr, -2, CmdWrite | CmdDenyOOM, HashNone},
	{"INCRBY", CmdKV, OpIncr, 3, CmdWrite | CmdDenyOOM, HashNone},
	{"DECRBY", CmdKV, OpIncr, 3, CmdWrite | CmdDenyOOM, HashNone},
	{"APPEND", CmdKV, OpAppend, 3, CmdWrite | CmdDenyOOM, HashNone},
	{"DEL", CmdKV, OpDel, -2, CmdWrite, HashNone},
	{"UNLINK", CmdKV, OpDel, -2, CmdWrite, HashNone},
	{"EXPIRE", CmdKV, OpExpire, -3, CmdWrite, HashNone},
	{"PEXPIRE", CmdKV, OpExpire, -3, CmdWrite, HashNone},
	{"EXPIREAT", CmdKV, OpExpire, -3, CmdWrite, HashNone},
	{"PEXPIREAT", CmdKV, OpExpire, -3, CmdWrite, HashNone},
	{"PERSIST", CmdKV, OpPersist, -2, CmdWrite, HashNone}, // the reference wants a dummy third argument
	{"TTL", CmdKV, OpTTL, 2, CmdReadonly, HashNone},
	{"PTTL", CmdKV, OpPTTL, 2, CmdReadonly, HashNone},
	{"KEYS", CmdKV, OpKeys, 2, CmdReadonly, HashNone},
	{"SCAN", CmdScan, OpNone, -2, CmdReadonly, HashNone},
	{"DBSIZE", CmdKV, OpDBSize, 1, CmdReadonly, HashNone},
	{"FLUSHDB", CmdKV, OpFlushDB, -1, CmdWrite, HashNone},
	{"FLUSHALL", CmdKV, OpFlushAll, -1, CmdWrite, HashNone},
	{"MGET", CmdMGet, OpNone, -2, CmdReadonly, HashNone},
	{"MSET", CmdMSet, OpNone, -3, CmdWrite | CmdDenyOOM, HashNone},
	{"MSETNX", CmdMSetNX, OpNone, -3, CmdWrite | CmdDenyOOM, HashNone},

	{"HSET", CmdHash, OpNone, -4, CmdWrite | CmdDenyOOM, HashSet},
	{"HMSET", CmdHash, OpNone, -4, CmdWrite | CmdDenyOOM, HashSet},
	{"HDEL", CmdHash, OpNone, -3, CmdWrite, HashDel},
	{"HINCRBY", CmdHash, OpNone, 4, CmdWrite | CmdDenyOOM, HashIncr},
	{"HGET", CmdHash, OpNone, 3, CmdReadonly, HashGet},
	{"HMGET", CmdHash, OpNone, -3, CmdReadonly, HashMGet},
	{"HGETALL", CmdHash, OpNone, 2, CmdReadonly, HashGetAll},
	{"HLEN", CmdHash, OpNone, 2, CmdReadonly, HashLen},
	{"HEXISTS", CmdHash, OpNone, 3, CmdReadonly, HashExists},
	{"HKEYS", CmdHash, OpNone, 2, CmdReadonly, HashKeys},
	{"HVALS", CmdHash, OpNone, 2, CmdReadonly, HashVals},
}

// maxName is the longest command name.
const maxName = 16

var cmdIndex = func() map[string]*Spec {
	m := make(map[string]*Spec, len(commands))
	for i := range commands {
		s := &commands[i]
		if len(s.Name) > maxName || m[s.Name] != nil {
			panic("slock: bad command table entry " + s.Name)
		}
		m[s.Name] = s
	}
	return m
}()

// byShape lists the commands by name length and first letter, so that Lookup compares a
// name with the one or two commands that can match instead of hashing it.
var byShape = func() (t [maxName + 1][26][]*Spec) {
	for i := range commands {
		s := &commands[i]
		c := s.Name[0] - 'A'
		t[len(s.Name)][c] = append(t[len(s.Name)][c], s)
	}
	return t
}()

// Lookup returns the command named name (any case), nil if there is none.
func Lookup(name []byte) *Spec {
	if len(name) == 0 || len(name) > maxName {
		return nil
	}
	c := name[0] | 0x20 // lower case, for letters
	if c < 'a' || c > 'z' {
		return nil
	}
	for _, s := range byShape[len(name)][c-'a'] {
		if resp.Is(name, s.Name) {
			return s
		}
	}
	return nil
}

// Commands returns the table, in its order. The caller must not change it.
func Commands() []Spec { return commands }

// Request is a parsed Redis-text command. Its byte slices are views into the command line.
type Request struct {
	Spec *Spec
	Args [][]byte // the command line, Args[0] the name

	Frame Frame // LOCK, UNLOCK, PUSH: the lock command (Data a view of the parse buffer)
	Will  bool  // LOCK, UNLOCK with WILL 1: run it when the connection closes
	KV    KV    // CmdKV: the key/value command
	Hash  Hash  // CmdHash: the hash command
	Scan  Scan  // CmdScan: the cursor and filters

	Arg []byte // PING, ECHO: the text; CONFIG, CLIENT, COMMAND, TIMEOUT: the subcommand
	N   int64  // SELECT: the database; TIMEOUT SET: the value; HELLO: the protocol (0: none given)
}

// Errors of the commands parsed here.
var (
	errDBIndex  = &TextError{Msg: "DB index is out of range"}
	errNoProto  = &TextError{Code: "NOPROTO", Msg: "unsupported protocol version"}
	errProtoInt = &TextError{Msg: "Protocol version is not an integer or out of range"}
)

// maxDB is the highest database SELECT accepts.
const maxDB = 254

// Parse parses args, a command line of spec whose arity has been checked, for a connection
// in state t at nowMs (Unix milliseconds), into r. Lock commands and key/value commands build
// their data record into buf; newID supplies RequestIds and fresh LockIds. Errors are
// *TextError.
func Parse(spec *Spec, args [][]byte, t *Text, nowMs int64, newID func() [16]byte, r *Request, buf []byte) ([]byte, error) {
	r.Spec, r.Args, r.Arg, r.N, r.Will = spec, args, nil, 0, false
	var err error
	switch spec.Cmd {
	case CmdLock, CmdUnlock, CmdPush:
		r.Will, buf, err = ParseTextLock(args, t, newID, &r.Frame, buf)
		return buf, err
	case CmdKV:
		return ParseKV(args, spec.Op, spec.Name, t, nowMs, newID, &r.KV, buf)
	case CmdHash:
		return ParseHash(args, spec.Hash, spec.Name, t, newID, &r.Hash, buf)
	case CmdScan:
		return buf, ParseScan(args, &r.Scan)
	case CmdPing, CmdEcho, CmdConfig, CmdClient, CmdCommand:
		if spec.Cmd == CmdPing && len(args) > 2 {
			return buf, spec.ArityError()
		}
		if len(args) > 1 {
			r.Arg = args[1]
		}
	case CmdMSet, CmdMSetNX:
		if len(args)%2 == 0 {
			return buf, spec.ArityError()
		}
	case CmdSelect:
		n, ok := resp.ParseInt(args[1])
		if !ok {
			return buf, errNotInt
		}
		if n < 0 || n > maxDB {
			return buf, errDBIndex
		}
		r.N = n
	case CmdTimeout:
		r.Arg = argAt(args, 1)
		switch {
		case resp.Is(r.Arg, "SET"):
			n, ok := textUint(argAt(args, 2), 0xffffffff)
			if !ok {
				return buf, errArg
			}
			r.N = n
		case resp.Is(r.Arg, "GET"):
		default:
			return buf, errArg
		}
	case CmdHello:
		if len(args) > 1 {
			n, ok := resp.ParseInt(args[1])
			if !ok {
				return buf, errProtoInt
			}
			if n != 2 {
				return buf, errNoProto
			}
			r.N = n
			for i := 2; i < len(args); i++ {
				switch {
				case resp.Is(args[i], "SETNAME") && i+1 < len(args):
					i++
				case resp.Is(args[i], "AUTH") && i+2 < len(args):
					return buf, &TextError{Msg: "AUTH is not supported: tallyd has no users"}
				default:
					return buf, &TextError{Msg: "Syntax error in HELLO option '" + string(args[i]) + "'"}
				}
			}
		}
	}
	return buf, nil
}

func argAt(args [][]byte, i int) []byte {
	if i < len(args) {
		return args[i]
	}
	return nil
}

// AppendTextError renders err, a command's error, as a Redis error reply: a *TextError with
// its code (ERR by default), anything else as ERR and its text.
func AppendTextError(dst []byte, err error) []byte {
	if te, ok := err.(*TextError); ok {
		code := te.Code
		if code == "" {
			code = "ERR"
		}
		dst = append(dst, '-')
		dst = append(dst, code...)
		dst = append(dst, ' ')
		return appendErrLine(dst, te.Msg)
	}
	return resp.AppendError(dst, "ERR "+err.Error())
}

// appendErrLine appends msg and CRLF, each CR or LF of msg written as a space.
func appendErrLine(dst []byte, msg string) []byte {
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}

// maxUnknownArgs is how much of an unknown command's line its error repeats, as Redis 7.
const maxUnknownArgs = 128

// AppendUnknown appends Redis 7's error for the unknown command args: "-ERR unknown command
// 'name', with args beginning with: 'a' 'b' " (a space after each argument), the name and
// the arguments cut as Redis cuts them (at 128 bytes in all, and at a NUL byte, as C's
// printf does), CR and LF written as spaces.
func AppendUnknown(dst []byte, args [][]byte) []byte {
	dst = append(dst, "-ERR unknown command '"...)
	start := len(dst)
	dst = appendCString(dst, args[0], maxUnknownArgs)
	dst = append(dst, "', with args beginning with: "...)
	n := 0 // bytes of the argument list so far
	for i := 1; i < len(args) && n < maxUnknownArgs; i++ {
		dst = append(dst, '\'')
		m := len(dst)
		dst = appendCString(dst, args[i], maxUnknownArgs-n)
		dst = append(dst, '\'', ' ')
		n += len(dst) - m + 1 // the quotes, the text and the space
	}
	for i := start; i < len(dst); i++ {
		if dst[i] == '\r' || dst[i] == '\n' {
			dst[i] = ' '
		}
	}
	return append(dst, '\r', '\n')
}

// appendCString appends s up to its first NUL byte and at most max bytes.
func appendCString(dst, s []byte, max int) []byte {
	for i := 0; i < len(s) && i < max && s[i] != 0; i++ {
		dst = append(dst, s[i])
	}
	return dst
}
