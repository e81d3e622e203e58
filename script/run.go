package script

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// maxDepth is how deeply a script's reply may nest tables, as Lua's C stack limits
// Redis's conversion (a table that holds itself ends there).
const maxDepth = 200

// run runs the compiled script en with keys and args and appends its reply to dst.
func (e *Engine) run(dst []byte, en *entry, keys, args [][]byte, r *Run) []byte {
	L := e.L
	e.call, e.log, e.readOnly, e.sha, e.running = r.Call, r.Log, r.ReadOnly, en.sha, true
	if t, n := e.fill(e.keys, e.nk, keys); t != e.keys {
		e.keys, e.nk = t, n
		e.globals.RawSetString("KEYS", t) // a script cannot change a global: set once a table
	} else {
		e.nk = n
	}
	if t, n := e.fill(e.argv, e.na, args); t != e.argv {
		e.argv, e.na = t, n
		e.globals.RawSetString("ARGV", t)
	} else {
		e.na = n
	}
	e.budget.start(e)
	L.Push(en.fn)
	err := L.PCall(0, 1, e.handler)
	e.running = false
	e.call, e.log = nil, nil
	var ret lua.LValue = lua.LNil
	if err == nil {
		ret = L.Get(-1)
	}
	L.SetTop(0)
	if why := e.budget.why; why != "" {
		return appendErr(dst, why)
	}
	if err != nil {
		var obj lua.LValue = lua.LString(err.Error())
		if ae, ok := err.(*lua.ApiError); ok && ae.Object != nil {
			obj = ae.Object
		}
		return e.appendFailure(dst, obj)
	}
	return appendValue(dst, ret, 0)
}

// fill returns t, which held n strings, holding the strings of list (KEYS, ARGV) as a new
// table would: only them, at 1 to len(list), and no metatable. A table the last run left
// with anything past n (a script may add to KEYS and ARGV) is not used again: fill makes a
// new one. A string already in place is kept (a key sent again allocates nothing).
func (e *Engine) fill(t *lua.LTable, n int, list [][]byte) (*lua.LTable, int) {
	if t == nil || !onlyArray(t, n) {
		t, n = e.L.CreateTable(len(list), 0), 0
	}
	t.Metatable = lua.LNil
	for i, b := range list {
		if s, ok := t.RawGetInt(i + 1).(lua.LString); !ok || string(s) != string(b) {
			t.RawSetInt(i+1, lua.LString(b))
		}
	}
	for i := len(list) + 1; i <= n; i++ {
		t.RawSetInt(i, lua.LNil)
	}
	return t, len(list)
}

// onlyArray reports whether t holds nothing past index n: its array part no value past n,
// its hash part nothing at all (Next from the last value of the array part says).
func onlyArray(t *lua.LTable, n int) bool {
	m := t.MaxN()
	if m > n || m >= len(boxedInts)-2 {
		return false
	}
	var from lua.LValue = lua.LNil
	if m > 0 {
		from = boxedInts[m+2]
	}
	k, _ := t.Next(from)
	return k == lua.LNil
}

// boxedInts are the Lua numbers -2 to 257 as values, made once: a number converted to a
// value otherwise allocates.
var boxedInts = func() (b [260]lua.LValue) {
	for i := range b {
		b[i] = lua.LNumber(i - 2)
	}
	return b
}()

// number is n as a Lua value.
func number(n int64) lua.LValue {
	if n >= -2 && n < int64(len(boxedInts))-2 {
		return boxedInts[n+2]
	}
	return lua.LNumber(n)
}

// appendFailure appends the reply of a script that raised obj, as Redis 7.0 writes it:
// the error, the script's SHA1, and where it was raised.
func (e *Engine) appendFailure(dst []byte, obj lua.LValue) []byte {
	t, ok := obj.(*lua.LTable)
	if !ok { // the message handler could not run (the call stack is full): where is in the text
		msg := "ERR " + obj.String() + " script: " + e.sha
		if rest, ok := strings.CutPrefix(obj.String(), "user_script:"); ok {
			if line, _, ok := strings.Cut(rest, ":"); ok {
				msg += ", on @user_script:" + line + "."
			}
		}
		return appendErr(dst, msg)
	}
	msg := lua.LVAsString(t.RawGetString("err"))
	src, line := t.RawGetString("source"), t.RawGetString("line")
	if src != lua.LNil && line != lua.LNil {
		msg += " script: " + e.sha + ", on " + lua.LVAsString(src) + ":" + lua.LVAsString(line) + "."
	}
	return appendErr(dst, msg)
}

// onError is the message handler of a run, as Redis 7.0's: an error that is not a table
// becomes {err = "ERR " .. message}, and the table is told where it was raised.
func (e *Engine) onError(L *lua.LState) int {
	v := L.Get(1)
	t, ok := v.(*lua.LTable)
	if !ok {
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR "+v.String()))
	}
	for level := 1; level <= 2; level++ {
		d, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", d, lua.LNil); err != nil {
			break
		}
		if d.What == "G" && level == 1 {
			continue // raised by a Go function (redis.call, error): its Lua caller
		}
		if d.CurrentLine >= 0 {
			t.RawSetString("source", lua.LString("@"+d.Source))
			t.RawSetString("line", lua.LNumber(d.CurrentLine))
		}
		break
	}
	L.Push(t)
	return 1
}

// appendValue appends the Redis reply of the Lua value v, converted as Redis does: a number
// is an integer (truncated), a string a bulk string, true 1, false and nil a null, a table
// with err an error, with ok a status, and any other table an array of its elements up to
// the first nil.
func appendValue(dst []byte, v lua.LValue, depth int) []byte {
	switch v := v.(type) {
	case lua.LString:
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, v...)
		return append(dst, '\r', '\n')
	case lua.LNumber:
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, toInt(float64(v)), 10)
		return append(dst, '\r', '\n')
	case lua.LBool:
		if v {
			return append(dst, ":1\r\n"...)
		}
		return append(dst, "$-1\r\n"...)
	case *lua.LTable:
		if depth >= maxDepth {
			return appendErr(dst, "ERR reached lua stack limit")
		}
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return appendErr(dst, string(s))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return appendLine(dst, '+', string(s))
		}
		n := 0
		for v.RawGetInt(n+1) != lua.LNil {
			n++
		}
		dst = append(dst, '*')
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, '\r', '\n')
		for i := 1; i <= n; i++ {
			dst = appendValue(dst, v.RawGetInt(i), depth+1)
		}
		return dst
	}
	return append(dst, "$-1\r\n"...)
}

// toInt converts a Lua number to an integer as C's cast does on x86-64: toward zero, and
// the smallest integer for NaN and what is out of range.
func toInt(f float64) int64 {
	if f != f || f >= 9223372036854775807 || f < -9223372036854775808 {
		return math.MinInt64
	}
	return int64(f)
}

// toLua converts a RESP2 reply to a Lua value as Redis does: an integer is a number, a bulk
// string a string (a null one false), an array a table (a null one false), a status
// {ok = text} and an error {err = text}; isErr says the reply is an error.
func (e *Engine) toLua(b []byte) (v lua.LValue, isErr bool) {
	v, _ = e.parseReply(b, 0, 0)
	return v, len(b) > 0 && b[0] == '-'
}

// parseReply converts the reply at b[at:] and returns the offset past it. The loop made
// the reply, so it is well formed; what is not converts to false.
func (e *Engine) parseReply(b []byte, at, depth int) (lua.LValue, int) {
	if at >= len(b) {
		return lua.LFalse, at
	}
	kind := b[at]
	end := at + 1
	for end+1 < len(b) && b[end] != '\r' {
		end++
	}
	line := b[at+1 : end]
	next := end + 2
	switch kind {
	case '+', '-':
		t := e.L.CreateTable(0, 1)
		name := "ok"
		if kind == '-' {
			name = "err"
		}
		t.RawSetString(name, lua.LString(line))
		return t, next
	case ':':
		n, _ := strconv.ParseInt(string(line), 10, 64)
		return number(n), next
	case '$':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < 0 || next+n > len(b) {
			return lua.LFalse, next
		}
		return lua.LString(b[next : next+n]), next + n + 2
	case '*':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < 0 || depth >= maxDepth {
			return lua.LFalse, next
		}
		t := e.L.CreateTable(min(n, (len(b)-next)/3), 0)
		for i := 1; i <= n; i++ {
			var v lua.LValue
			v, next = e.parseReply(b, next, depth+1)
			t.RawSetInt(i, v)
		}
		return t, next
	}
	return lua.LFalse, len(b)
}

// redisCall is redis.call: the command's reply, an error raised.
func (e *Engine) redisCall(L *lua.LState) int { return e.command(L, true) }

// redisPCall is redis.pcall: the command's reply, an error returned as {err = ...}.
func (e *Engine) redisPCall(L *lua.LState) int { return e.command(L, false) }

// command runs the command whose arguments are on L's stack.
func (e *Engine) command(L *lua.LState, raise bool) int {
	if !e.running {
		return e.fail(L, "redis.call/pcall can only be called inside a script invocation", raise)
	}
	n := L.GetTop()
	if n == 0 {
		return e.fail(L, "Please specify at least one argument for this redis lib call", raise)
	}
	e.argBytes, e.offs = e.argBytes[:0], e.offs[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			e.argBytes = append(e.argBytes, v...)
		case lua.LNumber:
			e.argBytes = strconv.AppendFloat(e.argBytes, float64(v), 'g', 17, 64)
		default:
			return e.fail(L, "Lua redis lib command arguments must be strings or integers", raise)
		}
		e.offs = append(e.offs, len(e.argBytes))
	}
	args := e.argv0[:0]
	start := 0
	for _, end := range e.offs {
		args = append(args, e.argBytes[start:end:end])
		start = end
	}
	e.argv0 = args
	reply := e.call(args)
	v, isErr := e.toLua(reply)
	clear(args)
	if isErr && raise {
		L.Error(v, 0)
		return 0
	}
	L.Push(v)
	return 1
}

// fail answers a redis.call or redis.pcall that could not run with the error msg.
func (e *Engine) fail(L *lua.LState, msg string, raise bool) int {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString("ERR "+msg))
	if raise {
		L.Error(t, 0)
		return 0
	}
	L.Push(t)
	return 1
}

// errorReply is redis.error_reply(msg): {err = msg}, with "ERR " before a message that has
// no code of its own, as Redis 7.0.
func (e *Engine) errorReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		return e.fail(L, "wrong number or type of arguments", false)
	}
	msg := strings.TrimPrefix(string(s), "-")
	if !strings.Contains(msg, " ") {
		msg = "ERR " + msg
	}
	msg = strings.TrimRight(msg, "\r\n")
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	L.Push(t)
	return 1
}

// statusReply is redis.status_reply(msg): {ok = msg}.
func (e *Engine) statusReply(L *lua.LState) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		return e.fail(L, "wrong number or type of arguments", false)
	}
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

// sha1hex is redis.sha1hex(s).
func (e *Engine) sha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.Error(lua.LString("wrong number of arguments"), 0)
	}
	s := sha1.Sum([]byte(L.ToString(1)))
	L.Push(lua.LString(hex.EncodeToString(s[:])))
	return 1
}

// logLine is redis.log(level, message...): the arguments joined by spaces, to the server's
// log (bounded there).
func (e *Engine) logLine(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		return e.fail(L, "redis.log() requires two arguments or more.", true)
	}
	lv, ok := L.Get(1).(lua.LNumber)
	if !ok {
		return e.fail(L, "First argument must be a number (log level).", true)
	}
	if lv < LogDebug || lv > LogWarning {
		return e.fail(L, "Invalid debug level.", true)
	}
	var b strings.Builder
	for i := 2; i <= n && b.Len() < 4096; i++ {
		if i > 2 {
			b.WriteByte(' ')
		}
		b.WriteString(L.ToString(i))
	}
	if e.log != nil {
		msg := b.String()
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		e.log(int(lv), msg)
	}
	return 0
}

// setResp is redis.setresp(n): tallyd speaks RESP2 only, so 3 is refused.
func (e *Engine) setResp(L *lua.LState) int {
	if L.GetTop() != 1 {
		return e.fail(L, "redis.setresp() requires one argument.", true)
	}
	switch L.Get(1) {
	case lua.LNumber(2):
		return 0
	case lua.LNumber(3):
		return e.fail(L, "tallyd speaks RESP2 only: redis.setresp(3) is not supported", true)
	}
	return e.fail(L, "RESP version must be 2 or 3.", true)
}
