// Package locks holds runnable examples of the Go client's lock API
// (client.Locks): a lock and a fenced write, TryLock, auto-refresh with
// Lost, and a semaphore. It has no code of its own: read its examples
// (go doc -all ./client/examples/locks, or pkg.go.dev); `go test
// ./client/examples/locks` runs them against a tallyd started in the test
// process.
package locks
