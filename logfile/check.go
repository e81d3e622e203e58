package logfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// Kind is one kind of log file that CheckLog knows by its header.
type Kind struct {
	Name   string // as LogCheck.Kind and CorruptError.Kind say it
	Header string
	// File is the name of the files of this kind, if they have one: a header cut short may
	// begin more than one kind's, and the name decides.
	File   string
	Format Format // its records; nil for a file of one record, which One checks
	// One checks a file of one record, b its bytes: an error is its damage.
	One func(path string, b []byte) error
	// NoFix says why a file of one record is not repaired.
	NoFix func(path string) error
	// Verify checks the bytes a repair would write, before it writes them: an error refuses.
	Verify func(path string, out []byte) error
}

// LogCheck is what CheckLog found in a log file.
type LogCheck struct {
	Path    string
	Kind    string // the Kind's Name
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

// CheckLog reads the log file at path (one of kinds, told by its header) and reports its
// valid records and its damage, changing nothing.
func CheckLog(path string, kinds []Kind) (*LogCheck, error) {
	c, _, _, _, err := checkLog(path, kinds)
	return c, err
}

// checkLog is CheckLog, and also returns the file's kind, its bytes and the pieces a repair
// keeps.
func checkLog(path string, kinds []Kind) (*LogCheck, Kind, []byte, []Piece, error) {
	var k Kind
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, k, nil, nil, err
	}
	c := &LogCheck{Path: path, Size: int64(len(b))}
	order := slices.Clone(kinds)
	for i := range order { // a header cut short may begin more than one: the name decides
		if order[i].File != "" && order[i].File == filepath.Base(path) {
			order[0], order[i] = order[i], order[0]
			break
		}
	}
	for _, o := range order {
		if n := min(len(b), len(o.Header)); n > 0 && string(b[:n]) == o.Header[:n] {
			c.Kind, k = o.Name, o
			break
		}
	}
	head := k.Header
	switch {
	case len(b) == 0:
		return nil, k, nil, nil, fmt.Errorf("%s is empty (tallyd writes a log's header when it starts on it)", path)
	case c.Kind == "":
		return nil, k, nil, nil, fmt.Errorf("%s is not a tallyd log: its header %q is neither %s",
			path, b[:min(len(b), len(kinds[0].Header))], headers(kinds))
	case len(b) < len(head):
		c.Damage = []LogDamage{{Offset: 0, End: c.Size, Why: "header cut off", Torn: true}}
		c.Kept = int64(len(head))
		return c, k, b, nil, nil
	case k.Format == nil:
		if err := k.One(path, b); err != nil {
			c.Damage = []LogDamage{{Offset: int64(len(head)), End: c.Size, Why: err.Error()}}
		} else {
			c.Records = 1
		}
		c.Kept = c.Size
		return c, k, b, nil, nil
	}
	var keep []Piece
	c.Records, c.Damage, keep = Scan(k.Format, b, len(head))
	c.Kept = int64(len(Repair(nil, head, nil)))
	for _, p := range keep {
		c.Kept += int64(p.End - p.Start)
	}
	return c, k, b, keep, nil
}

// headers lists the kinds' headers, quoted: "a, b nor c".
func headers(kinds []Kind) string {
	var s string
	for i, k := range kinds {
		switch {
		case i == 0:
		case i == len(kinds)-1:
			s += " nor "
		default:
			s += ", "
		}
		s += strconv.Quote(k.Header)
	}
	return s
}

// FixLog repairs the log file at path as CheckLog reports it: it writes a log of the header
// and every valid record (a record whole but for its length field with its length set right),
// without the damaged bytes, after keeping the original aside as path.broken-TIME (a name
// that no file has: it never replaces one). aside is "" when there was nothing to repair. A
// file of one record is not repaired, nor one whose repair its kind's Verify refuses (a raft
// log that would miss entries): the error says what to do instead, and nothing is changed.
func FixLog(path string, now time.Time, kinds []Kind) (c *LogCheck, aside string, err error) {
	before, err := os.Stat(path)
	if err != nil {
		return nil, "", err
	}
	c, k, b, keep, err := checkLog(path, kinds)
	if err != nil || !c.Damaged() {
		return c, "", err
	}
	if k.Format == nil {
		return c, "", k.NoFix(path)
	}
	out := Repair(b, k.Header, keep)
	if k.Verify != nil {
		if err := k.Verify(path, out); err != nil {
			return c, "", err
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
	return c, aside, SyncDir(filepath.Dir(path))
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
		return aside, SyncDir(filepath.Dir(path))
	}
	return "", fmt.Errorf("%s.broken-*: too many files of that name", path)
}
