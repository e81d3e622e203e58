package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"
)

// confKey is a key of the config file: it sets a flag's value (unless that flag was given on
// the command line), or, for the few keys without a flag, does what apply does.
type confKey struct {
	key   string
	flag  string                                           // the flag it sets; "" for a key of its own
	apply func(o *options, e confEntry, file string) error // a key of its own
	doc   string                                           // what a key of its own means (man page, docs/operations.md)
	alias string                                           // the key it is another name for, if any
}

// confKeys is every key the config file may have, in the order the man page lists them.
var confKeys = []confKey{
	{key: "bind", flag: "bind"},
	{key: "data_dir", flag: "data-dir"},
	{key: "requirepass", flag: "requirepass"},
	{key: "aclfile", flag: "aclfile"},
	{key: "protected_mode", flag: "protected-mode"},
	{key: "allow", flag: "allow"},
	{key: "log.level", flag: "log-level"},
	{key: "log.format", flag: "log-format"},
	{key: "log.path", flag: "log-file"}, // not log.file: yrmcds.conf has that, for its own log
	{key: "counter.enable", doc: "false turns the counter listener off (unless --counter-port is given)",
		apply: func(o *options, e confEntry, file string) error {
			on, err := confBool(e, file)
			o.counterEnabledByFile = &on
			return err
		}},
	{key: "counter.port", flag: "counter-port"},
	{key: "counter.max_connections", flag: "counter-max-connections"},
	{key: "counter.allow", flag: "counter-allow"},
	{key: "counter.buckets", flag: "counter-buckets"},
	{key: "counter.stat_interval", flag: "stat-interval"},
	{key: "counter.consumption_stats.interval", flag: "stat-interval", alias: "counter.stat_interval"},
	{key: "semaphore.enable", doc: "true turns the semaphore listener on (port 11216 unless semaphore.port says otherwise)",
		apply: func(o *options, e confEntry, file string) (err error) {
			o.semaphoreEnabled, err = confBool(e, file)
			return err
		}},
	{key: "semaphore.port", flag: "semaphore-port"},
	{key: "semaphore.max_connections", flag: "semaphore-max-connections"},
	{key: "semaphore.allow", flag: "semaphore-allow"},
	{key: "semaphore.buckets", flag: "semaphore-buckets"},
	{key: "semaphore.gc_interval", flag: "semaphore-gc-interval"},
	{key: "pool.port", flag: "pool-port"},
	{key: "pool.allow", flag: "pool-allow"},
	{key: "pool.max_line", flag: "pool-max-line"},
	{key: "pool.max_locks_per_conn", flag: "pool-max-locks-per-conn"},
	{key: "slock.port", flag: "slock-port"},
	{key: "slock.allow", flag: "slock-allow"},
	{key: "slock.max_data", flag: "slock-max-data"},
	{key: "slock.max_waiters_per_key", flag: "slock-max-waiters-per-key"},
	{key: "slock.max_waiters_per_conn", flag: "slock-max-waiters-per-conn"},
	{key: "slock.max_wills", flag: "slock-max-wills"},
	{key: "slock.max_will_bytes", flag: "slock-max-will-bytes"},
	{key: "tls.slock_port", flag: "slock-tls-port"},
	{key: "tls.counter_port", flag: "counter-tls-port"},
	{key: "tls.pool_port", flag: "pool-tls-port"},
	{key: "tls.cert_file", flag: "tls-cert-file"},
	{key: "tls.key_file", flag: "tls-key-file"},
	{key: "tls.ca_cert_file", flag: "tls-ca-cert-file"},
	{key: "tls.handshake_timeout", flag: "tls-handshake-timeout"},
	{key: "tls.hello_timeout", flag: "tls-hello-timeout"},
	{key: "tls.max_handshakes", flag: "tls-max-handshakes"},
	{key: "tls.max_handshakes_per_ip", flag: "tls-max-handshakes-per-ip"},
	{key: "limits.max_connections", flag: "max-connections"},
	{key: "limits.max_body", flag: "max-body"},
	{key: "limits.max_objects", flag: "max-objects"},
	{key: "limits.max_output", flag: "max-output"},
	{key: "limits.max_input", flag: "max-input"},
	{key: "limits.idle_timeout", flag: "idle-timeout"},
	{key: "limits.backlog", flag: "backlog"},
	{key: "limits.conn_slice", flag: "conn-slice"},
	{key: "limits.multi_max_commands", flag: "multi-max-commands"},
	{key: "limits.multi_max_work", flag: "multi-max-work"},
	{key: "lua.time_limit", flag: "lua-time-limit"},
	{key: "lua.max_memory", flag: "lua-max-memory"},
	{key: "lua.scripts_max", flag: "lua-scripts-max"},
	{key: "lua.scripts_max_bytes", flag: "lua-scripts-max-bytes"},
	{key: "lua.native_locks", flag: "lua-native-locks"},
	{key: "pubsub.notify_keyspace_events", flag: "notify-keyspace-events"},
	{key: "pubsub.client_output_buffer_limit", flag: "client-output-buffer-limit"},
	{key: "pubsub.max_subscriptions", flag: "max-subscriptions"},
	{key: "pubsub.max_patterns", flag: "max-patterns"},
	{key: "pubsub.max_client_patterns", flag: "max-client-patterns"},
	{key: "pubsub.max_pattern_length", flag: "max-pattern-length"},
	{key: "pubsub.max_channel_length", flag: "max-channel-length"},
	{key: "slowlog.log_slower_than", flag: "slowlog-log-slower-than"},
	{key: "slowlog.max_len", flag: "slowlog-max-len"},
	{key: "max_memory", flag: "max-memory"},
	{key: "metrics.addr", flag: "metrics-addr"},
	{key: "metrics.max_connections", flag: "metrics-max-connections"},
	{key: "aof.enable", flag: "appendonly"},
	{key: "aof.dir", flag: "data-dir", alias: "data_dir"},
	{key: "aof.fsync", flag: "appendfsync"},
	{key: "aof.lock_persist_after", flag: "lock-persist-after"},
	{key: "aof.rewrite_size", flag: "aof-rewrite-size"},
	{key: "cluster.members", flag: "cluster"},
	{key: "cluster.node_id", flag: "node-id"},
	{key: "cluster.join", flag: "join"},
	{key: "cluster.peer_addr", flag: "peer-addr"},
	{key: "cluster.peer_allow", flag: "peer-allow"},
	{key: "cluster.raft_tick", flag: "raft-tick"},
	{key: "cluster.timeout", flag: "cluster-timeout"},
	{key: "cluster.snapshot_entries", flag: "snapshot-entries"},
	{key: "cluster.initial_state", flag: "initial-cluster-state"},
	{key: "cluster.peer_bind", flag: "peer-bind"},
	{key: "cluster.key_file", flag: "cluster-key-file"},
	{key: "cluster.peer_cert_file", flag: "peer-cert-file"},
	{key: "cluster.peer_key_file", flag: "peer-key-file"},
	{key: "cluster.peer_trusted_ca_file", flag: "peer-trusted-ca-file"},
}

// yrmcdsKeys are yrmcds.conf's keys that mean nothing to tallyd: they are logged and
// ignored, so that an existing yrmcds.conf can be used as is. Any other key tallyd does not
// know is an error.
var yrmcdsKeys = map[string]bool{
	"user": true, "group": true, "virtual_ip": true, "bind_ip": true, "port": true, "repl_port": true,
	"max_connections": true, "temp_dir": true, "log.threshold": true, "log.file": true, "buckets": true,
	"max_data_size": true, "heap_data_limit": true, "memory_limit": true, "repl_bufsize": true,
	"secure_erase": true, "lock_page": true, "workers": true, "gc_interval": true, "slave_timeout": true,
}

// lookupKey finds a config key.
func lookupKey(key string) (confKey, bool) {
	for _, k := range confKeys {
		if k.key == key {
			return k, true
		}
	}
	return confKey{}, false
}

// applyConfigFile reads o.configFile into o, whose flags are fs: a key whose flag was given
// on the command line is left to the flag, and an unknown key is an error naming its line.
func applyConfigFile(o *options, fs *pflag.FlagSet, log zerolog.Logger) error {
	f, err := os.Open(o.configFile)
	if err != nil {
		return err
	}
	defer f.Close()
	entries, err := parseConf(f, o.configFile)
	if err != nil {
		return err
	}
	name := o.configFile
	for _, e := range entries {
		k, ok := lookupKey(e.Key)
		switch {
		case !ok && yrmcdsKeys[e.Key]:
			log.Warn().Str("file", name).Int("line", e.Line).Str("key", e.Key).
				Msg("unknown config key ignored: a yrmcds setting tallyd has no use for")
		case !ok:
			msg := fmt.Sprintf("%s:%d: unknown key %q", name, e.Line, e.Key)
			if near := nearestKey(e.Key); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
			return fmt.Errorf("%s; the keys are listed by tallyd --help", msg)
		case k.apply != nil:
			if err := k.apply(o, e, name); err != nil {
				return err
			}
		case fs.Changed(k.flag):
			log.Debug().Str("key", e.Key).Str("flag", k.flag).Msg("config key overridden by flag")
		default:
			if err := setFlag(fs.Lookup(k.flag), e, name); err != nil {
				return err
			}
			if o.fromFile == nil {
				o.fromFile = map[string]confEntry{}
			}
			o.fromFile[k.flag] = e
		}
	}
	// A semaphore.port in the file without semaphore.enable = true does not turn it on.
	if !o.semaphoreEnabled && !fs.Changed("semaphore-port") {
		o.semaphorePort = 0
	}
	return nil
}

// setFlag sets flag f to the value of entry e, read as the flag's type reads it (booleans
// and whole numbers as yrmcds.conf writes them).
func setFlag(f *pflag.Flag, e confEntry, file string) error {
	v := e.Value
	switch f.Value.Type() {
	case "bool":
		on, err := confBool(e, file)
		if err != nil {
			return err
		}
		v = strconv.FormatBool(on)
	case "int", "uint32", "int64":
		limit := uint64(1<<31 - 1)
		switch {
		case strings.HasSuffix(f.Name, "-port"):
			limit = 65535
		case f.Value.Type() == "uint32":
			limit = 1<<32 - 1
		case f.Value.Type() == "int64":
			limit = 1<<62 - 1
		}
		if _, err := confUint(e, file, limit); err != nil {
			return err
		}
	case "duration":
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("%s:%d: %s %q: want a duration such as 1s or 500ms", file, e.Line, e.Key, v)
		}
	}
	if err := f.Value.Set(v); err != nil {
		return fmt.Errorf("%s:%d: %s %q: %v", file, e.Line, e.Key, v, err)
	}
	return nil
}

// nearestKey is the known key closest to a mistyped one, if one is close.
func nearestKey(key string) string {
	best, bestD := "", 3 // at most two edits away
	for _, k := range confKeys {
		if d := editDistance(key, k.key); d < bestD {
			best, bestD = k.key, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

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
		if value != "" && value[0] == '"' {
			if len(value) < 2 || value[len(value)-1] != '"' {
				// Taken as is, `requirepass = "abc` would set the password "abc, quote included.
				// Not echoed: it may be a password.
				return nil, fmt.Errorf("%s:%d: %s: the value's opening quote (\") is not closed", name, n, key)
			}
			value = value[1 : len(value)-1]
		}
		out = append(out, confEntry{Key: key, Value: value, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// inFile names the config file line behind an error about a setting: an error that starts
// with --FLAG, where FLAG was set by the config file (and not the command line), is said as
// FILE:LINE: KEY = VALUE (--FLAG): the rest, so that the operator knows which line to fix.
func (o *options) inFile(err error) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "--") || len(o.fromFile) == 0 {
		return err
	}
	end := 2
	for end < len(msg) && (msg[end] == '-' || msg[end] >= 'a' && msg[end] <= 'z' || msg[end] >= '0' && msg[end] <= '9') {
		end++
	}
	e, ok := o.fromFile[msg[2:end]]
	if !ok {
		return err
	}
	rest := strings.TrimLeft(msg[end:], ": ")
	if q := strconv.Quote(e.Value); strings.HasPrefix(rest, q) { // the value again
		rest = strings.TrimLeft(rest[len(q):], ": ")
	}
	if secretFlags[msg[2:end]] {
		return fmt.Errorf("%s:%d: %s (--%s): %s", o.configFile, e.Line, e.Key, msg[2:end], rest)
	}
	return fmt.Errorf("%s:%d: %s = %q (--%s): %s", o.configFile, e.Line, e.Key, e.Value, msg[2:end], rest)
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
