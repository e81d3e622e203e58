// Package store keeps the state of tallyd's resource families, owned by the server's single event loop.
//
// Every family (yrmcds Counters and Semaphores for now) is a plain data
// structure: no locks, no goroutines, no I/O and no clock. Each operation takes
// the caller's Ledger (what one connection holds in that family) and, where
// time matters, now as Unix time in nanoseconds, so tests drive it with a fake
// clock. Results are returned as values; nothing calls back into the caller.
package store
