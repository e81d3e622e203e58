package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/internal/manpage"
	"github.com/tallyd/tallyd/loop"
)

// roffName is how the page writes a flag or key: hyphens as minus signs.
func roffName(s string) string { return strings.ReplaceAll(s, "-", `\-`) }

// tallyd --man is made from the flags: every flag run defines (but the hidden --man) and
// every config key is in it, and groff reads it without a warning.
func TestManPageNamesEveryFlagAndKey(t *testing.T) {
	var stdout bytes.Buffer
	var o options
	fs := newFlags(&o, loop.Defaults())
	if err := writeMan(&stdout, fs); err != nil {
		t.Fatal(err)
	}
	page := stdout.String()
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		tag := `\fB\-\-` + roffName(f.Name) + `\fR`
		if f.Shorthand != "" {
			tag = `\fB\-` + f.Shorthand + `\fR, ` + tag
		}
		switch {
		case f.Hidden && strings.Contains(page, tag):
			t.Errorf("hidden flag %s is in the page", manpage.FlagTag(f))
		case !f.Hidden && !strings.Contains(page, ".TP\n"+tag):
			t.Errorf("the page has no entry for %s", manpage.FlagTag(f))
		case !f.Hidden:
			n++
		}
	})
	if n < 30 {
		t.Fatalf("only %d flags", n)
	}
	for _, k := range confKeys {
		if !strings.Contains(page, ".TP\n\\fB"+roffName(k.key)+"\\fR\n") {
			t.Errorf("the page has no entry for config key %s", k.key)
		}
	}
	for _, want := range []string{".TH TALLYD 8", ".SH SIGNALS", "SIGHUP", "READY=1", "RELOADING=1", "STOPPING=1", "tallyctl(1)",
		`\fBtallyd\fR \fBcheck\-log\fR [\fB\-\-fix\fR] \fIFILE\fR`, ".SH DAMAGED LOG", "65 when a log is damaged"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed: the page was not rendered")
	}
	cmd := exec.Command("groff", "-man", "-ww", "-Tutf8")
	cmd.Stdin = strings.NewReader(page)
	var rendered, warnings bytes.Buffer
	cmd.Stdout, cmd.Stderr = &rendered, &warnings
	if err := cmd.Run(); err != nil || warnings.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, warnings.String())
	}
	if !strings.Contains(rendered.String(), "--max-connections") {
		t.Fatalf("rendered page lacks --max-connections:\n%s", rendered.String())
	}
}

// The hidden --man flag prints the page and exits 0.
func TestManFlag(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	var stderr bytes.Buffer
	code := run([]string{"--man"}, &stderr)
	os.Stdout = stdout
	w.Close()
	page, _ := io.ReadAll(r)
	if code != 0 || stderr.Len() > 0 || !bytes.HasPrefix(page, []byte(".TH TALLYD 8 ")) {
		t.Fatalf("exit %d: %s\n%.200s", code, stderr.String(), page)
	}
}
