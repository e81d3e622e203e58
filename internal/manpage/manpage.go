// Package manpage writes manual pages in roff (man(7)) from flag sets, so that a page lists
// exactly the flags its program defines.
package manpage

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// Page is one manual page.
type Page struct {
	Name    string // program name: tallyd
	Section string // 1, 8, ...
	Manual  string // header text: "System Manager's Manual"
	Source  string // footer: "tallyd 0.1.0"
	Summary string // the NAME line after the dash
	// Synopsis lines, each a command line; words in CAPITALS are set in italics.
	Synopsis []string
	Sections []Section
}

// Section is one section (.SH) of a page: paragraphs, then items, then flags.
type Section struct {
	Title string // in capitals: DESCRIPTION, OPTIONS, ...
	// Text is paragraphs separated by blank lines; a line starting with two spaces is set
	// as is (an example).
	Text  string
	Items []Item
	Flags *pflag.FlagSet // its flags, hidden ones left out
	// After is more paragraphs after the items and flags.
	After string
}

// Item is a tagged paragraph (.TP).
type Item struct {
	Tag, Text string
	Flags     *pflag.FlagSet // flags listed under the item, indented
}

// Write writes p in roff.
func Write(w io.Writer, p Page) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, ".TH %s %s \"\" %s %s\n", strings.ToUpper(p.Name), p.Section, quote(p.Source), quote(p.Manual))
	fmt.Fprintf(b, ".SH NAME\n%s \\- %s\n", escape(p.Name), escape(p.Summary))
	if len(p.Synopsis) > 0 {
		b.WriteString(".SH SYNOPSIS\n")
		for i, s := range p.Synopsis {
			if i > 0 {
				b.WriteString(".br\n")
			}
			b.WriteString(synopsis(s) + "\n")
		}
	}
	for _, s := range p.Sections {
		fmt.Fprintf(b, ".SH %s\n", escape(s.Title))
		paragraphs(b, s.Text, false)
		for _, it := range s.Items {
			fmt.Fprintf(b, ".TP\n%s\n", bold(it.Tag))
			paragraphs(b, it.Text, true)
			if it.Flags != nil {
				b.WriteString(".RS\n")
				flags(b, it.Flags)
				b.WriteString(".RE\n")
			}
		}
		if s.Flags != nil {
			flags(b, s.Flags)
		}
		if s.After != "" {
			b.WriteString(".PP\n")
			paragraphs(b, s.After, false)
		}
	}
	return b.Flush()
}

// FlagTag is how a flag is named in a page's text (for tests): --name, and -x, --name with
// a shorthand.
func FlagTag(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + ", --" + f.Name
	}
	return "--" + f.Name
}

func flags(b *bufio.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name, usage := pflag.UnquoteUsage(f)
		tag := `\fB\-\-` + escape(f.Name) + `\fR`
		if f.Shorthand != "" {
			tag = `\fB\-` + escape(f.Shorthand) + `\fR, ` + tag
		}
		if name != "" && f.Value.Type() != "bool" {
			tag += ` \fI` + escape(name) + `\fR`
		}
		fmt.Fprintf(b, ".TP\n%s\n", tag)
		text := usage
		switch f.DefValue {
		case "", "0", "false", "[]", "0s":
		default:
			text += " (default: " + f.DefValue + ")"
		}
		paragraphs(b, text, true)
	})
}

// paragraphs writes text's paragraphs (blank-line separated) with .PP between them, or .IP
// in a tagged paragraph (indented).
func paragraphs(b *bufio.Writer, text string, indented bool) {
	text = strings.Trim(text, "\n")
	if text == "" {
		return
	}
	for i, para := range strings.Split(text, "\n\n") {
		switch {
		case i > 0 && indented:
			b.WriteString(".IP\n")
		case i > 0:
			b.WriteString(".PP\n")
		}
		example := strings.HasPrefix(para, "  ")
		if example {
			b.WriteString(".RS\n.nf\n")
		}
		for _, line := range strings.Split(para, "\n") {
			if example {
				line = strings.TrimPrefix(line, "  ")
			}
			b.WriteString(escape(line) + "\n")
		}
		if example {
			b.WriteString(".fi\n.RE\n")
		}
	}
}

// synopsis sets a command line: the program and flags in bold, CAPITAL words in italics.
func synopsis(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		core := strings.Trim(w, "[]|.")
		pre, post := w[:strings.Index(w, core)], w[strings.Index(w, core)+len(core):]
		switch {
		case core == "":
			words[i] = escape(w)
		case strings.ToUpper(core) == core && strings.ToLower(core) != core:
			words[i] = escape(pre) + `\fI` + escape(core) + `\fR` + escape(post)
		default:
			words[i] = escape(pre) + `\fB` + escape(core) + `\fR` + escape(post)
		}
	}
	return strings.Join(words, " ")
}

func bold(s string) string { return `\fB` + escape(s) + `\fR` }

// escape makes text safe in roff: backslashes, a leading dot or quote, and hyphens (as
// minus signs, so that flags can be copied from the rendered page).
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\(dq`) + `"` }
