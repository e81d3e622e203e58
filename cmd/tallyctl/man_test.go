package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// tallyctl(1) is made from the flag definitions: every global flag, every command and each
// command's own flags are in it, and groff reads it without a warning.
func TestManPageNamesEveryCommandAndFlag(t *testing.T) {
	var b bytes.Buffer
	if err := writeMan(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	roff := func(s string) string { return strings.ReplaceAll(s, "-", `\-`) }
	hasFlag := func(where string, f *pflag.Flag) {
		if !strings.Contains(page, `\fB\-\-`+roff(f.Name)+`\fR`) {
			t.Errorf("%s: the page lacks --%s", where, f.Name)
		}
	}
	(&app{}).globalFlags().VisitAll(func(f *pflag.Flag) { hasFlag("global", f) })
	if len(commands) < 20 {
		t.Fatalf("only %d commands", len(commands))
	}
	for _, c := range commands {
		tag := `\fB` + roff(strings.TrimSpace("tallyctl "+c.path()+" "+c.args)) + `\fR`
		if !strings.Contains(page, ".TP\n"+tag+"\n") {
			t.Errorf("the page has no entry %s", tag)
		}
		fs := pflag.NewFlagSet(c.path(), pflag.ContinueOnError)
		c.setup(fs)
		fs.VisitAll(func(f *pflag.Flag) { hasFlag(c.path(), f) })
	}
	if !strings.HasPrefix(page, ".TH TALLYCTL 1 ") || !strings.Contains(page, ".SH EXIT STATUS") {
		t.Fatalf("not a section 1 page:\n%.300s", page)
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed: the page was not rendered")
	}
	cmd := exec.Command("groff", "-man", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("groff: %v\n%s", err, out)
	}
}

// The hidden --man flag of the built binary prints the page.
func TestManFlag(t *testing.T) {
	out, err := exec.Command(ctlBin, "--man").Output()
	if err != nil || !bytes.HasPrefix(out, []byte(".TH TALLYCTL 1 ")) {
		t.Fatalf("tallyctl --man: %v\n%.200s", err, out)
	}
}
