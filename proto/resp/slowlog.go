package resp

import "strconv"

// SLOWLOG's entries as Redis 7 keeps and renders them (slowlog.c).

// Redis's bounds on what an entry keeps of a command line.
const (
	SlowlogMaxArgs   = 32  // SLOWLOG_ENTRY_MAX_ARGC: past it, the last kept argument says how many more there were
	SlowlogMaxString = 128 // SLOWLOG_ENTRY_MAX_STRING: past it, an argument says how many more bytes it had
)

// SlowlogEntry is one entry of SLOWLOG GET.
type SlowlogEntry struct {
	ID     uint64   // a unique, increasing id
	Time   int64    // Unix seconds the command ran at
	Micros int64    // how long it ran, in microseconds
	Args   [][]byte // the command line as AppendSlowlogArgs keeps it
	Addr   string   // the client's ip:port
	Name   string   // the client's name (CLIENT SETNAME), "" for none
}

// AppendSlowlogArgs appends to dst (whose bytes it may reuse) the arguments args as an entry
// keeps them: at most SlowlogMaxArgs, the last of those replaced by "... (N more
// arguments)" when there were more, and each argument cut at SlowlogMaxString bytes
// followed by "... (N more bytes)". The arguments are copies: args may change afterwards.
func AppendSlowlogArgs(dst [][]byte, args [][]byte) [][]byte {
	n := len(args)
	keep := min(n, SlowlogMaxArgs)
	for i := range keep {
		if i == SlowlogMaxArgs-1 && n > SlowlogMaxArgs {
			dst = append(dst, []byte("... ("+strconv.Itoa(n-SlowlogMaxArgs+1)+" more arguments)"))
			break
		}
		a := args[i]
		if len(a) > SlowlogMaxString {
			b := make([]byte, 0, SlowlogMaxString+24)
			b = append(b, a[:SlowlogMaxString]...)
			b = append(b, "... ("+strconv.Itoa(len(a)-SlowlogMaxString)+" more bytes)"...)
			dst = append(dst, b)
			continue
		}
		dst = append(dst, append([]byte(nil), a...))
	}
	return dst
}

// AppendSlowlog appends SLOWLOG GET's reply: entries as given (newest first).
func AppendSlowlog(dst []byte, entries []SlowlogEntry) []byte {
	dst = AppendArray(dst, len(entries))
	for i := range entries {
		e := &entries[i]
		dst = AppendArray(dst, 6)
		dst = AppendInt(dst, int64(e.ID))
		dst = AppendInt(dst, e.Time)
		dst = AppendInt(dst, e.Micros)
		dst = AppendArray(dst, len(e.Args))
		for _, a := range e.Args {
			dst = AppendBulk(dst, a)
		}
		dst = AppendBulkString(dst, e.Addr)
		dst = AppendBulkString(dst, e.Name)
	}
	return dst
}

// SlowlogHelp is SLOWLOG HELP's reply, line by line, as Redis 7 gives it.
var SlowlogHelp = []string{
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
}
