// Package store keeps the state of tallyd's resource families, owned by the server's single event loop.
//
// Every family — yrmcds Counters and Semaphores, PoolCounter Pools, slock Locks — is a plain
// data structure: no locks, no goroutines, no I/O and no clock. Each operation
// takes the caller's per-connection handle (a Ledger, a PoolClient, or for
// Locks the connection's Owner id) and,
// where time matters, now as Unix time in nanoseconds, so tests drive it with
// a fake clock. Results are returned as values; nothing calls back into the
// caller. Replies owed to other connections (a PoolCounter hand-over, DONE or
// TIMEOUT; an slock grant, timeout or expiry push) come back as Wakes or
// LockReplies, in the order the caller must send them.
//
// A Store (store.go) holds every family on one clock: waits, holds,
// persistence and collections are scheduled in one deadline heap
// (deadlines.go); the caller asks it when the next is due (NextDeadline) and
// hands it the time (Advance), which returns, in deadline order, everything
// that fell due. A family used alone drives its own deadlines (Expire).
package store
