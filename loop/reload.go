package loop

import (
	"context"
	"slices"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/tallyd/tallyd/proto/acl"
)

// Reload hands the limits of cfg a running server can change to its loop: MaxConnections,
// each listener's MaxConnections and Allow (from the listener of cfg with the same
// protocol), MaxInput, MaxOutput, IdleTimeout, MaxMemory, SlockMaxWills, SlockMaxWillBytes
// and ProtectedMode, and the users of RequirePass and ACLFile, read again here (a file that
// does not load leaves them as they were, logged); every other field of cfg is ignored (it
// takes effect at the next start). The loop applies them
// on its own goroutine, and Reload returns once it has (or after reloadWait); before the
// loop has seen a connection Reload returns at once, and the loop applies them before it
// serves the first. It is safe from any goroutine but the loop's; a later Reload replaces
// one not yet applied.
func (s *Server) Reload(cfg Config) {
	p := &pendingReload{cfg: cfg, done: make(chan struct{})}
	p.cfg.Listeners = slices.Clone(cfg.Listeners)
	if us, err := LoadUsers(cfg.RequirePass, cfg.ACLFile); err != nil {
		s.log.Error().Err(err).Msg("reload: the users stay as they were")
	} else {
		p.users = us // read here, off the loop
	}
	if old := s.run.reload.Swap(p); old != nil {
		close(old.done) // replaced: never applied
	}
	el, ok := s.run.el.Load().(gnet.EventLoop)
	if !ok || s.run.stopping.Load() {
		return
	}
	_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		s.applyReload()
		return nil
	}))
	select {
	case <-p.done:
	case <-time.After(reloadWait):
	}
}

// reloadWait is how long Reload waits for the loop to apply a reload.
const reloadWait = 5 * time.Second

// pendingReload is a Reload the loop has yet to apply; done is closed once it has (or once
// a later one replaced it).
type pendingReload struct {
	cfg   Config
	users *acl.Users // read again from cfg's RequirePass and ACLFile; nil if they did not load
	done  chan struct{}
}

// applyReload runs on the loop (from Reload and at every tick): it applies the pending
// Reload, if any.
func (s *Server) applyReload() {
	p := s.run.reload.Swap(nil)
	if p == nil {
		return
	}
	defer close(p.done)
	c := &p.cfg
	s.cfg.MaxConnections = c.MaxConnections
	s.tb.max.Store(int64(c.MaxConnections))
	for _, l := range c.Listeners {
		for i := range s.cfg.Listeners {
			if s.cfg.Listeners[i].Proto == l.Proto {
				s.cfg.Listeners[i].MaxConnections = l.MaxConnections
			}
		}
		for _, ln := range s.ct.byPort {
			if ln.Proto == l.Proto {
				ln.MaxConnections = l.MaxConnections
			}
		}
	}
	for _, l := range c.Listeners {
		for _, ln := range s.ct.byPort {
			if ln.Proto == l.Proto {
				ln.Allow = l.Allow
			}
		}
	}
	s.cfg.ProtectedMode = c.ProtectedMode
	if p.users != nil {
		s.cfg.RequirePass, s.cfg.ACLFile, s.auth.file = c.RequirePass, c.ACLFile, c.ACLFile
		s.setUsers(p.users)
	}
	s.cfg.MaxInput, s.cfg.MaxOutput = c.MaxInput, c.MaxOutput
	s.cfg.MaxMemory = c.MaxMemory
	s.cfg.SlockMaxWills, s.cfg.SlockMaxWillBytes = c.SlockMaxWills, c.SlockMaxWillBytes
	s.reloadScripts(c)
	if c.IdleTimeout != s.cfg.IdleTimeout {
		wasOff := s.cfg.IdleTimeout <= 0
		s.cfg.IdleTimeout = c.IdleTimeout
		s.idleRearm(s.now().UnixNano(), wasOff)
	}
}

// idleRearm puts every connection back on the active idle list, in the order of its last
// request, due at that request plus the (new) IdleTimeout: the lists' order and due times
// follow a changed timeout. When the timeout was off (wasOff), requests went unrecorded, so
// every connection counts from now.
func (s *Server) idleRearm(now int64, wasOff bool) {
	all := make([]*conn, 0, len(s.ct.conns))
	for _, cs := range s.ct.conns {
		s.idle.drop(cs)
		if cs.closed {
			continue
		}
		if wasOff {
			cs.idleSeen = now
		}
		all = append(all, cs)
	}
	if s.cfg.IdleTimeout <= 0 {
		return
	}
	slices.SortFunc(all, func(a, b *conn) int {
		return int(max(-1, min(1, a.idleSeen-b.idleSeen)))
	})
	for _, cs := range all {
		s.idle.move(cs, &s.idle.active, max(cs.idleSeen+int64(s.cfg.IdleTimeout), now))
	}
}
