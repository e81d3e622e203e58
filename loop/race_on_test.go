//go:build race

package loop

import (
	"os"
	"testing"
)

// raceEnabled: the package's tests run under the race detector, which makes every memory
// access several times slower and keeps shadow memory for every heap page the process ever
// used; the tests that make hundreds of thousands of keys make fewer then (issue 31, item 6).
const raceEnabled = true

// heavyTests are the package's tests whose process under the race detector would pass 2 GiB
// (the detector keeps shadow memory for every heap page the process ever used): huge
// replies and whole raft snapshots of many keys. make test runs them without the detector
// (make plain's heavy pass, HEAVY_LOOP_TESTS in the Makefile, which names the same tests);
// under it they skip, unless TALLYD_HEAVY_UNDER_RACE is set.
func skipHeavyUnderRace(t *testing.T) {
	t.Helper()
	if os.Getenv("TALLYD_HEAVY_UNDER_RACE") == "" {
		t.Skip("memory-heavy under the race detector: make test runs it without (HEAVY_LOOP_TESTS); TALLYD_HEAVY_UNDER_RACE=1 runs it here")
	}
}
