package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

// TestValueExpiries: the keys with a value that expire, and their mean TTL, exactly when
// every key is looked at and scaled from those looked at when a limit cuts the walk short.
func TestValueExpiries(t *testing.T) {
	l := store.NewLocks(store.LocksConfig{})
	if n, avg := l.ValueExpiries(2, 0, 0); n != 0 || avg != 0 {
		t.Fatalf("db without keys: %d expiring, avg %d", n, avg)
	}
	const now = int64(1_000_000) * 1e6 // Unix ns
	for i := range 100 {
		setKey(l, 2, i, true) // never expires
	}
	for i := 100; i < 200; i++ { // expire in 1..100 s
		c := wc{LockCommand: store.LockCommand{Kind: 1, DB: 2, LockID: vkey(i), Key: vkey(i),
			ExpireAt: now/1e6 + int64(i-99)*1000, Data: rec(0, 0, u32(uint32(i)))}, Flag: 0x02 | 0x20, Expried: uint16(i - 99), ExpriedFlag: 0x0100 | 0x2000}.cmd()
		l.Do(1, &c, now, nil, nil)
	}
	if l.ValueCount(2) != 200 {
		t.Fatalf("ValueCount %d, want 200", l.ValueCount(2))
	}
	n, avg := l.ValueExpiries(2, now, 0)
	if n != 100 || avg != 50_500 {
		t.Fatalf("ValueExpiries: %d expiring, avg %d ms; want 100, 50500", n, avg)
	}
	// The last 50 slots are expiring keys: scaled to the table, all 200 look expiring.
	if n, _ := l.ValueExpiries(2, now, 50); n != 200 {
		t.Fatalf("ValueExpiries limited to 50: %d expiring, want 200 (50 of 50, scaled to 200)", n)
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}
