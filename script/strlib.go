package script

import (
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The string library's functions that loop in Go count their work against the run's
// budget (issue 30): gopher-lua's pattern matcher is one uninterrupted, backtracking call
// whose cost grows as a power of the subject's length (string.match(string.rep('a', 400),
// '^(a-)(a-)(a-)(a-)b') held the loop 71 s), and a gsub could build a string without
// bound. find, match, gmatch and gsub here are Lua 5.1's (lstrlib.c, the Lua Redis embeds),
// written again in Go: the matcher counts a step for each position it tries, and every
// workCheck steps asks the budget (time and memory) and stops the run past it, with the
// error the instruction limit gives. Strings built (gsub's result) are held to MaxString.

// Lua 5.1's limits and markers of a pattern's captures.
const (
	maxCaptures   = 32
	capUnfinished = -1
	capPosition   = -2
	// maxMatchDepth bounds the matcher's recursion (one level per pattern item at most):
	// Lua 5.2 and later stop at 200 C levels; 5.1 only at the C stack's end.
	maxMatchDepth = 5000
	specials      = "^$*+?.([%-"
)

// matcher is one match of pattern p against subject s (Lua's MatchState).
type matcher struct {
	e       *Engine
	L       *lua.LState
	s, p    string
	level   int
	depth   int
	capture [maxCaptures]struct{ init, len int }
}

// step counts n units of work and stops the run past its budget.
func (m *matcher) step(n int) { m.e.work(m.L, n) }

func (m *matcher) classEnd(p int) int {
	pat := m.p
	if p >= len(pat) {
		m.L.RaiseError("%s", "malformed pattern (ends with '%')")
	}
	c := pat[p]
	p++
	switch c {
	case '%':
		if p >= len(pat) {
			m.L.RaiseError("%s", "malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if p < len(pat) && pat[p] == '^' {
			p++
		}
		for { // look for a ']'
			if p >= len(pat) {
				m.L.RaiseError("malformed pattern (missing ']')")
			}
			c := pat[p]
			p++
			if c == '%' && p < len(pat) {
				p++ // skip escapes (e.g. '%]')
			}
			if p < len(pat) && pat[p] == ']' {
				break
			}
		}
		return p + 1
	}
	return p
}

// matchClass reports whether c is in the class %cl (C locale).
func matchClass(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 32 && c < 127 && !isAlpha(c) && !(c >= '0' && c <= '9')
	case 's':
		res = c == ' ' || (c >= '\t' && c <= '\r')
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || (c >= '0' && c <= '9')
	case 'x':
		res = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// matchBracket reports whether c is in the set [...] from p (its '[') to ec (its ']').
func (m *matcher) matchBracket(c byte, p, ec int) bool {
	pat := m.p
	sig := true
	if pat[p+1] == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case pat[p] == '%':
			p++
			if p < len(pat) && matchClass(c, pat[p]) {
				return sig
			}
		case p+2 < ec && pat[p+1] == '-':
			p += 2
			if pat[p-2] <= c && c <= pat[p] {
				return sig
			}
		case pat[p] == c:
			return sig
		}
	}
	return !sig
}

// single reports whether the subject's byte at s matches the class from p to ep.
func (m *matcher) single(s, p, ep int) bool {
	if s >= len(m.s) {
		return false
	}
	c := m.s[s]
	switch m.p[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.p[p+1])
	case '[':
		return m.matchBracket(c, p, ep-1)
	}
	return m.p[p] == c
}

// match matches the pattern from p against the subject from s: the end of the match, or
// -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxMatchDepth {
		m.L.RaiseError("pattern too complex")
	}
	defer func() { m.depth-- }()
	pat := m.p
	for {
		m.step(1)
		if p >= len(pat) {
			return s // end of pattern
		}
		switch pat[p] {
		case '(':
			if p+1 < len(pat) && pat[p+1] == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case '%':
			if p+1 < len(pat) {
				switch c := pat[p+1]; {
				case c == 'b':
					s = m.matchBalance(s, p+2)
					if s < 0 {
						return -1
					}
					p += 4
					continue
				case c == 'f':
					p += 2
					if p >= len(pat) || pat[p] != '[' {
						m.L.RaiseError("%s", "missing '[' after '%f' in pattern")
					}
					ep := m.classEnd(p)
					var prev, cur byte
					if s > 0 {
						prev = m.s[s-1]
					}
					if s < len(m.s) {
						cur = m.s[s]
					}
					if m.matchBracket(prev, p, ep-1) || !m.matchBracket(cur, p, ep-1) {
						return -1
					}
					p = ep
					continue
				case c >= '0' && c <= '9':
					s = m.matchCapture(s, c)
					if s < 0 {
						return -1
					}
					p += 2
					continue
				}
			}
		case '$':
			if p+1 == len(pat) {
				if s == len(m.s) {
					return s
				}
				return -1
			}
		}
		ep := m.classEnd(p)
		ok := m.single(s, p, ep)
		var q byte
		if ep < len(pat) {
			q = pat[ep]
		}
		switch q {
		case '?':
			if ok {
				if res := m.match(s+1, ep+1); res >= 0 {
					return res
				}
			}
			p = ep + 1
			continue
		case '*':
			return m.maxExpand(s, p, ep)
		case '+':
			if !ok {
				return -1
			}
			return m.maxExpand(s+1, p, ep)
		case '-':
			return m.minExpand(s, p, ep)
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for m.single(s+i, p, ep) {
		i++
		m.step(1)
	}
	for ; i >= 0; i-- { // try with the most repetitions, then fewer
		if res := m.match(s+i, ep+1); res >= 0 {
			return res
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if res := m.match(s, ep+1); res >= 0 {
			return res
		}
		if !m.single(s, p, ep) {
			return -1
		}
		s++
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.L.RaiseError("too many captures")
	}
	m.capture[m.level].init, m.capture[m.level].len = s, what
	m.level++
	res := m.match(s, p)
	if res < 0 {
		m.level--
	}
	return res
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.capture[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.L.RaiseError("invalid pattern capture")
	}
	m.capture[l].len = s - m.capture[l].init
	res := m.match(s, p)
	if res < 0 {
		m.capture[l].len = capUnfinished
	}
	return res
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.p) {
		m.L.RaiseError("unbalanced pattern")
	}
	if s >= len(m.s) || m.s[s] != m.p[p] {
		return -1
	}
	b, e := m.p[p], m.p[p+1]
	cont := 1
	for s++; s < len(m.s); s++ {
		m.step(1)
		switch m.s[s] {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *matcher) matchCapture(s int, c byte) int {
	l := int(c - '1')
	if l < 0 || l >= m.level || m.capture[l].len == capUnfinished {
		m.L.RaiseError("invalid capture index")
	}
	n := m.capture[l].len
	if n < 0 {
		return -1 // a position capture: Lua 5.1 compares (size_t)-2 bytes, never matched
	}
	m.step(n / 16)
	init := m.capture[l].init
	if len(m.s)-s >= n && m.s[init:init+n] == m.s[s:s+n] {
		return s + n
	}
	return -1
}

// capture returns capture i of the match from s to e (the whole match when there is none).
func (m *matcher) captureValue(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.s[s:e])
		}
		m.L.RaiseError("invalid capture index")
	}
	c := m.capture[i]
	switch c.len {
	case capUnfinished:
		m.L.RaiseError("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(m.s[c.init : c.init+c.len])
}

// pushCaptures pushes the captures of the match from s to e (the whole match when there
// are none and wholeIfNone) and returns how many.
func (m *matcher) pushCaptures(s, e int, wholeIfNone bool) int {
	n := m.level
	if n == 0 && wholeIfNone {
		n = 1
	}
	for i := 0; i < n; i++ {
		m.L.Push(m.captureValue(i, s, e))
	}
	return n
}

// posRelat is Lua 5.1's posrelat: a negative position counts from the end.
func posRelat(pos, n int) int {
	if pos < 0 {
		pos += n + 1
	}
	return max(pos, 0)
}

// strFind is string.find.
func (e *Engine) strFind(L *lua.LState) int { return e.findAux(L, true) }

// strMatch is string.match.
func (e *Engine) strMatch(L *lua.LState) int { return e.findAux(L, false) }

func (e *Engine) findAux(L *lua.LState, find bool) int {
	s := L.CheckString(1)
	p := L.CheckString(2)
	init := posRelat(L.OptInt(3, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > len(s) {
		init = len(s)
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(p, specials)) {
		e.work(L, (len(s)-init)/64)
		if i := strings.Index(s[init:], p); i >= 0 {
			L.Push(lua.LNumber(init + i + 1))
			L.Push(lua.LNumber(init + i + len(p)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := &matcher{e: e, L: L, s: s, p: p}
	anchor := len(p) > 0 && p[0] == '^'
	pstart := 0
	if anchor {
		pstart = 1
	}
	for s1 := init; ; s1++ {
		m.level = 0
		if res := m.match(s1, pstart); res >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(res))
				return m.pushCaptures(-1, 0, false) + 2
			}
			return m.pushCaptures(s1, res, true)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

// gmatchState is a string.gmatch iterator's state.
type gmatchState struct {
	s, p string
	pos  int
}

// strGmatch is string.gmatch.
func (e *Engine) strGmatch(L *lua.LState) int {
	s := L.CheckString(1)
	p := L.CheckString(2)
	ud := L.NewUserData()
	ud.Value = &gmatchState{s: s, p: p}
	L.Push(L.NewClosure(e.gmatchNext, ud))
	return 1
}

func (e *Engine) gmatchNext(L *lua.LState) int {
	ud, ok := L.Get(lua.UpvalueIndex(1)).(*lua.LUserData)
	if !ok {
		return 0
	}
	st := ud.Value.(*gmatchState)
	m := &matcher{e: e, L: L, s: st.s, p: st.p}
	for src := st.pos; src <= len(st.s); src++ {
		m.level = 0
		if end := m.match(src, 0); end >= 0 {
			st.pos = end
			if end == src {
				st.pos++ // an empty match: go on at least one position
			}
			return m.pushCaptures(src, end, true)
		}
	}
	st.pos = len(st.s) + 1
	return 0
}

// strGsub is string.gsub, its result held to MaxString.
func (e *Engine) strGsub(L *lua.LState) int {
	src := L.CheckString(1)
	p := L.CheckString(2)
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		L.RaiseError("bad argument #3 to 'gsub' (string/function/table expected)")
	}
	maxN := L.OptInt(4, len(src)+1)
	anchor := len(p) > 0 && p[0] == '^'
	pstart := 0
	if anchor {
		pstart = 1
	}
	m := &matcher{e: e, L: L, s: src, p: p}
	var b []byte
	add := func(str string) {
		if len(b)+len(str) > e.lim.MaxString {
			e.tooLong(L)
		}
		e.work(L, len(str)/64)
		b = append(b, str...)
	}
	n, at := 0, 0
scan:
	for n < maxN {
		m.level = 0
		end := m.match(at, pstart)
		if end >= 0 {
			n++
			e.gsubValue(m, repl, at, end, add)
		}
		switch {
		case end > at:
			at = end
		case at < len(src):
			add(src[at : at+1])
			at++
		default:
			break scan // the subject's end
		}
		if anchor {
			break
		}
	}
	add(src[min(at, len(src)):])
	L.Push(lua.LString(b))
	L.Push(lua.LNumber(n))
	return 2
}

// gsubValue adds the replacement of the match from s to e (Lua 5.1's add_value).
func (e *Engine) gsubValue(m *matcher, repl lua.LValue, s, end int, add func(string)) {
	L := m.L
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news := lua.LVAsString(r)
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				add(news[i : i+1])
				continue
			}
			i++
			switch {
			case i >= len(news):
				add("\x00") // what follows the escape in C: the string's terminator
			case news[i] < '0' || news[i] > '9':
				add(news[i : i+1])
			case news[i] == '0':
				add(m.s[s:end])
			default:
				add(lua.LVAsString(m.captureValue(int(news[i]-'1'), s, end)))
			}
		}
		return
	case *lua.LFunction:
		L.Push(r)
		n := m.pushCaptures(s, end, true)
		L.Call(n, 1)
		v = L.Get(-1)
		L.Pop(1)
	case *lua.LTable:
		v = L.GetTable(r, m.captureValue(0, s, end))
	}
	switch {
	case !lua.LVAsBool(v):
		add(m.s[s:end]) // keep the original text
	case v.Type() == lua.LTString || v.Type() == lua.LTNumber:
		add(lua.LVAsString(v))
	default:
		L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	}
}

// strUpper, strLower and strReverse are string.upper, lower and reverse, their work
// counted.
func (e *Engine) strUpper(L *lua.LState) int {
	s := L.CheckString(1)
	e.work(L, len(s)/64)
	L.Push(lua.LString(mapBytes(s, 'a', 'z', -32)))
	return 1
}

func (e *Engine) strLower(L *lua.LState) int {
	s := L.CheckString(1)
	e.work(L, len(s)/64)
	L.Push(lua.LString(mapBytes(s, 'A', 'Z', 32)))
	return 1
}

// mapBytes is C's toupper or tolower in the C locale (bytes, not runes): the bytes from lo
// to hi moved by d.
func mapBytes(s string, lo, hi byte, d int) string {
	b := make([]byte, len(s))
	for i := range len(s) {
		c := s[i]
		if c >= lo && c <= hi {
			c = byte(int(c) + d)
		}
		b[i] = c
	}
	return string(b)
}

func (e *Engine) strReverse(L *lua.LState) int {
	s := L.CheckString(1)
	e.work(L, len(s)/64)
	b := make([]byte, len(s))
	for i := range len(s) {
		b[len(s)-1-i] = s[i]
	}
	L.Push(lua.LString(b))
	return 1
}

// strFormat is string.format, refused when its result could pass MaxString: each
// directive's width and precision (Go's fmt takes up to 1e6) and each argument's length
// are counted before gopher-lua formats it.
func (e *Engine) strFormat(L *lua.LState) int {
	f := L.CheckString(1)
	size, arg := len(f), 2
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		width, prec := 0, 0
		cur := &width
	spec:
		for ; i < len(f); i++ {
			c := f[i]
			switch {
			case c >= '0' && c <= '9':
				*cur = min(*cur*10+int(c-'0'), 1<<24)
				continue
			case c == '.':
				cur = &prec
				continue
			case c == '-' || c == '+' || c == ' ' || c == '#':
				continue
			}
			break spec
		}
		n := 32 + prec
		if arg <= L.GetTop() {
			if s, ok := L.Get(arg).(lua.LString); ok {
				n = max(n, len(s))
			} else {
				n = max(n, 320+prec) // a float's %f digits
			}
		}
		arg++
		size += max(width, n)
	}
	if size > e.lim.MaxString {
		e.tooLong(L)
	}
	e.work(L, size/64)
	return e.format(L)
}

// sorter is table.sort's order, each comparison a step of the budget.
type sorter struct {
	e    *Engine
	L    *lua.LState
	fn   *lua.LFunction
	vals []lua.LValue
}

func (s *sorter) Len() int      { return len(s.vals) }
func (s *sorter) Swap(i, j int) { s.vals[i], s.vals[j] = s.vals[j], s.vals[i] }
func (s *sorter) Less(i, j int) bool {
	s.e.work(s.L, 1)
	if s.fn == nil {
		return s.L.LessThan(s.vals[i], s.vals[j])
	}
	s.L.Push(s.fn)
	s.L.Push(s.vals[i])
	s.L.Push(s.vals[j])
	s.L.Call(2, 1)
	v := s.L.Get(-1)
	s.L.Pop(1)
	return lua.LVAsBool(v)
}

// tabSort is table.sort, its comparisons counted against the budget (gopher-lua's sorts
// in one call).
func (e *Engine) tabSort(L *lua.LState) int {
	t := L.CheckTable(1)
	s := &sorter{e: e, L: L}
	if L.GetTop() != 1 {
		s.fn = L.CheckFunction(2)
	}
	n := t.Len()
	e.work(L, n/64)
	s.vals = make([]lua.LValue, n)
	for i := range n {
		s.vals[i] = t.RawGetInt(i + 1)
	}
	sort.Sort(s)
	for i, v := range s.vals {
		t.RawSetInt(i+1, v)
	}
	return 0
}

// Compiling a chunk is one uninterrupted call into gopher-lua's parser and compiler, which
// allocate about 24 KB for each function of it (1.8 MB of small functions took 65 s and 886
// MB through loadstring). loadstring and load estimate what the compile takes before it
// runs, and stop the run when that passes a sixteenth of lua-max-memory (4 MB by default:
// a compile of a few tens of ms).
const (
	chunkPerByte     = 16
	chunkPerFunction = 24 << 10
)

// checkChunk stops the run if compiling src would take more than the budget allows, and
// counts the compile's work.
func (e *Engine) checkChunk(L *lua.LState, src string) {
	cost := int64(len(src))*chunkPerByte + int64(strings.Count(src, "function"))*chunkPerFunction
	if limit := e.lim.MaxMemory / 16; cost > limit {
		e.budget.why = "ERR script would compile a chunk of about " + strconv.FormatInt(cost, 10) +
			" bytes with loadstring or load, over lua-max-memory/16 (" + strconv.FormatInt(limit, 10) +
			" bytes), and was stopped; the commands it ran before stay run"
		L.RaiseError("%s", e.budget.why)
	}
	e.work(L, int(cost/64))
}

// loadString is loadstring(s [, name]), its compile bounded (checkChunk).
func (e *Engine) loadString(L *lua.LState) int {
	e.checkChunk(L, L.CheckString(1))
	return e.loadstring(L)
}

// load is Lua 5.1's load(reader [, name]): the pieces the reader returns, joined, then
// compiled as loadstring does, the pieces held to MaxString and the compile bounded.
func (e *Engine) load(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := L.OptString(2, "?")
	var b strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		v := L.Get(-1)
		L.Pop(1)
		if v == lua.LNil {
			break
		}
		if !lua.LVCanConvToString(v) {
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		s := lua.LVAsString(v)
		if s == "" {
			break
		}
		if b.Len()+len(s) > e.lim.MaxString {
			e.tooLong(L)
		}
		e.work(L, 1+len(s)/64)
		b.WriteString(s)
	}
	L.SetTop(0)
	L.Push(lua.LString(b.String()))
	L.Push(lua.LString(name))
	return e.loadString(L)
}
