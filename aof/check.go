package aof

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The kinds of file CheckLog knows, by their header.
const (
	KindAOF      = "append-only log"
	KindRaft     = "raft log"
	KindRaftSnap = "raft snapshot"
)

// LogCheck is what CheckLog found in a log file.
type LogCheck struct {
	Path    string
	Kind    string // KindAOF, KindRaft or KindRaftSnap
	Size    int64
	Records int         // valid records, those whole but for their length field included
	Damage  []LogDamage // in the order of the file
	// Kept is the size of the file a repair writes: the header and every valid record.
	Kept int64
}

// Damaged reports whether the file has any damage.
func (c *LogCheck) Damaged() bool { return len(c.Damage) > 0 }

// TailOnly reports whether the only damage is a tail with no valid record after it, which
// start-up cuts off by itself.
func (c *LogCheck) TailOnly() bool { return len(c.Damage) == 1 && c.Damage[0].Tail() }

// CheckLog reads the log file at path (an append-only log, a raft log or a raft snapshot,
// told by its header) and reports its valid records and its damage, changing nothing.
func CheckLog(path string) (*LogCheck, error) {
	c, _, _, err := checkLog(path)
	return c, err
}

// checkLog is CheckLog, and also returns the file's bytes and the pieces a repair keeps.
func checkLog(path string) (*LogCheck, []byte, []piece, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	c := &LogCheck{Path: path, Size: int64(len(b))}
	var head string
	kinds := []struct{ kind, head string }{{KindAOF, Header}, {KindRaft, RaftHeader}, {KindRaftSnap, RaftSnapHeader}}
	switch filepath.Base(path) { // a header cut short may begin more than one: the name decides
	case RaftLogName:
		kinds[0], kinds[1] = kinds[1], kinds[0]
	case RaftSnapName:
		kinds[0], kinds[2] = kinds[2], kinds[0]
	}
	for _, k := range kinds {
		if n := min(len(b), len(k.head)); n > 0 && string(b[:n]) == k.head[:n] {
			c.Kind, head = k.kind, k.head
			break
		}
	}
	switch {
	case len(b) == 0:
		return nil, nil, nil, fmt.Errorf("%s is empty (tallyd writes a log's header when it starts on it)", path)
	case c.Kind == "":
		return nil, nil, nil, fmt.Errorf("%s is not a tallyd log: its header %q is neither %q, %q nor %q",
			path, b[:min(len(b), len(Header))], Header, RaftHeader, RaftSnapHeader)
	case len(b) < len(head):
		c.Damage = []LogDamage{{Offset: 0, End: c.Size, Why: "header cut off", Torn: true}}
		c.Kept = int64(len(head))
		return c, b, nil, nil
	case c.Kind == KindRaftSnap:
		if _, err := readSnapFile(path, b); err != nil {
			c.Damage = []LogDamage{{Offset: int64(len(head)), End: c.Size, Why: err.Error()}}
		} else {
			c.Records = 1
		}
		c.Kept = c.Size
		return c, b, nil, nil
	}
	var f logFormat = &aofFormat{}
	if c.Kind == KindRaft {
		f = raftFormat{}
	}
	var keep []piece
	c.Records, c.Damage, keep = scanLog(f, b, len(head))
	c.Kept = int64(len(repair(nil, head, nil)))
	for _, p := range keep {
		c.Kept += int64(p.end - p.start)
	}
	return c, b, keep, nil
}

// FixLog repairs the log file at path as CheckLog reports it: it writes a log of the header
// and every valid record (a record whole but for its length field with its length set right),
// without the damaged bytes, after keeping the original aside as path.broken-TIME (a name
// that no file has: it never replaces one). aside is "" when there was nothing to repair. A
// raft snapshot is not repaired (it is one record), nor a raft log whose repair would miss
// entries: the error says what to do instead, and nothing is changed.
func FixLog(path string, now time.Time) (c *LogCheck, aside string, err error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	c, b, keep, err := checkLog(path)
	if err != nil || !c.Damaged() {
		return c, "", err
	}
	if c.Kind == KindRaftSnap {
		return c, "", fmt.Errorf("%s: a raft snapshot is one record and cannot be repaired: restore the data directory "+
			"from a backup, or remove this member from the cluster and rejoin it empty (tallyctl cluster remove, then --join)", path)
	}
	head := Header
	if c.Kind == KindRaft {
		head = RaftHeader
	}
	out := repair(b, head, keep)
	if c.Kind == KindRaft {
		// As start-up will read it: after the snapshot beside it, if any.
		st, d := &RaftState{}, &raftDisk{}
		err := loadSnapFile(filepath.Join(filepath.Dir(path), RaftSnapName), st, d)
		if err == nil {
			_, _, err = readRaftLog(path, out, st, d)
		}
		if err != nil {
			return c, "", fmt.Errorf("%s: without its damaged records the raft log would not start either (%v); "+
				"nothing was changed: restore the data directory from a backup, or remove this member from the cluster and "+
				"rejoin it empty (tallyctl cluster remove, then --join)", path, err)
		}
	}
	tmp := path + ".check-log.tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return c, "", err
	}
	if err := writeSynced(tmp, out, before.Mode().Perm()); err != nil {
		os.Remove(tmp)
		return c, "", err
	}
	if after, err := os.Stat(path); err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		os.Remove(tmp)
		return c, "", fmt.Errorf("%s changed while it was checked (is tallyd running on it?): nothing was changed", path)
	}
	if aside, err = keepAside(path, now); err != nil {
		os.Remove(tmp)
		return c, "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return c, aside, err
	}
	return c, aside, syncDir(filepath.Dir(path))
}

// writeSynced writes b to a new file at path and fsyncs it.
func writeSynced(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// keepAside gives the file at path a second name, path.broken-TIME (UTC; -2, -3, ... after
// it when that name is taken), and returns it: a hard link, or a copy where links fail.
func keepAside(path string, now time.Time) (string, error) {
	base := path + ".broken-" + now.UTC().Format("20060102T150405Z")
	for n := 1; n < 1000; n++ {
		aside := base
		if n > 1 {
			aside += "-" + strconv.Itoa(n)
		}
		err := os.Link(path, aside)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				return "", rerr
			}
			st, serr := os.Stat(path)
			if serr != nil {
				return "", serr
			}
			if err = writeSynced(aside, b, st.Mode().Perm()); errors.Is(err, os.ErrExist) {
				continue
			}
		}
		if err != nil {
			return "", err
		}
		return aside, syncDir(filepath.Dir(path))
	}
	return "", fmt.Errorf("%s.broken-*: too many files of that name", path)
}
