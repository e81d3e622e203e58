package script

import (
	"bytes"
	"strconv"
)

// The scripts lock libraries send are recognised by their SHA1 (so by their exact bytes,
// whichever way they came: SCRIPT LOAD, EVAL) when they are compiled, and run without Lua:
// the native op makes the very redis.call's the script would make, in the same order, with
// the same arguments, through the same CallFunc (the loop runs each as the wire would, with
// a script's checks: ACL of the calling user, read-only scripts, the memory budget, a
// failing log), and decides from their replies what the script would, so replies, effects,
// log and replication records, keyspace notifications and WAIT are the script's. A call's
// error is raised as the script would raise it (with the line of its redis.call). A run
// whose KEYS or ARGV counts are not the library's, or whose arguments Lua would read in a
// way the native op does not (a number it must coerce), runs on Lua instead.

// nativeOp is a recognised script.
type nativeOp uint8

const (
	nativeNone  nativeOp = iota
	pyRelease            // redis-py Lock.release (LUA_RELEASE_SCRIPT)
	pyExtend             // redis-py Lock.extend (LUA_EXTEND_SCRIPT)
	pyReacquire          // redis-py Lock.reacquire (LUA_REACQUIRE_SCRIPT)
	rsDelete             // redsync Mutex.Unlock (deleteScript)
	rsTouch              // redsync Mutex.Extend (touchScript)
	rsTouchNX            // redsync Mutex.Extend with WithSetNXOnExtend (touchWithSetNXScript)
	rlLock               // node-redlock lock (lockScript)
	rlUnlock             // node-redlock unlock (unlockScript)
	rlExtend             // node-redlock extend (extendScript)
)

// natives are the recognised bodies by SHA1 (script/native_test.go has the bodies and
// checks these sums): each library version whose body is known.
var natives = map[string]nativeOp{
	// redis-py 4.x and 5.x (redis/lock.py and redis/asyncio/lock.py; Debian's 4.3.4)
	"c3f8721cbb97f72bc19e972846bd7aaf91901658": pyRelease,
	"a4e8783852e6b949f9ef3a97212805108459a890": pyExtend,
	"1cac51482acf5858da00f6d685d68f886cd6b6b2": pyReacquire,
	// redsync v4.18.1 (scripts.go)
	"e950836ed1e694540c503ef9972b8de518044d3b": rsDelete,
	"d75bb8b5bd13532ddedd17762e772346e39b321e": rsTouch,
	"b6b55c439e02c6f52ffb8be7ec8c0d0ac816ea79": rsTouchNX,
	// node-redlock 4.2.0 (redlock.js)
	"e5a322e2634ef59a516e8ea150cb085afafee684": rlLock,
	"0f0f23b9048b36752b5be114f357ba083449f908": rlUnlock,
	"ce46f80993d5dac20dd066eb301a4e37994bdbed": rlExtend,
}

// Native ops' command names, as each script spells them.
var (
	nGET     = []byte("GET")
	nget     = []byte("get")
	nDEL     = []byte("DEL")
	ndel     = []byte("del")
	nPEXPIRE = []byte("PEXPIRE")
	npexpire = []byte("pexpire")
	npttl    = []byte("pttl")
	nSET     = []byte("SET")
	nset     = []byte("set")
	nexists  = []byte("exists")
	nPX      = []byte("PX")
	nNX      = []byte("NX")
)

// ncall makes one redis.call of a native op: args (the first a command name) copied into
// the engine's buffers, as redis.call copies a script's, and the reply.
func (e *Engine) ncall(r *Run, args ...[]byte) []byte {
	e.argBytes = e.argBytes[:0]
	for _, a := range args {
		e.argBytes = append(e.argBytes, a...)
	}
	list := e.argv0[:0]
	at := 0
	for _, a := range args {
		list = append(list, e.argBytes[at:at+len(a):at+len(a)])
		at += len(a)
	}
	e.argv0 = list
	reply := r.Call(list)
	clear(list)
	return reply
}

// runNative runs en's native op with keys and args and appends its reply to dst; false
// (nothing run) when this run is Lua's.
func (e *Engine) runNative(dst []byte, en *entry, keys, args [][]byte, r *Run) ([]byte, bool) {
	switch en.native {
	case pyRelease:
		if len(keys) != 1 || len(args) != 1 {
			return dst, false
		}
		k := keys[0]
		v := e.ncall(r, nget, k)
		if isErr(v) {
			return raised(dst, v, en.sha, 2), true
		}
		if !bulkIs(v, args[0]) {
			return append(dst, ":0\r\n"...), true
		}
		if v := e.ncall(r, ndel, k); isErr(v) {
			return raised(dst, v, en.sha, 6), true
		}
		return append(dst, ":1\r\n"...), true

	case pyExtend:
		if len(keys) != 1 || len(args) != 3 {
			return dst, false
		}
		add, addOK := plainInt(args[1])
		sum := bytes.Equal(args[2], []byte("0"))
		if sum && !addOK {
			return dst, false // Lua coerces ARGV[2] to a number its own way
		}
		k := keys[0]
		v := e.ncall(r, nget, k)
		if isErr(v) {
			return raised(dst, v, en.sha, 2), true
		}
		if !bulkIs(v, args[0]) {
			return append(dst, ":0\r\n"...), true
		}
		v = e.ncall(r, npttl, k)
		if isErr(v) {
			return raised(dst, v, en.sha, 6), true
		}
		exp, ok := intReply(v)
		if !ok {
			return dst, false // not an integer: cannot happen (PTTL), and nothing was written
		}
		if exp < 0 {
			return append(dst, ":0\r\n"...), true
		}
		ttl := args[1]
		if sum {
			e.numBuf = strconv.AppendFloat(e.numBuf[:0], float64(add)+float64(exp), 'g', 17, 64)
			ttl = e.numBuf
		}
		if v := e.ncall(r, npexpire, k, ttl); isErr(v) {
			return raised(dst, v, en.sha, 18), true
		}
		return append(dst, ":1\r\n"...), true

	case pyReacquire:
		if len(keys) != 1 || len(args) != 2 {
			return dst, false
		}
		k := keys[0]
		v := e.ncall(r, nget, k)
		if isErr(v) {
			return raised(dst, v, en.sha, 2), true
		}
		if !bulkIs(v, args[0]) {
			return append(dst, ":0\r\n"...), true
		}
		if v := e.ncall(r, npexpire, k, args[1]); isErr(v) {
			return raised(dst, v, en.sha, 6), true
		}
		return append(dst, ":1\r\n"...), true

	case rsDelete:
		if len(keys) != 1 || len(args) != 1 {
			return dst, false
		}
		k := keys[0]
		v := e.ncall(r, nGET, k)
		switch {
		case isErr(v):
			return raised(dst, v, en.sha, 2), true
		case bulkIs(v, args[0]):
			v = e.ncall(r, nDEL, k)
			if isErr(v) {
				return raised(dst, v, en.sha, 4), true
			}
			return returned(dst, v), true
		case isFalse(v):
			return append(dst, ":-1\r\n"...), true
		}
		return append(dst, ":0\r\n"...), true

	case rsTouch, rsTouchNX:
		if len(keys) != 1 || len(args) != 2 {
			return dst, false
		}
		k := keys[0]
		v := e.ncall(r, nGET, k)
		if isErr(v) {
			return raised(dst, v, en.sha, 2), true
		}
		if bulkIs(v, args[0]) {
			v = e.ncall(r, nPEXPIRE, k, args[1])
			if isErr(v) {
				return raised(dst, v, en.sha, 3), true
			}
			return returned(dst, v), true
		}
		if en.native == rsTouch {
			return append(dst, ":0\r\n"...), true
		}
		v = e.ncall(r, nSET, k, args[0], nPX, args[1], nNX)
		switch {
		case isErr(v):
			return raised(dst, v, en.sha, 4), true
		case isFalse(v):
			return append(dst, ":0\r\n"...), true
		}
		return append(dst, ":1\r\n"...), true

	case rlLock, rlExtend:
		if len(keys) == 0 || len(args) != 2 {
			return dst, false
		}
		for _, k := range keys {
			if en.native == rlLock {
				v := e.ncall(r, nexists, k)
				if isErr(v) {
					return raised(dst, v, en.sha, 4), true
				}
				if n, ok := intReply(v); ok && n == 1 {
					return append(dst, ":0\r\n"...), true
				}
				continue
			}
			v := e.ncall(r, nget, k)
			if isErr(v) {
				return raised(dst, v, en.sha, 4), true
			}
			if !bulkIs(v, args[0]) {
				return append(dst, ":0\r\n"...), true
			}
		}
		for _, k := range keys {
			if v := e.ncall(r, nset, k, args[0], nPX, args[1]); isErr(v) {
				return raised(dst, v, en.sha, 11), true
			}
		}
		return appendInt(dst, int64(len(keys))), true

	case rlUnlock:
		if len(keys) == 0 || len(args) != 1 {
			return dst, false
		}
		n := int64(0)
		for _, k := range keys {
			v := e.ncall(r, nget, k)
			if isErr(v) {
				return raised(dst, v, en.sha, 5), true
			}
			if bulkIs(v, args[0]) {
				e.ncall(r, ndel, k) // redis.pcall: an error is the script's to ignore
				n++
			}
		}
		return appendInt(dst, n), true
	}
	return dst, false
}

// isErr reports whether reply is an error.
func isErr(reply []byte) bool { return len(reply) > 0 && reply[0] == '-' }

// isFalse reports whether reply converts to Lua's false: a null bulk string or array.
func isFalse(reply []byte) bool {
	return len(reply) >= 3 && (reply[0] == '$' || reply[0] == '*') && reply[1] == '-' && reply[2] == '1'
}

// bulkIs reports whether reply is the bulk string s: the Lua string of a reply equal to s.
func bulkIs(reply, s []byte) bool {
	if len(reply) < 4 || reply[0] != '$' {
		return false
	}
	i := bytes.IndexByte(reply, '\r')
	if i < 0 {
		return false
	}
	n, err := strconv.Atoi(string(reply[1:i]))
	if err != nil || n != len(s) || len(reply) < i+2+n {
		return false
	}
	return bytes.Equal(reply[i+2:i+2+n], s)
}

// intReply is the value of an integer reply.
func intReply(reply []byte) (int64, bool) {
	if len(reply) < 4 || reply[0] != ':' {
		return 0, false
	}
	i := bytes.IndexByte(reply, '\r')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(reply[1:i]), 10, 64)
	return n, err == nil
}

// plainInt parses a decimal integer of at most 15 digits without leading zeros, a number
// Lua (gopher-lua's and Lua 5.1's) reads from a string exactly as strconv does.
func plainInt(b []byte) (int64, bool) {
	d := b
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || d[0] == '0' && (len(d) > 1 || len(b) > 1) {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// returned appends what a script that returns redis.call's reply answers: the reply
// converted to Lua and back (an integer through a Lua number).
func returned(dst, reply []byte) []byte {
	if n, ok := intReply(reply); ok {
		return appendInt(dst, toInt(float64(n)))
	}
	if isFalse(reply) {
		return append(dst, "$-1\r\n"...)
	}
	return append(dst, reply...) // a bulk or status reply goes back as it came
}

// appendInt appends the integer reply n.
func appendInt(dst []byte, n int64) []byte {
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// raised appends the reply of a script whose redis.call on line raised the error reply
// reply, as the message handler (onError) and appendFailure write it.
func raised(dst, reply []byte, sha string, line int) []byte {
	msg := reply[1:]
	if i := bytes.IndexByte(msg, '\r'); i >= 0 {
		msg = msg[:i]
	}
	dst = append(dst, '-')
	dst = append(dst, msg...)
	dst = append(dst, " script: "...)
	dst = append(dst, sha...)
	dst = append(dst, ", on @user_script:"...)
	dst = strconv.AppendInt(dst, int64(line), 10)
	return append(dst, ".\r\n"...)
}
