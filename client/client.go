// Package client is a Go client for tallyd's yrmcds counters and semaphores, PoolCounter locks, slock locks with fencing tokens and durable values, spread over several servers.
//
// A [Client] is safe for concurrent use. It maps every key to a server by
// rendezvous hashing over the configured servers, the way MediaWiki spreads
// PoolCounter keys (ArrayUtils::consistentHashSort: the servers sorted by
// md5(name + "\x00" + key)), and uses the first server in that order that
// is up.
//
// # Connections
//
// What a connection holds is released by the server when it closes, so a
// [Hold] is bound to the connection it was acquired on and is released on
// that connection only:
//
//   - yrmcds counters and semaphores: per server, one connection carries
//     every request of the Client, pipelined: Acquire, Release, Get, Stats.
//     All holds on that server share it; a Release names what its own
//     Acquire took, and a Hold can be released once.
//   - PoolCounter: a lock ties up its connection (the server queues a
//     waiting ACQ4ME on it and RELEASE pops the connection's newest lock),
//     so each lock has a connection of its own while it is held or waited
//     for. Connections come from a small idle pool and go back to it.
//   - durable values (Redis commands on the slock port): one pipelined
//     connection per server.
//   - slock locks ([Locks]): not bound to a connection (a lock lasts until
//     it is unlocked or its ttl runs out, and its LockId names it from any
//     connection). Their commands share the durable values' connection,
//     but for a Lock that waits: slock's text LOCK blocks the connection it
//     waits on, so a waiting Lock has a connection of its own, from the
//     same kind of idle pool as PoolCounter's. A Lock's lease is counted
//     on the client's clock from when its request was sent, and its Lost
//     channel closes when the lease can no longer be known held.
//
// # Contexts
//
// A context's deadline or cancellation ends the wait for a reply. On a
// pipelined connection the reply is then discarded when it arrives (an
// Acquire that succeeded meanwhile is released at once); a PoolCounter wait
// cannot be abandoned on the wire, so its connection is closed, which
// removes the queue entry; a slock wait outlives its connection, so the
// connection is closed and `UNLOCK name LOCK_ID id FLAG 2` cancels the
// wait (or releases a grant that came meanwhile). Release always releases: if ctx ends before the
// server confirms, Release returns ctx's error but the release has been
// sent, or the connection closed.
//
// # Failover
//
// A server is marked down when a dial, write or read on it fails, or a reply
// does not come within Options.IOTimeout: a request to a server that does
// not answer fails over after IOTimeout (beyond any wait it asks for).
// Requests skip servers that are down and go to the next one in the key's
// order. A server is marked up only by an answer: one background goroutine
// per Client probes the servers that are down every Options.HealthInterval
// with the protocol's no-op (a yrmcds Noop, PoolCounter "STATS UPTIME",
// Redis PING on the slock port), which must be answered within
// Options.HealthTimeout, and a reply to a request marks its server up too.
// A server that accepts connections but does not answer (stopped, hung)
// stays down. Only then do its keys move back. If every server in the
// order is down, each is tried anyway. A PoolCounter acquire that waits on
// purpose (Limits.Timeout) probes its server from IOTimeout on, every
// HealthInterval, and fails over when a probe gets no answer, so a hung
// server does not hold it for its whole timeout.
//
// A request that has not yet succeeded moves on: an acquire, a Get or an
// Incr whose connection breaks is sent to the next server in the key's
// order. What is held does not move. When a server dies (or a Hold's
// connection breaks), everything held there is released on the server's
// side, by the server closing the connection or by the server being gone.
// The holder is not told until it calls Release, which returns an error
// wrapping [ErrHoldLost] (Do returns it too); meanwhile another client may
// have taken the resource on the next server. Treat ErrHoldLost as "the
// work may have overlapped" and acquire again, which goes to the next
// server.
//
// Each server enforces its own limits: a server marked down that is in
// fact alive (say, one connection broke) keeps its holders while new
// acquires of its keys go to the next server, until it is marked up again.
// Durable values live on one server each: a key that moves reads and
// increments the next server's value, and an Incr whose connection broke
// may have been applied on the old server as well.
package client

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/pool"
	"github.com/tallyd/tallyd/proto/resp"
)

// Server is one tallyd: its name in the hash and the address of each
// listener. An empty address means the server does not serve that
// protocol.
type Server struct {
	// Name orders the servers for each key. Give the servers the same
	// names as MediaWiki's $wgPoolCountClientConf['servers'] entries to
	// send each key where MediaWiki sends it.
	Name string

	Counter   string // yrmcds counters, host:port
	Semaphore string // yrmcds semaphores
	Pool      string // PoolCounter
	Slock     string // slock port, for durable values
}

// Host returns the Server at host with tallyd's standard ports: counters
// 11215, semaphores 11216, PoolCounter 7531, slock 5658. Its Name is host.
func Host(host string) Server {
	return Server{
		Name:      host,
		Counter:   net.JoinHostPort(host, "11215"),
		Semaphore: net.JoinHostPort(host, "11216"),
		Pool:      net.JoinHostPort(host, "7531"),
		Slock:     net.JoinHostPort(host, "5658"),
	}
}

// Options tune a Client. The zero value of each field means its default.
type Options struct {
	DialTimeout    time.Duration // longest dial (default 1 s)
	IOTimeout      time.Duration // longest wait for a reply beyond any wait the request asks for, after which the request fails over (default 5 s)
	HealthInterval time.Duration // how often servers that are down are probed (default 1 s)
	HealthTimeout  time.Duration // longest wait for a probe's answer, its dial included (default 1 s, at most IOTimeout)
	MaxIdle        int           // idle PoolCounter connections, and slock connections for Lock's waits, kept per server (default 4)

	// OnHealth, if set, is called when a server's listener is marked down
	// (err says why) or up again (err is nil). It must not block.
	OnHealth func(addr string, up bool, err error)
}

// Client talks to one or more tallyd servers. Create it with New and
// close it with Close.
type Client struct {
	opts    Options
	servers []Server
	eps     [numProtos][]*endpoint // by protocol, in server order; nil where a server lacks it
	all     []*endpoint

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup // the health checker, connection readers, background releases
}

// New returns a Client for servers. It dials nothing yet. Names must be
// unique and every server must have at least one address.
func New(servers []Server, opts *Options) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("client: no servers given")
	}
	c := &Client{servers: slices.Clone(servers)}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.DialTimeout <= 0 {
		c.opts.DialTimeout = time.Second
	}
	if c.opts.IOTimeout <= 0 {
		c.opts.IOTimeout = 5 * time.Second
	}
	if c.opts.HealthInterval <= 0 {
		c.opts.HealthInterval = time.Second
	}
	if c.opts.HealthTimeout <= 0 {
		c.opts.HealthTimeout = time.Second
	}
	c.opts.HealthTimeout = min(c.opts.HealthTimeout, c.opts.IOTimeout)
	if c.opts.MaxIdle <= 0 {
		c.opts.MaxIdle = 4
	}
	names := make(map[string]bool, len(servers))
	for i, s := range c.servers {
		if names[s.Name] {
			return nil, fmt.Errorf("client: server %d: name %q is given twice", i, s.Name)
		}
		names[s.Name] = true
		addrs := [numProtos]string{s.Counter, s.Semaphore, s.Pool, s.Slock}
		if addrs == [numProtos]string{} {
			return nil, fmt.Errorf("client: server %d (%q) has no address", i, s.Name)
		}
		for p, addr := range addrs {
			var e *endpoint
			if addr != "" {
				e = &endpoint{c: c, addr: addr, proto: proto(p)}
				c.all = append(c.all, e)
			}
			c.eps[p] = append(c.eps[p], e)
		}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.checkHealth()
	return c, nil
}

// Close closes every connection and stops the health checker; it returns
// once the Client's goroutines have ended. Holds not yet released are
// released by their servers as the connections close.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	for _, e := range c.all {
		e.close()
	}
	c.wg.Wait()
	return nil
}

// Counters returns the yrmcds counters of the Client's servers.
func (c *Client) Counters() *Counters { return &Counters{c: c, p: protoCounter} }

// Semaphores returns the yrmcds semaphores of the Client's servers.
func (c *Client) Semaphores() *Counters { return &Counters{c: c, p: protoSemaphore} }

// Pool returns the PoolCounter locks of the Client's servers.
func (c *Client) Pool() *Pool { return &Pool{c: c} }

// Values returns the durable values of the Client's servers.
func (c *Client) Values() *Values { return &Values{c: c} }

// Order returns the names of the servers in key's rendezvous order: the
// first is where key lives while it is up.
func (c *Client) Order(key string) []string {
	idx := c.order(key)
	names := make([]string, len(idx))
	for i, j := range idx {
		names[i] = c.servers[j].Name
	}
	return names
}

// proto is a listener's protocol.
type proto uint8

const (
	protoCounter proto = iota
	protoSemaphore
	protoPool
	protoSlock
	numProtos
)

var protoNames = [numProtos]string{"counter", "semaphore", "pool", "slock"}

func (p proto) String() string { return protoNames[p] }

// order returns the indexes of the servers sorted by md5(name "\x00" key),
// as MediaWiki's ArrayUtils::consistentHashSort sorts them.
func (c *Client) order(key string) []int {
	idx := make([]int, len(c.servers))
	if len(idx) == 1 {
		return idx
	}
	sums := make([][md5.Size]byte, len(c.servers))
	buf := make([]byte, 0, 64+len(key))
	for i, s := range c.servers {
		idx[i] = i
		buf = append(append(append(buf[:0], s.Name...), 0), key...)
		sums[i] = md5.Sum(buf)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(sums[a][:], sums[b][:]) })
	return idx
}

// each runs fn on key's servers for protocol p in order, moving to the
// next server while fn fails with a *ConnError: first over the servers that
// are up, then over those that were down.
func (c *Client) each(ctx context.Context, key string, p proto, fn func(*endpoint) error) error {
	return c.eachFrom(ctx, key, p, nil, fn)
}

// eachFrom is each with first, if not nil, put ahead of key's order (the
// server a lock was granted on).
func (c *Client) eachFrom(ctx context.Context, key string, p proto, first *endpoint, fn func(*endpoint) error) error {
	var last error
	idx := c.order(key)
	if first != nil {
		if at := slices.IndexFunc(idx, func(j int) bool { return c.eps[p][j] == first }); at > 0 {
			j := idx[at]
			copy(idx[1:at+1], idx[:at])
			idx[0] = j
		}
	}
	tried := make([]bool, len(idx))
	served := false
	for pass := 0; pass < 2; pass++ {
		for i, j := range idx {
			e := c.eps[p][j]
			if e == nil || tried[i] || pass == 0 && e.down.Load() {
				continue
			}
			served = true
			if c.closed.Load() {
				return ErrClosed
			}
			tried[i] = true
			err := fn(e)
			var ce *ConnError
			if !errors.As(err, &ce) {
				return err
			}
			e.markDown(err)
			last = err
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	if c.closed.Load() {
		return ErrClosed
	}
	if !served {
		return fmt.Errorf("client: no server has a %s address", p)
	}
	return fmt.Errorf("client: key %q: %w: %w", key, ErrUnavailable, last)
}

// checkHealth probes the listeners that are down, every HealthInterval, and
// marks up those that answer.
func (c *Client) checkHealth() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, e := range c.all {
			if !e.down.Load() {
				continue
			}
			wg.Add(1)
			go func() { // at once: each probe of a hung server takes HealthTimeout
				defer wg.Done()
				if e.probe(c.ctx) == nil {
					e.markUp()
				}
			}()
		}
		wg.Wait()
	}
}

// probe dials e and sends its protocol's no-op, which must be answered
// within HealthTimeout: a TCP connection alone proves nothing (the kernel
// accepts for a stopped process).
func (e *endpoint) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.c.opts.HealthTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var req []byte
	switch e.proto {
	case protoCounter, protoSemaphore:
		req = counter.AppendRequest(nil, counter.OpNoop, 1, nil)
	case protoPool:
		req = pool.AppendStats(nil, "UPTIME")
	default:
		req = resp.AppendCommand(nil, "PING")
	}
	if _, err := nc.Write(req); err != nil {
		return err
	}
	buf := make([]byte, 0, 512)
	for {
		n, err := nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if ok, perr := probeAnswered(e.proto, buf); ok || perr != nil {
			return perr
		}
		if err != nil {
			return err
		}
		if len(buf) == cap(buf) {
			return fmt.Errorf("probe of %s: no answer in %d bytes", e.addr, len(buf))
		}
	}
}

// probeAnswered reports whether buf holds the whole answer to p's probe,
// or an error if it holds something else.
func probeAnswered(p proto, buf []byte) (bool, error) {
	switch p {
	case protoCounter, protoSemaphore:
		var r counter.Response
		n, err := counter.ParseResponse(buf, maxReplyBody, &r)
		switch {
		case err != nil:
			return false, err
		case n == 0:
			return false, nil
		case r.Opcode != counter.OpNoop || r.Status != counter.StatusOK:
			return false, fmt.Errorf("Noop answered %s %s", r.Opcode, r.Status)
		}
		return true, nil
	case protoPool:
		line, _, ok := bytes.Cut(buf, []byte("\n"))
		if ok && !bytes.HasPrefix(line, []byte("uptime: ")) {
			return false, fmt.Errorf("STATS UPTIME answered %q", clip(line))
		}
		return ok, nil
	default:
		r, n, err := resp.ParseReply(buf)
		switch {
		case err != nil:
			return false, err
		case n == 0:
			return false, nil
		case r.Kind != '+' || string(r.Str) != "PONG":
			return false, fmt.Errorf("PING answered %c%q", r.Kind, clip(r.Str))
		}
		return true, nil
	}
}

// endpoint is one listener of one server.
type endpoint struct {
	c     *Client
	addr  string
	proto proto
	down  atomic.Bool

	mu      sync.Mutex
	closed  bool
	mux     *mux        // the pipelined connection (counter, semaphore, slock)
	dialing *dialing    // the dial of a new mux, while it runs
	idle    []*lineConn // PoolCounter connections ready for use
	busy    map[*lineConn]struct{}
}

// dial opens a connection, marking the endpoint down if it fails (only an
// answer marks it up: see markUp's callers).
func (e *endpoint) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: e.c.opts.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", e.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = &ConnError{Addr: e.addr, Op: "dial", Err: err}
		e.markDown(err)
		return nil, err
	}
	return nc, nil
}

func (e *endpoint) markDown(err error) {
	if e.c.closed.Load() || e.down.Swap(true) {
		return
	}
	e.mu.Lock()
	idle := e.idle // connections to a server that is down are of no more use
	e.idle = nil
	e.mu.Unlock()
	for _, lc := range idle {
		_ = lc.nc.Close()
	}
	if e.c.opts.OnHealth != nil {
		e.c.opts.OnHealth(e.addr, false, err)
	}
}

// markUp marks e up: its server answered.
func (e *endpoint) markUp() {
	if e.down.Load() && e.down.Swap(false) && e.c.opts.OnHealth != nil {
		e.c.opts.OnHealth(e.addr, true, nil)
	}
}

// close closes the endpoint's connections; it runs once, from Client.Close.
func (e *endpoint) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.mux != nil {
		e.mux.fail(ErrClosed)
	}
	for _, lc := range e.idle {
		_ = lc.nc.Close()
	}
	e.idle = nil
	for lc := range e.busy {
		_ = lc.nc.Close()
	}
}

// pipe returns the endpoint's pipelined connection, dialing one if there is
// none or it has broken. Callers that arrive during a dial share its
// outcome.
func (e *endpoint) pipe(ctx context.Context, parse parseFunc) (*mux, error) {
	e.mu.Lock()
	for e.dialing != nil {
		d := e.dialing
		e.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		var ce *ConnError
		if d.m != nil || errors.As(d.err, &ce) || d.err == ErrClosed {
			return d.m, d.err
		}
		e.mu.Lock() // the dialer's own context ended: dial again
	}
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, ErrClosed
	case e.mux != nil && e.mux.alive():
		m := e.mux
		e.mu.Unlock()
		return m, nil
	}
	d := &dialing{done: make(chan struct{})}
	e.dialing = d
	e.mu.Unlock()

	nc, err := e.dial(ctx)
	e.mu.Lock()
	e.dialing = nil
	switch {
	case err != nil:
		d.err = err
	case e.closed:
		_ = nc.Close()
		d.err = ErrClosed
	default:
		e.mux = newMux(e, nc, parse)
		d.m = e.mux
	}
	e.mu.Unlock()
	close(d.done)
	return d.m, d.err
}

// dialing is a dial of a pipelined connection in progress.
type dialing struct {
	done chan struct{} // closed when m or err is set
	m    *mux
	err  error
}
