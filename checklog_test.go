package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/store"
)

// damagedLog writes an append-only log of n key states with record 6 damaged and the last
// 10 bytes cut off, and returns its path, its bytes and where record 6 starts and ends.
func damagedLog(t *testing.T, n int) (string, []byte, int, int) {
	t.Helper()
	b := []byte(aof.Header)
	var starts []int
	for i := range n {
		starts = append(starts, len(b))
		s := store.KeyState{Value: []byte(fmt.Sprintf("%064d", i))}
		copy(s.Key[:], fmt.Sprintf("key%03d", i))
		b = aof.AppendState(b, &s)
	}
	starts = append(starts, len(b))
	b = b[:len(b)-10]
	b[starts[6]+40] ^= 0x02
	path := filepath.Join(t.TempDir(), "tallyd.aof")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, b, starts[6], starts[7]
}

// tallyd check-log reports the damage and changes nothing; --fix keeps the original aside
// and leaves a whole log; check-log then finds no damage.
func TestCheckLogCommand(t *testing.T) {
	path, b, at, end := damagedLog(t, 200)
	var out, errs bytes.Buffer
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if code := runCheckLog([]string{path}, &out, &errs, now); code != 1 || errs.Len() > 0 {
		t.Fatalf("check-log: exit %d\n%s%s", code, out.String(), errs.String())
	}
	for _, want := range []string{
		path + ": append-only log, ",
		"198 valid records, 2 damaged stretches",
		fmt.Sprintf("offset %d to %d (%d bytes): damaged: checksum mismatch; 192 valid records after it", at, end, end-at),
		"tail: record cut off by the end of the file; 0 valid records after it",
		"tallyd check-log --fix " + path,
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("check-log does not say %q:\n%s", want, out.String())
		}
	}
	if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
		t.Fatal("check-log without --fix changed the file")
	}
	out.Reset()
	if code := runCheckLog([]string{"--fix", path}, &out, &errs, now); code != 0 || errs.Len() > 0 {
		t.Fatalf("check-log --fix: exit %d\n%s%s", code, out.String(), errs.String())
	}
	aside := path + ".broken-20250301T120000Z"
	if !strings.Contains(out.String(), "Kept the original as "+aside) || !strings.Contains(out.String(), "Wrote "+path+": 198 records") {
		t.Fatalf("check-log --fix says:\n%s", out.String())
	}
	if kept, _ := os.ReadFile(aside); !bytes.Equal(kept, b) {
		t.Fatal("the original was not kept aside")
	}
	out.Reset()
	if code := runCheckLog([]string{path}, &out, &errs, now); code != 0 || !strings.Contains(out.String(), "198 valid records, no damage.") {
		t.Fatalf("check-log after the fix: exit %d\n%s%s", code, out.String(), errs.String())
	}
}

// A torn tail alone is reported as what start-up cuts by itself.
func TestCheckLogTornTailOnly(t *testing.T) {
	b := []byte(aof.Header)
	for i := range 3 {
		s := store.KeyState{Value: []byte("v")}
		s.Key[0] = byte(i)
		b = aof.AppendState(b, &s)
	}
	path := filepath.Join(t.TempDir(), "tallyd.aof")
	if err := os.WriteFile(path, b[:len(b)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := runCheckLog([]string{path}, &out, &errs, time.Now()); code != 1 || !strings.Contains(out.String(), "tallyd cuts it off by itself at start") {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errs.String())
	}
}

func TestCheckLogArgs(t *testing.T) {
	var out, errs bytes.Buffer
	for _, args := range [][]string{{}, {"a", "b"}, {"--nope", "a"}} {
		errs.Reset()
		if code := runCheckLog(args, &out, &errs, time.Now()); code != 2 || !strings.Contains(errs.String(), "check-log") {
			t.Fatalf("%q: exit %d, %s", args, code, errs.String())
		}
	}
	errs.Reset()
	if code := runCheckLog([]string{"--help"}, &out, &errs, time.Now()); code != 0 || !strings.Contains(errs.String(), "Usage: tallyd check-log [--fix] FILE") {
		t.Fatalf("--help: exit %d, %s", code, errs.String())
	}
	errs.Reset()
	if code := runCheckLog([]string{filepath.Join(t.TempDir(), "none")}, &out, &errs, time.Now()); code != 1 || !strings.Contains(errs.String(), "no such file") {
		t.Fatalf("a missing file: exit %d, %s", code, errs.String())
	}
	notLog := filepath.Join(t.TempDir(), "x")
	os.WriteFile(notLog, []byte("*1\r\n$4\r\nPING\r\n"), 0o600)
	errs.Reset()
	if code := runCheckLog([]string{notLog}, &out, &errs, time.Now()); code != 1 || !strings.Contains(errs.String(), "not a tallyd log") {
		t.Fatalf("not a log: exit %d, %s", code, errs.String())
	}
}

// tallyd --help names check-log, and run dispatches to it.
func TestHelpNamesCheckLog(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, &stderr); code != 0 || !strings.Contains(stderr.String(), "tallyd check-log [--fix] FILE") {
		t.Fatalf("--help: exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"check-log"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "give one FILE") {
		t.Fatalf("check-log with no file: exit %d\n%s", code, stderr.String())
	}
}

// A start refused on a damaged log exits 65, apart from other failures and from a crash.
func TestExitStatusDamagedLog(t *testing.T) {
	err := fmt.Errorf("open: %w", &aof.CorruptError{Kind: aof.KindAOF, Path: "x", Offset: 636})
	if got := exitStatus(err); got != exitDataErr || exitDataErr != 65 {
		t.Fatalf("exit status %d for %v", got, err)
	}
	if got := exitStatus(fmt.Errorf("port in use")); got != 1 {
		t.Fatalf("exit status %d for another error", got)
	}
}
