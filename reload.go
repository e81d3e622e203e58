package main

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/loop"
)

// settings is what tallyd runs with: the command line, read again at each reload, and the
// options in force.
type settings struct {
	args []string
	d    loop.Config
	o    *options
	fs   *pflag.FlagSet // o's flags
}

// liveFlags are the settings a reload changes in the running process (the limits among them
// are those loop.Server.Reload applies); a change to any other is logged as needing a restart.
var liveFlags = map[string]bool{
	"log-level": true, "log-format": true, "log-file": true,
	"max-connections": true, "counter-max-connections": true, "semaphore-max-connections": true,
	"max-input": true, "max-output": true, "idle-timeout": true, "max-memory": true,
	"slock-max-wills": true, "slock-max-will-bytes": true,
	"lua-time-limit": true, "lua-max-memory": true, "lua-scripts-max": true, "lua-scripts-max-bytes": true,
	"lua-native-locks": true,
	"requirepass":      true, "aclfile": true, "protected-mode": true, "allow": true, "counter-allow": true,
	"semaphore-allow": true, "pool-allow": true, "slock-allow": true, "peer-allow": true,
}

// reload is SIGHUP: the log file is reopened, and the config file read again with the same
// command line. What can change live changes, the rest is logged as needing a restart; a
// config that does not load changes nothing. It never stops the process.
func (st *settings) reload(srv *loop.Server, out *logOutput, log zerolog.Logger) {
	if reopened, err := out.reopen(); err != nil {
		log.Error().Err(err).Msg("SIGHUP: the log file stays the one open")
	} else if reopened {
		log.Info().Str("log_file", st.o.logFile).Msg("SIGHUP: log file reopened")
	}
	if st.o.configFile == "" {
		st.reloadACL(srv, log)
		return
	}
	var o options
	fs := newFlags(&o, st.d)
	fs.SetOutput(io.Discard)
	cfg, err := func() (loop.Config, error) {
		if err := fs.Parse(st.args); err != nil { // it parsed at start
			return loop.Config{}, err
		}
		if err := applyConfigFile(&o, fs, log); err != nil {
			return loop.Config{}, err
		}
		if err := checkLog(o.logLevel, o.logFormat); err != nil {
			return loop.Config{}, o.inFile(err)
		}
		if o.maxInput < int(st.o.maxBody)+12 { // max-body changes only at a restart
			return loop.Config{}, fmt.Errorf("--max-input %d must hold a whole request of the running --max-body (at least %d)",
				o.maxInput, int(st.o.maxBody)+12)
		}
		cfg, err := o.loopConfig(fs, st.d)
		if err != nil {
			return cfg, o.inFile(err)
		}
		_, err = loop.LoadUsers(cfg.RequirePass, cfg.ACLFile) // Reload reads them again, on this goroutine
		return cfg, err
	}()
	if err != nil {
		log.Error().Err(err).Str("file", st.o.configFile).
			Msg("SIGHUP: config not reloaded: running on with the settings in force")
		return
	}

	var live, restart []string
	st.fs.VisitAll(func(f *pflag.Flag) {
		if g := fs.Lookup(f.Name); g.Value.String() != f.Value.String() {
			change := describeChange(f.Name, f.Value.String(), g.Value.String())
			if !liveFlags[f.Name] {
				restart = append(restart, change)
				return
			}
			if f.Name == "log-file" || f.Name == "log-format" {
				if err := out.configure(o.logFormat, o.logFile); err != nil {
					log.Error().Err(err).Msg("SIGHUP: the log output stays as it was")
					return
				}
			}
			live = append(live, change)
			_ = f.Value.Set(g.Value.String()) // now in force
		}
	})
	for _, k := range []struct {
		key      string
		was, now bool
	}{
		{"counter.enable", enabled(st.o.counterEnabledByFile), enabled(o.counterEnabledByFile)},
		{"semaphore.enable", st.o.semaphoreEnabled, o.semaphoreEnabled},
	} {
		if k.was != k.now {
			restart = append(restart, fmt.Sprintf("%s: %t -> %t", k.key, k.was, k.now))
		}
	}
	setLogLevel(st.o.logLevel)
	setMemoryLimit(cfg.MaxMemory)
	srv.Reload(cfg)

	ev := log.Info().Str("file", st.o.configFile)
	if cfg.ACLFile != "" {
		ev = ev.Str("aclfile", cfg.ACLFile) // read again
	}
	switch {
	case len(live) > 0:
		ev = ev.Strs("changed", live)
	case len(restart) == 0:
		ev = ev.Str("changed", "nothing")
	}
	if len(restart) > 0 {
		ev = ev.Strs("needs_restart", restart)
	}
	ev.Msg("SIGHUP: config reloaded")
	if len(restart) > 0 {
		log.Warn().Strs("needs_restart", restart).
			Msg("SIGHUP: these changes take effect only when tallyd is restarted")
	}
}

// reloadACL is SIGHUP without a config file: the ACL file (--aclfile), if any, is read again.
func (st *settings) reloadACL(srv *loop.Server, log zerolog.Logger) {
	if st.o.security.aclFile == "" {
		log.Info().Msg("SIGHUP: no config file (--config) to reload") // nor an ACL file
		return
	}
	cfg, err := st.o.loopConfig(st.fs, st.d) // the settings in force
	if err == nil {
		_, err = loop.LoadUsers(cfg.RequirePass, cfg.ACLFile)
	}
	if err != nil {
		log.Error().Err(err).Msg("SIGHUP: ACL file not reloaded: the users stay as they were")
		return
	}
	srv.Reload(cfg)
	log.Info().Str("aclfile", cfg.ACLFile).Msg("SIGHUP: ACL file reloaded")
}

// describeChange says what changed, under the config key an operator edits and the flag.
func describeChange(flag, was, now string) string {
	name := "--" + flag
	for _, k := range confKeys {
		if k.flag == flag && k.alias == "" {
			name = k.key + " (--" + flag + ")"
			break
		}
	}
	if secretFlags[flag] {
		return name + ": changed" // never the values
	}
	q := func(s string) string {
		if s == "" || strings.ContainsAny(s, " \t") {
			return strconv.Quote(s)
		}
		return s
	}
	return name + ": " + q(was) + " -> " + q(now)
}

// enabled is counter.enable's value (true unless the file says false).
func enabled(p *bool) bool { return p == nil || *p }

// setMemoryLimit makes the Go collector keep the heap under the memory budget (0 = none)
// plus tallyd's overhead: the heap may grow to twice what is live before a collection; the
// limit makes the collector work harder instead as the budget is approached, and hands
// freed memory back to the system.
func setMemoryLimit(budget int64) {
	if budget > 0 {
		debug.SetMemoryLimit(budget + memoryOverhead)
	} else {
		debug.SetMemoryLimit(math.MaxInt64)
	}
}

// keysUsage lists the config keys for --help, wrapped, aliases in parentheses.
func keysUsage() string {
	var words []string
	for _, k := range confKeys {
		if k.alias != "" {
			continue
		}
		w := k.key
		for _, a := range confKeys {
			if a.alias == k.key {
				w += " (alias " + a.key + ")"
			}
		}
		words = append(words, w)
	}
	var b strings.Builder
	line := 0
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if line > 0 && line+1+len(w) > 92 {
			b.WriteString("\n")
			line = 0
		}
		if line > 0 {
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += len(w)
	}
	return b.String() + "\n" + "Each key sets the flag of the same meaning (see tallyd(8) for the pairs); counter.enable\nand semaphore.enable turn those listeners off and on.\n"
}
