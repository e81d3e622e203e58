package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/snapfile"
)

// The snapshot group: backups of a node's or a cluster's store (docs/operations.md).
func init() {
	register(
		&command{group: "snapshot", name: "save", args: "FILE", nargs: [2]int{1, 1},
			summary: "write a backup of the store to FILE (a cluster's: through any member's slock port)",
			help: "Sends SNAPSHOT (an admin command) and writes the reply to FILE.part, fsyncs it and renames it\n" +
				"to FILE once its checksum is verified. In a cluster, --host/--slock-port may name any member: a\n" +
				"follower reads through the leader (it waits up to --cluster-timeout; no leader: -CLUSTERDOWN).\n" +
				"Restore with: tallyd restore FILE --data-dir DIR (see tallyd restore --help).",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.snapshotSave(args[0]) }
			}},
		&command{group: "snapshot", name: "status", args: "FILE", nargs: [2]int{1, 1},
			summary: "print a backup file's header and verify its checksum",
			setup: func(fs *pflag.FlagSet) func(*app, []string) error {
				return func(a *app, args []string) error { return a.snapshotStatus(args[0]) }
			}},
	)
}

// deadlineReader refreshes its connection's read deadline before each read, so that a big
// file takes as long as it needs while a stalled server still times out.
// Until the length line has come, it waits up to snapshotEncodeWait (at least the timeout):
// the server encodes the whole store, a slice at a time, before it knows the length.
type deadlineReader struct {
	c    *conn
	wait *time.Duration
}

// snapshotEncodeWait is how long snapshot save waits for the server to encode its store.
const snapshotEncodeWait = 10 * time.Minute

func (d deadlineReader) Read(b []byte) (int, error) {
	_ = d.c.nc.SetReadDeadline(time.Now().Add(*d.wait))
	return d.c.nc.Read(b)
}

func (a *app) snapshotSave(file string) error {
	start := time.Now()
	r, err := a.dialRESP()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.send([]byte("*1\r\n$8\r\nSNAPSHOT\r\n")); err != nil {
		return err
	}
	wait := max(r.conn.timeout, snapshotEncodeWait)
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(r.buf[r.off:]), deadlineReader{r.conn, &wait}), 1<<20)
	line, err := br.ReadString('\n')
	wait = r.conn.timeout
	if err != nil {
		return fmt.Errorf("%s: reading the reply: %w", r.what, err)
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return refuse(map[string]any{"reply": line[1:]}, "save: %s", line[1:])
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(line, "$"), 10, 64)
	if !strings.HasPrefix(line, "$") || err != nil || n < snapfile.HeaderLen+snapfile.TrailerLen {
		return fmt.Errorf("%s: unexpected reply %q to SNAPSHOT", r.what, show([]byte(line)))
	}
	part := file + ".part"
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(part) // gone once renamed
	sum := sha256.New()
	head := make([]byte, snapfile.HeaderLen)
	_, err = io.ReadFull(br, head)
	var h snapfile.Header
	if err == nil {
		h, err = snapfile.ParseHeader(head)
	}
	if err == nil && h.Size() != uint64(n) {
		err = fmt.Errorf("the reply is %d bytes, its header says %d", n, h.Size())
	}
	if err == nil {
		_, err = io.MultiWriter(f, sum).Write(head)
	}
	if err == nil {
		_, err = io.CopyN(io.MultiWriter(f, sum), br, int64(h.Body))
	}
	trailer := make([]byte, snapfile.TrailerLen+2)
	if err == nil {
		_, err = io.ReadFull(br, trailer)
	}
	if err == nil && (!bytes.Equal(trailer[:snapfile.TrailerLen], sum.Sum(nil)) || string(trailer[snapfile.TrailerLen:]) != "\r\n") {
		err = fmt.Errorf("the snapshot received is damaged (SHA-256 checksum mismatch)")
	}
	if err == nil {
		_, err = f.Write(trailer[:snapfile.TrailerLen])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, file)
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(file)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("snapshot save %s from %s: %w", file, r.what, err)
	}
	took := time.Since(start)
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "file": file, "bytes": n, "keys": h.Keys, "kind": h.Kind.String(),
			"index": h.Index, "term": h.Term, "took_ms": took.Milliseconds()})
		return nil
	}
	fmt.Fprintf(a.stdout, "saved %s: %d bytes, %d keys, %s snapshot at index %d term %d, took %s\n",
		file, n, h.Keys, h.Kind, h.Index, h.Term, took.Round(time.Millisecond))
	return nil
}

func (a *app) snapshotStatus(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h, _, err := snapfile.Read(f)
	if err != nil {
		return refuse(map[string]any{"file": file}, "status: %s: %v", file, err)
	}
	if a.json {
		a.emitJSON(map[string]any{"ok": true, "file": file, "bytes": h.Size(), "keys": h.Keys, "kind": h.Kind.String(),
			"index": h.Index, "term": h.Term, "version": snapfile.Version})
		return nil
	}
	fmt.Fprintf(a.stdout, "%s: tallyd snapshot version %d, %s, index %d term %d, %d keys, %d bytes, checksum ok\n",
		file, snapfile.Version, h.Kind, h.Index, h.Term, h.Keys, h.Size())
	return nil
}
