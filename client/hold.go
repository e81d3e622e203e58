package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/tallyd/tallyd/proto/counter"
	"github.com/tallyd/tallyd/proto/pool"
)

// Hold is what one successful acquire holds: resources of a counter or
// semaphore, or a PoolCounter lock. It is bound to the connection it was
// acquired on, and its server releases it if that connection closes.
type Hold struct {
	key      string
	e        *endpoint
	released atomic.Bool

	m         *mux // yrmcds: the pipelined connection it was taken on
	resources uint32

	lc *lineConn // PoolCounter: the connection that holds the lock
}

// Key returns the counter, semaphore or pool key held.
func (h *Hold) Key() string { return h.key }

// Addr returns the address of the server that granted the hold.
func (h *Hold) Addr() string { return h.e.addr }

// Release gives back what h holds, on the connection it was acquired on.
// The error wraps ErrHoldLost if that connection has broken (the server
// has released it already) and ErrReleased on a second call. If ctx ends
// before the server answers, Release returns ctx's error, but the release
// has still been sent (yrmcds) or the connection closed (PoolCounter), so
// the server releases it either way.
func (h *Hold) Release(ctx context.Context) error {
	if h.released.Swap(true) {
		return fmt.Errorf("client: release %q: %w", h.key, ErrReleased)
	}
	if h.lc != nil {
		return h.releaseLock(ctx)
	}
	if err := h.m.broken(); err != nil {
		return h.lost(err)
	}
	cl := &call{}
	err := h.m.do(ctx, cl, func(dst []byte, op uint32) []byte {
		return counter.AppendRelease(dst, op, h.resources, []byte(h.key))
	})
	var ce *ConnError
	switch {
	case errors.As(err, &ce):
		return h.lost(err)
	case err != nil:
		return err
	case cl.status != counter.StatusOK:
		return statusError(h.e, "release", h.key, cl)
	}
	return nil
}

func (h *Hold) releaseLock(ctx context.Context) error {
	lc := h.lc
	if h.e.c.closed.Load() {
		return h.lost(ErrClosed)
	}
	line, err := lc.roundtrip(ctx, pool.AppendRelease(nil), 0, false)
	if err != nil {
		h.e.discard(lc) // closing it releases the lock, if anything is left to release
		var ce *ConnError
		if errors.As(err, &ce) {
			h.e.markDown(err)
			return h.lost(err)
		}
		return err
	}
	if line[0] == "RELEASED" {
		h.e.put(lc)
		return nil
	}
	h.e.discard(lc)
	return lineError(h.e, "RELEASE", h.key, line[0])
}

func (h *Hold) lost(err error) error {
	return fmt.Errorf("client: release %s at %s: %w: %w", strconv.Quote(h.key), h.e.addr, ErrHoldLost, err)
}

// run runs fn and releases h however fn ends.
func (h *Hold) run(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.e.c.opts.IOTimeout)
		defer cancel()
		if rerr := h.Release(rctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(ctx)
}
