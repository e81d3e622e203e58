package main

import (
	"os"
	"runtime"
)

// minProcs is the fewest Ps tallyd runs with, unless GOMAXPROCS says otherwise.
const minProcs = 2

// procsFloor raises GOMAXPROCS to minProcs when the runtime chose fewer (tallyd pinned to
// one CPU, as make bench does, or a cgroup limit of one CPU) and the environment does not
// set it. With one P, the event loop's every wait in epoll_wait gives its P up: sysmon
// retakes a P in a system call at its next tick unless another P is idle, and hands it to a
// new spinning thread, so the loop's thread, when epoll_wait returns, finds the P taken and
// waits for it, or the loop moves to the other thread. Under the PoolCounter stampede (issue
// 25) that was twice the context switches and a longer tail between a RELEASE and the next
// LOCKED. With a second, idle P, a P in a system call is left alone for 10 ms. It returns
// the GOMAXPROCS it set, or 0 if it left it as it was.
func procsFloor() int {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) >= minProcs {
		return 0
	}
	runtime.GOMAXPROCS(minProcs)
	return minProcs
}
