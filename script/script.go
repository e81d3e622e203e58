// Package script runs Redis scripts (EVAL, EVALSHA, EVAL_RO, SCRIPT) on gopher-lua, the
// Lua 5.1 that Redis embeds: one Lua state, a sandbox as Redis 7.0's, the conversions of
// replies both ways, a cache of compiled scripts by SHA1, and a budget of time and memory
// per run. It does no I/O and starts no goroutine; a script's redis.call goes back to the
// caller (the loop) through a function value, which runs the command as the wire would and
// hands back its RESP reply.
package script

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// CallFunc runs one command line of a script and returns its RESP2 reply. The reply may
// be a view into the caller's buffer: it is read before the next call.
type CallFunc func(args [][]byte) []byte

// LogFunc writes one redis.log line at level (LogDebug ... LogWarning).
type LogFunc func(level int, msg string)

// redis.log's levels, as Redis numbers them.
const (
	LogDebug = iota
	LogVerbose
	LogNotice
	LogWarning
)

// Limits bound the scripts: the run of one, and the cache of all.
type Limits struct {
	Time       time.Duration // how long one run may take (lua-time-limit)
	MaxMemory  int64         // bytes one run may allocate in all
	MaxString  int           // the longest string a script may build
	MaxScripts int           // scripts kept that only EVAL sent (SCRIPT LOAD's are kept until FLUSH)
	MaxBytes   int64         // bytes of script bodies kept in all
	LuaOnly    bool          // run the lock libraries' scripts on Lua too, not as native ops (native.go)
}

// DefaultLimits are the limits tallyd starts with (docs/redis.md "Scripting").
var DefaultLimits = Limits{Time: 100 * time.Millisecond, MaxMemory: 64 << 20, MaxString: 4 << 20,
	MaxScripts: 500, MaxBytes: 64 << 20}

// entry is a cached script: its body, compiled once, and whether SCRIPT LOAD asked for it.
type entry struct {
	sha        string
	size       int64 // the body's bytes (lua-scripts-max-bytes)
	mem        int64 // what the compiled script takes (scriptBytes)
	fn         *lua.LFunction
	native     nativeOp // a lock library's script, run without Lua (native.go)
	loaded     bool     // SCRIPT LOAD: kept until SCRIPT FLUSH; else EVAL's, evicted oldest first
	prev, next *entry   // the EVAL-only ones, least recently used first
}

// Engine is one Lua state and the scripts it has compiled. It is not safe for concurrent
// use: the loop owns it.
type Engine struct {
	L       *lua.LState
	lim     Limits
	scripts map[string]*entry
	lru     entry // sentinel of the EVAL-only list
	nEval   int
	bytes   int64
	mem     int64 // compiled scripts' memory (entry.mem), counted in --max-memory

	env        *lua.LTable // what scripts see as their globals (empty: reads go to globals)
	globals    *lua.LTable
	keys, argv *lua.LTable
	nk, na     int // lengths of keys and argv as last filled
	protected  map[*lua.LTable]bool
	handler    *lua.LFunction
	budget     budget
	format     lua.LGFunction // gopher-lua's string.format, which strFormat bounds
	loadstring lua.LGFunction // gopher-lua's loadstring, which loadString bounds

	// The run in progress.
	call     CallFunc
	log      LogFunc
	readOnly bool
	running  bool
	sha      string
	argv0    [][]byte // redis.call's arguments
	argBytes []byte
	offs     []int
	numBuf   []byte // a number a native op computes (native.go)

	nativeRuns uint64 // scripts run as native ops
}

// NativeRuns is how many runs were native ops (native.go), not Lua's.
func (e *Engine) NativeRuns() uint64 { return e.nativeRuns }

// Errors of the SCRIPT and EVAL commands, as Redis 7.0 words them.
var (
	ErrNoScript   = errors.New("NOSCRIPT No matching script. Please use EVAL.")
	ErrCacheFull  = errors.New("ERR script cache full")
	errNegKeys    = "ERR Number of keys can't be negative"
	errManyKeys   = "ERR Number of keys can't be greater than number of args"
	errNotInteger = "ERR value is not an integer or out of range"
)

// New returns an engine with the given limits (zero fields take DefaultLimits').
func New(lim Limits) *Engine {
	e := &Engine{scripts: map[string]*entry{}, protected: map[*lua.LTable]bool{}}
	e.SetLimits(lim)
	e.lru.prev, e.lru.next = &e.lru, &e.lru
	e.open()
	return e
}

// SetLimits changes the limits; a smaller cache evicts EVAL-only scripts at the next
// EVAL.
func (e *Engine) SetLimits(lim Limits) {
	d := DefaultLimits
	if lim.Time <= 0 {
		lim.Time = d.Time
	}
	if lim.MaxMemory <= 0 {
		lim.MaxMemory = d.MaxMemory
	}
	if lim.MaxString <= 0 {
		lim.MaxString = d.MaxString
	}
	if lim.MaxScripts <= 0 {
		lim.MaxScripts = d.MaxScripts
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = d.MaxBytes
	}
	e.lim = lim
}

// Limits returns the limits in force.
func (e *Engine) Limits() Limits { return e.lim }

// SHA1 returns the lower-case hex SHA1 of body, the name Redis gives a script.
func SHA1(body []byte) string {
	var b [40]byte
	sha1Hex(&b, body)
	return string(b[:])
}

// sha1Hex writes the lower-case hex SHA1 of body to b.
func sha1Hex(b *[40]byte, body []byte) {
	s := sha1.Sum(body)
	hex.Encode(b[:], s[:])
}

// Stats returns the number of scripts cached and the bytes of their bodies.
func (e *Engine) Stats() (scripts int, bytes int64) { return len(e.scripts), e.bytes }

// Memory is what the cached scripts take compiled (the server's memory budget counts it).
func (e *Engine) Memory() int64 { return e.mem }

// RoomFunc reports whether need more bytes fit the server's memory budget (nil: always).
type RoomFunc func(need int64) bool

// ErrOOM is SCRIPT LOAD's answer when the compiled script does not fit the memory budget
// once every script only EVAL sent has been forgotten: Redis's -OOM.
var ErrOOM = errors.New("OOM command not allowed when used memory > 'maxmemory'.")

// EvictEval forgets EVAL-only scripts, least recently used first, until need bytes of
// memory are freed or none is left, and returns what it freed: what no client is owed
// gives way to the budget.
func (e *Engine) EvictEval(need int64) (freed int64) {
	for freed < need && e.lru.next != &e.lru {
		freed += e.evictOne()
	}
	return freed
}

// evictOne forgets the least recently used EVAL-only script and returns its memory.
func (e *Engine) evictOne() int64 {
	en := e.lru.next
	e.unlink(en)
	delete(e.scripts, en.sha)
	e.bytes -= en.size
	e.mem -= en.mem
	return en.mem
}

// fits makes room for mem more bytes in the budget, evicting EVAL-only scripts while they
// do not fit, and reports whether they fit now.
func (e *Engine) fits(mem int64, room RoomFunc) bool {
	if room == nil {
		return true
	}
	for !room(mem) {
		if e.lru.next == &e.lru {
			return false
		}
		e.evictOne()
	}
	return true
}

// Exists reports whether the script named sha (40 hex digits, any case) is cached.
func (e *Engine) Exists(sha []byte) bool {
	if len(sha) != 40 {
		return false
	}
	var b [40]byte
	lowerSHA(&b, sha)
	_, ok := e.scripts[string(b[:])]
	return ok
}

// lowerSHA writes sha (40 bytes) in lower case to b.
func lowerSHA(b *[40]byte, sha []byte) {
	for i, c := range sha[:40] {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
}

// Flush forgets every cached script (SCRIPT FLUSH), and starts a new Lua state.
func (e *Engine) Flush() {
	clear(e.scripts)
	e.lru.prev, e.lru.next = &e.lru, &e.lru
	e.nEval, e.bytes, e.mem = 0, 0, 0
	e.L.Close()
	clear(e.protected)
	e.keys, e.argv, e.nk, e.na = nil, nil, 0, 0
	e.open()
}

// Load compiles body and keeps it until SCRIPT FLUSH (SCRIPT LOAD): its SHA1, or a
// compile error or ErrCacheFull as Redis-style error text, or ErrOOM when the compiled
// script does not fit room (the memory budget) once the EVAL-only scripts are forgotten.
func (e *Engine) Load(body []byte, room RoomFunc) (string, error) {
	sha := SHA1(body)
	if en := e.scripts[sha]; en != nil {
		if !en.loaded {
			e.unlink(en)
			en.loaded = true
		}
		return sha, nil
	}
	if int64(len(body)) > e.lim.MaxBytes-e.bytes {
		e.evict(int64(len(body)), 0)
		if int64(len(body)) > e.lim.MaxBytes-e.bytes {
			return "", errors.New("ERR script cache full: " + strconv.FormatInt(e.bytes, 10) + " bytes of scripts loaded, " +
				strconv.Itoa(len(body)) + " more would pass lua-scripts-max-bytes (" + strconv.FormatInt(e.lim.MaxBytes, 10) + "): SCRIPT FLUSH first")
		}
	}
	fn, err := e.compile(body)
	if err != nil {
		return "", err
	}
	en := &entry{sha: sha, size: int64(len(body)), mem: scriptBytes(fn), fn: fn, native: natives[sha], loaded: true}
	if !e.fits(en.mem, room) {
		return "", ErrOOM
	}
	e.add(en)
	return sha, nil
}

// compile parses and compiles body as Redis 7.0 does, as the chunk "@user_script".
func (e *Engine) compile(body []byte) (*lua.LFunction, error) {
	chunk, err := parse.Parse(strings.NewReader(string(body)), "user_script")
	if err != nil {
		return nil, errors.New("ERR Error compiling script (new function): " + compileError(err))
	}
	proto, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, errors.New("ERR Error compiling script (new function): " + compileError(err))
	}
	// gopher-lua gives the main chunk, as any function with '...', Lua 5.0's table 'arg' of
	// its varargs at each call (a table and its map: allocations per run), which no name
	// reaches there (Lua 5.1 gives a main chunk none): not made.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	fn := e.L.NewFunctionFromProto(proto)
	fn.Env = e.env
	return fn, nil
}

// compileError is gopher-lua's compile error on one line, as Redis writes Lua's.
func compileError(err error) string {
	msg := strings.TrimSpace(err.Error())
	return strings.Join(strings.Fields(msg), " ")
}

// add caches en.
func (e *Engine) add(en *entry) {
	e.scripts[en.sha] = en
	e.bytes += en.size
	e.mem += en.mem
	if !en.loaded {
		e.pushBack(en)
		e.nEval++
	}
}

// evict forgets EVAL-only scripts, least recently used first, until need more bytes fit
// and fewer than MaxScripts-keep EVAL-only ones are left (as Redis 7.4 does).
func (e *Engine) evict(need int64, keep int) {
	for e.lru.next != &e.lru && (e.bytes+need > e.lim.MaxBytes || e.nEval+keep > e.lim.MaxScripts) {
		e.evictOne()
	}
}

func (e *Engine) pushBack(en *entry) {
	en.prev, en.next = e.lru.prev, &e.lru
	e.lru.prev.next = en
	e.lru.prev = en
}

func (e *Engine) unlink(en *entry) {
	if en.prev == nil {
		return
	}
	en.prev.next, en.next.prev = en.next, en.prev
	en.prev, en.next = nil, nil
	e.nEval--
}

// Run is one EVAL-family command: its script (the body for EVAL, the SHA1 for EVALSHA),
// its keys and arguments, whether it may only read, and how to run its commands.
type Run struct {
	Body     []byte // EVAL's script, or nil
	SHA      []byte // EVALSHA's name, when Body is nil
	NumKeys  []byte // the numkeys argument
	Rest     [][]byte
	ReadOnly bool
	Call     CallFunc
	Log      LogFunc
	Room     RoomFunc // whether a newly compiled script fits the memory budget (nil: always)
}

// Eval runs r and appends its reply (RESP2) to dst. The script runs whole, or until it
// passes its budget of time or memory; the commands it ran before stay run.
func (e *Engine) Eval(dst []byte, r *Run) []byte {
	nk, ok := parseInt(r.NumKeys)
	switch {
	case !ok:
		return appendErr(dst, errNotInteger)
	case nk > int64(len(r.Rest)):
		return appendErr(dst, errManyKeys)
	case nk < 0:
		return appendErr(dst, errNegKeys)
	}
	var en *entry
	var name [40]byte
	if r.Body != nil {
		sha1Hex(&name, r.Body)
		if en = e.scripts[string(name[:])]; en == nil {
			sha := string(name[:])
			fn, err := e.compile(r.Body)
			if err != nil {
				return appendErr(dst, err.Error())
			}
			en = &entry{sha: sha, size: int64(len(r.Body)), mem: scriptBytes(fn), fn: fn, native: natives[sha]}
			e.evict(en.size, 1)
			if en.size <= e.lim.MaxBytes-e.bytes && e.fits(en.mem, r.Room) {
				e.add(en) // else it runs uncached: the loaded scripts fill the cache or the budget
			}
		} else if !en.loaded {
			e.unlink(en)
			e.pushBack(en)
			e.nEval++
		}
	} else {
		if len(r.SHA) == 40 {
			if en = e.scripts[string(r.SHA)]; en == nil { // as clients send it: lower case
				lowerSHA(&name, r.SHA)
				en = e.scripts[string(name[:])]
			}
		}
		if en == nil {
			return appendErr(dst, ErrNoScript.Error())
		}
		if !en.loaded {
			e.unlink(en)
			e.pushBack(en)
			e.nEval++
		}
	}
	if en.native != nativeNone && !e.lim.LuaOnly {
		if out, ok := e.runNative(dst, en, r.Rest[:nk], r.Rest[nk:], r); ok {
			e.nativeRuns++
			return out
		}
	}
	return e.run(dst, en, r.Rest[:nk], r.Rest[nk:], r)
}

// parseInt parses a decimal integer as Redis does (no sign other than '-', no spaces).
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || b[0] == '+' || (len(b) > 1 && b[0] == '0') || (len(b) > 2 && b[0] == '-' && b[1] == '0') {
		return 0, false
	}
	return n, true
}

// appendErr appends the error reply msg ("CODE text").
func appendErr(dst []byte, msg string) []byte { return appendLine(dst, '-', msg) }

// appendLine appends a one-line reply of kind ('+' or '-'), each CR or LF of s a space.
func appendLine(dst []byte, kind byte, s string) []byte {
	dst = append(dst, kind)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return append(dst, '\r', '\n')
}
