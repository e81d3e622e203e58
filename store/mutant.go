package store

// Mutant names a bug planted on purpose, to prove that the loop's explorer finds it
// (loop/explore_mutant_test.go): set only by tests, "" in every real run. Each name is
// checked at one point of the code, which says what the bug would be.
var Mutant string
