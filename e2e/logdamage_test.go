package e2e

// Issue 21 item 4 through the binary: a damaged log never silently destroys acknowledged
// records. Start-up refuses a log with valid records after its damage (exit 65, naming the
// offset, the file untouched); tallyd check-log reports it and --fix repairs it, keeping
// the original aside.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLogFlipAndTornTail is the report: 200 acknowledged SETs with appendfsync always, one
// bit flipped in record 6 and the last 10 bytes cut off. tallyd used to start, warn, and
// cut the file at record 6 (DBSIZE 6). The log holds a fencing-token reservation first,
// then the 200 SETs.
func TestLogFlipAndTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir, "--appendfsync=always"}
	p := start(t, 0, args...)
	p.waitLog(t, "tallyd listening")
	rc := dialR(t, addr)
	value := func(i int) string { return fmt.Sprintf("%064d", i) }
	for i := range 200 {
		rc.must(t, "+OK", "SET", fmt.Sprintf("key%03d", i), value(i))
	}
	kill9(t, p) // every SET was acknowledged after its fsync
	path := filepath.Join(dir, "tallyd.aof")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sets := recordStarts(full, 2) // key states: the SETs, in order
	if len(sets) != 200 {
		t.Fatalf("the log holds %d key states, not the 200 SETs", len(sets))
	}
	b := bytes.Clone(full[:len(full)-10])
	off := sets[6]
	b[off+50] ^= 0x20 // in record 6's value
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	end := sets[7]

	p = start(t, 0, args...)
	if code := p.exitCode(t); code != 65 {
		t.Fatalf("start on the damaged log: exit %d, want 65\n%s", code, p.log.String())
	}
	for _, want := range []string{fmt.Sprintf("damaged at offset %d", off), "192 valid records follow it", "tallyd check-log --fix " + path} {
		if !strings.Contains(p.log.String(), want) {
			t.Fatalf("the error does not say %q:\n%s", want, p.log.String())
		}
	}
	if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
		t.Fatal("start-up changed a log it refused")
	}

	code, out := runBin(t, "check-log", path)
	if code != 1 || !strings.Contains(out, fmt.Sprintf("offset %d to %d (%d bytes): damaged: checksum mismatch; 192 valid records after it", off, end, end-off)) ||
		!strings.Contains(out, "199 valid records") {
		t.Fatalf("check-log: exit %d\n%s", code, out)
	}
	if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
		t.Fatal("check-log without --fix changed the log")
	}
	code, out = runBin(t, "check-log", "--fix", path)
	if code != 0 || !strings.Contains(out, "Kept the original as "+path+".broken-") {
		t.Fatalf("check-log --fix: exit %d\n%s", code, out)
	}
	asides, _ := filepath.Glob(path + ".broken-*")
	if len(asides) != 1 {
		t.Fatalf("files aside: %v", asides)
	}
	if kept, _ := os.ReadFile(asides[0]); !bytes.Equal(kept, b) {
		t.Fatal("the original was not kept aside as it was")
	}
	if code, out := runBin(t, "check-log", path); code != 0 || !strings.Contains(out, "199 valid records, no damage") {
		t.Fatalf("check-log after the fix: exit %d\n%s", code, out)
	}

	p = start(t, 0, args...)
	p.waitLog(t, "tallyd listening")
	rc = dialR(t, addr)
	rc.must(t, ":198", "DBSIZE")
	for i := range 200 {
		want := "$" + value(i)
		if i == 6 || i == 199 { // the damaged record and the torn one
			want = "$-1"
		}
		rc.must(t, want, "GET", fmt.Sprintf("key%03d", i))
	}
}

// kill9 kills the server with SIGKILL and waits for it.
func kill9(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	p.done <- nil
}

// recordStarts walks a log's records (u32 length, u32 checksum, payload after a 12-byte
// header) and returns where those of the given kind start.
func recordStarts(b []byte, kind byte) []int {
	var at []int
	for off := 12; off+9 <= len(b); off += 8 + int(binary.LittleEndian.Uint32(b[off:])) {
		if b[off+8] == kind {
			at = append(at, off)
		}
	}
	return at
}

// TestRaftLogFlipAndTornTail: the same damage to a cluster member's raft log. A damaged
// hard state in the middle stops the start (exit 65) where the member used to cut its log
// there; check-log --fix drops it and the member starts with every write. A damaged entry
// cannot be dropped without a gap: the fix refuses and says how to rejoin.
func TestRaftLogFlipAndTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port, peer := freePort(t), freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"--counter-port=0", "--slock-port=" + strconv.Itoa(port), "--data-dir=" + dir,
		"--cluster=1=127.0.0.1:" + strconv.Itoa(peer), "--node-id=1", "--initial-cluster-state=new"}
	p := start(t, 0, args...)
	p.waitLog(t, "leader ready")
	rc := dialR(t, addr)
	for i := range 40 {
		rc.must(t, "+OK", "SET", fmt.Sprintf("key%02d", i), fmt.Sprintf("value%02d", i))
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("SIGTERM: exit %d\n%s", code, p.log.String())
	}
	path := filepath.Join(dir, "raft", "raft.log")
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hardStates, entries := recordStarts(full, 0x21), recordStarts(full, 0x22)
	if len(hardStates) < 20 || len(entries) < 40 {
		t.Fatalf("the raft log has %d hard states and %d entries", len(hardStates), len(entries))
	}
	for _, c := range []struct {
		name  string
		at    int
		fixed bool
	}{{"entry", entries[len(entries)/2] + 30, false}, {"hard state", hardStates[len(hardStates)/2] + 12, true}} {
		b := bytes.Clone(full[:len(full)-10])
		b[c.at] ^= 0x01
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		p = start(t, 0, args...)
		if code := p.exitCode(t); code != 65 || !strings.Contains(p.log.String(), "raft log "+path+" is damaged at offset") {
			t.Fatalf("%s damaged: exit %d, want 65\n%s", c.name, code, p.log.String())
		}
		if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
			t.Fatalf("%s damaged: start-up changed the raft log", c.name)
		}
		code, out := runBin(t, "check-log", "--fix", path)
		if !c.fixed {
			if code != 1 || !strings.Contains(out, "entries are missing") || !strings.Contains(out, "rejoin") {
				t.Fatalf("check-log --fix with a damaged entry: exit %d\n%s", code, out)
			}
			if left, _ := os.ReadFile(path); !bytes.Equal(left, b) {
				t.Fatal("a fix that refused changed the raft log")
			}
			continue
		}
		if code != 0 || !strings.Contains(out, "raft log") {
			t.Fatalf("check-log --fix with a damaged hard state: exit %d\n%s", code, out)
		}
	}
	p = start(t, 0, args...)
	p.waitLog(t, "leader ready")
	rc = dialR(t, addr)
	for i := range 40 {
		rc.must(t, fmt.Sprintf("$value%02d", i), "GET", fmt.Sprintf("key%02d", i))
	}
}
