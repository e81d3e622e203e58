// Package loop runs tallyd's one gnet event loop: it accepts connections, feeds their bytes to
// the codec of the listener they arrived on, applies requests to the store, and writes replies.
//
// One request takes one path. OnTraffic peeks the connection's input and asks the
// connection's handler (one per protocol: conn.go) to parse one request and execute it, until
// no whole request is left; the views parse returns are valid until the loop discards what was
// parsed, once, at the end. A handler calls the store with the time passed in, and appends its
// reply to the connection's output buffer (Server.out, Server.put); wake-ups the store returns
// for other connections (a PoolCounter grant, a slock lock handed over, a timeout) are appended
// to theirs the same way. Nothing writes to a socket but the flush (output.go) that ends every
// event — OnTraffic, OnClose, a tick, the log writer's progress — and writes each pending
// connection once, up to what the append-only log has acknowledged (persist.go). Closes the
// loop decides on wait until the flush is over, so no handler runs inside another.
//
// Timed work (waits that time out, expiries, garbage collection, log rewrites) runs on the
// loop from ticks: OnTick, on gnet's ticker goroutine, only hands it over with
// EventLoop.Execute.
package loop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"

	"github.com/tallyd/tallyd/aof"
	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/pool"
	"github.com/tallyd/tallyd/proto/rediscmd"
	"github.com/tallyd/tallyd/proto/slock"
	"github.com/tallyd/tallyd/store"
)

// Proto names the protocol a listener speaks.
type Proto uint8

// The protocols a listener can speak.
const (
	ProtoCounter   Proto = iota // yrmcds counter extension
	ProtoSemaphore              // yrmcds semaphore variant
	ProtoPool                   // PoolCounter line protocol
	ProtoSlock                  // slock: binary frames and Redis text on one port
	numProtos
)

var protoNames = [numProtos]string{"counter", "semaphore", "pool", "slock"}

func (p Proto) String() string {
	if p < numProtos {
		return protoNames[p]
	}
	if p == ProtoPeer {
		return "peer"
	}
	return "proto(" + strconv.Itoa(int(p)) + ")"
}

// Listener is one address to listen on and the protocol spoken there.
type Listener struct {
	Proto Proto
	Addr  string // host:port; port 0 picks an ephemeral port (see Server.Addr)
	// MaxConnections caps this listener's connections (0 = unlimited).
	MaxConnections int
	// TLS: a TLS bridge serves the address, not gnet (tls.go), with Config.TLS's client
	// configuration (the peer configuration on the peer listener).
	TLS bool
	// Allow lists the networks this listener accepts connections from (nil: any, but see
	// Config.ProtectedMode); admit.go.
	Allow []netip.Prefix
}

// Config is everything the loop needs; main fills it from flags and the config file.
type Config struct {
	Listeners []Listener

	MaxConnections int    // all listeners together; 0 = unlimited (the open-file cap still applies)
	MaxBody        uint32 // largest yrmcds BodyLength accepted; larger closes the connection
	MaxObjects     int    // counters (and, separately, semaphores); 0 = unlimited
	MaxOutput      int    // unsent reply bytes per connection before it is closed
	MaxInput       int    // unparsed request bytes per connection before it is closed
	// ConnSlice is how long one connection is served in a turn of the loop before the others
	// get theirs (fair.go); 0: DefaultConnSlice, negative: no limit.
	ConnSlice time.Duration
	// SlowlogSlowerThan is the run time in microseconds from which a Redis-text command is
	// kept in SLOWLOG (negative: none, 0: all); SlowlogMaxLen how many are kept (slowlog.go).
	SlowlogSlowerThan int64
	SlowlogMaxLen     int
	// MultiMaxCommands and MultiMaxWork bound a MULTI queue: its commands, and the loop time
	// its EXEC is estimated to take (txwork.go); 0: no bound.
	MultiMaxCommands int
	MultiMaxWork     time.Duration
	// RedisKeyspace runs the Redis key/value and hash commands on store.Keyspace (issue 32,
	// stage 2: ksredis.go) instead of as lock commands on store.Locks, logged as keyspace
	// records (aof kind 6). Not yet a flag: not in a cluster (raft proposals), and an old
	// log's values stay Locks'.
	RedisKeyspace bool

	// NotifyKeyspaceEvents is Redis's notify-keyspace-events (notify.go); "" publishes none.
	NotifyKeyspaceEvents string
	// PubsubLimit is client-output-buffer-limit's pubsub class; MaxSubscriptions bounds the
	// channels and patterns of one connection (pubsub.go).
	PubsubLimit      PubsubLimit
	MaxSubscriptions int
	// MaxPatterns bounds the distinct patterns of all connections, MaxClientPatterns those
	// of one, MaxPatternLen a pattern's bytes and MaxChannelLen those of a channel a client
	// subscribes or publishes to: what a PUBLISH costs (pubsub.go).
	MaxPatterns, MaxClientPatterns int
	MaxPatternLen, MaxChannelLen   int
	Backlog                        int // listen backlog of each listener
	// IdleTimeout closes a connection that has sent no whole request for this long and
	// holds and awaits nothing (0 = never; see idle.go).
	IdleTimeout time.Duration
	// MaxMemory is the memory budget in bytes: buffered input and output, pending WILLs and
	// stored state (memory.go); 0 = none.
	MaxMemory int64

	StatInterval        int64 // counter max-consumption interval, seconds (>= 10)
	SemaphoreGCInterval time.Duration
	CounterBuckets      int // sizing hints for the tables
	SemaphoreBuckets    int

	PoolMaxLine    int // longest PoolCounter line, without its newline
	PoolMaxEntries int // PoolCounter locks held or awaited per connection

	SlockMaxData           uint32 // largest slock data record / CALL body
	SlockMaxWaitersPerKey  int    // queued slock requests per key (0 = unlimited)
	SlockMaxWaitersPerConn int    // queued slock requests per connection (0 = unlimited)
	SlockMaxWills          int    // pending WILL commands per connection (0 = unlimited)
	SlockMaxWillBytes      int    // their bytes per connection, data included (0 = unlimited)

	// Persistence of slock's values and long-held locks (see persist.go).
	DataDir          string        // where the append-only log lives; "" keeps nothing
	AppendFsync      aof.Policy    // when the log is fsynced
	LockPersistAfter time.Duration // a lock held this long is logged (at once if its key has a value)
	AOFRewriteSize   int64         // the log is compacted past this size once it has doubled since the last time

	// Scripts (script.go): how long one may run, what it may allocate, and the cache of
	// scripts by SHA1 (EVAL-only ones kept, bytes of all); 0: script.DefaultLimits'.
	LuaTimeLimit       time.Duration
	LuaMaxMemory       int64
	LuaScriptsMax      int
	LuaScriptsMaxBytes int64
	LuaOnly            bool // the lock libraries' scripts run on Lua too (--lua-native-locks=false)

	Tick time.Duration // how often timed work runs on the loop
	// MetricsEvery is how often the loop publishes a metrics snapshot unasked (0: DefaultPublishEvery).
	MetricsEvery time.Duration

	// Cluster is cluster mode's configuration; nil runs a single node (cluster.go).
	Cluster *ClusterConfig
	// TLS is the TLS listeners' and peer links' (tls.go).
	TLS TLSConfig

	// RequirePass is the default user's password ("": none); ACLFile is a Redis ACL file of
	// users (auth.go). Not both.
	RequirePass string
	ACLFile     string
	// ProtectedMode limits listeners bound to a non-loopback address, without an allow-list
	// (and on the slock port without a password), to loopback clients (admit.go).
	ProtectedMode bool

	Version string // reported by INFO

	Log zerolog.Logger
	// Now returns the current time; nil means time.Now. Tests may replace it.
	Now func() time.Time
}

// Defaults returns a Config with every limit at its default and no listeners.
func Defaults() Config {
	return Config{
		MaxBody:                1 << 20,
		MaxObjects:             10_000_000,
		MaxOutput:              4 << 20,
		MaxInput:               4 << 20,
		Backlog:                128,
		StatInterval:           86400,
		SemaphoreGCInterval:    10 * time.Second,
		CounterBuckets:         1_000_000,
		SemaphoreBuckets:       1_000_000,
		PoolMaxLine:            1024,
		PoolMaxEntries:         4,
		SlockMaxData:           1 << 20,
		SlockMaxWaitersPerKey:  100_000,
		SlockMaxWaitersPerConn: 100_000,
		SlockMaxWills:          1024,
		SlockMaxWillBytes:      4 << 20,
		AppendFsync:            aof.EverySec,
		LockPersistAfter:       time.Second,
		AOFRewriteSize:         64 << 20,
		ConnSlice:              DefaultConnSlice,
		SlowlogSlowerThan:      DefaultSlowlogSlowerThan,
		SlowlogMaxLen:          DefaultSlowlogMaxLen,
		MultiMaxCommands:       DefaultMultiMaxCommands,
		MultiMaxWork:           DefaultMultiMaxWork,
		PubsubLimit:            DefaultPubsubLimit,
		MaxSubscriptions:       DefaultMaxSubscriptions,
		MaxPatterns:            DefaultMaxPatterns,
		MaxClientPatterns:      DefaultMaxClientPatterns,
		MaxPatternLen:          DefaultMaxPatternLen,
		MaxChannelLen:          DefaultMaxChannelLen,
		Tick:                   5 * time.Millisecond,
		ProtectedMode:          true,
		Version:                "dev",
		Log:                    zerolog.Nop(),
	}
}

// Server is the event loop and everything it owns. Create it with New, then call Run.
type Server struct {
	gnet.BuiltinEventEngine

	cfg Config
	log zerolog.Logger
	now func() time.Time

	// Owned by the loop goroutine (and by Run before the engine starts).
	st   storeState
	ct   connState
	auth authState // the users of the Redis-text side (auth.go)
	logs rateLogs

	h  handlers   // the protocols' (conn.go)
	sl slockState // the slock state their connections share
	ks ksState    // the Redis path on store.Keyspace (ksredis.go)
	ps pubsub     // pub/sub and keyspace notifications (pubsub.go)

	outQueue           // the one output path (output.go)
	fair     fairState // each connection's slice of a turn, the pump, the turn figures (fair.go)
	slow     slowlog   // SLOWLOG (slowlog.go)

	scr scriptState // EVAL and SCRIPT (script.go)

	persist persistState
	backing *conn         // the connection a SNAPSHOT is being sent to (backup.go)
	bk      backupState   // its file (backup.go)
	replies replyGate     // holds replies until durable: logGate, raftGate or openGate (output.go)
	cl      *clusterState // nil unless in cluster mode (cluster.go)
	idle    idleState
	tb      tlsState  // the TLS bridges (tls.go)
	mem     memState  // the memory budget's totals (memory.go)
	m       metrics   // counted for /metrics (metrics.go)
	info    infoState // figures only INFO shows (info.go)

	run runState // shared with other goroutines
}

// storeState is the store, its four families and what text commands name keys and locks by.
type storeState struct {
	store      *store.Store // every family on one clock; the four below are its
	counters   *store.Counters
	semaphores *store.Semaphores
	pools      *store.Pools
	locks      *store.Locks
	ids        *store.IDs     // LockIds and RequestIds of text commands (unguessable)
	keys       *rediscmd.Keys // text key names to LockKeys (keyid.go)
	due        store.Due      // what the tick's Advance found due
}

// connState is the live connections, their listeners and the descriptors they take.
type connState struct {
	conns     map[store.Owner]*conn // live connections, by owner id
	byPort    map[int]*listenerState
	live      int
	nextOwner store.Owner
	stats     [numProtos]listenerStats
	fdCap     int
	fds       Descriptors // the descriptor budget, shared with the metrics server
	early     []byte      // serveEarly's scratch (order.go)
	hups      hupWatch    // connections whose peer has closed, seen before gnet reports it (order.go)
	peeks     uint64      // serve's peeks at a connection's input (conn.need; read by tests)
}

// rateLogs keeps the loop's repeated warnings to one a second each.
type rateLogs struct {
	reject, admit, input, oom rateLog
}

// handlers is one handler per protocol (conn.go).
type handlers struct {
	yrmcds    [ProtoSemaphore + 1]yrmcdsHandler
	pool      poolHandler
	sniff     sniffHandler
	slockBin  binaryHandler
	slockText textHandler
	peer      peerHandler
}

// runState is what the loop shares with other goroutines: the engine, readiness, the
// listeners' addresses and the requests to stop or reload.
type runState struct {
	engine    gnet.Engine
	el        atomic.Value // gnet.EventLoop, published by the first OnOpen
	ready     chan struct{}
	readyOnce sync.Once
	stopping  atomic.Bool
	reload    atomic.Pointer[pendingReload] // a Reload the loop has yet to apply (reload.go)
	nextDue   atomic.Int64                  // Unix ns of the next wait or expiry, published by the loop for OnTick
	addrMu    sync.Mutex
	addrs     []net.Addr // actual address of each listener, in Config order
	bootErr   error

	// dialHook, when set, dials the peer links instead of a goroutine of dial: a test that
	// plays gnet connects them itself (then OnOpen, or dialFailed on the loop). Nil in
	// production.
	dialHook func(d *peerDial, addr string)
}

// markReady closes ready, once.
func (r *runState) markReady() { r.readyOnce.Do(func() { close(r.ready) }) }

// setAddrs publishes the listeners' bound addresses.
func (r *runState) setAddrs(addrs []net.Addr) {
	r.addrMu.Lock()
	r.addrs = addrs
	r.addrMu.Unlock()
}

// addr returns the i-th listener's bound address, nil if there is none (yet).
func (r *runState) addr(i int) net.Addr {
	r.addrMu.Lock()
	defer r.addrMu.Unlock()
	if i < 0 || i >= len(r.addrs) {
		return nil
	}
	return r.addrs[i]
}

type listenerState struct {
	Listener
	live     int
	loopback bool // bound to a loopback address: protected mode has nothing to protect
}

// New checks cfg and builds a server; nothing listens until Run.
func New(cfg Config) (*Server, error) {
	if len(cfg.Listeners) == 0 {
		return nil, errors.New("no listener is enabled")
	}
	if cfg.StatInterval < 10 {
		return nil, fmt.Errorf("stat interval %d s is below the minimum of 10 s", cfg.StatInterval)
	}
	if cfg.MaxBody < counter.HeaderLen {
		return nil, fmt.Errorf("max body %d is too small", cfg.MaxBody)
	}
	if cfg.MaxOutput <= 0 || cfg.MaxInput <= 0 {
		return nil, errors.New("max output and max input must be positive")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.ConnSlice == 0 {
		cfg.ConnSlice = DefaultConnSlice
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 511
	}
	if cfg.SemaphoreGCInterval <= 0 {
		cfg.SemaphoreGCInterval = 10 * time.Second
	}
	if err := checkTLS(&cfg); err != nil {
		return nil, err
	}
	notify, ok := parseNotify(cfg.NotifyKeyspaceEvents)
	if !ok {
		return nil, fmt.Errorf("notify-keyspace-events %q: a character is no event class (use 'Ag$lshzxeKEtmdnL')", cfg.NotifyKeyspaceEvents)
	}
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = DefaultMaxSubscriptions
	}
	for _, b := range []struct {
		v   *int
		def int
	}{{&cfg.MaxPatterns, DefaultMaxPatterns}, {&cfg.MaxClientPatterns, DefaultMaxClientPatterns},
		{&cfg.MaxPatternLen, DefaultMaxPatternLen}, {&cfg.MaxChannelLen, DefaultMaxChannelLen}} {
		if *b.v <= 0 {
			*b.v = b.def
		}
	}
	s := &Server{
		cfg:     cfg,
		replies: openGate{},
		fair:    fairState{slice: int64(cfg.ConnSlice)},
		log:     cfg.Log,
		now:     cfg.Now,
		ct:      connState{conns: make(map[store.Owner]*conn), byPort: make(map[int]*listenerState)},
		run:     runState{ready: make(chan struct{})},
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.slow.cfg, s.slow.now = &s.cfg, s.now                      // (slowlog.go)
	s.cfg.Listeners = append([]Listener(nil), cfg.Listeners...) // preflight fills in ports
	now := s.now()
	s.st.store = store.New(store.Config{
		Counters: store.CountersConfig{
			Interval: cfg.StatInterval, MaxObjects: cfg.MaxObjects, SizeHint: sizeHint(cfg.CounterBuckets),
		},
		Semaphores: store.SemaphoresConfig{MaxObjects: cfg.MaxObjects, SizeHint: sizeHint(cfg.SemaphoreBuckets)},
		Pools:      store.PoolsConfig{MaxEntries: cfg.PoolMaxEntries, MaxKeys: cfg.MaxObjects},
		Locks: store.LocksConfig{MaxWaitersPerKey: cfg.SlockMaxWaitersPerKey,
			MaxWaitersPerOwner: cfg.SlockMaxWaitersPerConn, MaxKeys: cfg.MaxObjects, IDKey: randomKey(),
			MaxValue: int(cfg.SlockMaxData), Persist: cfg.DataDir != "", PersistAfter: int64(cfg.LockPersistAfter)},
		Keyspace: store.KeyspaceConfig{Events: cfg.RedisKeyspace, Log: cfg.RedisKeyspace && cfg.DataDir != "",
			MaxKeys: cfg.MaxObjects},
		SemaphoreGCInterval: int64(cfg.SemaphoreGCInterval),
		Start:               now.UnixNano(),
	})
	if cfg.RedisKeyspace && cfg.Cluster != nil {
		return nil, errors.New("the Redis path on the keyspace (RedisKeyspace) does not yet run in a cluster")
	}
	users, err := LoadUsers(cfg.RequirePass, cfg.ACLFile)
	if err != nil {
		return nil, err
	}
	s.auth.file = cfg.ACLFile
	s.setUsers(users)
	if cfg.ACLFile != "" && !users.DefaultFromFile() {
		s.log.Warn().Str("aclfile", cfg.ACLFile).Msg("the ACL file does not define the user default: " +
			"connections that do not AUTH run as default, with every permission and no password, as in Redis " +
			"(add `user default off` to make every client log in)")
	}
	s.st.ids = store.NewIDs(randomKey())
	s.st.keys = newKeys() // openLog loads the data directory's
	st := s.st.store
	s.st.counters, s.st.semaphores, s.st.pools, s.st.locks = st.Counters, st.Semaphores, st.Pools, st.Locks
	s.h.pool = poolHandler{s: s, dec: pool.Decoder{MaxLine: cfg.PoolMaxLine}, wakes: make([]store.Wake, 0, 64)}
	s.h.sniff = sniffHandler{s}
	s.h.peer = peerHandler{s: s}
	s.h.slockBin = binaryHandler{s: s, dec: slock.Decoder{MaxData: cfg.SlockMaxData, MaxCall: cfg.SlockMaxData}}
	s.h.slockText = textHandler{s: s, args: make([][]byte, 0, 32)}
	s.sl = slockState{clients: make(map[[16]byte]*conn), closed: make(map[store.Owner][16]byte)}
	s.ps.init(s, notify)
	s.h.yrmcds[ProtoCounter] = yrmcdsHandler{s: s, dec: counter.Decoder{Dialect: counter.Counter, MaxBody: cfg.MaxBody}}
	s.h.yrmcds[ProtoSemaphore] = yrmcdsHandler{s: s, dec: counter.Decoder{Dialect: counter.Semaphore, MaxBody: cfg.MaxBody}}
	s.info.started = now.UnixNano()
	s.run.nextDue.Store(math.MaxInt64)
	s.gcCounters(now) // the reference collects at start
	s.initMetrics()
	fdCap, backlog, limit, err := openFileCap(len(cfg.Listeners), cfg.Backlog)
	if err != nil {
		return nil, err
	}
	if backlog < cfg.Backlog {
		s.log.Warn().Int("backlog", cfg.Backlog).Int("reduced_to", backlog).Int("open_file_cap", fdCap).
			Msg("listen backlog reduced to fit the open-file limit")
	}
	s.ct.fdCap, s.cfg.Backlog = fdCap, backlog
	s.ct.fds.cap.Store(int64(fdCap))
	s.ct.fds.limit = limit
	return s, nil
}

// sizeHint turns a yrmcds "buckets" setting into an initial table size: it is honoured up to
// 64k entries so that an idle server stays small; tables grow as needed beyond that.
func sizeHint(buckets int) int {
	return min(max(buckets, 0), 1<<16)
}

// Run listens and serves until Stop is called (it then returns nil) or the engine fails (it
// returns why). It may be called once.
func (s *Server) Run() error {
	defer s.tb.stopTLS() // once the engine is down, or if it never started
	if err := s.preflight(); err != nil {
		s.run.markReady()
		return err
	}
	open, closeFn := s.openLog, s.closeLog
	if s.cfg.Cluster != nil {
		open, closeFn = s.openCluster, s.closeCluster // the raft log replaces the append-only log
	}
	if err := open(); err != nil {
		s.run.markReady()
		return err
	}
	defer closeFn()
	s.floorTokens()
	s.newBridges()
	defer s.ct.hups.close() // order.go
	var addrs []string
	for _, l := range s.cfg.Listeners {
		if !l.TLS { // a TLS bridge serves it (tls.go)
			addrs = append(addrs, "tcp://"+l.Addr)
		}
	}
	if len(addrs) == 0 { // TLS only: the loop needs a listener of its own (tls.go)
		a, err := s.tb.innerListener()
		if err != nil {
			s.run.markReady()
			return err
		}
		addrs = append(addrs, a)
	}
	err := gnet.Rotate(s, addrs,
		gnet.WithNumEventLoop(1),
		// The loop accepts by itself, so accepting can never run ahead of the loop's
		// refusals and exhaust the descriptors (see openFileCap). SO_REUSEPORT comes with
		// it; preflight has already bound each address without it, so a second server on
		// the same port fails at start instead of sharing it.
		gnet.WithReusePort(true),
		gnet.WithReuseAddr(true),
		gnet.WithTicker(true),
		// Edge-triggered, so that connections are reported in the order their bytes
		// arrived, not ahead of others because they were just served (see order.go);
		// chunk 2 keeps one read per event.
		gnet.WithEdgeTriggeredIOChunk(2),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTCPKeepAlive(5*time.Minute),
		gnet.WithLogger(gnetLogger{s.log}),
	)
	s.run.markReady() // unblock waiters if the engine never booted
	switch {
	case err != nil:
		return fmt.Errorf("event loop: %w", err)
	case s.run.bootErr != nil:
		return s.run.bootErr
	case s.persist.fatal.Load() != nil:
		return *s.persist.fatal.Load()
	case !s.run.stopping.Load():
		return errors.New("event loop stopped unexpectedly (see the log lines before this one)")
	}
	return nil
}

// Descriptors is the budget of descriptors the loop's connections take from; the metrics
// server's connections must take from it too (see stats.HTTPConfig).
func (s *Server) Descriptors() *Descriptors { return &s.ct.fds }

// Ready is closed once every listener is bound (or Run has failed).
func (s *Server) Ready() <-chan struct{} { return s.run.ready }

// Addr returns the bound address of the i-th configured listener, nil before Ready.
func (s *Server) Addr(i int) net.Addr {
	return s.run.addr(i)
}

// Stop closes every connection, releasing what each holds, and makes Run return nil. It is
// safe from any goroutine except the loop's own handlers, and returns when the engine is down.
func (s *Server) Stop(ctx context.Context) error {
	if s.run.stopping.Swap(true) {
		return nil
	}
	s.m.pub.Close("tallyd is shutting down")
	<-s.run.ready
	if err := s.run.engine.Validate(); err != nil {
		return nil // never started or already down
	}
	return s.run.engine.Stop(ctx)
}

// preflight binds and releases each address first, because gnet reports a busy port as an
// unrelated setsockopt error. A listener asking for port 0 gets the port the kernel picked
// here, so that every listener has an address of its own (gnet tells listeners apart by it).
func (s *Server) preflight() error {
	// Every address stays bound until all are: two listeners asking for port 0 must not be
	// handed the same port, freed by the first just before the second asks.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	s.tb.held = map[int]net.Listener{}
	for i, l := range s.cfg.Listeners {
		ln, err := net.Listen("tcp", l.Addr)
		if err != nil {
			return fmt.Errorf("%s listener: %w", l.Proto, err)
		}
		if _, port, _ := net.SplitHostPort(l.Addr); port == "0" {
			host, _, _ := net.SplitHostPort(l.Addr)
			s.cfg.Listeners[i].Addr = net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		}
		if l.TLS {
			s.tb.held[i] = ln // kept: the TLS bridge serves it (tls.go)
			continue
		}
		held = append(held, ln)
	}
	return nil
}
