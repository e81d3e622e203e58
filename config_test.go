package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "64mb": 64 << 20, "64MB": 64 << 20, "64m": 64 << 20, "2gb": 2 << 30,
		"3G": 3 << 30, "512kb": 512 << 10, "7k": 7 << 10, "100b": 100, " 5mb ": 5 << 20,
	} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mb", "-1", "1.5gb", "12tb", "99999999999gb", "auto"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// A bad --max-memory stops tallyd before it listens, naming the flag.
func TestMaxMemoryOption(t *testing.T) {
	for _, arg := range []string{"--max-memory=1mb", "--max-memory=lots", "--max-memory=-5"} {
		var stderr bytes.Buffer
		code := run([]string{arg, "--counter-port=1", "--pool-port=0", "--slock-port=0", "--appendonly=false"}, &stderr)
		if code != 1 || !strings.Contains(stderr.String(), "--max-memory") {
			t.Errorf("%s: exit %d, %q", arg, code, stderr.String())
		}
	}
	if a := autoMemory(); a != 0 && a < minMaxMemory {
		t.Errorf("automatic budget %d below the minimum", a)
	}
}
