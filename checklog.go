package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/aof"
)

// exitDataErr is the exit status of a start refused because a log is damaged with valid
// records after the damage (sysexits' EX_DATAERR): tallyd check-log is the way out, and a
// restart would only refuse again.
const exitDataErr = 65

// checkLogUsage is tallyd check-log --help.
const checkLogUsage = `Usage: tallyd check-log [--fix] FILE

Checks a log that tallyd refused to start on (as redis-check-aof does): FILE is the
append-only log (DATA_DIR/tallyd.aof) or, in a cluster, the raft log (DATA_DIR/raft/raft.log)
or its snapshot (raft.snap), told apart by their headers. It reports the valid records and
every damaged stretch: its offsets, why, and how many valid records follow it. Nothing is
changed without --fix.

--fix first keeps the original as FILE.broken-TIME (never replacing a file of that name),
then writes in its place a log of every valid record without the damaged bytes: a damaged
record is dropped (its key keeps the state of its record before, if any), a record whole
but for its length field is kept with its length set right, and a torn tail is cut. Run it
while tallyd is stopped: --fix refuses a log whose data directory a tallyd holds. A raft log is not repaired when that would leave entries missing,
nor a damaged raft snapshot: restore the data directory or rejoin the member instead.

Exit status: 0 when the log is whole or was repaired, 1 when it is damaged (without --fix)
or cannot be read or repaired, 2 for a command line that does not parse.
`

// runCheckLog is tallyd check-log [--fix] FILE.
func runCheckLog(args []string, stdout, stderr io.Writer, now time.Time) int {
	fs := pflag.NewFlagSet("tallyd check-log", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fix := fs.Bool("fix", false, "keep the original aside and write a log of every valid record")
	fs.Usage = func() { fmt.Fprint(stderr, checkLogUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "tallyd check-log: %v (see tallyd check-log --help)\n", err)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "tallyd check-log: give one FILE (see tallyd check-log --help)\n")
		return 2
	}
	path := fs.Arg(0)
	var (
		c     *aof.LogCheck
		aside string
		err   error
	)
	if *fix {
		// Never under a running tallyd: it would go on writing the log being replaced.
		release, lerr := lockDataDir(logDataDir(path), false)
		if lerr != nil {
			fmt.Fprintf(stderr, "tallyd check-log: %v\n", lerr)
			return 1
		}
		defer release()
		c, aside, err = aof.FixLog(path, now)
	} else {
		c, err = aof.CheckLog(path)
	}
	if c != nil {
		reportLog(stdout, c)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tallyd check-log: %v\n", err)
		return 1
	case !c.Damaged():
		return 0
	case !*fix:
		fmt.Fprintf(stdout, "To keep the %d valid records and drop %d damaged bytes: tallyd check-log --fix %s "+
			"(the original is kept as %s.broken-TIME).\n", c.Records, damagedBytes(c), path, path)
		return 1
	}
	fmt.Fprintf(stdout, "Kept the original as %s.\nWrote %s: %d records, %d bytes.\n", aside, path, c.Records, c.Kept)
	return 0
}

// reportLog prints what CheckLog found.
func reportLog(w io.Writer, c *aof.LogCheck) {
	fmt.Fprintf(w, "%s: %s, %d bytes, %d valid records", c.Path, c.Kind, c.Size, c.Records)
	if !c.Damaged() {
		fmt.Fprintf(w, ", no damage.\n")
		return
	}
	fmt.Fprintf(w, ", %d damaged stretches (%d bytes):\n", len(c.Damage), damagedBytes(c))
	for _, d := range c.Damage {
		what := "damaged"
		switch {
		case d.Repaired:
			what = "length field damaged (the record is whole: kept with its length set right)"
		case d.Tail():
			what = "tail"
		}
		fmt.Fprintf(w, "  offset %d to %d (%d bytes): %s: %s; %d valid records after it\n",
			d.Offset, d.End, d.End-d.Offset, what, d.Why, d.After)
	}
	if c.TailOnly() {
		fmt.Fprintf(w, "Only a tail is damaged, with no valid record after it: tallyd cuts it off by itself at start.\n")
	}
}

// damagedBytes is how many bytes a repair drops.
func damagedBytes(c *aof.LogCheck) int64 {
	return max(0, c.Size-c.Kept)
}
