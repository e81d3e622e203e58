// Package stats publishes snapshots of the event loop's counters and serves them as Prometheus metrics over HTTP.
package stats

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Snapshot is a copy of the event loop's counters taken on the loop at one moment. The loop
// builds a new one for each publication and never changes it afterwards, so any goroutine
// may read it.
type Snapshot struct {
	At      time.Time // when the loop took it (wall clock)
	Started time.Time // when the server started
	Version string

	Protos  []Proto   // one per protocol that has a listener, in the loop's order
	Ticks   uint64    // timed-work turns the loop has run
	TickLag Histogram // from the ticker handing a turn to the loop to the loop running it
	Memory  Memory    // the memory budget (--max-memory)
	Loop    Loop      // how long the loop's turns took, how connections shared them

	// Unready says why the node cannot acknowledge writes at its default level now (/readyz
	// answers 503 with it), "" when it can.
	Unready string
	Logs    []Log        // the logs the node writes: the append-only log ("aof"), the raft log ("raft")
	Held    []LevelCount // replies held for the log or their consistency level, by level
	Raft    *Raft        // nil outside cluster mode

	// Hot is what the status page (/ui) lists of keys: filled in only while a page has asked
	// for it lately (Publisher.WantHot), nil otherwise.
	Hot *Hot
}

// Hot is the keys the status page lists, from small lists the loop keeps as waits, grants and
// acquires happen (never a walk of the store): each list holds at most a few dozen keys.
type Hot struct {
	Locks      []HotLock    // slock keys that had waiters, most waits first
	Pools      []HotPool    // PoolCounter keys acquired lately
	Counters   []HotCounter // yrmcds counters and semaphores acquired lately
	RedisLocks []RedisLock  // Redis-text keys set with NX and a TTL lately, still there
}

// HotLock is one slock lock key.
type HotLock struct {
	DB          uint8
	Key         string       // its 16 bytes, as text when printable, else hex
	Holders     []LockHolder // oldest first (at most a few)
	MoreHolders int          // holders not listed
	Waiters     int          // requests queued on it now
	LongestWait float64      // seconds the oldest listed waiter has waited
	Waits       uint64       // waits it has had since it entered the list
}

// LockHolder is one holder of a lock key.
type LockHolder struct {
	LockID string  // its lock id, as text when printable, else hex
	Token  uint64  // its fencing token
	Lease  float64 // seconds until it expires; -1: no expiry
	Levels uint32
}

// HotPool is one PoolCounter key.
type HotPool struct {
	Name                string
	Processing, Waiting uint32
	Workers, MaxQueue   uint32
	QueueFull           uint64 // QUEUE_FULL answers for it since it entered the list
}

// HotCounter is one yrmcds counter or semaphore.
type HotCounter struct {
	Proto       string // "counter" or "semaphore"
	Name        string
	Consumption uint64
	Max         uint64
}

// RedisLock is one Redis-text key set with SET NX and a TTL.
type RedisLock struct {
	Key   string
	Value string  // the holder's token, as the client set it (cut to 64 bytes)
	Lease float64 // seconds left
}

// Log is one log's numbers in a Snapshot.
type Log struct {
	Name        string    // "aof" or "raft"
	Bytes       uint64    // size of its file
	Fsync       Histogram // its fsyncs' durations
	WriteErrors uint64    // its writes and fsyncs that failed
}

// LevelCount is a count at one consistency level ("log" on a single node with a log).
type LevelCount struct {
	Level string
	N     uint64
}

// Raft is a cluster member's replication state in a Snapshot.
type Raft struct {
	Role           string // leader, follower, candidate or learner
	Term           uint64
	Commit         uint64
	Applied        uint64
	SnapshotIndex  uint64
	LeaderChanges  uint64    // times a new leader became known here
	InFlight       uint64    // this leader's proposals awaiting their commit
	ProposalCommit Histogram // from a proposal to its commit, on the leader
	Peers          []Peer    // the other members, in ID order
	NodeID         uint64    // this member
	Leader         uint64    // the leader this member knows, 0 if none
	ClusterDown    []ReasonCount
}

// Peer is one other member as this node sees it.
type Peer struct {
	ID    uint64
	Match int64 // the index its log is known to match; -1 when not known here (only a leader tracks it)
	Up    bool  // this node's link to it is connected and authenticated
	// LastContact is how long ago this node last heard from it, seconds; -1 never.
	LastContact float64
	// Status says it reported itself to this node, the leader (with its append responses),
	// Reported seconds ago: its applied and commit indexes and its raft log's mean fsync,
	// seconds (0: none yet).
	Status          bool
	Reported        float64
	Applied, Commit uint64
	FsyncMean       float64
}

// ReasonCount is how many answers gave one reason.
type ReasonCount struct {
	Reason string
	N      uint64
}

// Loop is how long the event loop's turns took (a turn: a connection's read, a tick; no
// other client is served while one runs), and how the connections shared them.
type Loop struct {
	Turns   Histogram // each turn's duration
	MaxTurn float64   // the longest turn since start, seconds
	Yields  uint64    // connection slices that ended with requests left (--conn-slice)
	Slowlog uint64    // commands SLOWLOG has logged since start

	// Pub/sub: channels and patterns with a subscriber, messages delivered to subscribers
	// since start, subscribers cut over client-output-buffer-limit pubsub.
	PubsubChannels, PubsubPatterns int
	PubsubMessages, PubsubCut      uint64
}

// Memory is what the memory budget counts, in bytes, and what it did.
type Memory struct {
	Budget  uint64 // --max-memory; 0 = none
	Input   uint64 // buffered input, as counted (twice the bytes)
	Output  uint64 // buffered output
	Wills   uint64 // pending slock WILL commands
	Store   uint64 // stored state (store.Store.Bytes)
	Closed  uint64 // connections closed for the budget
	Refused uint64 // writes refused for the budget
	Evicted uint64 // released counters, idle semaphores and closed connections' queued slock requests evicted for the budget
}

// Proto is one protocol's numbers in a Snapshot.
type Proto struct {
	Name string // "counter", "semaphore", "pool" or "slock"

	Connections      uint64 // open now
	ConnectionsTotal uint64 // accepted since start
	Rejected         uint64 // closed at accept by a connection limit

	Requests  []RequestCount // non-zero counts only, by command then outcome
	BytesIn   uint64         // read from clients
	BytesOut  uint64         // handed to the socket for clients
	Latency   Histogram      // time each request spent in the loop
	HasWaits  bool           // the protocol has waits (PoolCounter, slock): the Wait fields mean something
	WaitsIn   uint64         // requests that started to wait
	WaitsOut  []WaitCount    // waits that ended, by outcome (non-zero counts only)
	Waiting   uint64         // requests waiting now
	Held      uint64         // PoolCounter slots or slock lock levels held now
	Objects   uint64         // counters, semaphores, PoolCounter keys or slock keys live now
	Memory    uint64         // bytes the store estimates for its objects (yrmcds protocols)
	GCRuns    uint64         // store garbage collections (yrmcds protocols)
	GCSeconds float64        // time spent in them
	Expired   uint64         // slock holds that ran out
}

// RequestCount is how many requests of one command ended with one outcome.
type RequestCount struct {
	Command, Outcome string
	N                uint64
}

// WaitCount is how many waits ended one way.
type WaitCount struct {
	Outcome string
	N       uint64
}

// Histogram is a fixed-bucket histogram in seconds. Counts[i] counts observations at most
// Bounds[i] and above Bounds[i-1]; the last element of Counts, one past Bounds, counts the
// rest.
type Histogram struct {
	Bounds []float64 // upper bounds in seconds, increasing; shared between snapshots
	Counts []uint64  // len(Bounds)+1, not cumulative
	Count  uint64
	Sum    float64 // seconds
}

// Cumulative returns the counts in Prometheus's form: for each bound, the observations at
// most that bound.
func (h *Histogram) Cumulative() map[float64]uint64 {
	m := make(map[float64]uint64, len(h.Bounds))
	var n uint64
	for i, b := range h.Bounds {
		n += h.Counts[i]
		m[b] = n
	}
	return m
}

// Proto returns the named protocol's numbers, or nil if it has no listener.
func (s *Snapshot) Proto(name string) *Proto {
	for i := range s.Protos {
		if s.Protos[i].Name == name {
			return &s.Protos[i]
		}
	}
	return nil
}

// Publisher hands snapshots from the event loop to readers on other goroutines. The loop
// calls Publish (and Asked, to learn that a reader waits); readers call Latest, Fresh and
// Health. A Publisher must not be copied after first use.
type Publisher struct {
	cur    atomic.Pointer[Snapshot]
	asked  atomic.Pointer[chan struct{}] // closed by the next Publish
	closed atomic.Pointer[string]        // why no more snapshots will come
	hotTil atomic.Int64                  // Unix ns until which snapshots carry Hot
}

// WantHot asks the loop to fill in Snapshot.Hot in the snapshots it publishes until until.
func (p *Publisher) WantHot(until time.Time) {
	for {
		old := p.hotTil.Load()
		if old >= until.UnixNano() || p.hotTil.CompareAndSwap(old, until.UnixNano()) {
			return
		}
	}
}

// HotWanted reports whether a snapshot taken at now should carry Hot. One atomic load.
func (p *Publisher) HotWanted(now int64) bool { return now < p.hotTil.Load() }

// Publish makes s the latest snapshot and wakes the readers waiting in Fresh. s must not
// change afterwards.
func (p *Publisher) Publish(s *Snapshot) {
	p.cur.Store(s)
	if ch := p.asked.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Asked reports whether a reader waits in Fresh for the next snapshot. It costs one atomic
// load.
func (p *Publisher) Asked() bool { return p.asked.Load() != nil }

// Close says that no more snapshots will come, and why: Fresh stops waiting and Health
// reports it.
func (p *Publisher) Close(why string) {
	p.closed.Store(&why)
	if ch := p.asked.Swap(nil); ch != nil {
		close(*ch)
	}
}

// Latest returns the newest snapshot, nil before the first.
func (p *Publisher) Latest() *Snapshot { return p.cur.Load() }

// Fresh asks the loop for a snapshot taken after this call and waits for it until ctx is
// done. On error it returns the newest snapshot there is (possibly nil) with the reason.
func (p *Publisher) Fresh(ctx context.Context) (*Snapshot, error) {
	if why := p.closed.Load(); why != nil {
		return p.cur.Load(), errors.New(*why)
	}
	var ch chan struct{}
	for {
		if old := p.asked.Load(); old != nil {
			ch = *old
			break
		}
		ch = make(chan struct{})
		if p.asked.CompareAndSwap(nil, &ch) {
			break
		}
	}
	select {
	case <-ch:
		if why := p.closed.Load(); why != nil {
			return p.cur.Load(), errors.New(*why)
		}
		return p.cur.Load(), nil
	case <-ctx.Done():
		return p.cur.Load(), fmt.Errorf("the event loop did not publish a snapshot in time: %w", ctx.Err())
	}
}

// Health returns nil when the newest snapshot was taken less than staleAfter before now,
// else what is wrong.
func (p *Publisher) Health(now time.Time, staleAfter time.Duration) error {
	if why := p.closed.Load(); why != nil {
		return errors.New(*why)
	}
	s := p.cur.Load()
	if s == nil {
		return errors.New("the event loop has not published a snapshot yet")
	}
	if age := now.Sub(s.At); age > staleAfter {
		return fmt.Errorf("the event loop last published a snapshot %s ago (at %s), more than %s: it is stuck or overloaded",
			age.Round(time.Millisecond), s.At.UTC().Format(time.RFC3339Nano), staleAfter)
	}
	return nil
}
