package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// durationWords are the parts of a log field's name that say it holds a length of time.
var durationWords = map[string]bool{"took": true, "time": true, "timeout": true, "age": true, "wait": true,
	"elapsed": true, "interval": true, "lag": true, "delay": true, "duration": true, "retry": true, "idle": true}

// durationUnits are the last parts of a name that give its unit.
var durationUnits = map[string]bool{"ns": true, "us": true, "usec": true, "ms": true, "msec": true, "sec": true,
	"seconds": true, "secs": true}

// Log fields that are durations carry their unit in their name: zerolog's .Dur writes a bare
// number (milliseconds: DurationFieldUnit), so a reader of "took":12.5 cannot tell 12.5 what.
// Every .Dur field ends in _ms, and every number field named for a time ends in a unit.
func TestLogDurationsCarryUnits(t *testing.T) {
	if zerolog.DurationFieldUnit != time.Millisecond {
		t.Fatalf("zerolog.DurationFieldUnit is %v: the _ms fields below would lie", zerolog.DurationFieldUnit)
	}
	call := regexp.MustCompile(`\.(Dur|Int|Int32|Int64|Uint|Uint32|Uint64|Float32|Float64)\("([A-Za-z0-9_]+)"`)
	var files []string
	for _, pattern := range []string{"*.go", "loop/*.go", "aof/*.go", "raftlog/*.go", "cluster/*.go", "stats/*.go",
		"logfile/*.go", "script/*.go", "tlsbridge/*.go"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range call.FindAllStringSubmatch(line, -1) {
				kind, name := m[1], m[2]
				parts := strings.Split(strings.ToLower(name), "_")
				unit := durationUnits[parts[len(parts)-1]]
				timed := false
				for _, p := range parts {
					timed = timed || durationWords[p]
				}
				switch {
				case kind == "Dur" && parts[len(parts)-1] != "ms":
					t.Errorf("%s:%d: .Dur(%q) writes milliseconds as a bare number: name it %s_ms", f, i+1, name, name)
				case kind != "Dur" && timed && !unit:
					t.Errorf("%s:%d: .%s(%q) is a time without a unit in its name", f, i+1, kind, name)
				}
				if kind == "Dur" || timed {
					checked++
				}
			}
		}
	}
	if checked < 5 {
		t.Errorf("found only %d duration fields: is the scan still looking at the logging calls?", checked)
	}
}
