//go:build !race

package loop

// raceEnabled: see race_on_test.go.
const raceEnabled = false
