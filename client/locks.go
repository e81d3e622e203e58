package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tallyd/tallyd/proto/resp"
	"github.com/tallyd/tallyd/proto/slock"
)

// Locks are the slock locks of a Client's servers, taken with the Redis
// text commands of each server's slock port: LOCK, UNLOCK and TOKEN.
//
// A lock lives on one server: the first server of its name's order that is
// up, as a durable value does. It is not spread over several servers
// (Redlock's way), so the one server decides who holds it:
//
//   - Point the Client at the members of one tallyd cluster (each member
//     forwards to the leader, and at CONSISTENCY QUORUM, the default, a
//     grant is replicated before it is answered). Then a name is one lock
//     whichever member a call reaches, a lock survives the loss of a
//     member, and its fencing tokens grow across failovers.
//   - With independent servers, a lock whose server goes down moves with
//     its name to the next server in the order, where another client can
//     take it while the first still believes it holds it on the server it
//     can no longer reach. Fencing tokens of different servers are not
//     comparable.
//
// Unlike a Hold, a Lock is not bound to a connection: slock locks outlive
// the connection that took them and end only when unlocked or when their
// ttl runs out. Each Lock has a LockId that the client makes at random,
// and Unlock and Refresh name it, from any connection. A Lock that
// waits has a connection of its own while it waits (slock's text LOCK
// blocks the connection it waits on); the other calls share the server's
// pipelined connection with Values.
//
// WithConsistency applies to Locks calls as to Values calls; a lock taken
// at ONE is not replicated before it is acknowledged and can be lost at a
// failover (its holder learns it at Refresh or Unlock: ErrLockLost).
type Locks struct {
	c *Client
}

// Locks returns the slock locks of the Client's servers.
func (c *Client) Locks() *Locks { return &Locks{c: c} }

// LockOption changes what Lock and TryLock ask for.
type LockOption func(*lockConfig)

type lockConfig struct {
	holders int
}

// MaxHolders lets up to n holders share the name at once (slock's COUNT);
// all who share it must ask for the same n. The default, 1, is a mutex.
func MaxHolders(n int) LockOption { return func(c *lockConfig) { c.holders = n } }

// Lock is a lock held on one server. It ends with Unlock or when its ttl
// runs out, which Refresh pushes back. Its methods are safe for concurrent
// use.
type Lock struct {
	c       *Client
	e       *endpoint // the server that granted it
	name    string
	id      string // LockId: 32 hex digits
	token   uint64
	holders int
	done    atomic.Bool // unlocked, or found lost
}

// Name returns the name locked.
func (k *Lock) Name() string { return k.name }

// LockID returns the lock's LockId, 32 hex digits, which the client made
// at random: `UNLOCK name LOCK_ID id` from any connection releases it.
func (k *Lock) LockID() string { return k.id }

// Token returns the fencing token of the grant: a number that only grows
// from one grant to the next, cluster-wide, across failovers and restarts.
// Pass it along with every write the lock protects (Values.SetFenced), so
// that the resource can refuse a write from a holder whose lock has
// since been given to someone else. It is 0 from a server that gives no
// tokens.
func (k *Lock) Token() uint64 { return k.token }

// Addr returns the address of the server that granted the lock.
func (k *Lock) Addr() string { return k.e.addr }

// Constants of slock's LOCK and UNLOCK (slock's README: the FLAG option and
// the flags in the high 16 bits of TIMEOUT and EXPRIED).
const (
	lockFlagUpdate   = 0x02   // LOCK: update the holder with this LockId (Refresh)
	unlockFlagCancel = 0x02   // UNLOCK: cancel this LockId's wait, else release its hold
	timeWaitUnlocked = 0x0200 // TimeoutFlag: a free key is not granted, so with TIMEOUT 0 an update never takes a lock anew
	timeMillis       = 0x0400 // the time is in milliseconds
	timeMinutes      = 0x0040 // the time is in minutes
)

// lockRound is the longest wait one LOCK asks a server for: a Lock whose
// ctx has no deadline waits in rounds of it. The last round of a wait ends
// lockMargin before ctx's deadline, so that the server's TIMEOUT, not the
// deadline, ends it.
const (
	lockRound  = 30 * time.Second
	lockMargin = 20 * time.Millisecond
)

// maxLockReply bounds a reply on a connection that waits for a lock (a
// LOCK reply carries the key's value, if it has one).
const maxLockReply = 64 << 10

// Lock takes the lock name for ttl. If another holds it, Lock waits until
// it is free or ctx ends, in rounds of at most 30 s (slock's wait is
// bounded), queued on the server in the order the waits came; the last
// round ends a few milliseconds before ctx's deadline. A lock still held
// then is an error wrapping ErrTimeout and context.DeadlineExceeded; ctx
// cancelled is ctx's error. A server answering CLUSTERDOWN (a tallyd
// cluster between leaders) is asked again until ctx ends: a LOCK with the
// same LockId is idempotent.
//
// ttl is rounded up to what slock counts: whole seconds, or milliseconds
// up to 65.535 s, or minutes. If Lock fails after a LOCK may have been
// granted on a server (a broken connection, ctx ending while it waited),
// it sends UNLOCK with that LockId in the background.
func (l *Locks) Lock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, true, opts)
}

// TryLock takes the lock name for ttl if it is free: a lock held by
// another is an error wrapping ErrTimeout at once.
func (l *Locks) TryLock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, false, opts)
}

// Do takes the lock name for ttl as Lock does, runs fn with it and unlocks
// it however fn ends, a panic included. It returns fn's error joined with
// Unlock's, which wraps ErrLockLost if fn outlasted the lock.
func (l *Locks) Do(ctx context.Context, name string, ttl time.Duration, fn func(context.Context, *Lock) error, opts ...LockOption) (err error) {
	k, err := l.Lock(ctx, name, ttl, opts...)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.opts.IOTimeout)
		defer cancel()
		if uerr := k.Unlock(uctx); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	return fn(ctx, k)
}

// Token returns the fencing token of name's oldest holder (TOKEN name), and
// false if nobody holds it.
func (l *Locks) Token(ctx context.Context, name string) (token uint64, held bool, err error) {
	if err := checkLockName("TOKEN", name); err != nil {
		return 0, false, err
	}
	err = l.c.redis(ctx, name, nil, func(e *endpoint, r resp.Reply) error {
		token, held, err = tokenReply(e, name, r)
		return err
	}, "TOKEN", name)
	return token, held, err
}

// Refresh makes the lock last ttl from now (slock's update of the holder
// with this LockId: LOCK with FLAG 2). The error wraps ErrLockLost if the
// lock is no longer held by this LockId (it expired, or a failover lost a
// lock taken at ONE), and ErrNotHeld after Unlock. Refresh never takes a
// lock anew.
func (k *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	expried, err := lockTTL("refresh", k.name, ttl)
	if err != nil {
		return err
	}
	if k.done.Load() {
		return fmt.Errorf("client: refresh %q: %w", k.name, ErrNotHeld)
	}
	args := []string{"LOCK", k.name, "LOCK_ID", k.id, "FLAG", strconv.Itoa(lockFlagUpdate),
		"TIMEOUT", strconv.Itoa(timeWaitUnlocked << 16), "EXPRIED", expried}
	if k.holders > 1 { // an update replaces the holder's COUNT too
		args = append(args, "COUNT", strconv.Itoa(k.holders))
	}
	err = k.c.redis(ctx, k.name, k.e, func(e *endpoint, r resp.Reply) error {
		lr, err := parseLockReply(e, "LOCK", k.name, r)
		if err != nil {
			return err
		}
		switch lr.result {
		case slock.ResultLockedError: // the holder was updated
			return nil
		case slock.ResultOK:
			// Granted anew (a server that ignores TimeoutFlag 0x0200): the lock
			// had been lost meanwhile, and this grant is no continuation of it.
			_, _ = e.redis(ctx, k.name, "UNLOCK", k.name, "LOCK_ID", k.id)
			return &Error{Addr: e.addr, Op: "LOCK", Key: k.name, Reply: lr.name, kind: ErrLockLost}
		case slock.ResultTimeout, slock.ResultUnownError:
			return &Error{Addr: e.addr, Op: "LOCK", Key: k.name, Reply: lr.name, kind: ErrLockLost}
		}
		return lr.refusal(e, "LOCK", k.name)
	}, args...)
	if errors.Is(err, ErrLockLost) {
		k.done.Store(true)
	}
	return err
}

// Unlock releases the lock. The error wraps ErrLockLost if the server no
// longer had it under this LockId (it had expired: another client may
// have held it meanwhile), and ErrNotHeld if it was already unlocked or
// found lost, in which case nothing is sent. After an error that leaves the
// outcome unknown (ctx's, a *ConnError, ErrClusterDown) Unlock may be
// called again; if the first one did release the lock, the second says
// ErrLockLost.
func (k *Lock) Unlock(ctx context.Context) error {
	if k.done.Load() {
		return fmt.Errorf("client: unlock %q: %w", k.name, ErrNotHeld)
	}
	err := k.c.redis(ctx, k.name, k.e, func(e *endpoint, r resp.Reply) error {
		lr, err := parseLockReply(e, "UNLOCK", k.name, r)
		if err != nil {
			return err
		}
		switch lr.result {
		case slock.ResultOK:
			return nil
		case slock.ResultUnlockError, slock.ResultUnownError, slock.ResultUnknownDB:
			return &Error{Addr: e.addr, Op: "UNLOCK", Key: k.name, Reply: lr.name, kind: ErrLockLost}
		}
		return lr.refusal(e, "UNLOCK", k.name)
	}, "UNLOCK", k.name, "LOCK_ID", k.id)
	if err == nil || errors.Is(err, ErrLockLost) {
		k.done.Store(true)
	}
	return err
}

// SetFenced sets key to n with the lock's fencing token, as
// Values.SetFenced does.
func (k *Lock) SetFenced(ctx context.Context, key string, n int64) error {
	return (&Values{c: k.c}).SetFenced(ctx, key, n, k.token)
}

// locking is one Lock or TryLock call.
type locking struct {
	c       *Client
	name    string
	id      string
	expried string // EXPRIED's argument
	ttl     time.Duration
	holders int

	mu     sync.Mutex
	unsure []*endpoint // servers sent a LOCK whose outcome is unknown
}

func (l *Locks) lock(ctx context.Context, name string, ttl time.Duration, wait bool, opts []LockOption) (*Lock, error) {
	if err := checkLockName("LOCK", name); err != nil {
		return nil, err
	}
	expried, err := lockTTL("LOCK", name, ttl)
	if err != nil {
		return nil, err
	}
	cfg := lockConfig{holders: 1}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.holders < 1 || cfg.holders > 0xffff {
		return nil, fmt.Errorf("client: LOCK %q: MaxHolders(%d), want 1 to 65535: %w", name, cfg.holders, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkLevel(ctx, "LOCK", name); err != nil {
		return nil, err
	}
	a := &locking{c: l.c, name: name, id: newLockID(), expried: expried, ttl: ttl, holders: cfg.holders}
	backoff := 50 * time.Millisecond
	for {
		var k *Lock
		err := l.c.each(ctx, name, protoSlock, func(e *endpoint) error {
			var err error
			k, err = a.on(ctx, e, wait)
			return err
		})
		if err == nil {
			return k, nil
		}
		if wait && errors.Is(err, ErrClusterDown) && ctx.Err() == nil {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
				backoff = min(2*backoff, time.Second)
				continue
			case <-ctx.Done():
				t.Stop()
				err = fmt.Errorf("client: LOCK %q: %w; the cluster was unavailable until then: %w", name, ctx.Err(), err)
			}
		}
		a.giveUp()
		return nil, err
	}
}

// on tries to take the lock on e, then, if wait and it is held, waits for
// it on a connection of its own.
func (a *locking) on(ctx context.Context, e *endpoint, wait bool) (*Lock, error) {
	r, err := e.redis(ctx, a.name, a.args(0)...)
	if err != nil {
		a.sent(e, err)
		return nil, err
	}
	k, err := a.outcome(ctx, e, r)
	if !wait || !errors.Is(err, ErrTimeout) {
		return k, err
	}
	lvl, leveled := ctx.Value(levelKey{}).(Level)
	for {
		round := lockRound
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl) - lockMargin
			if left <= 0 {
				return nil, fmt.Errorf("%w (held at ctx's deadline: %w)", err, context.DeadlineExceeded)
			}
			round = min(round, left)
		}
		ms := (round + time.Millisecond - 1) / time.Millisecond
		req := appendLeveled(nil, lvl, leveled, a.args(uint32(ms)|timeMillis<<16)...)
		lc, terr := e.take(ctx)
		if terr != nil {
			return nil, terr
		}
		cl := &call{leveled: leveled}
		rerr := lc.run(ctx, round, func() (string, error) { return lc.exchangeRESP(req, cl) })
		if rerr != nil {
			e.discard(lc) // closing it does not end the wait on the server: giveUp cancels it
			a.sent(e, rerr)
			var ce *ConnError
			if lc.reused && errors.As(rerr, &ce) && !timedOut(rerr) {
				continue // an idle connection the server had closed: try a new one
			}
			if errors.Is(rerr, context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w (held at ctx's deadline: %w)", err, rerr)
			}
			return nil, rerr
		}
		e.put(lc)
		if cl.reply.Kind == '-' {
			rerr := redisError(e, "LOCK", a.name, cl.reply)
			a.sent(e, rerr)
			return nil, rerr
		}
		if k, err = a.outcome(ctx, e, cl.reply); !errors.Is(err, ErrTimeout) {
			return k, err
		}
	}
}

// args is the LOCK command with the wait timeout (TIMEOUT's argument).
func (a *locking) args(timeout uint32) []string {
	args := []string{"LOCK", a.name, "LOCK_ID", a.id, "TIMEOUT", strconv.FormatUint(uint64(timeout), 10), "EXPRIED", a.expried}
	if a.holders > 1 {
		args = append(args, "COUNT", strconv.Itoa(a.holders))
	}
	return args
}

// outcome reads a LOCK reply from e: the Lock, or why not. ErrTimeout: it
// is held by others.
func (a *locking) outcome(ctx context.Context, e *endpoint, r resp.Reply) (*Lock, error) {
	lr, err := parseLockReply(e, "LOCK", a.name, r)
	if err != nil {
		return nil, err
	}
	switch lr.result {
	case slock.ResultOK:
		return a.granted(e, lr.token), nil
	case slock.ResultLockedError:
		// This LockId holds it already: an earlier LOCK of this call was
		// granted, and its reply was lost (a CLUSTERDOWN, a broken
		// connection). The grant's token is the holder's.
		token, held, err := a.c.lockToken(ctx, e, a.name, a.id)
		switch {
		case err != nil:
			a.sent(e, err)
			return nil, err
		case !held: // expired since: ask again
			return nil, &Error{Addr: e.addr, Op: "LOCK", Key: a.name, Reply: lr.name, kind: ErrTimeout}
		}
		return a.granted(e, token), nil
	case slock.ResultTimeout:
		return nil, &Error{Addr: e.addr, Op: "LOCK", Key: a.name, Reply: lr.name, kind: ErrTimeout}
	}
	return nil, lr.refusal(e, "LOCK", a.name)
}

func (a *locking) granted(e *endpoint, token uint64) *Lock {
	return &Lock{c: a.c, e: e, name: a.name, id: a.id, token: token, holders: a.holders}
}

// sent notes that a LOCK sent to e failed with err, which may leave it
// granted or queued there: a broken connection, ctx's end, CLUSTERDOWN.
func (a *locking) sent(e *endpoint, err error) {
	var re *Error
	if errors.As(err, &re) && !errors.Is(err, ErrClusterDown) {
		return // the server refused it
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.unsure {
		if u == e {
			return
		}
	}
	a.unsure = append(a.unsure, e)
}

// giveUp, when the call fails, cancels in the background whatever its
// LOCKs of unknown outcome may have left queued or granted: `UNLOCK name
// LOCK_ID id FLAG 2` cancels the LockId's wait, or releases its hold. It is
// sent to each such server (in a cluster, to the next member if that one
// is down), and again on CLUSTERDOWN or a broken connection, for up to ttl
// (the lock expires by then).
func (a *locking) giveUp() {
	a.mu.Lock()
	unsure := a.unsure
	a.mu.Unlock()
	c := a.c
	for _, e := range unsure {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			end := time.Now().Add(a.ttl)
			pause := 100 * time.Millisecond
			for try := 0; try < 8; try++ {
				ctx, cancel := context.WithTimeout(c.ctx, c.opts.IOTimeout)
				err := c.redis(ctx, a.name, e, func(*endpoint, resp.Reply) error { return nil },
					"UNLOCK", a.name, "LOCK_ID", a.id, "FLAG", strconv.Itoa(unlockFlagCancel))
				cancel()
				var ce *ConnError
				if err == nil || !errors.Is(err, ErrClusterDown) && !errors.As(err, &ce) && !errors.Is(err, ErrUnavailable) ||
					c.closed.Load() || time.Now().Add(pause).After(end) {
					return
				}
				select {
				case <-c.ctx.Done():
					return
				case <-time.After(pause):
				}
				pause *= 2
			}
		}()
	}
}

// lockToken asks e for the token of name's holder with LockId id.
func (c *Client) lockToken(ctx context.Context, e *endpoint, name, id string) (token uint64, held bool, err error) {
	r, err := e.redis(ctx, name, "TOKEN", name, "LOCK_ID", id)
	if errors.Is(err, ErrUnknownCommand) {
		return 0, true, nil // a server without fencing tokens
	}
	if err != nil {
		return 0, false, err
	}
	return tokenReply(e, name, r)
}

// tokenReply reads TOKEN's reply: an integer, or nil when nobody holds it.
func tokenReply(e *endpoint, name string, r resp.Reply) (uint64, bool, error) {
	switch {
	case r.Null:
		return 0, false, nil
	case r.Kind == ':' && r.Int >= 0:
		return uint64(r.Int), true, nil
	}
	return 0, false, unexpected(e, "TOKEN", name, r)
}

// lockReply is a text LOCK or UNLOCK reply: [result, its name, "LOCK_ID",
// id, "LCOUNT", n, "COUNT", n, "LRCOUNT", n, "RCOUNT", n, ...], with
// "TOKEN", t on a grant (and "DATA", value when the key has one).
type lockReply struct {
	result slock.Result
	name   string
	token  uint64
}

func parseLockReply(e *endpoint, op, key string, r resp.Reply) (lockReply, error) {
	var lr lockReply
	if r.Kind != '*' || len(r.Elems) < 2 || len(r.Elems)%2 != 0 {
		return lr, unexpected(e, op, key, r)
	}
	code, ok := replyInt(r.Elems[0])
	if !ok || code < 0 || code > 0xff {
		return lr, fmt.Errorf("client: %s %q at %s: result %q is no slock result", op, key, e.addr, clip(r.Elems[0].Str))
	}
	lr.result, lr.name = slock.Result(code), string(r.Elems[1].Str)
	for i := 2; i+1 < len(r.Elems); i += 2 {
		if string(r.Elems[i].Str) != "TOKEN" {
			continue
		}
		t, ok := replyInt(r.Elems[i+1])
		if !ok || t < 0 {
			return lr, fmt.Errorf("client: %s %q at %s: TOKEN %q is no token", op, key, e.addr, clip(r.Elems[i+1].Str))
		}
		lr.token = uint64(t)
	}
	return lr, nil
}

// refusal is the *Error of a result the caller has no better word for.
func (lr *lockReply) refusal(e *endpoint, op, key string) *Error {
	var kind error
	if lr.result == slock.ResultStateError {
		kind = ErrClusterDown
	}
	return &Error{Addr: e.addr, Op: op, Key: key, Reply: lr.name, kind: kind}
}

// replyInt reads an integer reply, or a bulk string of digits (slock's
// text replies send their numbers as bulk strings).
func replyInt(r resp.Reply) (int64, bool) {
	switch r.Kind {
	case ':':
		return r.Int, true
	case '$':
		return resp.ParseInt(r.Str)
	}
	return 0, false
}

// exchangeRESP writes req and reads its reply into cl (three replies if
// cl.leveled), as a pipelined connection's reader would.
func (lc *lineConn) exchangeRESP(req []byte, cl *call) (op string, err error) {
	if _, err := lc.nc.Write(req); err != nil {
		return "write", err
	}
	for {
		buf, _ := lc.br.Peek(lc.br.Buffered())
		n, err := parseRESP(buf, cl)
		switch {
		case err != nil:
			return "read", err
		case n > 0:
			_, _ = lc.br.Discard(n)
			if lc.br.Buffered() > 0 {
				return "read", fmt.Errorf("%d bytes nobody asked for", lc.br.Buffered())
			}
			return "", nil
		case lc.br.Buffered() == lc.br.Size():
			return "read", fmt.Errorf("reply longer than %d bytes", lc.br.Size())
		}
		if _, err := lc.br.Peek(lc.br.Buffered() + 1); err != nil {
			return "read", err
		}
	}
}

// newLockID returns a random LockId as 32 hex digits (which slock's text
// protocol decodes to its 16 bytes).
func newLockID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

func checkLockName(op, name string) error {
	if name == "" {
		return fmt.Errorf("client: %s: empty name: %w", op, ErrInvalid)
	}
	return nil
}

// lockTTL is EXPRIED's argument for ttl: whole seconds, or milliseconds,
// or seconds rounded up, or minutes rounded up, with the unit's flag in
// the high 16 bits (the first that fits, in this order).
func lockTTL(op, name string, ttl time.Duration) (string, error) {
	v, ok := uint64(0), true
	switch {
	case ttl <= 0:
		ok = false
	case ttl%time.Second == 0 && ttl/time.Second <= 0xffff:
		v = uint64(ttl / time.Second)
	case ttl <= 0xffff*time.Millisecond:
		v = uint64((ttl+time.Millisecond-1)/time.Millisecond) | timeMillis<<16
	case ttl <= 0xffff*time.Second:
		v = uint64((ttl + time.Second - 1) / time.Second)
	case ttl <= 0xffff*time.Minute:
		v = uint64((ttl+time.Minute-1)/time.Minute) | timeMinutes<<16
	default:
		ok = false
	}
	if !ok {
		return "", fmt.Errorf("client: %s %q: ttl %v, want more than 0 and at most 65535 minutes: %w", op, name, ttl, ErrInvalid)
	}
	return strconv.FormatUint(v, 10), nil
}
