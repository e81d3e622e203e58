package main

import (
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tallyd/tallyd/proto/resp"
)

// This file prints a Redis reply as redis-cli 7.0 does, for `tallyctl raw`. redis-cli has
// two renderings: for a terminal it marks types ((integer) 1, (nil), (error) ERR ...),
// numbers array elements ("1) ...", nested arrays indented under their number) and quotes
// bulk strings with escapes; for a pipe or a file it prints the bare values, one a line.
// It picks by whether standard output is a terminal (--raw and --no-raw override), and a
// few commands whose replies are text for people (INFO, CLIENT LIST, ...) always print
// their bytes as they are.

// isTerminal reports whether w is a terminal, as isatty(3) does (/dev/null is not one).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// textReply reports whether redis-cli prints the reply to args as it is, whatever the
// output: the commands whose reply is a report for people.
func textReply(args []string) bool {
	is := func(i int, s string) bool { return len(args) > i && strings.EqualFold(args[i], s) }
	switch {
	case is(0, "INFO"), is(0, "LOLWUT"):
		return true
	case is(0, "CLIENT"):
		return is(1, "LIST") || is(1, "INFO")
	case is(0, "MEMORY"):
		return is(1, "DOCTOR") || is(1, "MALLOC-STATS")
	case is(0, "LATENCY"):
		return len(args) == 2 && is(1, "DOCTOR") || len(args) == 3 && is(1, "GRAPH")
	case is(0, "CLUSTER"):
		return len(args) == 2 && (is(1, "INFO") || is(1, "NODES"))
	case is(0, "DEBUG"):
		return is(1, "HTSTATS") || is(1, "HTSTATS-KEY") || is(1, "CLIENT-EVICTION")
	}
	return false
}

// redisCLIText is what redis-cli prints for the reply r to args: the terminal rendering
// when tty, else the bare one.
func redisCLIText(r resp.Reply, args []string, tty bool) string {
	var b strings.Builder
	switch {
	case textReply(args):
		appendBare(&b, r)
	case tty:
		appendTTY(&b, r, "")
	default:
		appendBare(&b, r)
		b.WriteByte('\n')
	}
	return b.String()
}

// appendTTY writes r as redis-cli does for a terminal, every line ending in "\n". prefix
// is the indent of an array element's lines after its first.
func appendTTY(b *strings.Builder, r resp.Reply, prefix string) {
	switch {
	case r.Null:
		b.WriteString("(nil)\n")
	case r.Kind == ':':
		b.WriteString("(integer) " + strconv.FormatInt(r.Int, 10) + "\n")
	case r.Kind == '+':
		b.Write(r.Str)
		b.WriteByte('\n')
	case r.Kind == '-':
		b.WriteString("(error) ")
		b.Write(r.Str)
		b.WriteByte('\n')
	case r.Kind == '*' && len(r.Elems) == 0:
		b.WriteString("(empty array)\n")
	case r.Kind == '*':
		width := len(strconv.Itoa(len(r.Elems)))
		inner := prefix + strings.Repeat(" ", width+2)
		for i, e := range r.Elems {
			if i > 0 {
				b.WriteString(prefix)
			}
			n := strconv.Itoa(i + 1)
			b.WriteString(strings.Repeat(" ", width-len(n)) + n + ") ")
			appendTTY(b, e, inner)
		}
	default:
		b.WriteString(quoteBytes(r.Str))
		b.WriteByte('\n')
	}
}

// appendBare writes r as redis-cli does for a pipe: the values alone, an array's elements
// one a line (an empty array and a null are nothing), an error's text followed by "\n".
func appendBare(b *strings.Builder, r resp.Reply) {
	switch {
	case r.Null:
	case r.Kind == ':':
		b.WriteString(strconv.FormatInt(r.Int, 10))
	case r.Kind == '-':
		b.Write(r.Str)
		b.WriteByte('\n')
	case r.Kind == '*':
		for i, e := range r.Elems {
			if i > 0 {
				b.WriteByte('\n')
			}
			appendBare(b, e)
		}
	default:
		b.Write(r.Str)
	}
}

// quoteBytes quotes s as redis-cli shows a bulk string on a terminal: in double quotes,
// with \" \\ \n \r \t \a \b escaped and any other byte outside printable ASCII as \xhh.
func quoteBytes(s []byte) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for _, c := range s {
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			if c < 0x20 || c > 0x7e {
				b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
			} else {
				b = append(b, c)
			}
		}
	}
	return string(append(b, '"'))
}

// printRedisCLI prints the reply rep to cmd as redis-cli would; an error reply, printed as
// redis-cli prints it, still exits 2.
func (a *app) printRedisCLI(vc *valueCmd, cmd []string, rep resp.Reply) error {
	if *vc.cliRaw && *vc.cliTTY {
		return &usageError{msg: "--raw and --no-raw exclude each other"}
	}
	tty := isTerminal(a.stdout)
	if *vc.cliRaw || *vc.cliTTY {
		tty = *vc.cliTTY
	}
	if _, err := io.WriteString(a.stdout, redisCLIText(rep, cmd, tty)); err != nil {
		return err
	}
	if rep.Kind == '-' {
		return &refusal{msg: string(rep.Str), printed: true}
	}
	return nil
}
