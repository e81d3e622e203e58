package main

import (
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/internal/manpage"
)

// writeMan writes tallyctl(1) (tallyctl --man) from the global flags and every command's
// own, so that the page cannot drift from them; `make install` installs it.
func writeMan(w io.Writer) error {
	global := (&app{}).globalFlags()
	global.Bool("version", false, "print tallyctl's version")
	var sections []manpage.Section
	for _, g := range append([]struct{ name, summary string }{{"", ""}}, groups...) {
		var items []manpage.Item
		for _, c := range commands {
			if c.group != g.name {
				continue
			}
			own := pflag.NewFlagSet(c.path(), pflag.ContinueOnError)
			own.SortFlags = false
			c.setup(own)
			text := c.summary
			if c.help != "" {
				text += "\n\n" + strings.TrimRight(c.help, "\n")
			}
			it := manpage.Item{Tag: strings.TrimSpace("tallyctl " + c.path() + " " + c.args), Text: text}
			if own.HasFlags() {
				it.Flags = own
			}
			items = append(items, it)
		}
		title, text := "COMMANDS: "+strings.ToUpper(g.name), g.summary+"."
		if g.name == "" {
			title, text = "COMMANDS", "Durable values (Redis commands on the slock port) and the rest; the groups of the sections below follow."
		}
		sections = append(sections, manpage.Section{Title: title, Text: text, Items: items})
	}
	return manpage.Write(w, manpage.Page{
		Name: "tallyctl", Section: "1", Manual: "User Commands", Source: "tallyctl " + version,
		Summary: "command-line client for tallyd: every command of every protocol it serves, and a live top view",
		Synopsis: []string{
			"tallyctl [GLOBAL-FLAGS] GROUP COMMAND [ARGS] [FLAGS]",
			"tallyctl [GLOBAL-FLAGS] COMMAND [ARGS] [FLAGS]",
		},
		Sections: append(append([]manpage.Section{
			{Title: "DESCRIPTION", Text: "tallyctl speaks each protocol tallyd(8) serves: yrmcds counters and semaphores, PoolCounter, slock locks and, through slock's Redis text commands, durable values. It is meant for people and for scripts: --json prints one JSON object (an array for listings) instead of text, and the exit status tells a refusal from a failure."},
			{Title: "GLOBAL FLAGS", Text: "Valid before the command and after it; a command's own flag of the same name wins.", Flags: global},
		}, sections...),
			manpage.Section{Title: "EXIT STATUS", Text: "0 when the command succeeded; 2 when the server refused it (an error status or reply, TIMEOUT, a missing key, ...); 1 for a local error (usage, a bad argument, an unreachable server, a broken reply)."},
			manpage.Section{Title: "SEE ALSO", Text: "tallyd(8), redis-cli(1)"}),
	})
}
