package store

// Family is what yrmcds Counters and Semaphores share: named objects that
// ledgers take amounts of and give back. The third number of Acquire is the
// counter's maximum or the semaphore's initial value.
type Family interface {
	Get(name []byte) (uint32, bool)
	Acquire(l *Ledger, name []byte, r, limit uint32, now int64) Result
	Release(l *Ledger, name []byte, r uint32, now int64) Result
	Drop(l *Ledger, now int64)
	Info() Info
}

var (
	_ Family = (*Counters)(nil)
	_ Family = (*Semaphores)(nil)
)
