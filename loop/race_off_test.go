//go:build !race

package loop

import "testing"

// raceEnabled: see race_on_test.go.
const raceEnabled = false

// skipHeavyUnderRace: see race_on_test.go; without the detector every test runs.
func skipHeavyUnderRace(*testing.T) {}
