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
// LockReplies, in the order the caller must send them. Waits
// time out through one deadline heap (deadlines.go) that the caller drives
// with Expire from its ticks.
package store
