// Command tallyd is a resource-counting and locking daemon: yrmcds counters and semaphores
// and PoolCounter pools served from one event loop over one in-memory store.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/tallyd/tallyd/aof"
	buildversion "github.com/tallyd/tallyd/internal/version"
	"github.com/tallyd/tallyd/loop"
	"github.com/tallyd/tallyd/script"
	"github.com/tallyd/tallyd/stats"
)

var version = buildversion.String()

// Default ports. The semaphore variant has no port of its own in yrmcds (it reused 11215);
// tallyd gives it the next one so that both protocols can run side by side.
const (
	defaultCounterPort   = 11215
	defaultSemaphorePort = 11216
	defaultPoolPort      = 7531
	defaultSlockPort     = 5658
)

// options is the command line and config file, before they become a loop.Config.
type options struct {
	bind                 string
	counterPort          int
	semaphorePort        int
	poolPort             int
	poolMaxLine          int
	poolMaxEntries       int
	slockPort            int
	slockMaxData         uint32
	slockWaitersPerKey   int
	slockWaitersPerConn  int
	dataDir              string
	appendOnly           bool
	appendFsync          string
	lockPersistAfter     time.Duration
	aofRewriteSize       int64
	configFile           string
	fromFile             map[string]confEntry // flag name -> the config file line that set it (inFile)
	maxConnections       int
	counterMaxConns      int
	semaphoreMaxConns    int
	maxBody              uint32
	maxObjects           int
	maxOutput            int
	maxInput             int
	maxMemory            string
	slockMaxWills        int
	slockMaxWillBytes    int
	backlog              int
	statInterval         int
	semaphoreGCInterval  int
	counterBuckets       int
	semaphoreBuckets     int
	logLevel             string
	logFormat            string
	logFile              string
	showVersion          bool
	man                  bool
	cpuProfile           string
	metricsAddr          string
	metricsMaxConns      int
	idleTimeout          int
	connSlice            time.Duration
	slowlogSlowerThan    int64
	slowlogMaxLen        int
	multiMaxCommands     int
	multiMaxWork         time.Duration
	luaTimeLimit         int64
	luaMaxMemory         int64
	luaScriptsMax        int
	luaScriptsMaxBytes   int64
	luaNativeLocks       bool
	notifyEvents         string
	pubsubLimit          string
	maxSubscriptions     int
	maxPatterns          int // --max-patterns, --max-client-patterns, --max-pattern-length, --max-channel-length
	maxClientPatterns    int
	maxPatternLen        int
	maxChannelLen        int
	counterEnabledByFile *bool
	semaphoreEnabled     bool
	cluster              clusterOptions
	tls                  tlsOptions
	security             securityOptions
}

func main() {
	procsFloor() // a second P for the event loop's waits (procs.go)
	os.Exit(run(os.Args[1:], os.Stderr))
}

// newFlags defines tallyd's flags on a new flag set, bound to o.
func newFlags(o *options, d loop.Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("tallyd", pflag.ContinueOnError)
	fs.SortFlags = false
	fs.StringVarP(&o.bind, "bind", "l", "127.0.0.1", "IP address to listen on (all listeners)")
	fs.IntVar(&o.counterPort, "counter-port", defaultCounterPort, "yrmcds counter protocol port; 0 turns it off")
	fs.IntVar(&o.semaphorePort, "semaphore-port", 0, "yrmcds semaphore protocol port; 0 = off (config: semaphore.enable, default port 11216)")
	fs.IntVar(&o.poolPort, "pool-port", defaultPoolPort, "PoolCounter protocol port; 0 turns it off")
	fs.IntVar(&o.slockPort, "slock-port", defaultSlockPort, "slock protocol port (binary frames and Redis text); 0 turns it off")
	o.tls.clientFlags(fs, d)
	fs.StringVar(&o.configFile, "config", "", "yrmcds.conf-style config `FILE` (key = value); flags override it")
	o.security.flags(fs)
	fs.IntVar(&o.maxConnections, "max-connections", 0, "connections on all listeners together; 0 = unlimited (tallyd still stays below the open-file limit)")
	fs.IntVar(&o.counterMaxConns, "counter-max-connections", 0, "connections on the counter listener; 0 = unlimited")
	fs.IntVar(&o.semaphoreMaxConns, "semaphore-max-connections", 0, "connections on the semaphore listener; 0 = unlimited")
	fs.Uint32Var(&o.maxBody, "max-body", d.MaxBody, "largest request BodyLength in bytes; a larger one closes the connection")
	fs.IntVar(&o.maxObjects, "max-objects", d.MaxObjects, "counters (and semaphores) at most; beyond: status 0x82 Out of memory; 0 = unlimited")
	fs.IntVar(&o.maxOutput, "max-output", d.MaxOutput, "unsent reply bytes per connection before it is closed")
	fs.IntVar(&o.maxInput, "max-input", d.MaxInput, "unparsed request bytes per connection before it is closed")
	fs.IntVar(&o.idleTimeout, "idle-timeout", int(d.IdleTimeout/time.Second), "close a connection that has sent no whole request for this many `SECONDS` and holds and awaits nothing (Redis's timeout); 0 = never")
	fs.DurationVar(&o.connSlice, "conn-slice", d.ConnSlice, "how long one connection's requests run in a turn of the event loop before the other connections are served (memcached's reqs_per_event, in time); 0 = no limit")
	fs.IntVar(&o.multiMaxCommands, "multi-max-commands", d.MultiMaxCommands, "commands one MULTI may queue; beyond: an error, and EXEC aborts (0 = unlimited)")
	fs.Int64Var(&o.luaTimeLimit, "lua-time-limit", script.DefaultLimits.Time.Milliseconds(), "milliseconds one script (EVAL) may run before it is stopped with a BUSY error (the loop serves no one else meanwhile)")
	fs.Int64Var(&o.luaMaxMemory, "lua-max-memory", script.DefaultLimits.MaxMemory, "bytes one script may allocate before it is stopped")
	fs.IntVar(&o.luaScriptsMax, "lua-scripts-max", script.DefaultLimits.MaxScripts, "scripts sent only by EVAL kept by SHA1 for EVALSHA (the least recently used beyond are forgotten)")
	fs.Int64Var(&o.luaScriptsMaxBytes, "lua-scripts-max-bytes", script.DefaultLimits.MaxBytes, "bytes of script bodies kept in all; SCRIPT LOAD beyond answers an error (compiled, the scripts also count in --max-memory)")
	fs.BoolVar(&o.luaNativeLocks, "lua-native-locks", true, "run the lock libraries' scripts (redis-py, redsync, node-redlock; recognised by their SHA1) as native compare-and-act operations, with the replies and effects their Lua gives; false: on Lua like any other")
	fs.StringVar(&o.notifyEvents, "notify-keyspace-events", "", "keyspace notifications to publish, as Redis's notify-keyspace-events (K, E, g, $, h, x, A, ...; L: tallyd's lock events); CONFIG SET changes it")
	fs.StringVar(&o.pubsubLimit, "client-output-buffer-limit", "32mb 8mb 60", "a subscriber's unsent messages: hard limit, soft limit and soft seconds, as Redis's client-output-buffer-limit pubsub class; CONFIG SET changes it")
	fs.IntVar(&o.maxSubscriptions, "max-subscriptions", loop.DefaultMaxSubscriptions, "channels and patterns one connection may subscribe to, together")
	fs.IntVar(&o.maxPatterns, "max-patterns", loop.DefaultMaxPatterns, "distinct patterns all connections may subscribe to, together: each PUBLISH tests every one")
	fs.IntVar(&o.maxClientPatterns, "max-client-patterns", loop.DefaultMaxClientPatterns, "patterns one connection may subscribe to")
	fs.IntVar(&o.maxPatternLen, "max-pattern-length", loop.DefaultMaxPatternLen, "bytes of a pattern PSUBSCRIBE takes: a pattern's test costs up to its bytes times the channel's")
	fs.IntVar(&o.maxChannelLen, "max-channel-length", loop.DefaultMaxChannelLen, "bytes of a channel SUBSCRIBE and PUBLISH take")
	fs.DurationVar(&o.multiMaxWork, "multi-max-work", d.MultiMaxWork, "estimated time one EXEC may hold the event loop (its queue's commands, keys and bytes); beyond: an error while queueing, and EXEC aborts (0 = unlimited)")
	fs.Int64Var(&o.slowlogSlowerThan, "slowlog-log-slower-than", d.SlowlogSlowerThan, "Redis-text commands that run at least this many `MICROSECONDS` are kept in SLOWLOG (negative: none, 0: all)")
	fs.IntVar(&o.slowlogMaxLen, "slowlog-max-len", d.SlowlogMaxLen, "entries SLOWLOG keeps, the newest")
	fs.StringVar(&o.maxMemory, "max-memory", defaultMaxMemory, "memory budget for buffered requests and replies and stored values (bytes, or with kb, mb, gb); beyond it writes get out-of-memory errors and the connections buffering the most are closed; auto = half the memory of the machine or cgroup; 0 = none")
	fs.IntVar(&o.backlog, "backlog", d.Backlog, "listen backlog of each listener")
	fs.IntVar(&o.poolMaxLine, "pool-max-line", d.PoolMaxLine, "longest PoolCounter line in bytes; longer: ERROR LINE_TOO_LONG and close")
	fs.IntVar(&o.poolMaxEntries, "pool-max-locks-per-conn", d.PoolMaxEntries, "PoolCounter locks held or awaited per connection; more: LOCK_HELD")
	fs.Uint32Var(&o.slockMaxData, "slock-max-data", d.SlockMaxData, "largest slock data value or CALL body in bytes; larger closes the connection")
	fs.IntVar(&o.slockWaitersPerKey, "slock-max-waiters-per-key", d.SlockMaxWaitersPerKey, "queued slock requests per key; beyond: TIMEOUT at once (0 = unlimited)")
	fs.IntVar(&o.slockWaitersPerConn, "slock-max-waiters-per-conn", d.SlockMaxWaitersPerConn, "queued slock requests per connection; beyond: TIMEOUT at once (0 = unlimited)")
	fs.IntVar(&o.slockMaxWills, "slock-max-wills", d.SlockMaxWills, "pending WILL commands per slock connection; beyond: an error reply (0 = unlimited)")
	fs.IntVar(&o.slockMaxWillBytes, "slock-max-will-bytes", d.SlockMaxWillBytes, "bytes of pending WILL commands per slock connection, data included; beyond: an error reply (0 = unlimited)")
	fs.StringVar(&o.dataDir, "data-dir", "./data", "directory of the append-only log of slock values and long-held locks; one tallyd at a time (it locks DATA_DIR/LOCK)")
	fs.BoolVar(&o.appendOnly, "appendonly", true, "keep the append-only log (--appendonly=false: slock state lives in memory only)")
	fs.StringVar(&o.appendFsync, "appendfsync", "everysec", "when the log is fsynced: always (before each reply), everysec, or no (left to the kernel)")
	fs.DurationVar(&o.lockPersistAfter, "lock-persist-after", d.LockPersistAfter, "a slock lock held this long is written to the log (keys with a value: at once)")
	fs.Int64Var(&o.aofRewriteSize, "aof-rewrite-size", d.AOFRewriteSize, "compact the log when it is larger than this many bytes and has doubled since the last compaction")
	fs.IntVar(&o.statInterval, "stat-interval", int(d.StatInterval), "seconds per max-consumption interval (wall-clock aligned, minimum 10)")
	fs.IntVar(&o.semaphoreGCInterval, "semaphore-gc-interval", int(d.SemaphoreGCInterval/time.Second), "seconds between garbage collections of released semaphores")
	fs.IntVar(&o.counterBuckets, "counter-buckets", d.CounterBuckets, "expected number of counters (a sizing hint)")
	fs.IntVar(&o.semaphoreBuckets, "semaphore-buckets", d.SemaphoreBuckets, "expected number of semaphores (a sizing hint)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "console", "console or json")
	fs.StringVar(&o.logFile, "log-file", "", "append the log to `FILE` instead of stderr; SIGHUP reopens it (after a rotation)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://`ADDR`/metrics, liveness at /healthz, readiness at /readyz and a status page at /ui (e.g. 127.0.0.1:9715; port 0 picks one); empty: off")
	fs.IntVar(&o.metricsMaxConns, "metrics-max-connections", stats.DefaultMaxConns, "open connections to the metrics server; more are closed at once (all connections share the open-file cap)")
	o.cluster.flags(fs)
	o.tls.peerFlags(fs)
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the whole run to `FILE` (for `go tool pprof`)")
	fs.BoolVar(&o.man, "man", false, "print the manual page tallyd(8) and exit")
	_ = fs.MarkHidden("man")
	return fs
}

// run is main without the exit, for tests: it returns the process exit status.
func run(args []string, stderr io.Writer) int {
	// From the start SIGHUP never kills the process: it reloads once the loop runs.
	if len(args) > 0 && args[0] == "check-log" {
		return runCheckLog(args[1:], os.Stdout, stderr, time.Now())
	}
	if len(args) > 0 && args[0] == "restore" {
		return runRestore(args[1:], os.Stdout, stderr)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	d := loop.Defaults()
	o := options{}
	fs := newFlags(&o, d)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `tallyd %s — counts and locks named resources for many clients over one in-memory store.

Usage: tallyd [flags]
       tallyd check-log [--fix] FILE   check a damaged log, and with --fix repair it
                                       (keeping the original aside; see check-log --help)
       tallyd restore FILE --data-dir DIR [--cluster ... --node-id ID]
                                       write a new data dir from a backup (see restore --help)

With no flags it serves the yrmcds counter protocol on 127.0.0.1:%d, PoolCounter on
127.0.0.1:%d and slock on 127.0.0.1:%d. Everything a yrmcds or PoolCounter connection has
acquired is released the moment it closes; slock locks live until unlocked or expired.

Flags:
%s
Config file keys (yrmcds.conf syntax; flags win; an unknown key is an error):
%s
Signals: SIGINT or SIGTERM closes every connection and exits 0. SIGHUP reopens the log file
and reloads the config file: the log settings and the limits change at once, the rest is
logged as needing a restart. Under systemd (Type=notify), readiness, reloads and the stop
are reported with sd_notify. A log damaged with valid records after the damage stops the
start with exit status 65, changing nothing: see tallyd check-log. The manual page is
tallyd(8).
`, version, defaultCounterPort, defaultPoolPort, defaultSlockPort, fs.FlagUsages(), keysUsage())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "tallyd: %v (see tallyd --help)\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tallyd: unexpected argument %q (see tallyd --help)\n", fs.Arg(0))
		return 2
	}
	if o.man {
		if err := writeMan(os.Stdout, fs); err != nil {
			fmt.Fprintf(stderr, "tallyd: %v\n", err)
			return 1
		}
		return 0
	}
	if o.showVersion {
		fmt.Fprintf(os.Stdout, "tallyd %s\n", version)
		return 0
	}
	if err := checkLog(o.logLevel, o.logFormat); err != nil {
		fmt.Fprintf(stderr, "tallyd: %v\n", err)
		return 2
	}
	out := &logOutput{stderr: stderr}
	defer out.close()
	setLogLevel(o.logLevel)
	_ = out.configure(o.logFormat, "") // the file, if any, once the config file is read
	log := zerolog.New(out).With().Timestamp().Logger()
	if o.configFile != "" {
		if err := applyConfigFile(&o, fs, log); err != nil {
			fmt.Fprintf(stderr, "tallyd: config file: %v\n", err)
			return 1
		}
	}
	cfg, err := o.loopConfig(fs, d)
	if err != nil {
		fmt.Fprintf(stderr, "tallyd: %v\n", o.inFile(err))
		return 1
	}
	if err := checkLog(o.logLevel, o.logFormat); err != nil { // as the config file set them
		fmt.Fprintf(stderr, "tallyd: config file: %v\n", o.inFile(err))
		return 1
	}
	if err := out.configure(o.logFormat, o.logFile); err != nil {
		fmt.Fprintf(stderr, "tallyd: %v\n", err)
		return 1
	}
	setLogLevel(o.logLevel)
	cfg.Log = log
	setMemoryLimit(cfg.MaxMemory)
	if cfg.DataDir != "" { // one owner per data directory, before anything in it is read
		release, err := lockDataDir(cfg.DataDir, true)
		if err != nil {
			fmt.Fprintf(stderr, "tallyd: cannot start: %v\n", err)
			return 1
		}
		defer release()
	}
	srv, err := loop.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tallyd: cannot start: %v\n", err)
		return 1
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "tallyd: --cpu-profile: %v\n", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	stopMetrics, err := startMetrics(o.metricsAddr, o.metricsMaxConns, srv, log)
	if err != nil {
		fmt.Fprintf(stderr, "tallyd: %v\n", err)
		return 1
	}
	defer stopMetrics()
	cur := &settings{args: args, d: d, o: &o, fs: fs}
	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	ready := srv.Ready()
	for {
		select {
		case <-ready:
			ready = nil
			if srv.Addr(0) != nil { // every listener is bound (else Run is returning why not)
				notify(log, "READY=1\nSTATUS=serving")
			}
		case err := <-done:
			log.Error().Err(err).Msg("tallyd stopped")
			return exitStatus(err)
		case s := <-sig:
			if s == syscall.SIGHUP {
				notify(log, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicUsec()))
				cur.reload(srv, out, log)
				notify(log, "READY=1\nSTATUS=serving")
				continue
			}
			notify(log, "STOPPING=1")
			log.Info().Str("signal", s.String()).Msg("shutting down: closing every connection")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Stop(ctx); err != nil {
				log.Error().Err(err).Msg("shutdown did not finish")
				return 1
			}
			if err := <-done; err != nil {
				log.Error().Err(err).Msg("tallyd stopped")
				return exitStatus(err)
			}
			log.Info().Msg("bye")
			return 0
		}
	}
}

// loopConfig checks the options and turns them into the loop's configuration.
func (o *options) loopConfig(fs *pflag.FlagSet, d loop.Config) (loop.Config, error) {
	ip := net.ParseIP(o.bind)
	if ip == nil && o.bind != "localhost" {
		return d, fmt.Errorf("invalid listen address %q (-l/--bind takes an IP address such as 127.0.0.1 or ::1)", o.bind)
	}
	counterOn := o.counterPort != 0
	if o.counterEnabledByFile != nil && !*o.counterEnabledByFile && !fs.Changed("counter-port") {
		counterOn = false
	}
	semaphorePort := o.semaphorePort
	if semaphorePort == 0 && o.semaphoreEnabled && !fs.Changed("semaphore-port") {
		semaphorePort = defaultSemaphorePort
	}
	for name, p := range map[string]int{"counter-port": o.counterPort, "semaphore-port": semaphorePort, "pool-port": o.poolPort, "slock-port": o.slockPort} {
		if p < 0 || p > 65535 {
			return d, fmt.Errorf("--%s %d is not a port number (0 to 65535)", name, p)
		}
	}
	cfg := d
	if counterOn {
		cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: loop.ProtoCounter,
			Addr: net.JoinHostPort(o.bind, strconv.Itoa(o.counterPort)), MaxConnections: o.counterMaxConns})
	}
	if semaphorePort != 0 {
		cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: loop.ProtoSemaphore,
			Addr: net.JoinHostPort(o.bind, strconv.Itoa(semaphorePort)), MaxConnections: o.semaphoreMaxConns})
	}
	if o.poolPort != 0 {
		cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: loop.ProtoPool,
			Addr: net.JoinHostPort(o.bind, strconv.Itoa(o.poolPort))})
	}
	if o.slockPort != 0 {
		cfg.Listeners = append(cfg.Listeners, loop.Listener{Proto: loop.ProtoSlock,
			Addr: net.JoinHostPort(o.bind, strconv.Itoa(o.slockPort))})
	}
	if err := o.tls.listeners(&cfg, o.bind); err != nil {
		return d, err
	}
	if len(cfg.Listeners) == 0 {
		return d, errors.New("every listener is turned off: nothing to serve")
	}
	for i, a := range cfg.Listeners {
		for _, b := range cfg.Listeners[:i] {
			if a.Addr == b.Addr {
				return d, fmt.Errorf("the %s and %s protocols both want %s", b.Proto, a.Proto, a.Addr)
			}
		}
	}
	switch {
	case o.maxConnections < 0 || o.counterMaxConns < 0 || o.semaphoreMaxConns < 0:
		return d, errors.New("connection limits cannot be negative")
	case o.maxBody < 16:
		return d, fmt.Errorf("--max-body %d is too small (a request needs at least 16 bytes)", o.maxBody)
	case o.maxObjects < 0:
		return d, errors.New("--max-objects cannot be negative")
	case o.maxOutput < 1024:
		return d, fmt.Errorf("--max-output %d is too small (minimum 1024)", o.maxOutput)
	case o.maxInput < int(o.maxBody)+12:
		return d, fmt.Errorf("--max-input %d must hold a whole request (at least --max-body + 12 = %d)", o.maxInput, int(o.maxBody)+12)
	case o.idleTimeout < 0:
		return d, fmt.Errorf("--idle-timeout %d cannot be negative", o.idleTimeout)
	case o.connSlice < 0:
		return d, fmt.Errorf("--conn-slice %s cannot be negative (0 = no limit)", o.connSlice)
	case o.multiMaxCommands < 0 || o.multiMaxWork < 0:
		return d, errors.New("--multi-max-commands and --multi-max-work cannot be negative (0 = unlimited)")
	case o.luaTimeLimit < 1 || o.luaMaxMemory < 1<<20 || o.luaScriptsMax < 1 || o.luaScriptsMaxBytes < 1<<10:
		return d, errors.New("--lua-time-limit must be at least 1 ms, --lua-max-memory 1 MiB, --lua-scripts-max 1 and --lua-scripts-max-bytes 1 KiB")
	case o.slowlogMaxLen < 0:
		return d, fmt.Errorf("--slowlog-max-len %d cannot be negative", o.slowlogMaxLen)
	case !loop.ValidNotify(o.notifyEvents):
		return d, fmt.Errorf("--notify-keyspace-events %q: a character is no event class (use 'Ag$lshzxeKEtmdnL')", o.notifyEvents)
	case o.maxSubscriptions < 1:
		return d, fmt.Errorf("--max-subscriptions %d must be at least 1", o.maxSubscriptions)
	case o.maxPatterns < 1 || o.maxClientPatterns < 1 || o.maxPatternLen < 1 || o.maxChannelLen < 1:
		return d, errors.New("--max-patterns, --max-client-patterns, --max-pattern-length and --max-channel-length must be at least 1")
	case o.metricsMaxConns < 1:
		return d, fmt.Errorf("--metrics-max-connections %d must be at least 1", o.metricsMaxConns)
	case o.backlog < 1:
		return d, fmt.Errorf("--backlog %d must be at least 1", o.backlog)
	case o.poolMaxLine < 16:
		return d, fmt.Errorf("--pool-max-line %d is too small (minimum 16)", o.poolMaxLine)
	case o.poolMaxEntries < 1:
		return d, fmt.Errorf("--pool-max-locks-per-conn %d must be at least 1", o.poolMaxEntries)
	case o.slockMaxData < 2:
		return d, fmt.Errorf("--slock-max-data %d is too small", o.slockMaxData)
	case o.slockWaitersPerKey < 0 || o.slockWaitersPerConn < 0:
		return d, errors.New("slock waiter limits cannot be negative")
	case o.slockMaxWills < 0 || o.slockMaxWillBytes < 0:
		return d, errors.New("slock WILL limits cannot be negative")
	case o.appendOnly && o.dataDir == "":
		return d, errors.New("--data-dir is empty: give a directory, or --appendonly=false")
	case o.lockPersistAfter < 0:
		return d, fmt.Errorf("--lock-persist-after %s cannot be negative", o.lockPersistAfter)
	case o.aofRewriteSize < 1024:
		return d, fmt.Errorf("--aof-rewrite-size %d is too small (minimum 1024)", o.aofRewriteSize)
	case o.statInterval < 10:
		return d, fmt.Errorf("--stat-interval %d is below the minimum of 10 seconds", o.statInterval)
	case o.semaphoreGCInterval < 1:
		return d, fmt.Errorf("--semaphore-gc-interval %d must be at least 1 second", o.semaphoreGCInterval)
	}
	cfg.MaxConnections = o.maxConnections
	cfg.MaxBody = o.maxBody
	cfg.MaxObjects = o.maxObjects
	cfg.MaxOutput = o.maxOutput
	cfg.MaxInput = o.maxInput
	cfg.ConnSlice = o.connSlice
	if o.connSlice == 0 {
		cfg.ConnSlice = -1 // no limit
	}
	cfg.MultiMaxCommands, cfg.MultiMaxWork = o.multiMaxCommands, o.multiMaxWork
	cfg.LuaTimeLimit, cfg.LuaMaxMemory = time.Duration(o.luaTimeLimit)*time.Millisecond, o.luaMaxMemory
	cfg.LuaScriptsMax, cfg.LuaScriptsMaxBytes = o.luaScriptsMax, o.luaScriptsMaxBytes
	cfg.LuaOnly = !o.luaNativeLocks
	cfg.NotifyKeyspaceEvents, cfg.MaxSubscriptions = o.notifyEvents, o.maxSubscriptions
	cfg.MaxPatterns, cfg.MaxClientPatterns = o.maxPatterns, o.maxClientPatterns
	cfg.MaxPatternLen, cfg.MaxChannelLen = o.maxPatternLen, o.maxChannelLen
	pl, err := loop.ParsePubsubLimit(o.pubsubLimit)
	if err != nil {
		return d, fmt.Errorf("--client-output-buffer-limit %w", err)
	}
	cfg.PubsubLimit = pl
	cfg.SlowlogSlowerThan, cfg.SlowlogMaxLen = o.slowlogSlowerThan, o.slowlogMaxLen
	mem, err := int64(0), error(nil)
	if o.maxMemory == defaultMaxMemory {
		mem = autoMemory()
	} else {
		mem, err = parseSize(o.maxMemory)
	}
	switch {
	case err != nil:
		return d, fmt.Errorf("--max-memory: %w", err)
	case mem != 0 && mem < minMaxMemory:
		return d, fmt.Errorf("--max-memory %d is too small (minimum %d, or 0 for none)", mem, minMaxMemory)
	}
	cfg.MaxMemory = mem
	cfg.SlockMaxWills = o.slockMaxWills
	cfg.SlockMaxWillBytes = o.slockMaxWillBytes
	cfg.Backlog = o.backlog
	cfg.IdleTimeout = time.Duration(o.idleTimeout) * time.Second
	cfg.PoolMaxLine = o.poolMaxLine
	cfg.PoolMaxEntries = o.poolMaxEntries
	cfg.SlockMaxData = o.slockMaxData
	cfg.SlockMaxWaitersPerKey = o.slockWaitersPerKey
	cfg.SlockMaxWaitersPerConn = o.slockWaitersPerConn
	policy, err := aof.ParsePolicy(o.appendFsync)
	if err != nil {
		return d, fmt.Errorf("--%w", err)
	}
	if o.appendOnly {
		cfg.DataDir = o.dataDir
	}
	cfg.AppendFsync = policy
	cfg.LockPersistAfter = o.lockPersistAfter
	cfg.AOFRewriteSize = o.aofRewriteSize
	cfg.Version = version
	cfg.StatInterval = int64(o.statInterval)
	cfg.SemaphoreGCInterval = time.Duration(o.semaphoreGCInterval) * time.Second
	cfg.CounterBuckets = o.counterBuckets
	cfg.SemaphoreBuckets = o.semaphoreBuckets
	if err := o.cluster.config(&cfg, o.appendOnly, o.bind); err != nil {
		return d, err
	}
	if err := o.tls.peer(&cfg); err != nil {
		return d, err
	}
	if err := o.security.config(&cfg); err != nil { // once every listener is made
		return d, err
	}
	return cfg, nil
}

// startMetrics serves srv's metrics over HTTP at addr ("" = off) from a goroutine of its own,
// its connections taking from srv's descriptor budget, and logs the address bound; the
// returned function stops it.
func startMetrics(addr string, maxConns int, srv *loop.Server, log zerolog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	h, err := stats.ListenHTTP(addr, srv.Metrics(), stats.HTTPConfig{MaxConns: maxConns, Budget: srv.Descriptors(),
		UI: stats.UIConfig{Access: srv.UIAccess(), Search: srv.SearchKey}})
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	go func() {
		if err := h.Serve(); err != nil {
			log.Error().Err(err).Msg("metrics server stopped")
		}
	}()
	log.Info().Str("metrics_addr", h.Addr().String()).Msg("serving /metrics, /healthz, /readyz and the status page /ui")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	}, nil
}

// exitConfig is the exit status of a member that must not run as it is (sysexits'
// EX_CONFIG): it lost its data, or has none and was not told to bootstrap. The unit does not
// restart it (RestartPreventExitStatus), so that it never crash-loops.
const exitConfig = 78

// exitStatus is the exit status for Run's error.
func exitStatus(err error) int {
	var ce *aof.CorruptError
	switch {
	case errors.Is(err, loop.ErrMemberState):
		return exitConfig
	case errors.As(err, &ce):
		return exitDataErr
	}
	return 1
}
