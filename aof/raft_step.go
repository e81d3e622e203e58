package aof

import "sync/atomic"

// Stepping the raft log's writer, for tests that drive several cluster members on one
// goroutine and must be deterministic (loop's in-process cluster simulation). Left alone, the
// writer wakes whenever the loop queues something, so how the loop's calls are cut into
// batches (and how many progress reports the loop gets) depends on the scheduler. A stepped
// log's writer writes only when Step asks, everything queued so far as one batch, and Step
// returns once the writer has reported it: the same calls always make the same batches.
// Production code never steps a log.

// raftStepper is a stepped log's side of the writer.
type raftStepper struct {
	on   atomic.Bool   // Step wakes the writer, not the calls that queue
	done chan struct{} // the writer reported a batch Step asked for
}

// Stepped makes the writer write only when Step asks. Call it before anything is queued
// (right after OpenRaft), on the goroutine that queues.
func (l *RaftLog) Stepped() {
	st := &raftStepper{done: make(chan struct{})}
	st.on.Store(true)
	report := l.done
	// The writer reads l.done only once woken, and only Step wakes it from now on.
	l.done = func(p RaftProgress) {
		report(p)
		if st.on.Load() {
			st.done <- struct{}{}
		}
	}
	l.step = st
}

// Step has the writer write everything queued as one batch and waits until it has
// reported it (its done function returned). It returns false, at once, when nothing is
// queued. Only for a Stepped log, from the goroutine that queues.
func (l *RaftLog) Step() bool {
	l.mu.Lock()
	n := len(l.ops)
	l.mu.Unlock()
	if n == 0 {
		return false
	}
	l.wake <- struct{}{}
	<-l.step.done
	return true
}

// Unstepped gives the writer back its own wake-ups (before Close, which needs them).
func (l *RaftLog) Unstepped() {
	if l.step != nil {
		l.step.on.Store(false)
	}
}
