package loop

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/store"
	"github.com/tallyd/tallyd/tlsbridge"
)

// conn is the loop's state for one client connection.
type conn struct {
	c      gnet.Conn
	owner  store.Owner
	proto  Proto
	ln     *listenerState
	h      handler // the protocol spoken; the slock port's first bytes replace its sniffer
	closed bool    // set in OnClose: the gnet.Conn must not be used after that
	// bridged is a TLS connection's bridge (tls.go): its socket is one end of a socketpair.
	bridged *tlsbridge.Conn

	output       // its replies not yet written and the marks that hold them (output.go)
	pending bool // on Server.pending: written at the next flush
	inHeld  bool // on persistState.held: replies wait for the log
	closing bool // on Server.closing: closed after the flush
	kicked  bool // on Server.kicked: served again after the flush
	parked  bool // on Server.parked: served again once the socket drains
	yielded bool // on fairState.yielded: its slice of the turn is over, it goes on later (fair.go)
	busy    bool // its handler has work that holds its later requests back (see handler.more)
	quit    bool // close once the replies so far are written

	ledger *store.Ledger     // what this connection holds (counter or semaphore family)
	pool   *store.PoolClient // its PoolCounter entries, held or waiting
	slock  *slockConn        // its slock state
	peer   *peerConn         // a cluster peer link's state (cluster_peer.go)
	virt   *virtConn         // a virtual connection's: commands a follower forwarded (cluster_fwd.go)
	dump   *store.DumpCursor // non-nil while a Dump streams; later requests wait behind it
	dumpOp uint32            // the Dump's opaque
	dumpAc bool              // the Dump asked for each counter's granted Acquires
	inLeft int               // unparsed bytes left after the last OnTraffic (for metrics)
	// need is, after a parse that found only part of a request, the fewest buffered bytes
	// that can hold the whole of it (0: unknown, any byte may complete it). serve leaves the
	// input alone until that many are in: gnet's Peek copies a frame that straddles its
	// ring and the new bytes, so peeking a large frame at each 64 KB that arrives copied it
	// over and over (a 4 MB SET: 128 MB of copies; a 64 MB raft snapshot frame: 32 GB).
	need int

	// Idle timeout (idle.go).
	idlePrev, idleNext *conn
	idleOn             *idleList // the list it is on, nil if none
	idleSeen           int64     // Unix ns of its last whole request (or its open)
	idleAt             int64     // Unix ns at which it is next looked at
	memIn              int       // its parked input as counted in the memory budget (memory.go)
	memOut             int       // its output as counted in the memory budget
	memTx              int       // its MULTI queue as counted in the memory budget (with the input)
}

// handler is one protocol's side of the loop. The loop owns the connection and its bytes:
// it peeks the input, asks the handler to parse one request at a time and serve it, and
// discards what was parsed; the handler appends replies with Server.out and Server.put.
type handler interface {
	// parse decodes the request at the start of in (a view valid until the request is
	// served): its length, or 0 while it is incomplete. An error means the framing is lost;
	// the handler may have appended a farewell reply, and the connection closes once the
	// replies before it are written.
	parse(cs *conn, in []byte) (int, error)
	// exec serves the request parse decoded last, at now (Unix ns).
	exec(cs *conn, now int64)
	// more goes on with what holds cs's later requests back (a streaming dump, a reply it
	// waits for) while cs.busy; it clears cs.busy when that is over.
	more(cs *conn, now int64)
	// closed releases everything cs held or waited for; cs is gone.
	closed(cs *conn, now int64)
}

// handlerFor returns the handler of a new connection on a listener speaking p, and sets
// up its per-connection state.
func (s *Server) handlerFor(cs *conn) handler {
	switch cs.proto {
	case ProtoCounter:
		cs.ledger = s.st.counters.NewLedger(cs.owner)
		return &s.h.yrmcds[ProtoCounter]
	case ProtoSemaphore:
		cs.ledger = s.st.semaphores.NewLedger(cs.owner)
		return &s.h.yrmcds[ProtoSemaphore]
	case ProtoPool:
		cs.pool = s.st.pools.NewClient(cs.owner)
		return &s.h.pool
	case ProtoSlock:
		cs.slock = newSlockConn()
		return &s.h.sniff
	}
	return nil
}
