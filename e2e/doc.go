// Package e2e holds tallyd's end-to-end tests: they build the binary, run it as a process
// and talk to it over TCP, as clients and deployment scripts do.
package e2e
