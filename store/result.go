package store

import "strconv"

// Result is the outcome of a store operation.
type Result uint8

// Results shared by the families. A failed operation never changes any state.
const (
	OK           Result = iota
	NotFound            // the named object does not exist
	NotAvailable        // not enough of the resource is left
	NotAcquired         // the caller's ledger does not hold that much of it
	OutOfMemory         // creating the object would exceed the object limit
)

var resultNames = [...]string{
	OK:           "OK",
	NotFound:     "NotFound",
	NotAvailable: "NotAvailable",
	NotAcquired:  "NotAcquired",
	OutOfMemory:  "OutOfMemory",
}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}
