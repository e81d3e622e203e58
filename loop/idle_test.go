package loop

import (
	"testing"
	"time"

	"github.com/tallyd/tallyd/proto/slock"
)

// --idle-timeout on the slock binary side: a connection whose lock outlives it anyway is
// closed (the lock stays), one waiting for a lock or holding a keep-alive lock (0x8000),
// which its close would end, is kept; a connection that never sends anything is closed.
func TestIdleTimeoutSlockBinary(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := startSlock(t, func(c *Config) { c.IdleTimeout = timeout })
	a := dialSlock(t, ts.slockAddr)
	la := newLock(a, key16("k"), 0, 60)
	la.Lock().want(slock.ResultOK)
	b := dialSlock(t, ts.slockAddr)
	wb := newLock(b, key16("k"), 60, 60).Lock()
	kc := dialSlock(t, ts.slockAddr)
	newLock(kc, key16("keep"), 0, 60|tfKeep).Lock().want(slock.ResultOK)
	silent := dial(t, ts.counterAddr)
	start := time.Now()

	a.expectClosed()
	silent.expectClosed()
	if d := time.Since(start); d < timeout-50*time.Millisecond {
		t.Fatalf("idle connections closed after %s, before the timeout %s", d, timeout)
	}
	wb.none(3 * timeout) // b waits on, well past its own timeout

	// k outlived a's connection; unlocked with a's LockId, it goes to b.
	u := dialSlock(t, ts.slockAddr)
	(&sLock{c: u, key: la.key, id: la.id, expried: 60}).Unlock().want(slock.ResultOK)
	wb.want(slock.ResultOK)
	kc.ping()
	if r := newLock(u, key16("keep"), 0, 60).Lock().reply(); r.Result == slock.ResultOK {
		t.Fatal("the keep-alive lock of the kept connection was released")
	}
	ts.healthy(t)
}
