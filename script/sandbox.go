package script

import (
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// The sandbox, as Redis 7.0's: the base, table, string and math libraries (no os, io,
// debug, package, dofile or loadfile); the redis table; globals that cannot be created or
// changed ("Attempt to modify a readonly table") and whose absence is an error ("Script
// attempted to access nonexistent global variable"); library tables that cannot be changed.

// Sizes of the Lua state: its call depth and value stack (Redis's Lua stops near 200 C
// levels and 8,000 Lua ones; these keep a runaway recursion to a few MB).
const (
	callStack    = 1000
	registry     = 4096
	registryMax  = 256 << 10
	registryStep = 4096
)

// open makes the Lua state and its sandbox.
func (e *Engine) open() {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: callStack, RegistrySize: registry,
		RegistryMaxSize: registryMax, RegistryGrowStep: registryStep})
	e.L = L
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.G.Global
	e.globals = g
	for _, name := range []string{"dofile", "loadfile", "print", "module", "require", "_printregs", "getfenv",
		"setfenv", "newproxy", "_GOPHER_LUA_VERSION", "package"} {
		g.RawSetString(name, lua.LNil)
	}
	g.RawSetString("collectgarbage", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	g.RawSetString("gcinfo", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	g.RawSetString("getmetatable", L.NewFunction(e.getMetatable))
	g.RawSetString("rawset", L.NewFunction(e.rawSet))
	g.RawSetString("setmetatable", L.NewFunction(e.setMetatable))
	g.RawSetString("error", L.NewFunction(luaError))
	e.loadstring = g.RawGetString("loadstring").(*lua.LFunction).GFunction
	g.RawSetString("loadstring", L.NewFunction(e.loadString))
	g.RawSetString("load", L.NewFunction(e.load))

	str := g.RawGetString("string").(*lua.LTable)
	str.RawSetString("rep", L.NewFunction(e.strRep))
	str.RawSetString("dump", lua.LNil)
	// The functions that loop in Go count their work against the budget (strlib.go).
	e.format = str.RawGetString("format").(*lua.LFunction).GFunction
	gmatch := L.NewFunction(e.strGmatch)
	for name, f := range map[string]lua.LValue{"find": L.NewFunction(e.strFind), "match": L.NewFunction(e.strMatch),
		"gmatch": gmatch, "gfind": gmatch, "gsub": L.NewFunction(e.strGsub), "upper": L.NewFunction(e.strUpper),
		"lower": L.NewFunction(e.strLower), "reverse": L.NewFunction(e.strReverse),
		"format": L.NewFunction(e.strFormat)} {
		str.RawSetString(name, f)
	}
	tab := g.RawGetString("table").(*lua.LTable)
	tab.RawSetString("concat", L.NewFunction(e.tabConcat))
	tab.RawSetString("sort", L.NewFunction(e.tabSort))

	r := L.NewTable()
	L.SetFuncs(r, map[string]lua.LGFunction{
		"call": e.redisCall, "pcall": e.redisPCall, "error_reply": e.errorReply, "status_reply": e.statusReply,
		"sha1hex": e.sha1hex, "log": e.logLine, "setresp": e.setResp,
		"set_repl":           func(L *lua.LState) int { return 0 },
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
	})
	for name, v := range map[string]int{"LOG_DEBUG": LogDebug, "LOG_VERBOSE": LogVerbose, "LOG_NOTICE": LogNotice,
		"LOG_WARNING": LogWarning, "REPL_NONE": 0, "REPL_SLAVE": 1, "REPL_REPLICA": 1, "REPL_AOF": 2, "REPL_ALL": 3} {
		r.RawSetString(name, lua.LNumber(v))
	}
	r.RawSetString("REDIS_VERSION", lua.LString("7.0.15"))
	r.RawSetString("REDIS_VERSION_NUM", lua.LNumber(0x07000f))
	g.RawSetString("redis", r)

	// Each library table is seen through a read-only proxy.
	for _, name := range []string{"string", "table", "math", "redis"} {
		if t, ok := g.RawGetString(name).(*lua.LTable); ok {
			g.RawSetString(name, e.guard(t))
		}
	}
	if mt, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		mt.RawSetString("__metatable", lua.LFalse)
	}

	// Globals: the script's environment is an empty read-only table whose reads go to g;
	// g answers a missing name with Redis's error.
	missing := L.NewTable()
	missing.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.ToString(2))
		return 0
	}))
	L.SetMetatable(g, missing)
	e.env = e.guard(g)
	g.RawSetString("_G", e.env)
	e.handler = L.NewFunction(e.onError)
	e.budget.sample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	L.SetContext(&e.budget)
}

// guard returns an empty table through which t is read and nothing can be written.
func (e *Engine) guard(t *lua.LTable) *lua.LTable {
	L := e.L
	p, mt := L.NewTable(), L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(refuseWrite))
	mt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(p, mt)
	e.protected[p], e.protected[t] = true, true
	return p
}

// refuseWrite is a read-only table's __newindex.
func refuseWrite(L *lua.LState) int {
	L.RaiseError("Attempt to modify a readonly table")
	return 0
}

// getMetatable is getmetatable, which honours __metatable as Lua 5.1's does.
func (e *Engine) getMetatable(L *lua.LState) int {
	mt := L.GetMetatable(L.CheckAny(1))
	if t, ok := mt.(*lua.LTable); ok {
		if f := t.RawGetString("__metatable"); f != lua.LNil {
			L.Push(f)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

// rawSet is rawset, refused on the read-only tables.
func (e *Engine) rawSet(L *lua.LState) int {
	t := L.CheckTable(1)
	if e.protected[t] {
		L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
	L.CheckAny(2)
	L.CheckAny(3)
	t.RawSet(L.Get(2), L.Get(3))
	L.SetTop(1)
	return 1
}

// setMetatable is setmetatable, refused on the read-only tables.
func (e *Engine) setMetatable(L *lua.LState) int {
	L.CheckTypes(2, lua.LTNil, lua.LTTable)
	obj := L.Get(1)
	if obj == lua.LNil {
		L.RaiseError("cannot set metatable to a nil object.")
	}
	if t, ok := obj.(*lua.LTable); ok && e.protected[t] {
		L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
	if m, ok := L.GetMetatable(obj).(*lua.LTable); ok && m.RawGetString("__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	L.SetMetatable(obj, L.Get(2))
	L.SetTop(1)
	return 1
}

// luaError is error(v [, level]), which, as Lua's, takes any value, nil included.
func luaError(L *lua.LState) int {
	L.Error(L.Get(1), L.OptInt(2, 1))
	return 0
}

// strRep is string.rep, refused past the longest string a script may build.
func (e *Engine) strRep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > e.lim.MaxString/len(s) {
		e.tooLong(L)
	}
	e.work(L, n*len(s)/64)
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// tabConcat is table.concat, refused past the longest string a script may build.
func (e *Engine) tabConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := L.OptString(2, "")
	i := L.OptInt(3, 1)
	j := L.OptInt(4, t.Len())
	var b strings.Builder
	for k := i; k <= j; k++ {
		v := t.RawGetInt(k)
		if !lua.LVCanConvToString(v) {
			L.RaiseError("invalid value (at index %d) in table for 'concat'", k)
		}
		s := lua.LVAsString(v)
		if b.Len()+len(s)+len(sep) > e.lim.MaxString {
			e.tooLong(L)
		}
		e.work(L, 1+(len(s)+len(sep))/64)
		b.WriteString(s)
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// tooLong stops the run: it would build a string past MaxString.
func (e *Engine) tooLong(L *lua.LState) {
	e.budget.why = "ERR script would build a string over " + strconv.Itoa(e.lim.MaxString) + " bytes (the longest a script may build)"
	L.RaiseError("%s", e.budget.why)
}

// budget is the context gopher-lua asks before each instruction: it ends a run that passes
// its time or its memory, or holds a string over MaxString.
type budget struct {
	e        *Engine
	n        uint32
	work     int // units of built-in work since the last check (Engine.work)
	deadline int64
	alloc0   uint64
	why      string
	sample   []metrics.Sample
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// checkEvery is how many instructions pass between two looks at the clock and the heap.
const checkEvery = 16

func (b *budget) start(e *Engine) {
	b.e, b.n, b.work, b.why = e, 0, 0, ""
	b.deadline = time.Now().Add(e.lim.Time).UnixNano()
	b.alloc0 = 0 // read at the first check: a short script never pays for it
}

// Done is asked before each instruction: closed once the run is over its budget.
func (b *budget) Done() <-chan struct{} {
	if b.why != "" {
		return closedChan
	}
	e := b.e
	if e == nil || !e.running {
		return nil
	}
	L := e.L
	for i, top := 1, L.GetTop(); i <= top; i++ { // what the last instruction made is in a register
		if s, ok := L.Get(i).(lua.LString); ok && len(s) > e.lim.MaxString {
			b.why = "ERR script built a string over " + strconv.Itoa(e.lim.MaxString) + " bytes (the longest a script may build)"
			return closedChan
		}
	}
	b.n++
	if b.n%checkEvery != 0 || !b.over() {
		return nil
	}
	return closedChan
}

// workCheck is how many units of a built-in's work (a matcher's step, 64 bytes copied)
// pass between two looks at the clock and the heap: about 10-50 µs.
const workCheck = 1024

// work counts n units of a built-in function's work (strlib.go) and stops the run, from
// inside the function, once it is past its time or memory: the loop is never held more
// than workCheck units past the limit, whatever the built-in does.
func (e *Engine) work(L *lua.LState, n int) {
	b := &e.budget
	b.work += n
	if b.work < workCheck {
		return
	}
	b.work = 0
	if b.why != "" || b.over() {
		L.RaiseError("%s", b.why)
	}
}

// over reports whether the run is past its time or its memory, and says why.
func (b *budget) over() bool {
	e := b.e
	if time.Now().UnixNano() > b.deadline {
		b.why = "BUSY script ran past lua-time-limit (" + strconv.FormatInt(e.lim.Time.Milliseconds(), 10) +
			" ms) and was stopped; the commands it ran before stay run"
		return true
	}
	metrics.Read(b.sample)
	if b.alloc0 == 0 {
		b.alloc0 = b.sample[0].Value.Uint64()
	}
	if used := b.sample[0].Value.Uint64() - b.alloc0; used > uint64(e.lim.MaxMemory) {
		b.why = "ERR script allocated over lua-max-memory (" + strconv.FormatInt(e.lim.MaxMemory, 10) +
			" bytes) and was stopped; the commands it ran before stay run"
		return true
	}
	return false
}

func (b *budget) Err() error {
	if b.why == "" {
		return nil
	}
	return budgetError(b.why)
}

func (b *budget) Deadline() (time.Time, bool) { return time.Time{}, false }
func (b *budget) Value(any) any               { return nil }

// budgetError is the error gopher-lua raises when the budget ends a run.
type budgetError string

func (e budgetError) Error() string { return string(e) }
