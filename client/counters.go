package client

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tallyd/tallyd/proto/counter"
)

// Counters are the yrmcds counters (or, from Client.Semaphores, the
// semaphores) of a Client's servers. Each name lives on the first server
// of its order that is up.
type Counters struct {
	c *Client
	p proto
}

// Acquire takes resources of the named counter. A new counter is created
// with maximum as its limit; an existing one grants the request if its
// consumption plus resources is at most maximum, else the error wraps
// ErrNotAvailable. For semaphores maximum is the initial value of a new
// semaphore, and an existing one grants resources if it has that many
// left. Resources 0 or above maximum is refused by the server (ErrInvalid).
//
// The Hold is bound to the connection it was taken on; release it with
// Hold.Release.
func (k *Counters) Acquire(ctx context.Context, name string, resources, maximum uint32) (*Hold, error) {
	if err := checkName("acquire", name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var h *Hold
	err := k.c.each(ctx, name, k.p, func(e *endpoint) error {
		m, err := e.pipe(ctx, parseCounter)
		if err != nil {
			return err
		}
		cl := &call{onAbandon: func(cl *call) {
			if cl.status == counter.StatusOK { // nobody will release it: do it now
				_ = m.do(e.c.ctx, &call{}, func(dst []byte, op uint32) []byte {
					return counter.AppendRelease(dst, op, resources, []byte(name))
				})
			}
		}}
		err = m.do(ctx, cl, func(dst []byte, op uint32) []byte {
			return counter.AppendAcquire(dst, op, resources, maximum, []byte(name))
		})
		if err != nil {
			return err
		}
		if cl.status != counter.StatusOK {
			return statusError(e, "acquire", name, cl)
		}
		h = &Hold{key: name, e: e, m: m, resources: resources}
		return nil
	})
	return h, err
}

// Get returns a counter's consumption (a semaphore's remaining value); the
// error wraps ErrNotFound if it does not exist.
func (k *Counters) Get(ctx context.Context, name string) (uint32, error) {
	if err := checkName("get", name); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var v uint32
	err := k.c.each(ctx, name, k.p, func(e *endpoint) error {
		m, err := e.pipe(ctx, parseCounter)
		if err != nil {
			return err
		}
		cl := &call{}
		err = m.do(ctx, cl, func(dst []byte, op uint32) []byte { return counter.AppendGet(dst, op, []byte(name)) })
		switch {
		case err != nil:
			return err
		case cl.status != counter.StatusOK:
			return statusError(e, "get", name, cl)
		case len(cl.body) != 4:
			return &ConnError{Addr: e.addr, Op: "read", Err: fmt.Errorf("get reply has %d bytes, want 4", len(cl.body))}
		}
		v = binary.BigEndian.Uint32(cl.body)
		return nil
	})
	return v, err
}

// Do acquires resources of name, runs fn, and releases them however fn
// ends, a panic included. It returns fn's error joined with the release's
// (which wraps ErrHoldLost if the server or connection went away while fn
// ran).
func (k *Counters) Do(ctx context.Context, name string, resources, maximum uint32, fn func(context.Context) error) error {
	h, err := k.Acquire(ctx, name, resources, maximum)
	if err != nil {
		return err
	}
	return h.run(ctx, fn)
}

// Stat is one item of a server's statistics.
type Stat struct {
	Name, Value string
}

// Stats returns the statistics of the i-th server given to New, in the
// order the server sends them.
func (k *Counters) Stats(ctx context.Context, i int) ([]Stat, error) {
	e, err := k.c.endpoint(k.p, i)
	if err != nil {
		return nil, err
	}
	m, err := e.pipe(ctx, parseCounter)
	if err != nil {
		return nil, err
	}
	cl := &call{}
	if err := m.do(ctx, cl, func(dst []byte, op uint32) []byte {
		return counter.AppendRequest(dst, counter.OpStats, op, nil)
	}); err != nil {
		return nil, err
	}
	if cl.status != counter.StatusOK {
		return nil, statusError(e, "stats", "", cl)
	}
	items, err := counter.ParseStatsBody(cl.body)
	if err != nil {
		return nil, &ConnError{Addr: e.addr, Op: "read", Err: err}
	}
	stats := make([]Stat, len(items))
	for i, it := range items {
		stats[i] = Stat(it)
	}
	return stats, nil
}

// endpoint returns the i-th server's listener for p.
func (c *Client) endpoint(p proto, i int) (*endpoint, error) {
	if i < 0 || i >= len(c.servers) {
		return nil, fmt.Errorf("client: server %d does not exist (have %d)", i, len(c.servers))
	}
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if e := c.eps[p][i]; e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("client: server %d (%q) has no %s address", i, c.servers[i].Name, p)
}

// checkName rejects names the counter protocol cannot carry.
func checkName(op, name string) error {
	if len(name) == 0 || len(name) > counter.MaxNameLen {
		return fmt.Errorf("client: %s: name of %d bytes, want 1 to %d: %w", op, len(name), counter.MaxNameLen, ErrInvalid)
	}
	return nil
}

// statusError turns a yrmcds error reply into an *Error.
func statusError(e *endpoint, op, name string, cl *call) *Error {
	msg := string(cl.body)
	if msg == "" {
		msg = cl.status.String()
	}
	return &Error{Addr: e.addr, Op: op, Key: name, Reply: fmt.Sprintf("%s (status 0x%02x)", msg, uint8(cl.status)),
		Status: cl.status, kind: statusKind(cl.status)}
}
