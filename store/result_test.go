package store_test

import (
	"testing"

	"github.com/tallyd/tallyd/store"
)

func TestResultString(t *testing.T) {
	for r, want := range map[store.Result]string{
		store.OK:           "OK",
		store.NotFound:     "NotFound",
		store.NotAvailable: "NotAvailable",
		store.NotAcquired:  "NotAcquired",
		store.OutOfMemory:  "OutOfMemory",
		store.Result(200):  "Result(200)",
	} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", uint8(r), got, want)
		}
	}
}
