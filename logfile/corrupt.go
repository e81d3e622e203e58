package logfile

import (
	"fmt"
	"os"
)

// CorruptError is a damaged record with valid records after it (or itself whole but for
// its length field): the log cannot be replayed past it without losing them, so start-up
// stops and changes nothing. tallyd check-log --fix repairs the file.
type CorruptError struct {
	Kind     string // "append-only log" or "raft log"
	Path     string
	Offset   int64  // where the damage starts
	Why      string // what is wrong with the record there
	Next     int64  // where valid records resume
	After    int    // valid records from Next on
	Repaired bool   // the record at Offset is whole but for its length field
}

func (e *CorruptError) Error() string {
	what := fmt.Sprintf("%d valid records follow it (the first at offset %d)", e.After, e.Next)
	if e.Repaired {
		what = fmt.Sprintf("the record there is whole but for its length field (its payload, to offset %d, matches its checksum), "+
			"and %d valid records follow it", e.Next, e.After)
	}
	return fmt.Sprintf("%s %s is damaged at offset %d (%s), and %s: tallyd does not start on it, so as not to "+
		"destroy them, and has changed nothing. `tallyd check-log %s` reports the damage; `tallyd check-log --fix %s` "+
		"keeps the original as %s.broken-TIME and writes a log of every valid record without the damaged bytes",
		e.Kind, e.Path, e.Offset, e.Why, what, e.Path, e.Path, e.Path)
}

// CorruptAt returns the *CorruptError for the bad record at off in b (b is the file from
// off to its end), or nil and why when it is a tail with no valid record after it.
func CorruptAt(f Format, kind, path string, b []byte, off int64) (why string, err *CorruptError) {
	_, dmg, _ := Scan(f, b, 0)
	d := dmg[0]
	if d.Tail() {
		return d.Why, nil
	}
	return d.Why, &CorruptError{Kind: kind, Path: path, Offset: off, Why: d.Why, Next: off + d.End, After: d.After, Repaired: d.Repaired}
}

// Cut cuts the log file f back to size bytes, dropping a tail that CorruptAt found to have
// no valid record after it, and fsyncs it.
func Cut(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}

// Rehead makes header the whole of the log file f, whose own header was cut off, and fsyncs
// it.
func Rehead(f *os.File, header string) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(header), 0); err != nil {
		return err
	}
	return f.Sync()
}
