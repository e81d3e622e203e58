//go:build race

package sim

// raceEnabled: the tests run under the race detector, which makes a simulated run some ten
// times slower; the simulation runs on one goroutine, so fewer random seeds find as much.
const raceEnabled = true
