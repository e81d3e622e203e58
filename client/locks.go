package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
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
// failover (its holder learns it at Refresh or Unlock, ErrLockLost, or
// when its connection closes: its Lost channel closes then).
//
// Each Lock has a Lost channel, closed when the lock is known lost or can
// no longer be known held (see Lock), and can refresh itself
// (AutoRefresh). Semaphore takes one of n places of a name.
type Locks struct {
	c *Client
}

// Locks returns the slock locks of the Client's servers.
func (c *Client) Locks() *Locks { return &Locks{c: c} }

// LockOption changes what Lock and TryLock ask for.
type LockOption func(*lockConfig)

type lockConfig struct {
	holders int
	auto    bool
	every   time.Duration // auto-refresh period; 0: ttl/3
}

// MaxHolders lets up to n holders share the name at once (slock's COUNT):
// a counting semaphore, as Locks.Semaphore takes. All who share it must ask
// for the same n. The default, 1, is a mutex.
func MaxHolders(n int) LockOption { return func(c *lockConfig) { c.holders = n } }

// AutoRefresh makes the Lock refresh itself for its ttl every `every`
// (ttl/3 if every is 0 or less), in one goroutine of its own, until
// Unlock, until Lost closes or until the Client is closed. A refresh that
// fails without an answer (a broken connection, CLUSTERDOWN) is tried
// again every `every`/4 while the lease lasts; one the server refuses
// (the LockId no longer holds the name) closes Lost at once, and a lease
// that runs out before a refresh is confirmed closes it at its deadline.
// every must be shorter than ttl.
func AutoRefresh(every time.Duration) LockOption {
	return func(c *lockConfig) { c.auto, c.every = true, every }
}

// Lock is a lock (or one place of a semaphore) held on one server. It ends
// with Unlock or when its ttl runs out, which Refresh pushes back. Its
// methods are safe for concurrent use.
//
// Lost returns a channel that closes once the client can no longer be sure
// the lock is held (Err then says why), which is:
//
//   - at its deadline: ttl after the LOCK (or the last Refresh the server
//     confirmed) was sent, less a margin for the clocks' drift (1% of ttl
//     plus 2 ms), if no later Refresh was confirmed by then. The server
//     counts the ttl from when it granted, which is later, so Lost closes
//     before the server can give the lock to another. Refresh pushes the
//     deadline back (see Deadline); AutoRefresh does so on its own.
//   - when a Refresh (or an auto-refresh) is answered that the LockId no
//     longer holds the name: ErrLockLost.
//   - for a lock taken at CONSISTENCY ONE (WithConsistency), when the
//     connection its grant or Refresh came on closes, whoever closed it:
//     a tallyd cluster closes it to tell its holder that a failover may
//     have forgotten the lock.
//   - at Unlock (Err wraps ErrNotHeld, or ErrLockLost if the server no
//     longer had it), and at the Client's Close (ErrClosed).
//
// Once closed, Lost stays closed: Refresh answers Err and sends nothing,
// and the Lock is to be unlocked and taken again. Lost is a best effort
// made on the client's clock: a process paused past its deadline (a GC
// pause, a stopped VM) finds Lost closed only when it runs again, after it
// may already have acted. The protection against that is the fencing token
// (Token): pass it with every write the lock guards, so that the resource
// refuses a holder whose lock has moved on.
type Lock struct {
	c       *Client
	e       *endpoint // the server that granted it
	name    string
	id      string // LockId: 32 hex digits
	token   uint64
	holders int
	ttl     time.Duration // what Lock asked for; auto-refresh asks for it again
	lvl     Level         // the consistency level it was taken at; "" for the server's default
	done    atomic.Bool   // unlocked, or the server said it no longer holds it

	lost chan struct{} // closed once, by lose

	mu       sync.Mutex
	why      error       // why lost closed
	basis    time.Time   // when the grant or refresh that set deadline was sent
	deadline time.Time   // basis + ttl - drift
	timer    *time.Timer // runs lapse at deadline
	unwatch  func()      // stops the watch of the connection of a lock taken at ONE
	unclose  func() bool // stops the watch of Client.Close
	stopAuto func()      // ends auto-refresh
	autoDone chan struct{}
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

// Lost returns a channel that is closed when the lock is known lost, or
// can no longer be known held (see Lock for exactly when).
func (k *Lock) Lost() <-chan struct{} { return k.lost }

// Err returns nil while Lost is open, and then why it closed: an error
// wrapping ErrLockLost (the deadline passed with no refresh confirmed, the
// server said it no longer holds it, or the connection of a lock taken at
// ONE closed), ErrNotHeld (Unlock), or ErrClosed (the Client was closed).
func (k *Lock) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.why
}

// Deadline returns when Lost closes unless a Refresh is confirmed before:
// ttl after the grant's or the last confirmed Refresh's request was sent,
// less the drift margin.
func (k *Lock) Deadline() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadline
}

// drift is what a lease's deadline is brought forward by, for the client's
// and the server's clocks running at different rates: 1% of ttl plus 2 ms
// (as Redlock allows for).
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// start sets the lease of a grant whose request was sent on.at (on.m, if
// not nil, is the connection it came on), and starts watching for its end.
func (k *Lock) start(on sentOn) {
	k.lost = make(chan struct{})
	k.mu.Lock()
	k.basis = on.at
	k.deadline = on.at.Add(k.ttl - drift(k.ttl))
	k.timer = time.AfterFunc(time.Until(k.deadline), k.lapse)
	k.mu.Unlock()
	stop := context.AfterFunc(k.c.ctx, func() { k.lose(fmt.Errorf("client: lock %q: %w", k.name, ErrClosed)) })
	k.mu.Lock()
	if k.why == nil {
		k.unclose, stop = stop, nil
	}
	k.mu.Unlock()
	if stop != nil {
		stop()
	}
	if k.lvl == One && on.m != nil {
		k.watchConn(on.m)
	}
}

// watchConn closes Lost when m, the connection a lock taken at ONE came
// on, breaks.
func (k *Lock) watchConn(m *mux) {
	stop := m.watch(func() {
		k.lose(fmt.Errorf("client: lock %q at %s: %w: the connection it was taken at CONSISTENCY ONE on closed",
			k.name, k.e.addr, ErrLockLost))
	})
	k.mu.Lock()
	if k.why == nil && k.unwatch == nil {
		k.unwatch, stop = stop, nil
	}
	k.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watched reports whether a lock taken at ONE has a connection watched.
func (k *Lock) watched() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unwatch != nil
}

// lapse runs at the deadline: Lost closes unless a refresh moved it.
func (k *Lock) lapse() {
	k.mu.Lock()
	if left := time.Until(k.deadline); k.why == nil && left > 0 {
		k.timer.Reset(left)
		k.mu.Unlock()
		return
	}
	k.mu.Unlock()
	k.lose(k.lapsed())
}

func (k *Lock) lapsed() error {
	return fmt.Errorf("client: lock %q: %w: its ttl ran out with no refresh confirmed", k.name, ErrLockLost)
}

// lose closes Lost for why, once, and stops everything that watches the
// lock.
func (k *Lock) lose(why error) {
	k.mu.Lock()
	if k.why != nil {
		k.mu.Unlock()
		return
	}
	k.why = why
	close(k.lost)
	k.timer.Stop()
	unwatch, unclose, stopAuto := k.unwatch, k.unclose, k.stopAuto
	k.unwatch = nil
	k.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	if unclose != nil {
		unclose()
	}
	if stopAuto != nil {
		stopAuto()
	}
}

// check closes Lost if the deadline has passed (its timer may run late)
// and returns why Lost is closed, or nil.
func (k *Lock) check() error {
	k.mu.Lock()
	why, late := k.why, !time.Now().Before(k.deadline)
	k.mu.Unlock()
	if why == nil && late {
		k.lose(k.lapsed())
		return k.Err()
	}
	return why
}

// renewed moves the deadline for a Refresh for ttl that the server
// confirmed, sent at on.at. A confirmed update proves the lock was held
// without a break (an update never takes a lock anew), so a reply that
// comes after the deadline still counts unless Lost has closed.
func (k *Lock) renewed(on sentOn, ttl time.Duration) error {
	k.mu.Lock()
	if k.why != nil {
		why := k.why
		k.mu.Unlock()
		return why
	}
	if !on.at.Before(k.basis) {
		k.basis = on.at
		k.deadline = on.at.Add(ttl - drift(ttl))
		k.timer.Reset(time.Until(k.deadline))
	}
	watch := k.lvl == One && k.unwatch == nil && on.m != nil
	k.mu.Unlock()
	if watch {
		k.watchConn(on.m)
	}
	return nil
}

// startAuto starts the lock's auto-refresh goroutine.
func (k *Lock) startAuto(every time.Duration) {
	ctx, cancel := context.WithCancel(k.c.ctx)
	if k.lvl != "" {
		ctx = WithConsistency(ctx, k.lvl)
	}
	done := make(chan struct{})
	k.mu.Lock()
	if k.why != nil {
		k.mu.Unlock()
		cancel()
		return
	}
	k.stopAuto, k.autoDone = cancel, done
	k.mu.Unlock()
	k.c.wg.Add(1)
	go func() {
		defer k.c.wg.Done()
		defer close(done)
		k.autoRefresh(ctx, every)
	}()
}

// autoRefresh refreshes the lock every `every` until ctx ends or Lost
// closes; a refresh without an answer is tried again sooner.
func (k *Lock) autoRefresh(ctx context.Context, every time.Duration) {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.lost:
			return
		case <-t.C:
		}
		dl := k.Deadline()
		rctx, cancel := context.WithDeadline(ctx, dl)
		err := k.Refresh(rctx, k.ttl)
		cancel()
		next := every
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !time.Now().Before(dl) {
				k.lose(fmt.Errorf("client: lock %q: %w: no refresh was confirmed before its deadline: %w", k.name, ErrLockLost, err))
			}
			next = max(every/4, time.Millisecond)
		}
		t.Reset(next)
	}
}

// endAuto stops auto-refresh and waits until it has stopped.
func (k *Lock) endAuto() {
	k.mu.Lock()
	stop, done := k.stopAuto, k.autoDone
	k.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

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
//
// The Lock's Lost channel closes when the lock is known lost (see Lock);
// AutoRefresh keeps it refreshed. A lock taken at CONSISTENCY ONE after a
// wait is refreshed once at once, on the pipelined connection that Lost
// then watches.
func (l *Locks) Lock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, true, opts)
}

// TryLock takes the lock name for ttl if it is free: a lock held by
// another is an error wrapping ErrTimeout at once.
func (l *Locks) TryLock(ctx context.Context, name string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, false, opts)
}

// Semaphore takes one of n places of the semaphore name for ttl, waiting
// as Lock does while all n are held: up to n holders hold name at once
// (slock's LOCK ... COUNT n, one key with up to n holders). Each holder
// gets a Lock of its own, with its own LockId, fencing token, Refresh,
// Unlock and Lost. Everyone sharing name must ask for the same n (1 to
// 65535); a semaphore of 1 is a mutex.
func (l *Locks) Semaphore(ctx context.Context, name string, n int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, true, append(slices.Clip(opts), MaxHolders(n)))
}

// TrySemaphore takes one of n places of the semaphore name for ttl if one
// is free: with all n held it is an error wrapping ErrTimeout at once.
func (l *Locks) TrySemaphore(ctx context.Context, name string, n int, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, name, ttl, false, append(slices.Clip(opts), MaxHolders(n)))
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
// with this LockId: LOCK with FLAG 2), and, once the server confirms it,
// moves the deadline to ttl after the request was sent. The error wraps
// ErrLockLost if the lock is no longer held by this LockId (it expired, or
// a failover lost a lock taken at ONE), which closes Lost, and ErrNotHeld
// after Unlock. Once Lost is closed, Refresh sends nothing and returns Err.
// Refresh never takes a lock anew.
func (k *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	expried, err := lockTTL("refresh", k.name, ttl)
	if err != nil {
		return err
	}
	if k.done.Load() {
		return fmt.Errorf("client: refresh %q: %w", k.name, ErrNotHeld)
	}
	if why := k.check(); why != nil {
		return why
	}
	args := []string{"LOCK", k.name, "LOCK_ID", k.id, "FLAG", strconv.Itoa(lockFlagUpdate),
		"TIMEOUT", strconv.Itoa(timeWaitUnlocked << 16), "EXPRIED", expried}
	if k.holders > 1 { // an update replaces the holder's COUNT too
		args = append(args, "COUNT", strconv.Itoa(k.holders))
	}
	gone := false // the server said this LockId does not hold it
	err = k.c.redisVia(ctx, k.name, k.e, func(e *endpoint, on sentOn, r resp.Reply) error {
		lr, err := parseLockReply(e, "LOCK", k.name, r)
		if err != nil {
			return err
		}
		switch lr.result {
		case slock.ResultLockedError: // the holder was updated
			return k.renewed(on, ttl)
		case slock.ResultOK:
			// Granted anew (a server that ignores TimeoutFlag 0x0200): the lock
			// had been lost meanwhile, and this grant is no continuation of it.
			_, _ = e.redis(ctx, k.name, "UNLOCK", k.name, "LOCK_ID", k.id)
			gone = true
			return &Error{Addr: e.addr, Op: "LOCK", Key: k.name, Reply: lr.name, kind: ErrLockLost}
		case slock.ResultTimeout, slock.ResultUnownError:
			gone = true
			return &Error{Addr: e.addr, Op: "LOCK", Key: k.name, Reply: lr.name, kind: ErrLockLost}
		}
		return lr.refusal(e, "LOCK", k.name)
	}, args...)
	if gone {
		k.done.Store(true)
		k.lose(err)
	}
	return err
}

// Unlock stops the lock's auto-refresh, if any, and releases the lock,
// which closes Lost. The error wraps ErrLockLost if the server no longer
// had it under this LockId (it had expired: another client may have held
// it meanwhile), and ErrNotHeld if it was already unlocked or a Refresh
// was told it was lost, in which case nothing is sent. A Lock whose Lost
// closed for other reasons is still unlocked on the server (it may hold
// it yet). After an error that leaves the
// outcome unknown (ctx's, a *ConnError, ErrClusterDown) Unlock may be
// called again; if the first one did release the lock, the second says
// ErrLockLost.
func (k *Lock) Unlock(ctx context.Context) error {
	k.endAuto()
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
	switch {
	case err == nil:
		k.done.Store(true)
		k.lose(fmt.Errorf("client: lock %q: %w: unlocked", k.name, ErrNotHeld))
	case errors.Is(err, ErrLockLost):
		k.done.Store(true)
		k.lose(err)
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
	lvl     Level     // ctx's consistency level, "" for none
	start   time.Time // when the call began

	mu       sync.Mutex
	unsure   []*endpoint // servers sent a LOCK whose outcome is unknown
	unsureAt time.Time   // when the first of those LOCKs was sent
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
		return nil, fmt.Errorf("client: LOCK %q: %d holders (MaxHolders, Semaphore's n), want 1 to 65535: %w", name, cfg.holders, ErrInvalid)
	}
	if cfg.auto && cfg.every <= 0 {
		cfg.every = ttl / 3
	}
	if cfg.auto && (cfg.every <= 0 || cfg.every >= ttl) {
		return nil, fmt.Errorf("client: LOCK %q: AutoRefresh(%v) with ttl %v, want a period shorter than the ttl: %w", name, cfg.every, ttl, ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkLevel(ctx, "LOCK", name); err != nil {
		return nil, err
	}
	lvl, _ := ctx.Value(levelKey{}).(Level)
	a := &locking{c: l.c, name: name, id: newLockID(), expried: expried, ttl: ttl, holders: cfg.holders, lvl: lvl, start: time.Now()}
	backoff := 50 * time.Millisecond
	for {
		var k *Lock
		err := l.c.each(ctx, name, protoSlock, func(e *endpoint) error {
			var err error
			k, err = a.on(ctx, e, wait)
			return err
		})
		if err == nil {
			if lvl == One && !k.watched() {
				// Granted on a connection Lost cannot watch: a refresh ties it to
				// the pipelined one.
				if err := k.Refresh(ctx, ttl); err != nil {
					k.lose(err)
					a.sent(k.e, err, time.Time{})
					a.giveUp()
					return nil, err
				}
			}
			if cfg.auto {
				k.startAuto(cfg.every)
			}
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
	r, on, err := e.redisOn(ctx, a.name, a.args(0)...)
	if err != nil {
		a.sent(e, err, on.at)
		return nil, err
	}
	k, err := a.outcome(ctx, e, r, on)
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
		at := time.Now()
		rerr := lc.run(ctx, round, func() (string, error) { return lc.exchangeRESP(req, cl) })
		if rerr != nil {
			e.discard(lc) // closing it does not end the wait on the server: giveUp cancels it
			a.sent(e, rerr, at)
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
			a.sent(e, rerr, at)
			return nil, rerr
		}
		if k, err = a.outcome(ctx, e, cl.reply, sentOn{at: at}); !errors.Is(err, ErrTimeout) {
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

// outcome reads a LOCK reply from e, sent on on: the Lock, or why not.
// ErrTimeout: it is held by others.
func (a *locking) outcome(ctx context.Context, e *endpoint, r resp.Reply, on sentOn) (*Lock, error) {
	lr, err := parseLockReply(e, "LOCK", a.name, r)
	if err != nil {
		return nil, err
	}
	switch lr.result {
	case slock.ResultOK:
		return a.granted(e, lr.token, on), nil
	case slock.ResultLockedError:
		// This LockId holds it already: an earlier LOCK of this call was
		// granted, and its reply was lost (a CLUSTERDOWN, a broken
		// connection). The grant's token is the holder's.
		token, held, err := a.c.lockToken(ctx, e, a.name, a.id)
		switch {
		case err != nil:
			a.sent(e, err, time.Time{})
			return nil, err
		case !held: // expired since: ask again
			return nil, &Error{Addr: e.addr, Op: "LOCK", Key: a.name, Reply: lr.name, kind: ErrTimeout}
		}
		// The lease began with one of the LOCKs whose reply was lost: count
		// it from the first of them.
		a.mu.Lock()
		at := a.unsureAt
		a.mu.Unlock()
		if at.IsZero() {
			at = a.start
		}
		return a.granted(e, token, sentOn{at: at}), nil
	case slock.ResultTimeout:
		return nil, &Error{Addr: e.addr, Op: "LOCK", Key: a.name, Reply: lr.name, kind: ErrTimeout}
	}
	return nil, lr.refusal(e, "LOCK", a.name)
}

func (a *locking) granted(e *endpoint, token uint64, on sentOn) *Lock {
	k := &Lock{c: a.c, e: e, name: a.name, id: a.id, token: token, holders: a.holders, ttl: a.ttl, lvl: a.lvl}
	k.start(on)
	return k
}

// sent notes that a LOCK sent to e at `at` (zero: unknown) failed with
// err, which may leave it granted or queued there: a broken connection,
// ctx's end, CLUSTERDOWN.
func (a *locking) sent(e *endpoint, err error, at time.Time) {
	var re *Error
	if errors.As(err, &re) && !errors.Is(err, ErrClusterDown) {
		return // the server refused it
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !at.IsZero() && (a.unsureAt.IsZero() || at.Before(a.unsureAt)) {
		a.unsureAt = at
	}
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
