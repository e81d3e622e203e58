//go:build race

package loop

// raceEnabled: the package's tests run under the race detector, which makes every memory
// access several times slower and keeps shadow memory for every heap page the process ever
// used; the tests that make hundreds of thousands of keys make fewer then (issue 31, item 6).
const raceEnabled = true
