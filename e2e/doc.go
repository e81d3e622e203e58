// Package e2e holds tallyd's end-to-end tests: they build the binary, run it as a process
// and talk to it over TCP, as clients and deployment scripts do.
//
// The cluster tests (cluster*_test.go) run three tallyd nodes: as root with iproute2, each
// in its own network namespace (a peer and a client veth on two bridges; a partition takes
// the peer link down); elsewhere on 127.0.0.1 behind fault-injecting proxies.
// TALLYD_CLUSTER_NET=netns|proxy chooses. They skip while tallyd has no --cluster. When one
// fails, every node's whole log, with its goroutines, is kept in a tallyd-cluster-logs-*
// directory, and a history that is not linearizable in a tallyd-linearizability-*.html
// (porcupine's visualization), both in the temporary directory; the test names them.
package e2e
