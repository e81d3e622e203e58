package loop

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// fdReserve is the descriptors kept free for everything that is not a connection: the
// loop's epoll and eventfd, Go's poller, the log, its directory and a rewrite's file, the
// metrics listener and the one connection it may be refusing, and the files a scrape's
// process collector reads. Connections on every port, metrics included, take from the
// rest (Descriptors).
const fdReserve = 32

// openFileCap says how many connections (client and metrics together) the process can
// hold so that accepting never fails for want of a descriptor (an EMFILE in gnet's
// acceptor stops the engine).
//
// The loop accepts on its own goroutine (see Run), so between two turns in which it
// refuses what it accepted, it can have accepted at most two full accept queues per
// listener: the one it drained in this turn and the one before, whose registrations run
// after it. The cap leaves room for that; when the open-file limit is small, the backlog
// is shrunk to keep at least half the descriptors for connections.
func openFileCap(listeners, backlog int) (connCap, newBacklog, limit int, err error) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, 0, fmt.Errorf("reading the open-file limit: %w", err)
	}
	limit = int(min(rl.Cur, 1<<30))
	open := countOpenFiles()
	avail := limit - open - fdReserve - 2*listeners // each listener and its dup while tuning
	if avail < 8*listeners {
		return 0, 0, 0, fmt.Errorf("open-file limit %d leaves no room for connections (%d already open)", limit, open)
	}
	if 2*listeners*(backlog+1) > avail/2 {
		backlog = max(1, avail/(4*listeners)-1)
	}
	return avail - 2*listeners*(backlog+1), backlog, limit, nil
}

// Descriptors is the one budget of descriptors for connections: the loop's client
// connections and the metrics server's take from it, and nothing takes past its cap, so
// that accepting on any listener never fails for want of a descriptor. It is safe for any
// goroutine.
type Descriptors struct {
	cap  atomic.Int64
	used atomic.Int64

	// The loop's, for following the open-file limit (follow).
	limit   int   // the open-file limit cap was computed for
	checked int64 // Unix ns of the last look at the limit
}

// Take takes one descriptor, or reports false if the budget is spent.
func (d *Descriptors) Take() bool {
	for {
		n := d.used.Load()
		if n >= d.cap.Load() {
			return false
		}
		if d.used.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// limitCheckEvery is how often the loop looks at the open-file limit, which an operator can
// change under a running process (prlimit).
const limitCheckEvery = time.Second

// follow runs on the loop's ticks: if the open-file limit has changed since the cap was
// computed, the cap moves by as much, so that a lowered limit is not accepted past. It
// returns the new cap when it changed.
func (d *Descriptors) follow(now int64) (int, bool) {
	if now-d.checked < int64(limitCheckEvery) || d.limit == 0 {
		return 0, false
	}
	d.checked = now
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil {
		return 0, false
	}
	limit := int(min(rl.Cur, 1<<30))
	if limit == d.limit {
		return 0, false
	}
	c := max(0, int(d.cap.Load())+limit-d.limit)
	d.cap.Store(int64(c))
	d.limit = limit
	return c, true
}

// Give gives back a descriptor Take took.
func (d *Descriptors) Give() { d.used.Add(-1) }

// Cap is how many descriptors the budget holds.
func (d *Descriptors) Cap() int { return int(d.cap.Load()) }

// Used is how many are taken now.
func (d *Descriptors) Used() int { return int(d.used.Load()) }

// countOpenFiles counts this process's descriptors (a small guess where /proc is missing).
func countOpenFiles() int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 16
	}
	return len(entries)
}

// tuneListener sets the listen backlog of the engine's listener at addr and returns the port
// it is bound to. listen(2) on a listening socket only updates its backlog.
func tuneListener(eng gnet.Engine, addr string, backlog int) (int, error) {
	fd, err := eng.DupListener("tcp", addr)
	if err != nil {
		return 0, fmt.Errorf("finding the listener: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Listen(fd, backlog); err != nil {
		return 0, fmt.Errorf("setting the backlog: %w", err)
	}
	// SO_TIMESTAMPNS, which accepted sockets inherit: a peek tells when their unread bytes
	// arrived (order.go). The kernel stamps packets only while some socket asks for it.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, fmt.Errorf("reading the bound address: %w", err)
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port, nil
	case *unix.SockaddrInet6:
		return a.Port, nil
	}
	return 0, fmt.Errorf("listener bound to a non-TCP address %v", sa)
}

// rateLog lets a repeated warning through at most once a second and counts the rest.
type rateLog struct {
	last   time.Time
	missed uint64
}

func (r *rateLog) allow(now time.Time) (missed uint64, ok bool) {
	if now.Sub(r.last) < time.Second {
		r.missed++
		return 0, false
	}
	missed, r.missed, r.last = r.missed, 0, now
	return missed, true
}

// gnetLogger sends gnet's own log lines to zerolog; its chatty info lines become debug.
type gnetLogger struct{ log zerolog.Logger }

func (g gnetLogger) Debugf(format string, args ...any) {
	g.log.Debug().Str("from", "gnet").Msgf(format, args...)
}
func (g gnetLogger) Infof(format string, args ...any) {
	g.log.Debug().Str("from", "gnet").Msgf(format, args...)
}
func (g gnetLogger) Warnf(format string, args ...any) {
	g.log.Warn().Str("from", "gnet").Msgf(format, args...)
}
func (g gnetLogger) Errorf(format string, args ...any) {
	g.log.Error().Str("from", "gnet").Msgf(format, args...)
}
func (g gnetLogger) Fatalf(format string, args ...any) {
	g.log.Error().Str("from", "gnet").Msgf(format, args...)
}
