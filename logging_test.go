package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The log goes to the file named, in the format asked, and after a rotation (the file moved
// away) a reopen starts a new file under the name; the format and the file change live.
func TestLogOutputReopenAndSwitch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tallyd.log")
	var stderr bytes.Buffer
	out := &logOutput{stderr: &stderr}
	defer out.close()
	if err := out.configure("json", path); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(out)
	log.Info().Msg("one")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("two") // still to the moved file
	if ok, err := out.reopen(); !ok || err != nil {
		t.Fatalf("reopen: %v, %v", ok, err)
	}
	log.Info().Msg("three")
	if err := out.configure("console", ""); err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("four")
	if old, cur := readFile(t, path+".1"), readFile(t, path); !strings.Contains(old, `"message":"one"`) ||
		!strings.Contains(old, `"message":"two"`) || strings.Contains(old, "three") || cur != `{"level":"info","message":"three"}`+"\n" {
		t.Fatalf("rotated file %q, new file %q", old, cur)
	}
	if got := stderr.String(); !strings.Contains(got, "INF four") || strings.Contains(got, "{") {
		t.Fatalf("console output to stderr: %q", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != logFileMode {
		t.Fatalf("log file mode: %v %v", fi, err)
	}
	if err := out.configure("json", filepath.Join(dir, "no", "such", "dir.log")); err == nil || !strings.Contains(err.Error(), "--log-file") {
		t.Fatalf("unwritable file: %v", err)
	}
	if ok, err := out.reopen(); ok || err != nil { // on stderr: nothing to reopen
		t.Fatalf("reopen on stderr: %v, %v", ok, err)
	}
	if err := out.configure("xml", ""); err == nil {
		t.Fatal("format xml accepted")
	}
}
