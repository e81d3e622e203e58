package loop

import (
	"os"
	"runtime/debug"
	"testing"
)

// testMemoryLimit is the Go memory limit of the package's test process (issue 31, item 6).
// make test runs the package in one process under the race detector, and some tests make
// hundreds of thousands of keys (TestFlushAllFreesAcrossTurns, TestKeysAcrossTurns): with
// GOGC alone the heap may grow to twice its last live size, and the whole package's process
// passed 3.6 GB on a loaded 2-core machine. Measured under -race with those two and
// TestLoopStallFigures: peak RSS 1.91 GB without a limit, 1.42 GB with this one, in the same
// time. GOMEMLIMIT, when set, wins.
const testMemoryLimit = 400 << 20

func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(testMemoryLimit)
	}
	os.Exit(m.Run())
}
