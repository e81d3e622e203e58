package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// confEntry is one `key = value` line of a yrmcds.conf-style file.
type confEntry struct {
	Key, Value string
	Line       int
}

// parseConf reads yrmcds.conf syntax: `key = value` lines, `#` comments, blank lines, and
// values optionally in double quotes.
func parseConf(r io.Reader, name string) ([]confEntry, error) {
	var out []confEntry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: expected `key = value`, got %q", name, n, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if key == "" {
			return nil, fmt.Errorf("%s:%d: empty key", name, n)
		}
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		out = append(out, confEntry{Key: key, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// confBool parses a yrmcds boolean: true/false, yes/no, on/off, 1/0.
func confBool(e confEntry, file string) (bool, error) {
	switch strings.ToLower(e.Value) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s:%d: %s: %q is not a boolean (true or false)", file, e.Line, e.Key, e.Value)
}

// confUint parses a non-negative integer no larger than limit.
func confUint(e confEntry, file string, limit uint64) (int, error) {
	v, err := strconv.ParseUint(e.Value, 10, 64)
	if err != nil || v > limit {
		return 0, fmt.Errorf("%s:%d: %s: %q is not a whole number from 0 to %d", file, e.Line, e.Key, e.Value, limit)
	}
	return int(v), nil
}

// defaultMaxMemory is --max-memory's default: see autoMemory.
const defaultMaxMemory = "auto"

// minMaxMemory is the smallest memory budget accepted: below it the server's own tables
// would not fit.
const minMaxMemory = 16 << 20

// memoryOverhead is what tallyd takes besides what the budget counts (code, runtime,
// tables, free buffers, garbage not yet collected): the Go memory limit is set this far
// above the budget.
const memoryOverhead = 64 << 20

// parseSize parses a byte count as Redis's config does: a whole number, optionally followed
// by k, kb, m, mb, g or gb (powers of 1024, any case).
func parseSize(v string) (int64, error) {
	s := strings.ToLower(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size in bytes (a whole number, optionally with kb, mb or gb)", v)
	}
	return n * mult, nil
}

// autoMemory is the default memory budget: half the memory tallyd may use, the smaller of
// the machine's (MemTotal) and its cgroup's limit (memory.max), less the runtime's overhead;
// 0 (none) where neither can be read.
func autoMemory() int64 {
	var limit int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err == nil {
					limit = kb << 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	if limit == 0 {
		return 0
	}
	return max(limit/2-memoryOverhead, minMaxMemory)
}
