package script

import lua "github.com/yuin/gopher-lua"

// Memory of a compiled script, counted in the cache's bytes (Stats) and through them in
// the server's --max-memory budget (issue 30 item 3): a compiled script takes several times
// its body (about 6x for a body of redis.call lines: instructions, their source lines, the
// constants, the debug names). protoBytes follows the prototype's slices by their capacity.

// Sizes of gopher-lua's objects, on 64-bit platforms, with the allocator's rounding.
const (
	protoSize    = 224 // FunctionProto
	valueSize    = 16  // an LValue (interface)
	stringHeader = 16  // a string's header
	boxedString  = 32  // an LString constant boxed in an interface, besides its bytes
	boxedNumber  = 24  // an LNumber constant boxed, and the compiler's map of them
	localSize    = 48  // DbgLocalInfo, allocated one by one
	callSize     = 24  // DbgCall
	functionSize = 96  // the LFunction that runs the prototype
	entrySize    = 160 // the cache's entry and its map slot
)

// protoBytes is what the compiled prototype p and those nested in it take.
func protoBytes(p *lua.FunctionProto) int64 {
	n := int64(protoSize + len(p.SourceName))
	n += int64(cap(p.Code)) * 4
	n += int64(cap(p.Constants)) * valueSize
	n += int64(len(p.Constants)) * stringHeader // the compiler's string constants again
	for _, c := range p.Constants {
		if s, ok := c.(lua.LString); ok {
			n += boxedString + int64(len(s))
		} else {
			n += boxedNumber
		}
	}
	n += int64(cap(p.DbgSourcePositions)) * 8
	n += int64(cap(p.DbgLocals)) * 8
	for _, l := range p.DbgLocals {
		n += localSize + int64(len(l.Name))
	}
	n += int64(cap(p.DbgCalls)) * callSize
	n += int64(cap(p.DbgUpvalues)) * stringHeader
	n += int64(cap(p.FunctionPrototypes)) * 8
	for _, c := range p.FunctionPrototypes {
		n += protoBytes(c)
	}
	return n
}

// scriptBytes is what a cached script takes in all: its prototypes (counted an eighth
// over, for the allocator's size classes), the function, the entry and its name.
func scriptBytes(fn *lua.LFunction) int64 {
	return protoBytes(fn.Proto)*9/8 + functionSize + entrySize + 40
}
