package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
)

// Values are the durable counters of a Client's servers, kept by the
// Redis commands of each server's slock port (INCRBY, DECRBY, GET, SET,
// DEL). Each key lives on the first server of its order that is up; a
// server's values are its own, so a key that moves to the next server
// reads and changes that server's value.
type Values struct {
	c *Client
}

// Incr adds 1 to key (a missing key counts as 0) and returns the new value.
func (v *Values) Incr(ctx context.Context, key string) (int64, error) {
	return v.integer(ctx, key, "INCR", key)
}

// IncrBy adds n to key and returns the new value.
func (v *Values) IncrBy(ctx context.Context, key string, n int64) (int64, error) {
	return v.integer(ctx, key, "INCRBY", key, strconv.FormatInt(n, 10))
}

// Decr subtracts 1 from key and returns the new value.
func (v *Values) Decr(ctx context.Context, key string) (int64, error) {
	return v.integer(ctx, key, "DECR", key)
}

// DecrBy subtracts n from key and returns the new value.
func (v *Values) DecrBy(ctx context.Context, key string, n int64) (int64, error) {
	return v.integer(ctx, key, "DECRBY", key, strconv.FormatInt(n, 10))
}

// Get returns key's value. The error wraps ErrNotFound if key does not
// exist and ErrNotInteger if its value is not a number.
func (v *Values) Get(ctx context.Context, key string) (int64, error) {
	var n int64
	err := v.do(ctx, key, func(e *endpoint, r resp.Reply) error {
		switch {
		case r.Kind == ':':
			n = r.Int
		case r.Kind == '$' && r.Null:
			return &Error{Addr: e.addr, Op: "GET", Key: key, Reply: "(nil)", kind: ErrNotFound}
		case r.Kind == '$':
			var err error
			if n, err = strconv.ParseInt(string(r.Str), 10, 64); err != nil {
				return &Error{Addr: e.addr, Op: "GET", Key: key, Reply: strconv.Quote(string(r.Str)), kind: ErrNotInteger}
			}
		default:
			return unexpected(e, "GET", key, r)
		}
		return nil
	}, "GET", key)
	return n, err
}

// Set sets key to n.
func (v *Values) Set(ctx context.Context, key string, n int64) error {
	return v.do(ctx, key, func(e *endpoint, r resp.Reply) error {
		if r.Kind != '+' {
			return unexpected(e, "SET", key, r)
		}
		return nil
	}, "SET", key, strconv.FormatInt(n, 10))
}

// SetFenced sets key to n if no write to key has carried a fencing token
// higher than token (SET key n FENCE token), and then remembers token as
// key's highest. A lock holder passes its Lock.Token, so that once its lock
// has been given to another client, who wrote with the newer token, its
// late writes are refused: the error wraps ErrFenced. The key must live
// where the tokens come from (a tallyd cluster, or the lock's server).
func (v *Values) SetFenced(ctx context.Context, key string, n int64, token uint64) error {
	return v.do(ctx, key, func(e *endpoint, r resp.Reply) error {
		if r.Kind != '+' {
			return unexpected(e, "SET", key, r)
		}
		return nil
	}, "SET", key, strconv.FormatInt(n, 10), "FENCE", strconv.FormatUint(token, 10))
}

// GetFence returns the highest fencing token a SetFenced of key has
// carried (GETFENCE key), 0 if none.
func (v *Values) GetFence(ctx context.Context, key string) (uint64, error) {
	n, err := v.integer(ctx, key, "GETFENCE", key)
	if err == nil && n < 0 {
		return 0, fmt.Errorf("client: GETFENCE %q: negative token %d", key, n)
	}
	return uint64(n), err
}

// Del deletes key and reports whether it existed.
func (v *Values) Del(ctx context.Context, key string) (bool, error) {
	var existed bool
	err := v.do(ctx, key, func(e *endpoint, r resp.Reply) error {
		if r.Kind != ':' {
			return unexpected(e, "DEL", key, r)
		}
		existed = r.Int > 0
		return nil
	}, "DEL", key)
	return existed, err
}

// Level is a tallyd cluster's consistency level for a durable-value call (docs/cluster.md).
type Level string

// The consistency levels.
const (
	One    Level = "ONE"    // a write: on the leader's disk; a read: the member's own store, maybe stale
	Quorum Level = "QUORUM" // committed by a majority; reads linearizable (the server's default)
	All    Level = "ALL"    // on every voter's disk; reads linearizable
)

type levelKey struct{}

// WithConsistency returns a context under which Values calls run at consistency level l.
func WithConsistency(ctx context.Context, l Level) context.Context {
	return context.WithValue(ctx, levelKey{}, l)
}

// integer runs a command whose reply is an integer.
func (v *Values) integer(ctx context.Context, key string, args ...string) (int64, error) {
	var n int64
	err := v.do(ctx, key, func(e *endpoint, r resp.Reply) error {
		if r.Kind != ':' {
			return unexpected(e, args[0], key, r)
		}
		n = r.Int
		return nil
	}, args...)
	return n, err
}

// do sends args on key's server and hands a reply that is not an error to
// use.
func (v *Values) do(ctx context.Context, key string, use func(*endpoint, resp.Reply) error, args ...string) error {
	return v.c.redis(ctx, key, nil, use, args...)
}

// redis sends args on key's slock server (first, if not nil, ahead of the
// key's order) and hands a reply that is not an error to use.
func (c *Client) redis(ctx context.Context, key string, first *endpoint, use func(*endpoint, resp.Reply) error, args ...string) error {
	return c.redisVia(ctx, key, first, func(e *endpoint, _ sentOn, r resp.Reply) error { return use(e, r) }, args...)
}

// redisVia is redis whose use is also told the connection and the time
// the command was sent on.
func (c *Client) redisVia(ctx context.Context, key string, first *endpoint, use func(*endpoint, sentOn, resp.Reply) error, args ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkLevel(ctx, args[0], key); err != nil {
		return err
	}
	return c.eachFrom(ctx, key, protoSlock, first, func(e *endpoint) error {
		r, on, err := e.redisOn(ctx, key, args...)
		if err != nil {
			return err
		}
		return use(e, on, r)
	})
}

// checkLevel refuses a consistency level set with WithConsistency that is
// none of the three.
func checkLevel(ctx context.Context, op, key string) error {
	if l, ok := ctx.Value(levelKey{}).(Level); ok && l != One && l != Quorum && l != All {
		return fmt.Errorf("client: %s %q: consistency level %q is not ONE, QUORUM or ALL", op, key, l)
	}
	return nil
}

// redis sends args on e's pipelined connection, at ctx's consistency level,
// and returns the reply; an error reply is an *Error.
func (e *endpoint) redis(ctx context.Context, key string, args ...string) (resp.Reply, error) {
	r, _, err := e.redisOn(ctx, key, args...)
	return r, err
}

// redisOn is redis that also tells which connection carried the command
// and when it was sent (a lock's lease is counted from then).
func (e *endpoint) redisOn(ctx context.Context, key string, args ...string) (resp.Reply, sentOn, error) {
	m, err := e.pipe(ctx, parseRESP)
	if err != nil {
		return resp.Reply{}, sentOn{}, err
	}
	lvl, leveled := ctx.Value(levelKey{}).(Level)
	cl := &call{leveled: leveled}
	err = m.do(ctx, cl, func(dst []byte, _ uint32) []byte {
		return appendLeveled(dst, lvl, leveled, args...)
	})
	on := sentOn{m: m, at: cl.sent}
	if err != nil {
		return resp.Reply{}, on, err
	}
	if cl.reply.Kind == '-' {
		return resp.Reply{}, on, redisError(e, args[0], key, cl.reply)
	}
	return cl.reply, on, nil
}

// sentOn is the connection a command went out on and when.
type sentOn struct {
	m  *mux
	at time.Time
}

// appendLeveled appends the command args, between CONSISTENCY lvl and
// CONSISTENCY QUORUM when leveled: the level holds for this command only,
// for connections are shared (parseLeveled reads the three replies).
func appendLeveled(dst []byte, lvl Level, leveled bool, args ...string) []byte {
	if !leveled {
		return resp.AppendCommand(dst, args...)
	}
	dst = resp.AppendCommand(dst, "CONSISTENCY", string(lvl))
	dst = resp.AppendCommand(dst, args...)
	return resp.AppendCommand(dst, "CONSISTENCY", string(Quorum))
}

// redisError is the *Error of a Redis error reply.
func redisError(e *endpoint, op, key string, r resp.Reply) *Error {
	msg := string(r.Str)
	return &Error{Addr: e.addr, Op: op, Key: key, Reply: msg, kind: redisKind(msg)}
}

// unexpected reports a reply of the wrong type for its command.
func unexpected(e *endpoint, op, key string, r resp.Reply) error {
	return fmt.Errorf("client: %s %q at %s: unexpected reply of type %q", op, key, e.addr, r.Kind)
}
