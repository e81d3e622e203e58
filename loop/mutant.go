package loop

// mutant names a bug planted on purpose, to prove that the explorer (explore_test.go) finds
// it: set only by tests (explore_mutant_test.go), "" in every real run. Each name is
// checked at one point of the code, which says what the bug would be.
var mutant string
